"""``replicator dump``'s JSON lines are byte for byte what the plain per-value formatter and
``json.dumps`` print (``tests.harness.dump_reference``): over every binlog file of the corpus
and of tests/data, over hand-made events holding every kind of value the decoder returns, and
over generated floats, decimals and temporals."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from decimal import Context, Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replicator.binlog import events as ev
from replicator.binlog.block import Block
from replicator.binlog.constants import ColumnType
from replicator.binlog.errors import DecodeError
from replicator.binlog.framing import _NeedData
from replicator.binlog.gtid import MariadbGtid
from replicator.binlog.json_diff import JsonDiff, JsonDiffOperation, UnappliedJsonDiffs
from replicator.binlog.schema import ColumnDef
from replicator.binlog.stream import BinlogFileDecoder
from replicator.binlog.values import ABSENT, Geometry, InvalidTemporal
from replicator.dump import RowChangeFormatter, json_lines
from tests.corpus.util import file_bytes
from tests.harness.dump_reference import reference_output
from tests.hypothesis_budget import examples

DATA = Path(__file__).resolve().parents[1] / "data"
SAMPLES = sorted(p.name for p in DATA.glob("*.0000*"))


def _decoded(path: Path) -> list[ev.Event]:
    """The events of a file, up to the first one that does not decode or is an incident
    (dump stops there: tests/corpus/test_pipeline_events.py)."""
    decoder = BinlogFileDecoder(path.name.removesuffix(".gz"))
    decoder.feed(file_bytes(path))
    events: list[ev.Event] = []
    try:
        while not isinstance(event := decoder.next_event(), _NeedData):
            if isinstance(event, ev.IncidentEvent) and event.incident != 0:
                break
            events.append(event)
        decoder.finish()
    except DecodeError:
        pass
    return events


def _assert_as_reference(events: list[ev.Event]) -> bytes:
    formatter = RowChangeFormatter()
    printed = b"".join(json_lines(events, formatter))
    expected, reference = reference_output(events)
    assert printed.splitlines() == expected.splitlines()
    assert printed == expected
    stats = formatter.stats
    assert (stats.events, stats.transactions, stats.row_changes, stats.invalid_temporals) == (
        reference.events,
        reference.transactions,
        reference.row_changes,
        reference.invalid_temporals,
    )
    return printed


@pytest.mark.parametrize("name", SAMPLES)
def test_sample_files_print_as_the_reference(name: str) -> None:
    assert _assert_as_reference(_decoded(DATA / name))


def _corpus_files() -> list[str]:
    from tests.conftest import CORPUS_DIR

    if not CORPUS_DIR.is_dir():
        return ["<corpus absent>"]
    return sorted(
        str(p.relative_to(CORPUS_DIR))
        for p in CORPUS_DIR.rglob("*")
        if p.is_file()
        and not p.name.endswith((".md", ".json", ".txt"))
        and "_reference-decodes" not in p.parts
        and p.parent.name != "vitess"
    )


@pytest.mark.parametrize("rel", _corpus_files())
def test_corpus_files_print_as_the_reference(corpus_dir: Path, rel: str) -> None:
    _assert_as_reference(_decoded(corpus_dir / rel))


def test_the_corpus_holds_the_hard_cases(corpus_dir: Path) -> None:
    """The files above cover what the compiled encoders treat apart (else they prove less)."""
    seen: set[str] = set()
    for rel in _corpus_files():
        for event in _decoded(corpus_dir / rel):
            inner = event.events if isinstance(event, ev.TransactionPayloadEvent) else (event,)
            for rows in (e for e in inner if isinstance(e, ev.RowsEvent)):
                for image in (*rows.rows, *rows.after):
                    seen.update(type(v).__name__ for v in image)
                    seen.update("ABSENT" for v in image if v is ABSENT)
    assert {"Decimal", "float", "list", "date", "datetime", "timedelta", "bytes"} <= seen
    assert {"UnappliedJsonDiffs", "ABSENT", "str", "int", "NoneType"} <= seen


# ------------------------------------------------------------------------- hand-made events

HEADER = ev.EventHeader(1_700_000_123, 30, 7, 100, 0, 0)


def _table(*columns: tuple[str | None, int, int], name: str = "t") -> ev.TableMapEvent:
    defs = tuple(
        ColumnDef(index=i, type=kind, meta=meta, name=column)
        for i, (column, kind, meta) in enumerate(columns)
    )
    return ev.TableMapEvent(HEADER, "bin.000001", 4, 100, 1, 0, "db", name, defs, (), True)


def _rows(
    table: ev.TableMapEvent,
    kind: ev.RowsKind,
    rows: Sequence[tuple[object, ...]],
    after: Sequence[tuple[object, ...]] | None = None,
) -> ev.RowsEvent:
    width = len(table.columns)

    def vectors(images: Sequence[tuple[object, ...]]) -> tuple[list[object] | None, ...]:
        """One list per column; a column absent from every image is not in the block."""
        if not images:
            return tuple([] for _ in range(width))
        return tuple(
            None if all(v is ABSENT for v in values) else list(values)
            for values in zip(*images, strict=True)
        )

    block = Block(len(rows), vectors(rows), None if after is None else vectors(after),
                  (None,) * width)  # fmt: skip
    return ev.RowsEvent(HEADER, "bin.000001", 200, 300, 1, 0, table, kind, block)


T = ColumnType
EVERY_TYPE = _table(
    ("id", T.LONGLONG, 0),
    ("f", T.FLOAT, 4),
    ("d", T.DOUBLE, 8),
    ("dec2", T.NEWDECIMAL, 10 << 8 | 2),
    ("dec6", T.NEWDECIMAL, 20 << 8 | 6),
    ("dec30", T.NEWDECIMAL, 65 << 8 | 30),
    ("day", T.DATE, 0),
    ("at", T.DATETIME2, 6),
    ("ts", T.TIMESTAMP2, 6),
    ("t", T.TIME2, 6),
    ("s", T.VARCHAR, 200),
    ("b", T.BLOB, 2),
    ("g", T.GEOMETRY, 4),
    ("j", T.JSON, 4),
    ("v", T.VECTOR, 4),
    ("e", T.ENUM, 1),
    ("bits", T.BIT, 8 << 8),
    (None, T.YEAR, 0),  # no name in the binlog: keyed "@18"
)
UTC = dt.UTC
FULL_ROWS: list[tuple[object, ...]] = [
    (
        1,
        1.100000023841858,
        0.1,
        Decimal("-12.34"),
        Decimal("0.000001"),
        Decimal("0E-30"),
        dt.date(2026, 1, 2),
        dt.datetime(2026, 1, 2, 3, 4, 5, 678000),
        dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        dt.timedelta(hours=-507, minutes=-48, seconds=-27),
        'caf\u00e9 \U0001f600 "q" \\ \n\t\x00\x1f\x7f \u2028',
        b"\x00\xff\x00",
        Geometry(b"\x01\x01\x00\x00\x00" + bytes(16), 4326),
        '{"a": [1, 2.5, "x"]}',
        [1.0, -1.0, 0.0, 1e-05, 3.4028234663852886e38],
        "b",
        18446744073709551615,
        2155,
    ),
    (
        2,
        1.401298464324817e-45,
        5e-324,
        Decimal("99999999.99"),
        Decimal("-0.000000"),
        Decimal("-0.000000000000000000000000000001"),
        dt.date(18, 4, 1),
        dt.datetime(18, 4, 1, 12, 34, 56),
        dt.datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
        dt.timedelta(days=34, hours=22, minutes=59, seconds=59, microseconds=1),
        "",
        b"",
        Geometry(b"", 0),
        "null",
        [],
        "",
        0,
        0,
    ),
    (
        3,
        -3.4028234663852886e38,
        float("nan"),
        None,
        None,
        Decimal("12345678901234567890123456789012345.123456789012345678901234567890"),
        InvalidTemporal("0000-00-00"),
        InvalidTemporal("0000-01-21 10:11:12.500000", -62168694527500000),
        InvalidTemporal("0000-00-00 00:00:00"),
        dt.timedelta(0),
        None,
        None,
        None,
        None,
        [float("inf"), -1e-07],
        None,
        None,
        None,
    ),
    (4, 0.0, -0.0, *([None] * 15)),
    (5, 1e16, float("-inf"), *([None] * 15)),
    (6, 9.999999999999999e-05, 0.0001, *([None] * 15)),
    (7, -1e-300, 1.7976931348623157e308, *([None] * 15)),
]


def _partial(row: tuple[object, ...], present: set[int]) -> tuple[object, ...]:
    return tuple(v if i in present else ABSENT for i, v in enumerate(row))


def test_every_kind_of_value_prints_as_the_reference() -> None:
    diffs = UnappliedJsonDiffs(
        (
            JsonDiff(JsonDiffOperation.REPLACE, "$.a", 26),
            JsonDiff(JsonDiffOperation.INSERT, '$."k\u00e9"', {"x": [1, None]}),
            JsonDiff(JsonDiffOperation.REMOVE, "$[0]"),
        )
    )
    json_only = _table(("id", T.LONG, 0), ("doc", T.JSON, 4), name="docs")
    gtid = MariadbGtid(0, 1, 9)
    mariadb_gtid = ev.MariadbGtidEvent(
        HEADER, "bin.000001", 150, 200, gtid, ev.MariadbGtidFlags(0), None, None
    )
    events: list[ev.Event] = [
        _rows(EVERY_TYPE, ev.RowsKind.INSERT, FULL_ROWS),
        mariadb_gtid,
        _rows(EVERY_TYPE, ev.RowsKind.UPDATE, FULL_ROWS[:3], FULL_ROWS[1:4]),
        _rows(EVERY_TYPE, ev.RowsKind.DELETE, FULL_ROWS[::-1]),
        # MINIMAL images: the key before, the changed columns after (other columns present)
        _rows(
            EVERY_TYPE,
            ev.RowsKind.UPDATE,
            [_partial(r, {0}) for r in FULL_ROWS],
            [_partial(r, {1, 3, 7, 14}) for r in FULL_ROWS],
        ),
        _rows(EVERY_TYPE, ev.RowsKind.DELETE, [_partial(r, {0}) for r in FULL_ROWS]),
        _rows(EVERY_TYPE, ev.RowsKind.INSERT, [_partial(r, set()) for r in FULL_ROWS[:2]]),
        _rows(json_only, ev.RowsKind.UPDATE, [(1, ABSENT)], [(1, diffs)]),
        _rows(EVERY_TYPE, ev.RowsKind.INSERT, []),
        ev.TransactionPayloadEvent(
            HEADER,
            "bin.000001",
            400,
            500,
            0,
            0,
            0,
            (_rows(json_only, ev.RowsKind.INSERT, [(2, "[]")]),),
        ),
    ]
    printed = _assert_as_reference(events)
    assert b'"@18":2155' in printed
    assert b'"d":NaN' in printed and b'"f":9.999999999999999e-05' in printed
    assert b'"v":[Infinity,-1e-07]' in printed
    assert b'"dec30":"0.000000000000000000000000000000"' in printed
    assert b'"at":"0018-04-01 12:34:56"' in printed


def test_values_a_column_type_does_not_predict_print_as_the_reference() -> None:
    """What the compiled code does not convert, ``default`` does, whatever the column's type
    (floats excepted: only FLOAT, DOUBLE and VECTOR columns decode to them)."""
    values = [
        v for row in FULL_ROWS for v in row if not isinstance(v, (float, list)) and v is not None
    ]
    values += [dt.datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=dt.timezone(dt.timedelta(hours=2)))]
    columns = (
        (T.BLOB, 2),
        (T.DATETIME2, 6),
        (T.TIMESTAMP2, 6),
        (T.DATE, 0),
        (T.NEWDECIMAL, 10 << 8 | 2),
    )
    for kind, meta in columns:
        _one_column(kind, meta, values)


def test_a_new_table_shape_with_the_same_name_gets_its_own_encoder() -> None:
    """Encoders are found by the columns' identity first: an equal shape from another
    TABLE_MAP reuses them, a changed one (DDL) is compiled anew."""
    first = _table(("id", T.LONG, 0), ("price", T.NEWDECIMAL, 10 << 8 | 2))
    same = _table(("id", T.LONG, 0), ("price", T.NEWDECIMAL, 10 << 8 | 2))
    altered = _table(("id", T.LONG, 0), ("price", T.DOUBLE, 8))
    _assert_as_reference(
        [
            _rows(first, ev.RowsKind.INSERT, [(1, Decimal("1.50"))]),
            _rows(same, ev.RowsKind.INSERT, [(2, Decimal("2.50"))]),
            _rows(altered, ev.RowsKind.INSERT, [(3, 1e-05)]),
            _rows(first, ev.RowsKind.INSERT, [(4, Decimal("-0.01"))]),
        ]
    )


# ------------------------------------------------------------------------- generated values

SCALES = st.integers(min_value=0, max_value=30)
EXACT = Context(prec=100)


def _one_column(kind: int, meta: int, values: Sequence[object]) -> None:
    table = _table(("id", T.LONG, 0), ("v", kind, meta))
    rows = [(i, v) for i, v in enumerate(values)]
    _assert_as_reference([_rows(table, ev.RowsKind.INSERT, rows)])


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.floats(), min_size=1, max_size=20))
def test_any_double_prints_as_the_reference(values: list[float]) -> None:
    _one_column(T.DOUBLE, 8, list(values))
    _one_column(T.VECTOR, 4, [list(values)])


@settings(deadline=None)
@given(st.integers(min_value=-1074, max_value=1023), st.integers(1, 2**52))
def test_doubles_of_every_exponent_print_as_the_reference(exponent: int, mantissa: int) -> None:
    value = math.ldexp(mantissa / 2**52, exponent)
    _one_column(T.DOUBLE, 8, [value, -value])


@settings(max_examples=examples(150), deadline=None)
@given(st.data(), SCALES)
def test_any_decimal_prints_as_the_reference(data: st.DataObject, scale: int) -> None:
    digits = st.integers(min_value=-(10**35) + 1, max_value=10**35 - 1)
    values = data.draw(st.lists(digits, min_size=1, max_size=10))
    # decoded DECIMALs carry exactly ``scale`` fraction digits
    decimals = [Decimal(v).scaleb(-scale, EXACT) for v in values]
    assert all(d.as_tuple().exponent == -scale for d in decimals)
    _one_column(T.NEWDECIMAL, 65 << 8 | scale, decimals)


@settings(deadline=None)
@given(st.lists(st.datetimes(), min_size=1, max_size=10))
def test_any_datetime_date_and_time_prints_as_the_reference(values: list[dt.datetime]) -> None:
    _one_column(T.DATETIME2, 6, list(values))
    _one_column(T.TIMESTAMP2, 6, [v.replace(tzinfo=UTC) for v in values])
    _one_column(T.DATE, 0, [v.date() for v in values])
    _one_column(T.TIME2, 6, [v - dt.datetime(2000, 1, 1) for v in values])
