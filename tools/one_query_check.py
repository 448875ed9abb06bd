"""cuDNN's one-query families (``attention.fwd_cudnn_one_query`` and ``_odd``) on the rows the fit held out.

The fit (``fit_compute.fit``) splits each family's shapes on their own by shape hash (``split_rows``) and fits on
the rest; this prices every row of rounds 92 and 96's one-query sweeps with a profile and prints, per family and
side of the split, the median and worst |error|. With ``--even-for-odd`` the odd slot counts are priced with the
even family's parameters (what the profile did before the odd family).

  python tools/one_query_check.py [--profile PATH] [--even-for-odd]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from simcore.calibration import fit_compute as FC  # noqa: E402
from simcore.specs.profile import (  # noqa: E402
    ONE_QUERY_ODD_ATTENTION,
    ComputeProfile,
    one_query_family,
)
from simcore.specs.registry import builtin_dir, default_registry  # noqa: E402

SWEEPS = ("traces/h200/round92/attention_masked_decode.csv.gz", "traces/h200/round96/attention_kvlen.csv.gz")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python tools/one_query_check.py", description=__doc__)
    ap.add_argument("--profile", default=str(builtin_dir() / "calibration" / "h200.yaml"))
    ap.add_argument("--even-for-odd", action="store_true", help="price odd slot counts with the even family")
    args = ap.parse_args(argv)
    prof = ComputeProfile.model_validate(yaml.safe_load(Path(args.profile).read_text()))
    if args.even_for_odd:
        prof = prof.model_copy(
            update={"attention": {k: v for k, v in prof.attention.items() if k != ONE_QUERY_ODD_ATTENTION}}
        )
    t = FC.read_ops([REPO / p for p in SWEEPS])
    fam = np.array([FC.family_of(t, i) for i in range(len(t))])
    one = FC.one_query_rows(t, fam)
    fit = FC.split_rows(t, fam)
    pred = FC.predict_rows(default_registry().device("h200"), prof, t)
    err = np.abs(pred / t.num["time_s"] - 1.0)
    fams = one_query_family(t.num["kv_seq"])
    for key in sorted(set(fams[one])):
        for side, m in (("fitted on", fit), ("held out", ~fit)):
            sel = one & (fams == key) & m & np.isfinite(pred)
            print(f"{key:28s} {side:9s} {int(sel.sum()):4d} rows: median |error| {np.median(err[sel]) * 100:5.1f} %, "
                  f"worst {err[sel].max() * 100:5.1f} %")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
