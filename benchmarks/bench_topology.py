"""Speed of simcore.comm.topology: build time, path queries/s, ring flow counting, bisection.

Run: ``python benchmarks/bench_topology.py [--sizes 8,128,512,2048] [--system hgx-h200]``.
Prints one line per cluster size; numbers are wall-clock on this machine (best of a few repeats).
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable
from functools import partial

from simcore.comm.topology import topology_for


def best(fn: Callable[[], object], repeats: int) -> float:
    """Fastest of ``repeats`` runs of ``fn``, in seconds."""
    out = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out = min(out, time.perf_counter() - t0)
    return out


def run_pairs(fn: Callable[[int, int], object], pairs: list[tuple[int, int]]) -> None:
    """Call ``fn(a, b)`` for every pair."""
    for a, b in pairs:
        fn(a, b)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--system", default="hgx-h200")
    ap.add_argument("--sizes", default="8,128,512,2048", help="comma-separated system counts")
    ap.add_argument("--queries", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print(
        f"{'systems':>7} {'gpus':>6} {'tiers':>5} {'nodes':>7} {'edges':>8} {'build s':>8} "
        f"{'path/s':>9} {'bneck/s':>9} {'ring s':>7} {'bisect s':>8} {'bisection':>12}"
    )
    for n in (int(x) for x in args.sizes.split(",")):
        tiers = 2 if n <= 256 else 3
        build_s = best(partial(topology_for, args.system, nodes=n, tiers=tiers), args.repeats)
        t = topology_for(args.system, nodes=n, tiers=tiers)
        rnd = random.Random(0)
        pairs = [(rnd.randrange(t.gpus), rnd.randrange(t.gpus)) for _ in range(args.queries)]

        path_s = best(partial(run_pairs, t.path, pairs), args.repeats)
        bneck_s = best(partial(run_pairs, t.bottleneck_bandwidth, pairs), args.repeats)
        ring_s = best(partial(t.links_crossed, range(t.gpus), "ring"), args.repeats)
        t0 = time.perf_counter()
        bis = t.bisection_bandwidth()
        bis_s = time.perf_counter() - t0
        g = t.graph
        print(
            f"{n:>7} {t.gpus:>6} {t.tiers:>5} {g.number_of_nodes():>7} {g.number_of_edges():>8} "
            f"{build_s:>8.3f} {len(pairs) / path_s:>9.0f} {len(pairs) / bneck_s:>9.0f} {ring_s:>7.3f} "
            f"{bis_s:>8.3f} {bis / 1e12:>8.1f} TB/s"
        )


if __name__ == "__main__":
    main()
