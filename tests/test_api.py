"""The public API's edges: bad arguments raise a SimcoreError naming the argument, never another
exception (hand cases, and a property over random junk)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import simcore
from simcore import SimcoreError

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = yaml.safe_load((ROOT / "scenarios" / "default.yaml").read_text())
GEMM = {"m": 8, "n": 8, "k": 8}


def _error(fn: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(SimcoreError) as e:
        fn(*args, **kwargs)
    text = str(e.value)
    assert "\n" not in text
    return text


# --- op_time --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"m": 1.5, "n": 8, "k": 8}, "m: expected an integer, got 1.5"),
        ({"m": "8", "n": 8, "k": 8}, "m: expected an integer, got the string '8'"),
        ({"m": True, "n": 8, "k": 8}, "m: expected an integer, got True"),
        ({"m": 8, "n": 8, "k": 0}, "k: must be at least 1 (got 0)"),
        ({"m": 8, "n": float("inf"), "k": 8}, "n: expected a finite number, got inf"),
        ({**GEMM, "device": None}, "device: expected a device name (e.g. 'h200') or a Device, got NoneType None"),
        ({**GEMM, "dtype": None}, "dtype: expected a string, got NoneType None"),
        ({**GEMM, "framework": []}, "framework: unknown framework []"),
        ({**GEMM, "cold_cache": "yes"}, "cold_cache: expected true or false (got 'yes')"),
        ({**GEMM, "calibration": 5}, "calibration: expected a profile name or YAML path, got int 5"),
        ({**GEMM, "clock_hz": True}, "clock_hz: expected a number, got True"),
        ({**GEMM, "m": 10**400}, "m: cannot read 1000000000000000000000000000000000000... as a number"),
    ],
)
def test_op_time_gemm_arguments(kwargs: dict[str, Any], expected: str) -> None:
    assert _error(simcore.op_time, "gemm", **kwargs).startswith(expected)


def test_op_time_kind_must_be_a_string() -> None:
    assert _error(simcore.op_time, None) == "kind: expected a string, got NoneType None"


def test_op_time_attention_and_memory_arguments() -> None:
    att = {"batch": 1, "heads": 8, "seq": 128, "head_dim": 64}
    assert _error(simcore.op_time, "attention", **att, dropout="0.1").startswith(
        "dropout: expected a number, got the string '0.1'"
    )
    assert _error(simcore.op_time, "attention", **att, backend=3).startswith("backend: expected a string")
    assert _error(simcore.op_time, "copy", bytes=True).startswith("bytes: expected a number, got True")
    assert "not a finite number" in _error(simcore.op_time, "copy", bytes=float("nan"))
    assert _error(simcore.op_time, "optimizer", params="7e9").startswith("params: expected an integer")


def test_op_time_accepts_integral_numbers_and_unit_strings() -> None:
    base = simcore.op_time("gemm", m=4096, n=4096, k=4096).time_s
    assert simcore.op_time("gemm", m=4096.0, n=np.int64(4096), k=np.float64(4096)).time_s == base
    # quantities with units are read through simcore.units, as in YAML and on the command line
    assert simcore.op_time("copy", bytes="1 GB").time_s == simcore.op_time("copy", bytes=1e9).time_s
    assert simcore.op_time("optimizer", params=7e9).shape["params"] == 7e9
    assert simcore.op_time("gemm", **GEMM, calibration=Path("h200")).time_s > 0


# --- collective_time ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"nbytes": None}, "nbytes: expected a number of bytes or a string such as '256 MB', got NoneType"),
        ({"nbytes": "1 Gs"}, "nbytes: unit 'Gs'"),
        ({"nbytes": True}, "nbytes: expected a number of bytes"),
        ({"gpus": 8.5}, "gpus: expected an integer, got 8.5"),
        ({"gpus": "8"}, "gpus: expected an integer, got str '8'"),
        ({"gpus": 10**30}, "gpus: too large"),
        ({"nodes": True}, "nodes: expected an integer, got bool True"),
        ({"op": None}, "op: expected a string, got NoneType None"),
        ({"system": None}, "system: expected a string"),
        ({"dtype": []}, "dtype: expected a string, got list []"),
    ],
)
def test_collective_time_arguments(kwargs: dict[str, Any], expected: str) -> None:
    args = {"op": "all_reduce", "nbytes": "1 GB", "gpus": 8, "system": "hgx-h200", **kwargs}
    assert _error(simcore.collective_time, **args).startswith(expected)


def test_collective_time_reads_sizes_with_units() -> None:
    a = simcore.collective_time("all_reduce", "1GB", 8, "hgx-h200")
    b = simcore.collective_time("all_reduce", 1e9, np.int64(8), "hgx-h200")
    assert a.time_s == b.time_s
    assert a.nbytes == 1e9


# --- load_scenario, predict, load_hardware --------------------------------------------------


def test_load_scenario_argument() -> None:
    assert _error(simcore.load_scenario, None).startswith(
        "path: expected a scenario file path, a built-in scenario name or a dict of its fields, got NoneType"
    )
    assert _error(simcore.load_scenario, "default", [1]).startswith("overrides: expected a list")
    one = simcore.load_scenario("default", "training.micro_batch=2")  # one override as a string
    assert one.training is not None
    assert one.training.micro_batch == 2


def test_predict_takes_a_dict_like_a_file() -> None:
    from_file = simcore.predict("default")
    from_dict = simcore.predict(DEFAULT)
    from_path = simcore.predict(ROOT / "scenarios" / "default.yaml")
    assert from_dict.step_time_s == from_file.step_time_s == from_path.step_time_s
    assert DEFAULT["training"]["micro_batch"] == 1  # the caller's dict is not changed
    bad = {**DEFAULT, "training": {"micro_batch": True}}
    assert _error(simcore.predict, bad) == "training.micro_batch: expected an integer, got true"


@pytest.mark.parametrize("arg", [None, 5, [1], 2.5])
def test_predict_rejects_other_types(arg: Any) -> None:
    assert _error(simcore.predict, arg).startswith(
        "scenario: expected a Scenario, a scenario file path or built-in name, or a dict of its fields"
    )


def test_load_hardware_argument() -> None:
    assert _error(simcore.load_hardware, None) == "name: expected a device, system or link name, got NoneType"
    assert simcore.load_hardware("h200").name


# --- property: junk in, SimcoreError out ----------------------------------------------------

_junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["8", "1GB", "1 GB", "h200", "hgx-h200", "bf16", "gemm", "default", "1.5", "-3", "nan"]),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)
_opt = {"max_examples": 60, "deadline": None, "suppress_health_check": [HealthCheck.too_slow]}


@settings(**_opt)
@given(kind=st.one_of(st.sampled_from(["gemm", "attention", "copy", "norm", "optimizer"]), _junk), junk=_junk,
       key=st.sampled_from(["m", "n", "k", "batch", "heads", "seq", "head_dim", "bytes", "numel", "params",
                            "name", "dropout", "backend", "causal", "rows", "flops", "device", "dtype",
                            "framework", "calibration", "cold_cache", "clock_hz"]))  # fmt: skip
def test_op_time_junk_raises_simcore_error(kind: Any, junk: Any, key: str) -> None:
    full = {"m": 64, "n": 64, "k": 64, "batch": 1, "heads": 8, "seq": 64, "head_dim": 64, "bytes": 1e6,
            "params": 1e6}  # fmt: skip
    shape = {k: v for k, v in full.items() if k in _keys(kind)}
    with contextlib.suppress(SimcoreError):
        simcore.op_time(kind, **{**shape, key: junk})


def _keys(kind: Any) -> tuple[str, ...]:
    from simcore.compute.ops import SHAPE_KEYS, shape_family

    return SHAPE_KEYS[shape_family(kind)] if isinstance(kind, str) else ()


@settings(**_opt)
@given(junk=_junk, key=st.sampled_from(["op", "nbytes", "gpus", "system", "nodes", "dtype", "algorithm"]))
def test_collective_time_junk_raises_simcore_error(junk: Any, key: str) -> None:
    args = {"op": "all_reduce", "nbytes": "1 MB", "gpus": 8, "system": "hgx-h200", key: junk}
    with contextlib.suppress(SimcoreError):
        simcore.collective_time(**args)


@settings(**_opt)
@given(junk=_junk)
def test_loaders_junk_raises_simcore_error(junk: Any) -> None:
    for fn in (simcore.load_scenario, simcore.load_hardware, simcore.predict):
        with contextlib.suppress(SimcoreError):
            fn(junk)


@settings(**_opt)
@given(section=st.sampled_from(["training", "parallel", "cluster", "model", "runtime", "cost"]), junk=_junk,
       field=st.sampled_from(["micro_batch", "tp", "gpus", "nodes", "preset", "layers", "framework",
                              "system", "global_batch", "zero", "pue"]))  # fmt: skip
def test_predict_dict_junk_raises_simcore_error(section: str, field: str, junk: Any) -> None:
    data = {**DEFAULT, section: {**(DEFAULT.get(section) or {}), field: junk}}
    with contextlib.suppress(SimcoreError):
        simcore.predict(data)


# --- serve ----------------------------------------------------------------------------------

SERVE = "serve_llama3_8b_h200"
SMALL = ["serving.requests=20"]
SERVE_SC = simcore.load_scenario(SERVE, SMALL)


def test_serve_takes_a_name_a_path_a_dict_or_a_scenario() -> None:
    base = simcore.serve(SERVE_SC)
    data = yaml.safe_load((ROOT / "scenarios" / f"{SERVE}.yaml").read_text())
    for got in (
        simcore.serve(SERVE, overrides=SMALL),
        simcore.serve(ROOT / "scenarios" / f"{SERVE}.yaml", overrides=SMALL),
        simcore.serve(data, overrides=SMALL[0]),  # one override as a string
        simcore.serve(SERVE_SC, spec=SERVE_SC.serving.model_dump()),  # type: ignore[union-attr]
    ):
        assert got.model_dump() == base.model_dump()
    assert data["serving"]["requests"] == 2000  # the caller's dict is not changed
    faster = simcore.serve(SERVE_SC, spec={**SERVE_SC.serving.model_dump(), "rate": 1})  # type: ignore[union-attr]
    assert faster.model_dump() != base.model_dump()


@pytest.mark.parametrize(
    ("args", "kwargs", "expected"),
    [
        ((None,), {}, "scenario: expected a Scenario, a scenario file path or built-in name, or a dict of"),
        ((5,), {}, "scenario: expected a Scenario"),
        ((SERVE_SC,), {"spec": 5}, "spec: expected a ServingSpec or a dict of serving fields, got int"),
        ((SERVE_SC,), {"spec": {"rate": 1, "speed": 2}}, "spec.speed: unknown"),
        ((SERVE_SC,), {"spec": {"rate": "fast"}}, "spec.rate:"),
        ((SERVE_SC,), {"overrides": ["serving.rate=5"]}, "overrides: applied while loading"),
        ((SERVE_SC,), {"overrides": 5}, "overrides: expected a list of 'key.path=value' strings, got int"),
        ((SERVE,), {"overrides": [1]}, "overrides: expected a list"),
        (("default",), {}, "kind: simcore serve needs kind: serving, got 'training'"),
        (({**DEFAULT},), {}, "kind: simcore serve needs kind: serving, got 'training'"),
        ((simcore.load_scenario("default"),), {}, "serving: a serving simulation needs a 'serving' section"),
    ],
)
def test_serve_arguments(args: tuple[Any, ...], kwargs: dict[str, Any], expected: str) -> None:
    assert expected in _error(simcore.serve, *args, **kwargs)


# --- plan -----------------------------------------------------------------------------------

PLAN = {"des_top": 0, "top": 1}


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"scenario": None}, "scenario: expected a Scenario, a scenario file path or built-in name"),
        ({"scenario": SERVE_SC}, "kind: plan needs a training scenario"),
        ({"gpus": "8"}, "gpus: expected an integer, got str '8'"),
        ({"gpus": 8.5}, "gpus: expected an integer, got 8.5"),
        ({"gpus": [8, True]}, "gpus: expected an integer, got bool True"),
        ({"gpus": 0}, "gpus: must be at least 1 (got 0)"),
        ({"gpus": []}, "gpus: expected at least one value"),
        ({"gpus": 10**30}, "gpus: too large"),
        ({"gpus": {"a": 1}}, "gpus: expected a list, got dict"),
        ({"objective": None}, "objective: expected a string, got NoneType None"),
        ({"objective": "speed"}, "objective: unknown objective 'speed'; use time, cost, energy or goodput"),
        ({"top": "5"}, "top: expected an integer, got str '5'"),
        ({"top": 1.5}, "top: expected an integer, got 1.5"),
        ({"top": 0}, "top: must be at least 1 (got 0)"),
        ({"des_top": -1}, "des_top: must be at least 0 (got -1)"),
        ({"des_top": None}, "des_top: expected an integer, got NoneType"),
        ({"pareto": "no"}, "pareto: expected true or false, got str 'no'"),
        ({"chunk_elems": 0}, "chunk_elems: must be at least 1"),
        ({"chunk_elems": float("inf")}, "chunk_elems: expected an integer, got inf"),
        ({"max_cost": "x"}, "max_cost: expected a positive number, got the string 'x'"),
        ({"max_cost": -1}, "max_cost: expected a positive finite number, got -1"),
        ({"max_cost": True}, "max_cost: expected a positive number, got bool True"),
        ({"max_time_s": float("nan")}, "max_time_s: expected a positive finite number, got nan"),
        ({"max_time_s": "3 GB"}, "max_time_s:"),
        ({"options": 5}, "options: expected a SearchOptions or a dict of its fields, got int"),
        ({"options": {"tpp": [1]}}, "options.tpp: unknown search option"),
        ({"options": {"tp": ["2"]}}, "options.tp: expected an integer, got str '2'"),
        ({"options": {"pp": 0}}, "options.pp: must be at least 1"),
        ({"options": {"recompute": [None]}}, "options.recompute: expected a string, got NoneType"),
        ({"options": {"zero": [4]}}, "options.zero: ZeRO stages are 0 to 3, got 4"),
        ({"options": {"sp": ["yes"]}}, "options.sp: expected true or false"),
        ({"options": {"max_cp": 2.5}}, "options.max_cp: expected an integer, got 2.5"),
        ({"options": {"uneven_pp": "no"}}, "options.uneven_pp: expected true or false"),
    ],
)
def test_plan_arguments(kwargs: dict[str, Any], expected: str) -> None:
    args = {"scenario": "default", **PLAN, **kwargs}
    assert _error(simcore.plan, **args).startswith(expected)


def test_plan_takes_paths_dicts_and_bare_values() -> None:
    from simcore.planning.space import SearchOptions

    base = simcore.plan("default", **PLAN, options=SearchOptions(tp=(1, 2), schedule=("1f1b",)))
    for got in (
        simcore.plan(DEFAULT, **PLAN, options={"tp": [1, 2], "schedule": "1f1b"}),
        simcore.plan(
            ROOT / "scenarios" / "default.yaml",
            **PLAN,
            options=SearchOptions(tp=np.array([1, 2]), schedule=["1f1b"]),
        ),  # fmt: skip
    ):
        assert got.top == base.top
        assert got.evaluated_configs == base.evaluated_configs
    one = simcore.plan("default", gpus=np.int64(8), top=2.0, des_top=0, options={"tp": 2})
    assert one.gpus == [8]
    assert {e["layout"]["tp"] for e in one.top} == {2}
    # a deadline with a unit is the same as in seconds
    assert DEFAULT["training"]["tokens"]
    a = simcore.plan(DEFAULT, **PLAN, max_time_s="3000 d")
    assert a.top == simcore.plan(DEFAULT, **PLAN, max_time_s=3000 * 86400.0).top


# --- property: junk in, SimcoreError out (serve and plan) -----------------------------------

_few = {**_opt, "max_examples": 25}


@settings(**_few)
@given(junk=_junk, key=st.sampled_from(["scenario", "spec", "overrides"]))
def test_serve_junk_raises_simcore_error(junk: Any, key: str) -> None:
    args = {"scenario": SERVE_SC, "spec": None, "overrides": None, key: junk}
    if key == "overrides":
        args["scenario"] = SERVE
        if isinstance(junk, str | list):  # a real override list: keep the run small
            args["overrides"] = [*SMALL, *(junk if isinstance(junk, list) else [junk])]
    with contextlib.suppress(SimcoreError):
        simcore.serve(**args)


@settings(**_few)
@given(junk=_junk, key=st.sampled_from(["scenario", "gpus", "objective", "top", "des_top", "pareto", "chunk_elems",
                                        "max_cost", "max_time_s", "options"]))  # fmt: skip
def test_plan_junk_raises_simcore_error(junk: Any, key: str) -> None:
    args = {"scenario": "default", **PLAN, key: junk}
    if key in ("gpus", "chunk_elems") and isinstance(junk, int) and not isinstance(junk, bool):
        args[key] = min(junk, 64) if key == "gpus" else max(junk, 10_000)  # keep the search small
    with contextlib.suppress(SimcoreError):
        simcore.plan(**args)


@settings(**_few)
@given(junk=_junk, field=st.sampled_from(["tp", "pp", "cp", "ep", "vp", "micro_batch", "global_batch", "recompute",
                                          "schedule", "zero", "sp", "dp_overlap", "tp_overlap", "max_cp",
                                          "max_micro_batch", "max_vp", "uneven_pp"]))  # fmt: skip
def test_plan_options_junk_raises_simcore_error(junk: Any, field: str) -> None:
    if (
        field in ("max_cp", "max_micro_batch", "max_vp")
        and isinstance(junk, int)
        and not isinstance(junk, bool)
    ):
        junk = min(junk, 16)  # keep the search small
    with contextlib.suppress(SimcoreError):
        simcore.plan("default", **PLAN, options={field: junk})
