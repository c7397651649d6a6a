"""A snapshot's text rows read three ways give one answer: the column's converter (the Python
path, ``snapshot.columns``), the native core's objects (``text_rows``) and its buffers
(``text_block``, which hands a value it cannot hold to the objects). Each gives the same value,
or each refuses the row; never a value where another refuses.
"""

from __future__ import annotations

import datetime as dt
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replicator.binlog.constants import ColumnType as T
from replicator.binlog.schema import ColumnDef
from replicator.snapshot.columns import converter
from replicator.snapshot.fastread import buffer_spec, kind
from tests.blocks import vector_values
from tests.hypothesis_budget import examples
from tests.unit.test_snapshot_units import EOF_PACKET, _core, _lenenc, _packet

COLUMNS = [
    ColumnDef(0, T.TINY, 0, name="t"),
    ColumnDef(1, T.LONGLONG, 0, name="q"),
    ColumnDef(2, T.LONGLONG, 0, name="qu", unsigned=True),
    ColumnDef(3, T.DOUBLE, 8, name="d"),
    ColumnDef(4, T.NEWDECIMAL, 12 << 8 | 2, name="m"),
    ColumnDef(5, T.DATE, 0, name="day"),
    ColumnDef(6, T.DATETIME2, 6, name="at"),
    ColumnDef(7, T.TIMESTAMP2, 3, name="ts"),
    ColumnDef(8, T.TIME2, 6, name="tm"),
    ColumnDef(9, T.VARCHAR, 40, name="v", charset="utf-8"),
    ColumnDef(10, T.BIT, 2 << 8 | 0, name="b"),
    ColumnDef(11, T.YEAR, 0, name="y"),
    ColumnDef(12, T.INT24, 0, name="m24", unsigned=True),
]

Answer = tuple[object, ...]  # a row's values as (type, repr) pairs, or ("refused",)
REFUSED: Answer = ("refused",)


def _canon(value: object) -> tuple[str, object]:
    if isinstance(value, float):
        return "float", struct.pack("<d", value)  # the sign of a zero counts
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        value = value.astimezone(dt.UTC)  # Arrow's zone object for UTC, the decoders' UTC
    return type(value).__name__, repr(value)


def _prepared(columns: list[ColumnDef]) -> tuple[Any, ...]:
    found = [buffer_spec(c) for c in columns]
    return (
        _core(),
        tuple(kind(c) for c in columns),
        tuple(converter(c) for c in columns),
        tuple((0, 0, 0) if f is None else f[0] for f in found),
        tuple(None if f is None else f[1] for f in found),
    )


def _by_converters(columns: list[ColumnDef], row: list[bytes | None]) -> Answer:
    try:
        return tuple(
            _canon(None if raw is None else converter(c)(raw))
            for c, raw in zip(columns, row, strict=True)
        )
    except Exception:  # whichever error the Python path raises is a refusal
        return REFUSED


def _by_objects(columns: list[ColumnDef], data: bytes, wire: object = None) -> Answer:
    core, kinds, fallbacks, _, _ = _prepared(columns)
    try:
        rows, offset, state = core.text_rows(data, 0, kinds, fallbacks, False, wire)
    except Exception:
        return REFUSED
    assert (len(rows), offset, state) == (1, len(data), 1)
    return tuple(_canon(v) for v in rows[0])


def _by_buffers(columns: list[ColumnDef], data: bytes, wire: object = None) -> Answer:
    """As ``fastread`` reads: a block of buffers, then the objects from a value they cannot
    hold (state 4) on."""
    core, kinds, fallbacks, specs, natives = _prepared(columns)
    values: list[tuple[object, ...]] = []
    try:
        vectors, n, offset, state, _ = core.text_block(
            data, 0, specs, kinds, fallbacks, False, 10, wire
        )
        read = [vector_values(v, k, n) for v, k in zip(vectors, natives, strict=True)]
        values.extend(zip(*read, strict=True))
        if state == 4:
            rest, offset, state = core.text_rows(data, offset, kinds, fallbacks, False, wire)
            values.extend(rest)
    except Exception:
        return REFUSED
    assert (len(values), offset, state) == (1, len(data), 1)
    return tuple(_canon(v) for v in values[0])


def _text_row(row: list[bytes | None]) -> bytes:
    return _packet(b"".join(_lenenc(v) for v in row)) + EOF_PACKET


def _agree(columns: list[ColumnDef], row: list[bytes | None]) -> Answer:
    data = _text_row(row)
    want = _by_converters(columns, row)
    assert _by_objects(columns, data) == want, row
    assert _by_buffers(columns, data) == want, row
    return want


TEXT = st.one_of(
    st.none(),
    st.binary(max_size=12),
    st.from_regex(rb"\A-?[0-9]{1,22}(\.[0-9]{0,8})?\Z"),
    st.from_regex(rb"\A[0-9]{4}-[0-9]{2}-[0-9]{2}( [0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,7})?)?\Z"),
    st.from_regex(rb"\A-?[0-9]{1,4}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,7})?\Z"),
    st.sampled_from(
        [
            b"",
            b"-",
            b"-0",
            b"+1",
            b" 1",
            b"1 ",
            b"1_0",
            b"1e5",
            b"-0.00",
            b".5",
            b"1\x002",
            b"0000-00-00",
            b"0000-00-00 00:00:00",
            b"9999-12-31 23:59:59.999999",
            b"\xc3\xa9",
            b"\xff",
            b"18446744073709551616",
            b"-9223372036854775809",
        ]
    ),
)


@settings(max_examples=examples(500), deadline=None)
@given(st.lists(TEXT, min_size=len(COLUMNS), max_size=len(COLUMNS)))
def test_any_text_row_reads_alike_three_ways(row: list[bytes | None]) -> None:
    _agree(COLUMNS, row)


@pytest.mark.parametrize("text", [b"1\x002", b"7\x00", b"12\x00abc"])
def test_an_integer_with_a_nul_in_its_text_is_refused(text: bytes) -> None:
    """The core once read ``1\\x002`` as 1: a C string ends at the NUL."""
    assert _agree([COLUMNS[1]], [text]) == REFUSED


@pytest.mark.parametrize(("text", "value"), [(b"-0.00", "0.00"), (b"-00.00", "0.00")])
def test_a_negative_zero_decimal_is_zero(text: bytes, value: str) -> None:
    """DECIMAL has no negative zero (the binlog decoder reads one as zero): the converter
    kept the sign where the buffers could not."""
    assert _agree([COLUMNS[4]], [text]) == (("Decimal", f"Decimal('{value}')"),)


@pytest.mark.parametrize("column", [COLUMNS[6], COLUMNS[7]])
def test_binary_microseconds_past_two_to_the_31_are_refused(column: ColumnDef) -> None:
    """A binary DATETIME/TIMESTAMP whose 4-byte microseconds read as a negative int landed
    1 µs before its seconds in the buffers, where the objects refused it."""
    wire = ((12 if column.type == T.DATETIME2 else 7, 6, False),)
    value = b"\x0b" + struct.pack("<HBBBBBI", 2020, 1, 2, 3, 4, 5, 0xFFFFFFFF)
    data = _packet(b"\x00\x00" + value) + EOF_PACKET  # header, NULL bitmap, the value
    assert _by_objects([column], data, wire) == REFUSED
    assert _by_buffers([column], data, wire) == REFUSED
