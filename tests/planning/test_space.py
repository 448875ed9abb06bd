"""Search-space generation: every row obeys the divisibility rules, nothing valid is lost."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcore.planning.space import UNEVEN_VP_MAX, SearchOptions, build_space, divisors
from simcore.specs.registry import default_registry
from simcore.specs.resolve import cluster_for, scenario_from_dict
from simcore.workload.layout import valid_layouts


def _model(preset: str):  # type: ignore[no-untyped-def]
    return scenario_from_dict(
        {"kind": "training", "cluster": {"system": "hgx-h100"}, "model": {"preset": preset}}
    ).model


@given(st.integers(1, 5000))
def test_divisors(n: int) -> None:
    d = divisors(n)
    assert list(d) == [k for k in range(1, n + 1) if n % k == 0]


def _check_rows(space, model, gpus, dom) -> None:  # type: ignore[no-untyped-def]
    b = space.base
    assert np.all(valid_layouts(model, gpus, **b).ok)  # every row is one simcore predict accepts
    assert np.all(b["tp"] * b["pp"] * b["cp"] * b["dp"] == gpus)
    assert np.all(model.heads % b["tp"] == 0)
    assert np.all(model.n_kv_heads % b["tp"] == 0)
    assert np.all((b["tp"] <= dom) & (dom % b["tp"] == 0))
    assert np.all(b["pp"] * b["vp"] <= model.layers)  # (divisibility where required: the brute force)
    assert np.all(b["global_batch"] % (b["micro_batch"] * b["dp"]) == 0)
    assert np.all(model.seq_len % b["cp"] == 0)
    assert np.all((b["vp"] == 1) | (b["pp"] > 1))
    if model.moe is not None:
        # parallel folding: ep x etp divides tp x cp x dp, etp being tp or 1
        assert np.all((b["tp"] * b["dp"] * b["cp"]) % (b["ep"] * b["etp"]) == 0)
        assert np.all((b["etp"] == b["tp"]) | (b["etp"] == 1))
        assert np.all(model.moe.experts % b["ep"] == 0)
    # no duplicate shapes
    keys = np.stack(
        [b[k] for k in ("tp", "pp", "cp", "dp", "ep", "etp", "vp", "micro_batch", "global_batch")], axis=1
    )
    assert len(np.unique(keys, axis=0)) == len(keys)


@settings(max_examples=15, deadline=None)
@given(
    st.sampled_from([8, 16, 64, 96, 256, 1024]),
    st.sampled_from([64, 128, 256, 1536]),
    st.sampled_from(["gpt3-13b", "llama3-70b", "mixtral-8x7b"]),
    st.booleans(),
)
def test_rows_obey_rules_and_nothing_is_missing(gpus: int, gb: int, preset: str, uneven: bool) -> None:
    model = _model(preset)
    cl = cluster_for("hgx-h100", gpus=gpus)
    space = build_space(model, cl, gb, SearchOptions(max_cp=4, max_micro_batch=4, uneven_pp=uneven))
    _check_rows(space, model, gpus, 8)
    # brute force: every layout that obeys the rules is in the table
    got = {
        tuple(int(space.base[k][i]) for k in ("tp", "pp", "cp", "dp", "ep", "etp", "vp", "micro_batch"))
        for i in range(space.rows)
    }
    experts = model.moe.experts if model.moe else 1
    want = set()
    for tp in range(1, 9):
        for pp in range(1, gpus + 1):
            for cp in (1, 2, 4):
                if gpus % (tp * pp * cp) or model.heads % tp or model.n_kv_heads % tp or 8 % tp:
                    continue
                if (model.layers % pp and not uneven) or pp > model.layers or model.seq_len % cp:
                    continue
                dp = gpus // (tp * pp * cp)
                folds = {tp, 1} if model.moe else {tp}
                for ep, etp in ((e, f) for e in range(1, experts + 1) for f in folds):
                    if experts % ep or (tp * dp * cp) % (ep * etp):
                        continue
                    for mb in (1, 2, 3, 4):
                        if gb % (mb * dp):
                            continue
                        for vp in range(1, model.layers + 1):
                            if vp > 1 and (pp == 1 or pp * vp > model.layers):
                                continue
                            if vp > 1 and model.layers % (pp * vp) and not uneven:
                                continue
                            if vp > UNEVEN_VP_MAX and model.layers % vp:
                                continue  # the candidates: divisors of the layers, and 1..8 if uneven
                            if vp == 1 and model.layers % pp and not uneven:
                                continue
                            want.add((tp, pp, cp, dp, ep, etp, vp, mb))
    assert got == want


def test_tp_inside_nvlink_domain_of_nvl72() -> None:
    model = _model("llama3-405b")
    cl = cluster_for("gb200-nvl72", nodes=8)
    space = build_space(model, cl, 2016, SearchOptions(max_cp=1))
    assert set(space.base["tp"].tolist()) <= {1, 2, 4, 8}  # divides 8 KV heads and 72
    _check_rows(space, model, 576, 72)


def test_mask_removes_redundant_knobs() -> None:
    model = _model("gpt3-13b")
    cl = cluster_for("hgx-h100", gpus=64)
    space = build_space(model, cl, 512)
    ok = space.mask()
    lay = space.layout()
    tp = np.broadcast_to(lay.tp, ok.shape)
    sp = np.broadcast_to(lay.sp, ok.shape)
    pp = np.broadcast_to(lay.pp, ok.shape)
    vp = np.broadcast_to(lay.vp, ok.shape)
    sched = np.broadcast_to(lay.schedule, ok.shape)
    dp = np.broadcast_to(lay.dp, ok.shape)
    zero = np.broadcast_to(lay.zero, ok.shape)
    assert not np.any(ok & (tp == 1) & sp)
    assert not np.any(ok & (pp == 1) & (sched != "1f1b"))
    assert not np.any(ok & (sched == "interleaved") & (vp == 1))
    assert not np.any(ok & (sched != "interleaved") & (vp > 1))
    assert not np.any(ok & (dp == 1) & (zero > 0))
    assert ok.sum() > 0


def test_unknown_schedule_is_a_user_error() -> None:
    from simcore.errors import SpecError

    with pytest.raises(SpecError, match="schedule"):
        build_space(
            _model("gpt3-13b"), cluster_for("hgx-h100", gpus=8), 64, SearchOptions(schedule=("1f2b",))
        )
    assert default_registry() is not None


def test_moe_search_tries_ep_beyond_dp_with_etp_1() -> None:
    """Parallel folding in the search: rows with EP beyond DP x CP exist, all with etp 1."""
    model = _model("mixtral-8x7b")
    space = build_space(model, cluster_for("hgx-h100", gpus=16), 64, SearchOptions(max_cp=1, max_micro_batch=1))
    b = space.base
    beyond = b["ep"] > b["dp"] * b["cp"]
    assert np.any(beyond)
    assert np.all(b["etp"][beyond] == 1)
