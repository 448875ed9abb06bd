"""``simcore.calibration.fit_host``: per-layer host slopes, profiler ratios, the lower envelope."""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import pytest

from simcore.calibration.fit_host import fit_host, host_files_beside, read_size_runs
from simcore.errors import TraceError

REPO = Path(__file__).resolve().parents[2]


def _size_csv(path: Path, rows: list[tuple[int, str, str, int, int, int, float]]) -> Path:
    cols = [
        "run",
        "rep",
        "mode",
        "arch",
        "hidden",
        "layers",
        "profiled",
        "pinned",
        "calls",
        "host_s",
        "event_s",
    ]
    with gzip.open(path, "wt", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for run, mode, arch, hidden, layers, prof, t in rows:
            for rep in range(3):
                w.writerow([run, rep, mode, arch, hidden, layers, prof, "", 40, t, t])
    return path


def test_size_runs_hand_computed(tmp_path: Path) -> None:
    rows = []
    # run 1: plain slope (1.3 - 0.4) / 3 = 0.3 ms, profiled (2.0 - 0.5) / 3 = 0.5 ms -> ratio 5/3
    # run 2: plain slope 0.4 ms, profiled 0.8 ms -> ratio 2; median ratio 11/6, median slope 0.35 ms
    for run, (p1, p4, q1, q4) in {
        1: (0.4e-3, 1.3e-3, 0.5e-3, 2.0e-3),
        2: (0.5e-3, 1.7e-3, 0.6e-3, 3.0e-3),
    }.items():
        rows += [(run, "decode", "llama", 64, 1, 0, p1), (run, "decode", "llama", 64, 4, 0, p4)]
        rows += [(run, "decode", "llama", 64, 1, 1, q1), (run, "decode", "llama", 64, 4, 1, q4)]
    r = read_size_runs(_size_csv(tmp_path / "host_size.csv.gz", rows))
    assert r is not None
    assert r["profiler_ratio_decode_swiglu"] == pytest.approx((5 / 3 + 2) / 2)
    assert r["per_layer_decode_llama_rms_swiglu_gqa"] == pytest.approx(0.35e-3)


def test_other_files_are_not_size_runs() -> None:
    assert read_size_runs(REPO / "traces" / "h200" / "host.csv.gz") is None


def test_shipped_host_section() -> None:
    from simcore.calibration.fit_host import _csv_rows, decode_host_costs, step_host_costs

    h = fit_host(host_files_beside(REPO / "traces" / "h200" / "ops.csv.gz"))
    # every step file together (the probe shares pool the plain and Hugging Face runs)
    step_files = [
        REPO / "traces/h200" / f
        for f in ("host_steps.csv.gz", "host_steps_hf.csv.gz", "host_steps_hf_r102.csv.gz", "host_steps_hf_r104.csv.gz")
    ]
    step_files.append(REPO / "traces/h200x2/host_steps_dist.csv.gz")
    steps = step_host_costs([r for f in step_files for r in _csv_rows(f)], "steps")
    # the own models' decode files together (round 25's passes and round 42's, with its prefills)
    decode = decode_host_costs(
        [
            r
            for f in ("host_decode.csv.gz", "host_decode_r42.csv.gz")
            for r in _csv_rows(REPO / "traces/h200" / f)
        ],
        "decode",
    )
    for act in ("gelu", "swiglu"):
        r = h[f"profiler_ratio_decode_{act}"]
        assert 1.0 < r < 3.0
        # whole profiled steps in CPU-speed units (round 25) supersede the width-64 x profiler-ratio chain
        assert h[f"profiled_infer_decode_{act}"] == decode[f"profiled_infer_decode_{act}"]
        assert h[f"profiled_train_fwd_{act}"] == steps[f"profiled_train_fwd_{act}"]
        assert h[f"profiled_train_bwd_{act}"] == steps[f"profiled_train_bwd_{act}"]
        # a backward layer issues ~2.2x a forward layer's ops (round 23: 332 / 152 probe units)
        assert 1.8 < h[f"profiled_train_bwd_{act}"] / h[f"profiled_train_fwd_{act}"] < 2.8
        # the unprofiled per-step host is the profiled one over the profiler's per-layer ratio
        rt = h[f"profiler_ratio_train_{act}"]
        assert h[f"step_fwd_{act}"] == pytest.approx(h[f"profiled_step_fwd_{act}"] / rt)
    # the reference CPU speeds the entries stand for: a few microseconds per aten::t
    for k in ("probe_main", "probe_backward", "probe_infer"):
        assert 1e-6 < h[k] < 2e-5
    # profiled wrapper ratios from round 28 (FSDP2 about twice the plain layer, tensor parallel less)
    assert 1.5 < h["profiled_fsdp_ratio_bwd"] < 2.5
    assert 1.0 < h["profiled_tp_ratio_fwd"] < h["profiled_fsdp_ratio_fwd"]
    # lower envelope: never above any single round's per-layer decode slope
    assert (
        h["infer_decode_swiglu"]
        <= read_size_runs(REPO / "traces" / "h200" / "host_size.csv.gz")[  # type: ignore[index]
            "per_layer_decode_llama_rms_swiglu_gqa"
        ]
    )


def test_size_runs_accept_true_false_flags(tmp_path: Path) -> None:
    rows = []
    for prof, (t1, t4) in {0: (0.4e-3, 1.3e-3), 1: (0.5e-3, 2.0e-3)}.items():
        rows += [(1, "decode", "gpt", 64, 1, prof, t1), (1, "decode", "gpt", 64, 4, prof, t4)]
    path = _size_csv(tmp_path / "s.csv.gz", rows)
    with gzip.open(path, "rt") as f:
        text = f.read().replace(",0,,40,", ",False,,40,").replace(",1,,40,", ",True,,40,")
    with gzip.open(path, "wt") as f:
        f.write(text)
    r = read_size_runs(path)
    assert r is not None
    assert r["profiler_ratio_decode_gelu"] == pytest.approx(5 / 3)
    assert r["per_layer_decode_gpt_ln_gelu"] == pytest.approx(0.3e-3)


def test_compiled_ratios_hand_computed(tmp_path: Path) -> None:
    """Slopes over layers per framework; the ratio is compiled / eager, per phase and profiler flag."""
    from simcore.calibration.fit_host import compiled_ratios

    per_layer = {("eager", 0): (400e-6, 800e-6), ("compiled", 0): (200e-6, 400e-6)}
    per_layer |= {("eager", 1): (600e-6, 1200e-6), ("compiled", 1): (450e-6, 600e-6)}
    rows = []
    for (fw, prof), (f, b) in per_layer.items():
        for layers in (2, 8):
            for p in range(3):
                noise = 1e-6 * p  # medians pick the middle pass
                rows.append(
                    {
                        "arch": "gpt",
                        "framework": fw,
                        "profiled": str(prof),
                        "layers": str(layers),
                        "pass": str(p),
                        "fwd_host_s": str(300e-6 + f * layers + noise),
                        "bwd_host_s": str(500e-6 + b * layers + noise),
                    }
                )
    r = compiled_ratios(rows, tmp_path / "x.csv")
    assert r["compiled_ratio_fwd_gelu"] == pytest.approx(0.5)
    assert r["compiled_ratio_bwd_gelu"] == pytest.approx(0.5)
    assert r["profiled_compiled_ratio_fwd_gelu"] == pytest.approx(0.75)
    assert r["profiled_compiled_ratio_bwd_gelu"] == pytest.approx(0.5)
    assert "compiled_ratio_fwd_swiglu" not in r  # no llama rows


def test_compiled_ratios_prefer_real_widths(tmp_path: Path) -> None:
    """Rows of several widths: the ratio is the mean over the widths above the GPU-trivial 64."""
    from simcore.calibration.fit_host import compiled_ratios

    # compiled / eager per width: 64 -> 0.5, 768 -> 0.8, 1536 -> 1.0 (every phase, profiled or not)
    ratio = {64: 0.5, 768: 0.8, 1536: 1.0}
    rows = []
    for width, r in ratio.items():
        for fw, slope in (("eager", 1e-3), ("compiled", r * 1e-3)):
            for prof in (0, 1):
                for layers in (2, 8):
                    row = {"arch": "llama", "framework": fw, "profiled": str(prof), "layers": str(layers)}
                    row |= {"pass": "0", "fwd_host_s": str(2e-4 + slope * layers)}
                    row |= {"bwd_host_s": str(3e-4 + slope * layers), "hidden": str(width)}
                    rows.append(row)
    r = compiled_ratios(rows, tmp_path / "x.csv")
    for key in ("compiled_ratio_fwd_swiglu", "profiled_compiled_ratio_bwd_swiglu"):
        assert r[key] == pytest.approx(0.9)
    # only the GPU-trivial width measured: that one
    r64 = compiled_ratios([x for x in rows if x["hidden"] == "64"], tmp_path / "x.csv")
    assert r64["compiled_ratio_bwd_swiglu"] == pytest.approx(0.5)


def test_shipped_compiled_ratios() -> None:
    h = fit_host(host_files_beside(REPO / "traces" / "h200" / "ops.csv.gz"))
    for act in ("gelu", "swiglu"):
        for phase in ("fwd", "bwd"):
            assert 0.3 < h[f"compiled_ratio_{phase}_{act}"] < 1.0  # compiled issues less host work


def _step_rows(
    units: dict[str, float], probes: list[tuple[float, float]], act: str, layers: int
) -> list[dict[str, str]]:
    """Step-host rows whose segments are ``units`` probe units at each (main, backward) probe."""
    rows = []
    for m, b in probes:
        rows.append(
            {
                "trace": "t",
                "step": "s",
                "act": act,
                "layers": str(layers),
                "synchronized": "False",
                "step_s": "0.1",
                "gpu_step_s": "0.1",
                "pre_s": str(units["pre"] * m),
                "fwd_layer_s": str(units["fl"] * m),
                "head_s": str(units["head"] * m),
                "bhead_s": str(units["bhead"] * b),
                "bwd_layer_s": str(units["bl"] * b),
                "tail_s": str(units["tail"] * b),
                "optimizer_s": str((40 + 2 * (6 * layers + 3)) * m),
                "post_s": str(units["post"] * m),
                "probe_main_s": str(m),
                "probe_bwd_s": str(b),
            }
        )
    return rows


def test_step_host_costs_hand_computed() -> None:
    """Segments over their thread's probe give units; units x the median probe give seconds; the
    optimizer is a line over the tensor count (here 40 + 2 per tensor units)."""
    from simcore.calibration.fit_host import step_host_costs

    u = {"pre": 30, "fl": 150, "head": 120, "bhead": 140, "bl": 350, "tail": 90, "post": 20}
    rows = _step_rows(u, [(4e-6, 3e-6), (6e-6, 5e-6), (8e-6, 7e-6)], "gelu", 2)
    rows += _step_rows(u, [(5e-6, 5e-6)], "gelu", 8)
    out = step_host_costs(rows, "x")
    ref_m, ref_b = 5.5e-6, 5e-6  # medians of (4, 6, 8, 5) and (3, 5, 7, 5) us
    assert out["probe_main"] == pytest.approx(ref_m)
    assert out["probe_backward"] == pytest.approx(ref_b)
    assert out["profiled_train_fwd_gelu"] == pytest.approx(150 * ref_m)
    assert out["profiled_train_bwd_gelu"] == pytest.approx(350 * ref_b)
    assert out["profiled_step_fwd_gelu"] == pytest.approx(150 * ref_m)  # pre + head
    assert out["profiled_step_bwd_gelu"] == pytest.approx(230 * ref_b)  # bhead + tail
    assert out["profiled_step_end"] == pytest.approx(20 * ref_m)
    assert out["profiled_adamw_fused_per_tensor"] == pytest.approx(2 * ref_m)
    assert out["profiled_adamw_fused_fixed"] == pytest.approx(40 * ref_m)
    # a synchronized step's post segment holds the wait for the GPU: left out of the fit
    sync = _step_rows({**u, "post": 5000}, [(5e-6, 5e-6)], "gelu", 2)
    sync[0]["synchronized"] = "True"
    assert step_host_costs(rows + sync, "x")["profiled_step_end"] == pytest.approx(20 * 5.5e-6, rel=0.1)
    with pytest.raises(TraceError):
        step_host_costs([{**rows[0], "bwd_layer_s": "x"}], "bad.csv")
    # a distributed wrapper's rows: their units beyond the single GPU's, in seconds at the reference
    ddp = _step_rows({**u, "head": 170, "tail": 390, "post": 25}, [(4e-6, 3e-6), (8e-6, 6e-6)], "gelu", 4)
    for r in ddp:
        r["strategy"] = "ddp"
    with_ddp = step_host_costs(rows + ddp, "x")
    assert with_ddp["profiled_ddp_step_fwd"] == pytest.approx(50 * ref_m)  # 30 + 170 - 150
    assert with_ddp["profiled_ddp_step_bwd"] == pytest.approx(300 * ref_b)  # 140 + 390 - 230
    assert with_ddp["profiled_ddp_step_end"] == pytest.approx(5 * ref_m)
    # the single-GPU entries and the reference probes do not move
    assert with_ddp["probe_main"] == out["probe_main"]
    assert with_ddp["profiled_train_bwd_gelu"] == out["profiled_train_bwd_gelu"]
    # with the same run's plain replicas (single_x2) as baseline: extras over them, and per-layer ratios
    rep = _step_rows({**u, "fl": 140, "bl": 300}, [(5e-6, 5e-6)], "gelu", 4)
    tp = _step_rows({**u, "fl": 182, "bl": 360, "head": 150}, [(6e-6, 4e-6)], "gelu", 4)
    for r in rep:
        r["strategy"] = "single_x2"
    for r in tp:
        r["strategy"] = "tp"
    with_tp = step_host_costs(rows + rep + tp, "x")
    assert with_tp["profiled_tp_ratio_fwd"] == pytest.approx(182 / 140)
    assert with_tp["profiled_tp_ratio_bwd"] == pytest.approx(360 / 300)
    assert with_tp["profiled_tp_step_fwd"] == pytest.approx(30 * ref_m)  # 30 + 150 - (30 + 120)
    assert with_tp["profiled_tp_step_bwd"] == pytest.approx(0.0)


def test_decode_host_costs_hand_computed() -> None:
    from simcore.calibration.fit_host import decode_host_costs

    rows = [
        {
            "trace": "t",
            "step": "s",
            "act": "swiglu",
            "layers": str(L),
            "probe_main_s": str(p),
            "layer_s": str(150 * p),
            "pass_s": str((150 * L + 40) * p),
        }
        for L, p in ((4, 3e-6), (16, 4e-6), (16, 5e-6))
    ]
    out = decode_host_costs(rows, "x")
    assert out["probe_infer"] == pytest.approx(4e-6)
    assert out["profiled_infer_decode_swiglu"] == pytest.approx(150 * 4e-6)
    assert out["profiled_infer_decode_fixed_swiglu"] == pytest.approx(40 * 4e-6)


def test_graph_loop_costs_hand_computed() -> None:
    """The exposed cost of a synchronize is wall - R x back-to-back replay time; a line over the kernels
    per replay; the gap is (back-to-back replay - kernels' time) per kernel, or the traces' own."""
    from simcore.calibration.fit_host import graph_loop_costs

    models = {"a": (60, 200e-6, 0.5e-6), "b": (120, 400e-6, 0.5e-6), "c": (240, 800e-6, 0.5e-6)}
    replays = [
        {"trace": f"graph_{m}.json.gz", "kernels_per_replay": str(k), "busy_per_replay_s": str(b),
         "gap_per_kernel_s": str(g)}
        for m, (k, b, g) in models.items()
    ]  # fmt: skip
    sync = []
    for m, (k, b, _) in models.items():
        bb = b + 0.4e-6 * k  # 0.4 us idle per kernel back to back
        for prof, (fixed, per) in ((0, (1e-6, 0.5e-6)), (1, (5e-6, 1.8e-6))):
            for R in (1, 2, 8):
                sync.append({"model": m, "profiled": str(prof), "replays_per_sync": str(R),
                             "wall_per_iter_s": str(R * bb + fixed + per * k), "bb_per_replay_s": str(bb)})  # fmt: skip
    out = graph_loop_costs(sync, replays, "x")
    assert out["graph_sync_fixed"] == pytest.approx(1e-6)
    assert out["graph_sync_per_kernel"] == pytest.approx(0.5e-6)
    assert out["profiled_graph_sync_fixed"] == pytest.approx(5e-6)
    assert out["profiled_graph_sync_per_kernel"] == pytest.approx(1.8e-6)
    assert out["graph_kernel_gap"] == pytest.approx(0.4e-6)
    assert out["profiled_graph_kernel_gap"] == pytest.approx(0.5e-6)
    with pytest.raises(TraceError):
        graph_loop_costs(sync[:3], replays[:1], "x")  # one model cannot give a line
    # rows that read each profiled step's exposed ends (2 waits per step here) and the idle between
    # replays: the profiled line is fitted to the traces' steps
    traced = [
        {**r, "step_exposed_s": str(2 * (50e-6 + 2.8e-6 * k)), "syncs_per_step": "2", "replay_gap_s": str(g)}
        for r, k, g in zip(replays, (60, 120, 240), (4.4e-6, 4.6e-6, 4.5e-6), strict=True)
    ]
    out = graph_loop_costs(sync, traced, "x")
    assert out["profiled_graph_sync_fixed"] == pytest.approx(50e-6)
    assert out["profiled_graph_sync_per_kernel"] == pytest.approx(2.8e-6)
    assert out["profiled_graph_replay_gap"] == pytest.approx(4.5e-6)
    assert out["graph_sync_fixed"] == pytest.approx(1e-6)  # the unprofiled line: the timing loops still


def test_compiled_step_costs_hand_computed() -> None:
    """Per block, lines over the layer count of the forward region over the step's main-thread probe
    and of the rest but the optimizer over its autograd-thread probe, stated at the eager reference
    probes times the median compiled / eager probe ratio."""
    from simcore.calibration.fit_host import compiled_step_costs

    rows = []
    units = {"gpt": (250.0, 175.0, 320.0, 480.0), "llama": (230.0, 180.0, 800.0, 400.0)}
    for arch, (af, bf, ab, bb) in units.items():
        for layers in (2, 4, 8):
            for pm, pb in ((4e-6, 3e-6), (3e-6, 2e-6)):
                fwd, rest, opt = (af + bf * layers) * pm, (ab + bb * layers) * pb, 0.5e-3
                rows.append({"trace": f"r/compiled_{arch}_L{layers}_h768.json.gz", "step": "s",
                             "step_s": str(fwd + rest + opt), "fwd_region_s": str(fwd), "bwd_region_s": str(rest / 2),
                             "optimizer_s": str(opt), "probe_main_s": str(pm), "probe_bwd_s": str(pb),
                             "eager_probe_main_s": str(pm / 0.4), "eager_probe_bwd_s": str(pb / 0.5)})  # fmt: skip
    # a row of another naming, and one without probes (round 27's), are not used
    rows.append({**rows[0], "trace": "other.json.gz", "fwd_region_s": "1"})
    rows.append({**rows[0], "probe_main_s": "0", "fwd_region_s": "1"})
    ref = {"probe_main": 5e-6, "probe_backward": 4.8e-6, "profiled_step_end": 1e-4}
    out = compiled_step_costs(rows, "x", ref)
    cm, cb = 0.4 * 5e-6, 0.5 * 4.8e-6
    assert out["probe_compiled_main"] == pytest.approx(cm)
    assert out["probe_compiled_backward"] == pytest.approx(cb)
    for arch, act in (("gpt", "gelu"), ("llama", "swiglu")):
        af, bf, ab, bb = units[arch]
        assert out[f"profiled_compiled_fwd_{act}"] == pytest.approx(bf * cm)
        assert out[f"profiled_compiled_bwd_{act}"] == pytest.approx(bb * cb)
        assert out[f"profiled_compiled_step_fwd_{act}"] == pytest.approx(af * cm)
        assert out[f"profiled_compiled_step_bwd_{act}"] == pytest.approx(ab * cb - 1e-4)
    with pytest.raises(TraceError, match="host_compiled_steps rows"):
        compiled_step_costs(rows[-1:], "x", ref)
    # the shipped profile holds the fit of the committed rows
    from simcore.calibration.fit_host import _csv_rows

    shipped = fit_host(host_files_beside(REPO / "traces" / "h200" / "ops.csv.gz"))
    real = compiled_step_costs(_csv_rows(REPO / "traces/h200/host_compiled_steps.csv.gz"), "c", shipped)
    assert real and all(shipped[k] == pytest.approx(v) for k, v in real.items())


def test_empty_probe_and_hugging_face_units_hand_computed() -> None:
    """A row whose thread lacks aten::t is timed by aten::empty over the median empty / t ratio of the
    rows that time both; Hugging Face rows give their own entries at the plain rows' reference probes."""
    from simcore.calibration.fit_host import decode_host_costs, step_host_costs

    def row(impl: str, act: str, layers: int, t: float, e: float, fl: float) -> dict[str, str]:
        v = {
            "pre_s": 1e-4,
            "head_s": 1e-4,
            "bhead_s": 1e-4,
            "tail_s": 1e-4,
            "optimizer_s": 1e-4,
            "post_s": 1e-5,
        }
        return {"trace": "x", "step": "s", "strategy": "single", "act": act, "layers": str(layers),
                "synchronized": "false", "step_s": "0.01", "gpu_step_s": "0.01", "fwd_layer_s": str(fl),
                "bwd_layer_s": str(2 * fl), **{k: str(x) for k, x in v.items()}, "probe_main_s": str(t),
                "probe_bwd_s": str(t), "hooks_s": "", "empty_main_s": str(e), "empty_bwd_s": str(e),
                "impl": impl}  # fmt: skip

    rows = [row("reference", "gelu", L, 5e-6, 3.5e-6, 100 * 5e-6) for L in (2, 8)]
    # a Hugging Face GPT-2 row without aten::t on either thread: empty 3.5 us is t 5 us (ratio 0.7)
    rows += [row("huggingface", "gelu", L, 0.0, 3.5e-6, 300 * 5e-6) for L in (2, 8)]
    out = step_host_costs(rows, "x")
    assert out["probe_empty_ratio_main"] == pytest.approx(0.7)
    assert out["profiled_train_fwd_gelu"] == pytest.approx(100 * 5e-6)
    assert out["profiled_hf_train_fwd_gelu"] == pytest.approx(300 * 5e-6)
    assert out["profiled_hf_train_bwd_gelu"] == pytest.approx(600 * 5e-6)
    dec = [
        {"trace": "x", "step": "s", "act": "gelu", "layers": "4", "pass_s": str(4 * 150 * 4e-6 + 1e-4),
         "layer_s": str(150 * 4e-6), "probe_main_s": "4e-06", "empty_main_s": "3.2e-06", "impl": "reference"},
        {"trace": "y", "step": "s", "act": "gelu", "layers": "4", "pass_s": str(4 * 230 * 4e-6 + 2e-4),
         "layer_s": str(230 * 4e-6), "probe_main_s": "0", "empty_main_s": "3.2e-06", "impl": "huggingface"},
    ]  # fmt: skip
    d = decode_host_costs(dec, "x")
    assert d["probe_empty_ratio_infer"] == pytest.approx(0.8) and d["probe_infer"] == pytest.approx(4e-6)
    assert d["profiled_hf_infer_decode_gelu"] == pytest.approx(230 * 4e-6)
    assert d["profiled_infer_decode_gelu"] == pytest.approx(150 * 4e-6)


def test_host_of_takes_hugging_face_entries() -> None:
    from simcore.specs.profile import load_profile
    from simcore.specs.registry import default_registry

    prof = load_profile(default_registry().device("h200"))
    hl = prof.host_layer
    assert prof.host_of("train_fwd_gelu", True, "huggingface") == pytest.approx(
        hl["profiled_hf_train_fwd_gelu"]
    )
    assert prof.host_of("train_fwd_gelu", True, "reference") == pytest.approx(hl["profiled_train_fwd_gelu"])
    # unprofiled: the plain entry times the profiled ratio
    ratio = hl["profiled_hf_train_bwd_swiglu"] / hl["profiled_train_bwd_swiglu"]
    assert prof.host_of("train_bwd_swiglu", False, "huggingface") == pytest.approx(
        hl["train_bwd_swiglu"] * ratio
    )
    # a backward entry follows the autograd thread's CPU speed, a forward one the main thread's
    slow = prof.model_copy(update={"cpu_ratio_bwd": 2.0})
    assert slow.host_of("train_fwd_gelu", True, "huggingface") == pytest.approx(
        hl["profiled_hf_train_fwd_gelu"]
    )
    assert slow.host_of("train_bwd_gelu", True, "huggingface") > hl["profiled_hf_train_bwd_gelu"]


def test_outside_the_layers_is_a_line_over_the_layers() -> None:
    """The host outside the layers (forward, backward, after the optimizer) is fitted as a + b x layers
    in probe units where the rows have two layer counts."""
    from simcore.calibration.fit_host import step_host_costs

    t = 5e-6
    rows = []
    for layers in (2, 8):
        for act in ("gelu", "swiglu"):
            v = {
                "pre_s": (100 + 5 * layers) * t,
                "head_s": 40 * t,
                "bhead_s": (150 + 3 * layers) * t,
                "tail_s": 50 * t,
                "post_s": (10 + 2 * layers) * t,
                "optimizer_s": 1e-4,
                "fwd_layer_s": 150 * t,
                "bwd_layer_s": 350 * t,
            }
            rows.append({"trace": "x", "step": "s", "strategy": "single", "act": act, "layers": str(layers),
                         "synchronized": "false", "step_s": "0.01", "gpu_step_s": "0.01", "probe_main_s": str(t),
                         "probe_bwd_s": str(t), "hooks_s": "", **{k: str(x) for k, x in v.items()}})  # fmt: skip
    out = step_host_costs(rows, "x")
    assert out["profiled_step_fwd_gelu"] == pytest.approx(140 * t)
    assert out["profiled_step_fwd_layer_gelu"] == pytest.approx(5 * t)
    assert out["profiled_step_bwd_layer_swiglu"] == pytest.approx(3 * t)
    assert out["profiled_step_end"] == pytest.approx(10 * t)
    assert out["profiled_step_end_layer"] == pytest.approx(2 * t)


def test_generate_and_prefill_passes_hand_computed() -> None:
    """generate() passes give the host beyond their layers per token; Hugging Face prefill passes
    (seq > 1, hand-written loops only) give their own per-layer and fixed entries."""
    from simcore.calibration.fit_host import decode_host_costs

    def row(impl: str, loop: str, seq: int, layer_u: float, fixed_u: float) -> dict[str, str]:
        t = 4e-6
        return {"trace": "x", "step": "s", "act": "gelu", "layers": "4", "layer_s": str(layer_u * t),
                "pass_s": str((4 * layer_u + fixed_u) * t), "probe_main_s": str(t), "empty_main_s": "",
                "impl": impl, "loop": loop, "seq": str(seq)}  # fmt: skip

    rows = [row("reference", "manual", 1, 150, 50), row("huggingface", "manual", 1, 180, 110)]
    rows += [row("huggingface", "generate", 1, 180, 450), row("huggingface", "manual", 128, 210, 125)]
    rows += [row("huggingface", "generate", 128, 210, 600)]  # a generate prefill: not the prefill fit
    out = decode_host_costs(rows, "x")
    t = 4e-6
    assert out["profiled_infer_decode_gelu"] == pytest.approx(150 * t)
    assert out["profiled_hf_infer_decode_gelu"] == pytest.approx(180 * t)  # the manual rows only
    assert out["profiled_hf_infer_decode_fixed_gelu"] == pytest.approx(110 * t)
    assert out["profiled_hf_infer_generate_fixed_gelu"] == pytest.approx(450 * t)
    assert out["profiled_hf_infer_prefill_gelu"] == pytest.approx(210 * t)
    assert out["profiled_hf_infer_prefill_fixed_gelu"] == pytest.approx(125 * t)


def test_probe_share_recovers_the_share_that_follows_the_probe() -> None:
    """Runs whose host time is ``U (0.7 probe + 0.3 ref)``, each at two CPU speeds: the within-run
    estimator finds 0.7 whatever each run's own ``U``; runs at one speed say nothing."""
    from simcore.calibration.fit_host import _run_of, probe_share

    ref = 5e-6

    def t(u: float, p: float) -> float:
        return u * (0.7 * p + 0.3 * ref)

    runs = [[(p, t(u, p)) for p in (ps, 1.6 * ps)] for u, ps in ((100.0, 3e-6), (250.0, 4e-6), (40.0, 6e-6))]
    assert probe_share(runs, ref) == pytest.approx(0.7)
    assert probe_share(runs[:2], ref) is None  # fewer than three runs span the probe
    assert probe_share([[(p, t(100.0, p)), (p, t(100.0, p))] for p in (3e-6, 4e-6, 5e-6)], ref) is None
    assert _run_of("traces/r25_train_gpt_L2_h768_p1.json.gz") == "r25_train_gpt_L2_h768"


def test_transformers_moe_layers_have_their_own_host_entries() -> None:
    """Round 51: transformers' Mixtral layers at the fit configs (``traces/h200/host_*_hf_moe.csv.gz``,
    act ``swiglu_moe`` by their grouped GEMM op): per-layer host entries of their own, about twice a
    dense layer's, used for MoE models of that code only."""
    from simcore.calibration.fit_host import _csv_rows
    from simcore.specs.profile import load_profile
    from simcore.specs.registry import default_registry

    h200 = Path(__file__).resolve().parents[2] / "traces" / "h200"
    steps = _csv_rows(h200 / "host_steps_hf_moe.csv.gz")
    dec = _csv_rows(h200 / "host_decode_hf_moe.csv.gz")
    # training under AMP runs the fp32 grouped GEMM's per-expert loop (round 51), with bf16 weights the
    # native one (round 56); inference (bf16 weights) the native one
    assert {r["act"] for r in steps} == {"swiglu_moe", "swiglu_moe_native"}
    assert all(("bf16" in r["trace"]) == r["act"].endswith("_native") for r in steps)
    assert {r["act"] for r in dec} == {"swiglu_moe_native"}
    assert {r["impl"] for r in steps} == {"huggingface"}
    prof = load_profile(default_registry().device("h200"))
    assert prof.layer_key("swiglu", "moe", "huggingface", "train_fwd") == "swiglu_moe"
    assert prof.layer_key("swiglu", "moe_native", "huggingface", "train_fwd") == "swiglu_moe_native"
    assert prof.layer_key("swiglu", "moe", "reference", "train_fwd") == "swiglu"
    assert prof.layer_key("swiglu", None, "huggingface", "infer_decode") == "swiglu"
    assert prof.layer_key("swiglu", "moe", "huggingface", "infer_decode") == "swiglu"  # not measured
    for name, path in (
        ("train_fwd", "moe"),
        ("train_bwd", "moe"),
        ("train_fwd", "moe_native"),
        ("infer_decode", "moe_native"),
    ):
        for profiled in (True, False):
            moe = prof.host_of(f"{name}_swiglu_{path}", profiled, "huggingface")
            dense = prof.host_of(f"{name}_swiglu", profiled, "huggingface")
            assert moe > 1.2 * dense > 0, (name, path)
    # the per-expert loop costs more host than the native grouped GEMM
    assert prof.host_of("train_fwd_swiglu_moe", True, "huggingface") > prof.host_of(
        "train_fwd_swiglu_moe_native", True, "huggingface"
    )
    # generate()'s decode passes run batched experts (round 109): their layers have entries of their own,
    # fitted on generate() passes (no hand-written loop runs them), between a dense layer's and a grouped one's
    r109 = _csv_rows(h200 / "host_decode_hf_moe_r109.csv.gz")
    assert {(r["act"], r["loop"]) for r in r109} == {
        ("swiglu_moe_native", "manual"),
        ("swiglu_moe_batched", "generate"),
    }
    assert prof.layer_key("swiglu", "moe_batched", "huggingface", "infer_decode") == "swiglu_moe_batched"
    for profiled in (True, False):
        batched = prof.host_of("infer_decode_swiglu_moe_batched", profiled, "huggingface")
        native = prof.host_of("infer_decode_swiglu_moe_native", profiled, "huggingface")
        dense = prof.host_of("infer_decode_swiglu", profiled, "huggingface")
        assert 1.2 * dense < batched < 0.85 * native


def test_bf16_weights_take_less_host_than_autocast() -> None:
    """Round 58: transformers' fit runs with bf16 weights and no autocast (no per-op dispatch through
    autocast, no weight casts) take ~20 % less host per forward layer than round 32's AMP rows."""
    from simcore.specs.profile import load_profile
    from simcore.specs.registry import default_registry

    prof = load_profile(default_registry().device("h200"))
    assert 0.7 < prof.weights_factor("bf16", "train_fwd", "huggingface") < 0.9
    assert 0.7 < prof.weights_factor("bf16", "train_bwd", "huggingface") < 0.95
    assert prof.weights_factor("fp32", "train_fwd", "huggingface") == 1.0
    assert prof.weights_factor("bf16", "train_fwd", "reference") == 1.0  # not measured for simcore's layers
    # each block by its own factor (stop 33): on round 58's fit rows a Llama's layers save less host than
    # GPT-2's; an MLP kind not fitted takes the pooled factor
    for kind in ("train_fwd", "train_bwd"):
        llama = prof.weights_factor("bf16", kind, "huggingface", "swiglu")
        gpt2 = prof.weights_factor("bf16", kind, "huggingface", "gelu")
        pooled = prof.weights_factor("bf16", kind, "huggingface")
        assert gpt2 < pooled < llama < 0.95
        assert prof.weights_factor("bf16", kind, "huggingface", "relu") == pooled


def test_eager_attention_layers_have_their_own_host_entries() -> None:
    """Round 61: transformers' layers with ``attn_implementation="eager"`` at the fit configs
    (``traces/h200/host_*_hf_eager.csv.gz``, act ``<act>_eager`` by their 4-D softmaxes and no SDPA
    call): host entries of their own, above an SDPA layer's (the written-out attention issues ~40 %
    more ops), used for that code's eager attention only; unprofiled, the SDPA layer's plain entry at
    their profiled ratio."""
    from simcore.calibration.fit_host import _csv_rows
    from simcore.specs.profile import load_profile
    from simcore.specs.registry import default_registry

    h200 = Path(__file__).resolve().parents[2] / "traces" / "h200"
    steps = _csv_rows(h200 / "host_steps_hf_eager.csv.gz")
    dec = _csv_rows(h200 / "host_decode_hf_eager.csv.gz")
    assert {r["act"] for r in steps} == {r["act"] for r in dec} == {"gelu_eager", "swiglu_eager"}
    assert {r["impl"] for r in steps} == {"huggingface"}
    prof = load_profile(default_registry().device("h200"))
    assert prof.layer_key("swiglu", None, "huggingface", "train_fwd", "eager") == "swiglu_eager"
    assert prof.layer_key("gelu", None, "huggingface", "infer_decode", "eager") == "gelu_eager"
    assert prof.layer_key("swiglu", None, "huggingface", "train_fwd", "cudnn") == "swiglu"
    assert prof.layer_key("swiglu", None, "reference", "train_fwd", "eager") == "swiglu"
    # an MoE model with eager attention: not measured together, the MoE layer's entries
    assert prof.layer_key("swiglu", "moe", "huggingface", "train_fwd", "eager") == "swiglu_moe"
    for act in ("gelu", "swiglu"):
        for name in ("train_fwd", "train_bwd", "infer_decode", "infer_prefill"):
            for profiled in (True, False):
                eager = prof.host_of(f"{name}_{act}_eager", profiled, "huggingface")
                sdpa = prof.host_of(f"{name}_{act}", profiled, "huggingface")
                assert eager > sdpa > 0, (act, name, profiled)
        # the plain entry at the profiled ratio
        ratio = prof.host_of(f"infer_decode_{act}_eager", True, "huggingface") / prof.host_of(
            f"infer_decode_{act}", True, "huggingface"
        )
        assert prof.host_of(f"infer_decode_{act}_eager", False, "huggingface") == pytest.approx(
            ratio * prof.host_of(f"infer_decode_{act}", False, "huggingface"), rel=0.02
        )


def test_eager_attention_act_from_a_trace() -> None:
    """host_trace names a step's layers ``<act>_eager`` by their softmaxes over 4-D scores."""
    from simcore.calibration.host_trace import decode_step_hosts, training_step_hosts
    from simcore.traces import read_trace
    from simcore.traces.classify import analyze

    r60 = Path(__file__).resolve().parents[2] / "traces" / "h200" / "round60"
    tr = training_step_hosts(analyze(read_trace(r60 / "hf_train_gpt2_L12_b4_eager_attn.json.gz")))
    assert tr and {h.act for h in tr} == {"gelu_eager"}
    dec = decode_step_hosts(analyze(read_trace(r60 / "hf_infer_llama_L8_h2048_b4_eager_attn.json.gz")))
    assert dec and {h.act for h in dec} == {"swiglu_eager"}
    sdpa = training_step_hosts(analyze(read_trace(r60 / "hf_train_gpt2_L12_b8_fp32.json.gz")))
    assert sdpa and {h.act for h in sdpa} == {"gelu"}


def test_transformers_compiled_steps_fit_their_own_entries() -> None:
    """Round 70: transformers' compiled steps (no aten::transpose in their compiled code) are timed by their
    aten::empty, and fitted apart from simcore's compiled layers: GPT-2's forward layer costs more host."""
    from simcore.calibration.fit_host import fit_host, host_files_beside
    from simcore.calibration.host_trace import compiled_step_hosts
    from simcore.traces import read_trace
    from simcore.traces.classify import analyze

    rows = compiled_step_hosts(analyze(read_trace(REPO / "traces/h200/round70/hf_cfit_train_gpt2_L8.json.gz")))
    assert rows and all(r.probe_main_s == 0.0 and r.empty_main_s > 0.0 and r.empty_bwd_s > 0.0 for r in rows)
    h = fit_host(host_files_beside(REPO / "traces/h200/ops.csv.gz"))
    for act in ("gelu", "swiglu"):
        for part in ("fwd", "bwd", "step_fwd"):
            assert h[f"profiled_hf_compiled_{part}_{act}"] > 0.0
    assert h["profiled_hf_compiled_fwd_gelu"] > h["profiled_compiled_fwd_gelu"]
