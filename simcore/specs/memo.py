"""A bounded memo for pure functions of frozen specs and plain numbers (the one-scenario fast path).

Specs are frozen pydantic models, but most hold lists or dicts, so they cannot be hashed; and hashing a
whole device or calibration profile by content would cost more than the work it saves. A
:class:`SpecMemo` keys an entry on the *identity* of the specs it read (``pins``) plus plain hashable
values, and keeps a reference to those specs inside the entry, so an id can never be reused by another
object while its entry lives. A user who changes a spec gets a new object (frozen models are changed
with ``model_copy(update=...)`` or by validating new data), which misses. See docs/architecture.md,
section "Speed".
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

_ALL: list[SpecMemo] = []


def clear_all() -> None:
    """Empty every memo (to free their memory; results never depend on them)."""
    for m in _ALL:
        m.clear()


class SpecMemo:
    """At most ``size`` results, keyed on ``(ids of pins, key)``; the whole memo is emptied when full
    (the one-scenario loop it serves touches a few dozen entries)."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._data: dict[Hashable, tuple[tuple[Any, ...], Any]] = {}
        _ALL.append(self)

    def get(self, pins: tuple[Any, ...], key: Hashable) -> Any:
        """The value stored for ``key`` with these very ``pins`` objects, else ``None``."""
        hit = self._data.get((tuple(map(id, pins)), key))
        if hit is None or any(a is not b for a, b in zip(hit[0], pins, strict=True)):
            return None
        return hit[1]

    def put(self, pins: tuple[Any, ...], key: Hashable, value: Any) -> Any:
        """Store ``value`` (not ``None``) for ``key`` read from ``pins``; returns ``value``."""
        if len(self._data) >= self.size:
            self._data.clear()
        self._data[(tuple(map(id, pins)), key)] = (pins, value)
        return value

    def clear(self) -> None:
        self._data.clear()

    def __len__(self) -> int:
        return len(self._data)


__all__ = ["SpecMemo", "clear_all"]
