"""The one-scenario fast path (docs/architecture.md, Speed): what it keeps across calls gives the same
answer as computing afresh, and a changed spec, file or registry is never answered from before."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simcore
from simcore.engine.pricing import Pricer
from simcore.errors import SpecError
from simcore.specs.memo import SpecMemo, clear_all
from simcore.specs.registry import builtin_dir, set_user_dirs
from simcore.specs.resolve import cluster_for, load_scenario
from simcore.workload import lowering as L

ROOT = Path(__file__).resolve().parents[2]
GPT3 = ROOT / "scenarios" / "gpt3-175b-1024xa100.yaml"


def _fresh(sc: Any) -> dict[str, Any]:
    clear_all()
    out: dict[str, Any] = simcore.predict(sc).model_dump()
    return out


def test_memo_pins_by_identity() -> None:
    m = SpecMemo(size=2)
    a, b = [1], [1]  # equal, not the same object
    m.put((a,), "k", 1.0)
    assert m.get((a,), "k") == 1.0
    assert m.get((b,), "k") is None
    m.put((a,), "k2", 2.0)
    m.put((a,), "k3", 3.0)  # full: emptied first
    assert len(m) == 1 and m.get((a,), "k") is None


@pytest.mark.parametrize(
    "name",
    [
        "gpt3-175b-1024xa100",  # pipeline, TP communication
        "mixtral-8x7b-h100",  # MoE
        "gpt2-xl-ddp-2xh200",  # eager host tables, DDP, fp32 weights
        "llama3-8b-decode-h200",  # inference
    ],
)
def test_repeated_predictions_are_identical(name: str) -> None:
    sc = load_scenario(name)
    fresh = _fresh(sc)
    assert simcore.predict(sc).model_dump() == fresh  # filled by the fresh call
    assert simcore.predict(name).model_dump() == fresh  # by name: the cached Scenario


@settings(max_examples=8, deadline=None)
@given(mb=st.sampled_from([1, 2, 4]), dp_overlap=st.booleans(), recompute=st.sampled_from(["none", "full"]))
def test_memo_equals_fresh_over_settings(mb: int, dp_overlap: bool, recompute: str) -> None:
    over = [
        f"training.micro_batch={mb}",
        f"training.global_batch={mb * 16 * 64}",
        f"parallel.dp_overlap={str(dp_overlap).lower()}",
        f"training.recompute={recompute}",
    ]
    sc = load_scenario(GPT3, over)
    warm = simcore.predict(sc).model_dump()
    assert warm == _fresh(sc)


def test_changed_device_is_not_answered_from_before() -> None:
    cluster = cluster_for("hgx-a100", gpus=8)
    ops = [L.mem_op("copy", 2.0**30, 2.0, "optimizer")]
    before = Pricer.for_layout(cluster, tp=8).price(ops).total()
    dev = cluster.device
    faster = dev.model_copy(
        update={"memory": dev.memory.model_copy(update={"bandwidth": 2 * dev.memory.bandwidth})}
    )
    changed = dataclasses.replace(cluster, device=faster)
    after = Pricer.for_layout(changed, tp=8).price(ops).total()
    assert after < 0.75 * before
    clear_all()
    assert Pricer.for_layout(changed, tp=8).price(ops).total() == after


def test_pricer_options_set_after_construction_count() -> None:
    """Inference sets a CUDA-graph kernel floor on a pricer it already has: the memo sees it."""
    cluster = cluster_for("hgx-a100", gpus=8)
    ops = [L.mem_op("copy", 1024.0, 2.0, "optimizer")]
    p = Pricer.for_layout(cluster)
    plain = p.price(ops).total()
    p.kernel_floor = 1.0
    assert p.price(ops).total() == pytest.approx(1.0) != plain


def test_changed_registry_is_not_answered_from_before(tmp_path: Path) -> None:
    """A user spec folder replacing the A100 (twice the HBM and NVLink bandwidth) changes the prediction
    of a scenario already predicted and loaded."""
    before = simcore.predict(GPT3).step_time_s
    (tmp_path / "devices").mkdir()
    src = (builtin_dir() / "devices" / "a100.yaml").read_text()
    fast = src.replace("bandwidth: 2.039 TB/s", "bandwidth: 4.078 TB/s").replace(
        "bandwidth: 300 GB/s", "bandwidth: 600 GB/s"
    )
    assert fast != src
    (tmp_path / "devices" / "a100.yaml").write_text(fast)
    try:
        set_user_dirs([tmp_path])
        after = simcore.predict(GPT3).step_time_s
    finally:
        set_user_dirs([])
    assert after < before
    assert simcore.predict(GPT3).step_time_s == before


def test_changed_scenario_file_is_reloaded(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    shutil.copy(GPT3, path)
    first = load_scenario(path)
    assert load_scenario(path) is first  # unchanged file: the same frozen Scenario
    assert load_scenario(path, ["training.micro_batch=2"]).training.micro_batch == 2  # type: ignore[union-attr]
    path.write_text(path.read_text().replace("name:", "name: changed-", 1))
    assert load_scenario(path) is not first
    assert load_scenario(path).name.startswith("changed-")


def test_invalid_layout_raises_every_time() -> None:
    for _ in range(2):
        with pytest.raises(SpecError, match="tp"):
            simcore.predict(load_scenario(GPT3, ["parallel.tp=7"]))


def test_a_system_without_comm_profile_still_prices_a_step_without_collectives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The memo keys read the system's comm profile; where there is none, a step with no collective
    is priced without the memo (and a collective raises as before)."""
    from simcore.engine import pricing

    def missing(system: str) -> Any:
        raise SpecError(f"no comm calibration profile for {system!r}")

    sc = load_scenario(
        {
            "name": "one-gpu",
            "kind": "training",
            "cluster": {"system": "hgx-h200", "gpus": 1},
            "model": {"preset": "llama3-8b", "seq_len": 1024},
            "training": {"micro_batch": 1, "global_batch": 1},
        }
    )
    expected = _fresh(sc)
    monkeypatch.setattr(pricing, "load_comm_profile", missing)
    clear_all()
    assert simcore.predict(sc).model_dump() == expected


def test_stacked_scenario_is_kept_per_scenario_object() -> None:
    """``with_stack`` gives the same stacked scenario for the same scenario object (and a list of its own
    to each caller); another stack, or an equal scenario that is another object, is computed afresh."""
    from simcore.engine.runtime import with_stack

    sc = load_scenario(GPT3)
    first, chosen = with_stack(sc)
    again, chosen2 = with_stack(sc)
    assert again is first and chosen2 == chosen and chosen2 is not chosen
    clear_all()
    fresh, fresh_chosen = with_stack(sc)
    assert fresh == first and fresh_chosen == chosen
    other = sc.model_copy(update={"runtime": sc.runtime.model_copy(update={"stack": "megatron"})})
    assert with_stack(other)[0].runtime.stack == "megatron"
    assert with_stack(sc.model_copy())[0] == first
