"""Speed of the flow-level simulator: 1,000 concurrent transfers on a 128-node HGX H200 fabric.

    python benchmarks/bench_flow.py [--flows 1000] [--nodes 128] [--oversubscription 2]

Prints the topology size, the build time, and the simulation time (target: < 2 s for the simulation).
Transfers pick random source and destination GPUs (seeded), sizes log-uniform 1 MB..256 MB, start
times uniform over the first millisecond, so rates are recomputed at about 2,000 events.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from simcore.comm.flow import Flow, simulate_flows
from simcore.comm.topology import build_topology
from simcore.specs.hardware import FabricSpec
from simcore.specs.registry import default_registry
from simcore.specs.resolve import resolve_cluster
from simcore.specs.scenario import ClusterSpec


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--flows", type=int, default=1000)
    ap.add_argument("--nodes", type=int, default=128)
    ap.add_argument("--system", default="hgx-h200")
    ap.add_argument("--oversubscription", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    spec = ClusterSpec(
        system=args.system, nodes=args.nodes, fabric=FabricSpec(oversubscription=args.oversubscription)
    )
    t0 = time.perf_counter()
    cluster = resolve_cluster(spec, default_registry())
    topo = build_topology(cluster)
    t_build = time.perf_counter() - t0

    rng = np.random.default_rng(args.seed)
    n = cluster.gpus
    src = rng.integers(0, n, args.flows)
    dst = (src + rng.integers(1, n, args.flows)) % n
    size = np.exp(rng.uniform(np.log(1e6), np.log(256e6), args.flows))
    start = rng.uniform(0.0, 1e-3, args.flows)
    flows = [
        Flow(int(a), int(b), float(s), float(t)) for a, b, s, t in zip(src, dst, size, start, strict=True)
    ]

    t0 = time.perf_counter()
    fin = simulate_flows(topo, flows)
    t_sim = time.perf_counter() - t0
    g = topo.graph
    print(
        f"fabric: {args.nodes} x {cluster.system.name} = {n} GPUs, {g.number_of_nodes()} nodes, "
        f"{g.number_of_edges()} directed links (built in {t_build:.2f} s)"
    )
    print(f"flows: {args.flows} concurrent, last finishes at {max(fin) * 1e3:.2f} ms simulated")
    print(f"simulation wall time: {t_sim:.3f} s (target < 2 s) -> {'OK' if t_sim < 2.0 else 'TOO SLOW'}")


if __name__ == "__main__":
    main()
