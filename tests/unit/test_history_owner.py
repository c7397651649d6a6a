"""The schema history has one owner in a run (``schema.ledger.SchemaLedger``): the pipeline
records into it, takes back through it and asks it what a commit writes; the service builds
it from the landing zone's history; the reader thread's tracker works on a view it hands out."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from replicator.binlog import events as ev
from replicator.binlog.position import StreamPosition
from replicator.binlog.transaction import TransactionPart
from replicator.config import FilterConfig, SinkConfig
from replicator.pipeline.pipeline import Pipeline
from replicator.schema import ddl
from replicator.schema.history import Point, SchemaChange, SchemaHistory
from replicator.schema.ledger import SchemaLedger
from replicator.schema.tracker import SchemaChangeEvent, SchemaTracker
from replicator.service import Service
from replicator.sink.landing import LandingZone
from replicator.source.items import TransactionAborted
from tests.unit.test_history_review import CTX, FILE, _catalog, _transaction

SEED = _catalog("CREATE DATABASE shop", "CREATE TABLE t (id INT PRIMARY KEY, a INT)")


def _history() -> SchemaHistory:
    return SchemaHistory(SEED, Point(FILE, 4))


def _change(history: SchemaHistory, statement: str, position: int) -> SchemaChange:
    _, effects = ddl.apply_ddl(history.catalog, statement, CTX)
    return SchemaChange(Point(FILE, position), statement, tuple(effects))


def _query(statement: str, position: int) -> ev.QueryEvent:
    header = ev.EventHeader(0, 2, 1, 100, position + 100, 0)
    return ev.QueryEvent(
        header, FILE, position, position + 100, 1, 0, 0, "shop", statement, b"", None, None
    )


def _ddl(statement: str, position: int) -> SchemaChangeEvent:
    tracker = SchemaTracker(_history(), lambda db, t: True)
    event = tracker.on_event(_query(statement, position))
    assert isinstance(event, SchemaChangeEvent)
    return event


def _pipeline(root: Path, history: SchemaLedger | SchemaHistory) -> Pipeline:
    cfg = SinkConfig(root=str(root), batch_max_seconds=999)
    zone = LandingZone(cfg)
    pipeline = Pipeline(cfg, FilterConfig(), zone, zone.recover(), history=history)
    pipeline.seed(StreamPosition(FILE, 4))
    return pipeline


def _manifests(root: Path) -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted((root / "_manifests").glob("*.json"))]


def _zone(root: Path) -> LandingZone:
    zone = LandingZone(SinkConfig(root=str(root)))
    zone.recover()
    return zone


async def _land_one_ddl(root: Path) -> None:
    """Batch 1: a transaction without DDL; batch 2: a CREATE TABLE at 1000."""
    pipeline = _pipeline(root, _history())
    await pipeline.handle(_transaction(4, 1000))
    await pipeline.commit()
    await pipeline.handle(_transaction(1000, 1100, _ddl("CREATE TABLE t2 (x INT)", 1000)))
    await pipeline.commit()
    await pipeline.close()


# -- the ledger ------------------------------------------------------------------------------


def test_a_history_the_landing_zone_holds_is_written_only_when_it_changes() -> None:
    ledger = SchemaLedger(_history(), landed=True)
    assert ledger.for_commit() == (0, None)
    ledger.record(_change(ledger.history, "CREATE TABLE t2 (x INT)", 1000))
    mark, written = ledger.for_commit()
    assert mark == 1
    assert written is not None and [c.statement for c in written.changes] == [
        "CREATE TABLE t2 (x INT)"
    ]
    assert written is not ledger.history  # the writer thread gets a copy
    assert ledger.for_commit() == (1, None)  # handed over once: not again


def test_a_history_the_landing_zone_does_not_hold_goes_with_the_first_commit() -> None:
    ledger = SchemaLedger(_history(), landed=False)
    mark, written = ledger.for_commit()
    assert mark == 0 and written is not None and written.changes == []
    assert ledger.for_commit() == (0, None)


def test_a_cut_below_what_was_written_is_written_again_at_the_same_length() -> None:
    ledger = SchemaLedger(_history(), landed=True)
    ledger.record(_change(ledger.history, "CREATE TABLE t2 (x INT)", 1000))
    assert ledger.for_commit()[1] is not None
    ledger.take_back(0)
    ledger.record(_change(ledger.history, "CREATE TABLE t3 (x INT)", 2000))
    # as many changes as the file holds, but not the same ones
    mark, written = ledger.for_commit()
    assert mark == 1
    assert written is not None and [c.statement for c in written.changes] == [
        "CREATE TABLE t3 (x INT)"
    ]


def test_roll_back_returns_to_what_the_last_landed_commit_covers() -> None:
    ledger = SchemaLedger(_history(), landed=True)
    ledger.record(_change(ledger.history, "CREATE TABLE t2 (x INT)", 1000))
    mark, _ = ledger.for_commit()
    ledger.committed(mark)
    ledger.record(_change(ledger.history, "CREATE TABLE t3 (x INT)", 2000))
    ledger.roll_back()
    assert [c.statement for c in ledger.history.changes] == ["CREATE TABLE t2 (x INT)"]
    assert ledger.catalog.table("shop", "t2") is not None
    assert ledger.catalog.table("shop", "t3") is None
    assert ledger.for_commit() == (1, None)  # the file holds exactly this


def test_the_reader_view_is_the_ledgers_history_apart_from_it() -> None:
    ledger = SchemaLedger(_history(), landed=True)
    ledger.record(_change(ledger.history, "CREATE TABLE t2 (x INT)", 1000))
    view = ledger.reader_view()
    assert view.catalog == ledger.catalog and view.changes == ledger.history.changes
    SchemaTracker(view, lambda db, t: True).on_event(_query("CREATE TABLE t3 (x INT)", 2000))
    assert view.catalog.table("shop", "t3") is not None
    assert ledger.catalog.table("shop", "t3") is None and ledger.mark == 1


# -- the pipeline asks it --------------------------------------------------------------------


async def test_the_pipeline_records_into_the_ledger_and_rolls_it_back(tmp_path: Path) -> None:
    ledger = SchemaLedger(_history(), landed=False)
    pipeline = _pipeline(tmp_path, ledger)
    assert pipeline.history is ledger.history
    await pipeline.handle(_transaction(4, 1000, _ddl("CREATE TABLE t2 (x INT)", 500)))
    await pipeline.commit()
    create = _ddl("CREATE TABLE t3 (a INT) START TRANSACTION", 1000)
    await pipeline.handle(TransactionPart(None, 0, (create,), FILE, 1000, create.header.timestamp))
    assert ledger.mark == 2
    await pipeline.handle(TransactionAborted(None))
    assert [c.statement for c in ledger.history.changes] == ["CREATE TABLE t2 (x INT)"]
    assert ledger.history.changes[0].seq == 1  # recorded with its landing record's _seq
    await pipeline.close()


async def test_a_history_the_zone_holds_is_not_written_again_without_ddl(tmp_path: Path) -> None:
    await _land_one_ddl(tmp_path)
    zone = _zone(tmp_path)
    history = zone.load_history()
    assert history is not None
    pipeline = _pipeline(tmp_path, SchemaLedger(history, landed=True))
    await pipeline.handle(_transaction(1100, 1200))
    await pipeline.commit()
    await pipeline.close()
    names = [m["schema_history"] for m in _manifests(tmp_path)]
    assert names[2] == names[1]


async def test_a_rewound_history_is_written_with_the_next_batch_without_ddl(
    tmp_path: Path,
) -> None:
    await _land_one_ddl(tmp_path)
    service = object.__new__(Service)
    service.zone = _zone(tmp_path)
    service._stop = asyncio.Event()
    # `checkpoint set` back to 1000: the CREATE at 1000 comes again
    history, _, unwritten = await service._schema_history(StreamPosition(FILE, 1000))
    assert unwritten and history.changes == []
    pipeline = _pipeline(tmp_path, SchemaLedger(history, landed=not unwritten))
    await pipeline.handle(_transaction(1000, 1050))  # no DDL in this batch
    await pipeline.commit()
    await pipeline.close()
    names = [m["schema_history"] for m in _manifests(tmp_path)]
    assert names[2] != names[1]
    rewound = _zone(tmp_path).load_history()
    assert rewound is not None and rewound.changes == []
    assert rewound.catalog.table("shop", "t2") is None
