"""The MoE dispatch and combine of hierarchical dispatchers (``runtime.moe_dispatcher``: ``deepep``,
``hybridep``): a routed token crosses the fabric once per destination NVLink domain and is forwarded over
NVLink to each GPU of that domain holding one of its experts, instead of one all-to-all copy per expert.

For a token routed to ``k`` distinct experts out of ``E``, spread evenly over the ``n`` ranks of the
expert-parallel group, ``g`` of them in each of ``d`` NVLink domains, a domain (``E / d`` experts) is hit
with probability ``p_d = 1 - C(E - E/d, k) / C(E, k)`` and a rank (``E / n`` experts) with ``p_n`` likewise
(uniform routing: the published runs force-balance their routers). Per rank and token bytes ``s``:

    network load = s * (d - 1) * p_d        (one RDMA copy to each other domain hit)
    NVLink load  = s * (n - d) * p_n        (from the landing GPU to each other GPU hit in its domain)
    time         = latency + max(network load / (B_net * e_net), NVLink load / (B_nv * e_nv))

with ``B`` the link rates of :func:`simcore.comm.collectives.link_rates`, ``e`` the dispatcher's published
achieved fractions (:mod:`simcore.specs.dispatcher`), and the latency the NCCL all-to-all's on the same
group at one byte (its calibrated per-call floor and per-peer steps). The NCCL all-to-all instead sends
``s * k * (n - g) / n`` over the fabric. See docs/parallelism.md, "The MoE dispatcher".
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from simcore.comm.collectives import collective_cost, link_rates
from simcore.comm.groups import FloatArray, GroupPlacement
from simcore.errors import SimcoreError
from simcore.specs.dispatcher import load_dispatcher
from simcore.specs.resolve import ClusterInfo


def hit_probability(experts: int, top_k: int, parts: ArrayLike) -> FloatArray:
    """Probability that one of ``parts`` equal shares of ``experts`` experts holds at least one of a token's
    ``top_k`` distinct experts, chosen uniformly: ``1 - C(E - E/parts, k) / C(E, k)``."""
    if not 1 <= top_k <= experts:
        raise SimcoreError(f"top_k {top_k} must lie in 1..experts ({experts})", field="top_k")
    e = float(experts)
    share = e / np.maximum(np.asarray(parts, dtype=np.float64), 1.0)
    miss = np.ones_like(share)
    for i in range(top_k):
        miss = miss * np.clip((e - share - i) / (e - i), 0.0, 1.0)
    return 1.0 - miss


def dispatch_time(
    nbytes: ArrayLike,
    top_k: int,
    experts: int,
    group: GroupPlacement,
    cluster: ClusterInfo,
    dispatcher: str,
) -> FloatArray:
    """Seconds of one hierarchical dispatch (or combine) over ``group``; ``nbytes``: the routed bytes per
    rank an NCCL all-to-all would send (tokens x ``top_k`` x hidden x element bytes, times the busiest
    rank's skew), so a token's own bytes are ``nbytes / top_k``."""
    spec = load_dispatcher(dispatcher)
    s = np.asarray(nbytes, dtype=np.float64) / top_k
    n, d = group.size, group.domains
    load_net = s * (d - 1.0) * hit_probability(experts, top_k, d)
    load_nv = s * (n - d) * hit_probability(experts, top_k, n)
    rates = link_rates(cluster, group)
    wire = np.maximum(
        load_nv / (rates.nvlink * spec.nvlink_efficiency),
        np.where(load_net > 0.0, load_net / (rates.network * spec.network_efficiency), 0.0),
    )
    latency = collective_cost("all_to_all", np.ones_like(s), group, cluster).time_s
    return np.where(n > 1, latency + wire, 0.0)
