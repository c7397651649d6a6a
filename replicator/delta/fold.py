"""The current-state algebra with Arrow: row changes (and earlier rows) folded into rows.

The same algebra as the Spark job's (``replicator.spark.merge``, whose module doc is the
reference), computed with pyarrow and numpy in one process:

* **Keyed tables**: every change is an event on the key it concerns (an update that moves a
  row to another key is two: the old key's row goes, the new key gets the row). Per key, the
  event with the highest ``_seq`` decides whether a row exists; each column comes from the
  latest event since the last insert or delete that carried it; a column no event carried
  is unknown: an error, or with ``allow_unknown`` null and listed in ``_absent``.
* **Tables without a key** are multisets of whole rows: an insert adds a copy, a delete
  removes one copy of its before image, an update removes its before image and adds its
  after image; counts are applied in ``_seq`` order and never go below zero (a delete of a
  row never seen removes nothing and is counted in ``unmatched``).

Rows of an earlier state count as snapshot reads older than every change, so the same fold
builds a table from scratch and brings a few of its rows up to date. ``fold`` returns the
rows that exist afterwards among the identities its input touched, and those identities
(``Folded.touched``): a writer replaces exactly those.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import IntegrityError
from .layout import (
    ABSENT,
    BEFORE_KEY,
    META,
    META_SCHEMA,
    STATE_SEQ,
    UNKNOWN,
    Model,
    identity,
    output_schema,
)

__all__ = ["Folded", "fold", "identities", "state_events"]

Mask: TypeAlias = npt.NDArray[np.bool_]
_DEL, _ROW, _UPD = 0, 1, 2  # event kinds of a keyed table
_FULL_IMAGES = "set binlog_row_image=FULL on the source and replay from before this position"
_UNKNOWN_HINT = (
    "the source logs partial row images (binlog_row_image=MINIMAL or NOBLOB), the stream "
    "began after the row was written, or ALTER TABLE added the column with an expression "
    "default (its value in older rows is not in the binlog): set binlog_row_image=FULL and "
    "replay, or pass --allow-unknown to keep such columns as null, listed in _absent"
)


@dataclass(frozen=True, slots=True)
class Folded:
    rows: pa.Table  # in ``output_schema(model)``: the rows that exist afterwards
    # the identities the input touched (key columns; a keyless table's whole rows, with
    # ``_absent`` when kept): an incremental writer replaces every row of these with ``rows``
    touched: pa.Table
    unmatched: int  # deletes of rows not in the state (tables without key)


def fold(model: Model, changes: pa.Table | None, state: pa.Table | None = None) -> Folded:
    """The rows after ``state`` (rows of an earlier output, or None) and ``changes``."""
    parts = []
    if state is not None:
        parts.append(state_events(model, state))
    if changes is not None:
        parts.append(_events(model, changes))
    if not parts:
        raise ValueError("nothing to fold")
    events = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
    del parts
    seqs = np.asarray(events["_seq"].to_numpy(), dtype=np.int64)
    if len(seqs) > 1 and not bool((seqs[1:] >= seqs[:-1]).all()):
        # a stable sort: events already in ``_seq`` order (a state's rows, then changes
        # read in order) are not copied; the state's rows stay first, in their order
        events = events.take(pc.sort_indices(events["_seq"], sort_keys=[("_seq", "ascending")]))
    meta = _own_meta(model, events, state)
    if model.key:
        return _keyed(model, events, meta)
    return _keyless(model, events, meta)


# ------------------------------------------------------------------------------- events


def _event_schema(model: Model) -> pa.Schema:
    ident = identity(model)
    before = pa.struct([model.schema.field(n) for n in ident])
    return pa.schema(
        [
            *model.schema,
            *META_SCHEMA,
            pa.field(ABSENT, pa.list_(pa.string())),
            pa.field(BEFORE_KEY, before),
            pa.field(UNKNOWN, pa.list_(pa.string())),
        ]
    )


def _events(model: Model, changes: pa.Table) -> pa.Table:
    schema = _event_schema(model)
    columns = []
    for item in schema:
        if item.name in changes.column_names:
            column = changes[item.name]
            columns.append(column if column.type == item.type else column.cast(item.type))
        elif item.name in (ABSENT, UNKNOWN):
            columns.append(pa.array([[]] * changes.num_rows, item.type))
        else:
            columns.append(pa.nulls(changes.num_rows, item.type))
    return pa.Table.from_arrays(columns, schema=schema)


def state_events(model: Model, state: pa.Table) -> pa.Table:
    """Rows of an earlier state as events: snapshot reads older than every change."""
    schema = _event_schema(model)
    n = state.num_rows
    empty = pa.array([[]] * n, pa.list_(pa.string()))
    absent = state[ABSENT].fill_null(empty) if ABSENT in state.column_names else empty
    columns: dict[str, Any] = {f.name: state[f.name] for f in model.schema}
    for item in META_SCHEMA:
        keep = item.name in state.column_names and item.name not in ("_binlog_file", "_binlog_pos")
        columns[item.name] = state[item.name] if keep else pa.nulls(n, item.type)
    columns["_op"] = pa.array(["r"] * n, pa.string())
    columns["_seq"] = pa.array(np.full(n, STATE_SEQ, dtype=np.int64))
    columns[ABSENT] = absent
    columns[BEFORE_KEY] = pa.nulls(n, schema.field(BEFORE_KEY).type)
    # a keyless table's unknown values are part of the row's identity (``_keyless``)
    columns[UNKNOWN] = absent if not model.key else empty
    return pa.Table.from_arrays(
        [
            columns[f.name].cast(f.type) if columns[f.name].type != f.type else columns[f.name]
            for f in schema
        ],
        schema=schema,
    )


def _own_meta(model: Model, events: pa.Table, state: pa.Table | None) -> pa.Table:
    """The metadata the output shows of each event (``keep_metadata``): a state row's as
    the state holds it (its event has ``_op`` 'r' and ``_seq`` ``STATE_SEQ``, for the fold's
    order only), a change's its own. ``events``: the state's rows first (``fold``)."""
    if not model.keep_metadata or state is None or not state.num_rows:
        return events
    n = state.num_rows
    columns = []
    for item in META_SCHEMA:
        rest = events[item.name].slice(n)
        if item.name not in state.column_names:
            columns.append(events[item.name])
            continue
        own = state[item.name]
        own = own if own.type == item.type else own.cast(item.type)
        columns.append(pa.chunked_array([*own.chunks, *rest.chunks], item.type))
    return pa.Table.from_arrays(columns, schema=META_SCHEMA)


def _bool(array: pa.Array | pa.ChunkedArray) -> Mask:
    return np.asarray(array.fill_null(False).to_numpy(zero_copy_only=False), dtype=np.bool_)


def _listed(lists: pa.ChunkedArray, names: Sequence[str], rows: int) -> dict[str, Mask]:
    """Per name, the rows whose list holds it (without regard to case)."""
    combined = lists.combine_chunks()
    flat = pc.utf8_lower(combined.flatten())
    parents = pc.list_parent_indices(combined)
    out: dict[str, Mask] = {}
    for name in names:
        mask = np.zeros(rows, dtype=np.bool_)
        hits = parents.filter(pc.equal(flat, name.lower())).to_numpy()
        mask[hits] = True
        out[name] = mask
    return out


def _at(events: pa.Table, row: int) -> str:
    file, pos, seq = (events[c][row].as_py() for c in ("_binlog_file", "_binlog_pos", "_seq"))
    where = f"{file}:{pos}" if file is not None else "an earlier output"
    return f" at {where} (_seq {seq})"


def _fail(model: Model, events: pa.Table, bad: Mask, what: str, hint: str) -> None:
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise IntegrityError(f"table {model.name}: {what}{_at(events, row)}", hint=hint)


def _null_safe_equal(a: pa.Array, b: pa.Array) -> Mask:
    both_null = _bool(pc.and_(a.is_null(), b.is_null()))
    return _bool(pc.equal(a, b)) | both_null


def _where(mask: Mask, yes: pa.Array, no: pa.Array) -> pa.Array:
    return pc.if_else(pa.array(mask), yes, no)


# ---------------------------------------------------------------------------- keyed tables


def _keyed(model: Model, events: pa.Table, meta: pa.Table) -> Folded:
    n = events.num_rows
    names = model.schema.names
    op = events["_op"]
    is_u, is_d = _bool(pc.equal(op, "u")), _bool(pc.equal(op, "d"))
    is_put = _bool(pc.is_in(op, pa.array(["c", "r"])))
    absent = _listed(events[ABSENT], names, n)
    before = events[BEFORE_KEY].combine_chunks()
    has_bk = _bool(before.is_valid())
    key_absent = np.zeros(n, dtype=np.bool_)
    for k in model.key:
        key_absent |= absent[k]
    _fail(
        model,
        events,
        (is_put | is_d) & key_absent,
        "a row image without its primary key",
        _FULL_IMAGES,
    )
    _fail(
        model,
        events,
        is_u & ~has_bk & key_absent,
        "an update names neither its old nor its new key",
        _FULL_IMAGES,
    )
    if not model.assume_stable_keys:
        _fail(
            model,
            events,
            is_u & ~has_bk,
            "an update without its before-image key (_before_key)",
            "files from an older replicator cannot show a primary-key change: pass "
            "--assume-stable-keys if the application never updates primary keys, or re-land "
            "the changes with this version",
        )

    old: list[pa.Array] = []
    new: list[pa.Array] = []
    same = np.ones(n, dtype=np.bool_)
    for k in model.key:
        after = events[k].combine_chunks()
        prior = before.field(k)
        none = pa.nulls(n, after.type)
        stable = after if model.assume_stable_keys else none
        o = _where(is_u, _where(has_bk, prior, stable), _where(is_d, after, none))
        w = _where(is_u, _where(~absent[k], after, prior), _where(is_put, after, none))
        same &= _null_safe_equal(o, w)
        old.append(o)
        new.append(w)
    moved = is_u & has_bk & ~same
    kind = np.where(is_d, _DEL, np.where(is_put | moved, _ROW, _UPD))
    extra = np.flatnonzero(moved)
    # every event, then the "old key goes" half of each key-moving update
    source = np.concatenate([np.arange(n, dtype=np.int64), extra])
    kinds = np.concatenate([kind, np.full(len(extra), _DEL)])
    seqs = np.asarray(events["_seq"].to_numpy(), dtype=np.int64)[source]
    order = np.argsort(seqs, kind="stable")
    source, kinds = source[order], kinds[order]
    keys = {}
    for k, o, w in zip(model.key, old, new, strict=True):
        main = _where(is_d, o, w)
        keys[k] = pa.concat_arrays([main, o.take(pa.array(extra))]).take(pa.array(order))

    positions = np.arange(len(source), dtype=np.int64)
    values = [c for c in names if c not in model.key]
    carried = {c: (kinds != _DEL) & ~absent[c][source] for c in values}
    reset = kinds != _UPD
    group = pa.table(
        {
            **{f"k{i}": keys[k] for i, k in enumerate(model.key)},
            "last": pa.array(positions),
            **{
                f"v{i}": pa.array(positions, mask=~(carried[c] | reset))
                for i, c in enumerate(values)
            },
        }
    )
    grouped = group.group_by([f"k{i}" for i in range(len(model.key))]).aggregate(
        [("last", "max"), *[(f"v{i}", "max") for i in range(len(values))]]
    )
    last = np.asarray(grouped["last_max"].to_numpy(), dtype=np.int64)
    exists = kinds[last] != _DEL
    key_columns = [grouped[f"k{i}"].combine_chunks() for i in range(len(model.key))]
    touched = pa.Table.from_arrays(key_columns, names=list(model.key))

    alive = np.flatnonzero(exists)
    take_alive = pa.array(alive)
    out: dict[str, pa.Array] = {}
    known: dict[str, Mask] = {}
    for i, name in enumerate(values):
        chosen = grouped[f"v{i}_max"].combine_chunks().take(take_alive)
        has = _bool(chosen.is_valid())
        at = np.asarray(chosen.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
        known[name] = has & carried[name][at]
        picked = events[name].take(pa.array(source[at]))
        out[name] = _where(known[name], picked.combine_chunks(), pa.nulls(len(alive), picked.type))
    for k, column in zip(model.key, key_columns, strict=True):
        out[k] = column.take(take_alive)
    missing = np.zeros(len(alive), dtype=np.bool_)
    for name in values:
        missing |= ~known[name]
    rows_missing = np.flatnonzero(missing)
    absent_lists: list[list[str]] = [[] for _ in range(len(alive))]
    for row in rows_missing:
        absent_lists[row] = [c for c in values if not known[c][row]]
    if len(rows_missing) and not model.allow_unknown:
        r = int(rows_missing[0])
        key = {k: out[k][r].as_py() for k in model.key}
        raise IntegrityError(
            f"table {model.name}: the row with key {json.dumps(key, default=str)} has "
            f"columns no row image carried: {', '.join(absent_lists[r])}",
            hint=_UNKNOWN_HINT,
        )
    last_events = pa.array(source[last[alive]])
    return Folded(_assemble(model, out, meta, last_events, absent_lists), touched, 0)


def _assemble(
    model: Model,
    columns: dict[str, pa.Array],
    meta: pa.Table,
    last_events: pa.Array,
    absent: Sequence[Sequence[str]],
) -> pa.Table:
    """The output rows: ``columns``, then (``keep_metadata``) the metadata of each row's
    last event (``meta``: the events', or ``_own_meta``)."""
    schema = output_schema(model)
    arrays: list[pa.Array | pa.ChunkedArray] = [columns[f.name] for f in model.schema]
    if model.keep_metadata:
        arrays.extend(meta[m].take(last_events) for m in META)
    if model.allow_unknown:
        arrays.append(pa.array(absent, pa.list_(pa.string())))
    return pa.Table.from_arrays(
        [a if a.type == f.type else a.cast(f.type) for a, f in zip(arrays, schema, strict=True)],
        schema=schema,
    )


# --------------------------------------------------------------------------- keyless tables


def _keyless(model: Model, events: pa.Table, meta: pa.Table) -> Folded:
    n = events.num_rows
    names = model.schema.names
    op = events["_op"]
    is_u, is_d = _bool(pc.equal(op, "u")), _bool(pc.equal(op, "d"))
    absent = _listed(events[ABSENT], names, n)
    unknown = _listed(events[UNKNOWN], names, n)
    partial = np.zeros(n, dtype=np.bool_)
    for name in names:
        partial |= absent[name] & ~unknown[name]
    hint = "a table without primary key is a multiset of whole rows: "
    _fail(
        model,
        events,
        ~is_u & partial,
        "a partial row image of a table without primary key",
        hint + "set binlog_row_image=FULL on the source and replay, or name the identity "
        f"columns with --key {model.name}=...",
    )
    before = events[BEFORE_KEY].combine_chunks()
    _fail(
        model,
        events,
        is_u & ~_bool(before.is_valid()),
        "an update of a table without primary key lacks its before image",
        hint + "the update's before image is needed (files from an older replicator have it "
        "only with sink.keep_before_image)",
    )
    # an unknown fill is part of the row: its value is not the null it is shown as
    held = _held(events[UNKNOWN])
    plain, updates = np.flatnonzero(~is_u), np.flatnonzero(is_u)
    images: dict[str, list[pa.Array]] = {name: [] for name in names}
    for name in names:
        column = events[name].combine_chunks()
        prior = before.field(name)
        images[name] = [
            column.take(pa.array(plain)),
            prior.take(pa.array(updates)),
            _where(absent[name], prior, column).take(pa.array(updates)),
        ]
    source = np.concatenate([plain, updates, updates])
    signs = np.concatenate(
        [np.where(is_d[plain], -1, 1), np.full(len(updates), -1), np.full(len(updates), 1)]
    )
    subs = np.concatenate([np.zeros(len(plain) + len(updates)), np.ones(len(updates))])
    seqs = np.asarray(events["_seq"].to_numpy(), dtype=np.int64)[source]
    order = np.lexsort((subs, seqs))  # by _seq, a before image ahead of its after image
    source, signs = source[order], signs[order]
    take_order = pa.array(order)
    rows = {name: pa.concat_arrays(parts).take(take_order) for name, parts in images.items()}
    held_rows = held.take(pa.array(source))

    grouping = {f"c{i}": _groupable(rows[name]) for i, name in enumerate(names)}
    grouping["u"] = held_rows
    grouping["i"] = pa.array(np.arange(len(source), dtype=np.int64))
    members = (
        pa.table(grouping)
        .group_by([*[f"c{i}" for i in range(len(names))], "u"], use_threads=False)
        .aggregate([("i", "list")])["i_list"]
        .combine_chunks()
    )
    order_in_groups = np.asarray(members.flatten().to_numpy(), dtype=np.int64)
    starts = np.asarray(members.offsets.to_numpy()[:-1], dtype=np.int64)
    if len(order_in_groups) == 0:
        empty = {name: rows[name].slice(0, 0) for name in names}
        return Folded(
            _assemble(model, empty, meta, pa.array([], pa.int64()), []),
            _touched_rows(model, empty, pa.array([], pa.list_(pa.string()))),
            0,
        )
    step = signs[order_in_groups]
    running = np.cumsum(step)
    offset = np.repeat(
        np.concatenate([[0], running[starts[1:] - 1]]), np.diff(np.append(starts, len(step)))
    )
    prefix = running - offset
    low = np.minimum.reduceat(prefix, starts)
    total = np.add.reduceat(step, starts)
    floor = np.minimum(0, low)
    copies = total - floor
    unmatched = int(-floor.sum())
    latest_insert = np.maximum.reduceat(np.where(step > 0, np.arange(len(step)), -1), starts)
    first = order_in_groups[starts]  # a group's rows are equal: take its first

    unknown_of = [x.split(",") if x else [] for x in held_rows.take(pa.array(first)).to_pylist()]
    distinct = {name: rows[name].take(pa.array(first)) for name in names}
    touched = _touched_rows(model, distinct, pa.array(unknown_of, pa.list_(pa.string())))
    repeat = np.repeat(np.arange(len(first)), np.maximum(copies, 0))
    if not model.allow_unknown:
        bad = [g for g in np.unique(repeat) if unknown_of[g]]
        if bad:
            raise IntegrityError(
                f"table {model.name}: a row holds columns whose value is not in the binlog: "
                f"{', '.join(unknown_of[bad[0]])}",
                hint="ALTER TABLE added them with an expression default, so rows older than "
                "the column hold a value the server computed: pass --allow-unknown to keep "
                "them as null, listed in _absent",
            )
    picked = pa.array(repeat)
    out = {name: distinct[name].take(picked) for name in names}
    meta_rows = order_in_groups[np.maximum(latest_insert, 0)][repeat]
    last_events = pa.array(source[meta_rows])
    return Folded(
        _assemble(model, out, meta, last_events, [unknown_of[g] for g in repeat]),
        touched,
        unmatched,
    )


def _touched_rows(model: Model, columns: dict[str, pa.Array], held: pa.Array) -> pa.Table:
    arrays = [columns[f.name] for f in model.schema]
    names = list(model.schema.names)
    if model.allow_unknown:
        arrays.append(held)
        names.append(ABSENT)
    return pa.Table.from_arrays(arrays, names=names)


def _groupable(array: pa.Array) -> pa.Array:
    """``array`` as a hash-grouping key: nested values (VECTOR) as their JSON text."""
    if pa.types.is_nested(array.type):
        return pa.array(
            [None if v is None else json.dumps(v, default=str) for v in array.to_pylist()],
            pa.string(),
        )
    return array


def _held(lists: pa.ChunkedArray) -> pa.Array:
    """Each row's unknown columns as one sorted, comma-separated text ("" for none)."""
    if not pc.sum(pc.list_value_length(lists)).as_py():
        return pa.array(np.full(len(lists), "", dtype=object), pa.string())
    return pa.array([",".join(sorted(x or ())) for x in lists.to_pylist()], pa.string())


def identities(model: Model, changes: pa.Table) -> pa.Table:
    """Every identity ``changes`` may concern (their rows' and before images' identity
    columns, distinct), without folding them: what an incremental run reads of the output
    before it folds. A superset is harmless: a row read but not changed is written back as
    it was."""
    names = list(identity(model))
    parts = [changes.select(names)]
    before = changes.column(BEFORE_KEY).combine_chunks()
    valid = before.is_valid()
    parts.append(pa.Table.from_arrays([before.field(n).filter(valid) for n in names], names=names))
    found = pa.concat_tables([p.cast(parts[0].schema) for p in parts])
    return found.group_by(names, use_threads=False).aggregate([]) if model.key else found
