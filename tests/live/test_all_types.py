"""Every MariaDB column type, from a live server's binlog file, against what SELECT returns.

A workload inserts, updates (every column changed) and deletes rows holding NULL, minimum,
maximum and edge values of every column type MariaDB has. Around each statement the row is
SELECTed in a form that shows the stored value exactly (temporal values as the text MySQL
prints, FLOAT widened to DOUBLE, BIT as an unsigned integer, geometry as ST_AsBinary, INET4 /
INET6 / UUID as their binary form), and that is turned into the value the decoder must yield.
Then the server's binlog file is read back from its datadir with ``read_binlog_file`` and
every decoded before/after image is compared column by column with those SELECTs.

The workload runs on two servers: ``binlog_row_metadata=FULL`` (names and ENUM/SET labels come
from the binlog; no schema lookup) and ``MINIMAL`` (signedness and charsets in the binlog; names
and labels from an information_schema lookup written here). Column compression (the MariaDB
COMPRESSED attribute) is checked on its own table.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from decimal import Decimal
from typing import Any

import pytest
from pymysql.converters import escape_string

from replicator.binlog.events import RowsEvent, RowsKind, TableMapEvent
from replicator.binlog.schema import TableSchema
from replicator.binlog.values import Geometry, InvalidTemporal
from replicator.source.binlog_file import read_binlog_file
from replicator.source.schema import parse_columns
from tests.harness.mariadb import MariaDBServer, mariadbd_version

pytestmark = pytest.mark.live

DB = "all_types"
# Zero dates, zero-in-date and Feb 31 are stored as given; invalid ENUM values become ''.
WORKLOAD_SQL_MODE = "ALLOW_INVALID_DATES"
SERVERS = ("mariadb_full_metadata", "mariadb")
FLT_MAX = "3.4028234663852886e38"
DBL_MAX = "1.7976931348623157e308"

# --------------------------------------------------------------------------- the columns


def s(text: str) -> str:
    """A SQL string literal in the connection charset (utf8mb4)."""
    return f"'{escape_string(text)}'"


def x(data: bytes) -> str:
    """A SQL hex (binary string) literal."""
    return f"X'{data.hex()}'"


def latin1(data: bytes) -> str:
    """A latin1 string literal given as its bytes."""
    return f"_latin1 X'{data.hex()}'"


def geom(wkt: str, srid: int = 0) -> str:
    return f"ST_GeomFromText({s(wkt)}, {srid})"


NULL = "NULL"
HIGH_LATIN1 = bytes(range(0x80, 0x100))  # '€', the five C1 holes of cp1252, ..., 'ÿ'
# MySQL's latin1 is cp1252 with its five holes (0x81 0x8D 0x8F 0x90 0x9D) as C1 controls.
MYSQL_LATIN1_HIGH = "".join(
    chr(b) if b in (0x81, 0x8D, 0x8F, 0x90, 0x9D) else bytes([b]).decode("cp1252")
    for b in HIGH_LATIN1
)


@dataclass(frozen=True, slots=True)
class Col:
    """One column: its DDL type, how it is checked, and one SQL value per row of its table."""

    name: str
    ddl: str
    kind: str  # key of SELECT_EXPR / CONVERT
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Table:
    name: str
    columns: tuple[Col, ...]

    @property
    def rows(self) -> int:
        return len(self.columns[0].values)

    @property
    def names(self) -> tuple[str, ...]:
        return ("id", *(c.name for c in self.columns))


def col(name: str, ddl: str, kind: str, *values: str) -> Col:
    return Col(name, ddl, kind, values)


def _int_cols() -> tuple[Col, ...]:
    # rows: NULL, min, max, edge, edge
    out = [col("bool_", "BOOL", "int", NULL, "0", "1", "-128", "127")]
    for name, ddl, bits in (
        ("tiny", "TINYINT", 8),
        ("small", "SMALLINT", 16),
        ("medium", "MEDIUMINT", 24),
        ("int_", "INT", 32),
        ("big", "BIGINT", 64),
    ):
        low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        out.append(col(f"{name}_s", ddl, "int", NULL, str(low), str(high), "-1", "1"))
        out.append(
            col(
                f"{name}_u",
                f"{ddl} UNSIGNED",
                "int",
                NULL,
                "0",
                str((1 << bits) - 1),
                str(1 << (bits - 1)),
                "1",
            )
        )
    out.append(col("int_zerofill", "INT(4) ZEROFILL", "int", NULL, "0", "4294967295", "7", "12345"))
    return tuple(out)


def _decimal_max(precision: int, scale: int) -> str:
    whole = "9" * (precision - scale) or "0"
    return f"{whole}.{'9' * scale}" if scale else whole


def _decimal_col(name: str, precision: int, scale: int) -> Col:
    high = _decimal_max(precision, scale)
    tiny = f"-0.{'0' * (scale - 1)}1" if scale else "-1"
    return col(name, f"DECIMAL({precision},{scale})", "decimal", NULL, f"-{high}", high, tiny, "0")


NUMBER_COLS = (
    _decimal_col("dec_65_30", 65, 30),
    _decimal_col("dec_10_0", 10, 0),
    _decimal_col("dec_65_0", 65, 0),
    _decimal_col("dec_38_38", 38, 38),
    _decimal_col("dec_5_2", 5, 2),
    _decimal_col("dec_1_0", 1, 0),
    _decimal_col("dec_19_9", 19, 9),
    col("float_", "FLOAT", "float", NULL, f"-{FLT_MAX}", FLT_MAX, "1.401298464324817e-45", "0.1"),
    col("double_", "DOUBLE", "double", NULL, f"-{DBL_MAX}", DBL_MAX, "5e-324", "-5e-324"),
    col(
        "double_third",
        "DOUBLE",
        "double",
        NULL,
        "-2.2250738585072014e-308",
        "1e308",
        "0.1e0 + 0.2e0",
        "1e0 / 3e0",
    ),
    col("bit1", "BIT(1)", "bit", NULL, "b'0'", "b'1'", "b'0'", "b'1'"),
    col("bit7", "BIT(7)", "bit", NULL, "0", "127", "64", "1"),
    col("bit9", "BIT(9)", "bit", NULL, "0", "511", "256", "1"),
    col("bit17", "BIT(17)", "bit", NULL, "0", str((1 << 17) - 1), str(1 << 16), "1"),
    col("bit64", "BIT(64)", "bit", NULL, "0", "18446744073709551615", str(1 << 63), "1"),
    col("year_", "YEAR", "int", NULL, "1901", "2155", "0", "2000"),
)


def _temporal_cols() -> tuple[Col, ...]:
    # rows: NULL, min, max, zero, invalid, edge, edge
    out = [
        col(
            "date_",
            "DATE",
            "date",
            NULL,
            "'1000-01-01'",
            "'9999-12-31'",
            "'0000-00-00'",
            "'2020-02-31'",
            "'2020-00-15'",
            "'0001-01-01'",
        ),
    ]
    for fsp in range(7):
        out.append(
            col(
                f"dt{fsp}",
                f"DATETIME({fsp})",
                "datetime",
                NULL,
                "'1000-01-01 00:00:00'",
                "'9999-12-31 23:59:59.999999'",
                "'0000-00-00 00:00:00'",
                "'2020-02-31 12:34:56.123456'",
                "'0000-00-00 12:00:00.5'",
                "'0001-01-01 00:00:00.000001'",
            )
        )
    for fsp in range(7):
        out.append(
            col(
                f"ts{fsp}",
                f"TIMESTAMP({fsp}) NULL DEFAULT NULL",
                "timestamp",
                NULL,
                "'1970-01-01 00:00:01'",
                "'2038-01-19 03:14:07.999999'",
                "'0000-00-00 00:00:00'",
                "'2000-02-29 12:00:00.5'",
                "'1999-12-31 23:59:59.999999'",
                "'2024-01-01 00:00:00.000001'",
            )
        )
    for fsp in range(7):
        out.append(
            col(
                f"t{fsp}",
                f"TIME({fsp})",
                "time",
                NULL,
                "'-838:59:59.999999'",
                "'838:59:59.999999'",
                "'-00:00:00.5'",
                "'-00:00:01.000001'",
                "'-00:00:00.000001'",
                "'123:45:06.789'",
            )
        )
    return tuple(out)


def _text(name: str, ddl: str, *values: str) -> Col:
    return Col(name, ddl, "text", (NULL, "''", *values))


def _binary(name: str, ddl: str, *values: str) -> Col:
    return Col(name, ddl, "bytes", (NULL, "X''", *values))


EMOJI = "\U0001f600"
MAX_CP = "\U0010ffff"
STRING_COLS = (
    # rows: NULL, empty, max length, edge, edge
    _text(
        "c_utf8mb4",
        "CHAR(255) CHARACTER SET utf8mb4",  # 1020 bytes: 2-byte length
        s(EMOJI * 255),
        s(f"a\0b{EMOJI}{MAX_CP}"),
        s("trailing  "),
    ),
    _text(
        "c_latin1",
        "CHAR(10) CHARACTER SET latin1",
        latin1(b"\xff" * 10),
        latin1(b"\x80\x81\x8d\x8f\x90\x9d"),
        s("a  "),
    ),
    _text("c_ucs2", "CHAR(20) CHARACTER SET ucs2", s("\uffee" * 20), s("é€日本\uffff"), s("x ")),
    _text(
        "c_utf16", "CHAR(20) CHARACTER SET utf16", s(EMOJI * 20), s(f"é€{EMOJI}{MAX_CP}"), s("x ")
    ),
    _text(
        "c_utf32_63",
        "CHAR(63) CHARACTER SET utf32",  # 252 bytes: 1-byte length
        s(EMOJI * 63),
        s("é€"),
        s("x "),
    ),
    _text(
        "c_utf32_64",
        "CHAR(64) CHARACTER SET utf32",  # 256 bytes: 2-byte length
        s(MAX_CP * 64),
        s(f"é€{EMOJI}"),
        s("x "),
    ),
    _text("c_utf8mb3", "CHAR(30) CHARACTER SET utf8mb3", s("日" * 30), s("é€\uffff"), s("x ")),
    _text(
        "v_utf8mb4_63",
        "VARCHAR(63) CHARACTER SET utf8mb4",  # 252 bytes: 1-byte length
        s(EMOJI * 63),
        s("a\0b"),
        s("x  "),
    ),
    _text(
        "v_utf8mb4_64",
        "VARCHAR(64) CHARACTER SET utf8mb4",  # 256 bytes: 2-byte length
        s(EMOJI * 64),
        s("".join(map(chr, range(1, 64)))),
        s("x  "),
    ),
    _text(
        "v_latin1_255",
        "VARCHAR(255) CHARACTER SET latin1",
        latin1(b"\xff" * 255),
        latin1(HIGH_LATIN1),
        s("x  "),
    ),
    _text(
        "v_latin1_256",
        "VARCHAR(256) CHARACTER SET latin1",
        s("é" * 256),
        latin1(HIGH_LATIN1),
        s("x  "),
    ),
    _text("v_utf8mb3", "VARCHAR(20) CHARACTER SET utf8mb3", s("日" * 20), s("é€"), s("x ")),
    _text("v_ucs2", "VARCHAR(20) CHARACTER SET ucs2", s("日" * 20), s("é€\uffff"), s("x ")),
    _text("v_utf16", "VARCHAR(20) CHARACTER SET utf16", s(EMOJI * 20), s(f"é€{EMOJI}"), s("x ")),
    _text(
        "v_utf16le", "VARCHAR(20) CHARACTER SET utf16le", s(EMOJI * 20), s(f"é€{EMOJI}"), s("x ")
    ),
    _text("v_utf32", "VARCHAR(20) CHARACTER SET utf32", s(MAX_CP * 20), s(f"é€{EMOJI}"), s("x ")),
    _text(
        "tinytext_",
        "TINYTEXT CHARACTER SET utf8mb4",
        "CONCAT(REPEAT('é', 127), 'a')",
        s(EMOJI),
        s(" "),
    ),
    _text(
        "text_",
        "TEXT CHARACTER SET utf8mb4",  # 65535 bytes
        f"CONCAT(REPEAT({s(EMOJI)}, 16383), 'abc')",
        s("a\0b"),
        s(" x "),
    ),
    _text("text_utf16", "TEXT CHARACTER SET utf16", f"REPEAT({s(EMOJI)}, 16383)", s("é"), s("x")),
    _text(
        "mediumtext_",
        "MEDIUMTEXT CHARACTER SET latin1",  # 80000 bytes: 3-byte length
        "REPEAT('é€', 40000)",
        latin1(HIGH_LATIN1),
        s(" "),
    ),
    _text(
        "longtext_", "LONGTEXT CHARACTER SET utf8mb4", "REPEAT('日本', 50000)", s(MAX_CP), s("x")
    ),
    _binary("bin1", "BINARY(1)", x(b"\xff"), x(b" "), x(b"\x01")),
    _binary("bin16", "BINARY(16)", x(b"\xff" * 16), x(b"\x00\x01"), x(b"a b ")),
    _binary("bin255", "BINARY(255)", x(b"\xff" * 255), x(b"\x00" * 254 + b"\x01"), x(b"x")),
    _binary("varbin", "VARBINARY(300)", x(b"\xff" * 300), x(b"\x00\x00\x00"), x(b"a\x00 \x00")),
    _binary("tinyblob_", "TINYBLOB", x(bytes(range(255))), x(b"\x00"), x(b"\xff")),
    _binary(
        "blob_",
        "BLOB",  # 65535 bytes
        "CONCAT(REPEAT(X'00ff', 32767), X'ab')",
        x(b"\x00"),
        x(b"\n\r"),
    ),
    _binary("mediumblob_", "MEDIUMBLOB", "REPEAT(X'80', 70000)", x(b"\x00"), x(b"\xfe")),
    _binary("longblob_", "LONGBLOB", "REPEAT(X'7f', 70000)", x(b"\x00"), x(b"\xfe")),
)


def _labels(prefix: str, count: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(count)]


def _enum_set_ddl(kind: str, labels: list[str], charset: str = "utf8mb4") -> str:
    return f"{kind}({', '.join(s(label) for label in labels)}) CHARACTER SET {charset}"


S20 = _labels("s", 20)
S64 = _labels("s", 64)
ENUM_SET_COLS = (
    # rows: NULL, first, last, edge, edge ('nope' is invalid: stored as the '' error value)
    col(
        "e_small",
        _enum_set_ddl("ENUM", ["a", "b,c", "it's", "é", EMOJI]),
        "text",
        NULL,
        s("a"),
        s(EMOJI),
        s("nope"),
        s("it's"),
    ),
    col(
        "e_300",
        _enum_set_ddl("ENUM", _labels("m", 300)),
        "text",  # 2-byte index
        NULL,
        s("m0"),
        s("m299"),
        s("nope"),
        s("m255"),
    ),
    col(
        "e_latin1",
        _enum_set_ddl("ENUM", ["x", "é€", "ÿ"], "latin1"),
        "text",
        NULL,
        s("x"),
        s("ÿ"),
        s("é€"),
        s("nope"),
    ),
    col(
        "set_small",
        _enum_set_ddl("SET", ["a", "b", "c"]),
        "text",
        NULL,
        "''",
        s("a,b,c"),
        s("b"),
        s("c,a"),
    ),
    col(
        "set_20",
        _enum_set_ddl("SET", S20),
        "text",  # 3-byte bitmask
        NULL,
        "''",
        s(",".join(S20)),
        s("s19"),
        s("s0,s9"),
    ),
    col(
        "set_64",
        _enum_set_ddl("SET", S64),
        "text",  # 8-byte bitmask
        NULL,
        "''",
        s(",".join(S64)),
        s("s63"),
        s("s0,s62"),
    ),
    col(
        "set_latin1",
        _enum_set_ddl("SET", ["é", "€", "x"], "latin1"),
        "text",
        NULL,
        "''",
        s("é,€,x"),
        s("€"),
        s("x,é"),
    ),
    col(
        "json_",
        "JSON",
        "text",
        NULL,
        s("{}"),
        "CONCAT('[', REPEAT('1,', 40000), '1]')",
        s(f'"{EMOJI}"'),
        s('[18446744073709551616, -0.0, 1e308, "\\u0000", {"k": null}]'),
    ),
)

GEOMETRY_COLS = (
    # rows: NULL and four different shapes; some with an SRID, which ST_AsBinary drops too
    col(
        "geometry_",
        "GEOMETRY",
        "geometry",
        NULL,
        geom("POINT(0 0)"),
        geom("GEOMETRYCOLLECTION(POINT(1 2),LINESTRING(0 0,1 1))"),
        geom("POLYGON((0 0,10 0,10 10,0 0))", 4326),
        geom("LINESTRING(-1 -1,1 1)"),
    ),
    col(
        "point_",
        "POINT",
        "geometry",
        NULL,
        "Point(0, 0)",
        f"Point(-{DBL_MAX}, {DBL_MAX})",
        geom("POINT(-0.5 0.25)", 4326),
        "Point(1, 2)",
    ),
    col(
        "linestring_",
        "LINESTRING",
        "geometry",
        NULL,
        geom("LINESTRING(0 0,1 1)"),
        geom("LINESTRING(" + ",".join(f"{i} {-i}" for i in range(1000)) + ")"),
        geom("LINESTRING(1 1,2 2,3 3)", 3857),
        geom("LINESTRING(5 5,6 6)"),
    ),
    col(
        "polygon_",
        "POLYGON",
        "geometry",
        NULL,
        geom("POLYGON((0 0,1 0,1 1,0 0))"),
        geom("POLYGON((0 0,10 0,10 10,0 10,0 0),(2 2,3 2,3 3,2 2))"),
        geom("POLYGON((0 0,2 0,2 2,0 0))", 4326),
        geom("POLYGON((1 1,5 1,5 5,1 1))"),
    ),
    col(
        "multipoint_",
        "MULTIPOINT",
        "geometry",
        NULL,
        geom("MULTIPOINT(0 0)"),
        geom("MULTIPOINT(1 1,2 2,3 3)"),
        geom("MULTIPOINT(4 4)", 4326),
        geom("MULTIPOINT(5 5,6 6)"),
    ),
    col(
        "multilinestring_",
        "MULTILINESTRING",
        "geometry",
        NULL,
        geom("MULTILINESTRING((0 0,1 1))"),
        geom("MULTILINESTRING((0 0,1 1),(2 2,3 3))"),
        geom("MULTILINESTRING((4 4,5 5))", 4326),
        geom("MULTILINESTRING((6 6,7 7))"),
    ),
    col(
        "multipolygon_",
        "MULTIPOLYGON",
        "geometry",
        NULL,
        geom("MULTIPOLYGON(((0 0,1 0,1 1,0 0)))"),
        geom("MULTIPOLYGON(((0 0,1 0,1 1,0 0)),((5 5,6 5,6 6,5 5)))"),
        geom("MULTIPOLYGON(((0 0,2 0,2 2,0 0)))", 4326),
        geom("MULTIPOLYGON(((1 1,3 1,3 3,1 1)))"),
    ),
    col(
        "geometrycollection_",
        "GEOMETRYCOLLECTION",
        "geometry",
        NULL,
        geom("GEOMETRYCOLLECTION EMPTY"),
        geom("GEOMETRYCOLLECTION(POINT(1 1),POLYGON((0 0,1 0,1 1,0 0)))"),
        geom("GEOMETRYCOLLECTION(POINT(2 2))", 4326),
        geom("GEOMETRYCOLLECTION(LINESTRING(0 0,1 1))"),
    ),
)

# MariaDB 10.5+ INET6, 10.7+ UUID, 10.10+ INET4: logged as BINARY(16) / BINARY(4) (a STRING
# column with the binary charset); the decoder yields the bytes CAST(col AS BINARY(n)) shows.
UUID_V1 = "123e4567-e89b-12d3-a456-426655440000"  # MariaDB stores v1-v5 segment-swapped
UUID_V4 = "550e8400-e29b-41d4-a716-446655440000"
FIXED_BINARY_COLS = (
    col(
        "inet4_",
        "INET4",
        "inet4",
        NULL,
        s("0.0.0.0"),
        s("255.255.255.255"),
        s("10.0.0.1"),
        s("192.168.1.254"),
    ),
    col(
        "inet6_",
        "INET6",
        "binary16",
        NULL,
        s("::"),
        s("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
        s("::ffff:1.2.3.4"),
        s("2001:db8::1"),
    ),
    col(
        "uuid_",
        "UUID",
        "binary16",
        NULL,
        s("00000000-0000-0000-0000-000000000000"),
        s("ffffffff-ffff-ffff-ffff-ffffffffffff"),
        s(UUID_V1),
        s(UUID_V4),
    ),
)

BIG_COLS = (
    # rows: NULL, big, small. The 1 MiB value needs a MEDIUMBLOB (BLOB stops at 64 KiB).
    col("mib1", "MEDIUMBLOB", "bytes", NULL, "REPEAT(X'00ff0180', 262144)", "X''"),
    col("mib20", "LONGBLOB", "bytes", NULL, "REPEAT(X'deadbeef00', 4194304)", "X'00'"),
)

TABLES = (
    Table("ints", _int_cols()),
    Table("numbers", NUMBER_COLS),
    Table("temporal", _temporal_cols()),
    Table("strings", STRING_COLS),
    Table("enum_set_json", ENUM_SET_COLS),
    Table("geometry", GEOMETRY_COLS),
    Table("fixed_binary", FIXED_BINARY_COLS),
    Table("big", BIG_COLS),
)
TABLE_BY_NAME = {t.name: t for t in TABLES}


# ----------------------------------------------------------- what SELECT shows, as decoded


SELECT_EXPR: dict[str, str] = {
    "float": "CAST({} AS DOUBLE)",  # the exact float32 value, printed round-trip safe
    "bit": "CAST({} AS UNSIGNED)",
    "date": "CAST({} AS CHAR)",
    "datetime": "CAST({} AS CHAR)",
    "timestamp": "CAST({} AS CHAR)",  # session time_zone is +00:00
    "time": "CAST({} AS CHAR)",
    # the SRID (ten digits) then the WKB, both as the server's functions give them
    "geometry": "CONCAT(LPAD(ST_SRID({0}), 10, '0'), ST_AsBinary({0}))",
    "inet4": "CAST({} AS BINARY(4))",
    "binary16": "CAST({} AS BINARY(16))",
}

_DATETIME_TEXT = re.compile(r"(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?")
_TIME_TEXT = re.compile(r"(-?)(\d+):(\d\d):(\d\d)(?:\.(\d{1,6}))?")


def _need(value: Any, kind: type) -> Any:
    if not isinstance(value, kind):
        raise TypeError(f"SELECT returned {value!r}, expected {kind.__name__}")
    return value


def _date(text: str) -> date | InvalidTemporal:
    try:
        return date.fromisoformat(_need(text, str))
    except ValueError:
        return InvalidTemporal(text)


def _datetime(text: str, tz: tzinfo | None = None) -> datetime | InvalidTemporal:
    match = _DATETIME_TEXT.fullmatch(_need(text, str))
    if match is None:
        raise ValueError(f"not a DATETIME as MySQL prints it: {text!r}")
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    micro = int((match.group(7) or "").ljust(6, "0"))
    try:
        return datetime(year, month, day, hour, minute, second, micro, tzinfo=tz)
    except ValueError:
        return InvalidTemporal(text)


def _time(text: str) -> timedelta:
    match = _TIME_TEXT.fullmatch(_need(text, str))
    if match is None:
        raise ValueError(f"not a TIME as MySQL prints it: {text!r}")
    sign, hours, minutes, seconds, fraction = match.groups()
    value = timedelta(
        hours=int(hours),
        minutes=int(minutes),
        seconds=int(seconds),
        microseconds=int((fraction or "").ljust(6, "0")),
    )
    return -value if sign else value


CONVERT: dict[str, Callable[[Any], object]] = {
    "int": lambda v: _need(v, int),
    "bit": lambda v: _need(v, int),
    "decimal": lambda v: _need(v, Decimal),
    "float": lambda v: _need(v, float),
    "double": lambda v: _need(v, float),
    "date": _date,
    "datetime": _datetime,
    "timestamp": lambda v: _datetime(v, UTC),
    "time": _time,
    "text": lambda v: _need(v, str),
    "bytes": lambda v: _need(v, bytes),
    "geometry": lambda v: Geometry(_need(v, bytes)[10:], int(v[:10])),
    "inet4": lambda v: _need(v, bytes),
    "binary16": lambda v: _need(v, bytes),
}


def _select_sql(table: Table) -> str:
    exprs = [SELECT_EXPR.get(c.kind, "{}").format(f"`{c.name}`") for c in table.columns]
    return f"SELECT `id`, {', '.join(exprs)} FROM `{table.name}` WHERE `id` = %s"


def _expected_row(table: Table, raw: tuple[Any, ...]) -> tuple[object, ...]:
    values: list[object] = [_need(raw[0], int)]
    for c, value in zip(table.columns, raw[1:], strict=True):
        values.append(None if value is None else CONVERT[c.kind](value))
    return tuple(values)


def canonical(value: object) -> object:
    """A form where equal means identical: type, Decimal digits/scale, float bits, tz."""
    if isinstance(value, float):
        return ("float", value.hex())
    if isinstance(value, Decimal):
        return ("Decimal", str(value))
    if isinstance(value, datetime):
        return ("datetime", value.isoformat(), str(value.tzinfo))
    if isinstance(value, Geometry):
        return ("Geometry", bytes(value), value.srid)
    return (type(value).__name__, value)


def short(value: object) -> str:
    if isinstance(value, bytes | str) and len(value) > 64:
        digest = hashlib.sha256(
            value if isinstance(value, bytes) else value.encode("utf-8", "surrogatepass")
        ).hexdigest()[:12]
        return f"{type(value).__name__}(len={len(value)}, sha256={digest}, {value[:24]!r}...)"
    return repr(value)


# ------------------------------------------------------------------------------ workload


@dataclass(frozen=True, slots=True)
class Change:
    table: str
    kind: RowsKind
    before: tuple[object, ...] | None
    after: tuple[object, ...] | None

    @property
    def row_id(self) -> object:
        image = self.after if self.before is None else self.before
        assert image is not None
        return image[0]


@dataclass(frozen=True, slots=True, repr=False)
class Outcome:
    metadata: str  # binlog_row_metadata of the server
    expected: list[Change]
    decoded: list[Change]
    table_maps: dict[str, TableMapEvent]  # last TABLE_MAP per table
    lookups: list[tuple[str, str]]  # schema_lookup calls

    def __repr__(self) -> str:  # failure reports print it; the images hold 20 MiB values
        return (
            f"Outcome(metadata={self.metadata!r}, {len(self.expected)} expected and "
            f"{len(self.decoded)} decoded changes)"
        )


def _create_sql(table: Table) -> str:
    columns = ", ".join(f"`{c.name}` {c.ddl}" for c in table.columns)
    return f"CREATE TABLE `{table.name}` (`id` INT PRIMARY KEY, {columns}) ENGINE=InnoDB"


def _run_statements(server: MariaDBServer) -> list[Change]:
    """Insert, update, delete every row of every table; SELECT around each statement."""
    expected: list[Change] = []
    with contextlib.closing(server.connect(DB)) as conn, conn.cursor() as cur:
        cur.execute(f"SET SESSION sql_mode = '{WORKLOAD_SQL_MODE}', time_zone = '+00:00'")

        def select(table: Table, row_id: int) -> tuple[object, ...] | None:
            cur.execute(_select_sql(table), (row_id,))
            rows = cur.fetchall()
            if len(rows) > 1:
                raise AssertionError(f"{table.name} id {row_id}: {len(rows)} rows")
            return _expected_row(table, rows[0]) if rows else None

        def run(table: Table, kind: RowsKind, row_id: int, sql: str) -> None:
            before = select(table, row_id)
            affected = cur.execute(sql)
            after = select(table, row_id)
            if affected != 1:
                raise AssertionError(f"{sql[:200]} changed {affected} rows")
            expected.append(Change(table.name, kind, before, after))

        for table in TABLES:
            names = ", ".join(f"`{n}`" for n in table.names)
            for i in range(table.rows):
                values = ", ".join(c.values[i] for c in table.columns)
                sql = f"INSERT INTO `{table.name}` ({names}) VALUES ({i + 1}, {values})"
                run(table, RowsKind.INSERT, i + 1, sql)
            for i in range(table.rows):  # row i takes the values row i + 1 was inserted with
                j = (i + 1) % table.rows
                assignments = ", ".join(f"`{c.name}` = {c.values[j]}" for c in table.columns)
                sql = f"UPDATE `{table.name}` SET {assignments} WHERE `id` = {i + 1}"
                run(table, RowsKind.UPDATE, i + 1, sql)
            for i in range(table.rows):
                run(
                    table,
                    RowsKind.DELETE,
                    i + 1,
                    f"DELETE FROM `{table.name}` WHERE `id` = {i + 1}",
                )
    return expected


_LABEL = re.compile(r"'((?:[^']|'')*)'")


def information_schema_lookup(
    server: MariaDBServer, calls: list[tuple[str, str]]
) -> Callable[[str, str], TableSchema | None]:
    """A ``schema_lookup`` reading information_schema.COLUMNS through the product's parser."""

    def lookup(schema: str, table: str) -> TableSchema | None:
        calls.append((schema, table))
        rows = server.query(
            "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, CHARACTER_SET_NAME, COLUMN_KEY "
            "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
            "ORDER BY ORDINAL_POSITION",
            (schema, table),
        )
        if not rows:
            return None
        return TableSchema(schema, table, parse_columns(rows))

    return lookup


def _workload_files(server: MariaDBServer, work: Callable[[], object]) -> list[str]:
    """Run ``work`` alone in fresh binlog files; return those files' names."""
    server.flush_binlogs()
    first = server.binlog_status().file
    work()
    server.flush_binlogs()
    files = server.binlog_files()
    return files[files.index(first) : -1]


def _decode_changes(
    server: MariaDBServer,
    files: list[str],
    lookup: Callable[[str, str], TableSchema | None] | None,
) -> tuple[list[Change], dict[str, TableMapEvent]]:
    decoded: list[Change] = []
    table_maps: dict[str, TableMapEvent] = {}
    for name in files:
        for event in read_binlog_file(server.binlog_path(name), schema_lookup=lookup):
            if not isinstance(event, RowsEvent) or event.table.schema != DB:
                continue
            table = event.table.table
            table_maps[table] = event.table
            if event.kind is RowsKind.UPDATE:
                for before, after in zip(event.rows, event.after, strict=True):
                    decoded.append(Change(table, event.kind, before, after))
            else:
                for row in event.rows:
                    images = (None, row) if event.kind is RowsKind.INSERT else (row, None)
                    decoded.append(Change(table, event.kind, *images))
    return decoded, table_maps


@pytest.fixture(scope="module", params=SERVERS)
def outcome(request: pytest.FixtureRequest) -> Iterator[Outcome]:
    server: MariaDBServer = request.getfixturevalue(request.param)
    if mariadbd_version() < (10, 10):
        pytest.skip("INET4 needs MariaDB 10.10+")
    metadata = str(server.query("SELECT @@binlog_row_metadata")[0][0])
    server.execute(f"DROP DATABASE IF EXISTS {DB}")
    server.execute(f"CREATE DATABASE {DB}")
    for table in TABLES:
        server.execute(_create_sql(table), database=DB)
    expected: list[Change] = []
    files = _workload_files(server, lambda: expected.extend(_run_statements(server)))
    lookups: list[tuple[str, str]] = []
    lookup = None if metadata == "FULL" else information_schema_lookup(server, lookups)
    decoded, table_maps = _decode_changes(server, files, lookup)
    yield Outcome(metadata, expected, decoded, table_maps, lookups)
    server.execute(f"DROP DATABASE IF EXISTS {DB}")


# --------------------------------------------------------------------------------- tests


def test_decoded_changes_are_the_workload_statements_in_order(outcome: Outcome) -> None:
    def shape(changes: list[Change]) -> list[tuple[str, str, object]]:
        return [(c.table, c.kind.value, c.row_id) for c in changes]

    assert len(outcome.expected) == sum(3 * t.rows for t in TABLES)
    assert shape(outcome.decoded) == shape(outcome.expected)


def test_column_names_come_from_the_binlog_or_the_lookup(outcome: Outcome) -> None:
    names = {t: m.column_names for t, m in outcome.table_maps.items()}
    lookups_expected = [] if outcome.metadata == "FULL" else [(DB, t.name) for t in TABLES]

    assert names == {t.name: t.names for t in TABLES}
    assert all(m.has_metadata for m in outcome.table_maps.values())
    assert sorted(set(outcome.lookups)) == sorted(lookups_expected)


def test_every_update_changes_every_column(outcome: Outcome) -> None:
    """The workload's own promise, checked on what SELECT returned."""
    unchanged = [
        (c.table, c.row_id, TABLE_BY_NAME[c.table].names[i])
        for c in outcome.expected
        if c.kind is RowsKind.UPDATE
        for i in range(1, len(TABLE_BY_NAME[c.table].names))
        if c.before is not None
        and c.after is not None
        and canonical(c.before[i]) == canonical(c.after[i])
    ]
    updates = [c for c in outcome.expected if c.kind is RowsKind.UPDATE]

    assert unchanged == []
    assert all(c.before is not None and c.after is not None for c in updates)


def test_oracle_sees_the_edge_values(outcome: Outcome) -> None:
    """Spot checks that the SELECTs hold what the edge cases are about."""
    inserted = {
        (c.table, c.row_id): dict(zip(TABLE_BY_NAME[c.table].names, c.after or (), strict=True))
        for c in outcome.expected
        if c.kind is RowsKind.INSERT
    }

    assert inserted["ints", 3]["big_u"] == 18446744073709551615
    assert inserted["numbers", 3]["bit64"] == 18446744073709551615
    assert inserted["numbers", 2]["dec_65_30"] == Decimal("-" + _decimal_max(65, 30))
    assert inserted["temporal", 4]["date_"] == InvalidTemporal("0000-00-00")
    assert inserted["temporal", 4]["dt6"] == InvalidTemporal("0000-00-00 00:00:00.000000")
    assert inserted["temporal", 5]["dt3"] == InvalidTemporal("2020-02-31 12:34:56.123")
    assert inserted["temporal", 4]["ts0"] == InvalidTemporal("0000-00-00 00:00:00")
    assert inserted["temporal", 2]["ts0"] == datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)
    assert inserted["temporal", 2]["t6"] == -timedelta(hours=838, minutes=59, seconds=59.999999)
    assert inserted["temporal", 4]["t6"] == timedelta(microseconds=-500000)
    assert inserted["strings", 4]["v_latin1_255"] == MYSQL_LATIN1_HIGH
    assert inserted["strings", 2]["bin16"] == b"\x00" * 16
    assert inserted["enum_set_json", 4]["e_small"] == ""
    assert inserted["big", 2]["mib20"] == b"\xde\xad\xbe\xef\x00" * 4194304
    # INET4 / INET6 / UUID travel as their binary form; a UUID in RFC 4122 byte order.
    assert inserted["fixed_binary", 3]["inet4_"] == b"\xff" * 4
    assert inserted["fixed_binary", 4]["inet6_"] == ipaddress.IPv6Address("::ffff:1.2.3.4").packed
    assert inserted["fixed_binary", 4]["uuid_"] == uuid.UUID(UUID_V1).bytes
    assert inserted["fixed_binary", 5]["uuid_"] == uuid.UUID(UUID_V4).bytes


def _column_cases() -> list[Any]:
    cases = []
    for table in TABLES:
        for name in table.names:
            cases.append(pytest.param(table.name, name, id=f"{table.name}.{name}"))
    return cases


# Cases the information_schema lookup cannot get right (binlog_row_metadata below FULL).
LOOKUP_LOSSY = {
    ("enum_set_json", "e_small"): (
        "information_schema.COLUMNS.COLUMN_TYPE (like SHOW CREATE TABLE) is utf8mb3 on MariaDB "
        "10.11: the 4-byte ENUM label U+1F600 reads back as '?', so without FULL row metadata "
        "the decoded label is '?' where SELECT shows the emoji"
    ),
}


def _column_mismatches(outcome: Outcome, table: str, column: str) -> list[str]:
    index = TABLE_BY_NAME[table].names.index(column)
    out = []
    for want, got in zip(outcome.expected, outcome.decoded, strict=True):
        if want.table != table:
            continue
        for side, want_image, got_image in (
            ("before", want.before, got.before),
            ("after", want.after, got.after),
        ):
            wanted = None if want_image is None else want_image[index]
            decoded = None if got_image is None else got_image[index]
            if canonical(wanted) != canonical(decoded):
                out.append(
                    f"{want.kind.value} id={want.row_id} {side}: SELECT {short(wanted)}, "
                    f"decoded {short(decoded)}"
                )
    return out


@pytest.mark.parametrize(("table", "column"), _column_cases())
def test_column_decodes_as_select_shows(
    request: pytest.FixtureRequest, outcome: Outcome, table: str, column: str
) -> None:
    lossy = LOOKUP_LOSSY.get((table, column))
    if lossy is not None and outcome.metadata != "FULL":
        request.applymarker(pytest.mark.xfail(strict=True, reason=lossy))
    changes = [c for c in outcome.decoded if c.table == table]

    assert len(outcome.decoded) == len(outcome.expected)
    assert len(changes) == 3 * TABLE_BY_NAME[table].rows
    assert _column_mismatches(outcome, table, column) == []


# ------------------------------------------------------------------- COMPRESSED columns

COMPRESSED_DDL = (
    "VARCHAR(1000) COMPRESSED CHARACTER SET utf8mb4",  # type 141, metadata 2 bytes (LE length)
    "TEXT COMPRESSED CHARACTER SET utf8mb4",  # type 140, metadata 1 byte (length size)
    "BLOB COMPRESSED",
)
# stored raw (0x00 header: too short to shrink), zlib-compressed, empty, NULL, non-ASCII
COMPRESSED_VALUES = ("x", "compress me " * 40, "", None, "\u00e9\u20ac\U0001f600" * 30)


@pytest.mark.parametrize("server_fixture", SERVERS)
@pytest.mark.parametrize("ddl", COMPRESSED_DDL)
def test_compressed_columns_decode(
    request: pytest.FixtureRequest, server_fixture: str, ddl: str
) -> None:
    server: MariaDBServer = request.getfixturevalue(server_fixture)
    db = "all_types_compressed"
    server.execute(f"DROP DATABASE IF EXISTS {db}")
    server.execute(f"CREATE DATABASE {db}")
    server.execute(f"CREATE TABLE t (id INT PRIMARY KEY, c {ddl})", database=db)
    binary = "BLOB" in ddl

    def workload() -> None:
        for i, value in enumerate(COMPRESSED_VALUES):
            server.execute("INSERT INTO t VALUES (%s, %s)", (i, value), database=db)
        server.execute("UPDATE t SET c = CONCAT(IFNULL(c, ''), 'z')", database=db)

    files = _workload_files(server, workload)
    selected = {row[0]: row[1] for row in server.query(f"SELECT id, c FROM {db}.t ORDER BY id")}
    server.execute(f"DROP DATABASE {db}")
    decoded = [
        event
        for name in files
        for event in read_binlog_file(server.binlog_path(name))
        if isinstance(event, RowsEvent) and event.table.table == "t"
    ]
    inserted = [row[1] for e in decoded if e.kind is RowsKind.INSERT for row in e.rows]
    updated = {row[0]: row[1] for e in decoded if e.kind is RowsKind.UPDATE for row in e.after}

    def expect(value: str | None) -> object:
        if value is None or not binary:
            return value
        return value.encode("utf-8")

    assert inserted == [expect(v) for v in COMPRESSED_VALUES]
    assert updated == {
        k: (v if isinstance(v, bytes) or not binary else v.encode()) for k, v in selected.items()
    }
