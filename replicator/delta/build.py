"""A table's state from its whole lineage, in bounded memory: folded range by range.

A lineage with up to ``IN_MEMORY_ROWS`` row changes is read and folded at once. A larger one
is split by ranges of its first identity column (the first key column, or a keyless
table's first column) into about ``IN_MEMORY_ROWS``-sized ranges:

1. one pass over the changes takes a sample of that column and chooses the range bounds;
2. a second pass writes each change to the spill file of the range its row is in (a change
   that moves a row from one key to another goes to both ranges, as does an update of a
   keyless row whose first column changes) — Arrow IPC files in a temporary directory;
3. each range is folded on its own, and of what it yields only the rows (and touched
   identities) of that range are kept: every change that decides a row of a range is in
   that range's file, so the parts are exact, and they come out in key order.

The ranges are written one after the other (``files``) into the same Delta commit, so the
table's files are ordered by key whatever the order the rows landed in.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .changes import LineageScan
from .fold import fold
from .layout import BEFORE_KEY, Model, identity

__all__ = ["IN_MEMORY_ROWS", "Built", "build"]

IN_MEMORY_ROWS = 250_000  # a fold of this many row changes stays within a few hundred MB
_SAMPLE_EVERY = 64


@dataclass(slots=True)
class Built:
    """What ``build`` yielded, once its batches are consumed."""

    rows: int = 0
    unmatched: int = 0
    ranges: int = 1


def build(scan: LineageScan) -> tuple[Iterator[pa.Table], Built]:
    """The table's rows, range after range (each in ``output_schema``, ordered by key),
    and the counts it gathers as they are read."""
    built = Built(ranges=max(1, math.ceil(scan.rows / IN_MEMORY_ROWS)))
    return _ranges(scan, built), built


def _ranges(scan: LineageScan, built: Built) -> Iterator[pa.Table]:
    model = scan.model
    if built.ranges == 1:
        parts = list(scan.parts())
        changes = pa.concat_tables(parts) if parts else model.changes_schema().empty_table()
        yield from _folded(model, changes, built, None, None)
        return
    bounds = _bounds(scan, built.ranges)
    built.ranges = len(bounds) + 1
    with tempfile.TemporaryDirectory(prefix="replicator-build-") as tmp:
        paths = [Path(tmp) / f"range-{i}.arrows" for i in range(built.ranges)]
        writers: list[pa.ipc.RecordBatchStreamWriter | None] = [None] * built.ranges
        first = identity(model)[0]
        try:
            for part in scan.parts():
                new = _range_of(part.column(first), bounds)
                old = _range_of(pc.struct_field(part.column(BEFORE_KEY), first), bounds, missing=-1)
                for at in range(built.ranges):
                    chosen = part.filter(pc.or_(pc.equal(new, at), pc.equal(old, at)))
                    if not chosen.num_rows:
                        continue
                    writer = writers[at]
                    if writer is None:
                        writer = pa.ipc.new_stream(paths[at], part.schema)
                        writers[at] = writer
                    writer.write_table(chosen)
        finally:
            for writer in writers:
                if writer is not None:
                    writer.close()
        for at, path in enumerate(paths):
            if writers[at] is None:
                continue
            with pa.ipc.open_stream(path) as reader:
                changes = reader.read_all()
            path.unlink()
            yield from _folded(model, changes, built, bounds, at)


def _folded(
    model: Model,
    changes: pa.Table,
    built: Built,
    bounds: pa.Array | None,
    at: int | None,
) -> Iterator[pa.Table]:
    folded = fold(model, changes.sort_by("_seq"))
    rows = folded.rows
    if bounds is not None:
        rows = rows.filter(pc.equal(_range_of(rows.column(identity(model)[0]), bounds), at))
    if model.key and rows.num_rows:
        rows = rows.sort_by([(k, "ascending") for k in model.key])
    built.rows += rows.num_rows
    built.unmatched += folded.unmatched
    yield rows


def _bounds(scan: LineageScan, ranges: int) -> pa.Array:
    """Up to ``ranges - 1`` increasing bounds of the first identity column, from a sample."""
    first = identity(scan.model)[0]
    sample = []
    for part in scan.parts():
        column = part.column(first).combine_chunks()
        sample.append(column.take(pa.array(range(0, len(column), _SAMPLE_EVERY))))
    values = pc.drop_null(pa.concat_arrays(sample)) if sample else pa.array([])
    ordered = values.take(pc.sort_indices(values))
    if len(ordered) == 0:
        return ordered
    picks = [ordered[(i * len(ordered)) // ranges] for i in range(1, ranges)]
    out: list[pa.Scalar] = []
    for pick in picks:
        if not out or pc.greater(pick, out[-1]).as_py():
            out.append(pick)
    return pa.array([p.as_py() for p in out], ordered.type)


def _range_of(
    values: pa.ChunkedArray | pa.Array, bounds: pa.Array, *, missing: int = 0
) -> pa.Array:
    """The range each value is in: how many bounds it is above (a null: ``missing``)."""
    column = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    found = pa.array(np.zeros(len(column), dtype=np.int32))
    for bound in bounds:
        above = pc.cast(pc.fill_null(pc.greater(column, bound), False), pa.int32())
        found = pc.add(found, above)
    if column.null_count:
        found = pc.if_else(column.is_null(), pa.scalar(missing, pa.int32()), found)
    return found
