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
# # 05 — Validate a trace: where the time goes, how far simcore is, and the same run on B200/GB200
#
# A real PyTorch-profiler trace from an H200 (`traces/h200/profile_train_gpt_gelu_ln.json.gz`: two
# training steps of a 4-layer GPT, hidden 1024, sequence 1024, micro-batch 4, fp32 weights with bf16
# autocast, fused AdamW, eager PyTorch; `traces/README.md` says how it was made). We
#
# 1. read it and classify every kernel (GEMM, attention, norm, elementwise, loss, embedding,
#    optimizer, communication, memcpy/memset) and see where a step goes;
# 2. predict the same run with simcore from its scenario and compare per step, per class, per op;
# 3. replay the measured run on B200 and GB200: every kernel re-priced, host launch gaps kept.

# %%
import matplotlib.pyplot as plt

from simcore.specs.registry import checkout_dir
from simcore.traces import read_trace
from simcore.traces.classify import analyze, step_class_times
from simcore.validation.traces import validate
from simcore.workload.replay import replay

# The traces and their scenarios ship with the source tree, not the wheel: checkout_dir() finds the
# clone from the installed package (or $SIMCORE_REPO), whatever the working directory.
REPO = checkout_dir()
TRACES = REPO / "traces"
SCENARIOS = REPO / "tests" / "data" / "trace_scenarios"
TRACE = str(TRACES / "h200" / "profile_train_gpt_gelu_ln.json.gz")
SCENARIO = str(SCENARIOS / "h200_train_gpt_gelu_ln.yaml")

tr = read_trace(TRACE)
a = analyze(tr)
print(f"{tr.device_name}: {len(tr.gpu_events)} GPU activities, {len(tr.cpu_ops)} cpu ops with External ids")
print(f"steps ({a.step_source}):", [f"{s.name} {s.time_s * 1e3:.2f} ms" for s in a.steps])
print(f"median step: {a.step_time_s * 1e3:.2f} ms")

# %% [markdown]
# ## Where a step goes
#
# "Exposed" time is what each class adds to the GPU timeline (communication only where no other
# kernel runs); time with nothing on the GPU is `idle`: launch gaps and host stalls, the GPU waiting
# for the host. Summed, the classes give the step. "Kernel" time is the sum of kernel durations.

# %%
exposed = a.class_times(exposed=True)
kernel = a.class_times(exposed=False)
print(f"{'class':<14}{'exposed ms':>12}{'kernels ms':>12}")
for c, v in sorted(exposed.items(), key=lambda kv: -kv[1]):
    print(f"{c:<14}{v * 1e3:>12.3f}{kernel.get(c, 0.0) * 1e3:>12.3f}")
print(f"{'sum':<14}{sum(exposed.values()) * 1e3:>12.3f}")

# %%
step = a.steps[0]
colors = {
    "gemm": "#4c72b0", "attention": "#dd8452", "norm": "#55a868", "elementwise": "#c44e52",
    "loss": "#8172b3", "embedding": "#937860", "optimizer": "#da8bc3", "memcpy": "#8c8c8c",
    "memset": "#bbbbbb",
}  # fmt: skip
fig, ax = plt.subplots(figsize=(10, 2.2))
for k in step.kernels:
    ax.barh(
        0, k.ev.dur * 1e3, left=(k.ev.ts - step.gpu_start) * 1e3, color=colors.get(k.base, "k"), height=0.6
    )
ax.set_yticks([])
ax.set_xlabel("ms from the step's first kernel")
ax.set_title(f"{step.name}: kernels on the GPU by class (white = GPU idle, waiting for the host)")
handles = [plt.Rectangle((0, 0), 1, 1, color=v) for v in colors.values()]
ax.legend(handles, list(colors), ncol=5, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.45))
fig.tight_layout()
plt.show()
print({c: round(v * 1e3, 3) for c, v in step_class_times(step).items()})

# %% [markdown]
# ## Predicted vs measured
#
# `validate` predicts the scenario that describes this run (`simcore.predict`) and folds simcore's
# breakdown onto the same classes. The op table prices every op whose shape the trace recorded
# (`record_shapes=True`) with simcore's cost model for that exact shape.

# %%
rep = validate([TRACE], SCENARIO)
print(f"measured {rep.measured_step_time_s * 1e3:.2f} ms, predicted {rep.predicted_step_time_s * 1e3:.2f} ms, "
      f"error {rep.error_pct:+.1f}%")  # fmt: skip
for r in rep.classes:
    e = "-" if r["error_pct"] is None else f"{r['error_pct']:+.0f}%"
    print(
        f"  {r['class']:<14} measured {r['measured_s'] * 1e3:7.3f} ms  predicted {r['predicted_s'] * 1e3:7.3f} ms  {e}"
    )
print("ops with the largest total error:")
for k in rep.kernels[:6]:
    print(
        f"  {k['op'][:60]:<60} x{k['count_per_step']:g}  {k['measured_s'] * 1e6:8.1f} us -> {k['predicted_s'] * 1e6:8.1f} us"
    )

# %%
rows = sorted(rep.classes, key=lambda r: -r["measured_s"])
fig, ax = plt.subplots(figsize=(8, 3))
x = range(len(rows))
ax.bar([i - 0.2 for i in x], [r["measured_s"] * 1e3 for r in rows], 0.4, label="measured")
ax.bar([i + 0.2 for i in x], [r["predicted_s"] * 1e3 for r in rows], 0.4, label="simcore")
ax.set_xticks(list(x), [r["class"] for r in rows], rotation=30, ha="right")
ax.set_ylabel("ms per step")
ax.legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# ## The host's own speed
#
# This run is partly host-bound, so the step depends on how fast the CPU issues work. Eager PyTorch
# never waits for the GPU inside a step, so the trace's CPU timestamps show the host's pace: the
# spacing of the norm ops gives the host time per layer, which `simcore calibrate` compares with the
# profile's host model (`host_scale`). Measured on this training trace and used on another recorded
# in the same process (an eager inference run: a prefill and eight decode steps per profiled step),
# the prediction moves with the host speed.

# %%
import tempfile  # noqa: E402

from simcore.calibration.host_trace import host_scale  # noqa: E402
from simcore.specs.profile import load_profile, save_profile  # noqa: E402
from simcore.specs.registry import default_registry  # noqa: E402

prof = load_profile(default_registry().device("h200"))
scale, steps = host_scale([a], prof)
for x in steps:
    print(f"{x.mode} ({x.act}, {x.layers} layers): host {x.measured_s * 1e3:.2f} ms per layer, "
          f"profile {x.expected_s * 1e3:.2f} ms -> x{x.ratio:.3f}")  # fmt: skip
other = str(TRACES / "h200" / "profile_infer_prefill_decode.json.gz")
other_sc = str(SCENARIOS / "h200_infer_prefill_decode.yaml")
plain = validate([other], other_sc)
with tempfile.TemporaryDirectory() as tmp:
    path = f"{tmp}/h200_host.yaml"
    save_profile(prof.model_copy(update={"host_scale": scale or 1.0}), path)
    cal = validate([other], other_sc, [f"calibration={path}"])
print(f"inference trace: measured {plain.measured_step_time_s * 1e3:.2f} ms; shipped profile "
      f"{plain.predicted_step_time_s * 1e3:.2f} ms ({plain.error_pct:+.1f}%), host speed from this "
      f"trace {cal.predicted_step_time_s * 1e3:.2f} ms ({cal.error_pct:+.1f}%)")  # fmt: skip

# %% [markdown]
# ## The CPU's per-op speed, and loops that never wait for the GPU
#
# `validate` reads two more things from a trace (its notes say so, `rep.runtime` holds them): the
# median duration of `aten::t` on each thread, a probe of the CPU's per-op speed that moved 2.5-14 us
# across the committed traces (the host model is fitted in those units), and whether any step waits
# for the GPU (`loss.item()`): if none does, the host runs into the next step while the GPU finishes
# this one, and a step takes the larger of the two totals. `--set` (here `overrides`) takes either back.

# %%
item = str(TRACES / "h200" / "round25" / "profile_train_gpt_L8_h768_item.json.gz")
item_sc = str(SCENARIOS / "h200_r25_train_gpt_l8_h768_item.yaml")
for label, over in (("trace's CPU speed", []), ("calibration machine's", ["runtime.cpu_op_time=null"])):
    r = validate([item], item_sc, over)
    print(f"{label:24s}: predicted {r.predicted_step_time_s * 1e3:6.2f} ms ({r.error_pct:+.1f}%), "
          f"runtime.cpu_op_time {r.runtime['cpu_op_time']}")  # fmt: skip
for label, over in (("as traced (no sync)", []), ("if it synced every step", ["runtime.step_sync=true"])):
    r = validate([TRACE], SCENARIO, over)
    print(f"{label:24s}: predicted {r.predicted_step_time_s * 1e3:6.2f} ms ({r.error_pct:+.1f}%)")

# %% [markdown]
# ## The same run on B200 and GB200
#
# `replay` turns the trace into a task graph (stream order, host launch times, cross-stream waits,
# collectives matched across ranks) and re-prices each kernel by the ratio of simcore's cost model
# on the target to the source, for the op's own shape. The host is kept: this small model is partly
# launch-bound, so a faster GPU mostly turns kernel time into idle time.

# %%
results = {dev: replay([TRACE], dev, analyses=[a]) for dev in ("b200", "gb200")}
for dev, r in results.items():
    print(f"{dev}: {r.replayed_source_step_time_s * 1e3:.2f} ms -> {r.predicted_step_time_s * 1e3:.2f} ms "
          f"(x{r.speedup:.2f}); kernels priced by {r.how}")  # fmt: skip
    for c in r.classes[:5]:
        print(f"   {c['class']:<12} {c['source_s'] * 1e3:7.3f} -> {c['target_s'] * 1e3:7.3f} ms")

# %% [markdown]
# How far can a replay be trusted? For the H100 there are measurements to check it against: twins of
# committed H200 runs measured on an H100 SXM (`traces/h100/twins.csv`). A GPU-bound one, the full-size
# Llama-1B-like step, replayed from its H200 trace onto the H100, beside the H100's own trace of it
# (`python -m simcore.validation devices` does this for all 19: GPU-bound ones 9 of 9 within 10 %; a
# host-bound run carries its machine's CPU, which replay keeps).

# %%
h200_run = str(TRACES / "h200" / "profile_train_llama-1b_s2048_b4_eager.json.gz")
h100_run = str(TRACES / "h100" / "round117" / "profile_train_llama-1b_s2048_b4_eager.json.gz")
on_h100 = replay([h200_run], "h100")
measured_h100 = analyze(read_trace(h100_run)).step_time_s
print(f"H200 measured {on_h100.measured_step_time_s * 1e3:.1f} ms -> H100 replayed "
      f"{on_h100.predicted_step_time_s * 1e3:.1f} ms; the H100 measured {measured_h100 * 1e3:.1f} ms "
      f"({100 * (on_h100.predicted_step_time_s / measured_h100 - 1):+.1f} %)")  # fmt: skip

# %% [markdown]
# And a two-GPU DDP run: the NCCL all-reduce kernels carry their message size and group, so the
# replay prices them with the collective model of the target system (NVLink 5 on GB200 NVL72).

# %%
ddp = replay([str(TRACES / "h200x2" / f"profile_ddp_rank{r}.json.gz") for r in (0, 1)], "gb200")
print(f"DDP step on 2 x H200 {ddp.measured_step_time_s * 1e3:.2f} ms (replayed {ddp.replayed_source_step_time_s * 1e3:.2f}); "
      f"on 2 x GB200 {ddp.predicted_step_time_s * 1e3:.2f} ms")  # fmt: skip
print({c["class"]: round(c["change_s"] * 1e3, 3) for c in ddp.classes})
