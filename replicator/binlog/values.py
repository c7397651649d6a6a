"""Value types the decoder produces where no Python built-in fits losslessly.

Everything else maps to built-ins: int, float, Decimal, str, bytes, datetime.date,
datetime.datetime (naive for DATETIME, UTC-aware for TIMESTAMP), datetime.timedelta (TIME,
signed, hours above 24 kept), None for SQL NULL.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class InvalidTemporal:
    """A DATE/DATETIME/TIMESTAMP the server stored that Python's date/datetime cannot hold:
    '0000-00-00', '2020-00-15', or a date of year 0 ('0000-01-21', which MySQL allows and
    SELECT shows). ``text`` is how MySQL prints it. ``epoch``: for a real date of year 0 (the
    proleptic Gregorian calendar, where year 0 is a leap year), its exact value in days (DATE)
    or microseconds (DATETIME) since 1970-01-01, which Arrow's date32/timestamp hold; None
    when no calendar holds it. Sinks land ``epoch`` where the format allows, else NULL, and
    count what they could not land; they never make up a date."""

    text: str
    epoch: int | None = None


class Geometry(bytes):
    """A GEOMETRY value: its WKB bytes (equal to plain ``bytes`` of the same WKB), with the
    SRID the server stored before them as ``srid`` (0: none given)."""

    srid: int

    def __new__(cls, wkb: bytes, srid: int = 0) -> Geometry:
        value = super().__new__(cls, wkb)
        value.srid = srid
        return value

    def __reduce__(self) -> tuple[type[Geometry], tuple[bytes, int]]:
        return Geometry, (bytes(self), self.srid)  # held XA rows are pickled

    def __repr__(self) -> str:
        return f"Geometry({bytes(self)!r}, srid={self.srid})"


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
