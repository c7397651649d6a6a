"""A table's state from its whole lineage, in bounded memory: folded range by range.

A lineage with up to ``IN_MEMORY_ROWS`` row changes is read and folded at once. A larger one
is split by ranges of its first identity column (the first key column, or a keyless
table's first column) into about ``IN_MEMORY_ROWS``-sized ranges:

1. one pass over the files reads that column only, and a sample of it gives the range bounds;
2. a second pass writes each change to the spill file of the range its row is in (a change
   that moves a row from one key to another goes to both ranges, as does an update of a
   keyless row whose first column changes) — Arrow IPC files in a temporary directory;
3. each range is folded on its own, and of what it yields only the rows (and touched
   identities) of that range are kept: every change that decides a row of a range is in
   that range's file, so the parts are exact, and they come out in key order. A range's
   changes are dropped once folded, its fold's working columns once its rows are taken.

The ranges are written one after the other (``files``) into the same Delta commit, so the
table's files are ordered by key whatever the order the rows landed in.
"""

from __future__ import annotations

import functools
import math
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .changes import LineageScan
from .fold import fold
from .layout import ABSENT, BEFORE_KEY, Model, identity

__all__ = ["IN_MEMORY_ROWS", "Built", "build", "release_unused"]

IN_MEMORY_ROWS = 100_000  # a fold of this many row changes stays within about 300 MB
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
        yield _folded(model, lambda: _whole(scan), built, None, None)
        return
    bounds = _bounds(scan, built.ranges)
    built.ranges = len(bounds) + 1
    with tempfile.TemporaryDirectory(prefix="replicator-build-") as tmp:
        paths = [Path(tmp) / f"range-{i}.arrows" for i in range(built.ranges)]
        writers: list[pa.ipc.RecordBatchStreamWriter | None] = [None] * built.ranges
        first = identity(model)[0]
        try:
            for part in scan.parts():
                for at, chosen in _split(part, first, bounds):
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
            yield _folded(model, functools.partial(_spilled, path), built, bounds, at)


def _whole(scan: LineageScan) -> pa.Table:
    parts = list(scan.parts())
    return pa.concat_tables(parts) if parts else scan.model.changes_schema().empty_table()


def _spilled(path: Path) -> pa.Table:
    """A range's changes, read back (and the file deleted)."""
    with pa.ipc.open_stream(path) as reader:
        changes = reader.read_all()
    path.unlink()
    return changes


def _folded(
    model: Model,
    load: Callable[[], pa.Table],
    built: Built,
    bounds: pa.Array | None,
    at: int | None,
) -> pa.Table:
    """The rows of one range, from its changes (``load``: read here, so that no caller
    holds them: each copy is dropped as soon as the next one is made)."""
    release_unused()  # the last range's buffers, before this one's
    changes = load().sort_by("_seq")
    folded = fold(model, changes)
    del changes
    rows, unmatched = folded.rows, folded.unmatched
    del folded
    if bounds is not None:
        rows = rows.filter(pc.equal(_range_of(rows.column(identity(model)[0]), bounds), at))
    if model.key and rows.num_rows:
        rows = rows.sort_by([(k, "ascending") for k in model.key])
    built.rows += rows.num_rows
    built.unmatched += unmatched
    return rows


def release_unused() -> None:
    """Give the memory Arrow's pool holds free back to the system (``malloc_trim`` with the
    system allocator ``cli`` chooses): freed buffers otherwise stay in the process, and a
    build or rewrite that goes through many ranges or files would hold them all (180 MB of
    the 850 MB a 1M-row build took)."""
    pa.default_memory_pool().release_unused()


def _bounds(scan: LineageScan, ranges: int) -> pa.Array:
    """Up to ``ranges - 1`` increasing bounds of the first identity column, from a sample
    (of that column only: the bounds only decide how the work is cut, any bounds give the
    same rows)."""
    values = pc.drop_null(scan.sample(identity(scan.model)[0], _SAMPLE_EVERY))
    ordered = values.take(pc.sort_indices(values))
    if len(ordered) == 0:
        return ordered
    picks = [ordered[(i * len(ordered)) // ranges] for i in range(1, ranges)]
    out: list[pa.Scalar] = []
    for pick in picks:
        if not out or pc.greater(pick, out[-1]).as_py():
            out.append(pick)
    return pa.array([p.as_py() for p in out], ordered.type)


def _split(part: pa.Table, first: str, bounds: pa.Array) -> Iterator[tuple[int, pa.Table]]:
    """``part``'s changes by range (one take, then slices): a change goes to the range of
    its row's first identity value as the fold takes it (the before image's where the row
    image leaves the column out: a partial image) and, when its before image's differs, to
    that one's. A NULL value is in range 0, as the fold's rows with it are (``_folded``)."""
    before = part.column(BEFORE_KEY).combine_chunks()
    prior = pc.struct_field(before, [before.type.get_field_index(first)])
    value = part.column(first).combine_chunks()
    absent = part.column(ABSENT).combine_chunks()
    named = pc.utf8_lower(pc.list_flatten(absent))
    left_out = np.zeros(part.num_rows, dtype=np.bool_)
    left_out[pc.list_parent_indices(absent).filter(pc.equal(named, first.lower())).to_numpy()] = (
        True
    )
    if left_out.any():
        value = pc.if_else(pa.array(left_out), prior, value)
    new = _range_of(value, bounds).to_numpy()
    # no before image: the struct is null (a NULL in it is a value, of range 0)
    old_at = np.where(
        before.is_valid().to_numpy(zero_copy_only=False), _range_of(prior, bounds).to_numpy(), -1
    )
    also = np.flatnonzero((old_at >= 0) & (old_at != new))
    rows = np.concatenate([np.arange(len(new), dtype=np.int64), also])
    dest = np.concatenate([new, old_at[also]])
    order = np.argsort(dest, kind="stable")
    rows, dest = rows[order], dest[order]
    chosen = part.take(pa.array(rows))
    edges = np.flatnonzero(np.diff(dest)) + 1
    for low, high in zip(
        np.concatenate([[0], edges]), np.concatenate([edges, [len(dest)]]), strict=True
    ):
        if high > low:
            yield int(dest[low]), chosen.slice(int(low), int(high - low))


def _range_of(values: pa.ChunkedArray | pa.Array, bounds: pa.Array) -> pa.Array:
    """The range each value is in: how many bounds it is above (a null: 0); integers,
    dates and times by a binary search, other types bound by bound."""
    column = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    kind = column.type
    if pa.types.is_integer(kind) or pa.types.is_date(kind) or pa.types.is_timestamp(kind):
        plain = column.fill_null(bounds[0]) if column.null_count and len(bounds) else column
        at = np.searchsorted(
            bounds.to_numpy(zero_copy_only=False),
            plain.to_numpy(zero_copy_only=False),
            side="left",
        )
        found = pa.array(at.astype(np.int32))
    else:
        found = pa.array(np.zeros(len(column), dtype=np.int32))
        for bound in bounds:
            above = pc.cast(pc.fill_null(pc.greater(column, bound), False), pa.int32())
            found = pc.add(found, above)
    if column.null_count:
        found = pc.if_else(column.is_null(), pa.scalar(0, pa.int32()), found)
    return found
