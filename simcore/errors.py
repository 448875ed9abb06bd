"""User-facing errors: one clear line naming the file, the field and the problem."""

from __future__ import annotations


class SimcoreError(Exception):
    """An error caused by user input. The CLI prints ``str(err)`` on one line and exits with 2."""

    def __init__(self, message: str, *, file: str | None = None, field: str | None = None) -> None:
        self.file = file
        self.field = field
        self.problem = message
        parts = [p for p in (file, field) if p]
        text = ": ".join([*parts, message])
        super().__init__(text.replace("\n", " "))


class SpecError(SimcoreError):
    """A specification file or value is malformed, unknown or out of range."""


class TraceError(SimcoreError):
    """A trace or log could not be read."""
