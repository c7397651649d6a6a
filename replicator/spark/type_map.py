"""What Spark 3.5 shows for each Arrow type the landing zone writes (``sink.arrow_types``).

``spark.read.parquet`` with no options (tested in ``tests/spark/test_types.py`` for every
column type of ``tests/unit/test_parquet_writer.py``):

| MySQL/MariaDB column | Arrow (Parquet) | Spark type | PySpark ``collect()`` value |
|---|---|---|---|
| TINYINT / SMALLINT | int8 / int16 | tinyint / smallint | int |
| MEDIUMINT / INT / BIGINT | int32 / int32 / int64 | int / int / bigint | int |
| TINYINT / SMALLINT UNSIGNED | uint8 / uint16 | smallint / int | int |
| MEDIUMINT / INT UNSIGNED | uint32 | bigint | int |
| BIGINT UNSIGNED, BIT(64), 8-byte SET mask | uint64 | decimal(20,0) | Decimal, max exact |
| YEAR | int16 | smallint | int |
| FLOAT / DOUBLE | float32 / float64 | float / double | float |
| DECIMAL(p,s), p <= 38 | decimal128(p,s) | decimal(p,s) | Decimal |
| DECIMAL(p,s), p > 38 | string (exact digits) | string | str; ``cast`` where 38 digits suffice |
| DATE | date32 | date | date (1000-01-01 reads back, no rebase) |
| DATETIME(fsp) | timestamp[us] | timestamp_ntz | naive datetime, as stored |
| TIMESTAMP(fsp), ``_ts`` | timestamp[us, UTC] | timestamp | naive datetime, driver's ``TZ`` |
| TIME(fsp) | duration[us] | bigint | int microseconds, sign and hours > 24 kept |
| CHAR/VARCHAR/TEXT, ENUM, SET, JSON, DECIMAL > 38 | string | string | str |
| BINARY/VARBINARY/BLOB, GEOMETRY (WKB) | binary | binary | bytearray |
| ENUM / SET without labels, BIT(n <= 63) | int64 | bigint | int |
| VECTOR | list<float32> | array<float> | list of float |
| NULL | null | int (always null) | None |

Notes:

* Spark has no unsigned types: it widens them on read, so nothing wraps.
* Parquet has no interval type: pyarrow writes TIME as a plain INT64 and restores
  ``duration`` from the Arrow schema it embeds; Spark ignores that and shows bigint
  microseconds (``-838:59:59`` is -3020399000000). ``make_dt_interval(0, 0, 0, col / 1e6)``
  or ``col / 1e6`` seconds turn it into an interval or a number.
* TIMESTAMP values are instants: Spark shows them in ``spark.sql.session.timeZone``, and
  PySpark's ``collect()`` turns them into naive datetimes in the *Python* process's local
  zone; run the driver with ``TZ=UTC`` (or compare with ``unix_micros``) to see UTC.
  DATETIME is ``timestamp_ntz``: no zone is ever applied.
* Spark's decimals stop at 38 digits, hence the string for wider DECIMALs. When an ALTER
  TABLE widens a DECIMAL past 38 digits, ``materialize`` turns the older decimal values into
  the same exact text at the scale of the newest version, as the source shows them after
  the ALTER (``format_number`` without its grouping commas; Spark's own cast would print
  ``0E-10``; ``landed.decimal_text``).
* The files carry ``org.apache.spark.version`` so that Spark reads dates before 1582 and
  timestamps before 1900 as written (proleptic Gregorian) instead of refusing them.
"""

from __future__ import annotations

import re

import pyarrow as pa
from pyspark.sql import types as T

__all__ = ["spark_schema", "spark_type", "spark_type_name"]

_SIMPLE: dict[pa.DataType, str] = {
    pa.int8(): "tinyint",
    pa.int16(): "smallint",
    pa.int32(): "int",
    pa.int64(): "bigint",
    pa.uint8(): "smallint",
    pa.uint16(): "int",
    pa.uint32(): "bigint",
    pa.uint64(): "decimal(20,0)",
    pa.float32(): "float",
    pa.float64(): "double",
    pa.string(): "string",
    pa.binary(): "binary",
    pa.date32(): "date",
    pa.timestamp("us"): "timestamp_ntz",
    pa.timestamp("us", tz="UTC"): "timestamp",
    pa.duration("us"): "bigint",
    pa.null(): "int",
    pa.bool_(): "boolean",
}


def spark_type_name(arrow_type: pa.DataType) -> str:
    """The type Spark 3.5 reads a landing-zone Arrow type as (``DataType.simpleString()``)."""
    simple = _SIMPLE.get(arrow_type)
    if simple is not None:
        return simple
    if pa.types.is_decimal(arrow_type):
        return f"decimal({arrow_type.precision},{arrow_type.scale})"
    if pa.types.is_list(arrow_type):
        return f"array<{spark_type_name(arrow_type.value_type)}>"
    if pa.types.is_struct(arrow_type):
        fields = ",".join(
            f"{arrow_type.field(i).name}:{spark_type_name(arrow_type.field(i).type)}"
            for i in range(arrow_type.num_fields)
        )
        return f"struct<{fields}>"
    raise ValueError(f"the landing zone writes no {arrow_type} column")


_LEAVES: dict[str, T.DataType] = {
    "tinyint": T.ByteType(),
    "smallint": T.ShortType(),
    "int": T.IntegerType(),
    "bigint": T.LongType(),
    "float": T.FloatType(),
    "double": T.DoubleType(),
    "string": T.StringType(),
    "binary": T.BinaryType(),
    "date": T.DateType(),
    "timestamp": T.TimestampType(),
    "timestamp_ntz": T.TimestampNTZType(),
    "boolean": T.BooleanType(),
}
_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")


def spark_type(arrow_type: pa.DataType) -> T.DataType:
    """``spark_type_name`` as a Spark type (what ``spark.read.parquet`` would show)."""
    if pa.types.is_struct(arrow_type):
        return T.StructType(
            [
                T.StructField(arrow_type.field(i).name, spark_type(arrow_type.field(i).type))
                for i in range(arrow_type.num_fields)
            ]
        )
    if pa.types.is_list(arrow_type):
        return T.ArrayType(spark_type(arrow_type.value_type))
    name = spark_type_name(arrow_type)
    decimal = _DECIMAL.fullmatch(name)
    if decimal is not None:
        return T.DecimalType(int(decimal[1]), int(decimal[2]))
    return _LEAVES[name]


def spark_schema(schema: pa.Schema) -> T.StructType:
    """A landing-zone file's schema exactly as ``spark.read.parquet`` infers it (every field
    nullable, as Spark makes a file's schema; tested for every type), without reading the
    file: a table without rows has none, and a reader given it runs no job to read a footer."""
    return T.StructType([T.StructField(f.name, spark_type(f.type)) for f in schema])
