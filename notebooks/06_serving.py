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
# # 06 — Serving: latency percentiles, goodput vs load, and the knobs that move them
#
# `simcore.serve` simulates an inference service request by request: requests arrive (Poisson here),
# wait, are admitted into a continuously batched engine (vLLM-style: chunked prefill, paged KV cache,
# preemption by recompute), decode one token per step and finish. Each engine step is priced by the
# analytic inference engine with the device's calibration profile. This notebook takes the built-in
# scenario `serve_llama3_8b_h200` (Llama-3 8B on one H200, CUDA graphs, bf16, prompts ~1024 and outputs
# ~256 tokens, log-normal; SLOs TTFT 500 ms and TPOT 50 ms) and shows
#
# 1. one run: TTFT, TPOT and end-to-end percentiles and their distributions;
# 2. latency and goodput as the arrival rate grows, up to saturation;
# 3. the batch limit (`max_batch`): throughput against time per output token;
# 4. KV-cache memory (`memory_utilization`, `reserve_output_kv`): preemptions when the cache is tight;
# 5. a prefix cache (`prefix_cache_hit`);
# 6. eight GPUs: eight replicas vs prefill/decode disaggregation.
#
# The model, its checks and its limits: `docs/serving.md`. Same runs from the shell:
# `simcore serve serve_llama3_8b_h200 --set serving.rate=20`.

# %%
import time

import matplotlib.pyplot as plt
import numpy as np

import simcore
from simcore.serving import load_serving, simulate

t_start = time.perf_counter()
SCENARIO = "serve_llama3_8b_h200"  # a built-in scenario: found by name from any working directory
N = 1000  # requests per run (the scenario says 2000; 1000 keeps the notebook fast)
sc, spec = load_serving(SCENARIO, [f"serving.requests={N}"])
TTFT_SLO, TPOT_SLO = spec.slo.ttft_s, spec.slo.tpot_s
assert TTFT_SLO is not None and TPOT_SLO is not None
print(f"{sc.name}: {sc.model.name} on {sc.cluster.gpus} x {sc.cluster.system}, {spec.rate:g} requests/s, "
      f"max_batch {spec.max_batch}, max_batch_tokens {spec.max_batch_tokens}, "
      f"SLO TTFT {TTFT_SLO * 1e3:.0f} ms / TPOT {TPOT_SLO * 1e3:.0f} ms")  # fmt: skip


def run(overrides=(), **changes):
    """Simulate the scenario with ``--set``-style overrides and/or changed serving fields."""
    s, sp = load_serving(SCENARIO, [f"serving.requests={N}", *overrides])
    return simulate(s, sp.model_copy(update=changes))


def ms(x: float) -> str:
    return f"{x * 1e3:7.1f} ms"


# %% [markdown]
# ## 1. One run at 10 requests/s
#
# `simcore.serve` is the one-call form (a `ServingResult`: percentiles, throughput, goodput, KV use);
# `simulate` also returns the per-request log (`run.log`: arrival, first token, finish, lengths).
# **TTFT** is arrival to first token (queueing + prefill), **TPOT** a request's mean time per output
# token after the first (the decode step time while it runs), end-to-end is the whole request.

# %%
res = simcore.serve(SCENARIO, overrides=[f"serving.requests={N}"])
print(f"{'':10s}{'mean':>10s}{'p50':>10s}{'p90':>10s}{'p99':>10s}{'max':>10s}")
for label, st in (
    ("TTFT", res.ttft_s),
    ("TPOT", res.tpot_s),
    ("e2e", res.e2e_s),
    ("queue", res.queue_wait_s),
):
    print(f"{label:10s}" + "".join(f"{ms(v):>10s}" for v in (st.mean, st.p50, st.p90, st.p99, st.max)))
print(f"throughput {res.requests_per_s:.2f} req/s ({res.output_tokens_per_s:,.0f} output tok/s), "
      f"goodput {res.goodput:.2f} req/s, SLO attainment {res.slo_attainment:.1%}")  # fmt: skip
print(f"KV cache {res.kv_tokens_per_instance['mixed']:,} tokens, mean use {res.kv_utilization:.1%}, "
      f"peak {res.kv_peak_utilization:.1%}; busy {res.busy_fraction:.0%}; preemptions {res.preemptions}")  # fmt: skip

base = run()
assert base.result == res  # deterministic for a seed: the same run
log = base.log
fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
for ax, (label, x, slo) in zip(
    axes,
    (("TTFT", log.ttft, TTFT_SLO), ("TPOT", log.tpot, TPOT_SLO), ("end-to-end", log.e2e, None)),
    strict=True,
):
    x = np.sort(x[np.isfinite(x)]) * 1e3
    ax.plot(x, np.arange(1, x.size + 1) / x.size)
    if slo is not None:
        ax.axvline(slo * 1e3, color="r", ls="--", lw=1, label="SLO")
        ax.legend()
    ax.set_xlabel(f"{label} (ms)")
    ax.grid(alpha=0.3)
axes[0].set_ylabel("fraction of requests")
fig.suptitle(f"Latency distributions, {spec.rate:g} requests/s")
fig.tight_layout()
plt.show()

# %% [markdown]
# TTFT has a long tail: a request that arrives while the engine runs a step of other prompts' chunks
# waits for it. TPOT follows the batch: every running sequence decodes in the same step, so a request's
# time per token is the step time while it runs. Why the step time grows with the batch: the engine's
# step-cost table (`run.step_models`), below. At small batches a decode step reads the weights once
# (memory-bound, ~flat); at large ones attention over every sequence's KV cache dominates.

# %%
sm = next(iter(base.step_models.values()))  # one instance shape (tp 1)
batch = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256])
fig, ax = plt.subplots(figsize=(6.5, 3.6))
for ctx in (512, 1280, 4096):
    ax.plot(batch, [sm.decode(b, ctx) * 1e3 for b in batch], "o-", ms=3, label=f"context {ctx}")
ax.set_xscale("log", base=2)
ax.set_xlabel("sequences in the decode step")
ax.set_ylabel("decode step (ms) = TPOT")
ax.set_title("Decode step time of Llama-3 8B on one H200")
ax.legend()
ax.grid(alpha=0.3)
plt.show()
print(f"prefill alone: 1024 tokens {ms(sm.prefill(1024))}, 4096 tokens {ms(sm.prefill(4096))}")

# %% [markdown]
# ## 2. Latency and goodput vs arrival rate
#
# **Goodput** counts the requests per second that meet every SLO, over the whole run from the first
# arrival to the last completion (as vLLM's `benchmark_serving` counts it), so the drain of the last
# requests keeps it a little under the arrival rate even when every request meets its SLOs; **SLO
# attainment** is the fraction that do. Below saturation the service keeps up (steady throughput =
# arrival rate) and latencies grow slowly; past it (here ~20 requests/s, where the 256-sequence batch
# is full) the queue grows without bound, TTFT explodes and goodput collapses while throughput stays
# at capacity. Past saturation the latencies depend on how many requests are simulated (the result's
# notes say so): they are not a steady state.

# %%
rates = [2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 25, 30, 40]
sweep = [run([f"serving.rate={r}"]).result for r in rates]
print(f"{'rate':>5} {'TTFT p50':>10} {'TTFT p99':>10} {'TPOT p50':>10} {'TPOT p99':>10} "
      f"{'steady':>7} {'goodput':>8} {'SLO met':>8}")  # fmt: skip
for r, x in zip(rates, sweep, strict=True):
    sat = "  saturated" if any(n.startswith("saturated") for n in x.notes) else ""
    print(f"{r:5g} {ms(x.ttft_s.p50):>10} {ms(x.ttft_s.p99):>10} {ms(x.tpot_s.p50):>10} "
          f"{ms(x.tpot_s.p99):>10} {x.steady_requests_per_s or 0:7.1f} {x.goodput:8.2f} "
          f"{x.slo_attainment:8.1%}{sat}")  # fmt: skip

fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(14, 4))
for q, ls in (("p50", "-"), ("p99", "--")):
    ax1.plot(
        rates, [getattr(x.ttft_s, q) * 1e3 for x in sweep], "o" + ls, ms=3, color="C0", label=f"TTFT {q}"
    )
    ax2.plot(
        rates, [getattr(x.tpot_s, q) * 1e3 for x in sweep], "o" + ls, ms=3, color="C1", label=f"TPOT {q}"
    )
ax1.axhline(TTFT_SLO * 1e3, color="r", ls=":", lw=1, label="SLO")
ax2.axhline(TPOT_SLO * 1e3, color="r", ls=":", lw=1, label="SLO")
ax1.set_yscale("log")
ax1.set_ylabel("TTFT (ms, log)")
ax2.set_ylabel("TPOT (ms)")
ax3.plot(rates, rates, "k:", lw=1, label="offered")
ax3.plot(rates, [x.steady_requests_per_s for x in sweep], "o-", ms=3, label="throughput (steady)")
ax3.plot(rates, [x.goodput for x in sweep], "s-", ms=3, label="goodput (meets both SLOs)")
ax3.set_ylabel("requests/s")
ax3b = ax3.twinx()
ax3b.plot(rates, [x.slo_attainment * 100 for x in sweep], "^:", ms=3, color="C3", label="SLO attainment")
ax3b.set_ylim(0, 105)
ax3b.set_ylabel("SLO attainment (%)", color="C3")
for a in (ax1, ax2, ax3):
    a.set_xlabel("arrival rate (requests/s)")
    a.grid(alpha=0.3)
    a.legend(fontsize=8)
fig.suptitle("Llama-3 8B on one H200: latency and goodput vs load")
fig.tight_layout()
plt.show()
best = max(zip(rates, sweep, strict=True), key=lambda rx: rx[1].goodput)
print(f"highest goodput: {best[1].goodput:.1f} requests/s at {best[0]} requests/s offered")

# %% [markdown]
# ## 3. The batch limit: throughput against time per token
#
# `max_batch` (vLLM `max_num_seqs`) caps the sequences decoding together. Overloaded (40 requests/s,
# always a full batch), a larger batch raises output tokens per second — the weights are read once per
# step for more sequences — but every sequence waits for the longer step: TPOT grows with it. A
# latency SLO on TPOT picks the largest batch that meets it.

# %%
batches = [8, 16, 32, 64, 128, 256, 512]
bsweep = [run(["serving.rate=40", f"serving.max_batch={b}"]).result for b in batches]
fig, ax = plt.subplots(figsize=(6.5, 4))
ax.plot([x.tpot_s.p50 * 1e3 for x in bsweep], [x.output_tokens_per_s for x in bsweep], "o-")
for b, x in zip(batches, bsweep, strict=True):
    ax.annotate(
        f"{b}", (x.tpot_s.p50 * 1e3, x.output_tokens_per_s), xytext=(4, -10), textcoords="offset points"
    )
    print(f"max_batch {b:4d}: {x.output_tokens_per_s:7,.0f} output tok/s, TPOT p50 {ms(x.tpot_s.p50)}, "
          f"KV peak {x.kv_peak_utilization:.0%}")  # fmt: skip
ax.axvline(TPOT_SLO * 1e3, color="r", ls=":", lw=1, label="TPOT SLO")
ax.set_xlabel("TPOT p50 (ms)")
ax.set_ylabel("output tokens/s")
ax.set_title("Throughput vs time per token (labels: max_batch), 40 requests/s")
ax.legend()
ax.grid(alpha=0.3)
plt.show()

# %% [markdown]
# ## 4. KV-cache memory and preemption
#
# The KV cache gets what `memory_utilization` of the device leaves after weights and step activations
# (16 GB of bf16 weights on a 141 GB H200 leave room for ~840k tokens at the default 0.9). Shrink it and
# the cache fills: by default (vLLM) blocks are taken on demand and the newest running request is
# preempted and later recomputed; `reserve_output_kv` (TensorRT-LLM's `GUARANTEED_NO_EVICT`) admits a
# request only when its whole output fits, so it never preempts but admits fewer. 15 requests/s.

# %%
utils = [0.9, 0.3, 0.2, 0.17, 0.15]
print(
    f"{'mem util':>8} {'policy':>10} {'KV tokens':>10} {'preempt':>8} {'TTFT p99':>10} {'e2e p99':>10} {'goodput':>8}"
)
kv = {}
for u in utils:
    for reserve in (False, True):
        x = run(
            [
                "serving.rate=15",
                f"serving.memory_utilization={u}",
                f"serving.reserve_output_kv={str(reserve).lower()}",
            ]
        ).result
        kv[u, reserve] = x
        print(f"{u:8.2f} {'reserve' if reserve else 'on demand':>10} {x.kv_tokens_per_instance['mixed']:10,} "
              f"{x.preemptions:8d} {ms(x.ttft_s.p99):>10} {ms(x.e2e_s.p99):>10} {x.goodput:8.2f}")  # fmt: skip
fig, ax = plt.subplots(figsize=(6.5, 3.8))
for reserve, mk in ((False, "o-"), (True, "s--")):
    ax.plot([kv[u, reserve].kv_tokens_per_instance["mixed"] / 1e3 for u in utils],
            [kv[u, reserve].ttft_s.p99 * 1e3 for u in utils], mk,
            label="reserve whole output" if reserve else "blocks on demand (preempt)")  # fmt: skip
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel("KV cache (thousand tokens)")
ax.set_ylabel("TTFT p99 (ms)")
ax.set_title("A tight KV cache: queueing and preemption, 15 requests/s")
ax.legend()
ax.grid(alpha=0.3, which="both")
plt.show()

# %% [markdown]
# ## 5. Prefix caching
#
# With a prefix cache (a shared system prompt, a multi-turn chat), the first `prefix_cache_hit` of each
# prompt is not recomputed: prefill chunks get shorter, which cuts TTFT and also TPOT (decodes share
# their steps with fewer prefill tokens). 20 requests/s, near saturation.

# %%
hits = [0.0, 0.25, 0.5, 0.75, 0.9]
hsweep = [run(["serving.rate=20", f"serving.prefix_cache_hit={h}"]).result for h in hits]
fig, ax = plt.subplots(figsize=(6.5, 3.8))
ax.plot(hits, [x.ttft_s.p50 * 1e3 for x in hsweep], "o-", label="TTFT p50")
ax.plot(hits, [x.ttft_s.p99 * 1e3 for x in hsweep], "o--", label="TTFT p99")
ax.plot(hits, [x.tpot_s.p50 * 1e3 for x in hsweep], "s-", label="TPOT p50")
ax.set_xlabel("fraction of each prompt found in the prefix cache")
ax.set_ylabel("ms")
ax.set_title("Prefix caching, 20 requests/s")
ax.legend()
ax.grid(alpha=0.3)
plt.show()
for h, x in zip(hits, hsweep, strict=True):
    print(f"hit {h:4.0%}: TTFT p50 {ms(x.ttft_s.p50)}, p99 {ms(x.ttft_s.p99)}, TPOT p50 {ms(x.tpot_s.p50)}")

# %% [markdown]
# ## 6. Eight GPUs: replicas vs prefill/decode disaggregation
#
# On a full HGX H200 node the same model runs as eight replicas (each mixing prefill and decode), or
# as two pools: prefill instances hand each prompt's KV cache over NVLink to decode instances. Decode
# instances then never run a prefill chunk, so TPOT is lower and steadier; but the prefill pool must
# keep up with the arrivals or TTFT grows without bound (2 prefill + 6 decode GPUs saturates early).
# Which layout wins depends on the SLO that binds: here disaggregation cuts TPOT, while eight mixed
# replicas keep TTFT lower at high load.

# %%
layouts = {
    "8 replicas": [],
    "4 prefill + 4 decode": ["serving.disaggregated.prefill_gpus=4", "serving.disaggregated.decode_gpus=4"],
    "2 prefill + 6 decode": ["serving.disaggregated.prefill_gpus=2", "serving.disaggregated.decode_gpus=6"],
}
node_rates = [40, 80, 120, 160]
dis = {
    (name, r): run(["cluster.gpus=8", f"serving.rate={r}", *over]).result
    for name, over in layouts.items()
    for r in node_rates
}
fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(14, 4))
for name in layouts:
    xs = [dis[name, r] for r in node_rates]
    ax1.plot(node_rates, [x.ttft_s.p99 * 1e3 for x in xs], "o-", label=name)
    ax2.plot(node_rates, [x.tpot_s.p99 * 1e3 for x in xs], "o-", label=name)
    ax3.plot(node_rates, [x.slo_attainment * 100 for x in xs], "o-", label=name)
ax1.set_yscale("log")
ax1.set_ylabel("TTFT p99 (ms, log)")
ax2.set_ylabel("TPOT p99 (ms)")
ax3.set_ylabel("requests meeting both SLOs (%)")
for a in (ax1, ax2, ax3):
    a.set_xlabel("arrival rate (requests/s)")
    a.grid(alpha=0.3)
    a.legend(fontsize=8)
fig.suptitle("Llama-3 8B on 8 x H200: replicas vs disaggregated prefill/decode")
fig.tight_layout()
plt.show()
for (name, r), x in dis.items():
    print(f"{name:22s} {r:4d} req/s: TTFT p99 {ms(x.ttft_s.p99)}, TPOT p99 {ms(x.tpot_s.p99)}, "
          f"SLO met {x.slo_attainment:6.1%}, instances {x.instances}")  # fmt: skip

# %%
print(f"notebook ran in {time.perf_counter() - t_start:.1f} s")
