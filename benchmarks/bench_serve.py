"""Speed of the serving simulator: 10,000 requests of the built-in Llama-3 8B / H200 scenario.

python benchmarks/bench_serve.py

Three loads: below saturation (10 requests/s on one H200), saturated (60 requests/s: a queue of
thousands), and 8 replicas on an HGX H200 node with a prefill/decode split (4 + 4 GPUs). Prints
simulated requests and simpy events per second of wall time (median of 3 runs, after a warm-up),
and the time spent building the step-cost table.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from simcore.serving import load_serving, simulate
from simcore.serving.sim import build_step_model
from simcore.specs.registry import default_registry
from simcore.specs.resolve import resolve_cluster

SCEN = Path(__file__).resolve().parent.parent / "scenarios" / "serve_llama3_8b_h200.yaml"
CASES = {
    "1 x H200, 10 req/s": ["serving.rate=10"],
    "1 x H200, 60 req/s (saturated)": ["serving.rate=60"],
    "8 x H200, 4 prefill + 4 decode, 60 req/s": [
        "cluster.gpus=8",
        "serving.rate=60",
        "serving.disaggregated.prefill_gpus=4",
        "serving.disaggregated.decode_gpus=4",
    ],
}


def main() -> None:
    print(f"{'case':44s} {'wall s':>7s} {'req/s':>9s} {'events/s':>10s} {'steps':>8s} {'sim s':>8s}")
    for label, sets in CASES.items():
        sc, spec = load_serving(SCEN, [*sets, "serving.requests=10000"])
        simulate(sc, spec.model_copy(update={"requests": 200}))  # warm-up
        walls = []
        run = None
        for _ in range(3):
            run = simulate(sc, spec)
            walls.append(run.wall_s)
        assert run is not None
        w = statistics.median(walls)
        r = run.result
        print(
            f"{label:44s} {w:7.2f} {r.requests / w:9,.0f} {r.events / w:10,.0f} {r.steps:8,d} {r.duration_s:8.0f}"
        )
    sc, spec = load_serving(SCEN)
    cluster = resolve_cluster(sc.cluster, default_registry())
    t = time.perf_counter()
    build_step_model(sc, cluster, 1, spec.max_batch, sc.model.seq_len, spec.max_batch_tokens)
    print(
        f"step-cost table (batches to {spec.max_batch}, contexts to {sc.model.seq_len}): {time.perf_counter() - t:.3f} s"
    )


if __name__ == "__main__":
    main()
