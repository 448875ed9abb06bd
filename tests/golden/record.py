"""Golden predictions: every scenario under ``scenarios/`` and ``tests/data/``, every number of its result.

``python -m tests.golden.record`` (from the repository root) rewrites ``tests/golden/predictions.json.gz``;
``tests/golden/test_golden.py`` checks that a change of code leaves every prediction as it was (to
floating-point noise). Record only when a change of behaviour is intended, and say why in the commit.

``python -m tests.golden.record --validation`` rewrites ``tests/golden/validation.txt.gz``, the output of
``python -m simcore.validation`` with its timing lines removed (10-16 minutes on two cores; the slow test
``test_validation_golden`` compares it).
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PREDICTIONS = Path(__file__).with_name("predictions.json.gz")
VALIDATION = Path(__file__).with_name("validation.txt.gz")
_TIMING = re.compile(r"^\((\w+): [\d.]+ s\)$")


def scenario_files() -> list[Path]:
    """Every scenario file the golden set covers, in a stable order (paths relative to the root)."""
    files = sorted((ROOT / "scenarios").glob("*.yaml")) + sorted((ROOT / "tests" / "data").rglob("*.yaml"))
    return [f.relative_to(ROOT) for f in files]


def predict_one(rel: Path) -> dict[str, Any]:
    """The result of ``simcore.predict`` on one scenario as JSON data, or the error it raised."""
    import simcore
    from simcore.specs.multijob import multi_job_file

    try:
        path = str(ROOT / rel)
        result = simcore.predict_jobs(path) if multi_job_file(path) else simcore.predict(path)
    except simcore.SimcoreError as e:
        return {"error": str(e)}
    return json.loads(result.model_dump_json())


def record_predictions() -> None:
    out = {str(rel): predict_one(rel) for rel in scenario_files()}
    with gzip.open(PREDICTIONS, "wt", encoding="utf-8") as f:
        json.dump(out, f, indent=0, sort_keys=True)
    print(f"{PREDICTIONS.relative_to(ROOT)}: {len(out)} scenarios")


def validation_output() -> str:
    """``python -m simcore.validation``'s output without its timing lines, the checkout's path as ``<repo>``."""
    proc = subprocess.run(
        [sys.executable, "-m", "simcore.validation"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    lines = [ln.replace(str(ROOT), "<repo>") for ln in proc.stdout.splitlines() if not _TIMING.match(ln.strip())]
    return "\n".join(lines) + f"\n[exit {proc.returncode}]\n"


def record_validation() -> None:
    text = validation_output()
    with gzip.open(VALIDATION, "wt", encoding="utf-8") as f:
        f.write(text)
    print(f"{VALIDATION.relative_to(ROOT)}: {len(text.splitlines())} lines")


if __name__ == "__main__":
    if "--validation" in sys.argv[1:]:
        record_validation()
    else:
        record_predictions()
