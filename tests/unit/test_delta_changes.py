"""The Arrow reader of ``--format delta`` (``replicator.delta.changes``), without Spark.

The type rules (``output_type``, ``widen``, ``unify``, ``conform``) table by table against the
Spark path's (``spark.schema``, ``spark.type_map``), fills as exact scalars, and reading real
landing zones written by the project's own commit protocol (``tests/spark/zone.py``): columns
added (with a constant, a NULL and an expression default), dropped, renamed and widened across
versions, a truncate, a replay whose copies count once (by GTID and by binlog position) and a
compaction whose output is read by its ``_seq`` slices.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from replicator.binlog.constants import ColumnType as CT
from replicator.delta.changes import (
    ArrowModel,
    ArrowRead,
    conform,
    fill_value,
    output_type,
    read_files,
    read_lineage,
    replayed,
    unify,
    widen,
)
from replicator.errors import ConfigError, IntegrityError
from replicator.landed.committed import CommittedFile, committed_files, read_manifests
from replicator.landed.contract import WORKING_COLUMNS
from replicator.landed.lineage import Lineage, plan
from replicator.landed.options import MaterializeOptions
from replicator.sink import compaction as cp
from replicator.storage import LocalStore, ObjectStoreOptions, Store, open_store
from tests.harness.s3 import ACCESS_KEY, REGION, SECRET_KEY, S3Server
from tests.spark.zone import Ddl, Zone, col, int_col, table, text_col

D = pa.decimal128
TS_UTC = pa.timestamp("us", tz="UTC")
NTZ = pa.timestamp("us")
U64_MAX = 2**64 - 1


# ---------------------------------------------------------------------------------- types


@pytest.mark.parametrize(
    ("landed", "shown"),
    [
        (pa.int8(), pa.int8()),
        (pa.uint8(), pa.int16()),
        (pa.uint16(), pa.int32()),
        (pa.uint32(), pa.int64()),
        (pa.uint64(), D(20, 0)),
        (pa.duration("us"), pa.int64()),
        (pa.null(), pa.int32()),
        (NTZ, NTZ),
        (TS_UTC, TS_UTC),
        (D(38, 10), D(38, 10)),
        (pa.list_(pa.float32()), pa.list_(pa.float32())),
        (
            pa.struct([("a", pa.uint32()), ("t", pa.duration("us"))]),
            pa.struct([("a", pa.int64()), ("t", pa.int64())]),
        ),
    ],
)
def test_output_types_are_the_types_spark_shows(landed: pa.DataType, shown: pa.DataType) -> None:
    assert output_type(landed) == shown


def test_a_type_the_landing_zone_never_writes_stops() -> None:
    with pytest.raises(IntegrityError, match="writes no"):
        output_type(pa.large_string())


@pytest.mark.parametrize(
    ("a", "b", "wider"),
    [
        (pa.int8(), pa.int16(), pa.int16()),  # integral ranks
        (pa.int32(), pa.int64(), pa.int64()),
        (pa.int16(), pa.int8(), pa.int16()),
        (pa.int64(), D(20, 0), D(20, 0)),  # BIGINT and BIGINT UNSIGNED
        (pa.int32(), D(5, 2), D(12, 2)),  # integer + decimal: enough digits
        (D(10, 2), D(12, 4), D(12, 4)),
        (D(30, 10), D(30, 25), pa.string()),  # 20 whole + 25 scale digits: past 38
        (pa.int64(), D(38, 20), pa.string()),
        (pa.float32(), pa.float64(), pa.float64()),
        (pa.int32(), pa.float32(), pa.float64()),  # integer or decimal with a float
        (D(10, 2), pa.float32(), pa.float64()),
        (pa.string(), pa.binary(), pa.binary()),
        (pa.string(), pa.date32(), pa.string()),  # anything else
        (NTZ, TS_UTC, pa.string()),
        (pa.int32(), pa.string(), pa.string()),
        (pa.null(), pa.date32(), pa.date32()),
        (pa.list_(pa.int8()), pa.list_(pa.int32()), pa.list_(pa.int32())),
    ],
)
def test_widen_follows_the_spark_rules(a: pa.DataType, b: pa.DataType, wider: pa.DataType) -> None:
    assert widen(a, b) == wider
    assert widen(b, a) == wider


def test_structs_widen_field_by_field_the_newer_fields_first() -> None:
    older = pa.struct([("a", pa.int8()), ("gone", pa.string())])
    newer = pa.struct([("A", pa.int32()), ("b", pa.date32())])
    assert widen(older, newer) == pa.struct(
        [("A", pa.int32()), ("b", pa.date32()), ("gone", pa.string())]
    )


def test_unify_takes_the_newest_columns_spelling_and_order() -> None:
    v1 = pa.schema([("id", pa.int32()), ("Name", pa.string()), ("gone", pa.int8())])
    v2 = pa.schema([("NAME", pa.binary()), ("ID", pa.int64()), ("new", pa.date32())])
    assert unify([v1, v2]) == pa.schema(
        [("NAME", pa.binary()), ("ID", pa.int64()), ("new", pa.date32())]
    )
    assert unify([]) == pa.schema([])


def _values(array: pa.ChunkedArray) -> list[Any]:
    return list(array.to_pylist())


def test_conform_decimals_past_38_digits_as_exact_text() -> None:
    wide = D(30, 10)
    values = pa.array(
        [Decimal("12345678901234567890.0123456789"), Decimal("0E-10"), Decimal("-1.5"), None],
        wide,
    )
    assert _values(conform(values, wide, widen(wide, D(30, 25)))) == [
        "12345678901234567890.0123456789",
        "0.0000000000",
        "-1.5000000000",
        None,
    ]
    assert _values(conform(pa.array([-(2**63)], pa.int64()), pa.int64(), pa.string())) == [
        "-9223372036854775808"
    ]


def test_conform_keeps_bigint_unsigned_exact() -> None:
    landed = pa.array([U64_MAX, 0, None], pa.uint64())
    shown = landed.cast(output_type(pa.uint64()))
    assert _values(conform(shown, D(20, 0), D(25, 2))) == [
        Decimal(U64_MAX).quantize(Decimal("0.01")),
        Decimal("0.00"),
        None,
    ]
    assert _values(conform(pa.array([5], pa.int64()), pa.int64(), D(20, 0))) == [Decimal(5)]


def test_conform_to_double_is_exact_or_stops() -> None:
    assert _values(conform(pa.array([Decimal("0.1")], D(5, 1)), D(5, 1), pa.float64())) == [0.1]
    assert _values(conform(pa.array([2**53], pa.int64()), pa.int64(), pa.float64())) == [
        float(2**53)
    ]
    with pytest.raises(IntegrityError, match="past 2\\*\\*53"):
        conform(pa.array([2**53 + 1], pa.int64()), pa.int64(), pa.float64())


@pytest.mark.parametrize(
    ("src", "value", "text"),
    [
        (pa.float64(), 1.0, "1.0"),
        (pa.float64(), 0.1, "0.1"),
        (pa.float64(), 1e7, "1.0E7"),
        (pa.float64(), 123456.789, "123456.789"),
        (pa.float64(), 0.00012, "1.2E-4"),
        (pa.float64(), -0.0, "-0.0"),
        (pa.float32(), 0.1, "0.1"),  # the float's own shortest digits, not the double's
        (pa.float64(), 5e-324, "4.9E-324"),  # two digits shown: the two closest
        (pa.float32(), 1.401298464324817e-45, "1.4E-45"),
        (pa.float64(), -3e-5, "-3.0E-5"),
        (pa.bool_(), True, "true"),
        (pa.date32(), dt.date(1000, 1, 1), "1000-01-01"),
        (NTZ, dt.datetime(2024, 2, 29, 10, 11, 12, 500000), "2024-02-29 10:11:12.5"),
        (TS_UTC, dt.datetime(2024, 2, 29, 10, 11, 12, tzinfo=dt.UTC), "2024-02-29 10:11:12"),
    ],
)
def test_conform_to_text_as_spark_casts(src: pa.DataType, value: object, text: str) -> None:
    assert _values(conform(pa.array([value, None], src), src, pa.string())) == [text, None]


def test_conform_to_text_stops_on_what_has_no_exact_text() -> None:
    with pytest.raises(IntegrityError, match="not UTF-8"):
        conform(pa.array([b"\xff"]), pa.binary(), pa.string())
    with pytest.raises(IntegrityError, match="as text"):
        conform(pa.array([[1]], pa.list_(pa.int8())), pa.list_(pa.int8()), pa.string())


def test_conform_structs_and_lists_field_by_field() -> None:
    src = pa.struct([("a", pa.int8()), ("b", pa.string())])
    dst = pa.struct([("A", pa.int32()), ("c", pa.date32())])
    values = pa.array([{"a": 1, "b": "x"}, None], src)
    assert _values(conform(values, src, dst)) == [{"A": 1, "c": None}, None]
    lists = pa.array([[1, None], None, []], pa.list_(pa.int8()))
    assert _values(conform(lists.slice(1), pa.list_(pa.int8()), pa.list_(pa.int64()))) == [
        None,
        [],
    ]


# ---------------------------------------------------------------------------------- fills


@pytest.mark.parametrize(
    ("value", "dtype", "expected"),
    [
        (-5, pa.int8(), -5),
        (str(U64_MAX), D(20, 0), Decimal(U64_MAX)),
        ("12.5", D(10, 2), Decimal("12.50")),
        ("-1.5", pa.string(), "-1.5"),  # DECIMAL(p > 38) lands as text
        (1.5, pa.float32(), 1.5),
        (0.1, pa.float64(), 0.1),
        (-3020399000000, pa.int64(), -3020399000000),  # TIME -838:59:59 in microseconds
        ("1000-01-01", pa.date32(), dt.date(1000, 1, 1)),
        ("2024-02-29T10:11:12.500000", NTZ, dt.datetime(2024, 2, 29, 10, 11, 12, 500000)),
        ("2024-02-29T10:11:12Z", TS_UTC, dt.datetime(2024, 2, 29, 10, 11, 12, tzinfo=dt.UTC)),
        ({"base64": "AP8Q"}, pa.binary(), b"\x00\xff\x10"),
        ([1, 2], pa.list_(pa.int8()), [1, 2]),
        (True, pa.bool_(), True),
    ],
)
def test_fill_values_are_exact(value: Any, dtype: pa.DataType, expected: Any) -> None:
    found = fill_value(value, dtype)
    assert found is not None and found.type == dtype and found.as_py() == expected


@pytest.mark.parametrize(
    ("value", "dtype"),
    [
        (128, pa.int8()),  # does not fit: unknown, never wrapped
        ("1.5", pa.int32()),
        ("12.345", D(10, 2)),  # would round
        (str(10**20), D(20, 0)),
        ({"base64": "not base64!"}, pa.binary()),
        ({"a": 1}, pa.string()),
        ([1, 300], pa.list_(pa.int8())),
        ("x", pa.date32()),
    ],
)
def test_fill_values_that_do_not_fit_are_unknown(value: Any, dtype: pa.DataType) -> None:
    assert fill_value(value, dtype) is None


def test_a_float_fill_rounds_once() -> None:
    # 1.0000000596046448 lies just above the midpoint of two floats; rounding it to a double
    # first lands on the midpoint, and then to even would give 1.0
    found = fill_value("1.00000005960464478", pa.float32())
    assert found is not None and found.as_py() == 1.0000001192092896
    null = fill_value(None, pa.int32())
    assert null is not None and null.type == pa.int32() and not null.is_valid


# ---------------------------------------------------------------------------------- zones


def fill(text: str | None = None, kind: str = "value") -> str:
    """A column's fill as the schema history writes it (``sink.fill`` converts it)."""
    return json.dumps({"kind": kind, "text": text, "hex": False})


def _dec(index: int, name: str, precision: int, scale: int, **kw: Any) -> Any:
    return col(index, CT.NEWDECIMAL, name, precision << 8 | scale, **kw)


# d.p: every kind of ALTER across four versions; keyed
P1 = table(
    "d.p",
    int_col(0, "id", column_id=1),
    text_col(1, "name", column_id=2),
    col(2, CT.LONG, "qty", unsigned=True, column_id=3),
    _dec(3, "amount", 30, 10, column_id=4),
    key=[0],
)
# RENAME name -> title, ADD big BIGINT UNSIGNED DEFAULT max, ADD r INT DEFAULT (rand())
P2 = table(
    "d.p",
    int_col(0, "id", column_id=1),
    text_col(1, "title", column_id=2),
    col(2, CT.LONG, "qty", unsigned=True, column_id=3),
    _dec(3, "amount", 30, 10, column_id=4),
    col(4, CT.LONGLONG, "big", unsigned=True, column_id=5, fill=fill(str(U64_MAX))),
    int_col(5, "r", column_id=6, fill=fill("(rand() * 10)", kind="expression")),
    key=[0],
)
# MODIFY qty BIGINT, MODIFY amount DECIMAL(30,25), DROP r, ADD note VARCHAR DEFAULT NULL
P3 = table(
    "d.p",
    int_col(0, "id", column_id=1),
    text_col(1, "title", column_id=2),
    col(2, CT.LONGLONG, "qty", column_id=3),
    _dec(3, "amount", 30, 25, column_id=4),
    col(4, CT.LONGLONG, "big", unsigned=True, column_id=5, fill=fill(str(U64_MAX))),
    text_col(5, "note", column_id=7, fill=fill(kind="null")),
    key=[0],
)
# the same with amount widened within 38 digits: decimal(30,10) and (30,12) meet in (32,12)
P3_NARROW = table(
    "d.p",
    *P3.columns[:3],
    _dec(3, "amount", 30, 12, column_id=4),
    *P3.columns[4:],
    key=[0],
)
# d.l: keyless, a column renamed (its before image is the whole row)
L1 = table("d.l", int_col(0, "a", column_id=1), text_col(1, "b", column_id=2))
L2 = table("d.l", int_col(0, "a", column_id=1), text_col(1, "bee", column_id=2))

A1 = Decimal("12345678901234567890.0123456789")


def schema_zone(root: Path, *, wide: bool = True) -> Zone:
    """Three schema versions of d.p and two of d.l, a truncate of d.l, and updates whose
    before images cross the renames; ``wide``: the last ALTER widens amount past 38 digits."""
    last = P3 if wide else P3_NARROW
    zone = Zone(root)
    zone.commit(
        [
            (P1, "c", (1, "a", 4294967295, A1)),
            (P1, "c", (2, "b", 7, Decimal("0E-10"))),
            (L1, "c", (1, "x")),
            (L1, "c", (1, "x")),
        ]
    )
    zone.commit(
        [
            Ddl("alter", "d.p", statement="ALTER TABLE p CHANGE name title, ADD big, ADD r"),
            (P2, "u", (2, "B", 7, Decimal("-1.5"), 5, 3), (2, "b", 7, Decimal("0E-10"), 5, 3)),
            (P2, "c", (3, "c", 0, Decimal("1"), U64_MAX, 4)),
            Ddl("alter", "d.l", statement="ALTER TABLE l RENAME COLUMN b TO bee"),
            (L2, "d", (1, "x")),
            (L1, "c", (9, "old")),
        ]
    )
    zone.commit(
        [
            (L2, "c", (2, "before the truncate")),
            Ddl("truncate", "d.l"),
            (L2, "c", (3, "after")),
            Ddl("alter", "d.p", statement="ALTER TABLE p MODIFY qty BIGINT, ..."),
            (last, "u", (30, "c", -1, Decimal("0.5"), U64_MAX, "n"), (3, "c", 0, 1, 9, None)),
        ]
    )
    return zone


def lineage_of(
    root: Path | Store, name: str
) -> tuple[Lineage, list[CommittedFile], frozenset[int]]:
    """What ``materialize`` hands ``read_lineage`` for table ``name``."""
    manifests = read_manifests(root).manifests
    found = plan(manifests).table(name)
    assert isinstance(found, Lineage)
    files = [f for m in manifests for f in m.files if f.table in found.tables]
    return found, files, frozenset(m.batch for m in manifests if m.rereads)


def read(root: Path | Store, name: str, **options: Any) -> ArrowRead:
    lineage, files, rereading = lineage_of(root, name)
    found = read_lineage(lineage, files, rereading, MaterializeOptions(**options))
    assert found is not None
    return found[0]


def rows(found: ArrowRead, *columns: str) -> list[dict[str, Any]]:
    return list(found.changes.select(list(columns)).to_pylist())


def test_schema_versions_read_in_the_newest_columns(tmp_path: Path) -> None:
    found = read(schema_zone(tmp_path / "landing").root, "d.p")
    assert found.model.schema == pa.schema(
        [
            ("id", pa.int32()),
            ("title", pa.string()),
            ("qty", pa.int64()),  # INT UNSIGNED (bigint) and BIGINT
            # decimal(30,10) and decimal(30,25): exact text, every value at the newest's scale
            ("amount", pa.string()),
            ("big", D(20, 0)),
            ("note", pa.string()),
        ]
    )
    assert found.model.key == ("id",)
    assert found.changes.schema == found.model.changes_schema()
    assert [c for c in found.changes.column_names if c.startswith("_")] == [
        "_op",
        "_seq",
        "_gtid",
        "_ts",
        "_server_id",
        "_binlog_file",
        "_binlog_pos",
        "_absent",
        "_before_key",
        "__replicator_unknown",
    ]
    got = rows(
        found, "_op", "id", "title", "qty", "amount", "big", "note", "_absent", "_before_key"
    )
    assert got == [
        {
            "_op": "c",
            "id": 1,
            "title": "a",
            "qty": 4294967295,
            "amount": "12345678901234567890.0123456789000000000000000",
            "big": Decimal(U64_MAX),  # the fill, exactly
            "note": None,
            "_absent": [],
            "_before_key": None,
        },
        {
            "_op": "c",
            "id": 2,
            "title": "b",
            "qty": 7,
            "amount": "0.0000000000000000000000000",
            "big": Decimal(U64_MAX),
            "note": None,
            "_absent": [],
            "_before_key": None,
        },
        {
            "_op": "u",
            "id": 2,
            "title": "B",
            "qty": 7,
            "amount": "-1.5000000000000000000000000",
            "big": Decimal(5),
            "note": None,
            "_absent": [],
            "_before_key": {"id": 2},
        },
        {
            "_op": "c",
            "id": 3,
            "title": "c",
            "qty": 0,
            "amount": "1.0000000000000000000000000",
            "big": Decimal(U64_MAX),
            "note": None,
            "_absent": [],
            "_before_key": None,
        },
        {
            "_op": "u",
            "id": 30,
            "title": "c",
            "qty": -1,
            "amount": "0.5000000000000000000000000",
            "big": Decimal(U64_MAX),
            "note": "n",
            "_absent": [],
            "_before_key": {"id": 3},
        },
    ]
    assert _values(found.changes.column("__replicator_unknown")) == [[]] * 5
    seqs = _values(found.changes.column("_seq"))
    assert seqs == sorted(seqs)


def test_decimals_widened_within_38_digits_stay_decimals(tmp_path: Path) -> None:
    found = read(schema_zone(tmp_path / "landing", wide=False).root, "d.p")
    assert found.model.schema.field("amount").type == D(32, 12)
    assert _values(found.changes.column("amount")) == [
        A1,
        Decimal(0),
        Decimal("-1.5"),
        Decimal(1),
        Decimal("0.5"),
    ]
    assert found.changes.column("amount").type == D(32, 12)


def test_an_expression_default_is_absent_and_unknown_in_older_rows(tmp_path: Path) -> None:
    zone = schema_zone(tmp_path / "landing")
    # the r column as the newest version: ADD r with an expression default, nothing dropped
    # (amount kept as P3 has it: a DECIMAL's scale lowered stops, as the daemon does)
    p4 = table("d.p", *P2.columns[:3], P3.columns[3], *P2.columns[4:], key=[0])
    zone.commit([Ddl("alter", "d.p"), (p4, "c", (40, "d", 1, Decimal(2), 3, 8))])
    found = read(zone.root, "d.p")
    assert found.model.schema.names == ["id", "title", "qty", "amount", "big", "r"]
    got = rows(found, "id", "r", "_absent", "__replicator_unknown")
    assert [tuple(r.values()) for r in got] == [
        (1, None, ["r"], ["r"]),  # older than r: its value is not in the binlog
        (2, None, ["r"], ["r"]),
        (2, 3, [], []),
        (3, 4, [], []),
        (30, None, ["r"], ["r"]),  # P3 dropped r: a P3 row has no value for it either
        (40, 8, [], []),
    ]
    # the newest version's columns: P3's note is dropped, amount is text (P3 made it wide)
    assert found.model.schema.field("amount").type == pa.string()


def test_a_renamed_column_and_a_truncate_in_a_keyless_table(tmp_path: Path) -> None:
    found = read(schema_zone(tmp_path / "landing").root, "d.l")
    assert found.model.schema == pa.schema([("a", pa.int32()), ("bee", pa.string())])
    assert found.model.key == ()
    assert found.model.identity_type == pa.struct([("a", pa.int32()), ("bee", pa.string())])
    # only the rows after the truncate
    assert rows(found, "_op", "a", "bee", "_before_key") == [
        {"_op": "c", "a": 3, "bee": "after", "_before_key": None}
    ]


def test_read_files_reads_whole_files_with_an_earlier_schema(tmp_path: Path) -> None:
    zone = schema_zone(tmp_path / "landing")
    files = committed_files(zone.root, tables=["d.l"])["d.l"]
    found = read_files(
        "d.l",
        files,
        MaterializeOptions(),
        previous_schema=pa.schema([("a", pa.int64()), ("bee", pa.string())]),
    )
    assert found.model.schema == pa.schema([("a", pa.int64()), ("bee", pa.string())])
    got = rows(found, "_op", "a", "bee", "_before_key")
    assert [(r["_op"], r["a"], r["bee"]) for r in got] == [
        ("c", 1, "x"),
        ("c", 1, "x"),
        ("d", 1, "x"),  # the old name's values under the new name
        ("c", 9, "old"),
        ("c", 2, "before the truncate"),
        ("c", 3, "after"),
    ]
    assert got[2]["_before_key"] is None  # a delete carries its row, no before image
    with pytest.raises(ConfigError, match="key column nope is not among its columns"):
        read_files("d.l", files, MaterializeOptions(keys={"d.l": ["nope"]}))


def test_a_value_a_widened_type_cannot_hold_stops_naming_its_row_change(tmp_path: Path) -> None:
    w1 = table("d.w", int_col(0, "id"), col(1, CT.LONGLONG, "v"), key=[0])
    w2 = table("d.w", int_col(0, "id"), col(1, CT.DOUBLE, "v", 8), key=[0])  # MODIFY v DOUBLE
    zone = Zone(tmp_path / "landing")
    zone.commit([(w1, "c", (1, 2**53)), (w1, "c", (2, 2**53 + 1))])
    zone.commit([Ddl("alter", "d.w"), (w2, "c", (3, 0.5))])
    with pytest.raises(
        IntegrityError,
        match=r"table d\.w, column v: cannot show int64 values past 2\*\*53 as double exactly "
        r"\(the row change at _seq 2, binlog mysql-bin\.000001:1002\)",
    ):
        read(zone.root, "d.w")


# d.e: created, no row yet; its columns come from the create record's schema
E1 = table("d.e", int_col(0, "id"), col(1, CT.LONGLONG, "u", unsigned=True), key=[0])


def test_a_table_without_rows_has_the_columns_its_create_record_gives(tmp_path: Path) -> None:
    zone = schema_zone(tmp_path / "landing")
    zone.commit([Ddl("create", "d.e", version=E1)])
    found = read(zone.root, "d.e")
    assert found.model.schema == pa.schema([("id", pa.int32()), ("u", D(20, 0))])
    assert found.model.key == ("id",)
    assert found.changes.num_rows == 0
    assert found.changes.schema == found.model.changes_schema()
    zone.commit([Ddl("create", "d.none")])  # a record without a schema: nothing to show
    lineage, files, rereading = lineage_of(zone.root, "d.none")
    assert read_lineage(lineage, files, rereading, MaterializeOptions()) is None


def test_a_column_named_like_a_working_column_is_refused() -> None:
    with pytest.raises(ConfigError, match="materialize working column"):
        ArrowModel("d.t", pa.schema([("__replicator_event", pa.int8())]), ())


def test_both_formats_refuse_the_same_working_column_names() -> None:
    # here, not at the top: pyspark takes a while to import (its Python side only, no JVM)
    from pyspark.sql import types as T

    from replicator.spark import merge
    from replicator.spark.merge import TableModel

    # the list names every working column the merge adds
    assert {
        merge.META_COL,
        merge.BKEY_COL,
        merge.EVENT_COL,
        merge.ABSENT_LOWER,
        merge.UNKNOWN_LOWER,
        merge.UNKNOWN,
    } == WORKING_COLUMNS
    for name in sorted(WORKING_COLUMNS):
        with pytest.raises(ConfigError, match="materialize working column"):
            ArrowModel("d.t", pa.schema([(name, pa.int8())]), ())
        with pytest.raises(ConfigError, match="materialize working column"):
            TableModel("d.t", T.StructType([T.StructField(name, T.ByteType())]), ())


ITEMS = table("shop.items", int_col(0, "id"), text_col(1, "name"), key=[0])
LOG = table("shop.log", int_col(0, "a"), text_col(1, "b"))  # no primary key


def replay_zone(root: Path, *, gtids: bool = True) -> Zone:
    zone = Zone(root, gtids=gtids)
    zone.commit([(LOG, "c", (1, "x")), (ITEMS, "c", (1, "a"))])
    zone.commit([(LOG, "c", (1, "x")), (ITEMS, "u", (1, "b"), (1, "a"))])
    zone.replay([1, 2])
    zone.replay([2])  # replayed twice
    zone.commit([(LOG, "c", (2, "y"))])
    return zone


@pytest.mark.parametrize("gtids", [True, False], ids=["gtid", "position"])
def test_replayed_copies_count_once(tmp_path: Path, gtids: bool) -> None:
    zone = replay_zone(tmp_path / "landing", gtids=gtids)
    log = read(zone.root, "shop.log")
    assert rows(log, "_seq", "a", "b") == [
        {"_seq": 1, "a": 1, "b": "x"},
        {"_seq": 3, "a": 1, "b": "x"},  # the same row again, in another transaction: kept
        {"_seq": 11, "a": 2, "b": "y"},  # 5, 7 and 9 were copies
    ]
    items = read(zone.root, "shop.items")
    assert rows(items, "_seq", "_op", "name", "_before_key") == [
        {"_seq": 2, "_op": "c", "name": "a", "_before_key": None},
        {"_seq": 4, "_op": "u", "name": "b", "_before_key": {"id": 1}},
    ]


def test_snapshot_chunks_read_at_one_point_are_no_copies_of_each_other(tmp_path: Path) -> None:
    """A snapshot's chunks share the read point's identity (no GTID, one binlog position),
    each in its own batch, also one in a batch that re-reads (after `checkpoint set`, the
    source idle): a replay re-reads the binlog, never a snapshot, so none is a copy."""
    zone = Zone(tmp_path / "landing", gtids=False)
    zone.snapshot(LOG, [(1, "x"), (2, "y")], at=4711)
    zone.snapshot(LOG, [(3, "z")], at=4711)
    zone.snapshot(LOG, [(4, "w")], at=4711, replay=True)  # the next chunk, while re-reading
    assert rows(read(zone.root, "shop.log"), "_seq", "_op", "a") == [
        {"_seq": 1, "_op": "r", "a": 1},
        {"_seq": 2, "_op": "r", "a": 2},
        {"_seq": 3, "_op": "r", "a": 3},
        {"_seq": 4, "_op": "r", "a": 4},
    ]


def test_files_with_the_same_name_stop_a_replay_read(tmp_path: Path) -> None:
    zone = replay_zone(tmp_path / "landing")
    lineage, files, rereading = lineage_of(zone.root, "shop.log")
    twin = files[0]
    copy = tmp_path / "elsewhere" / twin.name
    copy.parent.mkdir()
    shutil.copy(twin.path, copy)
    moved = CommittedFile(twin.table, copy, 99, twin.rows, twin.first_seq, twin.last_seq)
    with pytest.raises(IntegrityError, match="have the same name"):
        read_lineage(lineage, [*files, moved], rereading, MaterializeOptions())


def compacted_zone(root: Path) -> Zone:
    """Batches compacted into one output (retention 0: only the output is left), the first
    copies of a replay among them, a truncate in between."""
    zone = Zone(root)
    for n in range(1, 5):
        zone.commit([(ITEMS, "c", (n, f"n{n}")), (LOG, "c", (n % 2, "x"))])
    zone.commit([(LOG, "c", (9, "before")), Ddl("truncate", "shop.log"), (LOG, "c", (9, "after"))])
    zone.replay([2, 3])
    zone.commit([(ITEMS, "u", (1, "one"), (1, "n1")), (LOG, "c", (5, "late"))])
    return zone


def compact(zone: Zone) -> None:
    settings = cp.Settings(older_than=0.0, target_bytes=1 << 30, retention=0.0)
    result = cp.run_compaction(LocalStore(zone.root), settings)
    assert result.outputs


def test_a_compaction_reads_the_same_changes(tmp_path: Path) -> None:
    zone = compacted_zone(tmp_path / "landing")
    before = {n: read(zone.root, n).changes for n in ("shop.items", "shop.log")}
    compact(zone)
    _, files, _ = lineage_of(zone.root, "shop.items")
    assert any(f.within is not None for f in files)  # slices of an output
    after = {n: read(zone.root, n).changes for n in ("shop.items", "shop.log")}
    assert after == before
    assert _values(before["shop.items"].column("id")) == [1, 2, 3, 4, 1]
    assert _values(before["shop.log"].column("b")) == ["after", "late"]


def test_an_object_store_reads_the_same_changes(tmp_path: Path, s3_server: S3Server) -> None:
    zone = compacted_zone(tmp_path / "landing")
    compact(zone)
    store = open_store(
        f"s3://{s3_server.bucket('delta-changes')}/zone",
        ObjectStoreOptions(
            endpoint=s3_server.endpoint, region=REGION, access_key=ACCESS_KEY, secret_key=SECRET_KEY
        ),
    )
    for path in sorted(zone.root.rglob("*")):
        if path.is_file():
            store.write(path.relative_to(zone.root).as_posix(), path.read_bytes())
    _, files, _ = lineage_of(store, "shop.items")
    assert {type(f.path) for f in files} == {str}  # s3:// URLs, read through the store
    for name in ("shop.items", "shop.log"):
        assert read(store, name).changes == read(zone.root, name).changes


def test_a_file_changed_after_its_commit_stops_the_read(tmp_path: Path) -> None:
    zone = compacted_zone(tmp_path / "landing")
    _, files, _ = lineage_of(zone.root, "shop.items")
    path = Path(files[-1].path)
    path.write_bytes(path.read_bytes() + b"x")
    with pytest.raises(IntegrityError, match="bytes, its manifest says"):
        read(zone.root, "shop.items")


def test_replayed_names_the_copies_of_a_replay(tmp_path: Path) -> None:
    zone = replay_zone(tmp_path / "landing")
    _, files, rereading = lineage_of(zone.root, "shop.log")
    assert sum(f.rows for f in files) == 6  # 1, 3, their copies 5, 7 and again 9; then 11
    drop = replayed(files, rereading)
    assert drop is not None and sorted(drop.to_pylist()) == [5, 7, 9]
    assert replayed(files, frozenset()) is None
