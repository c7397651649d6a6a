"""Blocks (``replicator.binlog.block``) as row tuples, for tests that compare decoders.

Native buffers are read back through Arrow (the sink's own reading of them), so a test
comparing these rows with the reference decoders' checks the buffers the Parquet files are
made of, not a second decoding of the event."""

from __future__ import annotations

import datetime as dt
from typing import Any

from replicator.binlog.block import VARIABLE, Block, Vector, Vectors, value_width
from replicator.binlog.values import ABSENT
from replicator.sink import native_arrow
from replicator.sink.changes import Run
from replicator.sink.parquet_writer import _from_buffers, native_type


def vector_values(vector: Vector | None, kind: Any, count: int) -> list[object]:
    if vector is None:
        return [ABSENT] * count
    if isinstance(vector, list):
        return vector
    assert kind is not None, "buffers without a kind"
    found = native_arrow.concat_columns([vector], value_width(kind), kind[0] in VARIABLE)
    assert found is not None
    values: list[Any] = _from_buffers(native_type(kind), count, found).to_pylist()
    if kind[0] == "timestamp_utc":  # Arrow gives ZoneInfo("UTC"), the decoders datetime.UTC
        values = [None if v is None else v.replace(tzinfo=dt.UTC) for v in values]
    return values


def _rows(vectors: Vectors, block: Block) -> tuple[tuple[object, ...], ...]:
    columns = [
        vector_values(v, k, block.count) for v, k in zip(vectors, block.natives, strict=True)
    ]
    if not columns:
        return tuple(() for _ in range(block.count))
    return tuple(zip(*columns, strict=True))


def block_rows(
    block: Block,
) -> tuple[tuple[tuple[object, ...], ...], tuple[tuple[object, ...], ...]]:
    """(rows, after rows) of a block, as the reference decoders give them."""
    after = () if block.after is None else _rows(block.after, block)
    return _rows(block.columns, block), after


def row_change(
    op: str,
    seq: int,
    gtid: str | None,
    ts: dt.datetime,
    server_id: int,
    binlog_file: str,
    binlog_pos: int,
    values: tuple[object, ...],
    before: tuple[object, ...] | None = None,
) -> Run:
    """One row change as a run of one row (values as lists, like the reference decoders
    give them; an ``ABSENT`` value is a column missing from the image); an update with
    ``before`` carries it as the block's before image."""

    def vectors(image: tuple[object, ...]) -> tuple[list[object] | None, ...]:
        return tuple(None if v is ABSENT else [v] for v in image)

    natives = (None,) * len(values)
    if before is None:
        block = Block(1, vectors(values), None, natives)
    else:
        block = Block(1, vectors(before), vectors(values), natives)
    return Run(op, seq, gtid, ts, server_id, binlog_file, binlog_pos, block)
