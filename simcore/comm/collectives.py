"""Analytic cost of NCCL-style collectives: alpha-beta with protocol latencies and bandwidth ramps.

For one collective on a group (see :mod:`simcore.comm.groups`) every candidate algorithm and protocol
is priced as

    time = max(op_overhead,
               base_latency[algorithm][protocol]
               + steps_nvlink * hop_latency[nvlink][protocol] + steps_network * hop_latency[network][protocol]
               + max over link classes of  load / (B_class * ramp(chunk) * protocol_fraction * efficiencies))

where ``load`` is the bytes crossing the busiest port of that class per rank, ``chunk`` the bytes one
step moves, ``B_class`` the spec bandwidth per GPU per direction (NVLink inside the domain, the GPU's
share of the node's NICs on the fabric, divided by the oversubscription when the group leaves a leaf
switch, or by the flow model's contention factor where the caller has one), ``ramp(x) = efficiency / (1 + (ramp_bytes / x) ** ramp_exponent)`` a saturating efficiency
curve (exponent 1 is plain alpha-beta; below 1 the approach to peak is slower, as measured NCCL curves
show) and ``op_overhead`` the per-call floor of eager host-issued calls (``host_floor=False`` drops
it). ``auto`` takes the fastest candidate, which is how NCCL's own tuner chooses (it minimises the same
kind of model).

All parameters come from a comm calibration profile ``hardware_specs/calibration/comm-<system>.yaml``
(fitted on measurements by :mod:`simcore.calibration.fit_comm`); systems without one borrow the
nearest system's profile and say so.

Conventions follow nccl-tests: ``nbytes`` is the larger of the send and receive buffer per rank (the
gathered size for all_gather, the input size for reduce_scatter), ``algbw = nbytes / time`` and
``busbw = algbw * factor(op, n)``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray
from pydantic import BaseModel, ConfigDict

from simcore.comm.groups import FloatArray, GroupPlacement
from simcore.errors import SimcoreError, SpecError
from simcore.specs.arguments import byte_size, show

# the op catalogue and the profile schema, re-exported: collectives' cost model reads them
from simcore.specs.comm_profile import OPS as OPS
from simcore.specs.comm_profile import Channels as Channels
from simcore.specs.comm_profile import CommProfile as CommProfile
from simcore.specs.comm_profile import LinkCurve as LinkCurve
from simcore.specs.comm_profile import LoadedProfile as LoadedProfile
from simcore.specs.comm_profile import Op as Op
from simcore.specs.comm_profile import ProtoTimes as ProtoTimes
from simcore.specs.comm_profile import busbw_factor as busbw_factor
from simcore.specs.comm_profile import load_profile as load_profile
from simcore.specs.comm_profile import normalize_op as normalize_op
from simcore.specs.comm_profile import profile_path as profile_path
from simcore.specs.comm_profile import read_profile as read_profile
from simcore.specs.resolve import ClusterInfo, cluster_for

ALGORITHMS: tuple[str, ...] = ("ring", "tree", "nvls", "hierarchical", "pairwise", "p2p")
"""Index order of :attr:`CollCost.algorithm`."""
PROTOCOLS: tuple[str, ...] = ("LL", "LL128", "Simple")
"""Index order of :attr:`CollCost.protocol`."""
LINK_CLASSES: tuple[str, ...] = ("nvlink", "network")

# --------------------------------------------------------------------------------------------------
# Vectorised cost
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CollCost:
    """Cost of a collective over numpy grids (all arrays share the broadcast shape).

    Attributes:
        time_s: predicted seconds.
        algorithm: index into :data:`ALGORITHMS` of the algorithm chosen.
        protocol: index into :data:`PROTOCOLS` of the protocol chosen.
        bytes_nvlink: bytes each rank sends over NVLink (mean over ranks).
        bytes_network: bytes each rank sends over the scale-out fabric (mean over ranks).
    """

    time_s: FloatArray
    algorithm: NDArray[np.int64]
    protocol: NDArray[np.int64]
    bytes_nvlink: FloatArray
    bytes_network: FloatArray
    latency_s: FloatArray | None = None
    """Latency part of ``time_s`` (base + per-step hops)."""
    wire_nvlink_s: FloatArray | None = None
    """Seconds the NVLink stage needs for its bytes (time_s = latency + max of the two wire times)."""
    wire_network_s: FloatArray | None = None
    load_nvlink: FloatArray | None = None
    """Bytes crossing the busiest NVLink port of a rank."""
    load_network: FloatArray | None = None
    """Bytes crossing a rank's share of the NICs."""
    nvls_stage: NDArray[np.bool_] | None = None
    """Whether the NVLink stage runs on NVLink SHARP (nvls, and hierarchical in its NVLS-tree form)."""
    transferred_from: str | None = None
    provisional: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)

    def algorithm_names(self) -> NDArray[np.str_]:
        return np.asarray(ALGORITHMS)[self.algorithm]

    def protocol_names(self) -> NDArray[np.str_]:
        return np.asarray(PROTOCOLS)[self.protocol]


@dataclass(frozen=True)
class _Cand:
    """One candidate algorithm: its loads (bytes per port) and step counts, before protocols."""

    algo: str
    valid: FloatArray  # bool as float mask
    load_nv: FloatArray
    load_net: FloatArray
    bytes_nv: FloatArray
    bytes_net: FloatArray
    steps_nv: FloatArray
    steps_net: FloatArray
    base: str  # key into base_latency
    protocols: tuple[str, ...]
    nvls_stage: bool = False  # the NVLink stage runs on NVLS (switch reduction)
    chunk_nv: FloatArray | None = None  # bytes moved per step on NVLink (where the ramp is read)
    chunk_net: FloatArray | None = None


@dataclass(frozen=True)
class LinkRates:
    """Spec bandwidths (bytes/s per GPU per direction) a group sees."""

    nvlink: FloatArray
    network: FloatArray
    nvls: bool


def link_rates(cluster: ClusterInfo, group: GroupPlacement, contention: ArrayLike | None = None) -> LinkRates:
    """NVLink bandwidth per GPU, and the GPU's share of its node's NICs on the fabric: divided by
    ``contention`` where the caller has it (the flow model's slowdown of the group's network flows on the
    fabric's graph, :func:`simcore.comm.flow.network_slowdown`: oversubscribed uplinks counted there, once),
    else by the oversubscription once the group spans more systems than one leaf holds (a rule of thumb:
    as if every NIC of the leaf sent across the spine)."""
    nv = float(cluster.nvlink_bandwidth)
    nic_share = cluster.nic_bandwidth * cluster.nics_per_node / cluster.system.gpus
    fabric = cluster.fabric
    radix = fabric.switch_radix or cluster.fabric_link.radix or 64
    if fabric.topology == "rail_optimized":
        nodes_per_leaf = max(radix // 2, 1)
    else:
        nodes_per_leaf = max((radix // 2) // max(cluster.nics_per_node, 1), 1)
    domains_per_node = max(cluster.system.gpus // cluster.system.nvlink_domain, 1)
    nodes = np.ceil(group.domains / domains_per_node)
    if contention is not None:
        net = nic_share / np.broadcast_to(np.asarray(contention, dtype=np.float64), group.shape)
    else:
        net = np.where(nodes > nodes_per_leaf, nic_share / fabric.oversubscription, nic_share)
    sw = cluster.nvswitch
    nvls = bool(sw is not None and sw.in_network_reduction)
    return LinkRates(nvlink=np.full(group.shape, nv), network=np.asarray(net, dtype=np.float64), nvls=nvls)


def _z(shape: tuple[int, ...]) -> FloatArray:
    return np.zeros(shape)


def _candidates(op: str, S: FloatArray, grp: GroupPlacement, nvls: bool) -> list[_Cand]:
    shape = S.shape
    n = np.broadcast_to(grp.size, shape)
    g = np.broadcast_to(grp.per_domain, shape)
    d = np.broadcast_to(grp.domains, shape)
    multi = d > 1
    one = np.ones(shape)
    has_nv = (g > 1).astype(np.float64)
    net_edges = np.where(multi, d, 0.0)
    nv_edges = n - net_edges
    out: list[_Cand] = []
    all3 = PROTOCOLS

    if op in ("all_reduce", "all_gather", "reduce_scatter"):
        k = 2.0 if op == "all_reduce" else 1.0
        per_rank = k * (n - 1.0) / n * S
        out.append(
            _Cand(
                "ring",
                one,
                load_nv=per_rank * has_nv * np.where(multi, (g - 1.0) / g, 1.0),
                load_net=np.where(multi, per_rank / g, 0.0),
                bytes_nv=per_rank * nv_edges / n,
                bytes_net=per_rank * net_edges / n,
                steps_nv=k * (n - 1.0) - k * np.where(multi, d - 1.0, 0.0),
                steps_net=k * np.where(multi, d - 1.0, 0.0),
                chunk_nv=S / n,
                chunk_net=S / n,
                base="ring",
                protocols=all3,
            )
        )
        # NVLink SHARP inside one domain. The multicast team includes the caller, so every shard goes
        # through the switch: all_reduce = ld_reduce (each GPU serves S out, takes its S/n reduced
        # shard in) + multimem store (S/n out, S in), i.e. S (n+1)/n per direction instead of the
        # ring's 2(n-1)/n S; reduce_scatter and all_gather move S on their busy direction.
        nv_load = S * (n + 1.0) / n if op == "all_reduce" else S
        out.append(
            _Cand(
                "nvls",
                ((~multi) & (n > 1) & nvls).astype(np.float64),
                load_nv=nv_load,
                load_net=_z(shape),
                bytes_nv=nv_load,
                bytes_net=_z(shape),
                steps_nv=one,
                steps_net=_z(shape),
                chunk_nv=S / n,
                chunk_net=S / n,
                base="nvls",
                protocols=("Simple",),
                nvls_stage=True,
            )
        )
        # Hierarchical: reduce-scatter inside the domain, all-reduce across domains per rail on S/g,
        # all-gather inside; stages pipelined so the slower one sets the bandwidth term.
        inner_nv = k * (g - 1.0) / g * S
        inter = k * (d - 1.0) / d * S / g
        valid_h = multi.astype(np.float64)
        out.append(
            _Cand(
                "hierarchical",
                valid_h,
                load_nv=inner_nv,
                load_net=inter,
                bytes_nv=inner_nv,
                bytes_net=inter,
                steps_nv=k * (g - 1.0),
                steps_net=k * (d - 1.0),
                chunk_nv=S / g,
                chunk_net=S / n,
                base="hierarchical",
                protocols=all3,
            )
        )
        if nvls:
            # NVLS-tree flavour: the intra-domain stages run on the switch (one reduction+multicast).
            nvls_inner = S * (g + 1.0) / g if op == "all_reduce" else S
            out.append(
                _Cand(
                    "hierarchical",
                    (multi & (g > 1)).astype(np.float64),
                    load_nv=nvls_inner,
                    load_net=inter,
                    bytes_nv=nvls_inner,
                    bytes_net=inter,
                    steps_nv=one,
                    steps_net=k * np.ceil(np.log2(np.maximum(d, 1.0))),
                    chunk_nv=S / g,
                    chunk_net=S / n,
                    base="nvls",
                    protocols=("Simple",),
                    nvls_stage=True,
                )
            )
        if op == "all_reduce":
            # Double binary tree across domains, chain inside: about 2S per rank each way.
            log_d = np.ceil(np.log2(np.maximum(d, 1.0)))
            out.append(
                _Cand(
                    "tree",
                    one,
                    load_nv=2.0 * S * has_nv,
                    load_net=np.where(multi, 2.0 * S / g, 0.0),
                    bytes_nv=2.0 * S * (g - 1.0) / g,
                    bytes_net=np.where(multi, 2.0 * S * (d - 1.0) / (d * g), 0.0),
                    steps_nv=2.0 * (g - 1.0),
                    steps_net=2.0 * log_d,
                    chunk_nv=S / 2.0,
                    chunk_net=S / 2.0,
                    base="tree",
                    protocols=all3,
                )
            )
    elif op in ("broadcast", "reduce"):
        # Pipelined chain (NCCL's ring for rooted collectives): each link carries S once.
        out.append(
            _Cand(
                "ring",
                one,
                load_nv=S * has_nv * np.where(multi, (g - 1.0) / g, 1.0),
                load_net=np.where(multi, S / g, 0.0),
                bytes_nv=S * (n - d) / n,
                bytes_net=S * (d - 1.0) / n,
                steps_nv=(n - 1.0) - (d - 1.0),
                steps_net=d - 1.0,
                chunk_nv=S,
                chunk_net=S,
                base="ring",
                protocols=all3,
            )
        )
    elif op == "all_to_all":
        # Pairwise exchange, all peers at once: S/n to each peer; NVLink to the domain, NIC to the rest.
        nv_b = (g - 1.0) / n * S
        net_b = (n - g) / n * S
        out.append(
            _Cand(
                "pairwise",
                one,
                load_nv=nv_b,
                load_net=net_b,
                bytes_nv=nv_b,
                bytes_net=net_b,
                steps_nv=g - 1.0,
                steps_net=n - g,
                chunk_nv=S / n,
                chunk_net=S / n,
                base="p2p",
                protocols=("LL", "Simple"),
            )
        )
    elif op == "send_recv":
        # Each rank sends S to the next (GPUDirect RDMA through its NIC when the peer is off-domain).
        out.append(
            _Cand(
                "p2p",
                one,
                load_nv=np.where(multi, 0.0, S),
                load_net=np.where(multi, S, 0.0),
                bytes_nv=S * (n - net_edges) / n,
                bytes_net=S * net_edges / n,
                steps_nv=np.where(multi, 0.0, 1.0),
                steps_net=np.where(multi, 1.0, 0.0),
                chunk_nv=S,
                chunk_net=S,
                base="p2p",
                protocols=("LL", "Simple"),
            )
        )
    return out


def _xfer(load: FloatArray, bw: FloatArray, curve: LinkCurve, chunk: FloatArray | None = None) -> FloatArray:
    """Seconds to move ``load`` bytes at ``bw`` when each step moves ``chunk`` bytes (default: all of
    it at once): efficiency ``curve.efficiency / (1 + (ramp_bytes / chunk) ** ramp_exponent)``."""
    h = curve.ramp_bytes
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if h > 0:
            c = load if chunk is None else np.minimum(chunk, load)
            t = load * (1.0 + np.power(h / np.maximum(c, 1e-300), curve.ramp_exponent))
        else:
            t = load
        return np.where(load > 0, t / (bw * curve.efficiency), 0.0)


def cost_from_profile(
    op: str,
    nbytes: ArrayLike,
    group: GroupPlacement,
    rates: LinkRates,
    profile: CommProfile,
    algorithm: str = "auto",
    dtype: str = "bf16",
    host_floor: bool = True,
) -> CollCost:
    """:func:`collective_cost` with the link rates and profile given explicitly (for fitting, tests)."""
    op = normalize_op(op)
    if algorithm not in ("auto", *ALGORITHMS):
        raise SimcoreError(
            f"unknown algorithm {algorithm!r}; known: auto, {', '.join(ALGORITHMS)}", field="algorithm"
        )
    S0 = np.asarray(nbytes, dtype=np.float64)
    shape = np.broadcast_shapes(S0.shape, group.shape, rates.nvlink.shape, rates.network.shape)
    N = int(np.prod(shape, dtype=np.int64))

    def flat(a: ArrayLike) -> FloatArray:
        return np.ascontiguousarray(np.broadcast_to(np.asarray(a, dtype=np.float64), shape)).reshape(N)

    S = flat(S0)
    nvb = flat(rates.nvlink)
    netb = flat(rates.network)
    grp = GroupPlacement(flat(group.size), flat(group.per_domain), flat(group.domains))
    cands = _candidates(op, S, grp, rates.nvls)
    op_mult = profile.ops.get(op, 1.0)
    if op in ("all_reduce", "reduce_scatter", "reduce"):
        op_mult *= profile.dtypes.get(dtype, 1.0)
    nv_curve = profile.links.get("nvlink", LinkCurve())
    net_curve = profile.links.get("network", LinkCurve())
    nvls_mult = profile.algorithms.get("nvls", 1.0)
    hnv = profile.hop_latency.get("nvlink")
    hnet = profile.hop_latency.get("network")
    overhead = profile.op_overhead.get(op, 0.0) if host_floor else 0.0
    ch_cap = profile.channels.count

    # Pass 1: the time of every (candidate, protocol); the bandwidth terms scale as 1/multiplier, so
    # the ramp (the costly part) is evaluated once per candidate unless a channel cap applies.
    entries: list[tuple[_Cand, str, FloatArray, float, float, float | None]] = []
    t_auto: list[FloatArray] = []
    t_req: list[FloatArray] = []
    never = np.full(N, np.inf)
    multi = grp.domains > 1
    for c in cands:
        # 'auto' offers hierarchical only in its NVLS-tree form and trees only across domains, as
        # NCCL's tuner does; an explicit choice also prices the auto candidates (the fallback where
        # it does not apply).
        auto_ok = not (c.algo == "hierarchical" and not c.nvls_stage)
        requested = algorithm == c.algo
        if not (auto_ok or requested) or not c.valid.any():
            continue
        base = profile.base_latency.get(c.base)
        amult = profile.algorithms.get(c.algo, 1.0)
        unit: tuple[FloatArray, FloatArray] | None = None
        for proto in c.protocols:
            b0 = base.get(proto) if base is not None else None
            lnv = hnv.get(proto) if hnv is not None else None
            lnet = hnet.get(proto) if hnet is not None else None
            frac = profile.protocol_bandwidth.get(proto)
            if b0 is None or lnv is None or lnet is None or frac is None:
                continue
            pf = profile.peer_latency_fraction if c.algo == "pairwise" else 1.0
            lat = b0 + pf * (c.steps_nv * lnv + c.steps_net * lnet)
            net_f = frac * amult * op_mult
            nv_f = net_f * (nvls_mult if c.nvls_stage and c.algo != "nvls" else 1.0)
            cap = profile.channels.per_channel.get(proto)
            if cap is None:
                if unit is None:
                    unit = (
                        _xfer(c.load_nv, nvb, nv_curve, c.chunk_nv),
                        _xfer(c.load_net, netb, net_curve, c.chunk_net),
                    )
                tnv, tnet = unit[0] / nv_f, unit[1] / net_f
            else:
                tnv = _xfer(c.load_nv, np.minimum(nvb * nv_f, cap * ch_cap), nv_curve, c.chunk_nv)
                tnet = _xfer(c.load_net, np.minimum(netb * net_f, cap * ch_cap), net_curve, c.chunk_net)
            t = np.where(c.valid > 0, lat + np.maximum(tnv, tnet), np.inf)
            entries.append((c, proto, lat, nv_f, net_f, cap))
            if not auto_ok:
                t_auto.append(never)
            elif c.algo == "tree":
                t_auto.append(np.where(multi, t, np.inf))
            else:
                t_auto.append(t)
            t_req.append(t if requested else never)
    if not entries:
        raise SpecError(f"the comm profile of {profile.system!r} offers no protocol for {op}")
    cols = np.arange(N)
    ta = np.stack(t_auto)
    choice = np.argmin(ta, axis=0)
    best_t = ta[choice, cols]
    del ta
    if algorithm != "auto":
        # the requested algorithm where it applies, the auto choice elsewhere
        tr = np.stack(t_req)
        ir = np.argmin(tr, axis=0)
        tbest = tr[ir, cols]
        del tr
        ok = np.isfinite(tbest)
        choice = np.where(ok, ir, choice)
        best_t = np.where(ok, tbest, best_t)

    # Pass 2: the chosen candidate's breakdown, computed only where it was chosen.
    keys = ("bnv", "bnet", "lat", "tnv", "tnet", "lnv", "lnet")
    res = {k: np.zeros(N) for k in keys}
    algo_i = np.zeros(N, dtype=np.int64)
    proto_i = np.zeros(N, dtype=np.int64)
    nvs = np.zeros(N, dtype=bool)
    for j in np.flatnonzero(np.bincount(choice)).tolist():  # (the chosen candidates: np.unique loads numpy.ma)
        m = choice == j
        c, proto, lat, nv_f, net_f, cap = entries[j]
        lnv_m, lnet_m = c.load_nv[m], c.load_net[m]
        cnv = None if c.chunk_nv is None else c.chunk_nv[m]
        cnet = None if c.chunk_net is None else c.chunk_net[m]
        bnv = nvb[m] * nv_f
        bnet = netb[m] * net_f
        if cap is not None:
            bnv = np.minimum(bnv, cap * ch_cap)
            bnet = np.minimum(bnet, cap * ch_cap)
        res["tnv"][m] = _xfer(lnv_m, bnv, nv_curve, cnv)
        res["tnet"][m] = _xfer(lnet_m, bnet, net_curve, cnet)
        res["lat"][m] = lat[m]
        res["bnv"][m] = c.bytes_nv[m]
        res["bnet"][m] = c.bytes_net[m]
        res["lnv"][m] = lnv_m
        res["lnet"][m] = lnet_m
        algo_i[m] = ALGORITHMS.index(c.algo)
        proto_i[m] = PROTOCOLS.index(proto)
        nvs[m] = c.nvls_stage

    # Calls cannot be issued faster than the per-call host overhead: below it the GPU time hides.
    best_t = np.maximum(best_t, overhead)
    single = grp.size <= 1

    def z(a: FloatArray) -> FloatArray:
        return np.where(single, 0.0, a).reshape(shape)

    return CollCost(
        time_s=z(best_t),
        algorithm=algo_i.reshape(shape),
        protocol=proto_i.reshape(shape),
        bytes_nvlink=z(res["bnv"]),
        bytes_network=z(res["bnet"]),
        latency_s=z(res["lat"]),
        wire_nvlink_s=z(res["tnv"]),
        wire_network_s=z(res["tnet"]),
        load_nvlink=z(res["lnv"]),
        load_network=z(res["lnet"]),
        nvls_stage=nvs.reshape(shape),
        provisional=profile.provisional,
    )


def collective_cost(
    op: str,
    nbytes: ArrayLike,
    group: GroupPlacement,
    cluster: ClusterInfo,
    algorithm: str = "auto",
    dtype: str = "bf16",
    profile: CommProfile | None = None,
    host_floor: bool = True,
    contention: ArrayLike | None = None,
) -> CollCost:
    """Predicted cost of ``op`` over numpy grids of message sizes and group shapes.

    Args:
        op: all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all or send_recv.
        nbytes: bytes per rank, nccl-tests convention (larger of send and receive buffer); any shape.
        group: placement of the communicator (arrays broadcast with ``nbytes``).
        cluster: resolved cluster (link bandwidths, NVSwitch, fabric, oversubscription).
        algorithm: ``auto`` (fastest modelled candidate, as NCCL's tuner) or one of :data:`ALGORITHMS`;
            elements where the requested algorithm does not apply use the auto choice.
        dtype: element type (reductions may carry a per-dtype efficiency in the profile).
        profile: calibration profile; default: the system's (or the nearest system's) profile.
        host_floor: apply the profile's per-call floor (``op_overhead``: back-to-back eager calls
            cannot be issued faster than the host launch path). Pass False for CUDA graphs or when
            the caller models host launch itself; ``latency_s + max(wire_*)`` is the GPU-side time.
        contention: the group's network flows' slowdown on the fabric from the flow model
            (:func:`link_rates`); ``None``: the oversubscription rule of thumb.

    Returns:
        :class:`CollCost` with ``time_s`` in seconds and the bytes per rank on each link class.
    """
    transferred: str | None = None
    if profile is None:
        lp = load_profile(cluster.system.name)
        profile, transferred = lp.profile, lp.transferred_from
    cost = cost_from_profile(
        op, nbytes, group, link_rates(cluster, group, contention), profile, algorithm, dtype, host_floor
    )
    if transferred is None:
        return cost
    return dataclasses.replace(
        cost,
        transferred_from=transferred,
        notes=(f"no comm profile for {cluster.system.name}; transferred from {transferred}",),
    )


# --------------------------------------------------------------------------------------------------
# Point-to-point: KV-cache transfer for disaggregated serving
# --------------------------------------------------------------------------------------------------


def kv_transfer_time(
    nbytes: ArrayLike,
    cluster: ClusterInfo,
    src_tp: ArrayLike = 1,
    dst_tp: ArrayLike = 1,
    same_domain: ArrayLike = False,
    transfers: ArrayLike = 1,
    gpudirect: bool = True,
    profile: CommProfile | None = None,
) -> FloatArray:
    """Seconds to move a request's KV cache from a prefill instance to a decode instance (NIXL-style).

    The cache (``nbytes`` in total) is sharded over the ``src_tp`` GPUs of the prefill instance and
    must land on the ``dst_tp`` GPUs of the decode instance; every GPU drives its own path, so the
    busier side moves ``nbytes / min(src_tp, dst_tp)``. Inside one NVLink domain the path is NVLink;
    otherwise GPUDirect RDMA through the GPU's NIC (or, with ``gpudirect=False``, a bounce through
    host memory over PCIe on both ends). ``transfers`` is the number of separate RDMA operations
    (e.g. one per layer or per block group); each pays the protocol's point-to-point latency.
    """
    if profile is None:
        profile = load_profile(cluster.system.name).profile
    S = np.asarray(nbytes, dtype=np.float64)
    par = np.minimum(np.asarray(src_tp, dtype=np.float64), np.asarray(dst_tp, dtype=np.float64))
    same = np.asarray(same_domain, dtype=bool)
    xf = np.maximum(np.asarray(transfers, dtype=np.float64), 1.0)
    per_gpu = S / par
    nv_curve = profile.links.get("nvlink", LinkCurve())
    net_curve = profile.links.get("network", LinkCurve())
    frac = profile.protocol_bandwidth.get("Simple", 1.0) * profile.algorithms.get("p2p", 1.0)
    nic_share = cluster.nic_bandwidth * cluster.nics_per_node / cluster.system.gpus
    net_bw = nic_share if gpudirect else min(nic_share, cluster.device.pcie_bandwidth)
    t_nv = _xfer(per_gpu, np.asarray(cluster.nvlink_bandwidth * frac), nv_curve)
    t_net = _xfer(per_gpu, np.asarray(net_bw * frac), net_curve)
    if not gpudirect:
        # staged copies device->host and host->device overlap with the wire only partly: add one copy
        t_net = t_net + per_gpu / cluster.device.pcie_bandwidth
    base = profile.base_latency.get("p2p")
    b0 = (base.get("Simple") if base is not None else None) or 0.0
    hnv = profile.hop_latency.get("nvlink")
    lnv = (hnv.get("Simple") if hnv is not None else None) or 0.0
    hnet = profile.hop_latency.get("network")
    lnet = (hnet.get("Simple") if hnet is not None else None) or 0.0
    lat = xf * (b0 + np.where(same, lnv, lnet))
    return np.asarray(lat + np.where(same, t_nv, t_net), dtype=np.float64)


# --------------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------------


class CollectiveResult(BaseModel):
    """Predicted time of one collective (nccl-tests conventions)."""

    model_config = ConfigDict(frozen=True)

    op: str
    nbytes: float
    """Bytes per rank (larger of send and receive buffer)."""
    count: float
    """Elements per rank as nccl-tests counts them."""
    dtype: str
    gpus: int
    nodes: int
    system: str
    time_s: float
    algorithm: str
    protocol: str
    algbw: float
    """nbytes / time_s, bytes/s."""
    busbw: float
    """algbw x nccl-tests factor, bytes/s."""
    bytes_nvlink_per_rank: float
    bytes_network_per_rank: float
    profile: str
    provisional: bool
    transferred_from: str | None = None
    notes: list[str] = []


def _group_for(cluster: ClusterInfo, gpus: int) -> GroupPlacement:
    """All ``gpus`` of the cluster, spread evenly over its nodes, filling NVLink domains in order."""
    per_node = math.ceil(gpus / cluster.nodes)
    return GroupPlacement.of(gpus, min(per_node, cluster.system.nvlink_domain))


def _count(v: object, name: str) -> int:
    """A GPU or node count: an int (numpy's too), or a float with an integral value; not a bool or a string."""
    if isinstance(v, bool | np.bool_) or not isinstance(v, int | float | np.integer | np.floating):
        raise SimcoreError(f"expected an integer, got {type(v).__name__} {show(v)}", field=name)
    try:
        ok = math.isfinite(float(v)) and float(v).is_integer()
    except OverflowError:
        ok = True  # an int too large for a float: caught as too large below
    if not ok:
        raise SimcoreError(f"expected an integer, got {show(v)}", field=name)
    n = int(v)
    if n > _MAX_COUNT:
        raise SimcoreError(f"too large ({show(v)}; at most {_MAX_COUNT:,})", field=name)
    return n


_MAX_COUNT = 10**9
"""The largest GPU or node count taken (well beyond any cluster; larger ones are typos)."""


def collective_time(
    op: str,
    nbytes: float | int | str,
    gpus: int,
    system: str,
    nodes: int | None = None,
    dtype: str = "bf16",
    algorithm: str = "auto",
    skew: float = 1.0,
) -> CollectiveResult:
    """Predicted time of one collective over ``gpus`` GPUs of ``system`` (``nodes`` systems; default
    as few as hold them).

    ``nbytes`` is bytes per rank as nccl-tests counts it (a number or a string such as ``"256 MB"``).
    ``skew`` (``all_to_all`` only, >= 1): the busiest rank's bytes over the mean (an MoE dispatch whose
    tokens favour some experts); a pairwise exchange ends when that rank's sends and receives are done,
    so the time is the exchange's at ``nbytes x skew`` per rank (algbw and busbw stay relative to
    ``nbytes``). Returns seconds in ``time_s`` with the algorithm, protocol, algbw and busbw (bytes/s)
    beside it.
    """
    from simcore.specs.hardware import DTYPE_BYTES

    for name, v in (("op", op), ("system", system), ("dtype", dtype), ("algorithm", algorithm)):
        if not isinstance(v, str):
            raise SimcoreError(f"expected a string, got {type(v).__name__} {show(v)}", field=name)
    opn = normalize_op(op)
    S = byte_size(nbytes, "nbytes", "message size")
    gpus = _count(gpus, "gpus")
    nodes = None if nodes is None else _count(nodes, "nodes")
    if gpus < 1:
        raise SimcoreError("gpus must be at least 1", field="gpus")
    if opn == "send_recv" and gpus < 2:
        raise SimcoreError("send_recv needs at least 2 GPUs", field="gpus")
    if dtype not in DTYPE_BYTES:
        raise SimcoreError(f"unknown dtype {dtype!r}; known: {', '.join(DTYPE_BYTES)}", field="dtype")
    if isinstance(skew, bool) or not isinstance(skew, int | float) or not skew >= 1.0 or skew == float("inf"):
        raise SimcoreError(f"skew must be a number >= 1 (busiest rank's bytes over the mean), got {show(skew)}", field="skew")
    if skew != 1.0 and opn != "all_to_all":
        raise SimcoreError(f"skew applies to all_to_all only (got {opn})", field="skew")
    cluster = cluster_for(system, gpus=gpus, nodes=nodes)
    group = _group_for(cluster, gpus)
    lp = load_profile(cluster.system.name)
    if algorithm != "auto":
        if algorithm not in ALGORITHMS:
            raise SimcoreError(
                f"unknown algorithm {algorithm!r}; known: auto, {', '.join(ALGORITHMS)}", field="algorithm"
            )
        probe = cost_from_profile(opn, S, group, link_rates(cluster, group), lp.profile, algorithm, dtype)
        chosen = ALGORITHMS[int(probe.algorithm)]
        if chosen != algorithm and gpus > 1:
            raise SimcoreError(
                f"algorithm {algorithm!r} does not apply to {opn} on {gpus} GPUs in {cluster.nodes} "
                f"node(s) of {cluster.system.name}",
                field="algorithm",
            )
    cost = cost_from_profile(opn, S * skew, group, link_rates(cluster, group), lp.profile, algorithm, dtype)
    t = float(cost.time_s)
    algbw = S / t if t > 0 else 0.0  # one GPU: nothing moves
    factor = float(busbw_factor(opn, gpus))
    elt = DTYPE_BYTES[dtype]
    count = S / elt / (gpus if opn in ("all_gather", "reduce_scatter", "all_to_all") else 1)
    notes: list[str] = []
    if lp.transferred_from:
        notes.append(
            f"no comm profile for {cluster.system.name}; curves transferred from {lp.transferred_from}"
        )
    if lp.profile.provisional:
        notes.append("provisional comm profile: spec bandwidths with neutral efficiencies, not fitted")
    return CollectiveResult(
        op=opn,
        nbytes=S,
        count=count,
        dtype=dtype,
        gpus=gpus,
        nodes=cluster.nodes,
        system=cluster.system.name,
        time_s=t,
        algorithm=ALGORITHMS[int(cost.algorithm)],
        protocol=PROTOCOLS[int(cost.protocol)],
        algbw=algbw,
        busbw=algbw * factor,
        bytes_nvlink_per_rank=float(cost.bytes_nvlink),
        bytes_network_per_rank=float(cost.bytes_network),
        profile=lp.profile.system,
        provisional=lp.profile.provisional,
        transferred_from=lp.transferred_from,
        notes=notes,
    )


__all__ = [
    "ALGORITHMS",
    "OPS",
    "PROTOCOLS",
    "CollCost",
    "CollectiveResult",
    "CommProfile",
    "LinkCurve",
    "LinkRates",
    "LoadedProfile",
    "busbw_factor",
    "collective_cost",
    "collective_time",
    "cost_from_profile",
    "kv_transfer_time",
    "link_rates",
    "load_profile",
    "normalize_op",
    "read_profile",
]
