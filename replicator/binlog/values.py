"""Value types the decoder produces where no Python built-in fits losslessly.

Everything else maps to built-ins: int, float, Decimal, str, bytes, datetime.date,
datetime.datetime (naive for DATETIME, UTC-aware for TIMESTAMP), datetime.timedelta (TIME,
signed, hours above 24 kept), None for SQL NULL.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class InvalidTemporal:
    """A DATE/DATETIME/TIMESTAMP the server stored that no calendar holds: '0000-00-00',
    '2020-00-15', ... ``text`` is how MySQL prints it. Sinks write NULL and count it;
    they never make up a date."""

    text: str


class _Absent:
    """Marks a column missing from a partial row image (binlog_row_image=MINIMAL/NOBLOB)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "ABSENT"  # pickling keeps the one instance (held XA rows are pickled)


ABSENT = _Absent()
