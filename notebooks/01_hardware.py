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
# # 01 — The hardware spec library
#
# simcore ships a library of GPUs, links and systems under `hardware_specs/`, every number with a
# source. This notebook compares the devices: dense peak FLOP/s per data type, HBM bandwidth, the
# roofline ridge point (where a kernel stops being memory-bound), and the per-GPU bandwidth of the
# scale-up (NVLink) and scale-out (InfiniBand/Ethernet) networks.
#
# All rates are **dense** (vendor sheets quote 2:4 sparse tensor rates; simcore stores half of those)
# and all bandwidths are **per direction** (vendor NVLink headlines are both directions summed).

# %%
import matplotlib.pyplot as plt
import numpy as np

from simcore import units
from simcore.specs import cluster_for, default_registry

reg = default_registry()
devices = [
    reg.device(n) for n in ["a100", "h100", "h800", "h200", "b200", "gb200", "b300", "gb300", "mi300x"]
]
print(
    f"{len(reg.devices)} devices, {len(reg.links)} links, {len(reg.systems)} systems, {len(reg.models)} model presets"
)

# %% [markdown]
# ## Dense peak FLOP/s per data type

# %%
dtypes = ["fp64", "fp32", "tf32", "bf16", "fp8", "fp4"]
x = np.arange(len(devices))
width = 0.8 / len(dtypes)
fig, ax = plt.subplots(figsize=(11, 4))
for i, dt in enumerate(dtypes):
    vals = [d.peak.get(dt, np.nan) / 1e12 for d in devices]  # type: ignore[call-overload]
    ax.bar(x + (i - len(dtypes) / 2 + 0.5) * width, vals, width, label=dt)
ax.set_xticks(x, [d.name for d in devices])
ax.set_yscale("log")
ax.set_ylabel("dense peak, TFLOP/s (log)")
ax.set_title("Dense peak throughput per data type")
ax.legend(ncol=len(dtypes), fontsize=8)
plt.show()

# %% [markdown]
# ## HBM capacity and bandwidth

# %%
fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 3.5))
a1.bar([d.name for d in devices], [d.memory.capacity / 1e9 for d in devices], color="tab:purple")
a1.set_ylabel("HBM capacity, GB")
a2.bar([d.name for d in devices], [d.memory.bandwidth / 1e12 for d in devices], color="tab:green")
a2.set_ylabel("HBM bandwidth, TB/s")
for a in (a1, a2):
    a.tick_params(axis="x", rotation=45)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## Roofline and ridge points
#
# Attainable FLOP/s = min(peak, intensity x HBM bandwidth). The ridge point (peak / bandwidth, in
# FLOP per byte) is the arithmetic intensity a kernel needs to be compute-bound. Decode-time GEMVs sit
# at ~1 FLOP/byte (bf16), far left of every ridge: memory-bound everywhere.

# %%
intensity = np.logspace(0, 4, 200)  # FLOP/byte
fig, ax = plt.subplots(figsize=(8, 5))
for d in devices:
    peak = d.peak_flops("bf16")
    ax.loglog(intensity, np.minimum(peak, intensity * d.memory.bandwidth) / 1e12, label=d.name)
    ridge = peak / d.memory.bandwidth
    ax.plot([ridge], [peak / 1e12], "k.", ms=4)
ax.set_xlabel("arithmetic intensity, FLOP/byte")
ax.set_ylabel("attainable bf16, TFLOP/s")
ax.set_title("bf16 roofline (dense peak, datasheet HBM bandwidth)")
ax.legend(fontsize=8)
plt.show()

for d in devices:
    fp8 = d.peak.get("fp8")  # type: ignore[call-overload]
    fp8_ridge = f"{fp8 / d.memory.bandwidth:6.0f} FLOP/B" if fp8 else "   (no fp8)"
    print(
        f"{d.name:8s} bf16 ridge {d.peak_flops('bf16') / d.memory.bandwidth:6.0f} FLOP/B   fp8 ridge {fp8_ridge}"
    )

# %% [markdown]
# ## Scale-up vs scale-out bandwidth per GPU
#
# Inside an NVLink domain a GPU reaches any other at its NVLink bandwidth; across domains it shares
# the system's NICs (one per GPU on every system here). The ratio is why tensor parallelism stays
# inside the NVLink domain — and why the 72-GPU NVL72 domain changes the picture.

# %%
systems = [
    "hgx-a100",
    "hgx-h100",
    "hgx-h800",
    "hgx-h200",
    "dgx-b200",
    "dgx-b300",
    "gb200-nvl72",
    "gb300-nvl72",
]
rows = []
for s in systems:
    c = cluster_for(s)
    per_gpu_net = c.nics_per_node * c.nic_bandwidth / c.gpus_per_node
    rows.append((s, c.system.nvlink_domain, c.nvlink_bandwidth, per_gpu_net))
    print(
        f"{s:12s} domain {c.system.nvlink_domain:3d}  NVLink {units.fmt(c.nvlink_bandwidth, 'bandwidth'):>9s}/dir  "
        f"network {units.fmt(per_gpu_net, 'bandwidth'):>9s}/dir  ratio {c.nvlink_bandwidth / per_gpu_net:4.1f}x"
    )

x = np.arange(len(rows))
fig, ax = plt.subplots(figsize=(10, 4))
ax.bar(x - 0.2, [r[2] / 1e9 for r in rows], 0.4, label="NVLink per GPU per direction")
ax.bar(x + 0.2, [r[3] / 1e9 for r in rows], 0.4, label="InfiniBand/Ethernet per GPU per direction")
ax.set_xticks(x, [f"{r[0]}\n(domain {r[1]})" for r in rows], fontsize=8)
ax.set_ylabel("GB/s")
ax.set_yscale("log")
ax.legend()
ax.set_title("Scale-up vs scale-out bandwidth per GPU")
plt.show()

# %% [markdown]
# ## Where the numbers come from
#
# Every spec names its sources; `simcore hw show NAME` prints them. For example the H200:

# %%
for field, src in reg.device("h200").sources.items():
    print(f"{field:12s} {src}")
