"""Type fidelity through PySpark: every column type of tests/unit/test_parquet_writer.py's CASES,
written by the real writer, read with ``spark.read.parquet`` (no options) and after
``materialize``, shows the Spark type ``type_map`` documents and the documented value."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from replicator.binlog.constants import ColumnType as CT
from replicator.binlog.schema import ColumnDef
from replicator.landed.committed import file_schema
from replicator.sink.arrow_types import column_name
from replicator.sink.changes import TableVersion
from replicator.spark.materialize import materialize
from replicator.spark.type_map import spark_schema, spark_type_name
from tests.spark.zone import Zone
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
