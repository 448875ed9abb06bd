"""Every command that writes a file checks the path first: a missing folder, a folder given as the file,
a file given as the folder or an unsupported format is ONE line naming the option and the path, exit
status 2, no traceback, nothing written, and no work done before.

``OUTPUTS`` lists every (command, option) that takes an output path; ``test_every_output_option_is_driven``
walks the command tree so that a new ``-o``/``--plot``/... cannot be added without being driven here.
"""

from __future__ import annotations

import errno
import itertools
import json
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from simcore.cli import main
from simcore.report.plots import image_formats
from simcore.specs.registry import set_user_dirs
from tests.cli_runner import run_cli

IMAGE = tuple("." + f for f in image_formats())
TRACE = (".json", ".json.gz")

# (argv before the option, the option, suffixes it writes, whether a missing folder is created)
OUTPUTS: list[tuple[list[str], str, tuple[str, ...], bool]] = [
    (["timeline", "default"], "-o", TRACE, False),
    (["timeline", "default"], "--png", IMAGE, False),
    (["schema"], "-o", (".json",), False),
    (["plan", "default", "--gpus", "64"], "--plot", IMAGE, False),
    (["op", "gemm", "--m", "64", "--n", "64", "--k", "64"], "--plot", IMAGE, False),
    (["topo", "hgx-h200"], "-o", IMAGE, False),
    (["collective", "all_reduce", "--bytes", "1 MB"], "-o", IMAGE, False),
    (["serve", "serve_llama3_8b_h200"], "--plot", IMAGE, False),
    (["sweep", "default", "--grid", "cluster.nodes=1", "--quiet"], "-o", (".csv", ".parquet"), True),
    (["sweep", "default", "--grid", "cluster.nodes=1", "--quiet"], "--plot", IMAGE, False),
    (["calibrate", "ops.csv"], "-o", (".yaml", ".yml"), True),
    (["calibrate", "ops.csv"], "--comm-output", (".yaml", ".yml"), True),
    (["validate", "trace.json", "--scenario", "default"], "--plot", IMAGE, False),
    (["replay", "trace.json", "--device", "b200"], "--trace-out", TRACE, True),
    (["host-trace", "trace.json", "--ddp"], "-o", (".csv", ".csv.gz"), False),
]

OUTPUT_OPTIONS = {"-o", "--output", "--out", "--png", "--plot", "--csv", "--trace-out", "--comm-output"}
"""Option names that take a file to write."""


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    set_user_dirs([])
    yield
    set_user_dirs([])


def _commands() -> dict[str, Any]:
    """Every leaf command of the ``simcore`` app by its full name (``hw list``, ``predict``, ...)."""
    import typer

    from simcore.cli import _register
    from simcore.cli.common import app

    _register()
    out: dict[str, Any] = {}

    def walk(cmd: Any, prefix: str) -> None:
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, f"{prefix} {name}".strip())
        else:
            out[prefix] = cmd

    walk(typer.main.get_command(app), "")
    return out


def test_every_output_option_is_driven() -> None:
    found = set()
    for name, cmd in _commands().items():
        for p in cmd.params:
            opts = set(getattr(p, "opts", [])) | set(getattr(p, "secondary_opts", []))
            if opts & OUTPUT_OPTIONS:
                found.add((name, next(o for o in p.opts if o.startswith("-"))))
    driven = {(argv[0], opt) for argv, opt, _, _ in OUTPUTS}
    # an option is driven under either of its names (-o / --output)
    norm = {(c, "-o" if o in ("--output", "--out") else o) for c, o in found}
    assert norm == driven, f"not driven: {sorted(norm - driven)}; stale: {sorted(driven - norm)}"


def assert_one_line(code: int, err: str, *needles: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: "), err
    for n in needles:
        assert n in lines[0], (n, lines[0])


# --- the property: any bad path, any command ---------------------------------------------------------

_NAME = st.text(
    alphabet=string.ascii_letters + string.digits + "_-[]() '",
    min_size=1,
    max_size=12,
).filter(lambda s: s.strip() == s and not s.startswith("-") and s not in (".", ".."))
_SUFFIX = st.text(alphabet=string.ascii_lowercase + string.digits, min_size=1, max_size=5)
_counter = itertools.count()


KINDS = ["missing folder", "a folder", "under a file", "bad format", "no suffix"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", OUTPUTS, ids=[f"{a[0]} {o}" for a, o, _, _ in OUTPUTS])
@settings(
    max_examples=2,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # no shrinking: each example runs the CLI
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(name=_NAME, suffix=_SUFFIX, good=st.integers(min_value=0, max_value=1000))
def test_bad_output_path_is_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    case: tuple[list[str], str, tuple[str, ...], bool],
    kind: str,
    name: str,
    suffix: str,
    good: int,
) -> None:
    """Every command x every kind of bad path, with hypothesis-drawn names (brackets, quotes, spaces)."""
    argv, option, formats, makes_folders = case
    if kind == "missing folder" and makes_folders:
        kind = "bad format"  # these commands create the folder of a good path: not an error
    if f".{suffix}" in formats:
        suffix = "xyz"
    root = tmp_path / f"ex{next(_counter)}"
    root.mkdir()
    fmt = formats[good % len(formats)]
    if kind == "missing folder":
        path = root / f"missing {name}" / f"{name}{fmt}"
    elif kind == "a folder":
        path = root / f"{name}{fmt}"
        path.mkdir()
    elif kind == "under a file":
        (root / name).write_text("a file\n")
        path = root / name / f"out{fmt}"
    elif kind == "bad format":
        path = root / f"missing {name}" / f"{name}.{suffix}"
    else:
        path = root / name
    code, _out, err = run_cli(capsys, *argv, option, str(path))
    assert_one_line(code, err, option, str(path))
    if kind in ("bad format", "no suffix"):
        assert "unsupported format" in err and formats[0] in err
    assert not path.exists() or path.is_dir()
    assert sorted(p.name for p in root.iterdir()) == sorted(
        {"a folder": [path.name], "under a file": [name]}.get(kind, [])
    ), "nothing is written or created for a bad path"


# --- the commands of the issue -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        (["timeline", "default", "-o", "{missing}/trace.json"], ("-o", "folder", "does not exist")),
        (["timeline", "default", "-o", "{tmp}"], ("-o", "is a folder")),
        (["timeline", "default", "--png", "{missing}/g.png"], ("--png", "does not exist")),
        (["timeline", "default", "-o", "{tmp}/trace.txt"], ("use .json or .json.gz",)),
        (["schema", "-o", "{missing}/s.json"], ("-o", "does not exist")),
        (["plan", "default", "--gpus", "64", "--plot", "{missing}/p.png"], ("--plot", "does not exist")),
        (
            ["op", "gemm", "--m", "64", "--n", "64", "--k", "64", "--plot", "{tmp}/x.xyz"],
            ("--plot", "unsupported format (.xyz)", ".png", ".svg", ".pdf"),
        ),
        (["topo", "hgx-h200", "-o", "{tmp}/t.txt"], ("-o", "unsupported format (.txt)", ".png")),
    ],
)
def test_issue_commands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], needles: tuple[str, ...]
) -> None:
    args = [a.format(missing=tmp_path / "missing", tmp=tmp_path) for a in argv]
    code, _out, err = run_cli(capsys, *args)
    assert_one_line(code, err, *needles)
    assert not (tmp_path / "missing").exists()


def test_topo_refuses_a_cluster_too_big_to_draw(capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli(capsys, "topo", "hgx-h200", "--nodes", "125000000000")
    assert_one_line(code, err, "--nodes", "1,000,000,000,000 GPUs", "131,072")
    code, _out, err = run_cli(capsys, "topo", "hgx-h200", "--gpus", str(8 * 20_000))
    assert_one_line(code, err, "--gpus", "160,000 GPUs")
    # the largest size allowed still answers
    code, out, err = run_cli(capsys, "topo", "hgx-h200", "--nodes", "64", "--json")
    assert code == 0, err
    assert json.loads(out)["gpus"] == 512


def test_good_paths_are_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s = tmp_path / "s.json"
    code, out, err = run_cli(capsys, "schema", "-o", str(s))
    assert code == 0, err
    assert json.loads(s.read_text())["title"] == "Scenario" and "wrote" in out
    t, g = tmp_path / "[run] t.json.gz", tmp_path / "[run] g.svg"
    code, out, err = run_cli(capsys, "timeline", "default", "-o", str(t), "--png", str(g))
    assert code == 0, err
    assert t.stat().st_size > 100 and g.read_text().lstrip().startswith("<?xml")
    assert str(t) in out and str(g) in out  # brackets of the path printed as they are


def test_a_write_that_fails_late_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(self: Path, *a: Any, **k: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full)
    code, _out, err = run_cli(capsys, "schema", "-o", str(tmp_path / "s.json"))
    assert_one_line(code, err, "-o", "s.json", "No space left on device")


def test_parents_are_created_only_for_a_good_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # calibrate creates the folder of its profile (as before), but not for a path it would refuse
    code, _out, err = run_cli(capsys, "calibrate", "ops.csv", "-o", str(tmp_path / "new" / "p.txt"))
    assert_one_line(code, err, "-o", "unsupported format (.txt)", ".yaml or .yml")
    assert not (tmp_path / "new").exists()
    code, _out, err = run_cli(
        capsys, "calibrate", str(tmp_path / "none.csv"), "-o", str(tmp_path / "new" / "p.yaml")
    )
    assert code == 2 and "Traceback" not in err
    assert (tmp_path / "new").is_dir()


def test_main_exits_2_for_each_issue_command(tmp_path: Path) -> None:
    """The console script's own exit status (not just run_cli's reading of it)."""
    with pytest.raises(SystemExit) as e:
        main(["schema", "-o", str(tmp_path / "missing" / "s.json")])
    assert e.value.code == 2
