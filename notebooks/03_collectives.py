# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 03 — Collectives: NVLink domains, InfiniBand, NVL72 and oversubscription
#
# simcore prices a collective with an alpha-beta model per algorithm (ring, double binary tree, NVLS,
# hierarchical, pairwise all-to-all, point-to-point) and protocol (LL, LL128, Simple), with a
# saturating bandwidth ramp and a per-call floor fitted on a real NCCL sweep of two NVLinked H200s
# (`traces/h200x2/nccl.csv.gz`). The flow-level simulator shares links max-min fairly, so it shows
# what the closed form cannot: congestion. Conventions follow nccl-tests (`nbytes` per rank, busbw).

# %%
import matplotlib.pyplot as plt
import numpy as np

import simcore
from simcore.comm.collectives import collective_cost, load_profile
from simcore.comm.flow import collective_time_flow, concurrent_collectives
from simcore.comm.groups import GroupPlacement
from simcore.comm.topology import topology_for
from simcore.specs import cluster_for
from simcore.specs.registry import checkout_dir
from simcore.traces.nccl import read_measurements

SIZES = 2.0 ** np.arange(10, 33)  # 1 KiB .. 4 GiB
prof = load_profile("hgx-h200").profile
print("profile:", "provisional" if prof.provisional else f"fitted on {prof.fitted_on}")
print("held-out error:", prof.fit_report.get("held_out", {}).get("median_abs_error_ge_1MB"), "(>= 1 MB)")


def busbw_curve(system: str, op: str, gpus: int, nodes: int | None = None) -> np.ndarray:
    """busbw (GB/s) over SIZES with the vectorised cost (one call for the whole curve)."""
    cl = cluster_for(system, gpus=gpus, nodes=nodes)
    per = min(-(-gpus // cl.nodes), cl.system.nvlink_domain)
    c = collective_cost(op, SIZES, GroupPlacement.of(gpus, per), cl)
    factor = simcore.collective_time(op, nbytes=1e6, gpus=gpus, system=system, nodes=nodes).busbw
    factor /= simcore.collective_time(op, nbytes=1e6, gpus=gpus, system=system, nodes=nodes).algbw
    return SIZES / c.time_s * factor / 1e9


# %% [markdown]
# ## Measured vs predicted on 2 x H200
#
# Points are the measured sweep (torch.distributed + NCCL 2.28, CUDA-event time of back-to-back calls);
# lines the fitted model. The flat start is the per-call floor (host launch), the slow rise up to
# 4 GB is the bandwidth ramp.

# %%
# the measurements ship with the source tree: checkout_dir() finds it (or $SIMCORE_REPO)
trace = checkout_dir() / "traces" / "h200x2" / "nccl.csv.gz"
fig, ax = plt.subplots(figsize=(8, 4.5))
ops = ["all_reduce", "all_gather", "broadcast", "all_to_all"]
m = read_measurements(trace)
for op in ops:
    sel = (m.op == op) & (m.dtype == "bf16")
    ax.plot(m.nbytes[sel], m.busbw[sel] / 1e9, "o", ms=3)
for op, color in zip(ops, ["C0", "C1", "C2", "C3"], strict=True):
    ax.plot(SIZES, busbw_curve("hgx-h200", op, 2), "-", color=color, label=op)
ax.set_xscale("log", base=2)
ax.set_xlabel("bytes per rank")
ax.set_ylabel("busbw (GB/s)")
ax.set_title("2 x H200 (NVLink 4): measured (points) vs predicted (lines)")
ax.legend()
ax.grid(alpha=0.3)
plt.show()

# %% [markdown]
# ## busbw curves per system (all_reduce over one NVLink domain)
#
# Systems without their own measurements borrow the H200 curve shape (the result says
# `transferred_from`); their bandwidths are their own spec numbers.

# %%
fig, ax = plt.subplots(figsize=(8, 4.5))
for system, gpus in [("hgx-a100", 8), ("hgx-h100", 8), ("hgx-h800", 8), ("dgx-b200", 8), ("gb200-nvl72", 72)]:
    ax.plot(SIZES, busbw_curve(system, "all_reduce", gpus), label=f"{system} ({gpus} GPUs)")
ax.set_xscale("log", base=2)
ax.set_xlabel("bytes per rank")
ax.set_ylabel("all_reduce busbw (GB/s)")
ax.legend()
ax.grid(alpha=0.3)
plt.show()

# %% [markdown]
# ## NVLink domain vs InfiniBand
#
# A 1 GiB all-reduce and a 256 MiB all-to-all as the group grows past one node. Inside an HGX node
# traffic rides 450 GB/s NVLink; past it every rank's share of the 400 Gb/s NICs (50 GB/s) is the
# limit. All-to-all suffers most: (n - 8)/n of its bytes cross the fabric.

# %%
gpus = [8, 16, 32, 64, 128, 256]
rows = []
for op, nb in [("all_reduce", 2**30), ("all_to_all", 2**28)]:
    for system in ["hgx-h200", "gb200-nvl72"]:
        per_node = 8 if system == "hgx-h200" else 72
        pts = []
        for n in gpus:
            nodes = max(1, -(-n // per_node))
            r = simcore.collective_time(op, nbytes=nb, gpus=n, system=system, nodes=nodes)
            pts.append(r.busbw / 1e9)
            rows.append((op, system, n, r.algorithm, r.time_s))
        plt.plot(gpus, pts, "o-", label=f"{op} {system}")
plt.xscale("log", base=2)
plt.xlabel("GPUs in the group")
plt.ylabel("busbw (GB/s)")
plt.legend()
plt.grid(alpha=0.3)
plt.show()
for op, system, n, algo, t in rows:
    if n in (8, 64):
        print(f"{op:11} {system:12} {n:4d} GPUs  {algo:12} {t * 1e3:8.3f} ms")

# %% [markdown]
# ## What an NVL72 changes
#
# Expert parallelism is all-to-all heavy. With 64-way EP on HGX H200 the dispatch crosses InfiniBand
# for 7/8 of its bytes; in one GB200 NVL72 rack all 64 ranks share the NVLink domain at 900 GB/s.

# %%
for system, nodes in [("hgx-h200", 8), ("gb200-nvl72", 1)]:
    r = simcore.collective_time("all_to_all", nbytes=64 * 2**20, gpus=64, system=system, nodes=nodes)
    print(
        f"{system:12} 64-way all_to_all of 64 MiB/rank: {r.time_s * 1e3:7.3f} ms, "
        f"NVLink {r.bytes_nvlink_per_rank / 2**20:6.1f} MiB, network {r.bytes_network_per_rank / 2**20:6.1f} MiB per rank"
    )

# %% [markdown]
# ## How oversubscription hurts (flow-level simulation)
#
# Eight concurrent all-to-alls (one per rail, as in expert parallelism across 8 nodes) on a fat tree
# of radix-16 switches (one node per leaf, so every inter-node byte crosses a spine). With a 2:1 or 4:1
# leaf oversubscription the spine, not the NIC, becomes the bottleneck. The analytic model applies the
# same factor to a rank's NIC share; the flow simulation finds it by sharing the spine links.

# %%
for over in [1.0, 2.0, 4.0]:
    topo = topology_for("hgx-h200", nodes=8, topology="fat_tree", switch_radix=16, oversubscription=over)
    jobs = [("all_to_all", 64 * 2**20, [node * 8 + k for node in range(8)]) for k in range(8)]
    t = max(concurrent_collectives(topo, jobs))
    print(f"oversubscription {over:3.1f}:1  -> 8 concurrent all_to_all finish in {t * 1e3:7.3f} ms")

# %% [markdown]
# ## Two collectives on one NIC
#
# A node with 4 NICs for 8 GPUs: GPUs 0 and 1 share NIC 0. Two data-parallel all-reduces running at
# the same time through it take about twice as long as one alone.

# %%
topo = topology_for("hgx-h200", nodes=2, nics_per_node=4)
alone = collective_time_flow(topo, "all_reduce", 2**30, [0, 8])
both = concurrent_collectives(topo, [("all_reduce", 2**30, [0, 8]), ("all_reduce", 2**30, [1, 9])])
print(f"alone {alone * 1e3:.2f} ms, sharing a NIC {both[0] * 1e3:.2f} ms ({both[0] / alone:.2f}x)")
