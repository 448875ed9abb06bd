"""FP8 GEMM families in the fit (docs/compute.md, "FP8 GEMMs by scaling"): per-tensor rows read as their own family,
a shape timed by two kernel files counted once, the served grid's compute-bound (boost-clock) rows left out, and a
family's kernel-rate block taken from another device's profile."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from simcore.calibration import fit_compute as FC
from simcore.calibration.calibrate import borrow_gemm_kernel
from simcore.errors import SimcoreError
from simcore.specs.profile import FP8_TENSOR, load_profile
from simcore.specs.registry import default_registry
from tests.cli_runner import run_cli

H200 = default_registry().device("h200")
HEAD = "kind,dtype,m,n,k,batch,name,time_s,framework,flops,bytes\n"


def _csv(path: Path, rows: list[str]) -> Path:
    """An ops CSV of GEMM rows ``kind,dtype,m,n,k,batch,name,time_s,framework``, with their FLOP and bytes."""
    lines = []
    for r in rows:
        _, dt, m, n, k = r.split(",")[:5]
        m_, n_, k_, e = float(m), float(n), float(k), (1.0 if dt == "fp8" else 2.0)
        lines.append(f"{r},{2 * m_ * n_ * k_},{(m_ * k_ + k_ * n_) * e + m_ * n_ * 2}\n")
    with gzip.open(path, "wt") as f:
        f.write(HEAD + "".join(lines))
    return path


def test_per_tensor_rows_are_their_own_family(tmp_path: Path) -> None:
    p = _csv(
        tmp_path / "ops.csv.gz",
        [
            "gemm,fp8,64,4096,4096,,scaled_mm_e4m3_tensorwise,1e-5,eager",
            "gemm,fp8,64,4096,4096,,scaled_mm_e4m3_rowwise,2e-5,eager",
            "gemm,bf16,64,4096,4096,,matmul,2e-5,eager",
        ],
    )
    t = FC.read_ops([p])
    assert t.dtype == [FP8_TENSOR, "fp8", "bf16"]
    # priced as fp8 elements at the fp8 peak: the same roofline as the row-wise row for the same parameters
    prof = load_profile(H200)
    g = prof.gemm["fp8"]
    pred = FC._gemm_pred(H200, g, t.take(np.array([0, 1])), FP8_TENSOR), FC._gemm_pred(H200, g, t.take(np.array([0, 1])), "fp8")
    assert np.array_equal(pred[0], pred[1])


def test_a_shape_timed_by_two_kernel_files_counts_once(tmp_path: Path) -> None:
    a = _csv(tmp_path / "a.csv.gz", ["gemm,bf16,256,256,256,,matmul,1e-5,", "gemm,bf16,256,256,256,,matmul,1.1e-5,"])
    b = _csv(tmp_path / "b.csv.gz", ["gemm,bf16,256,256,256,,matmul,2e-5,", "gemm,fp8,256,256,256,,scaled_mm_e4m3_tensorwise,1e-5,"])
    t = FC.read_ops([a, b])
    fam = np.array([FC.family_of(t, i) for i in range(len(t))])
    # repeats within one file stay (the first file's timing of a shape stands); another family's row is no repeat
    assert FC.repeated_kernel_rows(t, fam, np.array(t.framework)).tolist() == [False, False, True, False]


def test_grid_rows_enter_only_where_bandwidth_bound(tmp_path: Path) -> None:
    """A kernel-timed row with no call-timed twin is left out where compute-bound at the datasheet roofline: H200
    bf16 ridge 989e12 / 4.8e12 = 206 FLOP/byte; 4096 x 4096 x 4096 is 1365, 16 x 8192 x 8192 is ~16."""
    p = _csv(
        tmp_path / "k.csv.gz",
        [
            "gemm,bf16,4096,4096,4096,,matmul,1e-4,",  # compute-bound, no twin: out
            "gemm,bf16,16,8192,8192,,matmul,1e-5,",  # bandwidth-bound: in
            "gemm,bf16,2048,2048,2048,,matmul,1e-5,",  # compute-bound but the sweep times it too: in
            "gemm,bf16,2048,2048,2048,,matmul,2e-5,eager",
        ],
    )
    t = FC.read_ops([p])
    fam = np.array([FC.family_of(t, i) for i in range(len(t))])
    assert FC.burst_compute_rows(t, fam, np.array(t.framework), H200).tolist() == [True, False, False, False]


def test_borrowed_kernel_block_is_the_donors_and_said() -> None:
    h100 = load_profile(default_registry().device("h100"))
    mine = load_profile(H200).model_copy(update={"gemm_kernel": {"bf16": h100.gemm_kernel["bf16"]}})
    out = borrow_gemm_kernel(mine, "h100:fp8_tensor")
    assert out.gemm_kernel[FP8_TENSOR] == h100.gemm_kernel[FP8_TENSOR]
    assert out.gemm_kernel["bf16"] == mine.gemm_kernel["bf16"]
    assert "gemm_kernel fp8_tensor: h100" in out.source
    for bad in ("h100", "nosuch:fp8_tensor", "h100:fp7"):
        with pytest.raises(SimcoreError, match="gemm-kernel-from"):
            borrow_gemm_kernel(mine, bad)


def test_shipped_h200_per_tensor_kernel_block_is_the_h100s() -> None:
    h100, h200 = (load_profile(default_registry().device(d)) for d in ("h100", "h200"))
    assert h200.gemm_kernel[FP8_TENSOR] == h100.gemm_kernel[FP8_TENSOR]
    # its own per-tensor rows (the op sweep's call-timed cubes) fit its call-timed block
    assert FP8_TENSOR in h200.gemm and h200.gemm[FP8_TENSOR] != h100.gemm[FP8_TENSOR]


def test_cli_bad_gemm_kernel_from_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(
        capsys, "calibrate", "traces/h200/cold.csv.gz", "--device", "h200", "--no-comm", "--gemm-kernel-from", "h100"
    )
    assert code != 0
    assert "gemm-kernel-from" in err and "Traceback" not in err
