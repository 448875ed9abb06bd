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
# # 07 — Capacity planning: Llama-3 405B on 16K H100 vs 4K GB200
#
# The question a simulator is for: *I have N GPUs of this kind (or a budget): what is the best way to
# train this model, how long will it take, what will it cost?*
#
# `simcore.planning.plan` enumerates every layout (tensor, pipeline, data, context, expert and virtual
# pipeline parallelism, micro-batch, recompute, ZeRO stage, pipeline schedule, TP/DP overlap) that
# divides the cluster and fits in memory, prices all of them at once with the vectorised analytic
# engine, and re-checks the winners with the discrete-event engine. This notebook:
#
# 1. finds the best layout of Llama-3.1 405B (sequence 8192, ~16M tokens per step, 15.6T tokens) on
#    16,384 H100 and on 4,032 GB200 (56 NVL72 racks);
# 2. draws scaling curves (best layout at each cluster size);
# 3. draws the cost-vs-time trade-off across cluster sizes and systems.
#
# Prices are illustrative inputs (scenario `cost.price_per_gpu_hour`), not market data.

# %%
import time

import matplotlib.pyplot as plt
import numpy as np

from simcore.planning import plan
from simcore.specs.resolve import load_scenario

t_start = time.perf_counter()
# built-in scenarios by name (scenarios/*.yaml, packaged with simcore): no path, any working directory
H100 = load_scenario("plan_llama3_405b_h100")
GB200 = load_scenario("plan_llama3_405b_gb200")


def show(res, n=3):
    print(
        f"{res.scenario}: {res.evaluated_configs:,} layouts priced, {res.valid_configs:,} fit in memory, "
        f"{res.elapsed_s:.1f} s"
    )
    for e in res.top[:n]:
        des = f", DES {e['des_step_time_s']:.2f} s" if e["des_step_time_s"] else ""
        print(
            f"  #{e['rank']} {e['summary']}: step {e['step_time_s']:.2f} s{des}, MFU {e['mfu']:.1%}, "
            f"{e['memory_per_gpu_bytes'] / 1e9:.0f} GB/GPU, {e['time_to_train_s'] / 86400:.0f} days, "
            f"{e['gpu_hours'] / 1e6:.1f} M GPU-h, cost {e['cost'] / 1e6:.0f} M, {e['energy_run_kwh'] / 1e6:.1f} GWh"
        )
    if res.baseline:
        b = res.baseline
        print(f"  scenario's own layout {b['summary']}: step {b['step_time_s']:.2f} s, MFU {b['mfu']:.1%}")


# %% [markdown]
# ## 1. Best layout on each system

# %%
best_h100 = plan(H100, top=3, des_top=1)
show(best_h100)
best_gb200 = plan(GB200, top=3, des_top=1)
show(best_gb200)

# %%
h, g = best_h100.top[0], best_gb200.top[0]
print(
    f"16,384 H100: {h['tokens_per_s'] / 1e6:.2f} M tokens/s, {h['time_to_train_s'] / 86400:.0f} days\n"
    f" 4,032 GB200: {g['tokens_per_s'] / 1e6:.2f} M tokens/s, {g['time_to_train_s'] / 86400:.0f} days\n"
    f"one GB200 does the work of {h['tokens_per_s_per_gpu'] and g['tokens_per_s_per_gpu'] / h['tokens_per_s_per_gpu']:.1f} H100 "
    f"on this model; energy per token {h['energy_per_token_j']:.2f} J (H100) vs {g['energy_per_token_j']:.2f} J (GB200)"
)

# %% [markdown]
# ## 2. Scaling curves
#
# The best layout at each cluster size (global batch fixed at ~16M tokens, so per-GPU throughput
# falls as the data-parallel degree grows and each GPU gets fewer micro-batches). GB200 sizes are
# whole NVL72 racks.

# %%
sizes = {
    "H100 (HGX, 8-GPU NVLink)": (H100, [1024, 2048, 4096, 8192, 16384]),
    "GB200 (NVL72 racks)": (GB200, [576, 1152, 2016, 4032, 8064]),
}
curves = {}
for label, (sc, gs) in sizes.items():
    pts = []
    for n in gs:
        r = plan(sc, n, top=1, des_top=0)
        if r.top:
            e = r.top[0]
            pts.append((n, e["tokens_per_s"], e["mfu"], e["time_to_train_s"] / 86400, e["summary"]))
    curves[label] = pts
    for p in pts:
        print(
            f"{label:26s} {p[0]:6d} GPUs: {p[1] / 1e6:6.2f} M tok/s, MFU {p[2]:.1%}, {p[3]:6.0f} days  {p[4]}"
        )

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
for label, pts in curves.items():
    n = np.array([p[0] for p in pts])
    ax1.plot(n, [p[1] / 1e6 for p in pts], "o-", label=label)
    ax2.plot(n, [p[2] * 100 for p in pts], "o-", label=label)
ax1.set_xscale("log", base=2)
ax2.set_xscale("log", base=2)
ax1.set_xlabel("GPUs")
ax2.set_xlabel("GPUs")
ax1.set_ylabel("training throughput (M tokens/s)")
ax2.set_ylabel("MFU of the best layout (%)")
ax1.legend()
ax1.grid(alpha=0.3)
ax2.grid(alpha=0.3)
fig.suptitle("Llama-3.1 405B: best layout per cluster size")
fig.tight_layout()

# %% [markdown]
# ## 3. Cost vs time
#
# Every valid layout at every size is a point (time-to-train, cost); the Pareto front holds the
# layouts no other beats on both. More GPUs finish sooner but (past the point where the fixed batch
# starves them) cost more per token.

# %%
fig, ax = plt.subplots(figsize=(7, 5))
tokens = H100.training.tokens
for label, (sc, gs), marker in zip(sizes, sizes.values(), ("o", "s"), strict=True):
    r = plan(sc, gs, top=1, des_top=0, pareto=True)
    t = np.array(r.cloud["seconds_per_token"]) * tokens / 86400
    c = np.array(r.cloud["cost_per_token"]) * tokens / 1e6
    ax.scatter(t, c, s=3, alpha=0.2)
    ft = np.array([p["time_to_train_s"] for p in r.pareto]) / 86400
    fc = np.array([p["cost"] for p in r.pareto]) / 1e6
    ax.plot(ft, fc, marker + "-", label=f"{label}: Pareto front")
    for p in r.pareto[:: max(1, len(r.pareto) // 4)]:
        print(
            f"{label:26s} front: {p['gpus']:6d} GPUs, {p['time_to_train_s'] / 86400:6.0f} days, cost {p['cost'] / 1e6:6.1f} M  {p['summary']}"
        )
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel("time to train 15.6T tokens (days)")
ax.set_ylabel("cost (millions, at the scenario's price per GPU-hour)")
ax.set_title("Llama-3.1 405B: cost vs time of every valid layout")
ax.legend(fontsize=8)
fig.tight_layout()

# %%
print(f"notebook ran in {time.perf_counter() - t_start:.1f} s")
