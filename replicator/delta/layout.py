"""The change layout the Arrow current-state code works on (the Spark path's, without Spark).

A table's changes, as ``changes.read_lineage`` hands them to ``fold``: the table's own
columns in one schema, then the metadata columns of ``META`` (``_op``, ``_seq``, ...),
``_absent`` (the columns a row image left out; an empty list, never null), ``_before_key``
(the identity columns of an update's before image: a struct, null when the file has none)
and ``__replicator_unknown`` (columns absent because ALTER TABLE added them with a fill the
binlog does not carry).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import pyarrow as pa

from ..landed.contract import ABSENT, BEFORE, BEFORE_KEY, META, STATE_SEQ, UNKNOWN

__all__ = [
    "ABSENT",
    "BEFORE",
    "BEFORE_KEY",
    "META",
    "META_SCHEMA",
    "STATE_SEQ",
    "UNKNOWN",
    "Model",
    "TableShape",
    "identity",
    "output_schema",
]

META_SCHEMA = pa.schema(
    [
        pa.field("_op", pa.string()),
        pa.field("_seq", pa.int64()),
        pa.field("_gtid", pa.string()),
        pa.field("_ts", pa.timestamp("us", tz="UTC")),
        pa.field("_server_id", pa.int64()),
        pa.field("_binlog_file", pa.string()),
        pa.field("_binlog_pos", pa.int64()),
    ]
)


class Model(Protocol):
    """What the fold needs to know of a table (``changes.ArrowModel`` is one)."""

    @property
    def name(self) -> str: ...  # db.t

    @property
    def schema(self) -> pa.Schema: ...  # the table's own columns, one type each

    @property
    def key(self) -> tuple[str, ...]: ...  # () = whole rows

    @property
    def keep_metadata(self) -> bool: ...

    @property
    def allow_unknown(self) -> bool: ...

    @property
    def assume_stable_keys(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class TableShape:
    """A ``Model`` given outright (tests, and tables read back from an output)."""

    name: str
    schema: pa.Schema
    key: tuple[str, ...] = ()
    keep_metadata: bool = False
    allow_unknown: bool = False
    assume_stable_keys: bool = False


def identity(model: Model) -> tuple[str, ...]:
    """The columns a row is told apart by: its key, or all of them."""
    return model.key or tuple(model.schema.names)


def output_schema(model: Model) -> pa.Schema:
    """The state's columns: the table's, then the metadata and ``_absent`` it keeps."""
    fields: list[pa.Field] = list(model.schema)
    if model.keep_metadata:
        fields.extend(META_SCHEMA)
    if model.allow_unknown:
        fields.append(pa.field(ABSENT, pa.list_(pa.string())))
    return pa.schema(fields)
