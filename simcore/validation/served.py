"""Served models under load: ``simcore serve`` against engines measured on a GPU (issue 41).

Each ``scenarios/served/*.yaml`` is one engine on one workload (docs/serving.md, "Measured under load"), committed
before the run together with ``scenarios/served/predicted.json``: simcore's predicted capacity of the engine
(requests/s of a burst of the scenario's requests all arriving at once) and its predicted latency and throughput
at the rates ``LOADS`` x that capacity, which ``tools/bench_serving.py`` then runs (:func:`predict`).

The comparison (:func:`compare`) reads the measurements (``traces/<gpu>/served/``: ``served_manifest.json`` and
``served_<engine>.csv.gz``, a row per request) and simulates every measured run on exactly its requests (the
measured submission times, prompt and output lengths, as a ``serving.trace``) on the GPU that ran it. Measured
and predicted runs are summarised by the same code (:func:`summarize`): TTFT and TPOT percentiles, completed
requests/s (first arrival to last completion), steady requests/s (completions in the second half of the arrival
window, per second) and output tokens/s. The saturation rate is the probe's: every request submitted at once,
completed requests/s; its error is predicted over measured minus one. A run the harness stopped at its timeout
with requests still running is compared with the simulations cut at the same time (:func:`cut_at`).
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import gzip
import json
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from simcore.calibration import fit_served
from simcore.errors import SpecError
from simcore.serving.sim import RequestLog, simulate
from simcore.serving.spec import load_serving
from simcore.specs.loader import validate
from simcore.specs.registry import default_registry
from simcore.specs.scenario import Scenario
from simcore.specs.serving import ServingSpec
from simcore.validation.steps import traces_dir

SERVED_DIR = Path(__file__).resolve().parents[2] / "scenarios" / "served"
"""The served scenarios and their committed predictions (``predicted.json``)."""
LOADS = (0.25, 0.5, 0.75, 0.9, 1.2)
"""The rates a served scenario runs at, as fractions of its predicted (or measured) capacity."""
SYSTEMS = ("hgx-h100", "hgx-h200")
"""The systems ``predicted.json`` holds predictions for (the lent GPU may be either)."""
PERCENTILES = (50, 90, 99)
_TRACE_KEYS = ("rate", "arrival_cv", "prompt", "output", "requests", "duration_s", "trace", "seed")


@dataclass(frozen=True)
class Requests:
    """One run's requests: submission, first-token and finish times (s; NaN where never reached), prompt and
    output lengths (tokens)."""

    arrival: np.ndarray
    first: np.ndarray
    finish: np.ndarray
    prompt: np.ndarray
    output: np.ndarray


def summarize(r: Requests) -> dict[str, float]:
    """TTFT and TPOT percentiles (s), requests/s, steady requests/s and output tokens/s of a run (the
    definitions of :class:`~simcore.serving.sim.ServingResult`); unfinished requests count as not completed."""
    log = RequestLog(
        r.arrival, r.first, r.finish, r.prompt, r.output, np.zeros(r.arrival.size, dtype=np.int64)
    )
    done = np.isfinite(r.finish)
    out: dict[str, float] = {"requests": float(r.arrival.size), "finished": float(done.sum())}
    for name, x in (("ttft", log.ttft), ("tpot", log.tpot)):
        x = x[np.isfinite(x)]
        for q in PERCENTILES:
            out[f"{name}_p{q}"] = float(np.percentile(x, q)) if x.size else math.nan
    t0 = float(r.arrival.min())
    span = float(np.nanmax(r.finish)) - t0 if done.any() else math.nan
    out["requests_per_s"] = float(done.sum()) / span if span > 0 else math.nan
    out["output_tokens_per_s"] = float(r.output[done].sum()) / span if span > 0 else math.nan
    t1 = float(r.arrival.max())
    steady = math.nan
    if r.arrival.size >= 20 and t1 > t0:
        tm = t0 + 0.5 * (t1 - t0)
        steady = float(np.count_nonzero((r.finish > tm) & (r.finish <= t1))) / (t1 - tm)
    out["steady_requests_per_s"] = steady
    return out


def _trace_spec(spec: ServingSpec, path: Path) -> ServingSpec:
    """``spec``'s engine settings with its requests replaced by the trace at ``path``."""
    data = {k: v for k, v in spec.model_dump(exclude_unset=True).items() if k not in _TRACE_KEYS}
    return validate(ServingSpec, {**data, "trace": str(path)}, prefix="serving")


def simulate_requests(sc: Scenario, spec: ServingSpec, arrival: np.ndarray, prompt: np.ndarray,
                      output: np.ndarray, shapes: set[tuple[int, int]] | None = None) -> Requests:  # fmt: skip
    """simcore's serving simulation of exactly these requests (arrival times in s, lengths in tokens) under
    ``spec``'s engine settings (``shapes``: the prefill shapes the engine ran before, :func:`simulate`'s)."""
    order = np.argsort(arrival, kind="stable")
    a = np.asarray(arrival, dtype=float)[order]
    a = a - min(float(a[0]), 0.0)
    p, o = np.asarray(prompt)[order], np.asarray(output)[order]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "requests.csv"
        with path.open("w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["arrival_s", "prompt_len", "output_len"])
            w.writerows(zip([repr(float(x)) for x in a], p.tolist(), o.tolist(), strict=True))
        return _of_log(simulate(sc, _trace_spec(spec, path), shapes).log)


def _of_log(log: RequestLog) -> Requests:
    return Requests(log.arrival, log.first_token, log.finish, log.prompt, log.output)


def scenario_files(folder: Path | None = None) -> list[Path]:
    """The served scenarios, in name order."""
    files = sorted((folder or SERVED_DIR).glob("*.yaml"))
    if not files:
        raise SpecError("no served scenario (*.yaml) here", file=str(folder or SERVED_DIR))
    return files


def _rate3(x: float) -> float:
    return float(f"{x:.3g}")


def predict(folder: Path | None = None, systems: tuple[str, ...] = SYSTEMS) -> dict[str, Any]:
    """Every served scenario's predictions before it runs: per system, the capacity (a burst of the scenario's
    requests all at t = 0: completed requests/s), and the summary at ``LOADS`` x the first system's capacity (the
    rates ``tools/bench_serving.py`` runs). The document :func:`write_predictions` commits."""
    out: dict[str, Any] = {}
    for path in scenario_files(folder):
        entry: dict[str, Any] = {"file": path.name, "loads": list(LOADS)}
        for system in systems:
            sc, spec = load_serving(path, [f"cluster.system={system}"])
            lengths = simulate(
                sc, spec
            ).log  # the scenario's requests (their lengths do not depend on the rate)
            probe = summarize(
                simulate_requests(sc, spec, np.zeros(lengths.prompt.size), lengths.prompt, lengths.output)
            )
            if "rates" not in entry:
                entry["capacity_rps"] = probe["requests_per_s"]
                entry["rates"] = [_rate3(x * probe["requests_per_s"]) for x in LOADS]
            runs = []
            for rate in entry["rates"]:
                log = simulate(sc, spec.model_copy(update={"rate": rate})).log
                runs.append({"rate": rate, **summarize(_of_log(log))})
            entry[system] = {"probe": probe, "runs": runs}
        out[sc.name] = entry
    return out


def write_predictions(folder: Path | None = None) -> Path:
    """Write :func:`predict`'s document to ``predicted.json`` beside the scenarios; its path."""
    path = (folder or SERVED_DIR) / "predicted.json"
    doc = {
        "made": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "how": "python -m simcore.validation served --predict",
        "scenarios": predict(folder),
    }
    path.write_text(json.dumps(jsonable(doc), indent=1) + "\n", encoding="utf-8")
    return path


def _nan_none(x: Any) -> Any:
    return None if isinstance(x, float) and not math.isfinite(x) else x


def jsonable(x: Any) -> Any:
    """``x`` with every non-finite float as ``None`` (JSON has no NaN or infinity)."""
    if isinstance(x, dict):
        return {k: jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [jsonable(v) for v in x]
    return _nan_none(x)


# ------------------------------------------------------------------------------------------------------------
# measurements


def _system_of(gpu: str | None, default: str) -> str:
    name = (gpu or "").upper()
    for chip in ("H200", "H100"):
        if chip in name:
            return f"hgx-{chip.lower()}"
    return default


def measurement_dirs(root: Path | None = None) -> list[Path]:
    """Folders holding a ``served_manifest.json`` under ``traces/*/served`` (or ``root`` itself)."""
    if root is not None:
        if not (root / "served_manifest.json").is_file():
            raise SpecError("no served_manifest.json here", file=str(root))
        return [root]
    return sorted(p.parent for p in traces_dir().glob("*/served/served_manifest.json"))


def read_measurements(folder: Path) -> tuple[dict[str, Any], dict[tuple[str, str], list[dict[str, str]]]]:
    """A measurement folder's manifest and its rows grouped by (scenario, run)."""
    man = json.loads((folder / "served_manifest.json").read_text(encoding="utf-8"))
    runs: dict[tuple[str, str], list[dict[str, str]]] = {}
    for path in sorted(folder.glob("served_*.csv*")):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                runs.setdefault((row["scenario"], row["run"]), []).append(row)
    return man, runs


def _requests(rows: list[dict[str, str]]) -> Requests:
    def col(name: str, kind: type = float) -> np.ndarray:
        return np.array([kind(r[name]) if r[name] not in ("", "nan") else math.nan for r in rows])

    return Requests(col("arrival_s"), col("first_token_s"), col("finish_s"), col("prompt_len").astype(np.int64),
                    col("output_len").astype(np.int64))  # fmt: skip


def _err(pred: float, meas: float) -> float:
    return pred / meas - 1.0 if meas and math.isfinite(meas) and math.isfinite(pred) else math.nan


def compare(folder: Path | None = None, data: Path | None = None) -> list[dict[str, Any]]:
    """Per served scenario and measurement folder: every measured run beside simcore's simulation of its
    requests on the GPU that ran it (``predicted``: the roofline step model with the scenario's engine keys;
    ``profile``: with the engine's measured step profile, where ``simcore calibrate`` wrote one), and the
    saturation rate's errors (also of the capacity ``predicted.json`` committed before the run);
    ``status: no measurement yet`` where no measurement names the scenario."""
    found = [(d, *read_measurements(d)) for d in measurement_dirs(data)]
    ordered: dict[Path, dict[tuple[str, str], Requests]] = {}
    for d, man, runs in found:
        sims = {}
        for path in scenario_files(folder):
            _, sc, _, _, spec_p = _specs(path, man)
            if spec_p is not None:
                sims[sc.name] = (sc, spec_p)
        ordered[d] = _engine_order(man, runs, sims)
    pred_path = (folder or SERVED_DIR) / "predicted.json"
    committed: dict[str, Any] = (
        json.loads(pred_path.read_text(encoding="utf-8"))["scenarios"] if pred_path.is_file() else {}
    )
    out: list[dict[str, Any]] = []
    for path in scenario_files(folder):
        sc0, _ = load_serving(path)
        name = sc0.name
        sets = [(d, man, runs) for d, man, runs in found if any(k[0] == name for k in runs)]
        if not sets:
            out.append({"scenario": name, "status": "no measurement yet"})
            continue
        for d, man, runs in sets:
            system, sc, spec, prof, spec_p = _specs(path, man)
            rows: list[dict[str, Any]] = []
            for (sname, run), rs in sorted(runs.items(), key=lambda kv: _run_order(kv[0][1])):
                if sname != name:
                    continue
                meas = _requests(rs)
                keep = np.isfinite(meas.arrival)
                req = (meas.arrival[keep], meas.prompt[keep], meas.output[keep])
                rate = rs[0]["offered_rate"]
                cut = cut_time(man, name, run)
                rows.append({"run": run, "offered_rate": math.inf if rate == "inf" else float(rate),
                             "measured": summarize(meas),
                             "predicted": summarize(cut_at(simulate_requests(sc, spec, *req), cut)),
                             "profile": None if spec_p is None else summarize(cut_at(
                                 ordered[d][(name, run)] if (name, run) in ordered[d]
                                 else simulate_requests(sc, spec_p, *req), cut)),
                             "cut_s": cut})  # fmt: skip
            probe = next((r for r in rows if r["run"] == "probe"), None)
            sat = None
            if probe is not None:
                m, p = probe["measured"]["requests_per_s"], probe["predicted"]["requests_per_s"]
                sat = {"measured": m, "predicted": p, "error": _err(p, m)}
                before = committed.get(name, {}).get(system, {}).get("probe", {}).get("requests_per_s")
                if before is not None:
                    sat.update(committed=before, committed_error=_err(before, m))
                if probe["profile"] is not None:
                    q = probe["profile"]["requests_per_s"]
                    sat.update(profile=q, profile_error=_err(q, m))
            out.append({"scenario": name, "status": "measured", "data": str(d), "gpu": man.get("gpu"),
                        "system": system, "engine": sc.runtime.implementation, "step_profile": prof if spec_p else None,
                        "runs": rows, "saturation": sat})  # fmt: skip
    return out


def cut_time(man: dict[str, Any], scenario: str, run: str) -> float | None:
    """Where the harness stopped waiting for a run (s from its start: the manifest's ``wall_s``) if it stopped
    before every request finished (``short`` > 0; a run's timeout), else ``None``."""
    for entry in man.get("runs", []):
        if entry.get("scenario") == scenario and entry.get("run") == run:
            wall, short = entry.get("wall_s"), entry.get("short") or 0
            return float(wall) if short and isinstance(wall, int | float) else None
    return None


def cut_at(r: Requests, t: float | None) -> Requests:
    """``r`` as a run stopped at ``t`` s (``None``: not stopped) records it: a request not finished by ``t`` has no
    first token or finish (NaN), as in the harness's rows of a request still running at the timeout (the Hugging
    Face engine's results, with their per-token timestamps, come when a request finishes)."""
    if t is None:
        return r
    done = r.finish <= t
    return dataclasses.replace(r, first=np.where(done, r.first, math.nan), finish=np.where(done, r.finish, math.nan))


def _specs(
    path: Path, man: dict[str, Any]
) -> tuple[str, Scenario, ServingSpec, str | None, ServingSpec | None]:
    """A served scenario as measured per ``man``: the system of its GPU, the scenario and serving spec on it, the
    engine's step profile (if ``simcore calibrate`` wrote one) and the spec that names it (``None`` without)."""
    sc0, _ = load_serving(path)
    system = _system_of(man.get("gpu"), sc0.cluster.system or "hgx-h100")
    sc, spec = load_serving(path, [f"cluster.system={system}"])
    prof = profile_name(sc.runtime.implementation, man.get("gpu"))
    spec_p = None
    if prof is not None and spec.step_profile is None:
        spec_p = validate(
            ServingSpec, {**spec.model_dump(exclude_unset=True), "step_profile": prof}, prefix="serving"
        )
    return system, sc, spec, prof, spec_p


ENGINE_KEYS = ("max_batch", "max_batch_tokens", "kv_block_tokens", "memory_utilization")
"""The serving keys ``tools/bench_serving.py`` builds an engine with: consecutive scenarios of one engine, model,
precision and these keys share its process (its ``ENGINE_KEYS``)."""


def _engine_order(man: dict[str, Any], runs: dict[tuple[str, str], list[dict[str, str]]],
                  sims: dict[str, tuple[Scenario, ServingSpec]]) -> dict[tuple[str, str], Requests]:  # fmt: skip
    """The step-profile simulations of the measured runs ``(scenario, run)`` in the order the manifest ran them,
    each from the prefill shapes its engine process had run before it: a step profile prices the first pass of a
    shape (``PrefillFit.c_shape``), and ``tools/bench_serving.py`` serves consecutive scenarios of one engine,
    model, precision and :data:`ENGINE_KEYS` in one process, started and warmed up by its first scenario's first 4
    requests at once. ``sims``: per scenario, the scenario and its step-profile serving spec."""
    out: dict[tuple[str, str], Requests] = {}
    scs = man.get("scenarios") or {}
    key: str | None = None
    seen: set[tuple[int, int]] = set()
    for entry in man.get("runs", []):
        name, run = str(entry.get("scenario")), str(entry.get("run"))
        if name not in sims or (name, run) not in runs:
            continue
        sc, spec = sims[name]
        meas = _requests(runs[(name, run)])
        info = scs.get(name) or {}
        sv = info.get("serving") or {}
        new_key = json.dumps([entry.get("engine"), info.get("model"), info.get("precision"),
                              {x: sv.get(x) for x in ENGINE_KEYS}], sort_keys=True)  # fmt: skip
        # a new process, warmed up by the scenario's first 4 requests (its run's first rows)
        if new_key != key:
            key, seen = new_key, set()
            simulate_requests(sc, spec, np.zeros(4), meas.prompt[:4], meas.output[:4], seen)
        keep = np.isfinite(meas.arrival)
        req = (meas.arrival[keep], meas.prompt[keep], meas.output[keep])
        out[(name, run)] = simulate_requests(sc, spec, *req, seen)
    return out


def profile_name(engine: str | None, gpu: str | None) -> str | None:
    """The step profile ``simcore calibrate`` wrote for ``engine`` on ``gpu`` (``served-<engine>-<gpu>`` in
    ``hardware_specs/calibration/``), if there is one."""
    if not engine:
        return None
    name = fit_served.profile_name(engine, gpu)
    return name if default_registry().calibration_path(name) is not None else None


def _run_order(run: str) -> tuple[int, str]:
    return (0, run) if run == "probe" else (1, run.zfill(6))


def _ms(x: float) -> str:
    return "-" if not math.isfinite(x) else f"{x * 1e3:.3g}"


def format_report(res: list[dict[str, Any]]) -> str:
    """The comparison as text tables: one per measured scenario, a line per run: measured / roofline-predicted
    (/ step-profile-predicted where the engine has a profile)."""
    lines: list[str] = []
    for s in res:
        if s["status"] != "measured":
            lines.append(f"{s['scenario']}: no measurement yet")
            continue
        prof = s.get("step_profile")
        lines.append(
            f"{s['scenario']} ({s['engine']} engine, {s['gpu']}, simulated on {s['system']}; {s['data']})"
        )
        cols = "measured / roofline" + (f" / {prof}" if prof else "")
        lines.append(f"  each cell: {cols}")
        lines.append(
            f"  {'run':6s} {'rate/s':>7s} {'n':>4s} | {'TTFT p50 ms':>19s} | {'TTFT p99 ms':>19s} | {'TPOT p50 ms':>19s}"
            f" | {'TPOT p99 ms':>19s} | {'requests/s':>19s}"
        )
        for r in s["runs"]:
            rate = "burst" if math.isinf(r["offered_rate"]) else f"{r['offered_rate']:.3g}"
            sums = [r["measured"], r["predicted"]] + ([r["profile"]] if r.get("profile") else [])
            cells = [
                " / ".join(_ms(x[k]) for x in sums) for k in ("ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99")
            ]
            cells.append(" / ".join(f"{x['requests_per_s']:.3g}" for x in sums))
            lines.append(f"  {r['run']:6s} {rate:>7s} {int(r['measured']['requests']):4d} | "
                         + " | ".join(f"{c:>19s}" for c in cells))  # fmt: skip
        for r in s["runs"]:
            if r.get("cut_s") is not None:
                left = int(r["measured"]["requests"] - r["measured"]["finished"])
                lines.append(f"  {r['run']}: the harness stopped at {r['cut_s']:.3g} s with {left} request(s) unfinished;"
                             " the simulations are cut there too")  # fmt: skip
        sat = s["saturation"]
        if sat is not None:
            line = (
                f"  saturation rate (burst): measured {sat['measured']:.3g}/s, roofline {sat['predicted']:.3g}/s"
                f" ({sat['error']:+.1%})"
            )
            if "profile" in sat:
                line += f", step profile {sat['profile']:.3g}/s ({sat['profile_error']:+.1%})"
            if "committed" in sat:
                line += f"; committed before the run {sat['committed']:.3g}/s ({sat['committed_error']:+.1%})"
            lines.append(line)
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


__all__ = [
    "LOADS",
    "SERVED_DIR",
    "Requests",
    "compare",
    "cut_at",
    "cut_time",
    "format_report",
    "jsonable",
    "measurement_dirs",
    "predict",
    "profile_name",
    "read_measurements",
    "simulate_requests",
    "summarize",
    "write_predictions",
]
