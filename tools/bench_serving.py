"""Issue 41: a model served under load, request by request, on one GPU -- the measurements
``python -m simcore.validation served`` compares with ``simcore serve`` (docs/serving.md, "Measured under load").

Every ``scenarios/served/*.yaml`` is one engine on one workload; its ``serving`` keys are the engine's settings
(``max_batch``, ``max_batch_tokens``, ``kv_block_tokens``, ``memory_utilization``), its ``model`` the
Llama-shaped model built here from a config with random weights, ``inference.precision`` the dtype. The engine is
named by ``runtime.implementation``:

* ``reference``: this script's own engine, the efficient-engine reference: ``max_batch`` static KV-cache slots of
  ``seq_len`` tokens, kept packed (a finished request's slot takes the last one's cache); each iteration admits
  the waiting requests first-come first-served while slots and ``max_batch_tokens`` prompt tokens allow, prefills
  them whole (eager, prompts of equal length batched), then runs one decode step of every running request,
  replayed from a CUDA graph captured per (batch, context) bucket; greedy sampling, a host synchronize per step;
* ``huggingface``: ``transformers``' continuous batching (``ContinuousBatchingManager``: paged KV cache, its
  FIFO scheduler, chunked prefill), eager, no CUDA graphs. Its API moved between 4.5x and 5.x: the script detects
  ``init_continuous_batching``, ``ContinuousBatchingConfig`` (else the settings go on the ``GenerationConfig``)
  and ``record_timestamps`` (else streamed outputs are timed as they arrive). Where the API is missing the
  reference engine is still measured and the manifest says so.

The requests are simcore's own draws (``simcore.serving.sim._workload``: numpy ``default_rng(seed)``, gamma gaps of
coefficient of variation ``arrival_cv``, the scenario's length distributions), the first ``n`` of the scenario's
``requests``. Per engine and scenario: a capacity probe (every request submitted at t = 0: the offline
throughput, the saturation rate), then one run per rate of ``scenarios/served/predicted.json`` (written before
the run by ``python -m simcore.validation served --predict``: fractions of simcore's predicted capacity). With
``--rates auto`` (default) the committed rates are kept unless they fail to reach from light load (at most 0.4x
the probe's capacity) to saturation (at least 1.1x); then the same fractions of the measured capacity are run.
Each run's request count fits its share of ``--budget-s`` (at least ``--min-requests``).

Per request: arrival (submission), first token and finish, seconds from the run's start (host wall clock after a
synchronize), prompt and output tokens, tokens generated. Outputs under ``--out``: ``served_<engine>.csv.gz``
(written row by row, gzipped at the end), ``served_manifest.json`` (GPU, driver, torch / transformers versions, the
HF API found, each scenario's settings, each run's rate, requests and wall time, dates; written at the start and
rewritten after every run).

  python3 tools/bench_serving.py --out DIR [--budget-s 480] [--engines reference,huggingface] [--rates auto]
  python3 tools/bench_serving.py --out DIR --dry-run          # the plan and its time estimate, nothing run
  python3 tools/bench_serving.py --out DIR --smoke            # a tiny Llama on the CPU, a few requests
  python3 tools/bench_serving.py --out DIR --steps [--budget-s 150]   # step costs (see plan_steps)
  python3 tools/bench_serving.py --out DIR --resume traces/h100/served [--only NAMES]  # the runs it lacks

``--steps`` measures each engine's step costs apart from the load runs (decode steps at fixed concurrency,
isolated prefills; :func:`plan_steps`) into ``steps_<engine>.csv.gz`` and ``steps_manifest.json``, the input of
``simcore calibrate`` (``simcore.calibration.fit_served``). ``--resume DIR`` keeps an earlier collection's measured
capacities and rates and runs only the rate runs it lacks, into ``served_<engine>_more.csv.gz`` and
``served_manifest_more.json`` (copied beside the earlier files, the comparison reads both).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import gzip
import inspect
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing to download: the models are built from configs
ROOT = Path(__file__).resolve().parent.parent
SERVED = ROOT / "scenarios" / "served"
ENGINES = ("reference", "huggingface")
SETUP_S = {"reference": 25.0, "huggingface": 30.0}  # model build, CUDA-graph capture / manager start, warm-up
COLS = ["scenario", "run", "offered_rate", "request", "arrival_s", "first_token_s", "finish_s", "prompt_len",
        "output_len", "generated"]  # fmt: skip


def log(*a: object) -> None:
    print(time.strftime("%H:%M:%S"), *a, flush=True)


# ------------------------------------------------------------------------------------------------------------
# scenarios, the plan and the requests (no torch)


def load_scenarios(folder: Path, engines: tuple[str, ...]) -> list[dict[str, Any]]:
    import yaml  # transformers' own dependency

    out = []
    for path in sorted(folder.glob("*.yaml")):
        sc = yaml.safe_load(path.read_text(encoding="utf-8"))
        engine = sc.get("runtime", {}).get("implementation", "reference")
        if engine in engines:
            out.append({**sc, "engine": engine, "file": path.name})
    return out


def _length(d: Any) -> dict[str, Any]:
    return {"dist": "fixed", "value": d} if isinstance(d, int) else {"dist": "fixed", **d}


def sample_lengths(d: Any, rng: np.random.Generator, n: int) -> np.ndarray:
    """simcore's ``LengthDist.sample``: fixed, uniform (inclusive) or log-normal of the given mean."""
    d = _length(d)
    if d["dist"] == "fixed":
        out = np.full(n, d["value"], dtype=np.int64)
    elif d["dist"] == "uniform":
        out = rng.integers(d["low"], d["high"] + 1, size=n, dtype=np.int64)
    else:
        mu = np.log(d["mean"]) - 0.5 * d["sigma"] ** 2
        out = np.rint(rng.lognormal(mu, d["sigma"], size=n)).astype(np.int64)
    return np.maximum(out, 1)


def workload(serving: dict[str, Any], seq_len: int, rate: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The scenario's requests at ``rate`` exactly as ``simcore.serving.sim._workload`` draws them (``requests``
    of them): arrival times (s), prompt and output lengths (tokens). A request longer than ``seq_len`` is an
    error, as in simcore (never clipped to a different workload)."""
    rng = np.random.default_rng(serving.get("seed", 0))
    n = int(serving.get("requests", 1000))
    cv2 = float(serving.get("arrival_cv", 1.0)) ** 2
    t = np.cumsum(rng.gamma(1.0 / cv2, cv2 / rate, size=n))
    p = sample_lengths(serving.get("prompt", 1024), rng, n)
    o = sample_lengths(serving.get("output", 128), rng, n)
    if np.any(p + o > seq_len):
        sys.exit(f"error: {np.count_nonzero(p + o > seq_len)} request(s) exceed seq_len ({seq_len} tokens)")
    return t.astype(float), p.astype(np.int64), o.astype(np.int64)


def load_predicted(folder: Path) -> dict[str, Any]:
    path = folder / "predicted.json"
    if not path.is_file():
        sys.exit(f"error: {path} is missing: run python -m simcore.validation served --predict first")
    return json.loads(path.read_text(encoding="utf-8"))["scenarios"]


def run_requests(n_max: int, rate: float, capacity: float, slot_s: float, n_min: int) -> int:
    """Requests of a run at ``rate`` that take about ``slot_s`` seconds when the engine completes at most
    ``capacity`` requests/s: ``slot_s * min(rate, capacity)``, within [n_min, n_max]."""
    return int(min(n_max, max(n_min, round(slot_s * min(rate, capacity)))))


def probe_requests(serving: dict[str, Any], n_min: int) -> int:
    """Requests of a capacity probe: two full batches (``2 * max_batch``), within [n_min, requests]."""
    return int(min(int(serving.get("requests", 1000)), max(n_min, 2 * int(serving["max_batch"]))))


def plan_engine(
    scs: list[dict[str, Any]], pred: dict[str, Any], budget: float, n_min: int
) -> list[dict[str, Any]]:
    """The runs of one engine's scenarios as planned before any is measured: a probe and one run per committed
    rate each, sized to share ``budget`` seconds equally; a run's seconds estimated at ``n / min(rate, capacity)``
    with simcore's predicted capacity (requests/s)."""
    runs = []
    n_runs = sum(1 + len(pred[s["name"]]["rates"]) for s in scs)
    slot = budget / max(n_runs, 1)
    for sc in scs:
        p = pred[sc["name"]]
        cap = p["capacity_rps"]
        n_max = int(sc["serving"].get("requests", 1000))
        n_probe = probe_requests(sc["serving"], n_min)
        runs.append({"scenario": sc["name"], "run": "probe", "rate": math.inf, "requests": n_probe,
                     "estimate_s": n_probe / cap})  # fmt: skip
        for i, rate in enumerate(p["rates"]):
            n = run_requests(n_max, rate, cap, slot, n_min)
            runs.append({"scenario": sc["name"], "run": f"r{i}", "rate": rate, "requests": n,
                         "estimate_s": n / min(rate, cap)})  # fmt: skip
    return runs


def choose_rates(
    committed: list[float], loads: list[float], measured: float, mode: str
) -> tuple[list[float], str]:
    """The rates a scenario runs at: the committed ones, or (``mode`` probe, or auto when the committed ones do
    not reach from light load to saturation of the measured capacity) ``loads`` times the measured capacity."""
    reach = min(committed) <= 0.4 * measured and max(committed) >= 1.1 * measured
    if mode == "committed" or (mode == "auto" and reach):
        return list(committed), "committed"
    return [float(f"{x * measured:.3g}") for x in loads], "probe"


# ------------------------------------------------------------------------------------------------------------
# step costs (--steps): the engine's own step times, measured apart from the load runs


STEP_BATCHES = (1, 2, 4, 8, 16, 32, 64)
"""Concurrencies of the decode points (those up to the engine's ``max_batch``)."""
STEP_PROMPTS = (128, 512, 1024, 2048, 3968)
"""Prompt lengths (tokens) of the isolated prefill points (those that fit ``seq_len`` with their output)."""
STEP_SHORT_PROMPT = 128
"""The short prompt of every decode point (the long one fills the engine's ``max_batch_tokens``)."""
STEP_REPEATS = 3
"""Isolated requests per prefill point."""
STEP_OUTPUT = {"reference": 128, "huggingface": 32}
"""Output tokens of a decode point: fewer for the host-bound Hugging Face engine (~0.1 s a step)."""
STEP_GUESS_S = {"reference": (0.008, 0.03), "huggingface": (0.12, 0.3)}
"""(decode step, prefill) seconds the plan's time estimate assumes per engine, before anything is measured."""
MIXED_STEP = {"reference": "separate", "huggingface": "fused"}
"""How the engine runs a step that has both prefills and decodes: ``separate`` passes (the reference engine
prefills the admitted prompts eagerly, then runs the decode graph) or one ``fused`` forward pass (Hugging Face's
continuous batching puts prefill chunks and decodes in one batch); the fitter's profile says which."""


def plan_steps(engine: str, sv: dict[str, Any], seq_len: int, smoke: bool = False) -> list[dict[str, Any]]:
    """The step-cost points of one engine with the scenario's settings ``sv``, most telling first.

    * ``decode-b<N>-p<P>``: ``N`` requests of ``P`` prompt tokens and ``STEP_OUTPUT`` output tokens all at t = 0,
      every prompt admitted in the first step, so that the ``N`` requests decode in lockstep: a request's
      inter-token time is the decode step of batch ``N`` at context ``P`` to ``P + output``. The reference engine
      admits them whatever ``max_batch_tokens`` (its steps mode lifts the budget: ``P`` up to 2048 at every ``N``);
      Hugging Face's keeps its budget, so ``N * P <= max_batch_tokens`` there.
    * ``prefill-p<P>-<k>``: one request of ``P`` prompt tokens and 2 output tokens alone in the engine: its TTFT is
      the prefill step of ``P`` tokens (with the engine's host work of a step).
    """
    out_len = 6 if smoke else STEP_OUTPUT[engine]
    batches = (1, 2, 4) if smoke else STEP_BATCHES
    prompts = (8, 16, 32) if smoke else STEP_PROMPTS
    long, short = (32, 4) if smoke else (2048, STEP_SHORT_PROMPT)
    dec_s, pre_s = STEP_GUESS_S[engine]
    budget, top = int(sv["max_batch_tokens"]), int(sv["max_batch"])
    lift = engine == "reference"
    tiers = (long, long // 4, short) if lift else (long, short)
    runs: list[dict[str, Any]] = []
    for t, tier in enumerate(tiers):
        for n in batches:
            fill = min(long, seq_len - out_len, long if lift else budget // n)
            p = min(tier, fill)
            if n > top or p < 1 or (t > 0 and p == min(tiers[t - 1], fill)):
                continue
            runs.append({"run": f"decode-b{n}-p{p}", "rate": math.inf, "requests": n, "prompt": p,
                         "output": out_len, "estimate_s": pre_s * max(1.0, n * p / 2048) + out_len * dec_s})  # fmt: skip
        if t == 0:
            for p in prompts:
                if p + 2 > seq_len:
                    continue
                for k in range(STEP_REPEATS):
                    runs.append({"run": f"prefill-p{p}-{k}", "rate": math.inf, "requests": 1, "prompt": p,
                                 "output": 2, "estimate_s": pre_s * max(1.0, p / 2048) + dec_s})  # fmt: skip
    return runs


def resume_runs(
    prior: dict[str, Any], engine: str, scenario: str
) -> tuple[float | None, list[float], set[str]]:
    """What an earlier collection's manifest ``prior`` holds of one engine's scenario: its measured capacity
    (requests/s; None where it has none), the rates it chose and the runs it measured."""
    info = prior.get("engines", {}).get(engine, {}).get(scenario, {})
    done = {r["run"] for r in prior.get("runs", []) if r["engine"] == engine and r["scenario"] == scenario}
    return info.get("capacity_rps"), list(info.get("rates", [])), done


# ------------------------------------------------------------------------------------------------------------
# the model and the reference engine (torch)


def build_model(sc: dict[str, Any], dev: Any, dtype: Any, smoke: bool) -> Any:
    import torch
    import transformers

    m = sc["model"]
    cfg = transformers.LlamaConfig(
        num_hidden_layers=2 if smoke else m["layers"], hidden_size=64 if smoke else m["hidden"],
        num_attention_heads=4 if smoke else m["heads"], num_key_value_heads=2 if smoke else m["kv_heads"],
        intermediate_size=128 if smoke else m["ffn_hidden"], vocab_size=512 if smoke else m["vocab"],
        max_position_embeddings=m["seq_len"], tie_word_embeddings=bool(m.get("tied_embeddings", False)),
    )  # fmt: skip
    torch.manual_seed(0)
    with torch.device(dev):
        model = transformers.LlamaForCausalLM(cfg)
    return model.to(dtype).eval().requires_grad_(False)


def _rope_theta(cfg: Any) -> float:
    theta = getattr(cfg, "rope_theta", None)
    if theta is None:
        theta = (getattr(cfg, "rope_parameters", None) or {}).get("rope_theta", 10000.0)
    return float(theta)


class RefEngine:
    """Static-cache continuous batching over the Hugging Face model's weights (see the module docstring).

    The KV cache is one tensor ``[layers, 2, slots, kv_heads, seq_len, head_dim]``; running requests hold slots
    ``0..n-1``. A decode step runs the first ``B >= n`` slots (``B`` a batch bucket) over the first ``C`` cache
    positions (``C`` a context bucket above every running position): SDPA with a mask of the positions written,
    each KV head's query heads taken as that many queries of it (no K/V repeated). ``tok`` and ``pos`` are the decode inputs (next token, its position) per slot."""

    def __init__(self, model: Any, slots: int, seq_len: int, graphs: bool) -> None:
        import torch

        cfg = model.config
        p = next(model.parameters())
        self.dev, self.dtype = p.device, p.dtype
        self.h, self.nh, self.kvh = cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads
        self.hd = self.h // self.nh
        self.eps = cfg.rms_norm_eps
        self.layers = [
            (ly.input_layernorm.weight, ly.self_attn.q_proj.weight, ly.self_attn.k_proj.weight,
             ly.self_attn.v_proj.weight, ly.self_attn.o_proj.weight, ly.post_attention_layernorm.weight,
             ly.mlp.gate_proj.weight, ly.mlp.up_proj.weight, ly.mlp.down_proj.weight)
            for ly in model.model.layers
        ]  # fmt: skip
        self.embed, self.norm, self.head = (
            model.model.embed_tokens.weight,
            model.model.norm.weight,
            model.lm_head.weight,
        )
        self.slots, self.seq_len = slots, seq_len
        kw = {"device": self.dev, "dtype": self.dtype}
        self.cache = torch.zeros(len(self.layers), 2, slots, self.kvh, seq_len, self.hd, **kw)
        inv = 1.0 / (_rope_theta(cfg) ** (torch.arange(0, self.hd, 2, device=self.dev).float() / self.hd))
        f = torch.outer(torch.arange(seq_len, device=self.dev).float(), inv)
        f = torch.cat([f, f], dim=-1)
        self.cos, self.sin = f.cos().to(self.dtype), f.sin().to(self.dtype)
        self.ar = torch.arange(seq_len, device=self.dev)
        self.tok = torch.zeros(slots, dtype=torch.long, device=self.dev)
        self.pos = torch.zeros(slots, dtype=torch.long, device=self.dev)
        self.out = torch.zeros(slots, dtype=torch.long, device=self.dev)
        self.b_buckets = sorted({min(2**i, slots) for i in range(slots.bit_length() + 1)})
        self.c_buckets = sorted(
            {min(c, seq_len) for c in (128, 256, 512, 1024, 2048, 4096, 8192)} | {seq_len}
        )
        self.graphs: dict[tuple[int, int], Any] = {}
        if graphs:
            self._capture()

    # -- the forward pass
    def _rms(self, x: Any, w: Any) -> Any:
        import torch.nn.functional as F

        return F.rms_norm(x, (self.h,), w, self.eps)

    @staticmethod
    def _rot(x: Any, cos: Any, sin: Any) -> Any:
        import torch

        x1, x2 = x.chunk(2, dim=-1)
        return x * cos + torch.cat([-x2, x1], dim=-1) * sin

    def _forward(self, tokens: Any, cos: Any, sin: Any, write: Any, attend: Any) -> Any:
        """The logits of ``tokens`` ``[B, T]``'s last position, writing each layer's K/V with
        ``write(l, k, v)`` and attending with ``attend(l, q, k, v)``."""
        import torch.nn.functional as F

        B, T = tokens.shape
        x = F.embedding(tokens, self.embed)
        for i, (ln1, wq, wk, wv, wo, ln2, wg, wu, wd) in enumerate(self.layers):
            a = self._rms(x, ln1)
            q = F.linear(a, wq).view(B, T, self.nh, self.hd).transpose(1, 2)
            k = F.linear(a, wk).view(B, T, self.kvh, self.hd).transpose(1, 2)
            v = F.linear(a, wv).view(B, T, self.kvh, self.hd).transpose(1, 2)
            q, k = self._rot(q, cos, sin), self._rot(k, cos, sin)
            write(i, k, v)
            o = attend(i, q, k, v)
            x = x + F.linear(o.transpose(1, 2).reshape(B, T, self.h), wo)
            a = self._rms(x, ln2)
            x = x + F.linear(F.silu(F.linear(a, wg)) * F.linear(a, wu), wd)
        return F.linear(self._rms(x[:, -1], self.norm), self.head)

    def prefill(self, prompts: Any, slots: list[int]) -> Any:
        """Prefill equal-length prompts ``[k, T]`` into ``slots`` (their first tokens go to ``tok``); the
        logits ``[k, vocab]`` of their last positions."""
        import torch
        import torch.nn.functional as F

        T = prompts.shape[1]
        s = torch.tensor(slots, device=self.dev)
        cos, sin = self.cos[:T][None, None], self.sin[:T][None, None]

        def write(i: int, k: Any, v: Any) -> None:
            self.cache[i, 0, s, :, :T] = k
            self.cache[i, 1, s, :, :T] = v

        def attend(i: int, q: Any, k: Any, v: Any) -> Any:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

        logits = self._forward(prompts, cos, sin, write, attend)
        self.tok[s] = logits.argmax(-1)
        self.pos[s] = T
        return logits

    def _decode(self, B: int, C: int) -> None:
        nxt = self.step_logits(B, C).argmax(-1)
        self.out[:B] = nxt
        self.tok[:B].copy_(nxt)

    def step_logits(self, B: int, C: int) -> Any:
        """The logits ``[B, vocab]`` of a decode step of slots ``0..B-1`` over ``C`` cache positions."""
        import torch.nn.functional as F

        pos = self.pos[:B]
        cos, sin = self.cos[pos][:, None, None], self.sin[pos][:, None, None]
        rows = self.ar[:B]
        mask = (self.ar[:C][None, :] <= pos[:, None])[:, None, None, :]

        def write(i: int, k: Any, v: Any) -> None:
            self.cache[i, 0, rows, :, pos] = k[:, :, 0]
            self.cache[i, 1, rows, :, pos] = v[:, :, 0]

        def attend(i: int, q: Any, k: Any, v: Any) -> Any:
            # the G = heads / kv_heads query heads of a KV head as G queries of it: no K/V repeated
            kc, vc = self.cache[i, 0, :B, :, :C], self.cache[i, 1, :B, :, :C]
            o = F.scaled_dot_product_attention(q.reshape(B, self.kvh, -1, self.hd), kc, vc, attn_mask=mask)
            return o.reshape(B, self.nh, 1, self.hd)

        return self._forward(self.tok[:B, None], cos, sin, write, attend)

    def _capture(self) -> None:
        import torch

        pool = torch.cuda.graph_pool_handle()
        s = torch.cuda.Stream()
        for B in self.b_buckets:
            for C in self.c_buckets:
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    for _ in range(2):
                        self._decode(B, C)
                torch.cuda.current_stream().wait_stream(s)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g, pool=pool):
                    self._decode(B, C)
                self.graphs[(B, C)] = g
        torch.cuda.synchronize()
        self.pos.zero_()

    def decode(self, n: int, top_pos: int) -> None:
        """One decode step of slots ``0..n-1`` whose highest input position is ``top_pos``."""
        B = next(b for b in self.b_buckets if b >= n)
        C = next(c for c in self.c_buckets if c > top_pos)
        g = self.graphs.get((B, C))
        if g is not None:
            g.replay()
        else:
            self._decode(B, C)
        self.pos[:n] += 1

    def close(self) -> None:
        """Nothing to stop (the cache goes with the engine)."""

    def move(self, dst: int, src: int, upto: int) -> None:
        """Slot ``src``'s state (cache positions below ``upto``, next token, position) into slot ``dst``."""
        self.cache[:, :, dst, :, :upto] = self.cache[:, :, src, :, :upto]
        self.tok[dst] = self.tok[src]
        self.pos[dst] = self.pos[src]


def check_reference(eng: RefEngine, model: Any, seed: int = 0) -> dict[str, float]:
    """The reference engine against the Hugging Face model it takes its weights from, on fresh random prompts
    of two lengths: ``||logits - ref|| / ||ref||`` of the prefill's last position and of one decode step (slots
    0 and 1). bf16 lands near 1e-2; a larger error or a NaN is an error."""
    import torch

    g = torch.Generator().manual_seed(seed)
    ids = [torch.randint(0, model.config.vocab_size, (1, T), generator=g).to(eng.dev) for T in (5, 9)]

    def rel(a: Any, b: Any) -> float:
        return float((a.float() - b.float()).norm() / b.float().norm())

    errs: dict[str, float] = {}
    with torch.no_grad():
        pre = torch.cat([eng.prefill(x, [j]) for j, x in enumerate(ids)])
        errs["prefill"] = rel(pre, torch.cat([model(x).logits[:, -1] for x in ids]))
        toks = eng.tok[:2].clone()
        dec = eng.step_logits(2, eng.c_buckets[0])
        ref = torch.cat(
            [model(torch.cat([x, toks[j].view(1, 1)], 1)).logits[:, -1] for j, x in enumerate(ids)]
        )
        errs["decode"] = rel(dec, ref)
    eng.pos.zero_()
    eng.tok.zero_()
    bad = {k: v for k, v in errs.items() if not v < 5e-2}
    if bad:
        raise RuntimeError(f"reference engine differs from the Hugging Face model: {bad}")
    return errs


def serve_reference(eng: RefEngine, arrival: np.ndarray, prompt: np.ndarray, output: np.ndarray, max_tokens: int,
                    tokens: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """Serve the requests (arrival times relative to now) on the reference engine; per request the submission,
    first-token and finish times (s from the start) and tokens generated."""
    import torch

    n = arrival.size
    sub, first, fin = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    gen = np.zeros(n, dtype=np.int64)
    running: list[int] = []  # request per slot
    pos: list[int] = []  # next input position per slot
    waiting: list[int] = []
    nxt = 0
    t0 = time.perf_counter()

    def retire(now: float) -> None:
        """Finished requests leave; the last slot fills each hole."""
        for i in range(len(running) - 1, -1, -1):
            r = running[i]
            if gen[r] >= output[r]:
                fin[r] = now
                last = len(running) - 1
                if i != last:
                    eng.move(i, last, pos[last])
                    running[i], pos[i] = running[last], pos[last]
                running.pop()
                pos.pop()

    while nxt < n or waiting or running:
        now = time.perf_counter() - t0
        while nxt < n and arrival[nxt] <= now:
            sub[nxt] = now
            waiting.append(nxt)
            nxt += 1
        if not waiting and not running:
            time.sleep(max(0.0, arrival[nxt] - now - 2e-4))
            continue
        # admission: first come first served while slots and the prompt-token budget allow; whole prompts
        admit: list[int] = []
        budget = max_tokens
        while (
            waiting and len(running) + len(admit) < eng.slots and (not admit or prompt[waiting[0]] <= budget)
        ):
            budget -= int(prompt[waiting[0]])
            admit.append(waiting.pop(0))
        if admit:
            groups: dict[int, list[int]] = {}
            for r in admit:
                groups.setdefault(int(prompt[r]), []).append(r)
            for length, rs in groups.items():
                slots = list(range(len(running), len(running) + len(rs)))
                eng.prefill(torch.as_tensor(np.stack([tokens[r] for r in rs]), device=eng.dev), slots)
                running += rs
                pos += [length] * len(rs)
            eng.tok[: len(running)].tolist()  # the host reads the first tokens (a synchronize)
            now = time.perf_counter() - t0
            first[admit] = now
            gen[admit] = 1
            retire(now)
        if running:  # one decode step of every running request, the ones just prefilled too
            eng.decode(len(running), max(pos))
            eng.out[: len(running)].tolist()
            now = time.perf_counter() - t0
            gen[running] += 1
            pos[:] = [x + 1 for x in pos]
            retire(now)
    return sub, first, fin, gen


# ------------------------------------------------------------------------------------------------------------
# the Hugging Face engine


def hf_api(model: Any) -> dict[str, Any]:
    """What this ``transformers`` offers for continuous batching (``missing`` says why where it has none)."""
    import transformers

    api: dict[str, Any] = {"transformers": transformers.__version__}
    if not hasattr(model, "init_continuous_batching"):
        api["missing"] = "no init_continuous_batching on the model (transformers < 4.54?)"
        return api
    takes = "continuous_batching_config" in inspect.signature(model.init_continuous_batching).parameters
    api["config"] = "ContinuousBatchingConfig" if takes else "GenerationConfig"
    mgr = getattr(transformers.generation, "ContinuousBatchingManager", None)
    if mgr is None:
        from transformers.generation.continuous_batching import ContinuousBatchingManager as mgr
    params = inspect.signature(mgr.add_request).parameters
    api["record_timestamps"] = "record_timestamps" in params
    api["eos_arg"] = "eos_token_id" in params
    return api


class HFEngine:
    """``transformers``' ``ContinuousBatchingManager`` with the scenario's settings, started once."""

    def __init__(self, model: Any, sv: dict[str, Any], max_new: int, api: dict[str, Any], dev: Any) -> None:
        from transformers import GenerationConfig

        self.api = api
        settings = {"block_size": sv["kv_block_tokens"], "auto_switch_to_flash": False, "max_batch_tokens": sv["max_batch_tokens"],
                    "max_requests_per_batch": sv["max_batch"], "scheduler_type": "fifo", "use_cuda_graph": False,
                    "use_async_batching": False, "max_memory_percent": sv.get("memory_utilization", 0.9)}  # fmt: skip
        gc = GenerationConfig(max_new_tokens=max_new, do_sample=False, eos_token_id=-1, pad_token_id=0)
        kwargs: dict[str, Any] = {"generation_config": gc}
        if api["config"] == "ContinuousBatchingConfig":
            from transformers.generation import ContinuousBatchingConfig

            fields = set(inspect.signature(ContinuousBatchingConfig).parameters)
            if "page_size" in fields:  # 5.x: block_size is page_size's deprecated name
                settings["page_size"] = settings.pop("block_size")
            self.used = {k: v for k, v in settings.items() if k in fields}
            kwargs["continuous_batching_config"] = ContinuousBatchingConfig(**self.used)
        else:  # 4.5x: the settings are GenerationConfig attributes
            settings["scheduler"] = settings.pop("scheduler_type")
            self.used = {
                k: v for k, v in settings.items() if k not in ("use_async_batching", "max_memory_percent")
            }
            for k, v in self.used.items():
                setattr(gc, k, v)
        self.manager = model.init_continuous_batching(**kwargs)
        self.manager.start()
        self.dev = dev
        self.attn = getattr(model.config, "_attn_implementation", None)

    def _add(self, ids: list[int], rid: str, max_new: int, streaming: bool) -> None:
        kw: dict[str, Any] = {"request_id": rid, "max_new_tokens": max_new, "streaming": streaming}
        if self.api["record_timestamps"]:
            kw["record_timestamps"] = True
        if self.api["eos_arg"]:
            kw["eos_token_id"] = -1
        self.manager.add_request(ids, **kw)

    def serve(self, arrival: np.ndarray, output: np.ndarray, tokens: list[np.ndarray], tag: str,
              timeout_s: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
        """Submit each request at its arrival time; per request the submission, first-token and finish times
        (s from the start) and tokens generated. Timed by the manager's own per-token timestamps
        (``record_timestamps``), else by a thread reading streamed outputs as they come."""
        n = arrival.size
        sub, first, fin = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
        gen = np.zeros(n, dtype=np.int64)
        stamps = self.api["record_timestamps"]
        t0 = time.perf_counter()
        finished = [0]

        def take(res: Any) -> None:
            i = int(res.request_id.rsplit("_", 1)[1])
            now = time.perf_counter() - t0
            toks = len(res.generated_tokens)
            if stamps:
                ts = res.timestamps or []
                first[i] = (ts[0] - t0) if ts else now
                fin[i] = (ts[-1] - t0) if ts else now
            elif toks and math.isnan(first[i]):
                first[i] = now
            if res.is_finished() if hasattr(res, "is_finished") else str(res.status).endswith("FINISHED"):
                if not stamps:
                    fin[i] = now
                gen[i] = toks
                if getattr(res, "error", None):
                    log(f"request {i}: {res.error}")
                finished[0] += 1

        stop = threading.Event()

        def reader() -> None:
            while not stop.is_set() and finished[0] < n:
                res = self.manager.get_result(timeout=0.02)
                if res is not None and res.request_id.startswith(tag):
                    take(res)

        th = threading.Thread(target=reader, daemon=True)
        th.start()
        for i in range(n):
            d = arrival[i] - (time.perf_counter() - t0)
            if d > 0:
                time.sleep(d)
            sub[i] = time.perf_counter() - t0
            self._add(tokens[i].tolist(), f"{tag}_{i}", int(output[i]), streaming=not stamps)
        th.join(timeout=max(timeout_s - (time.perf_counter() - t0), 1.0))
        stop.set()
        th.join()
        return sub, first, fin, gen

    def close(self) -> None:
        self.manager.stop(block=True)


# ------------------------------------------------------------------------------------------------------------
# the collection


def environment(dev: Any) -> dict[str, Any]:
    import torch
    import transformers

    env: dict[str, Any] = {"python": sys.version.split()[0], "platform": platform.platform(),
                           "torch": torch.__version__, "cuda": torch.version.cuda,
                           "transformers": transformers.__version__, "host": platform.node(),
                           "cpus": os.cpu_count()}  # fmt: skip
    if dev.type == "cuda":
        env["gpu"] = torch.cuda.get_device_name(dev)
        try:
            env["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                           capture_output=True, text=True, timeout=30).stdout.strip()  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            env["driver"] = None
    try:
        env["simcore_commit"] = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                                               text=True, timeout=10).stdout.strip() or None  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        env["simcore_commit"] = None
    return env


class Collector:
    """The CSV of one engine (a row per request, flushed per run) and the manifest (rewritten per run):
    ``<kind>_<engine><suffix>.csv.gz`` and ``<kind>_manifest<suffix>.json`` (kind ``served`` or ``steps``)."""

    def __init__(self, out: Path, manifest: dict[str, Any], kind: str = "served", suffix: str = "") -> None:
        self.out, self.man, self.kind, self.suffix = out, manifest, kind, suffix
        self.files: dict[str, Any] = {}
        self.manifest_path = out / f"{kind}_manifest{suffix}.json"
        self.write_manifest()

    def write_manifest(self) -> None:
        self.manifest_path.write_text(json.dumps(self.man, indent=1) + "\n", encoding="utf-8")

    def rows(self, engine: str, rows: list[dict[str, Any]]) -> None:
        if engine not in self.files:
            path = self.out / f"{self.kind}_{engine}{self.suffix}.csv"
            f = path.open("w", newline="")
            w = csv.DictWriter(f, fieldnames=COLS)
            w.writeheader()
            self.files[engine] = (f, w, path)
        f, w, _ = self.files[engine]
        w.writerows(rows)
        f.flush()

    def close(self) -> None:
        for f, _, p in self.files.values():
            f.close()
            with p.open("rb") as src, gzip.open(f"{p}.gz", "wb", compresslevel=9) as dst:
                shutil.copyfileobj(src, dst)
            p.unlink()
        self.man["finished"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        self.man["files"] = sorted(f"{p.name}.gz" for _, _, p in self.files.values())
        self.write_manifest()


def one_run(
    engine: str, eng: Any, sc: dict[str, Any], run: dict[str, Any]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Serve one run's requests (the first ``run["requests"]`` of the scenario's draws at ``run["rate"]``, all at
    t = 0 for a probe); its CSV rows and its manifest entry."""
    sv = sc["serving"]
    rate = run["rate"]
    a, p, o = workload(sv, eng.seq_len, 1.0 if math.isinf(rate) else rate)
    n = run["requests"]
    return serve_rows(engine, eng, sc, run, np.zeros(n) if math.isinf(rate) else a[:n], p[:n], o[:n])


def serve_rows(engine: str, eng: Any, sc: dict[str, Any], run: dict[str, Any], a: np.ndarray, p: np.ndarray,
               o: np.ndarray) -> tuple[list[dict[str, Any]], dict[str, Any]]:  # fmt: skip
    """Serve these requests (arrival times in s from now, prompt and output lengths); the CSV rows and the
    manifest entry of the run."""
    sv = sc["serving"]
    rate, n = run["rate"], a.size
    rng = np.random.default_rng(int(sv.get("seed", 0)) + 1)
    tokens = [rng.integers(0, eng.vocab, size=int(x)) for x in p]
    w0 = time.perf_counter()
    if engine == "reference":
        sub, first, fin, gen = serve_reference(eng, a, p, o, int(sv["max_batch_tokens"]), tokens)
    else:
        tag = f"{sc['name']}-{run['run']}"
        sub, first, fin, gen = eng.serve(a, o, tokens, tag, timeout_s=max(4 * run["estimate_s"], 60.0))
    wall = time.perf_counter() - w0
    rows = [{"scenario": sc["name"], "run": run["run"], "offered_rate": "inf" if math.isinf(rate) else rate,
             "request": i, "arrival_s": f"{sub[i]:.6f}", "first_token_s": f"{first[i]:.6f}",
             "finish_s": f"{fin[i]:.6f}", "prompt_len": int(p[i]), "output_len": int(o[i]), "generated": int(gen[i])}
            for i in range(n)]  # fmt: skip
    ok = np.isfinite(fin)
    span = float(np.nanmax(fin) - np.nanmin(sub)) if ok.any() else math.nan
    entry = {**run, "rate": None if math.isinf(rate) else rate, "wall_s": round(wall, 2),
             "finished": int(ok.sum()), "short": int((gen < o).sum()),
             "requests_per_s": round(int(ok.sum()) / span, 4) if span > 0 else None}  # fmt: skip
    return rows, entry


ENGINE_KEYS = ("max_batch", "max_batch_tokens", "kv_block_tokens", "memory_utilization")
"""The serving keys an engine is built with (scenarios that share them share the engine)."""


def start_engine(
    engine: str, sc: dict[str, Any], dev: Any, args: argparse.Namespace
) -> tuple[Any, dict[str, Any]]:
    """The model and engine of a scenario, warmed up by a few requests; ``(None, info)`` where it could not
    start (``info["error"]``) or the HF API is missing (``info["api"]["missing"]``)."""
    import torch

    t0 = time.perf_counter()
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
    model = build_model(sc, dev, dtype[sc.get("inference", {}).get("precision", "bf16")], args.smoke)
    sv, seq_len = sc["serving"], int(sc["model"]["seq_len"])
    info: dict[str, Any] = {}
    try:
        if engine == "reference":
            eng: Any = RefEngine(
                model, int(sv["max_batch"]), seq_len, dev.type == "cuda" and not args.no_graphs
            )
            info.update(graphs=len(eng.graphs), batch_buckets=eng.b_buckets, context_buckets=eng.c_buckets,
                        check_rel_error=check_reference(eng, model))  # fmt: skip
            log(f"reference engine vs the HF model: {info['check_rel_error']}")
        else:
            info["api"] = hf_api(model)
            if "missing" in info["api"]:
                log(f"huggingface: {info['api']['missing']}; only the reference engine is measured")
                return None, info
            eng = HFEngine(model, sv, seq_len, info["api"], dev)
            info.update(settings=eng.used, attn_implementation=eng.attn)
        eng.vocab, eng.seq_len = model.config.vocab_size, seq_len
        warm = {"scenario": sc["name"], "run": "warmup", "rate": math.inf, "requests": 4, "estimate_s": 5.0}
        one_run(engine, eng, sc, warm)
    except Exception as ex:  # noqa: BLE001 -- the other engine's runs still count
        log(f"{engine}: could not start or warm up: {type(ex).__name__}: {ex}")
        return None, {**info, "error": f"{type(ex).__name__}: {ex}"}
    info["setup_s"] = round(time.perf_counter() - t0, 1)
    return eng, info


def record(col: Collector, engine: str, eng: Any, sc: dict[str, Any], run: dict[str, Any],
           lengths: tuple[np.ndarray, np.ndarray] | None = None) -> dict[str, Any]:  # fmt: skip
    """One run served (the scenario's draws, or ``lengths``' (prompt, output) requests all at t = 0), its rows
    written and its manifest entry added; the entry."""
    if lengths is None:
        rows, entry = one_run(engine, eng, sc, run)
    else:
        rows, entry = serve_rows(engine, eng, sc, run, np.zeros(lengths[0].size), *lengths)
    col.rows(engine, rows)
    col.man["runs"].append({"engine": engine, **entry})
    col.write_manifest()
    log(f"{engine} {sc['name']} {run['run']}: {entry['rate'] or 'burst'} /s, {run['requests']} requests, "
        f"{entry['wall_s']} s, {entry['requests_per_s']} completed/s, {entry['short']} short of their output")  # fmt: skip
    return entry


def manifest_head(
    args: argparse.Namespace, dev: Any, est: float, scs: list[dict[str, Any]]
) -> dict[str, Any]:
    """The manifest's fields known before the first run."""
    return {
        "script": "tools/bench_serving.py", "argv": sys.argv[1:], "smoke": args.smoke, "device": str(dev),
        **environment(dev), "budget_s": args.budget_s, "estimate_s": round(est, 1), "rates_mode": args.rates,
        "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), "finished": None,
        "scenarios": {s["name"]: {"file": s["file"], "engine": s["engine"], "model": s["model"],
                                  "precision": s.get("inference", {}).get("precision", "bf16"),
                                  "serving": s["serving"]} for s in scs},
        "engines": {}, "runs": [],
    }  # fmt: skip


def collect_steps(args: argparse.Namespace, scs: list[dict[str, Any]], engines: tuple[str, ...]) -> int:
    """``--steps``: each engine's step-cost points (:func:`plan_steps`) with its first scenario's model and
    settings, into ``steps_<engine>.csv.gz`` and ``steps_manifest.json`` (the rows of the load runs' format;
    ``run`` names the point). Points past ``--budget-s`` are skipped and listed in the manifest."""
    first = {
        e: next(s for s in scs if s["engine"] == e) for e in engines if any(s["engine"] == e for s in scs)
    }
    plans = {
        e: plan_steps(e, sc["serving"], int(sc["model"]["seq_len"]), args.smoke) for e, sc in first.items()
    }
    est = sum(SETUP_S[e] + sum(r["estimate_s"] for r in plans[e]) for e in plans)
    log(f"steps plan: {sum(len(v) for v in plans.values())} points; estimated GPU time {est:.0f} s "
        f"(budget {args.budget_s:.0f} s)")  # fmt: skip
    for e, runs in plans.items():
        for r in runs:
            log(f"  {e:12s} {first[e]['name']:30s} {r['run']:18s} {r['requests']:3d} x {r['prompt']:5d} + "
                f"{r['output']:3d} tokens  ~{r['estimate_s']:.1f} s")  # fmt: skip
    if args.dry_run:
        return 0
    import torch

    dev = torch.device(args.device or ("cuda" if torch.cuda.is_available() and not args.smoke else "cpu"))
    args.out.mkdir(parents=True, exist_ok=True)
    man = manifest_head(args, dev, est, list(first.values()))
    man["kind"] = "steps"
    col = Collector(args.out, man, kind="steps")
    t_start = time.perf_counter()
    torch.set_grad_enabled(False)
    try:
        for e, sc in first.items():
            eng, info = start_engine(e, sc, dev, args)
            man["engines"][e] = {sc["name"]: {**info, "mixed_step": MIXED_STEP[e]}}
            col.write_manifest()
            if eng is None:
                continue
            # the reference engine admits every prompt of a point at once (Hugging Face's keeps its budget)
            lifted = (
                {**sc, "serving": {**sc["serving"], "max_batch_tokens": 1 << 30}} if e == "reference" else sc
            )
            for r in plans[e]:
                if time.perf_counter() - t_start > args.budget_s:
                    man["skipped"] = man.get("skipped", []) + [f"{e} {r['run']}"]
                    continue
                n = r["requests"]
                record(col, e, eng, lifted, {k: v for k, v in r.items() if k not in ("prompt", "output")},
                       (np.full(n, r["prompt"], dtype=np.int64), np.full(n, r["output"], dtype=np.int64)))  # fmt: skip
            eng.close()
            del eng
            if dev.type == "cuda":
                torch.cuda.empty_cache()
    finally:
        man["seconds"] = round(time.perf_counter() - t_start, 1)
        col.close()
    log(
        f"done in {man['seconds']} s; wrote {', '.join(man['files'])} and steps_manifest.json under {args.out}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--scenarios", type=Path, default=SERVED, help="folder of the served scenarios")
    ap.add_argument("--engines", default=",".join(ENGINES), help="reference,huggingface")
    ap.add_argument("--budget-s", type=float, default=480.0, help="seconds the whole collection may take")
    ap.add_argument("--min-requests", type=int, default=40, help="fewest requests of a run")
    ap.add_argument("--rates", choices=("auto", "committed", "probe"), default="auto")
    ap.add_argument("--device", default=None, help="cuda (default when there is one) or cpu")
    ap.add_argument("--no-graphs", action="store_true", help="reference engine: decode steps eager")
    ap.add_argument(
        "--smoke", action="store_true", help="a tiny Llama, a few short requests (CPU by default)"
    )
    ap.add_argument(
        "--dry-run", action="store_true", help="print the plan and its time estimate, run nothing"
    )
    ap.add_argument("--steps", action="store_true",
                    help="measure each engine's step costs (decode at fixed concurrency, isolated prefills)")  # fmt: skip
    ap.add_argument("--resume", type=Path, default=None, metavar="DIR",
                    help="an earlier collection (its served_manifest.json): keep its capacities and rates, run "
                         "only the runs it lacks; files get the suffix _more")  # fmt: skip
    ap.add_argument("--only", default="", metavar="NAMES",
                    help="these scenarios only (comma-separated), in this order")  # fmt: skip
    args = ap.parse_args(argv)
    engines = tuple(e for e in args.engines.split(",") if e)
    bad = [e for e in engines if e not in ENGINES]
    if bad:
        ap.error(f"--engines: unknown engine {bad[0]!r} (known: {', '.join(ENGINES)})")
    prior: dict[str, Any] = {}
    if args.resume is not None:
        path = args.resume / "served_manifest.json"
        if not path.is_file():
            ap.error(f"--resume: {path} is missing")
        prior = json.loads(path.read_text(encoding="utf-8"))
    scs = load_scenarios(args.scenarios, engines)
    if args.only:
        names = [x for x in args.only.split(",") if x]
        unknown = [x for x in names if x not in {s["name"] for s in scs}]
        if unknown:
            ap.error(f"--only: no served scenario {unknown[0]!r} of the engines {', '.join(engines)}")
        scs = sorted((s for s in scs if s["name"] in names), key=lambda s: names.index(s["name"]))
    pred = load_predicted(args.scenarios)
    missing = [s["name"] for s in scs if s["name"] not in pred]
    if missing:
        sys.exit(f"error: predicted.json has no prediction for {missing[0]}: rerun python -m simcore.validation "
                 "served --predict")  # fmt: skip
    if args.smoke:
        for s in scs:  # short requests that the tiny model serves in seconds on a CPU
            s["serving"] = {**s["serving"], "prompt": {"dist": "uniform", "low": 4, "high": 24}, "output": 6,
                            "requests": 12, "max_batch": 4, "max_batch_tokens": 64, "kv_block_tokens": 16}  # fmt: skip
            s["model"] = {**s["model"], "seq_len": 64}
    if args.steps:
        return collect_steps(args, scs, engines)
    todo = {}  # scenario -> (capacity, rates, runs done) of the collection resumed
    for sc in scs:
        cap, rates, done = resume_runs(prior, sc["engine"], sc["name"])
        if cap and rates:
            todo[sc["name"]] = (cap, rates, done)
    share = {e: (args.budget_s - sum(SETUP_S[x] for x in engines)) / len(engines) for e in engines}
    n_min = 4 if args.smoke else args.min_requests
    plans = {e: plan_engine([s for s in scs if s["engine"] == e], pred, share[e], n_min) for e in engines}
    for e in engines:  # a resumed scenario: the rates it chose, less the runs it measured
        keep = [r for r in plans[e] if r["scenario"] not in todo]
        resumed = [s for s in scs if s["engine"] == e and s["name"] in todo]
        n_runs = len(keep) + sum(
            len(todo[s["name"]][1]) - len(todo[s["name"]][2] - {"probe"}) for s in resumed
        )
        slot = share[e] / max(n_runs, 1)
        for s in resumed:
            cap, rates, done = todo[s["name"]]
            for i, rate in enumerate(rates):
                if f"r{i}" not in done:
                    n = run_requests(int(s["serving"].get("requests", 1000)), rate, cap, slot, n_min)
                    keep.append({"scenario": s["name"], "run": f"r{i}", "rate": rate, "requests": n,
                                 "estimate_s": n / min(rate, cap)})  # fmt: skip
        plans[e] = keep
    est = sum(SETUP_S[e] + sum(r["estimate_s"] for r in plans[e]) for e in engines if plans[e])
    log(f"plan: {sum(len(v) for v in plans.values())} runs over {len(scs)} scenarios; estimated GPU time "
        f"{est:.0f} s (budget {args.budget_s:.0f} s; run sizes are redone from each engine's measured capacity)")  # fmt: skip
    for e in engines:
        for r in plans[e]:
            log(f"  {e:12s} {r['scenario']:34s} {r['run']:6s} rate {r['rate']:8.3g}/s  {r['requests']:4d} requests"
                f"  ~{r['estimate_s']:.0f} s")  # fmt: skip
    if args.dry_run:
        return 0

    import torch

    dev = torch.device(args.device or ("cuda" if torch.cuda.is_available() and not args.smoke else "cpu"))
    args.out.mkdir(parents=True, exist_ok=True)
    man = manifest_head(args, dev, est, scs)
    if args.resume is not None:
        man["resumed"] = str(args.resume)
    col = Collector(args.out, man, suffix="_more" if args.resume is not None else "")
    t_start = time.perf_counter()
    torch.set_grad_enabled(False)
    try:
        for e in engines:
            e_scs = [s for s in scs if s["engine"] == e and any(r["scenario"] == s["name"] for r in plans[e])]
            t_e, key, eng = time.perf_counter(), None, None
            for k, sc in enumerate(e_scs):
                # one model and engine for the scenarios that share their settings
                sv = sc["serving"]
                new_key = json.dumps([sc["model"], sc.get("inference"), {x: sv.get(x) for x in ENGINE_KEYS}])
                if new_key != key:
                    if eng is not None:
                        eng.close()
                    eng, info = start_engine(e, sc, dev, args)
                    key = new_key if eng is not None else None
                man["engines"].setdefault(e, {})[sc["name"]] = dict(info)
                col.write_manifest()
                if eng is None:
                    if "missing" in info.get("api", {}):
                        break
                    continue
                # the probe, then the rates, each run sized from the probe's capacity to share what is left
                left = share[e] - (time.perf_counter() - t_e)
                n_left = sum(1 for s in e_scs[k:] for r in plans[e] if r["scenario"] == s["name"])
                slot = max(left / max(n_left, 1), 5.0)
                p = pred[sc["name"]]
                n_max = int(sv.get("requests", 1000))
                if sc["name"] in todo:
                    cap, rates, done = todo[sc["name"]]
                    source = "resumed"
                else:
                    probe = {"scenario": sc["name"], "run": "probe", "rate": math.inf,
                             "requests": probe_requests(sv, n_min)}  # fmt: skip
                    probe["estimate_s"] = probe["requests"] / p["capacity_rps"]
                    entry = record(col, e, eng, sc, probe)
                    cap = entry["requests_per_s"] or p["capacity_rps"]
                    rates, source = choose_rates(p["rates"], p["loads"], cap, args.rates)
                    done = set()
                man["engines"][e][sc["name"]].update(capacity_rps=cap, rates=rates, rates_from=source)
                log(f"{e} {sc['name']}: burst {cap:.3g} requests/s; rates {rates} ({source})")
                for i, rate in enumerate(rates):
                    if f"r{i}" in done:
                        continue
                    if (
                        time.perf_counter() - t_start > args.budget_s
                        or time.perf_counter() - t_e > 1.25 * share[e]
                    ):
                        log(
                            f"budget spent (the whole, or 1.25x this engine's share): {e} {sc['name']} r{i} not run"
                        )
                        man["skipped"] = man.get("skipped", []) + [f"{e} {sc['name']} r{i}"]
                        continue
                    n = run_requests(n_max, rate, cap, slot, n_min)
                    record(col, e, eng, sc, {"scenario": sc["name"], "run": f"r{i}", "rate": rate, "requests": n,
                                             "estimate_s": n / min(rate, cap)})  # fmt: skip
            if eng is not None:
                eng.close()
            del eng
            if dev.type == "cuda":
                torch.cuda.empty_cache()
    finally:
        man["seconds"] = round(time.perf_counter() - t_start, 1)
        col.close()
    log(
        f"done in {man['seconds']} s; wrote {', '.join(man['files'])} and {col.manifest_path.name} under {args.out}"
    )
    print(
        f"{'engine':12s} {'scenario':34s} {'run':6s} {'rate/s':>8s} {'n':>5s} {'done/s':>8s} {'wall s':>7s}"
    )
    for r in man["runs"]:
        print(f"{r['engine']:12s} {r['scenario']:34s} {r['run']:6s} {r['rate'] or float('inf'):8.3g} "
              f"{r['requests']:5d} {r['requests_per_s'] or 0:8.3g} {r['wall_s']:7.1f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
