"""Median-of-runs merge of several `tools/bench_host.py --infer` CSVs (no torch needed).

  python tools/merge_host_median.py run1.csv.gz run2.csv.gz ... --out host_infer_r6.csv

Round 3 merged two runs by taking the minimum per measured point and recomputing the slopes from the minima,
which mixes runs: a 1-layer point from one run and a 4-layer point from another give a slope neither run saw
(llama decode per layer 342 us while the runs' own slopes were 162 and 400 us). Here every run's derived
quantities are computed from that run's own points only (each run is one process, so runs are independent
samples), and the committed value is the MEDIAN over runs of those per-run values; the notes give the
interquartile range (statistics.quantiles, method 'inclusive') and every run's value.

Rows written (framework `derived` unless said):
  env                                   versions (run 1's) + how merged
  <derived name>                        median over runs (host and gpu columns separately), named as round 3's
                                        derived rows: per_layer_{decode,prefill}_<v>, per_layer_*_<v>_1to8,
                                        {decode,prefill}_fixed_<v>, per_layer_decode_infmode_<v>,
                                        graph_decode_per_layer_<v>(_1to8), graph_decode_fixed_<v>,
                                        graph_decode_per_kernel_<v>
  <measured name>  (framework eager)    median over runs of that point (for reference; derived rows do not use it)
  kernels_*        (framework profiler) run 1's profiler counts (deterministic)
  <derived name>_run<k>                 run k's own derived value
  <measured name>_run<k>                run k's raw row
"""

from __future__ import annotations

import argparse
import csv
import gzip
import statistics
import sys

COLS = ["name", "framework", "calls", "host_s_per_call", "gpu_s_per_call", "notes"]
VARIANTS = ("gpt_ln_gelu", "llama_rms_swiglu_gqa")


def read_csv(path: str) -> list[dict[str, str]]:
    with gzip.open(path, "rt") if path.endswith(".gz") else open(path) as f:
        return list(csv.DictReader(f))


def _f(s: str | None) -> float | None:
    s = (s or "").strip()
    return float(s) if s else None


def derived_of_run(rows: list[dict[str, str]]) -> dict[str, tuple[float | None, float | None, str]]:
    """name -> (host, gpu, formula) of one run's derived quantities, from that run's measured points only."""
    host = {r["name"]: _f(r["host_s_per_call"]) for r in rows if r["framework"] == "eager"}
    gpu = {r["name"]: _f(r["gpu_s_per_call"]) for r in rows if r["framework"] == "eager"}
    kpl: dict[str, float] = {}
    for r in rows:
        if r["name"].startswith("kernels_per_layer_decode_") and r["calls"]:
            kpl[r["name"].removeprefix("kernels_per_layer_decode_")] = float(r["calls"])
    out: dict[str, tuple[float | None, float | None, str]] = {}

    def lin(name: str, terms: list[tuple[float, str]], div: float, formula: str) -> None:
        def comb(d: dict[str, float | None]) -> float | None:
            vals = [d.get(t) for _, t in terms]
            if any(v is None for v in vals):
                return None
            return sum(c * v for (c, _), v in zip(terms, vals, strict=True)) / div  # type: ignore[operator]

        h, g = comb(host), comb(gpu)
        if h is not None:
            out[name] = (h, g, formula)

    for v in VARIANTS:
        for stem in ("decode", "prefill"):
            a, b, c = (f"{stem}_layers{L}_{v}" for L in (1, 4, 8))
            lin(f"per_layer_{stem}_{v}", [(1, b), (-1, a)], 3, f"({b} - {a}) / 3")
            lin(f"per_layer_{stem}_{v}_1to8", [(1, c), (-1, a)], 7, f"({c} - {a}) / 7")
            lin(f"{stem}_fixed_{v}", [(4 / 3, a), (-1 / 3, b)], 1, f"4/3 {a} - 1/3 {b}")
        a, b = f"decode_infmode_layers1_{v}", f"decode_infmode_layers4_{v}"
        lin(f"per_layer_decode_infmode_{v}", [(1, b), (-1, a)], 3, f"({b} - {a}) / 3")
        a, b, c = (f"graph_decode_layers{L}_{v}" for L in (1, 4, 8))
        lin(f"graph_decode_per_layer_{v}", [(1, b), (-1, a)], 3, f"({b} - {a}) / 3")
        lin(f"graph_decode_per_layer_{v}_1to8", [(1, c), (-1, a)], 7, f"({c} - {a}) / 7")
        lin(f"graph_decode_fixed_{v}", [(4 / 3, a), (-1 / 3, b)], 1, f"4/3 {a} - 1/3 {b}")
        gpl = out.get(f"graph_decode_per_layer_{v}")
        k = kpl.get(v)
        if gpl and k:
            out[f"graph_decode_per_kernel_{v}"] = (
                gpl[0] / k if gpl[0] is not None else None,
                gpl[1] / k if gpl[1] is not None else None,
                f"graph_decode_per_layer_{v} / kernels_per_layer_decode_{v} ({k:g})",
            )
    return out


def stats(xs: list[float]) -> tuple[float, float, float]:
    """(median, q1, q3); quartiles by statistics.quantiles(method='inclusive'), equal to the value for one run."""
    med = statistics.median(xs)
    if len(xs) < 2:
        return med, med, med
    q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return med, q1, q3


def merge(paths: list[str], out_path: str) -> dict[str, tuple[float, float, float, list[float]]]:
    """Write the median-merged CSV; returns host-column name -> (median, q1, q3, per-run values) in seconds."""
    runs = [read_csv(p) for p in paths]
    if not runs:
        sys.exit("no input CSVs")
    n = len(runs)
    per_run = [derived_of_run(rs) for rs in runs]
    names: list[str] = []
    for d in per_run:
        names += [k for k in d if k not in names]
    summary: dict[str, tuple[float, float, float, list[float]]] = {}
    gz = out_path.endswith(".gz")
    opener = gzip.open(out_path, "wt", newline="") if gz else open(out_path, "w", newline="")  # noqa: SIM115
    with opener as f:
        w = csv.DictWriter(f, COLS)
        w.writeheader()
        env = [r for r in runs[0] if r["name"] == "env"]
        w.writerow(
            dict(
                name="env",
                framework="",
                notes=(env[0]["notes"] if env else "")
                + f"; merged: median over {n} independent runs (separate processes) of each run's own derived "
                "values (tools/merge_host_median.py)",
            )
        )
        for name in names:
            hs = [d[name][0] for d in per_run if name in d and d[name][0] is not None]
            gs = [d[name][1] for d in per_run if name in d and d[name][1] is not None]
            if not hs:
                continue
            formula = next(d[name][2] for d in per_run if name in d)
            mh, q1, q3 = stats(hs)  # type: ignore[arg-type]
            summary[name] = (mh, q1, q3, hs)  # type: ignore[assignment]
            mg = statistics.median(gs) if gs else None  # type: ignore[type-var]
            per = ", ".join(f"{x * 1e6:.1f}" for x in hs)  # type: ignore[operator]
            gnote = ""
            if gs:
                _, g1, g3 = stats(gs)  # type: ignore[arg-type]
                gnote = f"; gpu IQR {g1 * 1e6:.2f}-{g3 * 1e6:.2f} us"
            w.writerow(
                dict(
                    name=name,
                    framework="derived",
                    host_s_per_call=f"{mh:.6g}",
                    gpu_s_per_call="" if mg is None else f"{mg:.6g}",
                    notes=f"median over {len(hs)} runs of each run's own {formula}; host IQR "
                    f"{q1 * 1e6:.1f}-{q3 * 1e6:.1f} us; per run (us): {per}{gnote}",
                )
            )
        measured: dict[str, list[dict[str, str]]] = {}
        for rs in runs:
            for r in rs:
                if r["framework"] == "eager" and r["host_s_per_call"]:
                    measured.setdefault(r["name"], []).append(r)
        for name, rs in measured.items():
            hs = [float(r["host_s_per_call"]) for r in rs]
            gs = [float(r["gpu_s_per_call"]) for r in rs if r["gpu_s_per_call"]]
            mh, q1, q3 = stats(hs)
            w.writerow(
                dict(
                    name=name,
                    framework="eager",
                    calls=rs[0]["calls"],
                    host_s_per_call=f"{mh:.6g}",
                    gpu_s_per_call=f"{statistics.median(gs):.6g}" if gs else "",
                    notes=rs[0]["notes"].split("; spread")[0]
                    + f"; median over {len(hs)} runs (host IQR {q1 * 1e6:.1f}-{q3 * 1e6:.1f} us; per run: "
                    + ", ".join(f"{x * 1e6:.1f}" for x in hs)
                    + ")",
                )
            )
        for r in runs[0]:
            if r["name"].startswith("kernels_"):
                w.writerow({c: r.get(c, "") for c in COLS})
        for k, d in enumerate(per_run, 1):
            for name, (h, g, formula) in d.items():
                if h is None:
                    continue
                w.writerow(
                    dict(
                        name=f"{name}_run{k}",
                        framework="derived",
                        host_s_per_call=f"{h:.6g}",
                        gpu_s_per_call="" if g is None else f"{g:.6g}",
                        notes=f"run {k} alone: {formula}",
                    )
                )
        for k, rs in enumerate(runs, 1):
            for r in rs:
                if r["framework"] == "eager" and r["host_s_per_call"]:
                    w.writerow(dict({c: r.get(c, "") for c in COLS}, name=f"{r['name']}_run{k}"))
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", help="CSV(.gz) files of bench_host.py --infer runs")
    ap.add_argument("--out", required=True, help="merged CSV (.gz compresses)")
    args = ap.parse_args()
    s = merge(args.runs, args.out)
    print(f"{'quantity':52s} {'median':>9s} {'q1':>9s} {'q3':>9s}  per run (us)")
    for name, (m, q1, q3, xs) in s.items():
        print(
            f"{name:52s} {m * 1e6:9.1f} {q1 * 1e6:9.1f} {q3 * 1e6:9.1f}  "
            + " ".join(f"{x * 1e6:.0f}" for x in xs)
        )


if __name__ == "__main__":
    main()
