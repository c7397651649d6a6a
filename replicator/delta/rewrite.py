"""An incremental run's copy-on-write file by file, for batches that touch many files.

delta-rs 1.6 writes no deletion vectors, so a MERGE rewrites every file holding a changed
key, and it does so in one DataFusion plan whose memory grows with the rows it rewrites
(2.4 GB for 1,000 keys spread over 10M rows; 640 MB for one file of 213k rows). When the
touched keys lie in larger files, a keyed table's batch is applied here instead, one file
at a time, in one Delta commit:

1. **Locate.** The touched keys' first column is compared with each file's key range (its
   ``add`` statistics); the files it may be in are read, their key columns only, to find
   the file and row of every touched key.
2. **Fold.** The changes are folded (``fold``) without the output's rows first: every key
   whose columns all come from the changes (full row images) needs none. Only the rows of
   the keys that lack a column are read (whole files, those rows kept), and the batch is
   folded again with them; the result is the one a fold with every touched row gives.
3. **Rewrite.** Each file holding a touched key is read whole and written again with
   those rows replaced by their new versions at their places (the file keeps its key
   order) or left out (deleted keys); new keys go to new files, in key order.
4. **Commit.** The new files and the removal of the old ones are committed in one
   transaction with the batch's app transaction (``create_write_transaction``), as a
   build is: until then no reader sees them, and a crash leaves only unreferenced files.

Memory is then one file at a time. Left to the MERGE (``locate`` returns None, or a
batch's files are small): a batch whose keys lie in files of fewer than
``REWRITE_FROM_ROWS`` rows in all (the newest keys, usually), a table without key, a key
value that is null, a key found twice, a table with deletion vectors, column mapping,
partitions or file paths other than plain names.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import IntegrityError
from ..storage import Store
from .build import release_unused
from .files import FILE_ROWS, write_file, write_files
from .fold import Folded, fold
from .layout import ABSENT, BEFORE_KEY, Model, TableShape, output_schema
from .vectors import (
    FEATURE,
    LogFile,
    added,
    deleted_rows,
    live_files,
    removal,
    with_vector,
    write_vectors,
)

__all__ = ["REWRITE_FROM_ROWS", "Located", "locate", "mark_deleted", "rewrite"]

# a batch whose keys lie in files of fewer rows is left to the MERGE (whose memory grows
# by about 2 KB a row it rewrites, on a 13-column table)
REWRITE_FROM_ROWS = FILE_ROWS // 4
_INDEX = "__replicator_row"
_SLICED = 256  # rows replaced in a file up to which it is written from slices
_AT = "__replicator_at"
_UNSUPPORTED = frozenset({"columnMapping"})


@dataclass(frozen=True, slots=True)
class _Hit:
    """A file holding touched keys: its path as the log names it, its size, and the rows
    (their positions, ascending, and their keys) of the touched keys it holds; in a table
    with deletion vectors, also its ``add`` as the log holds it, the rows its vector
    deletes and its rows in all (deleted ones included)."""

    path: str
    size: int
    positions: npt.NDArray[np.int64]
    keys: pa.Table
    entry: LogFile | None = None
    deleted: npt.NDArray[np.int64] | None = None
    stored: int = 0


@dataclass(frozen=True, slots=True)
class Located:
    """Where a batch's touched keys are: the files holding them, and the touched keys;
    ``version``: the table's version the log was read at (tables with deletion vectors)."""

    hits: tuple[_Hit, ...]
    rows: int  # rows of the files in ``hits``: what a rewrite of them copies
    version: int | None = None


def locate(table: Any, store: Store, rel: str, model: Model, changes: pa.Table) -> Located | None:
    """The files and rows of the keys ``changes`` touch, or None when the table is left to
    the MERGE (module doc)."""
    keys = list(model.key)
    if not keys:
        return None
    touched = _touched(model, changes)
    if any(touched.column(k).null_count for k in keys):
        return None
    protocol = table.protocol()
    features = set(protocol.reader_features or ()) | set(protocol.writer_features or ())
    if features & _UNSUPPORTED or table.metadata().partition_columns:
        return None
    actions = pa.table(table.get_add_actions(flatten=True))
    paths = actions.column("path").to_pylist()
    if any("%" in p or "/" in p or ":" in p for p in paths):
        return None  # (paths the log may spell otherwise than delta-rs lists them)
    version, live = None, None
    if FEATURE in features:  # the rows deleted by vectors are not there
        version, live = live_files(store, rel)
        if version != table.version() or set(live) != set(paths):
            raise IntegrityError(
                f"{rel}: the Delta log read at version {version} does not list the files "
                f"delta-rs lists at version {table.version()}"
            )
    if actions.num_rows == 0 or touched.num_rows == 0:
        return Located((), 0, version)
    candidates = _candidates(actions, touched.column(keys[0]).combine_chunks(), keys[0])
    vector_files: dict[str, bytes] = {}  # read once for all the files whose vectors they hold
    filesystem, base = store.filesystem()
    hits: list[_Hit] = []
    found = 0
    sizes = actions.column("size_bytes").to_pylist()
    counts = actions.column("num_records").to_pylist()
    rows = 0
    key_schema = pa.schema([output_schema(model).field(k) for k in keys])
    for at in candidates:
        read = _read_data(filesystem, f"{base}/{rel}/{paths[at]}", key_schema)
        stored = read.num_rows
        read = read.append_column(_INDEX, pa.array(np.arange(stored, dtype=np.int64)))
        entry = None if live is None else live[paths[at]]
        deleted = None if entry is None else deleted_rows(store, rel, entry, vector_files)
        if deleted is not None and len(deleted):
            kept = np.ones(stored, dtype=np.bool_)
            kept[deleted] = False
            read = read.filter(pa.array(kept))
        held = read.join(touched.select(keys), keys, join_type="left semi")
        if held.num_rows:
            held = held.sort_by(_INDEX)
            positions = np.asarray(held.column(_INDEX).to_numpy(), dtype=np.int64)
            hits.append(
                _Hit(
                    paths[at],
                    int(sizes[at]),
                    positions,
                    held.select(keys),
                    entry,
                    deleted,
                    stored,
                )
            )
            found += held.num_rows
            rows += counts[at] if counts[at] is not None else FILE_ROWS
    if hits:
        every = pa.concat_tables([h.keys for h in hits])
        if every.group_by(keys, use_threads=False).aggregate([]).num_rows != found:
            return None  # a key held twice: the MERGE replaces every copy
    return Located(tuple(hits), rows, version)


def _read_data(filesystem: Any, path: str, schema: pa.Schema) -> pa.Table:
    """The columns ``schema`` names of a table's data file, in its types: a file delta-rs
    wrote (a MERGE, a compaction) stores text as ``string_view`` and bytes as
    ``binary_view`` in its Arrow schema, which pyarrow reads back as such, and a join
    cannot take them as keys."""
    read = pq.read_table(path, columns=schema.names, filesystem=filesystem)
    return read.select(schema.names).cast(schema)


def _touched(model: Model, changes: pa.Table) -> pa.Table:
    """The keys ``changes`` concern, distinct, as the fold sees them: a row image's key
    (the before image's where the row image leaves a key column out: a partial image),
    and the before image's key."""
    keys = list(model.key)
    n = changes.num_rows
    before = changes.column(BEFORE_KEY).combine_chunks()
    names = [before.type.field(i).name for i in range(before.type.num_fields)]
    prior = dict(zip(names, before.flatten(), strict=True))
    absent = changes.column(ABSENT).combine_chunks()
    named = pc.utf8_lower(absent.flatten())
    parents = pc.list_parent_indices(absent)
    after: list[pa.Array] = []
    for k in keys:
        left_out = np.zeros(n, dtype=np.bool_)
        left_out[parents.filter(pc.equal(named, k.lower())).to_numpy()] = True
        value = changes.column(k).combine_chunks()
        after.append(pc.if_else(pa.array(left_out), prior[k], value) if left_out.any() else value)
    valid = before.is_valid()
    found = pa.concat_tables(
        [
            pa.Table.from_arrays(after, names=keys),
            pa.Table.from_arrays([prior[k].filter(valid) for k in keys], names=keys),
        ]
    )
    return found.group_by(keys, use_threads=False).aggregate([])


def _candidates(actions: pa.Table, values: pa.Array, first: str) -> list[int]:
    """The files whose key range (statistics of ``first``) may hold one of ``values``:
    every file without a range for it, or when ``first`` is not an integer, text or date
    (other types' statistics may be rounded: timestamps to milliseconds). A text maximum
    may be a prefix of the largest value (writers truncate long texts): a value it begins
    is taken as inside."""
    kind = values.type
    low, high = f"min.{first}", f"max.{first}"
    usable = pa.types.is_integer(kind) or pa.types.is_string(kind) or pa.types.is_date32(kind)
    if not usable or low not in actions.column_names or high not in actions.column_names:
        return list(range(actions.num_rows))
    out = []
    for at, (lo, hi) in enumerate(
        zip(actions.column(low).to_pylist(), actions.column(high).to_pylist(), strict=True)
    ):
        if lo is None or hi is None:
            out.append(at)
            continue
        try:
            above = pc.greater_equal(values, pa.scalar(lo).cast(kind))
            below = pc.less_equal(values, pa.scalar(hi).cast(kind))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            out.append(at)  # a range spelled in a type the key's cannot be compared with
            continue
        if pa.types.is_string(kind):
            below = pc.or_(below, pc.starts_with(values, pattern=str(hi)))
        if pc.any(pc.and_(above, below)).as_py():
            out.append(at)
    return out


def rewrite(
    located: Located,
    store: Store,
    rel: str,
    model: Model,
    changes: pa.Table,
) -> tuple[Folded, list[Any]]:
    """Fold the batch and write the files that replace ``located.hits`` (module doc);
    returns the fold and the Delta actions to commit (``RemoveAction`` and ``AddAction``)."""
    from deltalake.transaction import RemoveAction  # noqa: PLC0415 - optional dependency

    if located.version is not None:  # a removal must name the file's vector: mark_deleted
        raise ValueError("a table with deletion vectors is not rewritten file by file")
    folded = _fold(located, store, rel, model, changes)
    keys = list(model.key)
    schema = output_schema(model)
    alive = folded.rows
    alive_at = alive.select(keys).append_column(
        _AT, pa.array(np.arange(alive.num_rows, dtype=np.int64))
    )
    placed = np.zeros(alive.num_rows, dtype=np.bool_)
    jobs: list[tuple[_Hit, npt.NDArray[np.int64], pa.Table]] = []
    for hit in located.hits:
        # the new version of each touched row of this file (``at``: in ``alive``), by the
        # position of the row it replaces (``where``)
        ranked = hit.keys.append_column(_INDEX, pa.array(hit.positions))
        pairs = ranked.join(alive_at, keys, join_type="inner").sort_by(_INDEX)
        at = np.asarray(pairs.column(_AT).to_numpy(), dtype=np.int64)
        where = np.asarray(pairs.column(_INDEX).to_numpy(), dtype=np.int64)
        placed[at] = True
        jobs.append((hit, where, alive.take(pa.array(at))))

    filesystem, base = store.filesystem()
    actions: list[Any] = []
    for hit, where, versions in jobs:  # one file at a time
        release_unused()  # the last file's buffers, before this one's
        rows = _read_data(filesystem, f"{base}/{rel}/{hit.path}", schema)
        out = _replaced(rows, hit.positions, where, versions)
        del rows
        if out.num_rows:
            actions.append(write_file(store, rel, out, keys))
        del out
    now = int(time.time() * 1000)
    actions.extend(
        RemoveAction(
            path=hit.path,
            data_change=True,
            deletion_timestamp=now,
            size=hit.size,
            partition_values={},
        )
        for hit in located.hits
    )
    unplaced = np.flatnonzero(~placed)
    if len(unplaced):
        added = alive.take(pa.array(unplaced)).sort_by([(k, "ascending") for k in keys])
        actions.extend(write_files(store, rel, [added], keys))
    return folded, actions


def mark_deleted(
    located: Located,
    store: Store,
    rel: str,
    model: Model,
    changes: pa.Table,
) -> tuple[Folded, list[dict[str, Any]]]:
    """Fold the batch and write what applies it with deletion vectors (``vectors``): each
    touched row deleted in its file's vector, the touched keys' new versions and new keys
    in new files; returns the fold and the log actions to commit."""
    folded = _fold(located, store, rel, model, changes)
    keys = list(model.key)
    now = int(time.time() * 1000)
    actions: list[dict[str, Any]] = []
    marked: list[tuple[LogFile, npt.NDArray[np.int64], int]] = []
    for hit in located.hits:
        if hit.entry is None or hit.deleted is None:
            raise ValueError("mark_deleted needs a table located with its deletion vectors")
        deleted = np.union1d(hit.deleted, hit.positions)
        if len(deleted) == hit.stored:  # every row gone: the file is removed
            actions.append(removal(hit.entry, now))
        else:
            marked.append((hit.entry, deleted, hit.stored))
    vectors = write_vectors(store, rel, [d for _, d, _ in marked]) if marked else []
    for (entry, _, stored), vector in zip(marked, vectors, strict=True):
        actions.extend([removal(entry, now), with_vector(entry, vector, stored)])
    alive = folded.rows
    if alive.num_rows:
        ordered = alive.sort_by([(k, "ascending") for k in keys])
        actions.extend(added(a) for a in write_files(store, rel, [ordered], keys))
    return folded, actions


def _replaced(
    rows: pa.Table,
    positions: npt.NDArray[np.int64],
    where: npt.NDArray[np.int64],
    new: pa.Table,
) -> pa.Table:
    """``rows`` without the rows at ``positions`` (ascending), each of those at ``where``
    (a subset, ascending) followed by its new version (``new``, in that order). Few rows
    replaced: slices of both, no copy; many: one ``take`` (a table of thousands of slices
    is slow to build and to write)."""
    if len(positions) > _SLICED:
        n = rows.num_rows
        kept = np.ones(n, dtype=np.bool_)
        kept[positions] = False
        stay = np.flatnonzero(kept)
        order = np.concatenate([stay, n + np.arange(len(where), dtype=np.int64)])
        places = np.concatenate([stay, where])
        order = order[np.argsort(places, kind="stable")]
        return pa.concat_tables([rows, new]).take(pa.array(order))
    pieces: list[pa.Table] = []
    done = 0  # rows of ``rows`` placed
    at = 0  # new versions placed
    for position in positions.tolist():
        if position > done:
            pieces.append(rows.slice(done, position - done))
        if at < len(where) and where[at] == position:
            pieces.append(new.slice(at, 1))
            at += 1
        done = position + 1
    if done < rows.num_rows:
        pieces.append(rows.slice(done))
    return pa.concat_tables(pieces) if pieces else rows.slice(0, 0)


def _fold(located: Located, store: Store, rel: str, model: Model, changes: pa.Table) -> Folded:
    """The batch folded with the output's rows it needs: none when every key it leaves has
    all its columns from the changes, else the rows of the keys that lack one."""
    loose = fold(_lenient(model), changes)
    lacking = pc.greater(pc.list_value_length(loose.rows.column(ABSENT)), 0)
    if not pc.any(lacking).as_py():
        return fold(model, changes)
    keys = list(model.key)
    wanted = loose.rows.filter(lacking).select(keys)
    schema = output_schema(model)
    filesystem, base = store.filesystem()
    state: list[pa.Table] = []
    for hit in located.hits:
        ranked = hit.keys.append_column(_INDEX, pa.array(hit.positions))
        chosen = ranked.join(wanted, keys, join_type="left semi")
        if not chosen.num_rows:
            continue
        rows = _read_data(filesystem, f"{base}/{rel}/{hit.path}", schema)
        state.append(rows.take(pa.array(np.sort(chosen.column(_INDEX).to_numpy()))))
        del rows
    return fold(model, changes, pa.concat_tables(state) if state else schema.empty_table())


def _lenient(model: Model) -> Model:
    """``model`` with unknown columns allowed: the fold then lists, per row, the columns
    no change carried instead of stopping."""
    return TableShape(
        model.name, model.schema, model.key, model.keep_metadata, True, model.assume_stable_keys
    )
