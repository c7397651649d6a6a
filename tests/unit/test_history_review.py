"""Review of the schema-history integration (tracker <-> stream, pipeline <-> landing zone,
seeding). Tests marked ``xfail(strict=True)`` state the behaviour that would be correct and
fail on the current code: each shows a finding of the review. The others check paths that
were found correct."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import pytest

from replicator.binlog import events as ev
from replicator.binlog.gtid import MariadbGtidPosition
from replicator.binlog.position import StreamPosition, covers
from replicator.binlog.transaction import (
    Ending,
    Transaction,
    TransactionAssembler,
    TransactionPart,
)
from replicator.config import FilterConfig, SinkConfig, SourceConfig
from replicator.errors import IntegrityError, ReplicatorError
from replicator.pipeline.pipeline import Pipeline
from replicator.pipeline.statements import StatementLoggedError
from replicator.schema import ddl
from replicator.schema.history import Point, RewindError, SchemaChange, SchemaHistory
from replicator.schema.model import Catalog, ServerTraits
from replicator.schema.tracker import SchemaChangeEvent, SchemaTracker
from replicator.service import Service
from replicator.sink.landing import FaultInjector, LandingZone
from replicator.source.items import TransactionAborted
from replicator.source.seeding import fit_to_start
from replicator.source.stream import ReplicaStream, feed

from .synthetic_events import Events

MARIADB = ServerTraits("mariadb", (10, 11, 6), 0)
CTX = ddl.Context(default_db="shop", server_charset="latin1")
FILE = "bin.000007"


def _catalog(*statements: str) -> Catalog:
    current = Catalog(MARIADB)
    for statement in statements:
        current, _ = ddl.apply_ddl(current, statement, CTX)
    return current


def _query(statement: str, position: int, schema: str = "shop") -> ev.QueryEvent:
    """A QUERY event as test_ddl builds them (no status vars: sql_mode 0, not strict)."""
    header = ev.EventHeader(0, 2, 1, 100, position + 100, 0)
    return ev.QueryEvent(
        header, FILE, position, position + 100, 1, 0, 0, schema, statement, b"", None, None
    )


def _transaction(start: int, end: int, *events: ev.Event) -> Transaction:
    return Transaction(
        gtid=None,
        mariadb_gtid=None,
        mysql_gtid=None,
        events=tuple(events),
        file=FILE,
        position=start,
        end_file=FILE,
        end_position=end,
        timestamp=1_700_000_000,
        xid=1,
        parts=0,
        ending=Ending.XID,
    )


SEED = _catalog("CREATE DATABASE shop", "CREATE TABLE t (id INT PRIMARY KEY, a INT)")


def _pipeline(root: Path, history: SchemaHistory) -> tuple[SinkConfig, LandingZone, Pipeline]:
    cfg = SinkConfig(root=str(root), batch_max_seconds=999)
    zone = LandingZone(cfg)
    pipeline = Pipeline(cfg, FilterConfig(), zone, zone.recover(), history=history)
    pipeline.seed(StreamPosition(FILE, 4))
    return cfg, zone, pipeline


def _manifests(root: Path) -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted((root / "_manifests").glob("*.json"))]


# -- findings ------------------------------------------------------------------------------


# checkpoint set forward past DDL: tests/live/test_checkpoint_skip.py (needs a server)


def test_fit_to_start_does_not_replay_create_with_todays_database_charset() -> None:
    create = _query("CREATE TABLE t2 (s VARCHAR(10))", 1000)
    alter_db = _query("ALTER DATABASE shop CHARACTER SET utf8mb4", 2000)
    # information_schema at e1: t2.s is latin1 (created while the database was latin1)
    at_e1 = _catalog("CREATE DATABASE shop CHARACTER SET latin1", create.query, alter_db.query)
    created = at_e1.table("shop", "t2")
    assert created is not None and created.columns[0].charset == "latin1"
    seed, unknown = fit_to_start(
        at_e1, [(Point(FILE, 1000), create), (Point(FILE, 2000), alter_db)]
    )
    assert unknown == ()
    assert seed.databases["shop"].charset is None  # as of the start: not known
    tracker = SchemaTracker(SchemaHistory(seed, Point(FILE, 9999)), lambda db, t: True)
    # replaying the CREATE with today's utf8mb4 would decode t2's strings (MariaDB NO_LOG:
    # charset from the history) wrongly: it stops instead, naming the statement
    with pytest.raises(IntegrityError) as stopped:
        tracker.on_event(create)
    assert "bin.000007:1000" in str(stopped.value)
    assert "character set of database shop" in str(stopped.value)
    assert "CREATE TABLE t2 (s VARCHAR(10))" in str(stopped.value)


async def test_a_statement_logged_stop_does_not_commit_the_ddl_of_its_transaction(
    tmp_path: Path,
) -> None:
    _, _, pipeline = _pipeline(tmp_path, SchemaHistory(SEED, Point(FILE, 4)))
    tracker = SchemaTracker(SchemaHistory(SEED, Point(FILE, 4)), lambda db, t: True)
    await pipeline.handle(_transaction(4, 1000))  # a whole transaction before the stop
    ddl_event = tracker.on_event(_query("CREATE TABLE t2 (x INT)", 1100))
    assert isinstance(ddl_event, SchemaChangeEvent)
    statement = _query("INSERT INTO t VALUES (1, 2)", 1200)
    with pytest.raises(StatementLoggedError):
        await pipeline.handle(_transaction(1000, 1300, ddl_event, statement))
    await pipeline.close()
    manifest = _manifests(tmp_path)[-1]
    assert manifest["end"]["position"] == 1000  # type: ignore[index]
    # the checkpoint stops before the transaction, and so do its CREATE's record and history
    # change (else: a record at _seq 1 in a batch of _seq 1..0, which recovery refuses)
    LandingZone(SinkConfig(root=str(tmp_path))).recover()
    assert manifest["schema_changes"] == []
    assert _history_changes(tmp_path) == []


def _history_changes(root: Path) -> list[object]:
    zone = LandingZone(SinkConfig(root=str(root)))
    zone.recover()
    history = zone.load_history()
    return [] if history is None else list(history.changes)


async def test_a_dropped_incomplete_group_takes_its_ddl_out_of_the_tracker(tmp_path: Path) -> None:
    _, _, pipeline = _pipeline(tmp_path, SchemaHistory(SEED, Point(FILE, 4)))
    tracker = SchemaTracker(SchemaHistory(SEED, Point(FILE, 4)), lambda db, t: True)
    stream = ReplicaStream(SourceConfig(), StreamPosition("b.1", 4), tracker=tracker)
    assembler = TransactionAssembler()
    e = Events()
    # an atomic CREATE ... SELECT whose XID never comes (torn group), then the next group
    for event in (
        e.gtid(1),
        e.query("CREATE TABLE shop.t3 (a INT) START TRANSACTION"),
        e.table_map(),
        e.gtid(2),
        e.query("BEGIN"),
        e.table_map(),
        e.xid(7),
    ):
        for item in feed(assembler, tracker, event):  # as the stream's loop does
            assert stream._hand_over(item, assembler)
            await pipeline.handle(item)
    assert assembler.discarded_incomplete == 1
    await pipeline.close()
    assert pipeline.history is not None
    assert len(tracker.history.changes) == len(pipeline.history.changes)


def test_a_rewind_that_is_not_a_prefix_is_refused() -> None:
    history = SchemaHistory(SEED, Point(FILE, 4))
    for gtid, position, statement in (
        ("0-1-120", 1000, "CREATE TABLE a (x INT)"),
        ("1-2-40", 2000, "CREATE TABLE b (x INT)"),
    ):
        _, effects = ddl.apply_ddl(history.catalog, statement, CTX)
        history.record(SchemaChange(Point(FILE, position, gtid), statement, tuple(effects)))
    # domain 0 moved back, domain 1 kept: the server re-sends 0-1-101.. but not 1-2-40
    start = StreamPosition("", 4, MariadbGtidPosition.parse("0-1-100,1-2-50"))
    assert covers(start, FILE, 2000, "1-2-40")
    # dropping both would lose 1-2-40 (not sent again); keeping it would apply it before
    # 0-1-120 when that comes again: neither is exact, so it stops and changes nothing
    with pytest.raises(RewindError):
        history.rewind(lambda p: covers(start, p.file, p.position, p.gtid))
    assert len(history.changes) == 2
    assert history.catalog.table("shop", "b") is not None


async def test_start_before_the_seed_point_is_refused(tmp_path: Path) -> None:
    cfg, _, pipeline = _pipeline(tmp_path, SchemaHistory(SEED, Point(FILE, 5000)))
    pipeline._position = StreamPosition(FILE, 5000)
    await pipeline.handle(_transaction(5000, 6000))
    await pipeline.commit()
    await pipeline.close()
    service = object.__new__(Service)
    service.zone = LandingZone(cfg)
    service.zone.recover()
    service._stop = asyncio.Event()
    # `checkpoint set` to before the seed: the catalog of 5000 would decode rows of 100..5000
    with pytest.raises(ReplicatorError) as refused:
        await service._schema_history(StreamPosition(FILE, 100))
    assert "before the schema history of this landing zone begins" in str(refused.value)
    # at the seed point itself, or after it, the history is used as it is
    history, _, rewound = await service._schema_history(StreamPosition(FILE, 6000))
    assert history is not None and not rewound


# -- checked and found correct -------------------------------------------------------------


def test_reconnect_rewinds_the_tracker_to_the_last_transaction_handed_over() -> None:
    tracker = SchemaTracker(SchemaHistory(SEED, Point(FILE, 4)), lambda db, t: True)
    stream = ReplicaStream(SourceConfig(), StreamPosition("b.1", 4), tracker=tracker)
    assembler = TransactionAssembler()
    e = Events()
    for event in (e.gtid(1), e.query("CREATE TABLE shop.t4 (a INT)")):
        for item in feed(assembler, tracker, event):  # as the stream's loop does
            assert stream._hand_over(item, assembler)
    # an atomic CREATE ... SELECT, broken before its XID
    for event in (e.gtid(2), e.query("CREATE TABLE shop.t5 (a INT) START TRANSACTION")):
        assert assembler.feed(tracker.on_event(event)) == []
    tracker.rewind()  # what _run does before reconnecting
    assert tracker.history.catalog.table("shop", "t4") is not None
    assert tracker.history.catalog.table("shop", "t5") is None
    assert stream.position is not None and stream.position.position == 104


async def test_aborted_parts_forget_their_ddl_and_the_replay_records_it_once(
    tmp_path: Path,
) -> None:
    _, _, pipeline = _pipeline(tmp_path, SchemaHistory(SEED, Point(FILE, 4)))
    tracker = SchemaTracker(SchemaHistory(SEED, Point(FILE, 4)), lambda db, t: True)
    await pipeline.handle(_transaction(4, 1000))
    create = tracker.on_event(_query("CREATE TABLE t6 (a INT) START TRANSACTION", 1000))
    await pipeline.handle(TransactionPart(None, 0, (create,), FILE, 1000, create.header.timestamp))
    await pipeline.handle(TransactionAborted(None))
    tracker.rewind()
    assert pipeline.history is not None and len(pipeline.history.changes) == 0
    assert len(tracker.history.changes) == 0
    create = tracker.on_event(_query("CREATE TABLE t6 (a INT) START TRANSACTION", 1000))
    await pipeline.handle(TransactionPart(None, 0, (create,), FILE, 1000, create.header.timestamp))
    await pipeline.handle(dataclasses.replace(_transaction(1000, 2000), parts=1))
    await pipeline.commit()
    await pipeline.close()
    assert len(_history_changes(tmp_path)) == 1
    assert [len(m["schema_changes"]) for m in _manifests(tmp_path)] == [0, 1]  # type: ignore[arg-type]


class _Crash(Exception):
    pass


class _CrashAt(FaultInjector):
    def at(self, step: str) -> None:
        if step == self.step:
            raise _Crash(step)


@pytest.mark.parametrize("step", ["history-mid", "history", "data", "manifest", "checkpoint"])
async def test_crash_while_writing_the_history_keeps_it_with_the_manifests(
    tmp_path: Path, step: str
) -> None:
    cfg, zone, pipeline = _pipeline(tmp_path, SchemaHistory(SEED, Point(FILE, 4)))
    tracker = SchemaTracker(SchemaHistory(SEED, Point(FILE, 4)), lambda db, t: True)
    await pipeline.handle(_transaction(4, 1000))
    await pipeline.commit()
    zone.fault = _CrashAt(step=step)
    create = tracker.on_event(_query("CREATE TABLE t7 (a INT)", 1000))
    await pipeline.handle(_transaction(1000, 1100, create))
    with pytest.raises(_Crash):
        await pipeline.commit()
    await pipeline.close()
    after = LandingZone(cfg)
    checkpoint = after.recover()
    committed = step in ("manifest", "checkpoint")
    assert checkpoint.batch == (2 if committed else 1)
    assert len(_history_changes(tmp_path)) == (1 if committed else 0)
    assert len(list((tmp_path / "_schema").iterdir())) == 1


async def test_a_history_fault_fires_at_the_nth_history_write_not_the_nth_batch(
    tmp_path: Path,
) -> None:
    # the crash test's history kills wait for nothing when the n-th batch holds no DDL
    cfg, zone, pipeline = _pipeline(tmp_path, SchemaHistory(SEED, Point(FILE, 4)))
    tracker = SchemaTracker(SchemaHistory(SEED, Point(FILE, 4)), lambda db, t: True)
    zone.fault = FaultInjector(step="history", times=2, fail=True)
    await pipeline.handle(_transaction(4, 1000))
    await pipeline.commit()  # batch 1 writes the seeded history: the first pass
    await pipeline.handle(_transaction(1000, 1100))
    await pipeline.commit()  # batch 2 holds no DDL and writes no history
    create = tracker.on_event(_query("CREATE TABLE t7 (a INT)", 1100))
    await pipeline.handle(_transaction(1100, 1200, create))
    with pytest.raises(ReplicatorError, match="fault injected: history"):
        await pipeline.commit()  # batch 3: the second pass
    await pipeline.close()
    assert LandingZone(cfg).recover().batch == 2
