"""Engine GEMM tables (docs/compute.md, "Blackwell's GEMMs from engine tables"): the collection's reader and its
errors, the fit (recovers known GEMM parameters from a synthetic table, subtracts the quantize kernel it prices
apart), the overlay ``load_profile`` applies (own device, nearest of the same architecture, never a measured
profile), the burst-clock rule of the sustained fraction, the CLI, and the committed tables' check half."""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from simcore.calibration import fit_compute as FC
from simcore.calibration import fit_engine_gemm as F
from simcore.compute import kernels as K
from simcore.compute import ops
from simcore.engine.pricing import Pricer
from simcore.errors import SpecError
from simcore.specs.profile import FP8_TENSOR, engine_gemm_for, load_profile, with_engine_gemm
from simcore.specs.registry import default_registry
from tests.cli_runner import run_cli

REPO = Path(__file__).resolve().parents[2]
REG = default_registry()
B200, GB300, H200 = REG.device("b200"), REG.device("gb300"), REG.device("h200")


def _write(folder: Path, rows: list[tuple[str, int, int, int, float]], device: str = "b200") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(folder / F.TABLE, "wt", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["dtype", "m", "n", "k", "time_s"])
        w.writerows(rows)
    (folder / F.MANIFEST).write_text(json.dumps({"kind": "engine_gemm", "engine": "tensorrt-llm",
                                                  "engine_version": "test", "device": device}))  # fmt: skip
    return folder


def _grid() -> list[tuple[int, int, int]]:
    return [(m, n, k) for m in (1, 16, 64, 256, 1024, 4096, 8192) for n in (1024, 4096, 8192, 28672)
            for k in (1024, 4096, 8192)]  # fmt: skip


def test_fit_recovers_the_linear_it_was_given(tmp_path: Path) -> None:
    # a table made by the model itself (GEMM at known parameters + the quantize kernel the fit subtracts)
    base = F.without_table(B200)
    want = base.gemm_params("fp4", per_tensor=True).model_copy(update={"eff_peak": 0.45, "eff_bw": 0.6, "t0": 6e-6})
    hw = FC._hw(B200, "fp4")
    g = np.array(_grid(), dtype=float)
    m, n, k = g.T
    t = np.asarray(K.gemm_time(hw, want, m, n, k, 1.0, 0.5625, 2.0, None).time) + F.quantize_time(B200, base, "fp4", m, k)
    folder = _write(tmp_path / "t", [("fp4", int(a), int(b), int(c), float(s)) for (a, b, c), s in zip(g, t, strict=True)])
    eg = F.fit(folder)
    assert eg.device == "b200" and set(eg.gemm) == {"fp4"}
    held = eg.fit_report["held_out"]["fp4"]
    assert held["n"] > 0 and held["median_abs_err"] < 0.02
    # the transferred start was far off on the same rows (the table's reason to exist)
    assert eg.fit_report["start_held_out"]["fp4"]["median_abs_err"] > 0.1


def test_quantize_kernel_is_priced_for_quantized_families_only() -> None:
    base = F.without_table(B200)
    assert float(F.quantize_time(B200, base, "bf16", 4096, 4096)) == 0.0
    q8 = float(F.quantize_time(B200, base, FP8_TENSOR, 4096, 4096))
    q4 = float(F.quantize_time(B200, base, "fp4", 4096, 4096))
    # a memory-bound cast: reads 2 bytes, writes the format's (FP8 1 byte, NVFP4 0.5 + a scale per 16)
    assert 0.0 < q4 < q8 < float(F.quantize_time(B200, base, FP8_TENSOR, 4 * 4096, 4096))


def test_bad_collections_say_file_and_field(tmp_path: Path) -> None:
    folder = _write(tmp_path / "a", [("fp16", 1, 1, 1, 1e-6)])
    with pytest.raises(SpecError, match="unknown GEMM family 'fp16'") as e:
        F.read(folder)
    assert e.value.field == "dtype" and str(folder) in str(e.value)
    (folder / F.TABLE).write_bytes(gzip.compress(b"dtype,m,n,k,time_s\nfp4,x,1,1,1\n"))
    with pytest.raises(SpecError, match="not a number") as e:
        F.read(folder)
    assert e.value.field == "m"
    assert not F.is_collection(tmp_path) and F.is_collection(folder)
    with pytest.raises(SpecError, match="no such AIConfigurator GEMM table"):
        F.import_aiconfigurator(tmp_path, "b200_sxm", "0.0", tmp_path / "out")
    with pytest.raises(SpecError, match="unknown AIConfigurator system"):
        F.import_aiconfigurator(tmp_path, "tpu", "0.0", tmp_path / "out")


def test_overlay_own_nearest_and_never_over_a_measured_profile() -> None:
    b200 = load_profile(B200)
    assert b200.transferred_from == "h200"
    assert set(b200.gemm_measured) == {"bf16", FP8_TENSOR, "fp4"}
    own = engine_gemm_for(B200)
    assert own is not None and own.device == "b200"
    assert b200.gemm["fp4"] == own.gemm["fp4"] and b200.gemm_kernel.get("fp4") in (None, own.gemm["fp4"])
    assert any("gemm-b200.yaml" in n for n in b200.notes)
    # the transferred families it replaced are back without the table
    assert F.without_table(B200).gemm_measured == {} and "fp4" not in F.without_table(B200).gemm
    # a measured profile is left as it is; a Blackwell device without its own table takes the nearest's
    h200 = load_profile(H200)
    assert h200.gemm_measured == {} and with_engine_gemm(h200, H200) is h200
    # a Blackwell GPU without a table of its own takes its nearest die relative's (a copy of the B200: the B200's;
    # of the GB300: the GB300's), a Hopper one transferred from a measured Hopper none, nor another die's GPU
    for name in ("b200", "gb300"):
        nearest = engine_gemm_for(REG.device(name).model_copy(update={"name": f"{name}-copy"}), "h200")
        assert nearest is not None and nearest.device == name
    assert engine_gemm_for(REG.device("h800"), "h100") is None
    assert engine_gemm_for(REG.device("a100"), "h100") is None
    workstation = B200.model_copy(update={"name": "rtx-pro", "architecture": "Blackwell (GB202)"})
    assert engine_gemm_for(workstation, "h200") is None


def test_blackwell_prices_its_measured_linears_and_fp4_beats_the_transfer_direction() -> None:
    # the table says TensorRT-LLM's NVFP4 linear on B200 is slower than the H200's efficiencies transferred
    m, n, k = 256, 57344, 8192
    measured = ops.gemm(B200, load_profile(B200), m, n, k, "fp4", l2_reuse=False, per_tensor=True).time_s
    transferred = ops.gemm(B200, F.without_table(B200), m, n, k, "fp4", l2_reuse=False, per_tensor=True).time_s
    assert measured > transferred


def test_burst_measured_families_take_the_sustained_fraction_whole() -> None:
    prof = load_profile(GB300)
    r = ops.gemm_sustained_fraction(GB300, prof, FP8_TENSOR)
    r_old = ops.gemm_sustained_fraction(GB300, F.without_table(GB300), FP8_TENSOR)
    assert 0.0 < r < 1.0 and r < r_old  # over the burst clock, not over the H200's own sustained rate


def test_committed_tables_check_half() -> None:
    from simcore.validation.gemms import engine_table_errors, engine_tables

    tables = engine_tables()
    assert {t.parent.name for t in tables} == {"b200", "gb200", "b300", "gb300"}
    errs = engine_table_errors(REPO / "traces" / "b200" / "trtllm_gemm")
    for fam in ("bf16", FP8_TENSOR, "fp4"):
        e = errs[fam]["all"]
        assert e.size > 1000 and np.median(np.abs(e)) < 0.15 and abs(np.median(e)) < 0.05


def test_cli_fits_a_collection_into_the_file_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "gemm-b200.yaml"
    code, text, err = run_cli(capsys, "calibrate", str(REPO / "traces" / "b200" / "trtllm_gemm"), "-o", str(out))
    assert code == 0, err
    assert "linear layers on b200" in text and out.is_file()
    shipped = (REPO / "hardware_specs" / "calibration" / "gemm-b200.yaml").read_text()
    assert out.read_text() == shipped  # the shipped file is what the command writes
    code, text, err = run_cli(capsys, "calibrate", "--import-aiconfigurator", "nonsense", "-o", str(tmp_path / "x"))
    assert code != 0 and "REPO:SYSTEM:VERSION" in err and "Traceback" not in err


def test_validation_gemms_reports_the_grid_and_the_tables(capsys: pytest.CaptureFixture[str]) -> None:
    from simcore.cli.validation import main

    assert main(["gemms", "h100"]) == 0
    out = capsys.readouterr().out
    assert "h100   fp8_tensor kernel" in out  # the decode grid, per-tensor family
    assert "gb300/trtllm_gemm" in out and "M <= 512" in out  # the engine tables' check half


def test_serving_experts_take_the_row_wise_family_unless_the_die_measured_its_own() -> None:
    from simcore.engine.inference import expert_family_per_tensor
    from simcore.workload.lowering import Op
    from tests.engine.test_memo import cluster_for

    args = {"m": 64.0, "n": 8192.0, "k": 4096.0, "batch": 1.0, "dtype": "fp8"}
    ops_ = [Op("mlp_in", "gemm", "gemm", dict(args), 1.0), Op("expert_mlp_in", "gemm", "gemm", dict(args), 1.0)]
    for system, dev, want in (("hgx-h100", REG.device("h100"), False), ("dgx-b200", B200, None)):
        prof = load_profile(dev)
        assert expert_family_per_tensor(prof) is want
        p = Pricer.for_layout(cluster_for(system, gpus=1), tp=1)
        p.per_tensor, p.expert_per_tensor = True, want
        dense, expert = (float(t) for t in p.times(ops_)[0])
        p.expert_per_tensor = None  # experts as the dense GEMMs
        same = float(p.times(ops_)[0][1])
        assert same == pytest.approx(dense)
        # on the H100 the row-wise family prices the expert GEMM apart (slower, as its kernel is); on the B200 its own
        # per-tensor measurement prices both alike
        row_slower = float(ops.gemm(dev, prof, 64, 8192, 4096, "fp8", l2_reuse=False).time_s) > float(
            ops.gemm(dev, prof, 64, 8192, 4096, "fp8", l2_reuse=False, per_tensor=True).time_s
        )
        assert (expert > dense) == (want is False and row_slower) and (expert == pytest.approx(dense)) == (want is None)


def test_a_bad_manifest_is_one_line_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / F.MANIFEST).write_text('["engine_gemm"]')
    with pytest.raises(SpecError, match="JSON object") as e:
        F.is_collection(tmp_path)
    assert str(tmp_path / F.MANIFEST) in str(e.value)
    (tmp_path / F.MANIFEST).write_text('{"kind": "engine_gemm", "device": "b200"}')
    (tmp_path / F.TABLE).write_bytes(gzip.compress(b"dtype,m,n,k,time_s\nbf16,1,2\n"))
    with pytest.raises(SpecError, match="not a number"):
        F.read(tmp_path)


def test_predictions_and_the_op_report_say_where_the_gemms_came_from() -> None:
    import simcore
    from simcore.specs.resolve import scenario_from_dict

    sc = scenario_from_dict({"kind": "inference", "cluster": {"system": "dgx-b200", "gpus": 1},
                             "model": {"preset": "llama3.1-8b"}, "inference": {"batch": 8, "prompt_len": 512,
                                                                                "output_len": 16}}, REG)  # fmt: skip
    notes = " ".join(simcore.predict(sc).notes)
    assert "transferred from h200" in notes and "gemm-b200.yaml" in notes
    assert "gemm-b200.yaml" in ops.op_time("gemm", "b200", "fp4", m=64, n=4096, k=4096).calibration
    assert "gemm-" not in ops.op_time("gemm", "h200", "fp8", m=64, n=4096, k=4096).calibration
