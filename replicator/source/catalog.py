"""The source's catalog read from information_schema: every database and base table.

``read_traits`` reads the flavor, version and ``lower_case_table_names``; ``read_catalog``
reads SCHEMATA, TABLES (``TABLE_TYPE = 'BASE TABLE'``: no views, and none of MariaDB's
``SYSTEM VERSIONED`` or ``SEQUENCE`` tables), COLUMNS and the ``PRIMARY`` rows of STATISTICS
in four set-based queries, leaving out the system schemas. ``catalog_from_rows`` turns the
rows into the model (``replicator.schema.model``) without I/O. information_schema is not
transactional, so the four reads are not one snapshot; the caller re-reads when DDL ran in
between. It also shows only tables the account holds some privilege on: a table the user
cannot SELECT is silently missing from the catalog.

Flavor differences (https://mariadb.com/kb/en/information-schema-columns-table/,
https://dev.mysql.com/doc/refman/8.4/en/information-schema-columns-table.html):

* COLUMN_DEFAULT. MariaDB 10.2.7+ prints SQL text: SQL NULL is no DEFAULT, ``NULL`` is
  DEFAULT NULL (also shown for a nullable column without a DEFAULT clause), a string is
  quoted (``'it''s'``, backslash escapes), a number bare, a BIT value as ``b'101'``, and
  anything else is an expression (``current_timestamp(3)``, ``uuid()``, ``(1 + 2)``).
  MySQL (and older MariaDB) prints the raw value: SQL NULL is DEFAULT NULL on a nullable
  column, an expression has ``DEFAULT_GENERATED`` in EXTRA (5.7 has CURRENT_TIMESTAMP
  without it), BIT values are ``b'101'`` and, from 8.0, binary strings ``0x...``.
* Binary strings: CHARACTER_SET_NAME is NULL on MariaDB and "binary" on MySQL; both become
  "binary" here. MariaDB prints a binary default as a quoted string with non-UTF-8 bytes as
  '?', so such a default is not exact.
* Generated columns: EXTRA is ``VIRTUAL GENERATED`` / ``STORED GENERATED`` (older MariaDB:
  ``PERSISTENT``); MariaDB shows their COLUMN_DEFAULT as ``NULL``, ignored here.
* COLUMNS.COLUMN_KEY says 'PRI' for a UNIQUE NOT NULL key when the table has no primary
  key; only the index named ``PRIMARY`` counts here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Final, Literal

import pymysql

from ..errors import ReplicatorError, ServerRefusedError
from ..schema.model import (
    BINARY_TYPES,
    NO_DEFAULT,
    TEXT_TYPES,
    Catalog,
    Column,
    ColumnDefault,
    Database,
    ServerTraits,
    Table,
)
from .errors import (
    ER_DBACCESS_DENIED,
    ER_SPECIFIC_ACCESS_DENIED,
    ER_TABLEACCESS_DENIED,
    SourceUnavailableError,
    error_code,
)
from .server_info import connection_account, connection_where, parse_version

__all__ = [
    "SYSTEM_SCHEMAS",
    "catalog_from_rows",
    "column_default",
    "parse_labels",
    "read_catalog",
    "read_traits",
    "unquote",
]

Row = Sequence[object]

SYSTEM_SCHEMAS: Final = ("mysql", "information_schema", "performance_schema", "sys")
_NOT_SYSTEM = "NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys')"

# Row shapes of the four queries, in column order.
SCHEMATA_SQL: Final = (
    "SELECT SCHEMA_NAME, DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME "
    f"FROM information_schema.SCHEMATA WHERE SCHEMA_NAME {_NOT_SYSTEM}"
)
TABLES_SQL: Final = (
    "SELECT t.TABLE_SCHEMA, t.TABLE_NAME, t.TABLE_COLLATION, c.CHARACTER_SET_NAME "
    "FROM information_schema.TABLES t "
    "LEFT JOIN information_schema.COLLATION_CHARACTER_SET_APPLICABILITY c "
    "ON c.COLLATION_NAME = t.TABLE_COLLATION "
    f"WHERE t.TABLE_TYPE = 'BASE TABLE' AND t.TABLE_SCHEMA {_NOT_SYSTEM}"
)
COLUMN_FIELDS: Final = (
    "TABLE_SCHEMA",
    "TABLE_NAME",
    "ORDINAL_POSITION",
    "COLUMN_NAME",
    "DATA_TYPE",
    "COLUMN_TYPE",
    "IS_NULLABLE",
    "COLUMN_DEFAULT",
    "CHARACTER_MAXIMUM_LENGTH",
    "NUMERIC_PRECISION",
    "NUMERIC_SCALE",
    "DATETIME_PRECISION",
    "CHARACTER_SET_NAME",
    "COLLATION_NAME",
    "EXTRA",
    "GENERATION_EXPRESSION",
)
PRIMARY_SQL: Final = (
    "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, SEQ_IN_INDEX "
    "FROM information_schema.STATISTICS "
    f"WHERE INDEX_NAME = 'PRIMARY' AND TABLE_SCHEMA {_NOT_SYSTEM} "
    "ORDER BY TABLE_SCHEMA, TABLE_NAME, SEQ_IN_INDEX"
)

_QUOTED = re.compile(r"'((?:[^'\\]|''|\\.)*)'", re.DOTALL)
_ESCAPE = re.compile(r"''|\\(.)", re.DOTALL)
_ESCAPES: Final = {"0": "\0", "n": "\n", "r": "\r", "t": "\t", "b": "\b", "Z": "\x1a"}
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_BITS = re.compile(r"[bB]'([01]*)'")
_HEX = re.compile(r"[xX]'([0-9a-fA-F]*)'")
_MYSQL_HEX = re.compile(r"0x([0-9a-fA-F]*)")
_CURRENT_TIMESTAMP = re.compile(r"current_timestamp(?:\(\d*\))?", re.IGNORECASE)
_GENERATED = re.compile(r"\b(?:VIRTUAL|STORED) GENERATED\b|\bPERSISTENT\b", re.IGNORECASE)
_UNSIGNED = re.compile(r"\bunsigned\b", re.IGNORECASE)
_PRIVILEGE_DENIED: Final = frozenset(
    {ER_DBACCESS_DENIED, ER_TABLEACCESS_DENIED, ER_SPECIFIC_ACCESS_DENIED}
)
_MARIADB_QUOTED_DEFAULTS: Final = (10, 2, 7)


def read_traits(conn: pymysql.connections.Connection) -> ServerTraits:
    """The server's flavor, version and lower_case_table_names."""
    row = _fetch(conn, "SELECT VERSION(), @@lower_case_table_names", "the server version")[0]
    version = _text(row[0]) or ""
    numbers = parse_version(version)
    if numbers == (0, 0, 0):
        raise ReplicatorError(f"{connection_where(conn)}: unrecognised server version {version!r}")
    flavor: Literal["mariadb", "mysql"] = "mariadb" if "mariadb" in version.lower() else "mysql"
    return ServerTraits(flavor, numbers, _int(row[1]) or 0)


def read_catalog(conn: pymysql.connections.Connection, traits: ServerTraits) -> Catalog:
    """Every non-system database and base table of the server, as the model holds them."""
    generation = "GENERATION_EXPRESSION" if _has_generation_expression(traits) else "NULL"
    fields = ", ".join(generation if f == "GENERATION_EXPRESSION" else f for f in COLUMN_FIELDS)
    columns_sql = (
        f"SELECT {fields} FROM information_schema.COLUMNS WHERE TABLE_SCHEMA {_NOT_SYSTEM} "
        "ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION"
    )
    return catalog_from_rows(
        traits,
        _fetch(conn, SCHEMATA_SQL, "information_schema.SCHEMATA"),
        _fetch(conn, TABLES_SQL, "information_schema.TABLES"),
        _fetch(conn, columns_sql, "information_schema.COLUMNS"),
        _fetch(conn, PRIMARY_SQL, "information_schema.STATISTICS"),
    )


def catalog_from_rows(
    traits: ServerTraits,
    schemata: Iterable[Row],
    tables: Iterable[Row],
    columns: Iterable[Row],
    primary: Iterable[Row],
) -> Catalog:
    """The catalog from the rows of the four queries (see ``*_SQL`` and ``COLUMN_FIELDS``).

    Columns and key parts of tables not in ``tables`` (views, sequences) are ignored.
    """
    databases: dict[str, Database] = {}
    for name, charset, collation in schemata:
        db = _text(name) or ""
        if db not in SYSTEM_SCHEMAS:
            databases[db] = Database(db, _text(charset), _text(collation))
    defaults: dict[tuple[str, str], tuple[str | None, str | None]] = {}
    for schema, name, collation, charset in tables:
        key = (_text(schema) or "", _text(name) or "")
        if key[0] not in SYSTEM_SCHEMAS:
            coll = _text(collation)
            defaults[key] = (_text(charset) or _collation_charset(coll), coll)
    rows: dict[tuple[str, str], list[tuple[int, Row]]] = {key: [] for key in defaults}
    for row in columns:
        key = (_text(row[0]) or "", _text(row[1]) or "")
        if key in rows:
            rows[key].append((_int(row[2]) or 0, row[3:]))
    keys: dict[tuple[str, str], list[tuple[int, str]]] = {key: [] for key in defaults}
    for schema, name, column, seq in primary:
        key = (_text(schema) or "", _text(name) or "")
        if key in keys:
            keys[key].append((_int(seq) or 0, _text(column) or ""))
    # columns numbered 1..n across the tables in key order, as ``Catalog.numbered`` does
    # (made here with their ids: a copy of each of 50,000 columns costs a quarter second)
    tables_out: dict[tuple[str, str], Table] = {}
    next_id = 1
    for key in sorted(defaults):
        charset, collation = defaults[key]
        ordered = [r for _, r in sorted(rows[key], key=lambda pair: pair[0])]
        cols = tuple(_column(traits, r, next_id + i) for i, r in enumerate(ordered))
        next_id += len(cols)
        tables_out[key] = Table(
            schema=key[0],
            name=key[1],
            columns=cols,
            primary_key=tuple(c for _, c in sorted(keys[key])),
            charset=charset,
            collation=collation,
        )
    return Catalog(traits=traits, databases=databases, tables=tables_out, next_column_id=next_id)


def unquote(text: str) -> str:
    """The inside of a quoted SQL string as the server prints it: '' and backslash escapes."""
    return _ESCAPE.sub(lambda m: "'" if m[1] is None else _ESCAPES.get(m[1], m[1]), text)


def parse_labels(column_type: str) -> tuple[str, ...]:
    """The labels of an ENUM/SET COLUMN_TYPE: ``enum('a','it''s')`` -> ('a', "it's")."""
    return tuple(unquote(m) for m in _QUOTED.findall(column_type))


def column_default(
    traits: ServerTraits,
    text: str | None,
    *,
    data_type: str,
    nullable: bool,
    extra: str = "",
) -> ColumnDefault:
    """A column's default from COLUMN_DEFAULT (see the module doc for the flavors)."""
    if traits.flavor == "mariadb" and traits.version >= _MARIADB_QUOTED_DEFAULTS:
        return _mariadb_default(text)
    if text is None:
        return ColumnDefault("null") if nullable else NO_DEFAULT
    if "DEFAULT_GENERATED" in extra.upper():
        return ColumnDefault("expression", text)
    if data_type in ("timestamp", "datetime") and _CURRENT_TIMESTAMP.fullmatch(text.strip()):
        return ColumnDefault("expression", text)
    if data_type == "bit" and (bits := _BITS.fullmatch(text)):
        return _bits_default(bits[1])
    mysql8 = traits.flavor == "mysql" and traits.version >= (8, 0, 0)
    hexed = _MYSQL_HEX.fullmatch(text) if mysql8 else None
    if data_type in BINARY_TYPES and hexed:
        return ColumnDefault("value", hexed[1].lower(), hex=True)
    return ColumnDefault("value", text)


def _mariadb_default(text: str | None) -> ColumnDefault:
    if text is None:
        return NO_DEFAULT
    if text == "NULL":
        return ColumnDefault("null")
    if quoted := _QUOTED.fullmatch(text):
        return ColumnDefault("value", unquote(quoted[1]))
    if _NUMBER.fullmatch(text):
        return ColumnDefault("value", text)
    if bits := _BITS.fullmatch(text):
        return _bits_default(bits[1])
    if hexed := _HEX.fullmatch(text):
        return ColumnDefault("value", hexed[1].lower(), hex=True)
    return ColumnDefault("expression", text)


def _bits_default(digits: str) -> ColumnDefault:
    """b'101' as its bytes in hex ('05'): one byte per 8 digits, at least one."""
    width = max(1, (len(digits) + 7) // 8)
    return ColumnDefault("value", int(digits or "0", 2).to_bytes(width, "big").hex(), hex=True)


def _column(traits: ServerTraits, row: Row, column_id: int) -> Column:
    """The Column ``column_id`` from a COLUMNS row from COLUMN_NAME on."""
    (name, data_type, column_type, is_nullable, default, char_length) = row[:6]
    (num_precision, num_scale, dt_precision, charset, collation, extra, generation) = row[6:13]
    kind = (_text(data_type) or "").lower()
    ctype = _text(column_type) or ""
    extras = _text(extra) or ""
    upper = extras.upper()
    nullable = _text(is_nullable) == "YES"
    expression = _text(generation)
    generated = expression if expression and _GENERATED.search(extras) else None
    if generated is None:
        col_default = column_default(
            traits, _text(default), data_type=kind, nullable=nullable, extra=extras
        )
    else:
        col_default = NO_DEFAULT  # MariaDB shows 'NULL'; a generated column has no default
    labels = parse_labels(ctype) if kind in ("enum", "set") else None
    if kind in TEXT_TYPES:
        cs, coll = _text(charset), _text(collation)
    elif kind in BINARY_TYPES:
        cs, coll = "binary", None
    else:
        cs, coll = None, None
    if kind in ("char", "varchar", "binary", "varbinary"):
        length = _int(char_length)
    elif kind == "bit":
        length = _int(num_precision)
    else:
        length = None
    decimal = kind in ("decimal", "numeric")
    return Column(
        name=_text(name) or "",
        data_type=kind,
        column_type=ctype,
        unsigned=labels is None and _UNSIGNED.search(ctype) is not None,
        length=length,
        precision=_int(num_precision) if decimal else None,
        scale=_int(num_scale) if decimal else None,
        fsp=_int(dt_precision) if kind in ("time", "datetime", "timestamp") else None,
        charset=cs,
        collation=coll,
        labels=labels,
        nullable=nullable,
        default=col_default,
        generated=generated,
        auto_increment="AUTO_INCREMENT" in upper,
        invisible="INVISIBLE" in upper,
        id=column_id,
    )


def _collation_charset(collation: str | None) -> str | None:
    """A collation's charset from its name: the fallback when the join finds none (MariaDB
    10.10+ lists 'utf8mb4_uca1400_ai_ci' there as 'uca1400_ai_ci')."""
    if not collation:
        return None
    return "binary" if collation == "binary" else collation.split("_", 1)[0]


def _has_generation_expression(traits: ServerTraits) -> bool:
    """COLUMNS.GENERATION_EXPRESSION exists from MySQL 5.7 and MariaDB 10.2."""
    return traits.version >= ((10, 2, 0) if traits.flavor == "mariadb" else (5, 7, 0))


def _fetch(conn: pymysql.connections.Connection, sql: str, what: str) -> list[Row]:
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return list(cur.fetchall())
    except pymysql.err.Error as exc:
        where, account = connection_where(conn), connection_account(conn)
        if error_code(exc) in _PRIVILEGE_DENIED:
            raise ServerRefusedError(
                f"{where}: {account!r} may not read {what}: {exc}",
                hint="the account needs SELECT on the replicated tables "
                "(information_schema shows only tables it has privileges on)",
            ) from exc
        raise SourceUnavailableError(
            f"{where}: cannot read {what}: {exc}",
            hint="check that the server is running and reachable; replicator retries this",
        ) from exc


def _text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


def _int(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, int):
        return value
    return int(_text(value) or 0)
