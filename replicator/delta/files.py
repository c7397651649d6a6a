"""A table's files written in key order and committed whole: the layout of a (re)build.

delta-rs's own writer does not keep the order of the rows it is given (it writes in
parallel), so a build writes its Parquet files itself: ranges of rows already ordered by
key, cut into files of ``FILE_ROWS`` rows, each file's key range recorded in its ``add``
action's statistics (``numRecords``, ``minValues``/``maxValues`` of the key columns, exact
because they are computed from the rows). Readers and MERGE then skip every file whose key
range cannot hold a key they look for. The files are committed in one Delta commit with
delta-rs (``create_table_with_add_actions`` / ``create_write_transaction``): until then
no reader sees them, and a crash leaves only unreferenced files that a vacuum deletes.
"""

from __future__ import annotations

import datetime as dt
import json
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..storage import Store

__all__ = ["FILE_ROWS", "write_file", "write_files"]

FILE_ROWS = 262_144  # small enough that a MERGE of a few keys rewrites little


def write_files(
    store: Store, rel: str, parts: Iterable[pa.Table], key: Sequence[str]
) -> Iterator[Any]:
    """``deltalake.transaction.AddAction`` of each file written under ``<rel>/`` from
    ``parts`` (in order: a file never holds rows of a later part before an earlier one's)."""
    pending: list[pa.Table] = []
    held = 0
    for part in parts:
        offset = 0
        while offset < part.num_rows:
            take = min(part.num_rows - offset, FILE_ROWS - held)
            pending.append(part.slice(offset, take))
            held += take
            offset += take
            if held == FILE_ROWS:
                yield write_file(store, rel, pa.concat_tables(pending), key)
                pending, held = [], 0
    if held:
        yield write_file(store, rel, pa.concat_tables(pending), key)


def write_file(store: Store, rel: str, rows: pa.Table, key: Sequence[str]) -> Any:
    """The ``AddAction`` of ``rows`` written as one new file under ``<rel>/``."""
    from deltalake.transaction import AddAction  # noqa: PLC0415 - optional dependency

    filesystem, base = store.filesystem()
    name = f"part-{uuid.uuid4().hex}.snappy.parquet"
    path = f"{base}/{rel}/{name}"
    filesystem.create_dir(f"{base}/{rel}", recursive=True)
    with filesystem.open_output_stream(path) as out:
        pq.write_table(rows, out, compression="snappy")
    size = filesystem.get_file_info(path).size
    return AddAction(
        path=name,
        size=int(size),
        partition_values={},
        modification_time=int(time.time() * 1000),
        data_change=True,
        stats=json.dumps(_stats(rows, key)),
    )


def _stats(rows: pa.Table, key: Sequence[str]) -> dict[str, Any]:
    """The file's row count, and the range of each key column whose values Delta's stats
    spell plainly (integers, text, dates); other columns get none, so readers read the file
    rather than skip it on a bound spelled wrong."""
    out: dict[str, Any] = {"numRecords": rows.num_rows}
    low: dict[str, Any] = {}
    high: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for name in key:
        column = rows.column(name)
        kind = column.type
        if not (pa.types.is_integer(kind) or pa.types.is_string(kind) or pa.types.is_date32(kind)):
            continue
        found = pc.min_max(column)
        lowest, highest = found["min"].as_py(), found["max"].as_py()
        if lowest is None:
            continue
        if isinstance(lowest, dt.date):
            lowest, highest = lowest.isoformat(), highest.isoformat()
        low[name], high[name] = lowest, highest
        nulls[name] = column.null_count
    if low:
        out.update(minValues=low, maxValues=high, nullCount=nulls)
    return out
