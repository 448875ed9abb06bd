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
# # 08 — The system around the GPU: the book's classic contrasts
#
# A time-to-train is wall-clock time on a real cluster. This notebook shows the classic contrasts
# the GPU-only prediction leaves out. Each is a ready-made pair of scenarios under `scenarios/`
# (`contrast-<what>-<side>.yaml`), loaded here by name and predicted as `simcore predict <name>` would:
#
# 1. too few data-loader workers vs enough (`runtime.dataloader`);
# 2. pinned vs pageable host memory (`pin_memory`, `simcore.transfer_time`);
# 3. `nn.DataParallel` vs DDP (`parallel.data_parallel`);
# 4. eager vs CUDA graphs for a small-batch decode (`runtime.framework`);
# 5. a MIG slice vs a whole GPU for small-model inference (`cluster.mig`), and MPS / time-slicing
#    (`cluster.sharing`);
# 6. checkpointing every hour vs the Young/Daly optimum (`runtime.checkpoint`, `reliability`);
# 7. a power cap, and air vs liquid cooling (`cluster.power_cap`, `cluster.cooling`).
#
# Formulas, the step-by-step 16K-GPU derivation and the table of all pairs: `docs/system.md`.

# %%
import matplotlib.pyplot as plt
import numpy as np

import simcore
from simcore.specs.resolve import load_scenario
from simcore.specs.system import ReliabilitySpec
from simcore.system.reliability import goodput_fraction, job_mtbf, young_daly_interval


def predict(name: str, *sets: str):  # noqa: ANN201
    """``simcore predict NAME --set ...``: a shipped scenario by name, with overrides."""
    return simcore.predict(load_scenario(name, overrides=list(sets)))


def pair(what: str, *sides: str) -> dict:
    """The predictions of the ready-made contrast ``scenarios/contrast-WHAT-SIDE.yaml``, by side."""
    return {side: predict(f"contrast-{what}-{side}") for side in sides}


base = predict("default")
print(f"{base.name}: step {base.step_time_s:.2f} s on {base.gpus} x {base.device}")

# %% [markdown]
# ## 1. Too few loader workers
#
# Each rank of the default scenario (Llama-3 8B, TP 2 x DP 4) takes 16 batches per step, about 0.49 s
# of GPU work each. With 1.2 s of CPU per sample, `W` workers deliver a batch every `1.2 / W` s; the GPU
# waits `max(1.2 / W - 0.49, copy)` per batch, and with `W = 0` (PyTorch's default) the whole load.
# The pair `contrast-loader-workers-{too-few,enough}` is 1 vs 3 workers; the sweep varies the count.

# %%
loader = pair("loader-workers", "too-few", "enough")
for side, r in loader.items():
    d = r.system_effects.dataloader
    print(f"{side:8s} {d.num_workers} workers: step {r.step_time_s:.2f} s, GPU waits {d.wait_per_step_s:.2f} s per step")
workers = list(range(0, 7))
steps = [predict("contrast-loader-workers-too-few", f"runtime.dataloader.num_workers={w}").step_time_s for w in workers]
needed = loader["enough"].system_effects.dataloader.workers_needed
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
# ids) is latency-bound either way; images or video clips are not: the pair
# `contrast-loader-pinned-vs-pageable-{pinned,pageable}` feeds 256 MB samples.

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
for side, r in pair("loader-pinned-vs-pageable", "pinned", "pageable").items():
    d = r.system_effects.dataloader
    print(f"{side:8s}: copy {d.copy_s * 1e3:.1f} ms per 256 MB batch, step {r.step_time_s * 1e3:.0f} ms")

# %% [markdown]
# ## 3. nn.DataParallel vs DDP
#
# `nn.DataParallel` broadcasts the weights from GPU 0 and reduces the gradients to it every step, from
# one Python process; DDP all-reduces gradient buckets behind the backward.

# %%
for side, r in pair("ddp-vs-dataparallel", "ddp", "dataparallel").items():
    print(f"{side:12s}: step {r.step_time_s * 1e3:.0f} ms, exposed data-parallel comm {r.breakdown['dp_comm'] * 1e3:.1f} ms")

# %% [markdown]
# ## 4. Eager vs CUDA graphs (decode, batch 1)

# %%
for side, r in pair("decode-eager-vs-cuda-graphs", "eager", "cuda-graphs").items():
    print(f"{side:11s}: {r.decode_step_time_s * 1e3:.2f} ms per token ({r.decode_kernels:.0f} kernels), {r.tokens_per_s:.0f} tokens/s")

# %% [markdown]
# ## 5. A MIG slice vs a whole GPU (Llama-3 8B fp8, batch 4)
#
# One `1g.18gb` slice is 1/7 of the SMs and 1/8 of the memory; an H200 holds 7 of them.

# %%
mig = pair("mig-slice-vs-whole-gpu", "1g", "whole")
per_gpu = {"1g": 7 * mig["1g"].tokens_per_s, "whole": mig["whole"].tokens_per_s}
for side, r in mig.items():
    print(f"{side:5s}: TTFT {r.ttft_s * 1e3:.0f} ms, {r.tokens_per_s:.0f} tokens/s per job, {per_gpu[side]:.0f} per GPU")

# %% [markdown]
# Several small jobs on one GPU instead (`cluster.sharing`): four processes of an eager, batch-1 decode,
# time-sliced or under MPS (`contrast-gpu-sharing-{alone,time-slicing,mps}`).

# %%
for side, r in pair("gpu-sharing", "alone", "time-slicing", "mps").items():
    per_gpu = r.sharing.tokens_per_s_per_gpu if r.sharing else r.tokens_per_s
    print(f"{side:12s}: {r.decode_step_time_s * 1e3:5.1f} ms per step, {r.tokens_per_s:4.0f} tokens/s per process, {per_gpu:4.0f} per GPU")

# %% [markdown]
# ## 6. Checkpoint every hour vs the optimum (16,384 H100s)
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
# The same through `simcore predict` on the 7,168-GPU Llama 3 405B pair
# `contrast-checkpoint-hourly-vs-optimum-{hourly,optimum}` (distributed checkpoints), then sync and
# async saving at both intervals.

# %%
for mode in ("distributed", "sync", "async"):
    for side, r in pair("checkpoint-hourly-vs-optimum", "optimum", "hourly").items():
        if mode != "distributed":
            r = predict(f"contrast-checkpoint-hourly-vs-optimum-{side}", f"runtime.checkpoint.mode={mode}")
        fx = r.system_effects
        print(
            f"{mode:12s} {side:8s} stall {fx.checkpoint.stall_s:6.2f} s  "
            f"interval {fx.reliability.interval_s / 60:5.1f} min  goodput {fx.reliability.goodput:.1%}  "
            f"{fx.time_to_train_s / 86400:.1f} days (failure-free {r.time_to_train_s / 86400:.1f})"
        )

# %% [markdown]
# ## 7. A power cap, and air vs liquid cooling
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

# %% [markdown]
# Cooling sets the board limit a GPU sustains: a B200 is held to 1000 W air-cooled, 1200 W liquid-cooled
# (`hardware_specs/cooling`). The extra watts buy a few per cent of clock: perf per watt falls.

# %%
for side, r in pair("cooling-air-vs-liquid", "air", "liquid").items():
    p = r.system_effects.power
    print(
        f"{side:6s}: limit {p.cap_w:.0f} W, SM clock {p.clock_hz / 1e9:.2f} GHz, step {r.step_time_s:.2f} s, "
        f"{r.energy_per_token_j * 1e3:.1f} mJ per token, {1 / r.energy_per_token_j:.1f} tokens per joule"
    )
