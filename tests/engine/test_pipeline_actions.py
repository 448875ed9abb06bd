"""torch.distributed.pipelining's host per schedule action (``training.pipeline_action_host``;
``parallel.pipeline_library``; docs/parallelism.md, pipeline host costs)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import simcore
from simcore.specs.profile import load_profile
from simcore.specs.registry import default_registry
from simcore.specs.resolve import load_scenario
from simcore.specs.scenario import CpuOpTime, Scenario

REPO = Path(__file__).resolve().parents[2]
SC = REPO / "tests/data/trace_scenarios/h200x2_pp_gpt350m.yaml"  # GPipe, pp 2, 24 x 1024, the own loop
SLOW = 30e-6  # seconds per CPU op: the host bounds every stage


def _run(library: str, m: int, cal: str | None = None) -> Scenario:
    sc = load_scenario(str(SC), [f"parallel.pipeline_library={library}"])
    tr = sc.training.model_copy(update={"micro_batch": 1, "global_batch": m})
    rt = sc.runtime.model_copy(
        update={"step_sync": False, "cpu_op_time": CpuOpTime(main=SLOW, backward=SLOW)}
    )
    model = sc.model.model_copy(update={"seq_len": 128})
    return sc.model_copy(update={"training": tr, "runtime": rt, "model": model, "calibration": cal})


def _fitted(tmp_path: Path, pp_action: float) -> str:
    data = yaml.safe_load((REPO / "hardware_specs/calibration/h200.yaml").read_text())
    data["host_layer"]["pp_action"] = pp_action
    path = tmp_path / "h200-pp.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_unfitted_costs_nothing_and_the_scenario_says_which_code_ran() -> None:
    assert simcore.predict(_run("torch", 8)).step_time_s == simcore.predict(_run("own", 8)).step_time_s
    sc = load_scenario(str(SC))
    assert sc.parallel.pipeline_library == "own"  # the rig's own loop, as its file says


def test_each_micro_batch_pays_a_forward_and_a_backward_action(tmp_path: Path) -> None:
    """Host-bound GPipe on 2 stages, 8 micro-batches: every stage's micro-batch takes 2 actions more;
    the schedule's (m - 1) + p stage slots each carry them (by hand: 9 x 2 actions)."""
    cal = _fitted(tmp_path, 1e-3)
    torch_lib = simcore.predict(_run("torch", 8, cal)).step_time_s
    own = simcore.predict(_run("own", 8, cal)).step_time_s
    action = load_profile(default_registry().device("h200"), cal).at_cpu_speed(SLOW, SLOW).host("pp_action")
    assert action >= 1e-3
    assert torch_lib - own == pytest.approx((8 - 1 + 2) * 2 * action, rel=1e-6)
    megatron = simcore.predict(_run("megatron", 8, cal)).step_time_s
    assert megatron == own


def test_the_stack_sets_the_library_only_with_pipeline_stages() -> None:
    sc = load_scenario(str(REPO / "scenarios/llama3-70b-h100.yaml"))
    r = simcore.predict(sc)
    assert any("parallel.pipeline_library=megatron" in n for n in r.notes)
    one_stage = load_scenario(
        str(REPO / "scenarios/llama3-70b-h100.yaml"), ["parallel.pp=1", "parallel.dp=null"]
    )
    assert not any("pipeline_library" in n for n in simcore.predict(one_stage).notes)


def test_the_h100_profile_prices_the_actions_measured_on_one_h100() -> None:
    """The shipped H100 profile carries ``pp_action`` (``simcore calibrate traces/h100/dist_units``): the
    same host-bound GPipe on an HGX H100 pays its 9 x 2 actions; the H200 profile, without it, none."""
    def on_h100(library: str) -> Scenario:
        sc = _run(library, 8)
        return sc.model_copy(update={"cluster": sc.cluster.model_copy(update={"system": "hgx-h100"})})

    action = load_profile(default_registry().device("h100")).at_cpu_speed(SLOW, SLOW).host("pp_action")
    assert action > 0
    torch_lib = simcore.predict(on_h100("torch")).step_time_s
    own = simcore.predict(on_h100("own")).step_time_s
    assert torch_lib - own == pytest.approx((8 - 1 + 2) * 2 * action, rel=1e-6)
