"""``python -m simcore.validation``: progress on stderr, the reports alone on stdout; no internal wording."""

from __future__ import annotations

import pytest

from simcore.cli import validation as V


def test_suite_progress_goes_to_stderr(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def ok() -> None:
        print("report a")

    def fails() -> None:
        print("report b")
        raise V.typer.Exit(2)

    monkeypatch.setitem(V.REPORTS, "a", ok)
    monkeypatch.setitem(V.REPORTS, "b", fails)
    assert V.run_suite(["a", "b"]) == 2
    out, err = capsys.readouterr()
    body = [ln for ln in out.splitlines() if not ln.startswith("(")]
    assert body == ["", "=== a ===", "report a", "", "=== b ===", "report b"]
    assert "[1/2] a: running" in err and "[2/2] b: running" in err
    assert "[1/2] a: done in" in err and "[2/2] b: failed (exit 2) in" in err
    assert "2 reports in" in err


def test_heartbeat_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(V.sys.stderr, "isatty", lambda: True, raising=False)
    with V._Heartbeat("[1/1] x", every=0.01):
        V.time.sleep(0.1)
    assert "[1/1] x still running" in capsys.readouterr().err
    monkeypatch.setattr(V.sys.stderr, "isatty", lambda: False, raising=False)
    with V._Heartbeat("[1/1] y", every=0.01):
        V.time.sleep(0.05)
    assert "still running" not in capsys.readouterr().err


def test_published_summary_has_no_internal_wording() -> None:
    from simcore.validation import published as P

    text = P.format_summary(P.summarize(P.predict_rows(P.load_published(None))))
    assert "issue" not in text
    assert "target: median <=" in text
