"""Table schemas from information_schema, for binlogs without full column metadata.

When ``binlog_row_metadata`` is below FULL, TABLE_MAP events lack column names and ENUM/SET
labels (and with NO_LOG, signedness and charsets too). ``InformationSchemaLookup`` supplies
them from ``information_schema.COLUMNS`` the first time a table is seen, and again after
``forget()`` (DDL that may change columns). Limits (docs/operations.md, The replica stream):
information_schema shows the table as it is *now*, and MariaDB prints ENUM/SET labels in
utf8mb3 there (characters outside the BMP come back as '?'); FULL metadata avoids both.
"""

from __future__ import annotations

import contextlib
import re
import threading

import pymysql

from ..binlog.schema import ColumnSchema, TableSchema
from ..config import SourceConfig
from .connection import open_connection

_LABEL = re.compile(r"'((?:[^'\\]|''|\\.)*)'")
_UNSIGNED = re.compile(r"\bunsigned\b")
_QUERY = (
    "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, CHARACTER_SET_NAME, COLUMN_KEY, "
    "DATETIME_PRECISION "
    "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
    "ORDER BY ORDINAL_POSITION"
)


def _unquote(label: str) -> str:
    """A label as COLUMN_TYPE quotes it: '' for a quote, backslash escapes."""
    label = label.replace("''", "'")
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t", "0": "\0"}.get(m[1], m[1]), label)


def parse_columns(rows: list[tuple[object, ...]]) -> tuple[ColumnSchema, ...]:
    """information_schema.COLUMNS rows (name, data_type, column_type, charset, key[, fsp])."""
    columns = []
    for row in rows:
        name, data_type, column_type, charset, key = row[:5]
        fsp = row[5] if len(row) > 5 else None
        kind = str(data_type).lower()
        text = str(column_type)
        labels = (
            tuple(_unquote(m) for m in _LABEL.findall(text)) if kind in ("enum", "set") else None
        )
        columns.append(
            ColumnSchema(
                name=str(name),
                data_type=kind,
                unsigned=labels is None and _UNSIGNED.search(text) is not None,
                charset=None if charset is None else str(charset),
                enum_values=labels if kind == "enum" else None,
                set_values=labels if kind == "set" else None,
                primary_key=key == "PRI",
                precision=int(fsp) if isinstance(fsp, int) else None,
            )
        )
    return tuple(columns)


class InformationSchemaLookup:
    """A ``schema_lookup`` callable with a cache; opens its own connection on first use."""

    def __init__(self, cfg: SourceConfig) -> None:
        self._cfg = cfg
        self._conn: pymysql.connections.Connection | None = None
        self._cache: dict[tuple[str, str], TableSchema | None] = {}
        self._lock = threading.Lock()
        self.lookups = 0

    def __call__(self, schema: str, table: str) -> TableSchema | None:
        key = (schema, table)
        with self._lock:
            if key not in self._cache:
                self._cache[key] = self._fetch(schema, table)
            return self._cache[key]

    def forget(self) -> None:
        """Drop every cached table (after DDL that may have changed one)."""
        with self._lock:
            self._cache.clear()

    def _fetch(self, schema: str, table: str) -> TableSchema | None:
        self.lookups += 1
        for attempt in (1, 2):
            if self._conn is None:
                self._conn = open_connection(self._cfg)
            try:
                with self._conn.cursor() as cur:
                    cur.execute(_QUERY, (schema, table))
                    rows = list(cur.fetchall())
                break
            except pymysql.err.Error:
                self.close()
                if attempt == 2:
                    raise
        if not rows:
            return None
        return TableSchema(schema, table, parse_columns(rows))

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(pymysql.err.Error):
                conn.close()
