"""An MoE layer's grouped expert GEMMs as lowered (forward, dgrad, wgrad) and priced: more rows per expert is
never faster. The wgrad reduces over the rows, which are no operand stride, so a row count that is not a
multiple of 8 (an expected share of the routed tokens) does not run cuBLAS's misaligned kernels
(docs/compute.md, "Stride alignment")."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcore.engine.pricing import Pricer
from simcore.specs.resolve import cluster_for
from simcore.workload.lowering import Op, backward

PRICER = Pricer.for_layout(cluster_for("hgx-h200", gpus=1))


def _experts(rows: float, hidden: int, ffn: int, experts: float, dtype: str) -> list[Op]:
    """Forward GEMMs of ``experts`` two-matrix experts of ``rows`` tokens each (hidden -> ffn -> hidden)."""
    fc1 = {"m": rows, "n": ffn, "k": hidden, "dtype": dtype, "batch": experts}
    fc2 = {"m": rows, "n": hidden, "k": ffn, "dtype": dtype, "batch": experts}
    return [Op("expert_fc1", "gemm", "gemm", fc1), Op("expert_fc2", "gemm", "gemm", fc2)]


def _seconds(ops: list[Op]) -> float:
    return float(PRICER.price(ops).total())


def test_the_wgrad_takes_its_alignment_from_the_forward_strides() -> None:
    fc1 = _experts(1001.0, 2048, 768, 1.0, "bf16")[0]
    by_name = {op.name: op for op in backward([fc1])}
    # 1001 tokens: the wgrad's reduction, no stride; its operands are strided by 2048 and 768
    assert not by_name["expert_fc1_wgrad"].args["misaligned"]
    # GPT-2's LM head: the output gradient is strided by the 50257-word vocabulary (2 bytes each)
    head = Op("head", "gemm", "gemm", {"m": 8192.0, "n": 50257.0, "k": 768.0, "dtype": "bf16", "batch": 1.0})
    wgrad = backward([head])[-1]
    assert wgrad.name == "head_wgrad" and wgrad.args["misaligned"]
    assert "misaligned" not in backward([head])[0].args  # the dgrad's strides are its own k and n


def test_a_fractional_row_share_prices_as_its_neighbours() -> None:
    # 512 tokens x top-8 over 127.99999999999943 expected active experts of 128 (the case that made the
    # Qwen3-like layer cheaper at 1,024 tokens than at 512): the wgrad is not misaligned
    rows = 512 * 8 / 127.99999999999943
    exact = _experts(32.0, 2048, 768, 128.0, "bf16")
    expected = _experts(rows, 2048, 768, 127.99999999999943, "bf16")
    t_exact = _seconds(backward(exact))
    assert _seconds(backward(expected)) == pytest.approx(t_exact, rel=1e-6)
    assert _seconds(backward(_experts(33.0, 2048, 768, 128.0, "bf16"))) >= t_exact


# model widths are mostly multiples of 8 (16-byte rows in bf16); any width now and then
widths = st.one_of(st.integers(8, 1024).map(lambda x: 8 * x), st.integers(64, 8192))


@settings(max_examples=60, deadline=None)
@given(
    hidden=widths, ffn=widths, experts=st.floats(1.0, 256.0),
    rows=st.one_of(st.integers(1, 4096), st.floats(1.0, 4096.0)),
    more=st.one_of(st.integers(0, 64), st.floats(0.0, 4096.0)),
    dtype=st.sampled_from(["bf16", "fp8", "fp32"]),
)  # fmt: skip
def test_more_rows_per_expert_never_faster(
    hidden: int, ffn: int, experts: float, rows: float, more: float, dtype: str
) -> None:
    """Whole and fractional row counts (an expected share of the routed tokens), any strides, any experts;
    against ``more`` rows and against the next multiple of 8 rows (16-byte rows in bf16, where an alignment
    artefact would show)."""

    def seconds(r: float) -> float:
        fwd = _experts(r, hidden, ffn, experts, dtype)
        return _seconds(fwd + backward(fwd))

    t = seconds(rows) * (1 - 1e-12)
    assert seconds(rows + more) >= t
    assert seconds(8.0 * math.ceil(rows / 8.0)) >= t
