"""Arrow columns built by the native core (``native_arrow.arrow_columns``) against pyarrow.

For any list of values of a column's type with NULLs, the core's buffers must make exactly
the array ``pa.array(values, type)`` makes. For anything that is not plainly a value of the
type (a marker, a value out of range, another Python type, a row of the wrong width) it must
give up (None), so the writer's own checks run.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replicator.binlog.values import ABSENT, InvalidTemporal
from replicator.sink import native_arrow
from replicator.sink.parquet_writer import _from_buffers
from tests.hypothesis_budget import examples

from .test_native import require_native


@pytest.fixture(autouse=True)
def _native_core() -> None:
    require_native()


UTC = dt.UTC
ONE_HOUR = dt.timedelta(hours=1)


def _ints(bits: int, signed: bool) -> Any:
    if signed:
        return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    return st.integers(0, 2**bits - 1)


TYPES: dict[str, tuple[pa.DataType, Any]] = {
    "int8": (pa.int8(), _ints(8, True)),
    "int16": (pa.int16(), _ints(16, True)),
    "int32": (pa.int32(), _ints(32, True)),
    "int64": (pa.int64(), _ints(64, True)),
    "uint8": (pa.uint8(), _ints(8, False)),
    "uint32": (pa.uint32(), _ints(32, False)),
    "uint64": (pa.uint64(), _ints(64, False)),
    "float32": (pa.float32(), st.floats(width=32)),
    "float64": (pa.float64(), st.floats()),
    "string": (pa.string(), st.text()),
    "binary": (pa.binary(), st.binary()),
    "date32": (pa.date32(), st.dates()),
    "timestamp": (pa.timestamp("us"), st.datetimes()),
    "timestamp_utc": (pa.timestamp("us", tz="UTC"), st.datetimes(timezones=st.just(UTC))),
    "duration": (
        pa.duration("us"),
        st.timedeltas(min_value=dt.timedelta(days=-106751), max_value=dt.timedelta(days=106751)),
    ),
}


def _native_arrays(
    rows: list[Any], width: int, wanted: list[tuple[int, pa.DataType, tuple[int, int] | None]]
) -> list[pa.Array | None]:
    """Items of rows as arrays built by the core in one pass (None: left to pyarrow)."""
    out: list[pa.Array | None] = [None] * len(wanted)
    specs = tuple((index, *kind) for index, _, kind in wanted if kind is not None)
    if not specs:
        return out
    built = iter(native_arrow.arrow_columns(rows, width, specs))
    for j, (_, type_, kind) in enumerate(wanted):
        if kind is None:
            continue
        found = next(built)
        if found is not None:
            out[j] = _from_buffers(type_, len(rows), found)
    return out


def _native_array(
    rows: list[Any], index: int, width: int, type_: pa.DataType, kind: tuple[int, int] | None
) -> pa.Array | None:
    return _native_arrays(rows, width, [(index, type_, kind)])[0]


def _bytes(array: pa.Array) -> list[bytes | None]:
    return [None if b is None else b.to_pybytes() for b in array.buffers()]


def _bytes_or_none(array: pa.Array | None) -> list[bytes | None] | None:
    return None if array is None else _bytes(array)


def _native(values: list[Any], type_: pa.DataType) -> pa.Array | None:
    """A column of values built by the core (width 0: the list is the column, as the writer
    hands it); the same as from row tuples."""
    kind = native_arrow.arrow_kind(type_)
    from_rows = _native_array([(0, v, 1) for v in values], 1, 3, type_, kind)
    from_list = _native_array(values, 0, 0, type_, kind)
    # both None, or the same bytes (NaN != NaN)
    assert _bytes_or_none(from_rows) == _bytes_or_none(from_list)
    return from_list


@settings(max_examples=examples(400), deadline=None)
@given(st.data())
def test_native_columns_equal_pyarrow(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(TYPES)))
    type_, values = TYPES[name]
    column = data.draw(st.lists(st.one_of(st.none(), values), max_size=40))
    built = _native(column, type_)
    assert built is not None
    built.validate(full=True)
    expected = pa.array(column, type_)
    assert built.type == expected.type
    assert built.null_count == expected.null_count
    # repr: NaN equals itself there (not in Array.equals), and -0.0 differs from 0.0
    assert repr(built.to_pylist()) == repr(expected.to_pylist())


def test_repeated_objects_are_copied_not_shared() -> None:
    stamp = dt.datetime(2024, 5, 6, 7, 8, 9, 10, tzinfo=UTC)
    gtid = "0-1-42"
    rows = [(gtid, stamp)] * 3 + [("0-1-43", stamp.replace(second=1))]
    for index, type_ in ((0, pa.string()), (1, pa.timestamp("us", tz="UTC"))):
        built = _native_array(rows, index, 2, type_, native_arrow.arrow_kind(type_))
        assert built is not None
        assert built.to_pylist() == [r[index] for r in rows]


@pytest.mark.parametrize(
    ("type_", "odd"),
    [
        (pa.int8(), 128),
        (pa.int64(), 2**63),
        (pa.uint16(), -1),
        (pa.int32(), True),
        (pa.int32(), 1.0),
        (pa.float64(), 1),
        (pa.float32(), 0.1),  # not a float32 value
        (pa.string(), b"bytes"),
        (pa.string(), "\ud800"),
        (pa.binary(), "text"),
        (pa.date32(), dt.datetime(2020, 1, 1)),
        (pa.date32(), InvalidTemporal("0000-00-00")),
        (pa.timestamp("us"), dt.datetime(2020, 1, 1, tzinfo=UTC)),
        (pa.timestamp("us", tz="UTC"), dt.datetime(2020, 1, 1)),
        (pa.timestamp("us", tz="UTC"), dt.datetime(2020, 1, 1, tzinfo=dt.timezone(ONE_HOUR))),
        (pa.duration("us"), 5),
        (pa.duration("us"), dt.timedelta(days=106752)),  # past int64 microseconds
        (pa.int64(), ABSENT),
        (pa.string(), Decimal(1)),
    ],
)
def test_anything_else_is_left_to_pyarrow(type_: pa.DataType, odd: object) -> None:
    assert _native([None, odd], type_) is None


def test_rows_of_another_width_are_left_to_pyarrow() -> None:
    kind = native_arrow.arrow_kind(pa.int64())
    assert _native_array([(1, 2), (3,)], 0, 2, pa.int64(), kind) is None
    assert _native_array([(1, 2), [3, 4]], 0, 2, pa.int64(), kind) is None
    assert _native_array([(1, 2), (3, 4, 5)], 0, 2, pa.int64(), kind) is None
    built = _native_array([(1, 2), (3, 4)], 1, 2, pa.int64(), kind)
    assert built is not None
    assert built.to_pylist() == [2, 4]


def test_no_rows_and_all_nulls() -> None:
    for type_, _ in TYPES.values():
        empty = _native([], type_)
        assert empty is not None and len(empty) == 0 and empty.type == type_
        nulls = _native([None] * 9, type_)
        assert nulls is not None and nulls.null_count == 9
        assert nulls.equals(pa.array([None] * 9, type_))


def test_one_pass_leaves_only_the_odd_column_to_pyarrow() -> None:
    rows = [(1, "a", 1.5), (2, ABSENT, None), (None, "c", 2.5)]
    wanted = [
        (0, pa.int64(), native_arrow.arrow_kind(pa.int64())),
        (1, pa.string(), native_arrow.arrow_kind(pa.string())),
        (2, pa.float64(), native_arrow.arrow_kind(pa.float64())),
        (2, pa.decimal128(5, 2), native_arrow.arrow_kind(pa.decimal128(5, 2))),  # no native kind
    ]
    first, second, third, fourth = _native_arrays(rows, 3, wanted)
    assert second is None and fourth is None
    assert first is not None and first.to_pylist() == [1, 2, None]
    assert third is not None and third.to_pylist() == [1.5, None, 2.5]
