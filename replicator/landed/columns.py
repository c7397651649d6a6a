"""Which column of an older schema version holds each column of the newest, and what rows
older than a column hold: column ids and fills from the Parquet footers.

Each table column's Arrow field may carry ``PARQUET:field_id`` (the column's stable id: the
same across ``ALTER TABLE ... CHANGE/RENAME COLUMN`` and table renames, a new one for a column
dropped and added again) and ``replicator.fill`` (on columns ``ALTER TABLE ... ADD`` added:
the value the server filled older rows with; ``sink.fill``). ``match`` pairs the newest
version's columns with an older version's: by id when both sides have ids, else by name
(without regard to case) as files of older writers need. A newest column the older version
lacks is a ``Source`` with ``old=None``: rows of that version hold its ``fill`` —

* ``Fill("value", V)``: the exact value (V as JSON: ``fills`` converts it to the column's
  Spark type);
* ``Fill("null")``: NULL;
* ``Fill("unknown", why=...)``: an expression default; the binlog does not carry the value,
  so the column counts as absent in those rows (``_absent``), never as a guess;
* no fill (files of older writers): null, as before column ids existed.

Pure pyarrow; no Spark.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ..errors import ConfigError, IntegrityError
from .contract import AUX, FIELD_FILL_KEY, FIELD_ID_KEY, FIELD_TYPE_KEY, WORKING_COLUMNS

__all__ = [
    "Column",
    "Fill",
    "Source",
    "find_field",
    "match",
    "refuse_working_columns",
    "resolve_key",
    "table_columns",
    "version_key",
]

FILL_KINDS = frozenset({"value", "null", "unknown"})


@dataclass(frozen=True, slots=True)
class Fill:
    """What rows older than a column hold (``replicator.fill``)."""

    kind: str  # value, null, unknown
    value: Any = None  # kind value: the JSON value
    why: str = ""  # kind unknown: why the value is not known


@dataclass(frozen=True, slots=True)
class Column:
    """A table column of one schema version."""

    name: str
    field_id: int | None
    fill: Fill | None


@dataclass(frozen=True, slots=True)
class Source:
    """Where the rows of an older version have newest column ``name``: its column ``old``,
    or, when it has none (``old`` None), ``fill``."""

    name: str
    old: str | None
    fill: Fill | None


def _fill(raw: bytes, field: str) -> Fill:
    try:
        doc = json.loads(raw)
        kind = str(doc["kind"])
    except (ValueError, KeyError, TypeError) as exc:
        raise IntegrityError(
            f"column {field}: unreadable replicator.fill {raw!r} in a committed file's footer",
            hint="the footer is written by the daemon; restore the file from a backup",
        ) from exc
    if kind == "value" and "value" in doc:
        return Fill("value", doc["value"])
    if kind == "null":
        return Fill("null")
    return Fill("unknown", why=str(doc.get("why") or f"fill of kind {kind!r}"))


def table_columns(schema: pa.Schema, aux: Collection[str]) -> tuple[Column, ...]:
    """The table's own columns of a file schema (``aux``: the metadata columns to skip)."""
    out: list[Column] = []
    for field in schema:
        if field.name in aux:
            continue
        meta = field.metadata or {}
        raw_id = meta.get(FIELD_ID_KEY)
        raw_fill = meta.get(FIELD_FILL_KEY)
        out.append(
            Column(
                name=field.name,
                field_id=None if raw_id is None else int(raw_id),
                fill=None if raw_fill is None else _fill(raw_fill, field.name),
            )
        )
    return tuple(out)


def find_field(fields: pa.Schema | pa.DataType, name: str) -> pa.Field | None:
    """The field (of a schema or a struct type) named ``name`` without regard to case."""
    key = name.lower()
    items = list(fields) if isinstance(fields, pa.Schema) else _struct_fields(fields)
    for field in items:
        if field.name.lower() == key:
            return field
    return None


def _struct_fields(t: pa.DataType) -> list[pa.Field]:
    return [t.field(i) for i in range(t.num_fields)]


def version_key(schema: pa.Schema) -> tuple[object, ...]:
    """What makes two files one schema version: names, types, ids, fills and the columns'
    source types (``FIELD_TYPE_KEY``: a DECIMAL past 38 digits lands as text of its scale,
    so DECIMAL(40,4) and, after an ALTER, DECIMAL(45,6) are two versions of one Arrow type;
    ``decimal_text``). The footer's other metadata, such as the writer's version hash,
    does not matter."""
    return tuple(
        (
            f.name,
            str(f.type),
            f.nullable,
            (f.metadata or {}).get(FIELD_ID_KEY),
            (f.metadata or {}).get(FIELD_FILL_KEY),
            (f.metadata or {}).get(FIELD_TYPE_KEY),
        )
        for f in schema
    )


def match(older: Sequence[Column], newest: Sequence[Column]) -> tuple[Source, ...]:
    """For each newest column, the older version's column that holds it, or its fill."""
    by_id = {c.field_id: c for c in older if c.field_id is not None}
    by_name = {c.name.lower(): c for c in older}
    out: list[Source] = []
    for column in newest:
        if column.field_id is not None and by_id:
            found = by_id.get(column.field_id)
        else:
            found = by_name.get(column.name.lower())
        out.append(Source(column.name, None if found is None else found.name, column.fill))
    return tuple(out)


def renames(schema: pa.Schema, newest: pa.Schema) -> dict[str, str]:
    """Older column name (lower case) -> newest name, for the columns both versions have."""
    sources = match(table_columns(schema, AUX), table_columns(newest, AUX))
    return {s.old.lower(): s.name for s in sources if s.old is not None}


def resolve_key(table: str, names: Sequence[str], key: Sequence[str]) -> tuple[str, ...]:
    """``key``'s columns spelled as in ``names`` (matched without regard to case); a key
    column the table does not have is a ConfigError naming ``--key``."""
    spelled: dict[str, str] = {}
    for name in names:
        spelled.setdefault(name.lower(), name)
    resolved = []
    for name in key:
        found = spelled.get(name.lower())
        if found is None:
            raise ConfigError(
                f"table {table}: key column {name} is not among its columns ({', '.join(names)})",
                hint=f"check --key {table}=...",
            )
        resolved.append(found)
    return tuple(resolved)


def refuse_working_columns(table: str, names: Sequence[str]) -> None:
    """A ConfigError when a column of ``table`` has the name (in any case) of a working
    column of the Spark merge (``contract.WORKING_COLUMNS``); both outputs refuse it, so that
    both accept the same tables."""
    clash = [n for n in names if n.lower() in WORKING_COLUMNS]
    if clash:
        raise ConfigError(
            f"table {table}: column `{clash[0]}` has the name of a materialize working column",
            hint="rename the column, or leave the table out with --tables",
        )
