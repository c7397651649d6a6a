"""The Arrow current-state fold (replicator.delta.fold): hand-made cases for each rule, and
two properties over random change streams: the fold equals a plain replay of the changes
row by row, and folding a prefix, then the rest into the prefix's rows (as an incremental
MERGE does: the touched identities replaced), equals folding everything at once."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replicator.delta.fold import fold
from replicator.delta.layout import TableShape
from replicator.errors import IntegrityError
from tests.hypothesis_budget import examples

SCHEMA = pa.schema([("id", pa.int32()), ("v", pa.string()), ("w", pa.int64())])
KEYED = TableShape("d.t", SCHEMA, key=("id",))
KEYLESS = TableShape("d.k", SCHEMA)


def changes(model: TableShape, rows: list[dict[str, Any]]) -> pa.Table:
    """Change rows in the reader's layout; each dict has the table's columns, ``op`` and
    optionally ``absent`` and ``before`` (the before-image identity)."""
    ident = model.key or tuple(SCHEMA.names)
    before = pa.struct([SCHEMA.field(n) for n in ident])
    n = len(rows)
    return pa.table(
        {
            **{f.name: pa.array([r.get(f.name) for r in rows], f.type) for f in SCHEMA},
            "_op": pa.array([r["op"] for r in rows], pa.string()),
            "_seq": pa.array(range(1, n + 1), pa.int64()),
            "_gtid": pa.nulls(n, pa.string()),
            "_ts": pa.nulls(n, pa.timestamp("us", tz="UTC")),
            "_server_id": pa.nulls(n, pa.int64()),
            "_binlog_file": pa.array(["bin.000001"] * n),
            "_binlog_pos": pa.array([100 * (i + 1) for i in range(n)], pa.int64()),
            "_absent": pa.array([r.get("absent", []) for r in rows], pa.list_(pa.string())),
            "_before_key": pa.array([r.get("before") for r in rows], before),
        }
    )


def rows_of(table: pa.Table) -> list[tuple[Any, ...]]:
    return sorted((tuple(r[n] for n in SCHEMA.names) for r in table.to_pylist()), key=repr)


def test_keyed_latest_change_per_key_and_partial_images() -> None:
    folded = fold(
        KEYED,
        changes(
            KEYED,
            [
                {"op": "c", "id": 1, "v": "a", "w": 1},
                {"op": "c", "id": 2, "v": "b", "w": 2},
                {"op": "u", "id": 1, "v": "A", "absent": ["w"], "before": {"id": 1}},
                {"op": "d", "id": 2, "v": "b", "w": 2},
                {"op": "c", "id": 3, "v": "c", "w": 3},
            ],
        ),
    )
    assert rows_of(folded.rows) == [(1, "A", 1), (3, "c", 3)]
    assert sorted(r["id"] for r in folded.touched.to_pylist()) == [1, 2, 3]


def test_keyed_primary_key_change_removes_the_old_key() -> None:
    folded = fold(
        KEYED,
        changes(
            KEYED,
            [
                {"op": "c", "id": 1, "v": "a", "w": 1},
                {"op": "c", "id": 2, "v": "b", "w": 2},
                # swap the two keys through a third, inside one transaction
                {"op": "u", "id": 9, "v": "a", "w": 1, "before": {"id": 1}},
                {"op": "u", "id": 1, "v": "b", "w": 2, "before": {"id": 2}},
                {"op": "u", "id": 2, "v": "a", "w": 1, "before": {"id": 9}},
            ],
        ),
    )
    assert rows_of(folded.rows) == [(1, "b", 2), (2, "a", 1)]


def test_keyed_column_no_image_carried_stops_or_is_listed() -> None:
    stream = [{"op": "u", "id": 1, "v": "x", "absent": ["w"], "before": {"id": 1}}]
    with pytest.raises(IntegrityError, match=r'the row with key \{"id": 1\} has columns no row'):
        fold(KEYED, changes(KEYED, stream))
    lenient = TableShape("d.t", SCHEMA, key=("id",), allow_unknown=True)
    folded = fold(lenient, changes(lenient, stream))
    assert folded.rows.to_pylist() == [{"id": 1, "v": "x", "w": None, "_absent": ["w"]}]


def test_keyed_row_moved_onto_a_key_takes_nothing_of_the_key_s_old_row() -> None:
    """A key-changing update under MINIMAL images: the columns it left out are those of the
    moved row, unknown here, never the values the target key held before."""
    lenient = TableShape("d.t", SCHEMA, key=("id",), allow_unknown=True)
    folded = fold(
        lenient,
        changes(
            lenient,
            [
                {"op": "c", "id": 1, "v": "a", "w": 1},
                {"op": "d", "id": 1, "v": "a", "w": 1},
                {"op": "u", "id": 1, "v": "m", "absent": ["w"], "before": {"id": 5}},
            ],
        ),
    )
    assert folded.rows.to_pylist() == [{"id": 1, "v": "m", "w": None, "_absent": ["w"]}]


def test_keyed_update_without_before_key_needs_stable_keys() -> None:
    stream = [{"op": "u", "id": 1, "v": "x", "w": 1}]
    with pytest.raises(IntegrityError, match=r"without its before-image key.*bin.000001:100"):
        fold(KEYED, changes(KEYED, stream))
    stable = TableShape("d.t", SCHEMA, key=("id",), assume_stable_keys=True)
    assert rows_of(fold(stable, changes(stable, stream)).rows) == [(1, "x", 1)]


def test_keyless_multiset_counts_and_unmatched_deletes() -> None:
    row = {"id": 1, "v": "a", "w": 1}
    folded = fold(
        KEYLESS,
        changes(
            KEYLESS,
            [
                {"op": "c", **row},
                {"op": "c", **row},
                {"op": "d", "id": 7, "v": "never", "w": 0},  # predates the stream
                {"op": "u", "id": 1, "v": "b", "w": 1, "before": row},
                {"op": "c", "id": None, "v": None, "w": None},
            ],
        ),
    )
    assert rows_of(folded.rows) == sorted([(1, "a", 1), (1, "b", 1), (None, None, None)], key=repr)
    assert folded.unmatched == 1


def test_keyless_partial_image_stops() -> None:
    with pytest.raises(IntegrityError, match="a partial row image of a table without primary"):
        fold(KEYLESS, changes(KEYLESS, [{"op": "c", "id": 1, "v": "a", "absent": ["w"]}]))


def test_keep_metadata_is_the_latest_change() -> None:
    kept = TableShape("d.t", SCHEMA, key=("id",), keep_metadata=True)
    folded = fold(
        kept,
        changes(
            kept,
            [
                {"op": "c", "id": 1, "v": "a", "w": 1},
                {"op": "u", "id": 1, "v": "b", "w": 1, "before": {"id": 1}},
            ],
        ),
    )
    (row,) = folded.rows.to_pylist()
    assert (row["_op"], row["_seq"], row["_binlog_pos"]) == ("u", 2, 200)


def test_keep_metadata_of_rows_a_state_holds_is_theirs() -> None:
    """A keyless row an incremental run reads back from the output and writes again keeps
    its metadata (the fold orders it as a read older than every change, no more)."""
    kept = TableShape("d.k", SCHEMA, keep_metadata=True)
    whole = changes(
        kept,
        [
            {"op": "c", "id": 1, "v": "a", "w": 1},
            {"op": "c", "id": 1, "v": "a", "w": 1},
            {"op": "c", "id": 2, "v": "b", "w": 2},
            {"op": "d", "id": 1, "v": "a", "w": 1},  # one of two copies goes
        ],
    )
    full = fold(kept, whole).rows
    state = fold(kept, whole.slice(0, 3)).rows
    later = whole.slice(3)
    touched = fold(kept, later).touched.to_pylist()
    hit = state.filter(
        pa.array([{n: r[n] for n in SCHEMA.names} in touched for r in state.to_pylist()])
    )
    incremental = fold(kept, later, hit).rows
    assert incremental.to_pylist() == [r for r in full.to_pylist() if r["id"] == 1]
    (row,) = incremental.to_pylist()
    assert (row["_op"], row["_seq"], row["_binlog_file"], row["_binlog_pos"]) == (
        "c",
        2,
        "bin.000001",
        200,
    )


# ------------------------------------------------------------------------------ properties

ids = st.integers(min_value=1, max_value=4)
values = st.sampled_from(["a", "b", None])


@st.composite
def keyed_streams(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Valid full-image change streams of a keyed table (each op fits the rows present)."""
    present: dict[int, tuple[Any, Any]] = {}
    out: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(min_value=0, max_value=14))):
        key = draw(ids)
        v, w = draw(values), draw(st.integers(min_value=0, max_value=2))
        if key not in present:
            out.append({"op": "c", "id": key, "v": v, "w": w})
            present[key] = (v, w)
        elif draw(st.booleans()):
            old = present.pop(key)
            out.append({"op": "d", "id": key, "v": old[0], "w": old[1]})
        else:
            target = draw(ids)
            if target != key and target in present:
                target = key
            del present[key]
            out.append({"op": "u", "id": target, "v": v, "w": w, "before": {"id": key}})
            present[target] = (v, w)
    return out


@st.composite
def keyless_streams(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Keyless streams, including deletes and updates of rows the stream never saw."""
    out: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(min_value=0, max_value=14))):
        row = {"id": draw(st.integers(1, 2)), "v": draw(values), "w": draw(st.integers(0, 1))}
        op = draw(st.sampled_from(["c", "c", "d", "u"]))
        if op == "u":
            after = {"id": draw(st.integers(1, 2)), "v": draw(values), "w": 0}
            out.append({"op": "u", **after, "before": row})
        else:
            out.append({"op": op, **row})
    return out


def replay_keyed(stream: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    rows: dict[int, tuple[Any, ...]] = {}
    for change in stream:
        if change["op"] == "d":
            rows.pop(change["id"], None)
            continue
        if change["op"] == "u":
            rows.pop(change["before"]["id"], None)
        rows[change["id"]] = (change["id"], change["v"], change["w"])
    return sorted(rows.values(), key=repr)


def replay_keyless(stream: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    rows: Counter[tuple[Any, ...]] = Counter()
    for change in stream:
        row = (change["id"], change["v"], change["w"])
        if change["op"] in ("d", "u"):
            gone = row if change["op"] == "d" else tuple(change["before"][n] for n in SCHEMA.names)
            if rows[gone] > 0:
                rows[gone] -= 1
        if change["op"] in ("c", "u"):
            rows[row] += 1
    return sorted(rows.elements(), key=repr)


def apply(model: TableShape, state: pa.Table, stream: list[dict[str, Any]]) -> pa.Table:
    """What an incremental run does: fold the changes with the state's rows of the
    identities they touch, and replace those identities' rows."""
    if not stream:
        return state
    touched = fold(model, changes(model, stream)).touched
    names = list(touched.column_names)
    hit = [r for r in state.to_pylist() if {n: r[n] for n in names} in touched.to_pylist()]
    rest = [r for r in state.to_pylist() if r not in hit]
    folded = fold(model, changes(model, stream), pa.Table.from_pylist(hit, schema=SCHEMA))
    return pa.concat_tables([pa.Table.from_pylist(rest, schema=SCHEMA), folded.rows])


def split(stream: list[dict[str, Any]], at: int) -> tuple[list[Any], list[Any]]:
    at = min(at, len(stream))
    return stream[:at], stream[at:]


@settings(max_examples=examples(60), deadline=None)
@given(keyed_streams(), st.integers(0, 14))
def test_keyed_fold_is_a_replay_and_incremental_equals_whole(
    stream: list[dict[str, Any]], at: int
) -> None:
    expected = replay_keyed(stream)
    assert rows_of(fold(KEYED, changes(KEYED, stream)).rows) == expected
    head, tail = split(stream, at)
    empty = pa.Table.from_pylist([], schema=SCHEMA)
    state = apply(KEYED, apply(KEYED, empty, head), tail)
    assert rows_of(state) == expected


@settings(max_examples=examples(60), deadline=None)
@given(keyless_streams(), st.integers(0, 14))
def test_keyless_fold_is_a_replay_and_incremental_equals_whole(
    stream: list[dict[str, Any]], at: int
) -> None:
    expected = replay_keyless(stream)
    assert rows_of(fold(KEYLESS, changes(KEYLESS, stream)).rows) == expected
    head, tail = split(stream, at)
    empty = pa.Table.from_pylist([], schema=SCHEMA)
    state = apply(KEYLESS, apply(KEYLESS, empty, head), tail)
    assert rows_of(state) == expected
