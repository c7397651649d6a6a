"""Value classes the stream builds for every event: read-only to the type checker, cheap to build.

A ``dataclass(frozen=True)`` refuses assignment at run time, so its ``__init__`` sets each
field through ``object.__setattr__``: building one costs about four times what a slotted
dataclass of the same fields costs (1.3 µs against 0.3 µs for six fields on the machine of
docs/performance.md). The stream builds several such values for every event and every
transaction (the header, the event, the GTID, the position, the transaction), and for
transactions of one row that was a sixth of the reader thread's time.

``record`` makes a slotted dataclass with equality and hashing by value, as
``dataclass(frozen=True, slots=True)`` does, and declares it frozen to type checkers
(``dataclass_transform(frozen_default=True)``, PEP 681): ``mypy --strict``, which
``scripts/check`` runs over the package and its tests, refuses an assignment to a field of
one as it does for a frozen dataclass. What it gives up is the check at run time; use it only
where values are built per event, and ``dataclass(frozen=True)`` everywhere else.

A record pickles as a frozen slotted dataclass does (its state the list of its field values),
so files that hold pickled values (held XA transactions, ``sink.landing``) read the same
whichever of the two wrote them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, TypeVar, dataclass_transform

_T = TypeVar("_T")


@dataclass_transform(frozen_default=True, eq_default=True)
def record(cls: type[_T]) -> type[_T]:
    """``cls`` as a slotted dataclass, hashable and compared by value, read-only by type."""
    made = dataclass(slots=True, unsafe_hash=True)(cls)
    made.__getstate__ = _getstate  # type: ignore[method-assign]
    made.__setstate__ = _setstate  # type: ignore[attr-defined]
    return made


def _getstate(self: Any) -> list[object]:
    return [getattr(self, f.name) for f in fields(self)]


def _setstate(self: Any, state: list[object]) -> None:
    for f, value in zip(fields(self), state, strict=True):
        object.__setattr__(self, f.name, value)
