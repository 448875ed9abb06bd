"""Engine step profiles (issue 41): the fitter on a synthetic ``--steps`` collection, the profile's step model
by hand, ``serving.step_profile`` in a simulation and its errors, ``simcore calibrate`` of a steps folder, and
tools/bench_serving.py's steps plan (no torch)."""

from __future__ import annotations

import csv
import gzip
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcore.calibration import fit_served as F
from simcore.errors import SpecError, TraceError
from simcore.serving.sim import profile_step_model, simulate
from simcore.serving.spec import load_serving
from simcore.specs.loader import validate
from simcore.specs.serving import ServingSpec, StepProfile, load_step_profile, padded_context

ROOT = Path(__file__).resolve().parents[2]
REF = ROOT / "scenarios" / "served" / "served-ref-poisson-fixed.yaml"
DEC = (2e-3, 30e-6, 40e-9)  # c0, c_batch, c_kv of the synthetic engine
PRE = (8e-3, 4e-6, 2e-10)  # c0 (host), c_token, c_token2: host-bound up to ~1,900 tokens, GPU-bound above


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "simcore_tools_bench_serving_steps", ROOT / "tools" / "bench_serving.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


bench = _bench()


def t_dec(b: float, ctx: float) -> float:
    return DEC[0] + DEC[1] * b + DEC[2] * b * ctx


def t_pre(n: float) -> float:
    return max(PRE[0], PRE[1] * n + PRE[2] * n * n)


def write_steps(folder: Path, engine: str = "reference", buckets: list[int] | None = None) -> Path:
    """A steps collection in tools/bench_serving.py's layout whose engine steps cost exactly ``t_dec`` and
    ``t_pre`` (its plan's points, one decode step at context P + O/2 a token)."""
    folder.mkdir(parents=True, exist_ok=True)
    sv = {"max_batch": 64, "max_batch_tokens": 4096}
    name = "served-ref-poisson-fixed"
    man = {"gpu": "NVIDIA H100 80GB HBM3", "smoke": False,
           "scenarios": {name: {"model": {"name": "llama3.2-1b-shape"}, "precision": "bf16"}},
           "engines": {engine: {name: {"graphs": 0, "context_buckets": buckets}}}}  # fmt: skip
    (folder / "steps_manifest.json").write_text(json.dumps(man))
    with gzip.open(folder / f"steps_{engine}.csv.gz", "wt", newline="") as f:
        w = csv.DictWriter(f, fieldnames=bench.COLS)
        w.writeheader()
        for r in bench.plan_steps(engine, sv, 4096):
            n, p, o = r["requests"], r["prompt"], r["output"]
            first = t_pre(p)
            finish = first + sum(t_dec(n, padded_context(buckets, p + k)) for k in range(1, o))
            for i in range(n):
                w.writerow({"scenario": name, "run": r["run"], "offered_rate": "inf", "request": i, "arrival_s": 0.0,
                            "first_token_s": first, "finish_s": finish, "prompt_len": p, "output_len": o,
                            "generated": o})  # fmt: skip
    return folder / "steps_manifest.json"


def test_fit_recovers_the_engine(tmp_path: Path) -> None:
    (prof,) = F.fit(write_steps(tmp_path))
    assert prof.name == "served-reference-h100" and prof.device == "h100" and prof.context_buckets is None
    assert prof.model == "llama3.2-1b-shape"
    d, p = prof.decode, prof.prefill
    assert (d.c0, d.c_batch, d.c_kv) == pytest.approx(DEC, rel=1e-6)
    assert (p.c0, p.c_token, p.c_token2) == pytest.approx(PRE, rel=1e-6)
    assert d.rms_rel < 1e-9 and p.rms_rel < 1e-9
    assert len(p.points) == len(bench.STEP_PROMPTS)  # the repeats of a length are one point (their median)


def test_fit_reads_the_engines_context_buckets(tmp_path: Path) -> None:
    """The reference engine attends over context buckets: the fit's contexts are the padded ones."""
    (prof,) = F.fit(write_steps(tmp_path, buckets=[256, 1024, 4096]))
    assert prof.context_buckets == [256, 1024, 4096]
    assert (prof.decode.c0, prof.decode.c_batch, prof.decode.c_kv) == pytest.approx(DEC, rel=1e-6)
    assert {row[1] for row in prof.decode.points} == {256.0, 1024.0, 4096.0}


def test_nonneg_fit_keeps_coefficients_non_negative() -> None:
    x = np.column_stack([np.ones(4), np.arange(1.0, 5.0)])
    y = np.array([4.0, 3.0, 2.0, 1.0])  # falling: the slope would be negative, so only the constant stays
    c = F.nonneg_fit(x, y)
    assert c[1] == 0.0 and c[0] > 0.0


def test_a_collection_without_enough_points_is_an_error(tmp_path: Path) -> None:
    man = write_steps(tmp_path)
    with gzip.open(tmp_path / "steps_reference.csv.gz", "rt") as f:
        rows = f.read().splitlines()
    keep = [rows[0]] + [
        r for r in rows[1:] if ",prefill-p128-" in r or ",prefill-p512-" in r or ",decode-" in r
    ]
    with gzip.open(tmp_path / "steps_reference.csv.gz", "wt") as f:
        f.write("\n".join(keep) + "\n")
    with pytest.raises(TraceError, match="prefill length"):
        F.fit(man)
    with pytest.raises(TraceError, match="no steps_manifest.json"):
        F.fit(tmp_path / "nowhere")


def _profile() -> StepProfile:
    return StepProfile(name="served-x-h100", engine="x", gpu="H100", device="h100", model="llama3.2-1b-shape",
                       decode={"c0": DEC[0], "c_batch": DEC[1], "c_kv": DEC[2]},  # type: ignore[arg-type]
                       prefill={"c0": PRE[0], "c_token": PRE[1], "c_token2": PRE[2]})  # type: ignore[arg-type]  # fmt: skip


def _engine(**kw: object) -> ServingSpec:
    return validate(ServingSpec, {"rate": 1.0, **kw}, prefix="serving")


def test_profile_step_model_by_hand() -> None:
    sep = profile_step_model(_profile(), 64, 4096, 4096, _engine(mixed_step="separate"))
    assert sep.decode(8, 1024) == pytest.approx(2e-3 + 8 * 30e-6 + 8 * 1024 * 40e-9)
    assert sep.prefill(512) == pytest.approx(t_pre(512))  # host-bound: c0
    assert sep.prefill(4096) == pytest.approx(t_pre(4096))  # GPU-bound: c_token n + c_token2 n^2
    # 8 decodes at 1024 plus a 512-token prompt: a separate pass is the whole prefill, then the decode step
    mixed = sep.step_time(8, 1024.0, 512, sep.chunk_attention(0.0, 512))
    assert mixed == pytest.approx(sep.decode(8, 1024) + t_pre(512))
    # two prompts of different lengths are two passes, each issued by the host: 2 c0 (host-bound)
    two = sep.step_time(8, 1024.0, 1024, 2 * sep.chunk_attention(0.0, 512), passes=2)
    assert two == pytest.approx(sep.decode(8, 1024) + 2 * PRE[0])
    # a batched pass of 8 prompts of 512 is priced on its tokens, not as one 4,096-token sequence: the GEMMs see
    # 4,096 tokens, the attention 8 x 512^2
    eight = sep.step_time(0, 0.0, 4096, 8 * sep.chunk_attention(0.0, 512))
    assert eight == pytest.approx(PRE[1] * 4096 + PRE[2] * (8 * 512**2 - 7), rel=1e-9)  # A(0) := A(1)
    assert eight < sep.prefill(4096)
    # one pass: the chunk's tokens, at least the host's c0
    fused = profile_step_model(_profile(), 64, 4096, 4096)
    assert fused.step_time(8, 1024.0, 512, fused.chunk_attention(0.0, 512)) == pytest.approx(
        max(fused.decode(8, 1024) + PRE[1] * 512 + PRE[2] * (512**2 - 1), PRE[0])
    )
    assert fused.step_time(64, 4096.0, 2048, fused.chunk_attention(0.0, 2048)) == pytest.approx(
        fused.decode(64, 4096) + PRE[1] * 2048 + PRE[2] * (2048**2 - 1)
    )


def test_fit_prefill_takes_the_roofline_ratio_where_the_points_cannot_separate_the_terms() -> None:
    """Points that identify both GPU terms keep them free (the synthetic engine is recovered, the prior unused);
    points of a linear GPU term alone would zero the attention: then c_token2 / c_token is the prior."""
    pts = [(float(n), t_pre(n)) for n in (128, 512, 1024, 2048, 3968)]
    fit = F.fit_prefill(pts, rho=1e-3)
    assert (fit.c0, fit.c_token, fit.c_token2) == pytest.approx(PRE, rel=1e-9)
    assert fit.rms_rel < 1e-9
    linear = [(n, max(PRE[0], 5e-6 * n)) for n, _ in pts]
    assert F.fit_prefill(linear).c_token2 == 0.0
    prior = F.fit_prefill(linear, rho=4e-5)
    assert prior.c_token2 == pytest.approx(4e-5 * prior.c_token) and prior.c_token > 0
    assert prior.c0 == pytest.approx(PRE[0])
    ratio = F.attention_ratio(load_serving(REF)[0].model.model_dump(), "bf16", "h100")
    # the roofline's: a token's attention ~4 % of its GEMMs per 1,000 tokens of context
    assert ratio is not None and 1e-6 < ratio < 1e-3
    assert F.attention_ratio({"name": "partial"}, "bf16", "h100") is None


def _ttft_rows(ttft: dict[str, float]) -> list[dict[str, str]]:
    return [{"run": r, "arrival_s": "0", "first_token_s": str(t)} for r, t in ttft.items()]


def test_passes_mark_the_shapes_an_engine_process_had_not_run() -> None:
    runs = ["decode-b1-p2048", "decode-b2-p2048", "prefill-p2048-0", "prefill-p128-0", "prefill-p128-1",
            "decode-b1-p128", "decode-b2-p128"]  # fmt: skip
    assert F.passes(runs) == {"decode-b1-p2048": (1, 2048, True), "decode-b2-p2048": (2, 2048, True),
                              "prefill-p2048-0": (1, 2048, False), "prefill-p128-0": (1, 128, True),
                              "prefill-p128-1": (1, 128, False), "decode-b1-p128": (1, 128, False),
                              "decode-b2-p128": (2, 128, True)}  # fmt: skip


def test_shape_setup_from_every_new_shape() -> None:
    """Every pass of a shape new to the process pays the setup: the first repeats of the prefill lengths (not
    2048, which a decode run of one request prefilled first) and the decode runs' passes of N prompts; the
    median of what they add over the fitted pass (one outlier does not move it); left out the collection's first
    run (the engine's cold start) and passes beyond the longest prefill point (outside the fit)."""
    pre = F.PrefillFit(c0=0.01, c_token=0.0, c_token2=0.0, points=[[128, 0.01, 0.01], [2048, 0.01, 0.01]])
    ttft = {"decode-b1-p2048": 0.7, "decode-b2-p128": 0.06, "decode-b4-p128": 0.055, "decode-b64-p128": 0.01}
    ttft |= {f"prefill-p{p}-{k}": 0.01 + (0.05 if k == 0 and p != 2048 else 0.0) for p in (128, 512, 2048)
             for k in range(3)}  # fmt: skip
    ttft["prefill-p512-0"] = 0.2  # an outlier
    runs = list(ttft)
    assert F.shape_setup(_ttft_rows(ttft), runs, pre, "x") == pytest.approx(0.05)
    # without the decode runs: p128 is the first run (left out), p512 the outlier and p2048 now new at no extra
    pre_only = [r for r in runs if r.startswith("prefill")]
    assert F.shape_setup(_ttft_rows(ttft), pre_only, pre, "x") == pytest.approx((0.19 + 0.0) / 2)
    # a shape run before pays nothing
    seen = ["decode-b1-p128", "decode-b1-p512", "decode-b1-p2048"] + pre_only
    assert F.shape_setup(_ttft_rows({r: ttft[r] for r in pre_only}), seen, pre, "x") == 0.0


def test_a_new_shapes_first_repeat_is_left_out_of_the_prefill_point() -> None:
    rows = _ttft_rows({"prefill-p128-0": 0.06, "prefill-p128-1": 0.01, "prefill-p128-2": 0.012, "prefill-p512-0": 0.3})
    _, pre = F.points(rows, "x", cold=frozenset({"prefill-p128-0", "prefill-p512-0"}))
    assert pre == [(128.0, pytest.approx(0.011)), (512.0, 0.3)]  # a lone cold repeat stays: nothing else to use
    _, pre = F.points(rows, "x")
    assert pre[0] == (128.0, 0.012)


def test_determined_fit_drops_a_term_the_points_do_not_determine() -> None:
    """Decode points whose KV tokens barely vary (a host-bound engine at its token budget): a KV term fitted to
    their scatter would be carried to KV counts they never reached; it is dropped, the batch term kept."""
    rng = np.random.default_rng(0)
    b = np.array([1, 2, 4, 8, 16, 32, 64, 1, 2, 4, 8, 16], dtype=float)
    kv = np.array([2064, 4128, 4160, 4224, 4352, 4608, 5120, 144, 288, 576, 1152, 2304], dtype=float)
    y = (0.06 + 4e-4 * b) * (1 + 0.08 * rng.standard_normal(b.size))
    x = np.column_stack([np.ones_like(b), b, kv])
    c = F.determined_fit(x, y)
    assert c[2] == 0.0 and c[1] > 0 and c[0] == pytest.approx(0.06, rel=0.15)
    exact = 0.002 + 3e-5 * b + 4e-8 * kv  # a term that moves the points well beyond their scatter stays
    assert F.determined_fit(x, exact) == pytest.approx([0.002, 3e-5, 4e-8], rel=1e-6)


def test_context_buckets_pad_the_decode() -> None:
    assert padded_context([128, 256, 512], 100) == 128 and padded_context([128, 256], 128) == 128
    assert padded_context([128, 256], 2000) == 2000 and padded_context(None, 300) == 300
    m = profile_step_model(_profile(), 64, 4096, 4096, _engine(decode_context_buckets=[128, 256, 512, 1024]))
    assert m.decode(4, 384) == pytest.approx(t_dec(4, 512))  # 384 is on the grid; attends over 512


@settings(max_examples=30, deadline=None)
@given(st.floats(1, 64), st.floats(1, 64), st.floats(16, 4000), st.floats(16, 4000))
def test_decode_time_grows_with_batch_and_context(b1: float, b2: float, c1: float, c2: float) -> None:
    buckets = [128, 256, 512, 1024, 2048, 4096]
    prof = _profile()
    if b1 <= b2 and c1 <= c2:
        assert prof.decode_time(b1, padded_context(buckets, c1)) <= prof.decode_time(
            b2, padded_context(buckets, c2)
        )


def _spec(spec: ServingSpec, **kw: object) -> ServingSpec:
    return validate(ServingSpec, {**spec.model_dump(exclude_unset=True), **kw}, prefix="serving")


def test_serving_with_a_step_profile(tmp_path: Path) -> None:
    """One request alone: its TTFT is the profile's prefill, its TPOT the decode steps at batch 1."""
    (prof,) = F.fit(write_steps(tmp_path))
    path = F.write([prof], tmp_path / "out")[0]
    back = load_step_profile(str(path))  # the YAML keeps the coefficients exactly (the points to 4 digits)
    assert (back.decode.c_kv, back.prefill.c_token2) == (prof.decode.c_kv, prof.prefill.c_token2)
    sc, spec = load_serving(REF)
    run = simulate(sc, _spec(spec, requests=1, step_profile=str(path)))
    (ttft,) = run.log.ttft
    assert ttft == pytest.approx(t_pre(512), rel=1e-6)
    # its decode steps attend over 513 ... 639 tokens, padded to the scenario's bucket of 1024
    assert spec.decode_context_buckets is not None and 1024 in spec.decode_context_buckets
    assert run.log.tpot[0] == pytest.approx(t_dec(1, 1024), rel=1e-6)
    assert any("step profile served-reference-h100" in n for n in run.result.notes)


def test_a_step_profile_of_another_model_or_gpu_is_an_error(tmp_path: Path) -> None:
    (prof,) = F.fit(write_steps(tmp_path))
    path = F.write([prof.model_copy(update={"model": "llama3-8b"})], tmp_path / "m")[0]
    sc, spec = load_serving(REF)
    with pytest.raises(SpecError, match="measured on the model 'llama3-8b'"):
        simulate(sc, _spec(spec, requests=1, step_profile=str(path)))
    path = F.write([prof], tmp_path / "ok")[0]
    sc2, spec2 = load_serving(REF, ["cluster.system=hgx-h200"])
    with pytest.raises(SpecError, match="cluster's GPU is h200"):
        simulate(sc2, _spec(spec2, requests=1, step_profile=str(path)))
    with pytest.raises(SpecError, match="unknown step profile 'nope'"):
        simulate(sc, _spec(spec, requests=1, step_profile="nope"))


def test_cli_calibrate_writes_the_profile(tmp_path: Path) -> None:
    write_steps(tmp_path / "steps")
    out = subprocess.run([sys.executable, "-m", "simcore.cli", "calibrate", str(tmp_path / "steps"), "-o",
                          str(tmp_path / "cal")], capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "served-reference-h100: decode t = 2 ms + 30 us x batch + 40 ns x KV tokens" in out.stdout
    assert load_step_profile(str(tmp_path / "cal" / "served-reference-h100.yaml")).decode.c0 == pytest.approx(
        2e-3
    )
    bad = subprocess.run([sys.executable, "-m", "simcore.cli", "calibrate", str(tmp_path / "steps"), "-o",
                          str(tmp_path / "x.yaml")], capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    assert bad.returncode != 0 and len(bad.stderr.strip().splitlines()) == 1 and "folder" in bad.stderr


def test_steps_plan() -> None:
    sv = {"max_batch": 64, "max_batch_tokens": 4096}
    hf = bench.plan_steps("huggingface", sv, 4096)
    ref = bench.plan_steps("reference", sv, 4096)
    for runs in (hf, ref):
        names = [r["run"] for r in runs]
        assert len(names) == len(set(names))
        assert {r["requests"] for r in runs if r["run"].startswith("decode")} == set(bench.STEP_BATCHES)
        pre = [r for r in runs if r["run"].startswith("prefill")]
        assert len(pre) == bench.STEP_REPEATS * len(bench.STEP_PROMPTS) and all(
            r["requests"] == 1 for r in pre
        )
    # Hugging Face keeps its token budget: every decode point's prompts are admitted in one step
    assert all(r["requests"] * r["prompt"] <= 4096 for r in hf if r["run"].startswith("decode"))
    assert {r["prompt"] for r in ref if r["requests"] == 64} == {2048, 512, 128}
    assert bench.MIXED_STEP == {"reference": "separate", "huggingface": "fused"}


def test_resume_runs() -> None:
    prior = {"engines": {"huggingface": {"a": {"capacity_rps": 3.0, "rates": [1.0, 2.0, 3.5]}}},
             "runs": [{"engine": "huggingface", "scenario": "a", "run": "probe"},
                      {"engine": "huggingface", "scenario": "a", "run": "r1"},
                      {"engine": "reference", "scenario": "a", "run": "r0"}]}  # fmt: skip
    assert bench.resume_runs(prior, "huggingface", "a") == (3.0, [1.0, 2.0, 3.5], {"probe", "r1"})
    assert bench.resume_runs(prior, "huggingface", "b") == (None, [], set())


def test_roofline_engine_properties() -> None:
    """``prefill_framework``, ``decode_context_buckets`` and ``mixed_step`` in the roofline step model."""
    from simcore.serving.sim import build_step_model
    from simcore.specs.registry import default_registry
    from simcore.specs.resolve import resolve_cluster

    sc, spec = load_serving(REF)
    cluster = resolve_cluster(sc.cluster, default_registry())
    plain = _spec(spec, prefill_framework=None, decode_context_buckets=None, mixed_step="fused")
    base = build_step_model(sc, cluster, 1, 64, 700, 4096, plain)
    eager = build_step_model(sc, cluster, 1, 64, 700, 4096, _spec(plain, prefill_framework="eager"))
    assert base.host_prefill == 0.0 and eager.host_prefill > base.prefill(
        512
    )  # graphs: no host; eager: per pass
    assert eager.prefill(512) >= eager.host_prefill and eager.dec == base.dec  # decode untouched
    padded = build_step_model(sc, cluster, 1, 64, 700, 4096, _spec(plain, decode_context_buckets=[256, 1024]))
    wide = build_step_model(sc, cluster, 1, 64, 1100, 4096, plain)  # 1024 on its grid
    for b in (1, 8, 64):
        assert padded.decode(b, 600) == pytest.approx(wide.decode(b, 1024), rel=1e-9)  # 700 -> 1024 sampled
        assert padded.decode(b, 200) == pytest.approx(wide.decode(b, 256), rel=1e-9)
    sep = build_step_model(
        sc, cluster, 1, 64, 700, 4096, _spec(plain, prefill_framework="eager", mixed_step="separate")
    )
    a = sep.chunk_attention(0.0, 512)
    assert sep.step_time(8, 600.0, 512, a) == pytest.approx(sep.prefill(512) + sep.decode(8, 600))
    assert sep.step_time(8, 600.0, 1024, 2 * a, passes=2) > sep.step_time(8, 600.0, 1024, 2 * a, passes=1)


def test_steps_dry_run_prints_the_plan_without_torch(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "bench_serving.py"), "--out", str(tmp_path), "--dry-run",
                          "--steps", "--budget-s", "150"], capture_output=True, text=True, cwd=ROOT, check=True).stdout  # fmt: skip
    assert (
        "steps plan:" in out
        and "budget 150 s" in out
        and "decode-b64-p2048" in out
        and "prefill-p3968-2" in out
    )
    assert not list(tmp_path.iterdir())


def _ref_with(tmp_path: Path, **prefill: float) -> tuple[object, ServingSpec]:
    """The reference served scenario priced by the synthetic profile (``prefill``'s fields changed)."""
    prof = _profile()
    prof = prof.model_copy(update={"prefill": prof.prefill.model_copy(update=prefill)})
    path = F.write([prof], tmp_path)[0]
    sc, spec = load_serving(REF)
    return sc, _spec(spec, step_profile=str(path))


def test_separate_passes_take_whole_prompts_and_pay_a_new_shape_once(tmp_path: Path) -> None:
    """mixed_step: separate (the reference engine): two 3,000-token prompts at once do not fit the 4,096-token
    budget together; the second is not chunked but waits for the next step, whose pass of the same shape pays no
    setup; an engine that had run the shape before pays none at all."""
    from simcore.validation.served import simulate_requests

    sc, spec = _ref_with(tmp_path, c_shape=0.05)
    zeros, p, o = np.zeros(2), np.array([3000, 3000]), np.array([2, 2])
    shapes: set[tuple[int, int]] = set()
    run = simulate_requests(sc, spec, zeros, p, o, shapes)  # type: ignore[arg-type]
    t1 = t_pre(3000) + 0.05
    # rel=1e-4: the tables interpolate A(n) between their grid points
    assert run.first[0] == pytest.approx(t1, rel=1e-4)
    assert run.first[1] == pytest.approx(t1 + t_pre(3000) + t_dec(1, 4096), rel=1e-4)
    assert shapes == {(1, 3000)}
    again = simulate_requests(sc, spec, zeros, p, o, shapes)  # type: ignore[arg-type]
    assert again.first[0] == pytest.approx(t_pre(3000), rel=1e-4)


def test_context_buckets_price_the_longest_context(tmp_path: Path) -> None:
    """An engine that pads decode attention to a bucket pads every sequence to the longest one's: prompts of 100
    and 1,500 tokens decode together at the 2,048 bucket (their mean, ~800, would be the 1,024 one)."""
    from simcore.validation.served import simulate_requests

    sc, spec = _ref_with(tmp_path)
    run = simulate_requests(sc, spec, np.zeros(2), np.array([100, 1500]), np.array([3, 3]))  # type: ignore[arg-type]
    assert run.first[0] == pytest.approx(2 * PRE[0], rel=1e-6)  # two passes (two lengths), host-bound
    tpot = (run.finish - run.first) / 2
    assert tpot == pytest.approx([t_dec(2, 2048)] * 2, rel=1e-6)


def test_validation_runs_an_engines_measured_runs_in_one_process(tmp_path: Path) -> None:
    """validation served simulates the measured runs in the manifest's order: a run starts from the shapes the
    runs before it (and the warm-up, its process's first 4 requests at once) met; a scenario of other engine
    settings is a new process, warmed up again."""
    from simcore.validation.served import _engine_order

    sc, spec = _ref_with(tmp_path, c_shape=0.05)
    rows = [{"arrival_s": str(t), "first_token_s": "nan", "finish_s": "nan", "prompt_len": str(p), "output_len": "2"}
            for t, p in ((0, 300), (0, 300), (0, 300), (0, 300), (1.0, 500))]  # fmt: skip
    runs = {("s", "a"): rows, ("s", "b"): rows, ("t", "c"): rows}
    man = {"scenarios": {"s": {"model": {"name": "m"}, "serving": {"max_batch": 64}},
                         "t": {"model": {"name": "m"}, "serving": {"max_batch": 32}}},
           "runs": [{"scenario": "s", "run": "a", "engine": "reference"},
                    {"scenario": "s", "run": "b", "engine": "reference"},
                    {"scenario": "t", "run": "c", "engine": "reference"}]}  # fmt: skip
    out = _engine_order(man, runs, {"s": (sc, spec), "t": (sc, spec)})  # type: ignore[dict-item]
    ttft = {k: float(v.first[-1] - v.arrival[-1]) for k, v in out.items()}  # the 500-token prompt's
    # the four 300-token prompts: one host-bound pass of the warm-up's shape (4, 300), no setup
    assert out[("s", "a")].first[0] == pytest.approx(PRE[0], rel=1e-6)
    assert ttft[("s", "b")] == pytest.approx(ttft[("s", "a")] - 0.05, rel=1e-6)  # (1, 500) met in run a
    assert ttft[("t", "c")] == pytest.approx(ttft[("s", "a")], rel=1e-6)  # a new process
