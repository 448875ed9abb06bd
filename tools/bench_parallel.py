"""Training steps of the GPT in tools/gpt.py under simple parallel strategies, one process per GPU.

  torchrun --nproc_per_node=2 tools/bench_parallel.py --out parallel.csv --profile-dir prof/
  torchrun --nproc_per_node=2 tools/bench_parallel.py --smoke --out /tmp/parallel.csv      # gloo, CPU

Recipe as bench_steps.py: fp32 params + torch.autocast(bf16), AdamW (fused where possible).
Strategies (each rank runs the same code):
  single  every rank trains its own full replica, no communication (baseline under the same conditions)
  ddp     DistributedDataParallel (default 25 MB buckets); micro_batch per rank, global = world*micro_batch
  tp      Megatron-style tensor parallel over all ranks (gpt.py: column/row-parallel Linears, all_reduce in
          forward after attention/MLP and in backward before them); embedding, norms, head replicated;
          every rank sees the same micro_batch
  pp      2-stage pipeline (layers split evenly; stage 0 has the embedding, the last stage norm+head+loss),
          GPipe schedule: all micro-batch forwards, then all backwards; activations / grads by NCCL
          isend/irecv (fp32 residual stream; receives posted up front, sends waited at step end);
          global batch = n_micro * micro_batch
  fsdp    FSDP2 fully_shard per block and at the root (FULL_SHARD, reshard after forward) with
          MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32), autocast on as well;
          falls back to FSDP1 FullyShardedDataParallel(FULL_SHARD) when fully_shard is missing
Columns: strategy,name,world,layers,hidden,heads,ffn_hidden,vocab,seq_len,micro_batch,n_micro,global_batch,
tokens_per_step,params_total,params_per_rank,step_time_s,step_time_max_s,peak_mem_bytes,peak_mem_max_bytes,
n_timed,spread,impl,status.  step_time_s / peak_mem_bytes are rank 0's; *_max_* the largest over ranks.
"""

from __future__ import annotations

import argparse
import gc
import gzip
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchutil import CsvOut, log, token_batch, train_step  # noqa: E402
from gpt import GPT, GPTConfig, probe_sdpa  # noqa: E402

COLS = ["strategy", "name", "world", "layers", "hidden", "heads", "ffn_hidden", "vocab", "seq_len", "micro_batch",
        "n_micro", "global_batch", "tokens_per_step", "params_total", "params_per_rank", "step_time_s",
        "step_time_max_s", "peak_mem_bytes", "peak_mem_max_bytes", "n_timed", "spread", "impl", "status"]


class Ctx:
    def __init__(self, smoke):
        self.smoke = smoke
        self.cuda = torch.cuda.is_available() and not smoke
        self.rank = int(os.environ.get("RANK", 0))
        self.local = int(os.environ.get("LOCAL_RANK", 0))
        if self.cuda:
            torch.cuda.set_device(self.local)
            self.dev = torch.device("cuda", self.local)
            dist.init_process_group("nccl", device_id=self.dev)
        else:
            self.dev = torch.device("cpu")
            dist.init_process_group("gloo")
        self.world = dist.get_world_size()

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def now_events(self):
        return torch.cuda.Event(enable_timing=True) if self.cuda else None


FORCE_FOREACH = {"on": False}


def make_opt(params, cuda):
    params = list(params)
    if cuda and not FORCE_FOREACH["on"]:
        try:
            return torch.optim.AdamW(params, lr=1e-4, weight_decay=0.1, fused=True), "fused"
        except Exception:  # noqa: BLE001
            pass
    return torch.optim.AdamW(params, lr=1e-4, weight_decay=0.1, foreach=True), "foreach"


def time_steps(C: Ctx, step, nwarm, ntime):
    for _ in range(nwarm):
        step()
    C.sync()
    dist.barrier()
    if C.cuda:
        torch.cuda.reset_peak_memory_stats()
    ts = []
    for _ in range(ntime):
        if C.cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            step()
            b.record()
            b.synchronize()
            ts.append(a.elapsed_time(b) / 1e3)
        else:
            t0 = time.perf_counter()
            step()
            ts.append(time.perf_counter() - t0)
    peak = torch.cuda.max_memory_allocated() if C.cuda else 0
    return ts, peak


def build_single_or_ddp(C, cfg, mb, seq, ddp):
    from torch.nn.parallel import DistributedDataParallel as DDP

    with torch.device(C.dev):
        model = GPT(cfg)
    nparam = sum(p.numel() for p in model.parameters())
    if ddp:
        model = DDP(model, device_ids=[C.local] if C.cuda else None)
    opt, impl = make_opt(model.parameters(), C.cuda)
    x = token_batch(C.dev, C.rank, cfg.vocab, mb, seq)
    ac = torch.autocast(device_type=C.dev.type, dtype=torch.bfloat16)
    step = train_step(model, opt, x, ac)
    return step, nparam, nparam, ("ddp " if ddp else "") + "adamw_" + impl, model


def build_tp(C, cfg, mb, seq):
    with torch.device(C.dev):
        torch.manual_seed(0)
        model = GPT(cfg, tp=C.world, tp_group=dist.group.WORLD)
    local = sum(p.numel() for p in model.parameters())
    total = cfg.param_count()
    opt, impl = make_opt(model.parameters(), C.cuda)
    x = token_batch(C.dev, 0, cfg.vocab, mb, seq)  # same batch on every TP rank
    ac = torch.autocast(device_type=C.dev.type, dtype=torch.bfloat16)
    return train_step(model, opt, x, ac), total, local, "megatron_tp adamw_" + impl, model


def build_pp(C, cfg, mb, seq, n_micro):
    assert C.world == 2, "pipeline demo is 2 stages"
    stage = C.rank
    nl = cfg.layers // 2
    with torch.device(C.dev):
        model = GPT(cfg, n_layers=nl, pre=(stage == 0), post=(stage == 1))
    local = sum(p.numel() for p in model.parameters())
    total = cfg.param_count()
    opt, impl = make_opt(model.parameters(), C.cuda)
    g = torch.Generator(device=C.dev).manual_seed(1234)
    xs = [torch.randint(0, cfg.vocab, (mb, seq), device=C.dev, generator=g) for _ in range(n_micro)]
    ac = torch.autocast(device_type=C.dev.type, dtype=torch.bfloat16)
    act_shape = (mb, seq, cfg.hidden)

    def step():
        # Non-blocking p2p: sends are waited for only at the end of the step, receives are posted
        # up front and waited for just before their data is used (so compute and transfers overlap).
        sends = []
        if stage == 0:
            grads = [torch.empty(act_shape, device=C.dev, dtype=torch.float32) for _ in xs]
            outs = []
            for x in xs:
                with ac:
                    h = model(x)
                hd = h.detach().contiguous()
                sends.append((dist.isend(hd, 1), hd))
                outs.append(h)
            recvs = [dist.irecv(gb, 1) for gb in grads]
            for h, gb, r in zip(outs, grads, recvs):
                r.wait()
                h.backward(gb)
        else:
            bufs = [torch.empty(act_shape, device=C.dev, dtype=torch.float32) for _ in xs]
            recvs = [dist.irecv(b, 0) for b in bufs]
            losses = []
            for x, buf, r in zip(xs, bufs, recvs):
                r.wait()
                buf.requires_grad_(True)
                with ac:
                    losses.append(model(buf, x) / n_micro)
            for buf, loss in zip(bufs, losses):
                loss.backward()
                gd = buf.grad.contiguous()
                sends.append((dist.isend(gd, 0), gd))
        for w, _ in sends:
            w.wait()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, total, local, "gpipe send/recv adamw_" + impl, model


def build_fsdp(C, cfg, mb, seq):
    with torch.device(C.dev):
        model = GPT(cfg)
    total = sum(p.numel() for p in model.parameters())
    try:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for blk in model.blocks:
            fully_shard(blk, mp_policy=mp)
        fully_shard(model, mp_policy=mp)
        impl = "fsdp2 fully_shard bf16/fp32reduce"
    except ImportError:
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        from torch.distributed.fsdp import MixedPrecision, ShardingStrategy
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy

        from gpt import Block

        model = FSDP(model, sharding_strategy=ShardingStrategy.FULL_SHARD,
                     auto_wrap_policy=ModuleWrapPolicy({Block}),
                     mixed_precision=MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32),
                     device_id=C.dev if C.cuda else None)
        impl = "fsdp1 FULL_SHARD bf16/fp32reduce"
    local = sum(p.to_local().numel() if hasattr(p, "to_local") else p.numel() for p in model.parameters())
    opt, oimpl = make_opt(model.parameters(), C.cuda)
    x = token_batch(C.dev, C.rank, cfg.vocab, mb, seq)
    ac = torch.autocast(device_type=C.dev.type, dtype=torch.bfloat16)
    return train_step(model, opt, x, ac), total, local, impl + " adamw_" + oimpl, model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--profile-dir", default=None)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--budget", type=float, default=240.0)
    ap.add_argument("--only", default="single,ddp,tp,pp,fsdp", help="strategies to time; '' = none")
    ap.add_argument("--profile-strategies", default="",
                    help="e.g. tp,fsdp,pp: after the timed jobs, one profiler trace per strategy of the first "
                         "model (rank 0 only) into --profile-dir as profile_<strategy>_rank0.json.gz")
    ap.add_argument("--profile-layers", type=int, default=0,
                    help="layers of the profiled model (0 = the model's own); a trace whose gzip exceeds "
                         "--profile-max-mb is redone with --profile-fallback-layers")
    ap.add_argument("--profile-max-mb", type=float, default=1.5)
    ap.add_argument("--profile-fallback-layers", type=int, default=6)
    ap.add_argument("--profile-n-micro", type=int, default=4, help="micro-batches of the profiled pp step")
    ap.add_argument("--profile-model", default="",
                    help="the model the --profile-strategies traces use instead of the first timed one, as "
                         "KEY=VALUE,... (GPTConfig fields, plus seq and mb), e.g. "
                         "layers=12,hidden=768,heads=12,seq=1024,mb=8")
    ap.add_argument("--profile-all-ranks", action="store_true",
                    help="every rank writes its own trace (profile_<strategy>_rank<r>.json.gz), not rank 0 only")
    ap.add_argument("--profile-tag", default="", help="inserted in the trace names: profile_<strategy><tag>_rank<r>")
    args = ap.parse_args()
    C = Ctx(args.smoke)
    probe_sdpa(C.dev)
    out = CsvOut(args.out, COLS) if C.rank == 0 else None
    if args.smoke:
        models = [("tiny", GPTConfig(layers=2, hidden=64, heads=4, vocab=512), 64, 2)]
    else:
        models = [("gpt-350m", GPTConfig(layers=24, hidden=1024, heads=16, vocab=50304), 2048, 4),
                  ("gpt-1.3b", GPTConfig(layers=24, hidden=2048, heads=16, vocab=50304), 2048, 2)]
    nwarm, ntime = (1, 2) if args.smoke else (3, 6)
    t0 = time.time()
    strategies = [s for s in args.only.split(",") if s]
    jobs = []
    for name, cfg, seq, mb in models:
        for s in strategies:
            if s == "pp":
                for nm in ([2] if args.smoke else [4, 8]):
                    jobs.append((s, name, cfg, seq, mb, nm))
            else:
                jobs.append((s, name, cfg, seq, mb, 1))
    stop = torch.zeros(1, device=C.dev)
    for s, name, cfg, seq, mb, nm in jobs:
        stop.fill_(1.0 if (C.rank == 0 and time.time() - t0 > args.budget) else 0.0)
        dist.broadcast(stop, 0)
        if stop.item() > 0:
            if C.rank == 0:
                log("budget reached")
            break
        cfg.seq_len = seq
        status, impl = "ok", ""
        row = dict(strategy=s, name=name, world=C.world, layers=cfg.layers, hidden=cfg.hidden, heads=cfg.heads,
                   ffn_hidden=cfg.ffn_hidden, vocab=cfg.vocab, seq_len=seq, micro_batch=mb, n_micro=nm)
        gb = {"single": mb, "ddp": C.world * mb, "tp": mb, "pp": nm * mb, "fsdp": C.world * mb}[s]
        row.update(global_batch=gb, tokens_per_step=gb * seq)
        try:
            def build_and_time():
                torch.manual_seed(0)
                if s in ("single", "ddp"):
                    r = build_single_or_ddp(C, cfg, mb, seq, s == "ddp")
                elif s == "tp":
                    r = build_tp(C, cfg, mb, seq)
                elif s == "pp":
                    r = build_pp(C, cfg, mb, seq, nm)
                else:
                    r = build_fsdp(C, cfg, mb, seq)
                return r, time_steps(C, r[0], nwarm, ntime)

            try:
                (step, total, local, impl, model), (ts, peak) = build_and_time()
            except Exception as e:  # noqa: BLE001
                if isinstance(e, torch.cuda.OutOfMemoryError) or "fused" not in repr(e).lower():
                    raise
                log(f"rank{C.rank} {s}: fused AdamW failed ({repr(e)[:200]}); retrying with foreach")
                gc.collect()
                FORCE_FOREACH["on"] = True
                try:
                    (step, total, local, impl, model), (ts, peak) = build_and_time()
                finally:
                    FORCE_FOREACH["on"] = False
            med = statistics.median(ts)
            agg = torch.tensor([med, float(peak)], device=C.dev, dtype=torch.float64)
            dist.all_reduce(agg, op=dist.ReduceOp.MAX)
            row.update(params_total=total, params_per_rank=local, step_time_s=med, step_time_max_s=agg[0].item(),
                       peak_mem_bytes=peak, peak_mem_max_bytes=int(agg[1].item()), n_timed=ntime,
                       spread=(max(ts) - min(ts)) / med, impl=impl)
            if C.rank == 0:
                log(f"{s} {name} mb={mb} n_micro={nm} step={med * 1e3:.1f}ms (max {agg[0].item() * 1e3:.1f}) "
                    f"peak={peak / 2**30:.1f}GiB {impl}")
            if s == "ddp" and args.profile_dir and name == models[0][0]:
                profile_ddp(C, cfg, args.profile_dir)
            del step, model
        except Exception as e:  # noqa: BLE001
            status = "oom" if isinstance(e, torch.cuda.OutOfMemoryError) else "error"
            log(f"rank{C.rank} ERROR {s} {name}: {repr(e)[:400]}")
        row["status"] = status
        if out:
            out.row(**row)
        gc.collect()
        if C.cuda:
            torch.cuda.empty_cache()
        dist.barrier()
    for s in [s for s in args.profile_strategies.split(",") if s]:
        if not args.profile_dir:
            break
        name, cfg, seq, mb = models[0]
        if args.profile_model:
            cfg, seq, mb = parse_model(args.profile_model)
        try:
            profile_strategy(C, s, cfg, seq, mb, args)
        except Exception as e:  # noqa: BLE001
            log(f"rank{C.rank} ERROR profile {s}: {repr(e)[:400]}")
        gc.collect()
        if C.cuda:
            torch.cuda.empty_cache()
        dist.barrier()
    if out:
        out.close()
        log(f"done {out.n} rows in {time.time() - t0:.0f}s")
    dist.barrier()
    dist.destroy_process_group()


def parse_model(spec):
    """GPTConfig, seq, micro-batch from KEY=VALUE,... (see --profile-model)."""
    kw = dict(kv.split("=", 1) for kv in spec.split(",") if kv)
    seq, mb = int(kw.pop("seq", 1024)), int(kw.pop("mb", 1))
    ints = ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab")
    cfg = GPTConfig(**{k: int(v) if k in ints else v for k, v in kw.items()})
    return cfg, seq, mb


def profile_strategy(C, s, cfg0, seq, mb, args):
    """Profiler trace of 2 steps of strategy s on rank 0 (other ranks run the same steps unprofiled).

    Same recipe and shapes as the timed job (seq, micro-batch; pp with --profile-n-micro micro-batches);
    only the layer count may be reduced (--profile-layers, or the fallback when the trace is too large).
    Schedule: 1 untimed warm-up step, then wait=1, warmup=1, active=2 (ProfilerStep#2, #3 in the trace)."""
    import dataclasses

    from torch.profiler import ProfilerActivity, profile, schedule

    os.makedirs(args.profile_dir, exist_ok=True)
    layers = args.profile_layers or cfg0.layers
    while True:
        cfg = dataclasses.replace(cfg0, layers=layers, seq_len=seq)
        torch.manual_seed(0)
        if s in ("single", "ddp"):
            r = build_single_or_ddp(C, cfg, mb, seq, s == "ddp")
        elif s == "tp":
            r = build_tp(C, cfg, mb, seq)
        elif s == "pp":
            r = build_pp(C, cfg, mb, seq, args.profile_n_micro)
        elif s == "fsdp":
            r = build_fsdp(C, cfg, mb, seq)
        else:
            raise ValueError(f"unknown strategy {s}")
        step, impl = r[0], r[3]
        step()
        C.sync()
        dist.barrier()
        path = os.path.join(args.profile_dir, f"profile_{s}{args.profile_tag}_rank{C.rank}.json")
        if C.rank == 0 or args.profile_all_ranks:
            acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if C.cuda else [])
            t0 = time.time()
            with profile(activities=acts, record_shapes=True,
                         schedule=schedule(wait=1, warmup=1, active=2, repeat=1)) as prof:
                for _ in range(4):
                    step()
                    prof.step()
            t1 = time.time()
            prof.export_chrome_trace(path)
            with open(path, "rb") as f, gzip.open(path + ".gz", "wb", compresslevel=9) as g:
                g.write(f.read())
            os.remove(path)
            mb_gz = os.path.getsize(path + ".gz") / 1e6
            log(f"rank{C.rank} trace {s}: {path}.gz {mb_gz:.2f} MB, layers {layers}, seq {seq}, micro-batch {mb}"
                f"{f', n_micro {args.profile_n_micro}' if s == 'pp' else ''}, {impl}; 4 profiled steps "
                f"{t1 - t0:.2f}s wall, export {time.time() - t1:.1f}s")
            redo = C.rank == 0 and mb_gz > args.profile_max_mb and layers > args.profile_fallback_layers
        else:
            for _ in range(4):
                step()
            C.sync()
            redo = False
        flag = torch.tensor([1.0 if redo else 0.0], device=C.dev)
        dist.broadcast(flag, 0)
        del step, r
        gc.collect()
        if C.cuda:
            torch.cuda.empty_cache()
        dist.barrier()
        if flag.item() == 0:
            return
        layers = args.profile_fallback_layers
        log(f"rank{C.rank} {s}: trace too large, redoing with {layers} layers")


def profile_ddp(C, cfg0, outdir):
    """A small DDP step (4 layers, hidden 1024, seq 1024, micro-batch 4) profiled on every rank."""
    from torch.profiler import ProfilerActivity, profile, schedule

    os.makedirs(outdir, exist_ok=True)
    small = GPTConfig(layers=2 if C.smoke else 4, hidden=cfg0.hidden if C.smoke else 1024,
                      heads=cfg0.heads, vocab=cfg0.vocab)
    seq, mb = (64, 2) if C.smoke else (1024, 4)
    step, *_ = build_single_or_ddp(C, small, mb, seq, True)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if C.cuda else [])
    with profile(activities=acts, record_shapes=True,
                 schedule=schedule(wait=1, warmup=1, active=2, repeat=1)) as prof:
        for _ in range(4):
            step()
            prof.step()
    path = os.path.join(outdir, f"profile_ddp_rank{C.rank}.json")
    prof.export_chrome_trace(path)
    with open(path, "rb") as f, gzip.open(path + ".gz", "wb", compresslevel=9) as g:
        g.write(f.read())
    os.remove(path)
    log(f"rank{C.rank} trace {path}.gz {os.path.getsize(path + '.gz') / 1e6:.2f} MB")
    del step
    gc.collect()


if __name__ == "__main__":
    main()
