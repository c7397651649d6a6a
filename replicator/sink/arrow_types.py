"""Arrow schemas for landing-zone files: one column type in, one Arrow field out.

Every mapping is chosen so that ``spark.read.parquet`` (Spark 3.5) and ``pyarrow.dataset``
read the file with no options and get the decoded value back exactly (docs/type-mapping.md):

| MySQL/MariaDB column | Arrow | Spark 3.5 reads it as |
|---|---|---|
| TINYINT/SMALLINT/MEDIUMINT/INT/BIGINT | int8/int16/int32/int32/int64 | same widths |
| the same UNSIGNED | uint8/uint16/uint32/uint32/uint64 | smallint/int/bigint/bigint/decimal(20,0) |
| YEAR | int16 (0 for year 0000) | smallint |
| FLOAT / DOUBLE | float32 / float64 | float / double |
| DECIMAL(p,s), p <= 38 | decimal128(p,s) | decimal(p,s) |
| DECIMAL(p,s), p > 38 | string: the exact digits, ``-123.4500`` | string |
| DATE | date32 | date |
| DATETIME(fsp) | timestamp[us] (naive) | timestamp_ntz |
| TIMESTAMP(fsp) | timestamp[us, UTC] | timestamp |
| TIME(fsp) | duration[us] (signed, hours > 24 kept) | bigint: microseconds |
| CHAR/VARCHAR/TEXT with a text charset | string | string |
| BINARY/VARBINARY/BLOB, or text of unknown charset | binary | binary |
| ENUM / SET, labels known | string (SET comma-joined) | string |
| ENUM / SET, labels unknown | int64 index / bitmask (uint64 for an 8-byte SET) | bigint |
| BIT(n), n <= 63 / BIT(64) | int64 / uint64 | bigint / decimal(20,0) |
| JSON (MySQL binary JSON) | string (canonical JSON text) | string |
| GEOMETRY | binary (WKB), or (``sink.geometry_srid``) struct<wkb, srid: uint32> | binary / struct |
| VECTOR | list<float32> | array<float> |
| NULL | null | int (always null) |

Why the two unusual ones:

* DECIMAL above precision 38 (MySQL allows 65) does not fit decimal128, and Spark's
  ``DecimalType`` stops at 38 digits; decimal256 would be exact in Arrow but Spark cannot read
  it. Such columns are written as text with exactly ``scale`` fraction digits and no exponent
  (``format(value, "f")``), which Spark can ``cast`` wherever 38 digits suffice.
* TIME is an interval, not a time of day (-838:59:59 .. 838:59:59). Parquet has no interval
  type, so pyarrow stores duration[us] as a plain INT64 and restores the duration type from
  the Arrow schema it embeds; Spark, which ignores that, reads a bigint of microseconds
  (``-838:59:59`` reads as -3020399000000).

Table columns are always nullable: a NOT NULL column is null in a file where the row image did
not carry it (``_absent``) or held a zero date. Metadata columns follow the table's own, in
this order: ``_op``, ``_seq``, ``_gtid``, ``_ts``, ``_server_id``, ``_binlog_file``,
``_binlog_pos``, then optionally ``_before`` (a struct of the table's fields) and ``_absent``
(names of the columns missing from a partial row image). The schema metadata names the table
(``replicator.table``) and a short hash of its column definitions (``replicator.version``).

It also carries ``org.apache.spark.version``: Spark 3.x refuses to read dates before
1582-10-15 and timestamps before 1900 (READ_ANCIENT_DATETIME) from Parquet files that lack
this key unless ``spark.sql.parquet.datetimeRebaseModeInRead`` is set, because it cannot tell
whether they were written with Spark 2's hybrid calendar. MySQL's DATE starts at 1000-01-01;
Arrow writes the proleptic Gregorian calendar, which a version of 3.0.0 or later tells Spark.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import replace

import pyarrow as pa

from ..binlog.constants import ColumnType
from ..binlog.schema import ColumnDef
from ..errors import IntegrityError, SinkError
from .changes import TableVersion
from .fill import landing_fill

__all__ = [
    "GEOMETRY_SRID",
    "ABSENT_FIELD",
    "FIELD_FILL_KEY",
    "FIELD_ID_KEY",
    "ABSENT_TYPE",
    "BEFORE_FIELD",
    "FIELD_TYPE_KEY",
    "MAX_ARROW_DECIMAL_PRECISION",
    "METADATA_FIELDS",
    "SCHEMA_TABLE_KEY",
    "SCHEMA_VERSION_KEY",
    "SPARK_VERSION_KEY",
    "arrow_field",
    "arrow_schema",
    "column_name",
    "mysql_type_label",
    "real_type",
    "schema_version",
    "UTC_MICROS",
]

MAX_ARROW_DECIMAL_PRECISION = 38  # decimal128, and Spark's DecimalType.MAX_PRECISION
SCHEMA_TABLE_KEY = b"replicator.table"
SCHEMA_VERSION_KEY = b"replicator.version"
FIELD_TYPE_KEY = b"replicator.mysql_type"
# Parquet field ids (pyarrow writes this key as the schema element's field_id): the column's
# stable id from the schema history, so renamed columns are matched across files
FIELD_ID_KEY = b"PARQUET:field_id"
# JSON of the value that rows written before the column was added hold (schema.history fill)
FIELD_FILL_KEY = b"replicator.fill"
# Spark's SPARK_VERSION_METADATA_KEY: >= 3.0.0 without "org.apache.spark.legacyDateTime"
# selects the proleptic Gregorian calendar (DataSourceUtils.datetimeRebaseSpec).
SPARK_VERSION_KEY = b"org.apache.spark.version"
SPARK_CALENDAR_VERSION = b"3.0.0"

UTC_MICROS = pa.timestamp("us", tz="UTC")
METADATA_FIELDS: tuple[pa.Field, ...] = (
    pa.field("_op", pa.string(), nullable=False),
    pa.field("_seq", pa.int64(), nullable=False),
    pa.field("_gtid", pa.string()),
    pa.field("_ts", UTC_MICROS, nullable=False),
    pa.field("_server_id", pa.int64(), nullable=False),
    pa.field("_binlog_file", pa.string(), nullable=False),
    pa.field("_binlog_pos", pa.int64(), nullable=False),
)
BEFORE_FIELD = "_before"
ABSENT_FIELD = "_absent"
ABSENT_TYPE = pa.list_(pa.string())

# MariaDB COMPRESSED columns (include/mysql_com.h): text or bytes like their plain types.
_MARIADB_BLOB_COMPRESSED = 140
_MARIADB_VARCHAR_COMPRESSED = 141

_SIGNED = {
    ColumnType.TINY: pa.int8(),
    ColumnType.SHORT: pa.int16(),
    ColumnType.INT24: pa.int32(),
    ColumnType.LONG: pa.int32(),
    ColumnType.LONGLONG: pa.int64(),
}
_UNSIGNED = {
    ColumnType.TINY: pa.uint8(),
    ColumnType.SHORT: pa.uint16(),
    ColumnType.INT24: pa.uint32(),
    ColumnType.LONG: pa.uint32(),
    ColumnType.LONGLONG: pa.uint64(),
}
_SQL_INT_NAMES = {
    ColumnType.TINY: "TINYINT",
    ColumnType.SHORT: "SMALLINT",
    ColumnType.INT24: "MEDIUMINT",
    ColumnType.LONG: "INT",
    ColumnType.LONGLONG: "BIGINT",
}


def real_type(col: ColumnDef) -> int:
    """The column's type with an unresolved STRING (ENUM/SET in its metadata) resolved."""
    return col.real_type


def column_name(col: ColumnDef) -> str:
    """The column's name, or ``col_<n>`` (1-based) when the binlog and schema lack names."""
    return col.name if col.name is not None else f"col_{col.index + 1}"


def _integer(col: ColumnDef) -> pa.DataType:
    return (_UNSIGNED if col.unsigned else _SIGNED)[ColumnType(col.type)]


def _decimal(col: ColumnDef) -> pa.DataType:
    precision, scale = col.meta >> 8, col.meta & 0xFF
    if precision > MAX_ARROW_DECIMAL_PRECISION:
        return pa.string()
    return pa.decimal128(precision, scale)


def _text_or_bytes(col: ColumnDef) -> pa.DataType:
    return pa.binary() if col.charset is None or col.charset == "binary" else pa.string()


def _enum(col: ColumnDef) -> pa.DataType:
    return pa.int64() if col.enum_values is None else pa.string()


def _set(col: ColumnDef) -> pa.DataType:
    if col.set_values is not None:
        return pa.string()
    # An 8-byte bitmask (33..64 members) can use bit 63: it does not fit int64.
    return pa.uint64() if (col.meta & 0xFF) == 8 else pa.int64()


def _bit(col: ColumnDef) -> pa.DataType:
    return pa.uint64() if col.bit_width > 63 else pa.int64()


def _constant(data_type: pa.DataType) -> Callable[[ColumnDef], pa.DataType]:
    def mapping(col: ColumnDef) -> pa.DataType:
        return data_type

    return mapping


_MAPPINGS: dict[int, Callable[[ColumnDef], pa.DataType]] = {
    ColumnType.TINY: _integer,
    ColumnType.SHORT: _integer,
    ColumnType.INT24: _integer,
    ColumnType.LONG: _integer,
    ColumnType.LONGLONG: _integer,
    ColumnType.YEAR: _constant(pa.int16()),
    ColumnType.FLOAT: _constant(pa.float32()),
    ColumnType.DOUBLE: _constant(pa.float64()),
    ColumnType.NEWDECIMAL: _decimal,
    ColumnType.DATE: _constant(pa.date32()),
    ColumnType.NEWDATE: _constant(pa.date32()),
    ColumnType.DATETIME: _constant(pa.timestamp("us")),
    ColumnType.DATETIME2: _constant(pa.timestamp("us")),
    ColumnType.TIMESTAMP: _constant(UTC_MICROS),
    ColumnType.TIMESTAMP2: _constant(UTC_MICROS),
    ColumnType.TIME: _constant(pa.duration("us")),
    ColumnType.TIME2: _constant(pa.duration("us")),
    ColumnType.VARCHAR: _text_or_bytes,
    ColumnType.VAR_STRING: _text_or_bytes,
    ColumnType.STRING: _text_or_bytes,
    ColumnType.TINY_BLOB: _text_or_bytes,
    ColumnType.BLOB: _text_or_bytes,
    ColumnType.MEDIUM_BLOB: _text_or_bytes,
    ColumnType.LONG_BLOB: _text_or_bytes,
    _MARIADB_BLOB_COMPRESSED: _text_or_bytes,
    _MARIADB_VARCHAR_COMPRESSED: _text_or_bytes,
    ColumnType.ENUM: _enum,
    ColumnType.SET: _set,
    ColumnType.BIT: _bit,
    ColumnType.JSON: _constant(pa.string()),
    ColumnType.GEOMETRY: _constant(pa.binary()),
    ColumnType.VECTOR: _constant(pa.list_(pa.float32())),
    ColumnType.NULL: _constant(pa.null()),
}


def mysql_type_label(col: ColumnDef) -> str:
    """A short description of the source column type, kept in the field's metadata."""
    code = real_type(col)
    if code in _SQL_INT_NAMES:
        label = _SQL_INT_NAMES[ColumnType(code)]
        return f"{label} UNSIGNED" if col.unsigned else label
    if code == ColumnType.NEWDECIMAL:
        return f"DECIMAL({col.meta >> 8},{col.meta & 0xFF})"
    if code == ColumnType.BIT:
        return f"BIT({col.bit_width})"
    try:
        return ColumnType(code).name
    except ValueError:
        return f"TYPE_{code}"


GEOMETRY_SRID = pa.struct([pa.field("wkb", pa.binary()), pa.field("srid", pa.uint32())])


def arrow_field(col: ColumnDef, *, geometry_srid: bool = False) -> pa.Field:
    """The Arrow field one table column lands as (always nullable; see the module doc).
    ``geometry_srid``: GEOMETRY as ``struct<wkb, srid>`` (``sink.geometry_srid``)."""
    code = real_type(col)
    mapping = _MAPPINGS.get(code)
    if mapping is None:
        raise IntegrityError(
            f"column {column_name(col)}: type {mysql_type_label(col)} has no landing-zone mapping",
            hint="this column type cannot be written to Parquet; report the server version "
            "and the table definition",
        )
    resolved = col if code == col.type else _with_type(col, code)
    metadata = {FIELD_TYPE_KEY: mysql_type_label(col).encode()}
    if col.column_id is not None:  # stable across renames (schema history)
        metadata[FIELD_ID_KEY] = str(col.column_id).encode()
    fill = landing_fill(col)  # what rows older than the column hold (schema history)
    if fill is not None:
        metadata[FIELD_FILL_KEY] = json.dumps(fill, sort_keys=True).encode()
    data_type = pa.string() if col.text_form is not None else mapping(resolved)
    if geometry_srid and code == ColumnType.GEOMETRY:
        data_type = GEOMETRY_SRID
    return pa.field(column_name(col), data_type, nullable=True, metadata=metadata)


def _with_type(col: ColumnDef, code: int) -> ColumnDef:
    return replace(col, type=code)


def schema_version(version: TableVersion) -> str:
    """A short, stable hash of the table's column definitions (12 hex digits)."""
    described = [
        [
            col.index,
            col.type,
            col.meta,
            col.nullable,
            col.name,
            col.unsigned,
            col.charset,
            col.enum_values,
            col.set_values,
            col.geometry_type,
            col.vector_dimensions,
            *([col.column_id, col.text_form, col.fill] if col.column_id is not None else []),
        ]
        for col in version.columns
    ]
    text = json.dumps(described, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def arrow_schema(
    version: TableVersion, *, with_before: bool, with_absent: bool, geometry_srid: bool = False
) -> pa.Schema:
    """The schema of one landing-zone file for ``version``: the table's fields, the
    metadata fields, then ``_before`` and ``_absent`` when asked for.

    Raises SinkError when a column name clashes with another (Spark resolves names without
    regard to case) or with a metadata column: the file would not be readable.
    """
    fields = [arrow_field(col, geometry_srid=geometry_srid) for col in version.columns]
    extra = list(METADATA_FIELDS)
    if with_before:  # field ids only once in a file: on the table's own columns
        inner = [f.with_metadata({FIELD_TYPE_KEY: f.metadata[FIELD_TYPE_KEY]}) for f in fields]
        extra.append(pa.field(BEFORE_FIELD, pa.struct(inner)))
    if with_absent:
        extra.append(pa.field(ABSENT_FIELD, ABSENT_TYPE))
    _check_names(version, [f.name for f in fields], [f.name for f in extra])
    metadata = {
        SCHEMA_TABLE_KEY: version.name.encode("utf-8"),
        SCHEMA_VERSION_KEY: schema_version(version).encode("ascii"),
        SPARK_VERSION_KEY: SPARK_CALENDAR_VERSION,
    }
    return pa.schema(fields + extra, metadata=metadata)


def _check_names(version: TableVersion, columns: list[str], metadata: list[str]) -> None:
    reserved = {name.lower() for name in metadata}
    seen: set[str] = set()
    for name in columns:
        key = name.lower()
        if key in reserved:
            raise SinkError(
                f"table {version.name}: column `{name}` has the name of a landing-zone "
                "metadata column",
                hint="rename the column or leave the table out of replication",
            )
        if key in seen:
            raise SinkError(
                f"table {version.name}: two columns are named `{name}` (Spark compares "
                "names without regard to case)",
                hint="rename one of the columns or leave the table out of replication",
            )
        seen.add(key)
