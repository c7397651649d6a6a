"""Type fidelity through PySpark: every column type of tests/unit/test_parquet_writer.py's CASES,
written by the real writer, read with ``spark.read.parquet`` (no options) and after
``materialize``, shows the Spark type ``type_map`` documents and the documented value. A
DECIMAL key widened past 38 digits is text at its newest version's scale, one key across the
ALTERs (``DECIMAL_KEY_BATCHES``, which ``test_delta_changes_equal`` reads with both readers)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from replicator.binlog.constants import ColumnType as CT
from replicator.binlog.schema import ColumnDef
from replicator.errors import IntegrityError
from replicator.landed.committed import file_schema
from replicator.landed.options import MaterializeOptions
from replicator.sink.arrow_types import column_name
from replicator.sink.changes import TableVersion
from replicator.spark.materialize import materialize
from replicator.spark.type_map import spark_schema, spark_type_name
from tests.spark.zone import Ddl, Item, Zone
from tests.typed import of_type
from tests.unit.test_parquet_writer import ALL_TYPES, CASES, TS, all_types_changes, write

pytestmark = pytest.mark.spark


def spark_value(arrow_type: pa.DataType, value: object) -> object:
    """What PySpark's collect() documents for a value pyarrow reads back as ``value``."""
    if value is None:
        return None
    if arrow_type == pa.uint64():
        return Decimal(of_type(int, value))
    if pa.types.is_duration(arrow_type):
        return of_type(dt.timedelta, value) // dt.timedelta(microseconds=1)
    if pa.types.is_timestamp(arrow_type) and arrow_type.tz is not None:
        # the driver runs with TZ=UTC
        return of_type(dt.datetime, value).astimezone(dt.UTC).replace(tzinfo=None)
    return value


def collected(value: object) -> object:
    return bytes(value) if isinstance(value, bytearray) else value


def expected_columns() -> dict[str, tuple[str, list[object]]]:
    out: dict[str, tuple[str, list[object]]] = {}
    for column, arrow_type, values, read_back in CASES:
        shown = [spark_value(arrow_type, v) for v in (read_back or values)]
        out[column_name(column)] = (spark_type_name(arrow_type), shown)
    return out


def test_every_landing_type_through_spark(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "all.parquet"
    write(path, ALL_TYPES, all_types_changes(), with_before=True, with_absent=True)
    frame = spark.read.parquet(str(path))
    rows = frame.orderBy("_seq").collect()
    types = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
    for name, (spark_type, values) in expected_columns().items():
        assert types[name] == spark_type, name
        assert [collected(r[name]) for r in rows] == values, name
    assert types["_ts"] == "timestamp"
    assert {r["_ts"] for r in rows} == {TS.replace(tzinfo=None)}
    assert types["_seq"] == "bigint"
    assert types["_absent"] == "array<string>"
    assert types["_before"].startswith("struct<c0:tinyint,c1:smallint,")
    # what materialize hands the reader instead of letting it read a footer: the same
    # schema, nullability included
    assert spark_schema(file_schema(path)) == frame.schema


def test_spot_values() -> None:
    """The documented values that matter most, spelled out."""
    columns = expected_columns()
    assert columns["c9"] == (
        "decimal(20,0)",
        [Decimal(0), None, Decimal(18446744073709551615), Decimal(1)],
    )
    assert columns["c19"][0] == "bigint"
    assert columns["c19"][1][0] == -3020399000000  # TIME -838:59:59 in microseconds
    assert columns["c13"][0] == "string"  # DECIMAL(65,30)
    assert columns["c17"][0] == "timestamp_ntz"  # DATETIME
    assert columns["c40"][0] == "int"  # the NULL type


def test_every_type_survives_materialize(spark: SparkSession, tmp_path: Path) -> None:
    pk = ColumnDef(index=len(CASES), type=CT.LONG, meta=0, name="pk")
    version = TableVersion("shop", "types", (*ALL_TYPES.columns, pk), (len(CASES),))
    rows = list(zip(*(case[2] for case in CASES), strict=True))
    zone = Zone(tmp_path / "landing")
    zone.commit([(version, "c", (*row, i)) for i, row in enumerate(rows)])
    out = tmp_path / "out"
    materialize(spark, zone.root, out)

    frame = spark.read.parquet(str(out / "shop" / "types"))
    got = frame.orderBy("pk").collect()
    types = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
    for name, (spark_type, values) in expected_columns().items():
        assert types[name] == spark_type, name
        assert [collected(r[name]) for r in got] == values, name
    assert types["pk"] == "int"
    assert frame.columns[-1] == "pk"
    assert "_ts" not in types  # metadata is dropped unless asked for


def decimal_key(precision: int, scale: int) -> TableVersion:
    """shop.dk: a DECIMAL(``precision``,``scale``) primary key ``id`` and an INT ``v``."""
    key = ColumnDef(
        index=0, type=CT.NEWDECIMAL, meta=precision << 8 | scale, name="id", column_id=1
    )
    value = ColumnDef(index=1, type=CT.LONG, meta=0, name="v", column_id=2)
    return TableVersion("shop", "dk", (key, value), (0,))


DK1, DK2, DK3 = decimal_key(30, 2), decimal_key(40, 4), decimal_key(45, 6)
# batches of shop.dk, each with the rows SELECT shows after it: the key widened past 38
# digits (decimal to text, then text to text), updates and deletes after each ALTER finding
# the rows written before it (the ALTER rewrote the stored values at the new scale)
DECIMAL_KEY_BATCHES: list[tuple[list[Item], list[tuple[Any, int]]]] = [
    (
        [(DK1, "c", (Decimal(k), 1)) for k in ("1.50", "2.00", "3.00")],
        [(Decimal("1.50"), 1), (Decimal("2.00"), 1), (Decimal("3.00"), 1)],
    ),
    (
        [
            Ddl("alter", "shop.dk", statement="ALTER TABLE dk MODIFY id DECIMAL(40,4)"),
            (DK2, "u", (Decimal("1.5000"), 2), (Decimal("1.5000"), 1)),
            (DK2, "d", (Decimal("2.0000"), 1)),
        ],
        [("1.5000", 2), ("3.0000", 1)],
    ),
    (
        [
            Ddl("alter", "shop.dk", statement="ALTER TABLE dk MODIFY id DECIMAL(45,6)"),
            (DK3, "u", (Decimal("3.000000"), 3), (Decimal("3.000000"), 1)),
            (DK3, "c", (Decimal("4.000000"), 4)),
        ],
        [("1.500000", 2), ("3.000000", 3), ("4.000000", 4)],
    ),
    (
        [
            (DK3, "d", (Decimal("1.500000"), 2)),
            (DK3, "u", (Decimal("4.000000"), 5), (Decimal("4.000000"), 4)),
        ],
        [("3.000000", 3), ("4.000000", 5)],
    ),
]


def _dk_rows(spark: SparkSession, out: Path) -> list[tuple[Any, int]]:
    frame = spark.read.parquet(str(out / "shop" / "dk"))
    return [(r["id"], r["v"]) for r in frame.orderBy("id").collect()]


def test_a_decimal_key_widened_past_38_digits_stays_one_key(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A DECIMAL key widened past 38 digits becomes text, every version's values at the
    scale of the newest (what SELECT shows after the ALTER), so a key is one key across the
    ALTER: an update after it replaces the row, a delete removes it (each version at its own
    scale made '1.50' and '1.5000' two rows). Incrementally and rebuilt from scratch."""
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    for batch, want in DECIMAL_KEY_BATCHES:
        zone.commit(batch)
        materialize(spark, zone.root, out)
        assert _dk_rows(spark, out) == want
    full = tmp_path / "full"
    materialize(spark, zone.root, full, options=MaterializeOptions(full_refresh=True))
    assert _dk_rows(spark, full) == DECIMAL_KEY_BATCHES[-1][1]
    types = spark.read.parquet(str(full / "shop" / "dk")).schema
    assert [f.dataType.simpleString() for f in types.fields] == ["string", "int"]


def test_a_decimal_whose_newest_scale_is_smaller_stops(spark: SparkSession, tmp_path: Path) -> None:
    """An ALTER that lowers a DECIMAL's scale rounds the stored values unlogged (the daemon
    stops at it): the text of the older values at the newer scale is unknown, so the run
    stops naming the column rather than show them at another scale."""
    zone = Zone(tmp_path / "landing")
    zone.commit([(decimal_key(40, 4), "c", (Decimal("1.2345"), 1))])
    zone.commit([Ddl("alter", "shop.dk"), (decimal_key(45, 2), "c", (Decimal("2.00"), 1))])
    stop = r"table shop\.dk, column id: its newest version has 2 decimals, an older one 4"
    with pytest.raises(IntegrityError, match=stop):
        materialize(spark, zone.root, tmp_path / "out")


def test_text_of_another_form_stops_rather_than_be_padded(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The landing zone's text of a DECIMAL(40,4) has exactly four decimals: other text (a
    file not written by replicator) stops the job naming the column once it would be
    padded to the newest version's scale, never padded to a wrong value."""
    zone = Zone(tmp_path / "landing")
    zone.commit([(DK2, "c", (Decimal("1.5000"), 1)), (DK2, "c", ("1.5", 2))])
    zone.commit([Ddl("alter", "shop.dk"), (DK3, "c", (Decimal("2.000000"), 1))])
    stop = r"table shop\.dk, column id: '1\.5' is not the text of a DECIMAL with 4 decimals"
    with pytest.raises(IntegrityError, match=stop):
        materialize(spark, zone.root, tmp_path / "out")
