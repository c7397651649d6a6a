"""A table of the schema history as snapshot rows: the column definitions the binlog path
would use for it, what to SELECT for each column, and the value each SELECT text gives.

A snapshot row must land exactly as the binlog would land the same stored row: the same
Arrow type and the same value. The binlog decoder gets a column's definition from the
TABLE_MAP and the schema history (``binlog.tablemap``); here it comes from the history alone
(``column_def``), with the type codes MariaDB 10.1+ and MySQL 5.6+ log (TIME2, DATETIME2,
TIMESTAMP2; CHAR, ENUM and SET as STRING with the real type in the metadata).

The values come from SELECT's text protocol with ``character_set_results = binary`` (so
text arrives as the stored bytes, decoded here by the column's own codec, like the binlog
decoder does) and ``time_zone = '+00:00'`` (so a TIMESTAMP prints in UTC). Two columns need
another expression than the column itself: FLOAT prints with 6 significant digits, so it is
read as ``CAST(c AS DOUBLE)`` (the exact value widened, as the decoder widens float32); a
MySQL binary JSON column prints MySQL's text, which does not tell a DECIMAL from a DOUBLE,
so such a column stops the snapshot (``SnapshotTypeError``) rather than land a guess.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Callable
from decimal import Decimal

from ..binlog import temporal, text_forms
from ..binlog.charsets import codec_for_charset, text_decoder
from ..binlog.constants import ColumnType as T
from ..binlog.schema import ColumnDef
from ..binlog.values import Geometry
from ..errors import IntegrityError
from ..schema.model import BINARY_TYPES, TEXT_TYPES, Column, Table

Convert = Callable[[bytes], object]


class SnapshotTypeError(IntegrityError):
    """A column a snapshot cannot read exactly."""


_INTEGERS = {
    "tinyint": T.TINY,
    "smallint": T.SHORT,
    "mediumint": T.INT24,
    "int": T.LONG,
    "integer": T.LONG,
    "bigint": T.LONGLONG,
}
_BLOB_SIZES = {
    "tinytext": 1, "tinyblob": 1, "text": 2, "blob": 2, "mediumtext": 3, "mediumblob": 3,
    "longtext": 4, "longblob": 4, "json": 4,
}  # fmt: skip
_GEOMETRY = frozenset(
    {"geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
     "multipolygon", "geometrycollection", "geomcollection"}
)  # fmt: skip
_TEXT_FORM_SIZES = text_forms.SIZES  # uuid/inet4/inet6: BINARY(n) in the binlog
_MAX_BYTES_PER_CHAR = {"utf8mb4": 4, "utf8mb3": 3, "utf8": 3, "ucs2": 2, "utf16": 4,
                       "utf16le": 4, "utf32": 4, "big5": 2, "gbk": 2, "gb2312": 2, "sjis": 2,
                       "cp932": 2, "ujis": 3, "eucjpms": 3, "euckr": 2, "gb18030": 4}  # fmt: skip


def _bytes_per_char(column: Column) -> int:
    if column.data_type in BINARY_TYPES or column.charset in (None, "binary"):
        return 1
    return _MAX_BYTES_PER_CHAR.get(column.charset.lower(), 1)


def _string_meta(real: int, length: int) -> int:
    """STRING metadata as ``Field_string::do_save_field_metadata`` writes it."""
    return ((real ^ ((length & 0x300) >> 4)) << 8) | (length & 0xFF)


def _type_and_meta(column: Column) -> tuple[int, int]:
    kind = column.data_type
    if kind in _INTEGERS:
        return _INTEGERS[kind], 0
    if kind == "year":
        return T.YEAR, 0
    if kind == "float":
        return T.FLOAT, 4
    if kind == "double":
        return T.DOUBLE, 8
    if kind == "decimal":
        return T.NEWDECIMAL, (column.precision or 10) << 8 | (column.scale or 0)
    if kind == "date":
        return T.DATE, 0
    if kind == "datetime":
        return T.DATETIME2, column.fsp or 0
    if kind == "timestamp":
        return T.TIMESTAMP2, column.fsp or 0
    if kind == "time":
        return T.TIME2, column.fsp or 0
    if kind in ("varchar", "varbinary"):
        return T.VARCHAR, (column.length or 0) * _bytes_per_char(column)
    if kind in ("char", "binary"):
        return T.STRING, _string_meta(T.STRING, (column.length or 0) * _bytes_per_char(column))
    if kind in _TEXT_FORM_SIZES:
        return T.STRING, _string_meta(T.STRING, _TEXT_FORM_SIZES[kind])
    if kind in ("enum", "set"):
        labels = len(column.labels or ())
        if kind == "enum":
            return T.STRING, T.ENUM << 8 | (1 if labels < 256 else 2)
        size = (labels + 7) // 8
        return T.STRING, T.SET << 8 | (8 if size > 4 else size)
    if kind == "bit":
        bits = column.length or 1
        return T.BIT, (bits // 8) << 8 | (bits % 8)
    if kind == "json" and column.charset is None:
        return T.JSON, 4  # MySQL's binary JSON (MariaDB's JSON is LONGTEXT in the catalog)
    if kind in _BLOB_SIZES:
        return T.BLOB, _BLOB_SIZES[kind]
    if kind in _GEOMETRY:
        return T.GEOMETRY, 4
    if kind == "vector":
        return T.VECTOR, 4
    raise SnapshotTypeError(
        f"column `{column.name}` of type {column.column_type} has no snapshot reading",
        hint="leave the table out of the snapshot (its changes still land from the binlog)",
    )


def column_def(column: Column, index: int, primary: bool = False) -> ColumnDef:
    """The ``ColumnDef`` the binlog path decodes ``column`` with (see the module doc)."""
    del primary  # the key is the TableVersion's
    code, meta = _type_and_meta(column)
    kind = column.data_type
    charset: str | None
    if kind in TEXT_TYPES or (kind == "json" and column.charset is not None):
        charset = codec_for_charset(column.charset or "")
    elif kind in BINARY_TYPES or kind in _TEXT_FORM_SIZES:
        charset = "binary"
    else:
        charset = None
    labels = column.labels
    return ColumnDef(
        index=index,
        type=code,
        meta=meta,
        nullable=column.nullable,
        name=column.name,
        unsigned=column.unsigned,
        charset=charset,
        enum_values=labels if kind == "enum" else None,
        set_values=labels if kind == "set" else None,
        visible=not column.invisible,
        column_id=column.id,
        text_form=kind if kind in _TEXT_FORM_SIZES else None,
        fill=None if column.fill is None else json.dumps(column.fill.to_json(), sort_keys=True),
    )


def column_defs(table: Table) -> tuple[ColumnDef, ...]:
    return tuple(column_def(c, i) for i, c in enumerate(table.columns))


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def select_expression(col: ColumnDef) -> str:
    """What to SELECT for a column: itself, or FLOAT widened exactly (see the module doc)."""
    name = quote(col.name or "")
    if col.type == T.FLOAT:
        return f"CAST({name} AS DOUBLE)"
    if col.type == T.JSON:
        raise SnapshotTypeError(
            f"column {name} is MySQL binary JSON: SELECT prints it as text that does not "
            "tell a DECIMAL from a DOUBLE, so a snapshot cannot land it exactly",
            hint="leave the table out of the snapshot (its changes still land from the binlog)",
        )
    return name


def _int(raw: bytes) -> object:
    return int(raw)


def _float(raw: bytes) -> object:
    return float(raw)


def _decimal(raw: bytes) -> object:
    value = Decimal(raw if isinstance(raw, str) else raw.decode("ascii"))
    # DECIMAL has no negative zero: "-0.00" is 0.00, as in the binlog decoder and the buffers
    return value if value or not value.is_signed() else -value


def _bit(raw: bytes) -> object:
    return int.from_bytes(raw, "big")


def _bytes(raw: bytes) -> object:
    return bytes(raw)


def _geometry(raw: bytes) -> object:
    if len(raw) < 4:
        raise SnapshotTypeError(f"GEOMETRY value of {len(raw)} bytes has no SRID")
    return Geometry(raw[4:], int.from_bytes(raw[:4], "little"))


def _vector(raw: bytes) -> object:
    values = array("f")
    values.frombytes(raw)
    return values.tolist()


def _ascii(raw: bytes) -> object:
    return raw if isinstance(raw, str) else raw.decode("ascii")


def _from_text(parse: Convert) -> Convert:
    """pymysql hands numbers and temporals over as ASCII ``str``, strings as bytes."""

    def convert(raw: bytes) -> object:
        return parse(raw.encode("ascii") if isinstance(raw, str) else raw)

    return convert


def converter(col: ColumnDef) -> Convert:
    """SELECT's text of one column -> the value the row decoder gives for it."""
    code = col.real_type
    if col.text_form is not None:
        return _ascii  # SELECT prints UUID/INET as the decoder formats them
    if code in (T.TINY, T.SHORT, T.INT24, T.LONG, T.LONGLONG, T.YEAR):
        return _int
    if code in (T.FLOAT, T.DOUBLE):
        return _float
    if code == T.NEWDECIMAL:
        return _decimal
    if code in (T.DATE, T.NEWDATE):
        return _from_text(temporal.date_from_text)
    if code in (T.DATETIME, T.DATETIME2):
        return _from_text(temporal.datetime_from_text(col.meta))
    if code in (T.TIMESTAMP, T.TIMESTAMP2):
        return _from_text(temporal.timestamp_from_text(col.meta))
    if code in (T.TIME, T.TIME2):
        return _from_text(temporal.time_from_text)
    if code == T.BIT:
        return _bit
    if code == T.GEOMETRY:
        return _geometry
    if code == T.VECTOR:
        return _vector
    if code in (T.ENUM, T.SET) and (col.enum_values or col.set_values) is None:
        raise SnapshotTypeError(f"column `{col.name}`: ENUM/SET labels unknown")
    if col.charset is None:
        raise SnapshotTypeError(
            f"column `{col.name}`: its character set has no exact decoding here",
            hint="leave the table out of the snapshot (its changes still land from the binlog)",
        )
    if col.charset == "binary":
        if code == T.STRING:  # BINARY(n): the decoder pads to n bytes as the server stores it
            size = col.string_length

            def padded(raw: bytes) -> object:
                return raw.ljust(size, b"\x00")

            return padded
        return _bytes
    decode = text_decoder(col.charset)
    codec, name = col.charset, col.name

    def text(raw: bytes) -> object:
        try:
            return decode(raw)
        except UnicodeDecodeError as exc:
            raise SnapshotTypeError(f"column `{name}`: text is not valid {codec}: {exc}") from None

    return text
