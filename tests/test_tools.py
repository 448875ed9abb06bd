"""tools/collect.py, the measurement harness: its suite table, --list and --dry-run (no torch, no GPU)."""

from __future__ import annotations

import gzip
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
COLLECT = ROOT / "tools" / "collect.py"


def _collect() -> ModuleType:
    spec = importlib.util.spec_from_file_location("simcore_tools_collect", COLLECT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


collect = _collect()


def test_list_runs_without_torch() -> None:
    out = subprocess.run(
        [sys.executable, "-S", str(COLLECT), "--list"], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    for name, suite in collect.SUITES.items():
        assert name in out and f"tools/{suite.script}" in out


def test_every_suite_names_an_existing_script() -> None:
    for name, suite in collect.SUITES.items():
        assert (ROOT / "tools" / suite.script).is_file(), name
        if suite.merge:
            assert (ROOT / "tools" / suite.merge[0]).is_file(), name


def test_tools_is_a_harness_not_a_log() -> None:
    files = [p for p in (ROOT / "tools").iterdir() if not p.name.startswith(".") and p.name != "__pycache__"]
    assert len(files) <= 40
    assert not list((ROOT / "tools").glob("*.sh"))


@pytest.mark.parametrize("name", list(collect.SUITES))
def test_dry_run_prints_command_and_manifest(
    name: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    suite = collect.SUITES[name]
    assert collect.main([name, "--dry-run", "--out", str(tmp_path), "--budget", "5"]) == 0
    out = capsys.readouterr().out
    commands, _, manifest = out.partition(f"# would write {tmp_path / 'manifest.json'}:\n")
    lines = commands.splitlines()
    assert len(lines) == suite.runs + bool(suite.merge)
    assert f"tools/{suite.script}" in lines[0] and lines[0].endswith("--budget 5")
    assert ("torchrun" in lines[0]) == (suite.gpus > 1)
    assert "{out}" not in commands
    assert (str(tmp_path) in commands) == any("{out}" in a for a in suite.args)
    man = json.loads(manifest)
    for key in ("suite", "args", "commands", "gpu", "driver", "cuda", "torch", "simcore", "started"):
        assert key in man
    assert man["suite"] == name and man["args"] == ["--budget", "5"] and man["commands"] == lines
    assert not list(tmp_path.iterdir())  # a dry run writes nothing


def test_smoke_only_where_the_script_has_it() -> None:
    with pytest.raises(SystemExit):
        collect.main(["power", "--smoke", "--dry-run"])
    assert collect.supports_smoke(collect.SUITES["ops"])


def test_split_moves_the_masked_one_query_rows(tmp_path: Path) -> None:
    """attention-one-query's split gives round 92's two committed files back from their union."""
    r92 = ROOT / "traces" / "h200" / "round92"
    short = gzip.decompress((r92 / "attention_short.csv.gz").read_bytes()).decode().splitlines()
    masked = gzip.decompress((r92 / "attention_masked_decode.csv.gz").read_bytes()).decode().splitlines()
    (tmp_path / "attention_short.csv").write_text("\n".join(short + masked[1:]) + "\n")
    split = collect.SUITES["attention-one-query"].splits[0]
    assert collect.apply_split(tmp_path, split) == len(masked) - 1
    assert (tmp_path / "attention_masked_decode.csv").read_text().splitlines() == masked
    assert (tmp_path / "attention_short.csv").read_text().splitlines() == short


def test_merge_host_median_gives_round_6_back_from_its_runs(tmp_path: Path) -> None:
    """host-infer-median's merge (``tools/collect.py merge-host-median``) on round 6's seven runs, rebuilt from
    the ``<point>_run<k>`` rows the committed file keeps, writes the committed file again (its env note names the
    script that merged it)."""
    import csv
    import re

    committed = gzip.decompress((ROOT / "traces" / "h200" / "host_infer_r6.csv.gz").read_bytes()).decode()
    rows = list(csv.DictReader(committed.splitlines()))
    env = dict(rows[0], notes=rows[0]["notes"].split("; merged:")[0])
    kernels = [r for r in rows if r["name"].startswith("kernels_")]
    runs: dict[int, list[dict[str, str]]] = {}
    for r in rows:
        m = re.fullmatch(r"(.*)_run(\d+)", r["name"])
        if m and r["framework"] == "eager":
            runs.setdefault(int(m.group(2)), []).append(dict(r, name=m.group(1)))
    paths = []
    for k, rs in sorted(runs.items()):
        paths.append(str(tmp_path / f"run{k}.csv"))
        with open(paths[-1], "w", newline="") as f:
            w = csv.DictWriter(f, collect.HOST_COLS)
            w.writeheader()
            w.writerows([env, *rs, *kernels])
    assert len(paths) == 7
    out = tmp_path / "merged.csv.gz"
    assert collect.main(["merge-host-median", *paths, "--out", str(out)]) == 0
    merged = gzip.decompress(out.read_bytes()).decode().splitlines()
    want = committed.splitlines()
    assert merged[0] == want[0] and merged[2:] == want[2:]
    assert merged[1].replace("tools/collect.py merge-host-median", "tools/merge_host_median.py") == want[1]


def test_bench_gemm_kernels_needs_ops_or_grid(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With neither ``--ops`` nor ``--grid`` there is nothing to time: an argparse error, not an empty CSV
    (torch stubbed: the check comes before any GPU work)."""
    from unittest.mock import MagicMock

    for mod in ("torch", "torch.profiler"):
        monkeypatch.setitem(sys.modules, mod, MagicMock())
    tools = Path(__file__).resolve().parents[1] / "tools"
    monkeypatch.syspath_prepend(str(tools))
    monkeypatch.delitem(sys.modules, "benchutil", raising=False)
    spec = importlib.util.spec_from_file_location("simcore_tools_bench_gemm_kernels", tools / "bench_gemm_kernels.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with pytest.raises(SystemExit) as e:
        mod.main(["--out", "unused.csv"])
    assert e.value.code == 2 and "--ops" in capsys.readouterr().err
