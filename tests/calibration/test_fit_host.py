"""``simcore.calibration.fit_host``: per-layer host slopes, profiler ratios, the lower envelope."""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import pytest

from simcore.calibration.fit_host import fit_host, host_files_beside, read_size_runs

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
    h = fit_host(host_files_beside(REPO / "traces" / "h200" / "ops.csv.gz"))
    # the profiled entries are the plain ones times the interleaved-run ratio
    for act in ("gelu", "swiglu"):
        r = h[f"profiler_ratio_decode_{act}"]
        assert 1.0 < r < 3.0
        assert h[f"profiled_infer_decode_{act}"] == pytest.approx(h[f"infer_decode_{act}"] * r)
        rt = h[f"profiler_ratio_train_{act}"]
        assert h[f"profiled_train_fwd_{act}"] == pytest.approx(h[f"train_fwd_{act}"] * rt)
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
