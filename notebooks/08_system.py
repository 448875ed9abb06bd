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
# # 08 — The system around the GPU: loaders, copies, checkpoints, failures, power caps
#
# A time-to-train is wall-clock time on a real cluster. This notebook shows the classic contrasts
# the GPU-only prediction leaves out, each through a scenario key of `simcore predict`:
#
# 1. too few data-loader workers (`runtime.dataloader`) and the count that removes the stall;
# 2. pinned vs pageable host memory (`simcore.transfer_time`, `pin_memory`);
# 3. checkpointing every hour vs the Young/Daly optimum on a 16K-GPU job (`runtime.checkpoint`,
#    `cluster.storage`, `reliability`);
# 4. a power cap (`cluster.power_cap`): clock, step time and energy per token.
#
# Formulas and the step-by-step 16K-GPU derivation: `docs/system.md`.

# %%
import matplotlib.pyplot as plt
import numpy as np

import simcore
from simcore.specs.resolve import load_scenario
from simcore.specs.system import ReliabilitySpec
from simcore.system.reliability import goodput_fraction, job_mtbf, young_daly_interval


def predict(name: str, *sets: str):  # noqa: ANN201
    return simcore.predict(load_scenario(name, overrides=list(sets)))


base = predict("default")
print(f"{base.name}: step {base.step_time_s:.2f} s on {base.gpus} x {base.device}")

# %% [markdown]
# ## 1. Too few loader workers
#
# Each rank of the default scenario (Llama-3 8B, TP 2 x DP 4) takes 16 batches per step, about 0.49 s
# of GPU work each. With 1.2 s of CPU per sample, `W` workers deliver a batch every `1.2 / W` s; the GPU
# waits `max(1.2 / W - 0.49, copy)` per batch, and with `W = 0` (PyTorch's default) the whole load.

# %%
workers = list(range(0, 7))
steps = []
for w in workers:
    r = predict("default", "runtime.dataloader.sample_time=1.2 s", f"runtime.dataloader.num_workers={w}")
    steps.append(r.step_time_s)
needed = r.system_effects.dataloader.workers_needed
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.bar(workers, steps, color=["tab:red" if w < needed else "tab:green" for w in workers])
ax.axhline(base.step_time_s, color="k", ls="--", label="input always ready")
ax.set_xlabel("num_workers per rank")
ax.set_ylabel("step time (s)")
ax.set_title(f"1.2 s of CPU per sample: {needed} workers remove the stall")
ax.legend()
plt.show()

# %% [markdown]
# ## 2. Pinned vs pageable copies
#
# Pageable host memory is staged by the driver through a pinned bounce buffer: the copy reaches about
# half the rate of a pinned one once it is bandwidth-bound. A language model's batch (131 kB of token
# ids) is latency-bound either way; images or video clips are not.

# %%
sizes = np.logspace(3, 9, 25)
for pinned in (True, False):
    bw = [simcore.transfer_time(float(s), pinned=pinned, system="hgx-h200").bandwidth / 1e9 for s in sizes]
    plt.semilogx(sizes, bw, label="pinned" if pinned else "pageable")
plt.xlabel("bytes per copy (host to GPU)")
plt.ylabel("achieved GB/s")
plt.title("H200 over PCIe 5: pinned vs pageable")
plt.legend()
plt.show()

# %% [markdown]
# ## 3. Checkpoint every hour vs the optimum (16,384 H100s)
#
# Llama 3's record: 419 unexpected interruptions in 54 days on 16,384 H100s, one every 3.09 h for the
# job. A distributed checkpoint of Llama 3 405B (5.68 TB) to Tectonic (2 TB/s) stalls 2.85 s; with a
# 10-minute relaunch, goodput against the checkpoint interval:

# %%
M, basis = job_mtbf(ReliabilitySpec(), 16384, 2048)
C, R = 2.85, 600.0 + 2.85
taus = np.logspace(1.3, 4.2, 60)
plt.semilogx(taus / 60, [goodput_fraction(t, C, 0.0, R, M) for t in taus])
opt = young_daly_interval(C, M)
plt.axvline(opt / 60, color="tab:green", ls="--", label=f"Young/Daly {opt / 60:.1f} min")
plt.axvline(60, color="tab:red", ls="--", label="every hour")
plt.xlabel("minutes between checkpoints")
plt.ylabel("goodput")
plt.legend()
plt.title(f"job MTBF {M / 3600:.2f} h")
plt.show()
print(f"optimum {goodput_fraction(opt, C, 0, R, M):.1%}, hourly {goodput_fraction(3600, C, 0, R, M):.1%}")

# %% [markdown]
# The same through `simcore predict` on the shipped 7,168-GPU Llama 3 405B scenario: the wall-clock
# time to train, sync vs distributed vs async checkpoints at their optimum and hourly.

# %%
for mode in ("sync", "distributed", "async"):
    for interval in (None, "1 h"):
        sets = ["cluster.storage=llama3-tectonic", f"runtime.checkpoint.mode={mode}", "reliability.restart_time=10 min"]
        if interval:
            sets.append(f"runtime.checkpoint.interval={interval}")
        r = predict("llama3-405b-h100", *sets)
        fx = r.system_effects
        print(
            f"{mode:12s} {'hourly' if interval else 'optimum':8s} stall {fx.checkpoint.stall_s:6.2f} s  "
            f"interval {fx.reliability.interval_s / 60:5.1f} min  goodput {fx.reliability.goodput:.1%}  "
            f"{fx.time_to_train_s / 86400:.1f} days (failure-free {r.time_to_train_s / 86400:.1f})"
        )

# %% [markdown]
# ## 4. A power cap
#
# Under a board limit the SM clock drops until the step's average draw fits; GEMMs and attention slow
# with the clock, memory-bound kernels do not. Energy per token falls faster than speed.

# %%
caps = [700, 650, 600, 550, 500, 450, 400, 350]
rows = [predict("default", f"cluster.power_cap={c} W") for c in caps]
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(caps, [r.step_time_s / base.step_time_s for r in rows], "o-", label="step time (x uncapped)")
ax.plot(caps, [r.energy_per_token_j / base.energy_per_token_j for r in rows], "s-", label="energy per token (x)")
ax.invert_xaxis()
ax.set_xlabel("power cap per H200 (W)")
ax.legend()
plt.show()
for c, r in zip(caps, rows, strict=True):
    print(f"{c} W: SM clock {r.system_effects.power.clock_hz / 1e9:.2f} GHz, step {r.step_time_s:.2f} s")
