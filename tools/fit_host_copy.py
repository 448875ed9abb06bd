"""Regenerate the host<->GPU copy calibration of H200 (``host_copy`` in hardware_specs/calibration/h200.yaml).

1. Every committed H200 profiler trace (``traces/h200/**``, ``traces/h200x2/**``, ``*.json.gz``) with a
   host<->GPU ``Memcpy HtoD``/``Memcpy DtoH`` event: its copies into ``traces/h200/memcpy_host_gpu.csv.gz``
   (``simcore.calibration.fit_copy.extract_copies``; a few minutes).
2. ``fit_copies`` over PCIe Gen5 (the link of hgx-h200) and the section written into the profile.

  python tools/fit_host_copy.py            # both steps
  python tools/fit_host_copy.py --fit-only # step 2 from the committed CSV
"""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simcore.calibration.fit_copy import extract_copies, fit_copies, read_copies, write_copies, write_section  # noqa: E402
from simcore.specs import default_registry  # noqa: E402

CSV = "traces/h200/memcpy_host_gpu.csv.gz"
PROFILE = "hardware_specs/calibration/h200.yaml"


def main() -> None:
    if "--fit-only" not in sys.argv[1:]:
        paths = []
        for sub in ("traces/h200", "traces/h200x2"):
            for p in sorted((ROOT / sub).rglob("*.json.gz")):
                raw = gzip.decompress(p.read_bytes())
                if b"Memcpy HtoD" in raw or b"Memcpy DtoH" in raw:
                    paths.append(p)
        print(f"{len(paths)} traces with host<->GPU copies", flush=True)
        write_copies(extract_copies(sorted(paths), root=ROOT), ROOT / CSV)
    rows = read_copies(ROOT / CSV)
    link = default_registry().find("pcie5")[1]
    hc = fit_copies(rows, link="pcie5", bandwidth=link.bandwidth, source=[CSV])  # type: ignore[union-attr]
    write_section(hc, ROOT / PROFILE)
    for kind, rep in hc.held_out.items():
        print(f"{kind}: held-out median |err| {rep['median_abs_err']:.1%} on {int(rep['n'])} copies")


if __name__ == "__main__":
    main()
