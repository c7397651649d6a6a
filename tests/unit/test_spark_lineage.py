"""The lineage plan (``replicator.landed.lineage``) and column matching (``landed.columns``) on
hand-made manifests and schemas: plain Python and pyarrow, no Spark.

Truncate, drop, create again, renames (chains, a swap in one statement, away and back), DROP
DATABASE, replayed records counted once, rows under a name after it ended, and columns matched
by id (a renamed column) or by name (files without ids), with their fills."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from replicator.errors import IntegrityError
from replicator.landed.columns import Fill, Source, match, table_columns
from replicator.landed.committed import CommittedFile, Manifest, Record
from replicator.landed.contract import SNAPSHOT_RESET
from replicator.landed.lineage import Ended, Lineage, Segment, orphans, plan


def rec(
    seq: int, op: str, table: str, to: str | None = None, *, gtid: str = "", batch: int = 1
) -> Record:
    return Record(seq, op, table, to, gtid or f"g{seq}", "f", seq, "", f"{op} {table}", batch)


def data(
    table: str, first: int, last: int, batch: int = 1, path: Path | None = None
) -> CommittedFile:
    return CommittedFile(table, path or Path(f"/{table}/{first}"), batch, 1, first, last)


def manifest(batch: int, *items: Record | CommittedFile, replay: bool = False) -> Manifest:
    records = tuple(replace(i, batch=batch) for i in items if isinstance(i, Record))
    files = tuple(i for i in items if isinstance(i, CommittedFile))
    data = {"batch": batch, "first_seq": 0, "last_seq": 0, "replay": replay}
    return Manifest(Path(f"{batch}.json"), data, files, records)


def lineage(found: Lineage | Ended) -> Lineage:
    assert isinstance(found, Lineage)
    return found


def test_truncate_cuts_the_rows_not_the_schema() -> None:
    found = plan([manifest(1, data("d.t", 1, 9), rec(5, "truncate", "d.t"))])
    t = lineage(found.table("d.t"))
    assert (t.start, t.segments) == (5, (Segment("d.t", 0, None),))
    assert t.data() == (Segment("d.t", 5, None),)
    assert t.cut is not None and t.cut.op == "truncate"


def test_drop_ends_and_create_starts_again() -> None:
    found = plan(
        [
            manifest(1, data("d.t", 1, 3), rec(4, "drop", "d.t")),
            manifest(2, rec(6, "create", "d.t"), data("d.t", 7, 8)),
            manifest(3, data("d.u", 9, 9), rec(10, "drop", "d.u")),
        ]
    )
    t = lineage(found.table("d.t"))
    assert (t.segments, t.start) == ((Segment("d.t", 6, None),), 6)
    gone = found.table("d.u")
    assert isinstance(gone, Ended)
    assert gone.describe() == "dropped at _seq 10 (batch 3, f:10: drop d.u)"
    assert found.table("d.never") == Lineage("d.never", (Segment("d.never", 0, None),), 0, None, ())


def test_renames_chain_swap_and_come_back() -> None:
    found = plan(
        [
            manifest(1, data("d.a", 1, 2), rec(3, "rename", "d.a", "d.b"), data("d.b", 4, 4)),
            manifest(2, rec(5, "rename", "d.b", "d.c")),
            # a swap in one statement: x -> tmp, y -> x, tmp -> y
            manifest(
                3,
                data("d.x", 6, 6),
                data("d.y", 7, 7),
                rec(8, "rename", "d.x", "d.tmp", gtid="swap"),
                rec(9, "rename", "d.y", "d.x", gtid="swap"),
                rec(10, "rename", "d.tmp", "d.y", gtid="swap"),
            ),
            # away and back: p -> q, q -> p
            manifest(4, data("d.p", 11, 11), rec(12, "rename", "d.p", "d.q")),
            manifest(5, data("d.q", 13, 13), rec(14, "rename", "d.q", "d.p"), data("d.p", 15, 15)),
        ]
    )
    c = lineage(found.table("d.c"))
    assert c.segments == (Segment("d.a", 0, 3), Segment("d.b", 3, 5), Segment("d.c", 5, None))
    assert c.tables == ("d.a", "d.b", "d.c")
    assert [found.table(n).describe() for n in ("d.a", "d.b")] == [  # type: ignore[union-attr]
        "renamed to d.b at _seq 3 (batch 1, f:3: rename d.a)",
        "renamed to d.c at _seq 5 (batch 2, f:5: rename d.b)",
    ]
    x, y = lineage(found.table("d.x")), lineage(found.table("d.y"))
    assert x.segments == (Segment("d.y", 0, 9), Segment("d.x", 9, None))
    assert y.segments == (
        Segment("d.x", 0, 8),
        Segment("d.tmp", 8, 10),
        Segment("d.y", 10, None),
    )
    assert isinstance(found.table("d.tmp"), Ended)
    p = lineage(found.table("d.p"))
    assert p.segments == (Segment("d.p", 0, 12), Segment("d.q", 12, 14), Segment("d.p", 14, None))
    assert isinstance(found.table("d.q"), Ended)


def test_drop_database_and_replayed_records() -> None:
    first = [
        manifest(1, data("s.a", 1, 1), data("s.b", 2, 2), data("k.c", 3, 3)),
        manifest(2, rec(4, "drop", "s.a", gtid="dropdb"), rec(5, "drop", "s.b", gtid="dropdb")),
        manifest(3, rec(6, "create", "s.a"), data("s.a", 7, 7)),
    ]
    # a replay of batches 2 and 3: the same records again, with higher _seq
    again = [
        manifest(4, rec(8, "drop", "s.a", gtid="dropdb", batch=4), replay=True),
        manifest(
            5,
            rec(9, "drop", "s.b", gtid="dropdb", batch=5),
            rec(10, "create", "s.a", gtid="g6", batch=5),
            data("s.a", 11, 11, batch=5),
            replay=True,
        ),
    ]
    found = plan(first + again)
    assert [r.seq for r in found.records] == [4, 5, 6]
    assert lineage(found.table("s.a")).segments == (Segment("s.a", 6, None),)
    assert isinstance(found.table("s.b"), Ended)
    assert lineage(found.table("k.c")).segments == (Segment("k.c", 0, None),)
    assert found.names == frozenset({"s.a", "s.b"})


def test_records_without_gtid_count_once_per_table_and_op_unless_replayed() -> None:
    def positional(seq: int, op: str, table: str) -> Record:
        # a snapshot's truncate (or a statement with GTIDs off): no GTID, the read point only
        return Record(seq, op, table, None, None, "mysql-bin.000003", 4711, "", "snapshot", 1)

    first = [
        manifest(1, positional(1, "truncate", "d.t"), data("d.t", 2, 3)),
        # the same tables snapshotted again at the same read point (an idle server): no replay
        manifest(2, positional(4, "truncate", "d.t"), data("d.t", 5, 6)),
        # one statement at that point, of two other tables (a DROP TABLE u, v without GTIDs)
        manifest(3, positional(7, "drop", "d.u"), positional(8, "drop", "d.v")),
    ]
    found = plan(first)
    assert [r.seq for r in found.records] == [1, 4, 7, 8]
    t = lineage(found.table("d.t"))
    assert (t.start, t.data()) == (4, (Segment("d.t", 4, None),))
    assert isinstance(found.table("d.u"), Ended) and isinstance(found.table("d.v"), Ended)
    # a replay of batches 2 and 3 lands the same records again: left out; a snapshot of
    # another table at that read point, in the same batch, is no copy
    again = manifest(
        4,
        positional(9, "truncate", "d.t"),
        data("d.t", 10, 11, batch=4),
        positional(12, "drop", "d.u"),
        positional(13, "drop", "d.v"),
        positional(14, "truncate", "d.w"),
        data("d.w", 15, 16, batch=4),
        replay=True,
    )
    found = plan([*first, again])
    assert [r.seq for r in found.records] == [1, 4, 7, 8, 14]
    assert lineage(found.table("d.t")).start == 4
    assert lineage(found.table("d.w")).start == 14


def test_a_snapshots_truncate_in_a_batch_that_rereads_is_no_copy() -> None:
    """A table asked for again while a replay re-reads, the source idle: its truncate has
    the identity of the one its first snapshot wrote (no GTID, the same read point). No
    replay lands a snapshot's records again, so it counts, and the rows before it go."""

    def reset(seq: int, batch: int) -> Record:
        return Record(seq, "truncate", "d.t", None, None, "mysql-bin.000003", 4711, "",
                      SNAPSHOT_RESET, batch)  # fmt: skip

    found = plan(
        [
            manifest(1, reset(1, 1), data("d.t", 2, 3)),
            manifest(2, reset(4, 2), data("d.t", 5, 6, batch=2), replay=True),
        ]
    )
    assert [r.seq for r in found.records] == [1, 4]
    assert lineage(found.table("d.t")).start == 4


def test_rows_after_a_drop_without_create_are_refused(tmp_path: Path) -> None:
    def written(name: str, seqs: list[int]) -> Path:
        path = tmp_path / name
        pq.write_table(pa.table({"_seq": pa.array(seqs, pa.int64())}), path)
        return path

    spans = written("spans.parquet", [1, 2, 9])  # rows before the drop (5) and after the create (8)
    orphan = written("orphan.parquet", [1, 6])  # a row at 6: after the drop, before the create
    found = plan(
        [manifest(1, rec(5, "drop", "d.t"), rec(8, "create", "d.t"), data("d.t", 1, 9, path=spans))]
    )
    orphans(found, "d.t", [data("d.t", 1, 9, path=spans)])  # nothing between 5 and 8: fine
    with pytest.raises(IntegrityError, match=r"_seq 6, after the drop of d.t at _seq 5"):
        orphans(found, "d.t", [data("d.t", 1, 6, path=orphan)])


def test_columns_match_by_id_then_by_name() -> None:
    def schema(*fields: tuple[str, int | None, str | None]) -> pa.Schema:
        out = []
        for name, field_id, fill in fields:
            meta: dict[bytes, bytes] = {}
            if field_id is not None:
                meta[b"PARQUET:field_id"] = str(field_id).encode()
            if fill is not None:
                meta[b"replicator.fill"] = fill.encode()
            out.append(pa.field(name, pa.int32(), metadata=meta))
        return pa.schema([*out, pa.field("_seq", pa.int64())])

    old = table_columns(schema(("id", 1, None), ("name", 2, None), ("gone", 3, None)), {"_seq"})
    new = table_columns(
        schema(
            ("id", 1, None),
            ("title", 2, None),  # name renamed: same id
            ("gone", 4, '{"kind": "value", "value": 7}'),  # dropped and added again: a new id
            ("x", 5, '{"kind": "unknown", "why": "CURRENT_TIMESTAMP"}'),
            ("y", 6, '{"kind": "null"}'),
        ),
        {"_seq"},
    )
    assert match(old, new) == (
        Source("id", "id", None),
        Source("title", "name", None),
        Source("gone", None, Fill("value", 7)),
        Source("x", None, Fill("unknown", why="CURRENT_TIMESTAMP")),
        Source("y", None, Fill("null")),
    )
    no_ids = table_columns(schema(("ID", None, None), ("name", None, None)), {"_seq"})
    assert [s.old for s in match(no_ids, new)] == ["ID", None, None, None, None]
    with pytest.raises(IntegrityError, match=r"unreadable replicator\.fill"):
        table_columns(schema(("a", 1, "{not json")), {"_seq"})
