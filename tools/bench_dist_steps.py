"""Whole profiled training steps under the distributed wrappers, on every rank, for the host time of
a layer and of the work outside the layers in CPU-speed units (round 25's method on 2 GPUs).

Per point (``bench_parallel.py``'s builders: a plain replica per rank, PyTorch DDP, FSDP2
``fully_shard`` per block and root, Megatron-style tensor parallel over the 2 ranks; GPT and Llama-like
blocks at 2 and 8 layers (default width 1024, 16 heads, seq 1024, micro-batch 2); fp32 parameters + autocast bf16,
fused AdamW), ``torch.profiler`` (CPU + CUDA, ``record_shapes=True``, schedule wait 1 / warm-up 1 /
active 2, ``prof.step()`` per step) writes one Chrome trace per rank (``<strategy>_<model>_rank<r>.json.gz``)
for ``python -m simcore.calibration.host_trace --steps --strategy``.

  torchrun --nproc_per_node=2 tools/bench_dist_steps.py --outdir DIR [--hidden H --seq S --mb B --tag T]
      [--budget S] [--smoke]

``--units``: Host seconds of the plain-PyTorch distributed wrappers per unit of their work, unprofiled, on any
number of GPUs (one included): DDP per gradient bucket, FSDP2 per ``fully_shard`` group,
torch.distributed.pipelining per schedule action.

Every point is a host-bound training step (``tools/gpt.py`` blocks at width 64, seq 8, micro-batch 1,
vocab 512, fp32 weights under bf16 autocast, fused AdamW), so a step's wall time is the host's time to
issue it; the GPU work of each point is microseconds. Per point: 3 warm-up steps (DDP rebuilds its
buckets after the first; pipelining infers shapes on the first), then ``--reps`` repeats of n
back-to-back steps ending in ``torch.cuda.synchronize()`` (n chosen for ~0.1 s); ``host_s`` is the
median over repeats of a repeat's wall time / n. Points of one family run interleaved over
``--passes`` passes so that the machine's slow and fast moments hit every point alike. All ranks run
the same points in lock step; every rank writes its own rows (``_rank<r>`` in the file name). Each
row carries the CPU speed probe of the moment (``t_probe_us``: median host seconds of ``aten::t`` on a
CUDA tensor, in microseconds) and the unit counts the code path runs:

* ``ddp``: ``plain`` (no wrapper) and ``DistributedDataParallel`` at ``bucket_cap_mb`` values that
  give 1 ... all-tensors buckets (``buckets``: DDP's own rebuilt bucket count, ``grads``: gradient
  tensors); the slope over buckets is DDP's host per bucket (Reducer: flatten into the bucket view,
  all-reduce launch, future callback, copy back), the intercept over plain its per-step fixed cost;
* ``fsdp``: ``fully_shard`` on groups of k blocks (k = 1, 2, 4, ``layers``) plus the root
  (``groups`` = layers / k + 1), bf16 params / fp32 reduce, ``reshard_after_forward=True``; the slope
  over groups is FSDP2's host per group (pre-forward unshard: copy-in, all-gather, copy-out; the
  next group's prefetch; post-forward reshard; pre-backward unshard; post-backward reduce-scatter);
* ``pp``: torch.distributed.pipelining ``PipelineStage``s, ``stages`` per rank x world ranks, with
  ``ScheduleLoopedBFS`` (GPipe order) / ``ScheduleInterleaved1F1B`` (1F1B order) where a rank holds
  several stages, ``ScheduleGPipe`` / ``Schedule1F1B`` where it holds one (world >= 2), at 2-16
  micro-batches, beside ``accum``: the same layers on this rank run as plain gradient accumulation
  over the same micro-batches; ``actions`` = micro-batches x stages on this rank x 2 (a forward and a
  backward action each). The excess over ``accum`` per action is pipelining's Python per action
  (plus the P2P calls where stages sit on different ranks: ``p2p_ops`` per rank and step).

  python tools/collect.py dist-units [--gpus N]
  [torchrun --nproc_per_node N] tools/bench_dist_steps.py --units units.csv [--families ddp,fsdp,pp] [--passes 3]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_host_pace_dist import build  # noqa: E402
from bench_parallel import Ctx, make_opt  # noqa: E402
from benchutil import CsvOut, log, save_trace, token_batch, train_step  # noqa: E402
from gpt import GPT, GPTConfig, probe_sdpa  # noqa: E402


def config(arch, layers, hidden, smoke):
    kw = dict(
        layers=2 if smoke else layers,
        hidden=64 if smoke else hidden,
        heads=4 if smoke else hidden // 64,
        vocab=512 if smoke else 50304,
    )
    if arch == "llama":
        kw.update(kv_heads=2 if smoke else 4, activation="swiglu", norm="rmsnorm")
    return GPTConfig(**kw)


UNIT_COLS = ["pass", "rank", "world", "family", "variant", "layers", "hidden", "micro_batches", "stages",
        "grads", "buckets", "groups", "actions", "p2p_ops", "steps", "host_s", "host_min_s", "t_probe_us",
        "bucket_sizes", "impl"]  # fmt: skip


def probe_t(dev, n=2000):
    """Median host seconds of one ``aten::t`` on a CUDA tensor (the CPU's per-op speed), microseconds."""
    x = torch.empty(4, 4, device=dev)
    out = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            x.t()
        out.append((time.perf_counter() - t0) / n)
    return statistics.median(out) * 1e6


def time_host(C, step, reps):
    for _ in range(3):
        step()
    C.sync()
    dist.barrier()
    t0 = time.perf_counter()
    step()
    C.sync()
    one = time.perf_counter() - t0
    n = max(3, min(200, int(0.1 / max(one, 1e-6))))
    nt = torch.tensor([n], device=C.dev)
    dist.broadcast(nt, 0)  # every rank runs the same number of steps
    n = int(nt.item())
    ts = []
    for _ in range(reps):
        C.sync()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(n):
            step()
        C.sync()
        ts.append((time.perf_counter() - t0) / n)
    return statistics.median(ts), min(ts), n


def cfg_of(layers, smoke):
    return GPTConfig(layers=layers, hidden=64, heads=4, vocab=512, seq_len=8)


def batch(C, cfg, mb, seed=1234):
    return token_batch(C.dev, C.rank, cfg.vocab, mb, cfg.seq_len, seed)


# --- DDP: per bucket ------------------------------------------------------------------------------
def ddp_points(layers):
    return [("plain", None)] + [(f"cap{c:g}", c) for c in (25.0, 0.5, 0.2, 0.07, 1e-6)]


def build_ddp(C, cfg, cap):
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    with torch.device(C.dev):
        model = GPT(cfg)
    grads = sum(1 for p in model.parameters() if p.requires_grad)
    if cap is not None:
        model = DDP(model, device_ids=[C.local] if C.cuda else None, bucket_cap_mb=cap)
    opt, impl = make_opt(model.parameters(), C.cuda)
    ac = torch.autocast(device_type=C.dev.type, dtype=torch.bfloat16)
    return model, train_step(model, opt, batch(C, cfg, 1), ac), grads, impl


def ddp_buckets(model):
    """DDP's bucket count after its rebuild (logging data), and the sizes as DDP reports them."""
    if not hasattr(model, "_get_ddp_logging_data"):
        return 0, ""
    d = model._get_ddp_logging_data()
    sizes = str(d.get("rebuilt_bucket_sizes") or d.get("bucket_sizes") or "")
    n = len([s for s in sizes.replace(" ", "").split(",") if s])
    return n, sizes.replace(",", " ")


# --- FSDP2: per group -----------------------------------------------------------------------------
def build_fsdp(C, cfg, k):
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    torch.manual_seed(0)
    with torch.device(C.dev):
        model = GPT(cfg)
    grads = sum(1 for p in model.parameters())
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    groups = 1
    if k is not None:
        blocks = list(model.blocks)
        for i in range(0, len(blocks), k):
            fully_shard(blocks[i : i + k] if k > 1 else blocks[i], mp_policy=mp)
            groups += 1
        fully_shard(model, mp_policy=mp)
    else:
        groups = 0
    opt, impl = make_opt(model.parameters(), C.cuda)
    ac = torch.autocast(device_type=C.dev.type, dtype=torch.bfloat16)
    return model, train_step(model, opt, batch(C, cfg, 1), ac), grads, groups, impl


# --- pipelining: per action -----------------------------------------------------------------------
class StageMod(nn.Module):
    """One pipeline stage of ``tools/gpt.py``'s GPT: the embedding on the first, norm + head on the
    last (logits out; the schedule's loss_fn takes the loss)."""

    def __init__(self, cfg, n_layers, first, last):
        super().__init__()
        self.m = GPT(cfg, n_layers=n_layers, pre=first, post=last)

    def forward(self, x):
        return self.m(x)


def loss_fn(logits, target):
    return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), target.reshape(-1))


def build_pp(C, cfg, per_rank, m, order):
    from torch.distributed import pipelining as P

    total = per_rank * C.world
    nl = cfg.layers // total
    torch.manual_seed(0)
    idxs = [C.rank + i * C.world for i in range(per_rank)]
    mods, stages = [], []
    for s in idxs:
        with torch.device(C.dev):
            mod = StageMod(cfg, nl, s == 0, s == total - 1)
        mods.append(mod)
        stages.append(P.PipelineStage(mod, s, total, C.dev))
    if per_rank == 1:
        cls = P.ScheduleGPipe if order == "gpipe" else P.Schedule1F1B
        sched = cls(stages[0], n_microbatches=m, loss_fn=loss_fn)
    else:
        cls = P.ScheduleLoopedBFS if order == "gpipe" else P.ScheduleInterleaved1F1B
        sched = cls(stages, n_microbatches=m, loss_fn=loss_fn)
    params = [p for mod in mods for p in mod.parameters()]
    opt, impl = make_opt(params, C.cuda)
    x = batch(C, cfg, m, seed=1234 - C.rank)  # the same full batch on every rank
    ac = torch.autocast(device_type=C.dev.type, dtype=torch.bfloat16)
    has_first, has_last = 0 in idxs, (total - 1) in idxs

    def step():
        with ac:
            kw = {"target": x} if has_last else {}
            if has_first:
                sched.step(x, **kw)
            else:
                sched.step(**kw)
        opt.step()
        opt.zero_grad(set_to_none=True)

    # P2P ops of this rank per step: each micro-batch's activations (forward) and gradients
    # (backward) cross every boundary between stages on different ranks
    p2p = 0
    for s in idxs:
        p2p += (s > 0) * 2 * m + (s < total - 1) * 2 * m if C.world > 1 else 0
    return mods, step, len(params), per_rank, p2p, f"{cls.__name__} adamw_{impl}"


def build_accum(C, cfg, per_rank, m):
    """This rank's layers of the pipeline run as plain gradient accumulation over the m micro-batches
    (the embedding and head where the pipeline puts them on this rank)."""
    total = per_rank * C.world
    nl = cfg.layers // total * per_rank
    first, last = C.rank == 0, C.rank == C.world - 1  # looped stages: stage 0 on rank 0, the last on the last
    torch.manual_seed(0)
    with torch.device(C.dev):
        mod = GPT(cfg, n_layers=nl, pre=first, post=last)
    opt, impl = make_opt(mod.parameters(), C.cuda)
    x = batch(C, cfg, 1)
    h0 = torch.randn(1, cfg.seq_len, cfg.hidden, device=C.dev)
    ac = torch.autocast(device_type=C.dev.type, dtype=torch.bfloat16)

    def step():
        for _ in range(m):
            with ac:
                out = mod(x if first else h0, x if last else None)
                loss = out if last else out.float().sum()
            (loss / m).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return mod, step, impl


def units_main(argv):
    """The ``--units`` mode (module docstring)."""
    for k, v in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="29517").items():
        os.environ.setdefault(k, v)  # one process without torchrun
    ap = argparse.ArgumentParser()
    ap.add_argument("--units", dest="out", required=True)
    ap.add_argument("--families", default="ddp,fsdp,pp")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--budget", type=float, default=400.0)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args(argv)
    C = Ctx(args.smoke)
    out = CsvOut(args.out.replace(".csv", f"_rank{C.rank}.csv"), UNIT_COLS)
    L = args.layers
    fams = args.families.split(",")
    points = []
    if "ddp" in fams:
        points += [("ddp", v, c) for v, c in ddp_points(L)]
    if "fsdp" in fams:
        points += [("fsdp", "plain", None)] + [("fsdp", f"group{k}", k) for k in (1, 2, 4, L)]
    if "pp" in fams:
        per = (2, 4) if C.world == 1 else (1, 2)
        for m in (2, 4, 8, 16):
            for s in per:
                if L % (s * C.world) == 0 and (s == 1 or m % C.world == 0):
                    points += [("pp", f"accum_s{s}", (s, m, None))]
                    points += [("pp", f"{o}_s{s}", (s, m, o)) for o in ("gpipe", "1f1b")]
    t0 = time.time()
    stop = torch.zeros(1, device=C.dev)
    for p in range(args.passes):
        for fam, variant, arg in points:
            stop.fill_(1.0 if (C.rank == 0 and time.time() - t0 > args.budget) else 0.0)
            dist.broadcast(stop, 0)
            if stop.item() > 0:
                log(f"rank{C.rank} budget reached")
                args.passes = p
                break
            cfg = cfg_of(L, args.smoke)
            row = dict(rank=C.rank, world=C.world, family=fam, variant=variant, layers=L, hidden=cfg.hidden)
            row["pass"] = p
            try:
                if fam == "ddp":
                    model, step, grads, impl = build_ddp(C, cfg, arg)
                    host, hmin, n = time_host(C, step, args.reps)
                    nb, sizes = ddp_buckets(model)
                    row.update(grads=grads, buckets=nb, bucket_sizes=sizes, micro_batches=1)
                elif fam == "fsdp":
                    model, step, grads, groups, impl = build_fsdp(C, cfg, arg)
                    host, hmin, n = time_host(C, step, args.reps)
                    row.update(grads=grads, groups=groups, micro_batches=1)
                else:
                    s, m, order = arg
                    if order is None:
                        model, step, impl = build_accum(C, cfg, s, m)
                        acts, p2p = 0, 0
                    else:
                        model, step, grads, s, p2p, impl = build_pp(C, cfg, s, m, order)
                        acts = m * s * 2
                    host, hmin, n = time_host(C, step, args.reps)
                    row.update(micro_batches=m, stages=s, actions=acts, p2p_ops=p2p)
                probe = probe_t(C.dev)
                out.row(**row, steps=n, host_s=host, host_min_s=hmin, t_probe_us=probe, impl=impl)
                log(f"rank{C.rank} pass {p} {fam} {variant} {arg}: {host * 1e3:.3f} ms/step, t {probe:.2f} us")
                del model, step
            except Exception as e:  # noqa: BLE001
                log(f"rank{C.rank} ERROR {fam} {variant} {arg}: {repr(e)[:400]}")
            gc.collect()
            if C.cuda:
                torch.cuda.empty_cache()
            dist.barrier()
        else:
            continue
        break
    out.close()
    log(f"rank{C.rank} done {out.n} rows in {time.time() - t0:.0f} s")
    dist.destroy_process_group()


def main():
    if "--units" in sys.argv:
        units_main(sys.argv[1:])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--outdir", required=True)
    ap.add_argument("--budget", type=float, default=300.0)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--mb", type=int, default=2)
    ap.add_argument("--tag", default="", help="suffix of the trace names")
    ap.add_argument(
        "--rank0-only", action="store_true", help="profile rank 0 only (as bench_parallel.py does)"
    )
    ap.add_argument("--strategies", default="ddp,fsdp,tp,single")
    args = ap.parse_args()
    C = Ctx(args.smoke)
    probe_sdpa(C.dev)
    from torch.profiler import ProfilerActivity, profile, schedule

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if C.cuda else [])
    seq, mb = (64, 1) if args.smoke else (args.seq, args.mb)
    os.makedirs(args.outdir, exist_ok=True)
    points = [(s, a, L) for s in args.strategies.split(",") for a in ("gpt", "llama") for L in (2, 8)]
    t0 = time.time()
    stop = torch.zeros(1, device=C.dev)
    done = {}
    for strategy, arch, L in points:
        stop.fill_(1.0 if (C.rank == 0 and time.time() - t0 > args.budget) else 0.0)
        dist.broadcast(stop, 0)
        if stop.item() > 0:
            log(f"rank{C.rank} budget reached")
            break
        name = f"{strategy}_{arch}_L{L}_h{args.hidden}{args.tag}"
        cfg = config(arch, L, args.hidden, args.smoke)
        cfg.seq_len = seq
        try:
            step, _total, _local, impl, model = build(C, strategy, cfg, mb, seq)
            for _ in range(2):
                step()
            C.sync()
            dist.barrier()
            if args.rank0_only and C.rank != 0:
                for _ in range(4):
                    step()
                C.sync()
                prof = None
            else:
                with profile(
                    activities=acts,
                    record_shapes=True,
                    schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
                ) as prof:
                    for _ in range(4):
                        step()
                        prof.step()
                    C.sync()
                save_trace(prof, os.path.join(args.outdir, f"{name}_rank{C.rank}.json.gz"))
            done[name] = {
                **cfg.asdict(),
                "strategy": strategy,
                "impl": impl,
                "seq_len": seq,
                "micro_batch": mb,
            }
            log(f"rank{C.rank} {name} ({impl}) done at {time.time() - t0:.0f} s")
            del step, model, prof
        except Exception as e:  # noqa: BLE001
            log(f"rank{C.rank} ERROR {name}: {repr(e)[:300]}")
        gc.collect()
        if C.cuda:
            torch.cuda.empty_cache()
        dist.barrier()
    if C.rank == 0:
        with open(os.path.join(args.outdir, f"r28_points{args.tag}.json"), "w") as f:
            json.dump(done, f, indent=1)
    log(f"rank{C.rank} done {len(done)} points in {time.time() - t0:.0f} s")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
