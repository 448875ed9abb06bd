"""Multi-token prediction's memory on the last pipeline rank (simcore.engine.training.mtp_memory), by hand."""

from __future__ import annotations

from typing import Any

import pytest

from simcore.prediction import predict
from simcore.specs.resolve import scenario_from_dict


def _predict(mtp: int, pp: int = 1, **parallel: Any) -> Any:
    return predict(
        scenario_from_dict(
            {
                "kind": "training",
                "cluster": {"system": "hgx-h100", "gpus": pp},
                "model": {
                    "layers": 2 * pp, "hidden": 64, "heads": 4, "ffn_hidden": 128, "vocab": 1000, "seq_len": 16,
                    "activation": "swiglu", "norm": "rmsnorm", "mtp_layers": mtp,
                },
                "training": {
                    "micro_batch": 1, "global_batch": pp, "precision": "bf16",
                    "param_dtype": "bf16", "master_weights": True, "grad_reduce_in_fp32": True,
                },
                "parallel": {"tp": 1, "pp": pp, **parallel},
            }
        )
    )


def test_one_depth_by_hand() -> None:
    h, f, heads, head_dim, T, V = 64, 128, 4, 16, 16, 1000
    # parameters: two norms, the 2h -> h projection, one layer (q, k, v, o; SwiGLU; its two norms)
    params = 2 * h + 2 * h * h + (4 * h * h + 3 * h * f + 2 * h)
    state = params * (2 + 4 + 12)  # bf16 weights, fp32 gradients, fp32 master + Adam moments
    # the layer's saved tensors (bf16 elements): 2 norm inputs + QKV and MLP inputs, Q/K/V, attention
    # output, fp32 softmax statistics (2 elements a head), SwiGLU's two inputs and its product
    layer = (4 * T * h + 3 * T * h + T * heads * head_dim + 2 * T * heads + 3 * T * f) * 2
    saved = layer + 4 * T * h * 2 + T * V * 4  # + the norms' and projection's inputs + its loss's fp32 softmax
    with_mtp, without = _predict(1), _predict(0)
    assert with_mtp.memory_breakdown["mtp"] == pytest.approx(state + saved)
    assert with_mtp.memory_per_gpu_bytes - without.memory_per_gpu_bytes == pytest.approx(state + saved)
    assert "mtp" not in without.memory_breakdown


def test_depths_add_and_pipeline_last_rank_keeps_an_embedding() -> None:
    one, two = _predict(1), _predict(2)
    assert two.memory_breakdown["mtp"] == pytest.approx(2 * one.memory_breakdown["mtp"])
    # with pipeline stages the last rank keeps its own embedding copy for the shifted tokens (untied head)
    piped = _predict(1, pp=2)
    emb_state = 1000 * 64 * (2 + 4 + 12)
    assert piped.memory_breakdown["mtp"] == pytest.approx(one.memory_breakdown["mtp"] + emb_state)
