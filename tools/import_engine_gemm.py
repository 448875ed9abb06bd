"""Import a serving engine's measured GEMM (linear-layer) table from NVIDIA AIConfigurator's per-GPU
kernel database into a ``simcore calibrate`` collection (docs/compute.md, "Blackwell's GEMMs from engine
tables").

AIConfigurator (ai-dynamo/aiconfigurator, Apache-2.0) ships, per GPU and TensorRT-LLM version,
``gemm_perf.parquet``: the device time of one TensorRT-LLM ``Linear`` forward (``collector/trtllm/collect_gemm.py``:
a bf16 input of ``m x k``, weights ``n x k`` in the table's format; FP8 and NVFP4 linears quantize the input
in their own kernel first), replayed in a CUDA graph, weights rotated through enough copies to leave the L2
(``outside_loop_count``), averaged over the replays. This tool keeps the numbers and where they came from:

    python tools/import_engine_gemm.py /path/to/aiconfigurator b200_sxm 1.2.0rc5 traces/b200/trtllm_gemm

writes ``gemm.csv.gz`` (``dtype,m,n,k,time_s``; dtype as simcore names it: ``bf16``, ``fp8_tensor`` for
TensorRT-LLM's per-tensor FP8, ``fp4`` for NVFP4) and ``engine_gemm.json`` (source repository, commit, file,
engine version, device, what was timed). Needs ``pyarrow`` (not a simcore dependency: only this import reads
parquet) and a checkout of the repository (``git -C REPO rev-parse HEAD`` gives the commit recorded).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import subprocess
import sys
from pathlib import Path

DTYPES = {"bfloat16": "bf16", "fp8": "fp8_tensor", "nvfp4": "fp4"}
"""AIConfigurator's ``gemm_dtype`` -> simcore's GEMM family (``fp8`` there is ``QuantAlgo.FP8``: per-tensor
scales, cuBLASLt's per-tensor kernel)."""

SIMCORE_DEVICE = {"b200_sxm": "b200", "gb200": "gb200", "h100_sxm": "h100", "h200_sxm": "h200", "b300_sxm": "b300",
                  "gb300": "gb300"}  # fmt: skip

DATA = "aic-core/src/aiconfigurator_core/systems/data"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("repo", type=Path, help="a checkout of ai-dynamo/aiconfigurator")
    ap.add_argument("system", help="AIConfigurator's system folder, e.g. b200_sxm, gb200")
    ap.add_argument("version", help="TensorRT-LLM version folder, e.g. 1.2.0rc5")
    ap.add_argument("out", type=Path, help="collection folder to write (e.g. traces/b200/trtllm_gemm)")
    ap.add_argument("--commit", help="the repository's commit (default: git -C REPO rev-parse HEAD)")
    a = ap.parse_args(argv)
    try:
        import pyarrow.parquet as pq
    except ImportError:
        print("import_engine_gemm: needs pyarrow (pip install pyarrow)", file=sys.stderr)
        return 2
    rel = f"{DATA}/{a.system}/gemm/trtllm/{a.version}/gemm_perf.parquet"
    src = a.repo / rel
    if not src.is_file():
        print(f"import_engine_gemm: {src}: no such table", file=sys.stderr)
        return 2
    if a.system not in SIMCORE_DEVICE:
        print(f"import_engine_gemm: {a.system}: unknown system (known: {', '.join(SIMCORE_DEVICE)})", file=sys.stderr)
        return 2
    commit = a.commit or subprocess.run(["git", "-C", str(a.repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=False).stdout.strip() or None  # fmt: skip
    t = pq.read_table(src).to_pylist()
    rows = sorted(
        (DTYPES[r["gemm_dtype"]], int(r["m"]), int(r["n"]), int(r["k"]), float(r["latency"]) * 1e-3)
        for r in t
        if r["gemm_dtype"] in DTYPES and r["latency"] and r["latency"] > 0
    )
    a.out.mkdir(parents=True, exist_ok=True)
    with gzip.open(a.out / "gemm.csv.gz", "wt", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["dtype", "m", "n", "k", "time_s"])
        w.writerows((d, m, n, k, f"{s:.6g}") for d, m, n, k, s in rows)
    devices = sorted({str(r["device"]) for r in t})
    manifest = {
        "kind": "engine_gemm",
        "engine": "tensorrt-llm",
        "engine_version": a.version,
        "device": SIMCORE_DEVICE[a.system],
        "device_name": devices,
        "source": {"repository": "ai-dynamo/aiconfigurator", "commit": commit, "path": rel, "license": "Apache-2.0"},
        "timed": "one TensorRT-LLM Linear forward (collector/trtllm/collect_gemm.py) on a bf16 input: FP8 (QuantAlgo.FP8, "
                 "per-tensor) and NVFP4 linears quantize the input in a kernel of their own before the GEMM; replayed in a "
                 "CUDA graph (helper.benchmark_with_power: 3 warm-ups, 6 replays), weights rotated through copies that "
                 "exceed the L2; latency per linear",
        "dtypes": {v: k for k, v in DTYPES.items()},
        "rows": len(rows),
        "imported_by": "tools/import_engine_gemm.py",
    }  # fmt: skip
    (a.out / "engine_gemm.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"wrote {a.out}/gemm.csv.gz ({len(rows)} rows) and engine_gemm.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
