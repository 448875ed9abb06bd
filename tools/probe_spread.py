"""How steadily candidate CPU probes track a layer's host time across runs of the same code (rounds 42-45).

simcore prices a host-bound step at the CPU speed of the trace, read as the median duration of one cheap
op (the probe). A good probe makes a layer's host time in probe units the same in every run of the same
code. This compares the fit runs' median units (per code and block kind) with each held-apart trace of the
same code, all from committed files, and prints the rms of the log error per probe:

* ``--decode``: decode layers of simcore's own Llama blocks, round 42's fit passes
  (``traces/h200/host_decode_r42.csv.gz``) against the held-apart eager inference traces;
* ``--training`` (default): forward and backward layers, round 45's fit steps
  (``traces/h200/round45/steps_probes.csv.gz``) against the held-apart eager training traces of the same
  code (simcore's GPT / Llama blocks, transformers' GPT-2 / Llama).

* ``--hf-training``: ``transformers``' training layers, rounds 102 and 104's fit steps
  (``traces/h200/host_steps_hf_r10[24].csv.gz``) against held-apart steps of the same code (stop 31: the
  GEMM ops' mean, a training step's pace since then).
* ``--hf-compiled``: ``transformers``' compiled training steps, the forward regions and the rest of the step but
  the optimizer, round 70's fit steps' lines over the layer count (``traces/h200/host_compiled_steps_hf.csv.gz``)
  against the held-apart compiled steps of the same code (stop 32: the kernel launches' median, their pace since
  then).

  python tools/probe_spread.py [--decode | --hf-training | --hf-compiled]
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import gzip
import io
import math
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from simcore.calibration.host_trace import main as host_trace  # noqa: E402

H = REPO / "traces" / "h200"
DECODE_HELD = [
    H / "round40/profile_infer_llama_L16_h2048_b2.json.gz",
    H / "round41/profile_infer_llama-1b-infer_b4_p2048.json.gz",
    H / "profile_infer_llama-1b-infer_b8_p1024.json.gz",
    H / "round22/profile_infer_llama-3b-infer_b1_p2048.json.gz",
    H / "round25/profile_infer_llama_L8_h3072_b4.json.gz",
]
TRAIN_HELD = [
    *sorted((H / "round25").glob("profile_train_*.json.gz")),
    *sorted((H / "round40").glob("profile_train_*.json.gz")),
    *(H / "round31" / f"hf_train_{n}.json.gz" for n in ("gpt2_L12_b8", "gpt2_L12_b4_item", "gpt2_L6_b2")),
    *(H / "round31" / f"hf_train_{n}.json.gz" for n in ("llama_L4_h1024_b2_item", "llama_L8_h2048_b2")),
    H / "round36/hf_train_gpt2_L24_h1024_b4.json.gz",
    H / "round36/hf_train_llama_L6_h1536_b4.json.gz",
]


# held-apart transformers training steps of the code rounds 102 and 104's fit steps ran (separate projections, fp32
# weights + bf16 autocast, fused AdamW, no recompute, shapes-only profiler): ``--hf-training``
HF_TRAIN_HELD = [
    *(H / "round31" / f"hf_train_{n}.json.gz" for n in ("gpt2_L12_b8", "gpt2_L6_b2", "llama_L8_h2048_b2")),
    H / "round36/hf_train_gpt2_L24_h1024_b4.json.gz",
    H / "round36/hf_train_llama_L6_h1536_b4.json.gz",
    H / "round57/hf_train_llama_L16_h2048_b1.json.gz",
    *sorted((H / "round82").glob("hf_train_*.json.gz")),
    *sorted((H / "round83").glob("hf_train_*.json.gz")),
    H / "round84/hf_train_llama_L6_h2048_b2_s1024.json.gz",
    *sorted((H / "round103").glob("hf_train_*.json.gz")),
    *(p for p in sorted((H / "round105").glob("hf_train_*.json.gz")) if "phi3" not in p.name),
    *sorted((H / "round108").glob("hf_train_*.json.gz")),
    *sorted((H / "round110").glob("hf_train_*.json.gz")),
]

# held-apart transformers compiled training steps of round 70's fit code (fp32 weights + bf16 autocast, fused or
# foreach AdamW, no recompute, shapes-only profiler; round 38's bf16 weights launch other kernels): ``--hf-compiled``
HF_COMPILED_HELD = [
    H / "round31/hf_train_gpt2_L12_b8_compiled.json.gz",
    H / "round36/hf_train_llama_L8_h2048_b2_compiled.json.gz",
    H / "round57/hf_train_llama_L8_h2048_b2_compiled_foreach.json.gz",
    H / "round69/hf_train_llama_L4_h4096_b2_compiled.json.gz",
    H / "round69/hf_train_gpt2_L12_h1280_b4_compiled.json.gz",
    H / "round84/hf_train_gpt2_L16_h1024_b4_compiled.json.gz",
]


def _rows(path: Path) -> list[dict[str, str]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:  # type: ignore[operator]
        return list(csv.DictReader(f))


def _host_rows(flag: str, traces: list[Path]) -> list[dict[str, str]]:
    with tempfile.TemporaryDirectory() as d, contextlib.redirect_stdout(io.StringIO()):
        out = Path(d) / "rows.csv"
        host_trace([flag, *map(str, traces), "-o", str(out)])
        return _rows(out)


def _probe(r: dict[str, str], cols: tuple[str, ...]) -> float:
    """The geometric mean of the row's probe columns (0 where one is missing)."""
    vals = [float(r.get(c) or 0.0) for c in cols]
    return math.exp(statistics.fmean(math.log(v) for v in vals)) if all(v > 0 for v in vals) else 0.0


def _code(r: dict[str, str]) -> str:
    return ("hf_" if r.get("impl") == "huggingface" else "") + r["act"]


def across_runs(
    fit: list[dict[str, str]], held: list[dict[str, str]], seg: str, cols: tuple[str, ...]
) -> list[float]:
    """Per held-apart trace, the log of its median units over the fit runs' median units of its code."""
    ref: dict[str, float] = {}
    for c in {_code(r) for r in fit}:
        units = [float(r[seg]) / _probe(r, cols) for r in fit if _code(r) == c and _probe(r, cols) > 0]
        if units:
            ref[c] = statistics.median(units)
    per: dict[str, list[float]] = {}
    for r in held:
        if _probe(r, cols) > 0 and _code(r) in ref:
            per.setdefault(r["trace"], []).append(math.log(float(r[seg]) / _probe(r, cols) / ref[_code(r)]))
    return [statistics.median(v) for v in per.values()]


def within(fit: list[dict[str, str]], seg: str, cols: tuple[str, ...]) -> float:
    """The spread (sd of the log) of the fit steps' units over their code's median, pooled over the codes."""
    errs: list[float] = []
    for c in {_code(r) for r in fit}:
        units = [float(r[seg]) / _probe(r, cols) for r in fit if _code(r) == c and _probe(r, cols) > 0]
        if units:
            med = statistics.median(units)
            errs += [math.log(u / med) for u in units]
    return math.sqrt(statistics.fmean(e * e for e in errs)) if errs else float("nan")


def compiled_errors(fit: list[dict[str, str]], held: list[dict[str, str]], seg: str, col: str) -> list[float]:
    """Per held-apart compiled trace, the log of its median ``seg`` seconds (``fwd``: the forward regions,
    ``rest``: the step but them and the optimizer) over the fit steps' least-squares line of ``seg`` in ``col``
    units over the layer count of its model (GPT-2 or Llama), at its own median ``col``."""
    import numpy as np

    def parts(r: dict[str, str]) -> tuple[str, int, float, float]:
        name = Path(r["trace"]).name
        fwd = float(r["fwd_region_s"])
        rest = float(r["step_s"]) - fwd - float(r["optimizer_s"])
        return ("gpt2" if "gpt2" in name else "llama"), int(name.split("_L")[1].split("_")[0].split(".")[0]), fwd, rest

    k = 2 if seg == "fwd" else 3
    lines = {}
    for m in ("gpt2", "llama"):
        pts = [(parts(r)[1], parts(r)[k] / float(r[col])) for r in fit if parts(r)[0] == m and float(r[col] or 0) > 0]
        lines[m] = np.polyfit([x for x, _ in pts], [y for _, y in pts], 1)
    per: dict[str, list[tuple[float, float, float]]] = {}
    for r in held:
        if float(r.get(col) or 0.0) > 0:
            m, n, *_ = parts(r)
            per.setdefault(r["trace"], []).append((parts(r)[k], float(r[col]), float(np.polyval(lines[m], n))))
    out = []
    for v in per.values():
        meas, probe, units = (statistics.median(x[i] for x in v) for i in range(3))
        out.append(math.log(units * probe / meas))
    return out


def _report(label: str, errs: list[float], fit_spread: float | None = None) -> None:
    rms = math.sqrt(statistics.fmean(e * e for e in errs)) if errs else float("nan")
    fit = "" if fit_spread is None else f"  (fit steps' own spread {fit_spread:.3f})"
    print(f"  {label:34s} traces {len(errs):2d}  rms log error {rms:.3f}{fit}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--decode", action="store_true", help="decode layers (else training layers)")
    ap.add_argument(
        "--hf-training", action="store_true", help="transformers training layers against rounds 102 and 104's fit steps"
    )
    ap.add_argument(
        "--hf-compiled", action="store_true", help="transformers compiled training steps against round 70's fit steps"
    )
    args = ap.parse_args()
    if args.hf_compiled:
        fit = _rows(H / "host_compiled_steps_hf.csv.gz")
        held = _host_rows("--compiled", HF_COMPILED_HELD)
        for seg, cands in (
            ("fwd", (("aten::empty", "empty_main_s"), ("kernel launches (stop 32)", "launch_main_s"))),
            ("rest", (("aten::empty", "empty_bwd_s"), ("kernel launches (stop 32)", "launch_bwd_s"))),
        ):
            print(f"{seg} (transformers compiled: round 70's fit steps against held-apart steps of the same code)")
            for label, col in cands:
                _report(label, compiled_errors(fit, held, seg, col))
        return
    if args.hf_training:
        fit = [
            r
            for n in ("host_steps_hf_r102.csv.gz", "host_steps_hf_r104.csv.gz")
            for r in _rows(H / n)
            if r["synchronized"] == "False"
        ]
        held = [
            r
            for r in _host_rows("--steps", [p for p in HF_TRAIN_HELD if p.exists()])
            if r["impl"] == "huggingface" and r["weights"] == "fp32" and not r["profiler"]
            and r["optimizer"] == "adamw_fused" and r["act"] in ("swiglu", "gelu")
        ]  # fmt: skip
        for seg, cands in (
            ("fwd_layer_s", (("aten::t", ("probe_main_s",)), ("aten::t + aten::empty", ("probe_main_s", "empty_main_s")),
                             ("aten::empty", ("empty_main_s",)), ("GEMM op median", ("linear_main_s",)),
                             ("GEMM op mean (stop 31)", ("gemm_mean_main_s",)))),
            ("bwd_layer_s", (("aten::t", ("probe_bwd_s",)), ("aten::t + aten::empty", ("probe_bwd_s", "empty_bwd_s")),
                             ("aten::empty", ("empty_bwd_s",)), ("aten::mm median", ("mm_bwd_s",)),
                             ("aten::mm mean (stop 31)", ("mm_mean_bwd_s",)))),
        ):  # fmt: skip
            print(f"{seg} (transformers: rounds 102 and 104's fit steps against held-apart steps of the same code)")
            for label, cols in cands:
                _report(label, across_runs(fit, held, seg, cols), within(fit, seg, cols))
        return
    if args.decode:
        fit = [r for r in _rows(H / "host_decode_r42.csv.gz") if r["seq"] == "1" and r["act"] == "swiglu"]
        held = [r for r in _host_rows("--decode", DECODE_HELD) if r["seq"] == "1"]
        print("decode layer (simcore's Llama blocks; round 42's fit passes)")
        for label, cols in (
            ("aten::t", ("probe_main_s",)),
            ("aten::linear", ("linear_main_s",)),
            ("aten::linear + aten::empty", ("linear_main_s", "empty_main_s")),  # stop 29's gemm_pace
        ):
            _report(label, across_runs(fit, held, "layer_s", cols))
        return
    fit = [r for r in _rows(H / "round45/steps_probes.csv.gz") if r["synchronized"] == "False"]
    held = _host_rows("--steps", TRAIN_HELD)
    for seg, cands in (
        ("fwd_layer_s", (("aten::t", ("probe_main_s",)), ("GEMM op", ("linear_main_s",)),
                         ("aten::empty", ("empty_main_s",)), ("aten::t + GEMM op", ("probe_main_s", "linear_main_s")),
                         ("aten::t + aten::empty", ("probe_main_s", "empty_main_s")))),
        ("bwd_layer_s", (("aten::t", ("probe_bwd_s",)), ("aten::mm", ("mm_bwd_s",)),
                         ("aten::empty", ("empty_bwd_s",)), ("aten::t + aten::empty", ("probe_bwd_s", "empty_bwd_s")))),
    ):  # fmt: skip
        print(f"{seg} (round 45's fit steps against held-apart traces of the same code)")
        for label, cols in cands:
            _report(label, across_runs(fit, held, seg, cols))


if __name__ == "__main__":
    main()
