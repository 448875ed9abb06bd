"""valid_layouts: one vectorised rule table for predict, plan and serve (hand cases and a property:
a layout it accepts is predicted without a layout error, one it rejects fails with its reason)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

from simcore.errors import SpecError
from simcore.prediction import layout_of, predict
from simcore.specs.resolve import cluster_for, scenario_from_dict
from simcore.specs.scenario import ModelSpec, MoESpec
from simcore.workload.layout import RULES, Layout, valid_layouts

DENSE = ModelSpec(layers=6, hidden=256, heads=8, ffn_hidden=512, vocab=1024, seq_len=256)
MOE = DENSE.model_copy(update={"layers": 4, "moe": MoESpec(experts=6, top_k=2, expert_ffn_hidden=256)})


def _train(m: ModelSpec, gpus: int, **layout: int) -> dict[str, Any]:
    full = {
        "tp": 1,
        "pp": 1,
        "cp": 1,
        "dp": gpus,
        "ep": 1,
        "vp": 1,
        "micro_batch": 1,
        "global_batch": 8 * gpus,
    }
    return {**full, **layout}


@pytest.mark.parametrize(
    ("model", "gpus", "layout", "field", "reason"),
    [
        (
            DENSE,
            8,
            {"tp": 4, "pp": 2, "cp": 2, "dp": 1},
            "parallel",
            "tp*pp*cp (16) exceeds the cluster's 8 GPUs",
        ),
        (
            DENSE,
            8,
            {"tp": 2, "dp": 3},
            "parallel",
            "tp*pp*cp*dp = 2*1*1*3 = 6 does not match the cluster's 8 GPUs",
        ),
        (MOE, 8, {"ep": 3}, "parallel.ep", "ep*etp (3*1) must divide tp*cp*dp (8)"),
        (DENSE, 8, {"ep": 2}, "parallel.ep", "ep (2) needs an MoE model (model.moe)"),
        (MOE, 8, {"ep": 4}, "parallel.ep", "model.moe.experts (6) is not divisible by ep (4)"),
        (DENSE, 6, {"tp": 3, "dp": 2}, "parallel.tp", "model.heads (8) is not divisible by tp (3)"),
        (
            DENSE,
            8,
            {"pp": 2, "vp": 4, "dp": 4},
            "parallel.vp",
            "model.layers (6) is fewer than pp*vp model chunks (8)",
        ),
        (DENSE, 8, {"pp": 8, "dp": 1}, "parallel.pp", "model.layers (6) is fewer than pipeline stages (8)"),
        (
            DENSE,
            8,
            {"micro_batch": 3, "global_batch": 16},
            "training.global_batch",
            "global_batch (16) is not a multiple of micro_batch*dp (3*8)",
        ),
    ],
)
def test_each_rule_gives_its_message(
    model: ModelSpec, gpus: int, layout: dict[str, int], field: str, reason: str
) -> None:
    check = valid_layouts(model, gpus, **_train(model, gpus, **layout))
    assert not bool(check.ok)
    assert (check.reason(), check.field()) == (reason, field)
    with pytest.raises(SpecError) as e:
        check.require()
    assert str(e.value) == f"{field}: {reason}"


def test_the_first_broken_rule_is_the_reason() -> None:
    # too many stages and a batch that does not divide: the stages are reported
    check = valid_layouts(DENSE, 8, **_train(DENSE, 8, pp=8, dp=1, micro_batch=3, global_batch=16))
    assert check.reason() == "model.layers (6) is fewer than pipeline stages (8)"


def test_valid_layouts_and_partial_layouts() -> None:
    check = valid_layouts(DENSE, 8, **_train(DENSE, 8, tp=2, pp=2, dp=2))
    assert bool(check.ok) and check.reason() == "" and check.field() == ""
    check.require()  # no error
    # inference gives tp and pp only: its first rule names tp*pp, the batch rules do not apply
    inf = valid_layouts(DENSE, 4, tp=4, pp=2)
    assert inf.reason() == "tp*pp (8) exceeds the cluster's 4 GPUs"
    # serving checks one pool's tp without the cluster, naming its own field
    with pytest.raises(
        SpecError, match=r"^serving.disaggregated.decode_tp: model.heads \(8\) is not divisible"
    ):
        valid_layouts(DENSE, tp=3).require(field="serving.disaggregated.decode_tp")
    assert bool(valid_layouts(DENSE).ok)  # nothing given, nothing to break


def test_vectorised_over_a_table() -> None:
    tp = np.array([1, 2, 3, 4, 8, 16])
    check = valid_layouts(DENSE, 16, tp=tp, pp=1, cp=1, dp=16 // tp)
    assert check.ok.tolist() == [True, True, False, True, True, False]
    reasons = check.reasons()
    assert reasons.shape == tp.shape
    assert reasons[2] == "tp*pp*cp*dp = 3*1*1*5 = 15 does not match the cluster's 16 GPUs"
    assert reasons[5] == "model.heads (8) is not divisible by tp (16)"
    assert reasons[0] == "" and check.rule[0] == -1
    # broadcasting: tp down axis 0, pp along axis 1
    grid = valid_layouts(DENSE, 16, tp=tp[:, None], pp=np.array([1, 2, 4]), cp=1, dp=1)
    assert grid.ok.shape == (6, 3)
    assert grid.ok[3, 2] and not grid.ok[0, 0]  # 4*4 fills 16 GPUs; 1*1 does not
    with pytest.raises(SpecError, match="tp\\*pp\\*cp\\*dp = 1\\*1\\*1\\*1 = 1"):
        grid.require()
    assert len(RULES) == 12


def test_layout_fields_and_defaults() -> None:
    lay = Layout(micro_batch=2, seq=1024, act_bytes=2.0)
    assert lay.residual_bytes == 2.0 and lay.kv_bytes == 2.0 and lay.vocab_div == 1
    lay = Layout(micro_batch=2, seq=1024, tp=4, residual=4.0, kv_elt=1.0, vocab_parallel=False)
    assert lay.residual_bytes == 4.0 and lay.kv_bytes == 1.0 and lay.vocab_div == 1.0
    hf = Layout(micro_batch=1, seq=8, implementation="huggingface", fused=True)
    assert hf.hf_code and not hf.hf and hf.dense_mask
    assert not Layout(micro_batch=1, seq=1, implementation="huggingface", fused=True, kv_seq=64.0).dense_mask


# --- property: valid_layouts and predict agree


@settings(max_examples=60, deadline=None)
@given(
    moe=st.booleans(),
    tp=st.sampled_from([1, 2, 3, 4]),
    pp=st.sampled_from([1, 2, 3, 5]),
    cp=st.sampled_from([1, 2]),
    fill=st.sampled_from([1, 2]),
    spare=st.sampled_from([0, 0, 0, 1]),
    dp=st.sampled_from([None, None, 1, 2]),
    ep=st.sampled_from([1, 1, 2, 3]),
    vp=st.sampled_from([1, 1, 2, 3]),
    mb=st.sampled_from([1, 2]),
    gb=st.sampled_from([None, 4, 8, 12]),
)
def test_accepted_layouts_predict_without_a_layout_error(
    moe: bool,
    tp: int,
    pp: int,
    cp: int,
    fill: int,
    spare: int,
    dp: int | None,
    ep: int,
    vp: int,
    mb: int,
    gb: int | None,
) -> None:
    """Mostly clusters that tp*pp*cp fills ``fill`` times (``spare``: a GPU left over)."""
    gpus = tp * pp * cp * fill + spare
    assume(gpus <= 8 or gpus % 8 == 0)  # a part of one HGX node, or whole nodes
    model: dict[str, Any] = {
        "layers": 4,
        "hidden": 128,
        "heads": 4,
        "ffn_hidden": 256,
        "vocab": 512,
        "seq_len": 128,
    }
    if moe:
        model["moe"] = {"experts": 6, "top_k": 2, "expert_ffn_hidden": 128}
    parallel: dict[str, Any] = {"tp": tp, "pp": pp, "cp": cp, "ep": ep, "vp": vp}
    if dp is not None:
        parallel["dp"] = dp
    training: dict[str, Any] = {"micro_batch": mb}
    if gb is not None:
        training["global_batch"] = gb
    sc = scenario_from_dict(
        {
            "kind": "training",
            "cluster": {"system": "hgx-h100", "gpus": gpus},
            "model": model,
            "training": training,
            "parallel": parallel,
        }
    )
    d = dp if dp is not None else gpus // (tp * pp * cp)
    v = vp if sc.parallel.schedule == "interleaved" else 1
    g = gb or mb * d * (4 * pp if pp > 1 else 1)
    check = valid_layouts(
        sc.model, gpus, tp=tp, pp=pp, cp=cp, dp=d, ep=ep, vp=v, micro_batch=mb, global_batch=g
    )
    event("accepted" if bool(check.ok) else "rejected")
    if bool(check.ok):
        res = predict(sc)  # the whole prediction runs: no layout error anywhere below
        assert res.step_time_s > 0
    else:
        with pytest.raises(SpecError) as e:
            layout_of(sc, cluster_for("hgx-h100", gpus=gpus))
        assert str(e.value) == f"{check.field()}: {check.reason()}"
