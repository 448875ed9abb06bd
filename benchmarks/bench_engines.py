"""Speed of the training engines on the issue-5 targets.

python benchmarks/bench_engines.py

* DES: one training step of a 1T-parameter GPT (preset gpt-1t) on 4096 GPUs (TP 8 x PP 64 x DP 8,
  interleaved 1F1B with vp 2, 512 micro-batches per pipeline) -- target < 5 s;
* analytic engine: the same step, the ``simcore.engine.training.evaluate`` call after a warm-up
  -- target < 5 ms;
* a single-GPU scenario through ``simcore.predict`` (after import and one warm-up) -- target < 50 ms.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

T_IMPORT = time.perf_counter()
import simcore  # noqa: E402
from simcore.engine import training as T  # noqa: E402
from simcore.engine.timeline import simulate_training  # noqa: E402
from simcore.prediction import layout_of  # noqa: E402
from simcore.specs.registry import default_registry  # noqa: E402
from simcore.specs.resolve import resolve_cluster, scenario_from_dict  # noqa: E402

IMPORT_S = time.perf_counter() - T_IMPORT

GPT_1T = {
    "name": "gpt-1t-4096",
    "kind": "training",
    "cluster": {"system": "hgx-h100", "gpus": 4096},
    "model": {"preset": "gpt-1t"},
    "training": {"micro_batch": 1, "global_batch": 4096, "precision": "bf16", "recompute": "full"},
    "parallel": {"tp": 8, "pp": 64, "vp": 2, "schedule": "interleaved", "sequence_parallel": True},
}

SINGLE = {
    "name": "llama3-8b-1xh200",
    "kind": "training",
    "cluster": {"system": "hgx-h200", "gpus": 1},
    "model": {"preset": "llama3-8b", "seq_len": 4096},
    "training": {"micro_batch": 1, "global_batch": 8, "recompute": "full"},
}


def best_of(fn: Any, repeat: int) -> tuple[float, float]:
    """(best, median) wall seconds of ``fn()`` over ``repeat`` runs."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times)


def main() -> None:
    reg = default_registry()
    sc = scenario_from_dict(GPT_1T, reg)
    cl = resolve_cluster(sc.cluster, reg)
    lay = layout_of(sc, cl)
    assert sc.training is not None
    tl = T.TrainingLayout(**{k: v for k, v in lay.items() if k in T.TrainingLayout.__dataclass_fields__})

    def analytic() -> T.TrainingEval:
        return T.evaluate(sc.model, sc.training, tl, cl, sc.runtime.framework, sc.calibration)  # type: ignore[arg-type]

    ev = analytic()  # warm-up (profile loading, caches)
    a_best, a_med = best_of(analytic, 50)

    res: list[Any] = []

    def des() -> None:
        res.append(simulate_training(sc, cl, lay, ev))

    d_best, d_med = best_of(des, 3)
    r = res[-1]
    m = int(round(float(ev.microbatches)))
    print(f"import simcore               : {IMPORT_S * 1e3:8.1f} ms")
    print(
        f"gpt-1t on {cl.gpus} GPUs: tp {lay['tp']} pp {lay['pp']} dp {lay['dp']} vp {lay['vp']}, "
        f"{m} micro-batches, {len(r.events):,} DES events"
    )
    print(
        f"  DES step                   : {d_best:8.3f} s  (median {d_med:.3f} s; target < 5 s)  "
        f"step {r.step_time_s:.2f} s, bubble {r.bubble_fraction:.3f}"
    )
    print(
        f"  analytic evaluate          : {a_best * 1e3:8.3f} ms (median {a_med * 1e3:.3f} ms; target < 5 ms)  "
        f"step {float(ev.step_time_s):.2f} s, bubble {float(ev.bubble_fraction):.3f}"
    )
    print(f"  DES / analytic step        : {r.step_time_s / float(ev.step_time_s):.4f}")

    single = scenario_from_dict(SINGLE, reg)
    simcore.predict(single)  # warm-up
    s_best, s_med = best_of(lambda: simcore.predict(single), 20)
    print(
        f"single-GPU predict           : {s_best * 1e3:8.2f} ms (median {s_med * 1e3:.2f} ms; target < 50 ms)"
    )
    s_path_best, _ = best_of(lambda: simcore.predict("scenarios/default.yaml"), 5)
    print(f"predict scenarios/default    : {s_path_best * 1e3:8.2f} ms (YAML load included)")


if __name__ == "__main__":
    main()
