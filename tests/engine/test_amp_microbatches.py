"""PyTorch AMP (fp32 weights, autocast) over several micro-batches: per-micro-batch weight copies in
flight and the fp32 gradient accumulation."""

from __future__ import annotations

import numpy as np
import pytest

from simcore.engine import training as T
from simcore.specs import cluster_for
from simcore.specs.resolve import load_scenario
from simcore.workload import lowering as L
from simcore.workload.model import param_counts


def _eval(schedule: str, m: int, pp: int = 2, recompute: str = "none") -> T.TrainingEval:
    sc = load_scenario("default")
    assert sc.training is not None
    model = sc.model.model_copy(update={"vocab": 512})  # no logits to speak of: both stages alike
    lay = T.TrainingLayout(
        tp=1, pp=pp, dp=1, micro_batch=1, global_batch=m, schedule=schedule, recompute=recompute
    )
    return T.evaluate(model, sc.training, lay, cluster_for("hgx-h200", gpus=pp), param_dtype="fp32")


def test_gpipe_holds_one_weight_copy_per_micro_batch_in_flight() -> None:
    sc = load_scenario("default")
    pc = param_counts(sc.model)
    a, b = _eval("gpipe", 4), _eval("gpipe", 8)
    # four more micro-batches in flight on the first stage: four more activation sets and four more
    # bf16 copies of the stage's weights (2 bytes per parameter)
    per_mb_acts = (float(b.memory["activations"]) - float(a.memory["activations"])) / 4
    stage_params = float(b.extra["params_per_gpu"]) if "params_per_gpu" in b.extra else None
    assert stage_params is not None and stage_params < pc.total
    extra = float(b.memory_per_gpu_bytes) - float(a.memory_per_gpu_bytes)
    assert extra == pytest.approx(4 * per_mb_acts + 4 * 2.0 * stage_params, rel=0.01)
    assert 4 * 2.0 * stage_params > 0.1 * extra  # the copies are no rounding error
    # full recompute: checkpointed layers save no autocast copies, only the activations grow
    # (enough micro-batches that the forward, not the gradients, sets the peak)
    fa, fb = _eval("gpipe", 32, recompute="full"), _eval("gpipe", 36, recompute="full")
    per_mb_full = (float(fb.memory["activations"]) - float(fa.memory["activations"])) / 4
    grown = float(fb.memory_per_gpu_bytes) - float(fa.memory_per_gpu_bytes)
    assert grown == pytest.approx(4 * per_mb_full, rel=0.01)


def test_gradient_accumulation_adds_fp32_grads_after_the_first_micro_batch() -> None:
    fwd, bwd = L.amp_ops(1e6, 4.0, 0.0)
    assert [op.count for op in bwd] == [4.0, 0.0]  # one micro-batch: no accumulation kernel
    fwd, bwd = L.amp_ops(1e6, 4.0, 0.75)
    add = bwd[1]
    # one full-size add kernel per tensor on 3/4 of the backwards (the fixed cost per kernel counts
    # as often as the kernels run): 12 bytes per accumulated parameter
    assert add.count == 3.0
    assert add.args["nbytes"] * add.count == pytest.approx(12.0 * 1e6 * 0.75)
    # on a reduce-scattered shard (ZeRO-2/3, FSDP) the add covers 1/dp of the gradient
    _, sharded = L.amp_ops(1e6, 4.0, 0.75, shard=0.25)
    assert sharded[1].args["nbytes"] == pytest.approx(add.args["nbytes"] / 4)
    one, many = _eval("1f1b", 1, pp=1), _eval("1f1b", 8, pp=1)
    assert float(many.breakdown["amp_cast"]) / 8 > float(one.breakdown["amp_cast"])
    assert np.isfinite(float(many.step_time_s))


def test_fsdp_amp_holds_gathered_layers_not_a_model_copy() -> None:
    """FSDP's mixed-precision policy gathers bf16 parameters and frees them after each layer, so
    autocast saves no weight copies: the forward peak beyond the states, activations and logits is
    two gathered layers (the current one and the prefetched next), not a bf16 copy of the model."""
    sc = load_scenario("default")
    assert sc.training is not None
    model = sc.model.model_copy(update={"vocab": 512})
    lay = T.TrainingLayout(tp=1, pp=1, dp=2, micro_batch=1, global_batch=2, fsdp=True)
    ev = T.evaluate(model, sc.training, lay, cluster_for("hgx-h200", gpus=2), param_dtype="fp32")
    mem = {k: float(v) for k, v in ev.memory.items()}
    held = mem["total"] - mem["weights"] - mem["optimizer"] - mem["activations"] - mem["logits"]
    layer = param_counts(model).per_dense_layer
    assert held == pytest.approx(2 * layer * 2.0, rel=0.01)
