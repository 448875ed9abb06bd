"""Run the ``simcore`` command line in-process for tests: ``(exit code, stdout, stderr)``."""

import pytest

from simcore.cli import main


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run ``simcore ARGS...`` and return its exit code and captured output."""
    try:
        main(list(args))
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    else:  # pragma: no cover - main always exits
        pytest.fail("simcore main returned without exiting")
    out = capsys.readouterr()
    return code, out.out, out.err


def exit_status(*args: str) -> int:
    """The exit status of ``simcore ARGS...`` run in-process (output not captured)."""
    try:
        main(list(args))
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    return 0  # pragma: no cover - main always exits


def predicts_then_rejects(capsys: pytest.CaptureFixture[str], scenario: str, setting: str, word: str) -> None:
    """``simcore predict SCENARIO`` succeeds, and with ``--set SETTING`` fails with exit 2 and one line naming
    ``word`` (no traceback)."""
    code, out, err = run_cli(capsys, "predict", scenario)
    assert code == 0 and "Traceback" not in err and out
    code, _out, err = run_cli(capsys, "predict", scenario, "--set", setting)
    assert code == 2 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and word in err
