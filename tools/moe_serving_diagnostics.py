"""Diagnostics of the TensorRT-LLM MoE rows of ``python -m simcore.validation serving`` (docs/serving.md,
"TensorRT-LLM MoE rows, third round"). Nothing here changes a row's settings or the model; each mode runs the
rows once more with one thing changed and prints the error per row (run from the repository root with
``PYTHONPATH=.`` so that this checkout's simcore is imported):

    python tools/moe_serving_diagnostics.py h100 Scout 1.5    # the rows as the study runs them, imbalance 1.5
    python tools/moe_serving_diagnostics.py tp Scout          # TP attention, experts TP-sharded (attention_dp 1)
    python tools/moe_serving_diagnostics.py tp-ep Scout       # TP attention, experts whole on the TP ranks (ep = tp)
    python tools/moe_serving_diagnostics.py h200 Maverick     # the same page's H200 cells, same commands

An optional third argument sets ``model.moe.imbalance`` on every MoE layer (default 1, the model's).

The H200 cells are held out of the validation table (its rows are the H100's); they are the performance
overview's own numbers (NVIDIA/TensorRT-LLM@00f37686 docs/source/performance/perf-overview.md, H200 TP4 for
Scout, TP8 for Qwen3-235B-A22B and Maverick, FP8), used here only as a contrast.
"""

from __future__ import annotations

import statistics
import sys
from typing import Any

import simcore.specs.resolve as resolve
from simcore.validation import serving as V

H200 = {
    "scout": {(128, 2048): 34316, (128, 4096): 21332, (500, 2000): 24630, (1000, 1000): 21636,
              (1000, 2000): 18499, (2048, 128): 3699, (2048, 2048): 14949, (5000, 500): 4605},
    "qwen3": {(128, 2048): 42821, (128, 4096): 26852, (500, 2000): 28026, (1000, 1000): 23789,
              (1000, 2000): 22061, (2048, 2048): 16672, (5000, 500): 3623},
    "maverick": {(128, 2048): 40572, (128, 4096): 24616, (500, 2000): 37835, (1000, 1000): 31782,
                 (1000, 2000): 34734, (2048, 2048): 20957, (5000, 500): 8456},
}  # fmt: skip


def _patch(imbalance: float | None, ep_is_tp: bool) -> None:
    """Every scenario the study builds gets ``model.moe.imbalance`` (where given) and ``parallel.ep`` = its ``tp``
    (``ep_is_tp``)."""
    build = resolve.scenario_from_dict

    def patched(d: dict[str, Any], *a: Any, **k: Any) -> Any:
        if imbalance is not None:
            d = {**d, "model": {**d["model"], "moe": {"imbalance": imbalance}}}
        if ep_is_tp:
            d = {**d, "parallel": {**d["parallel"], "ep": d["parallel"]["tp"]}}
        return build(d, *a, **k)

    resolve.scenario_from_dict = patched  # type: ignore[assignment]


def _bench_limits_without_attention_dp() -> None:
    """A row run without attention DP keeps what trtllm-bench picks for it (the MoE rows' limits and request
    counts, :func:`simcore.validation.serving.trtllm_bench_limits` for ``--tp``), not the dense rows' settings."""
    plain = V.settings

    def settings(row: V.ServingRow) -> dict[str, Any]:
        s = plain(row)
        if row.attention_dp == 1 and row.concurrency is None and row.preset and row.system:
            reg = V.default_registry()
            weights = V.param_counts(V._model(row.preset)).total * V.DTYPE_BYTES[row.precision]
            capacity = reg.device(reg.system(row.system).device).memory.capacity
            batch, tokens = V.trtllm_bench_limits(
                row.preset, row.tp, row.isl, row.osl, weights, V.DTYPE_BYTES[s["kv_cache_dtype"]], capacity
            )
            n = V.TRTLLM_BENCH_REQUESTS.get((row.isl, row.osl), s["requests"])
            s.update(max_batch=batch, max_batch_tokens=tokens, requests=n)
        return s

    V.settings = settings  # type: ignore[assignment]


def main(argv: list[str]) -> int:
    mode, model = argv[0], argv[1].lower()
    if mode not in ("h100", "tp", "tp-ep", "h200"):
        print(f"mode {mode!r}: h100, tp, tp-ep or h200", file=sys.stderr)
        return 2
    _patch(float(argv[2]) if len(argv) > 2 else None, mode == "tp-ep")
    if mode in ("tp", "tp-ep"):
        _bench_limits_without_attention_dp()
    errors = []
    for r in V.read_rows():
        if model not in r.model.lower() or r.rate is not None or r.engine != "TensorRT-LLM":
            continue
        if mode in ("tp", "tp-ep"):
            # TensorRT-LLM without attention DP (mapping.py): without --ep moe_tp_size = tp; with --ep = tp,
            # moe_ep_size = tp and moe_tp_size 1
            r.tp, r.attention_dp = r.attention_dp, 1
        elif mode == "h200":
            key = next((k for k in H200 if k in model), None)
            if key is None or (r.isl, r.osl) not in H200[key]:
                continue
            r.system, r.gpu, r.published = "hgx-h200", "H200 SXM 141GB", float(H200[key][(r.isl, r.osl)])
        V.run_row(r)
        if r.error is None:
            print(f"{r.model} {r.gpu} {r.isl}/{r.osl}: {r.problem}")
            continue
        errors.append(abs(r.error))
        print(f"{r.model} {r.gpu} {r.isl}/{r.osl}: published {r.published:,.0f} simulated {r.predicted:,.0f} "
              f"{r.error:+.1%}", flush=True)  # fmt: skip
    if errors:
        print(f"{mode} {' '.join(argv[1:])}: median |error| {statistics.median(errors):.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
