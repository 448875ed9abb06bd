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
# # 04 — Parallelism: pipeline bubbles, tensor parallelism and NVLink domains, weak scaling
#
# simcore lowers a model and a parallel plan (tp, pp, dp, cp, ep, vp, ZeRO/FSDP, schedule) into
# per-rank work, prices it with the calibrated compute and communication models, and composes a
# training step either in closed form (the analytic engine, over numpy grids) or by discrete-event
# simulation of the pipeline schedule (simpy). See `docs/parallelism.md` for the formulas.
#
# 1. **Pipeline bubbles**: the idle fraction of each schedule versus the number of micro-batches,
#    measured in the discrete-event engine and compared with the closed forms.
# 2. **Tensor parallelism inside vs across NVLink domains**: the same model with growing TP on an
#    8-GPU HGX node and on a 72-GPU GB200 NVL72 rack.
# 3. **Weak scaling**: Megatron-Core's published H100 weak-scaling table against simcore, and
#    data-parallel weak scaling of one model on H100 and GB200 systems.

# %%
import time

import matplotlib.pyplot as plt
import numpy as np

from simcore.comm.collectives import collective_cost
from simcore.comm.groups import placement
from simcore.engine import schedules as S
from simcore.engine import training as T
from simcore.engine.des import PipelineJob, StageTimes, simulate_pipeline
from simcore.specs import cluster_for, default_registry
from simcore.specs.scenario import ModelSpec, TrainingSpec
from simcore.validation import published as P

t_start = time.perf_counter()
reg = default_registry()

# %% [markdown]
# ## 1. Bubble fraction versus micro-batches, per schedule (DES)
#
# Uniform stages with forward `F = 1`, backward `B = 2` (input gradients 1, weight gradients
# `W = 1`), free point-to-point transfers, no data parallelism: the only idle time is the
# schedule's bubble. Points are the discrete-event engine; lines the closed forms of
# `simcore.engine.schedules.bubble_fraction` — 1F1B `(p-1)/(m+p-1)`, interleaving divides the
# bubble term by `v`, ZB-H1 shrinks it to `(p-1)(F+B-2W)`, DualPipe `(p/2-1)(F&B+B-3W)`.

# %%
p = 8
ms = np.array([8, 16, 32, 64, 128])
cases = [
    ("gpipe", 1),
    ("1f1b", 1),
    ("interleaved", 2),
    ("interleaved", 4),
    ("zero_bubble", 1),
    ("dualpipe", 1),
]


def des_bubble(schedule: str, p: int, m: int, v: int) -> float:
    nch = S.chunks(schedule, v)
    per = 1 if schedule == "dualpipe" else nch  # DualPipe: each rank holds 2 chunks of full stage size
    st = StageTimes(fwd=1.0 / per, bwd=2.0 / per, wgrad=1.0 / per)
    job = PipelineJob(
        schedule=schedule,
        pp=p,
        microbatches=m,
        vp=v,
        stages=[st] * (p * nch),
        p2p_time=0.0,
        dp_time=[0.0] * p,
    )
    return simulate_pipeline(job).bubble_fraction


fig, ax = plt.subplots(figsize=(8, 4.5))
rows = []
for sched, v in cases:
    label = f"{sched} v={v}" if sched == "interleaved" else sched
    des = [des_bubble(sched, p, int(m), v) for m in ms]
    closed = S.bubble_fraction(sched, p, ms, v)
    (line,) = ax.plot(ms, closed, "-", alpha=0.6)
    ax.plot(ms, des, "o", color=line.get_color(), label=label)
    rows.append((label, des, closed))
ax.set_xscale("log", base=2)
ax.set_xlabel("micro-batches per step (m)")
ax.set_ylabel("bubble fraction (idle / step)")
ax.set_title(f"Pipeline bubble, p = {p} stages: DES (points) vs closed form (lines)")
ax.legend(fontsize=8)
ax.grid(alpha=0.3)
plt.show()

print(f"{'schedule':<16}" + "".join(f"{'m=' + str(m):>16}" for m in ms))
for label, des, closed in rows:
    print(f"{label:<16}" + "".join(f"{d:>8.3f}/{c:<7.3f}" for d, c in zip(des, closed, strict=True)))
print("(DES / closed form)")

# %% [markdown]
# GPipe and 1F1B have the same bubble (1F1B only lowers the memory: `p` micro-batches in flight
# instead of `m`); interleaving divides it by `v` at the price of `v` times more point-to-point
# transfers; ZB-H1 fills the cool-down with deferred weight gradients; DualPipe runs two
# directions that fill each other's gaps. With free transfers and uniform stages the DES and the
# closed forms agree for GPipe, 1F1B and interleaving (a test holds them within 1 %). For ZB-H1 and
# DualPipe the DES (and the analytic engine's step formula, which matches the DES) leaves a larger
# bubble than the papers' closed forms plotted here: ZB-H1's paper bubble is `(p-1)(F+B-W)`, a third
# of 1F1B's when F = B = W, while the simulated schedule recovers only `(p-1) W` of it.

# %% [markdown]
# ## 2. Tensor parallelism inside vs across NVLink domains
#
# Llama-3 70B (sequence 8192, micro-batch 1, selective recompute, sequence parallelism, ZeRO-1) on 576
# GPUs: 72 HGX H100 nodes (NVLink domain of 8) or 8 GB200 NVL72 racks (NVLink domain of 72). TP
# grows from 1 to 64 with `dp = 576 / tp`, global batch 576 sequences. The analytic engine evaluates
# all layouts of a system in one vectorised call. The Megatron placement puts TP ranks
# fastest, so a TP group larger than the NVLink domain crosses the scale-out network.

# %%
model = ModelSpec.model_validate(
    {k: v for k, v in reg.model_preset("llama3-70b").items() if k != "aliases"} | {"seq_len": 8192}
)
train = TrainingSpec(micro_batch=1, global_batch=576, precision="bf16", recompute="selective")
tps = np.array([1, 2, 4, 8, 16, 32, 64])
systems = {"hgx-h100 (NVLink 8)": ("hgx-h100", 576), "gb200-nvl72 (NVLink 72)": ("gb200-nvl72", 576)}
act_bytes = 8192 * model.hidden * 2.0  # one layer's activations of one sequence (bf16)
fig, axes = plt.subplots(1, 3, figsize=(15, 4))
for name, (system, gpus) in systems.items():
    cl = cluster_for(system, gpus=gpus)
    lay = T.TrainingLayout(
        tp=tps, pp=1, dp=gpus // tps, micro_batch=1, global_batch=576, sp=True, zero=1, recompute="selective"
    )
    ev = T.evaluate(model, train, lay, cl)
    step = np.asarray(ev.step_time_s)
    tp_share = np.asarray(ev.breakdown["tp_comm"]) / step
    tok_per_gpu = np.asarray(ev.tokens_per_step) / step / gpus
    fits = np.asarray(ev.memory_per_gpu_bytes) < cl.device.memory.capacity - 1.5 * 1024**3
    ag = np.array(
        [float(collective_cost("all_gather", act_bytes, placement(cl, t, 1), cl).time_s) for t in tps]
    )
    axes[0].plot(tps, 1e3 * ag, "o-", label=name)
    axes[1].plot(tps, 100 * tp_share, "o-", label=name)
    axes[2].plot(tps, tok_per_gpu, "o-", label=name)
    axes[2].plot(tps[~fits], tok_per_gpu[~fits], "x", color="k")
    print(name)
    for t, a, sh, k, f in zip(tps, ag, tp_share, tok_per_gpu, fits, strict=True):
        print(
            f"  tp {t:>2}: all-gather {1e3 * a:.3f} ms, TP comm {sh:4.0%} of step, "
            f"{k:7,.0f} tok/s/GPU{'' if f else '  (does not fit)'}"
        )
for ax in axes:
    ax.set_xscale("log", base=2)
    ax.set_xlabel("tensor-parallel size")
    ax.axvline(8, color="grey", ls=":", lw=1)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
axes[0].set_ylabel("one all-gather of a layer's activations, ms")
axes[1].set_ylabel("TP communication, % of step")
axes[2].set_ylabel("tokens / s / GPU (x: does not fit)")
fig.suptitle("Llama-3 70B on 576 GPUs: TP inside vs across the NVLink domain (dotted: HGX domain)")
fig.tight_layout()
plt.show()

# %% [markdown]
# The TP share of the step grows with TP on both systems: each GPU's GEMM work shrinks as `1/tp`
# while every layer's all-gathers and reduce-scatters keep moving the whole activation. Beyond the
# HGX domain (TP 16 and up) the groups span several nodes; simcore prices those all-gathers and
# reduce-scatters hierarchically over the node's 8 InfiniBand rails, where each NIC carries only
# about `bytes / tp`, so in the model one collective costs barely more across nodes than inside one
# (left panel). GB200 NVL72 keeps every TP group on NVLink, and its faster GPUs make the same
# communication a larger share of a shorter step. Small TP does not fit in memory (crosses).

# %% [markdown]
# ## 3. Weak scaling
#
# ### Megatron-Core on H100: published vs simcore
#
# The Megatron-LM README's weak-scaling table (GPT models from 1.7B on 48 H100 to 462B on 6144,
# Megatron-Core r0.8.0) against simcore's prediction of every row, both in the README's FLOP
# convention. `python -m simcore.validation published` prints all published tables.

# %%
res = [r for r in P.predict_rows() if r.primary and r.source == "MCore H100 weak"]
res.sort(key=lambda r: r.gpus)
g = [r.gpus for r in res]
fig, ax = plt.subplots(figsize=(8, 4))
ax.plot(g, [r.published_tflops_per_gpu for r in res], "o-", label="published (Megatron-LM README)")
ax.plot(g, [r.predicted_tflops_per_gpu for r in res], "s--", label="simcore")
for r in res:
    ax.annotate(
        r.model.replace("GPT-", ""),
        (r.gpus, r.published_tflops_per_gpu),
        fontsize=7,
        textcoords="offset points",
        xytext=(0, 6),
        ha="center",
    )
ax.set_xscale("log", base=2)
ax.set_xlabel("GPUs (model grows with the cluster)")
ax.set_ylabel("TFLOP/s per GPU")
ax.set_ylim(0, None)
ax.grid(alpha=0.3)
ax.legend()
ax.set_title("Weak scaling, GPT on H100 (TP/PP/DP per the README)")
plt.show()
for r in res:
    print(
        f"{r.model:<10} {r.gpus:>5} GPUs {r.layout:<20} published {r.published_tflops_per_gpu:6.1f}  "
        f"simcore {r.predicted_tflops_per_gpu:6.1f}  ({100 * r.error:+.1f}%)  bubble "
        f"{100 * r.fractions['bubble']:.0f}%  dp {100 * r.fractions['dp_comm']:.0f}%"
    )

# %% [markdown]
# ### Data-parallel weak scaling of one model
#
# Llama-3 8B (sequence 8192, TP 2 with sequence parallelism, ZeRO-1, 8 sequences per DP rank)
# from one system to 512 of them (4096 H100/H200, 36864 GB200): the per-GPU work is fixed, so only the data-parallel gradient
# reduction changes with scale. It is bucketed and overlapped with the last micro-batch's
# backward; what stays exposed grows with the ring/tree latency terms of the larger group.

# %%
model8 = ModelSpec.model_validate(
    {k: v for k, v in reg.model_preset("llama3-8b").items() if k != "aliases"} | {"seq_len": 8192}
)
fig, ax = plt.subplots(figsize=(8, 4))
for system in ("hgx-h100", "hgx-h200", "gb200-nvl72"):
    per_node = reg.system(system).gpus
    gpus = per_node * np.array([1, 2, 8, 32, 128, 512])
    eff = []
    for n in gpus:
        cl = cluster_for(system, gpus=int(n))
        dp = int(n) // 2
        tr = TrainingSpec(micro_batch=1, global_batch=8 * dp, recompute="selective")
        lay = T.TrainingLayout(tp=2, dp=dp, micro_batch=1, global_batch=8 * dp, sp=True, zero=1)
        ev = T.evaluate(model8, tr, lay, cl)
        eff.append(float(np.asarray(ev.tokens_per_step)) / float(np.asarray(ev.step_time_s)) / n)
    eff_a = np.array(eff)
    ax.plot(gpus, eff_a / eff_a[0], "o-", label=f"{system} ({eff_a[0]:,.0f} tok/s/GPU at {gpus[0]})")
ax.set_xscale("log", base=2)
ax.set_xlabel("GPUs")
ax.set_ylabel("per-GPU throughput / smallest cluster")
ax.set_ylim(0.8, 1.02)
ax.grid(alpha=0.3)
ax.legend(fontsize=8)
ax.set_title("Llama-3 8B data-parallel weak scaling (TP 2, ZeRO-1)")
plt.show()

# %%
print(f"notebook ran in {time.perf_counter() - t_start:.1f} s")
