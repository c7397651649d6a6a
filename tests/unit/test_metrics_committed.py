"""``replicator_row_changes_total{table,op}`` counts row changes committed (docs/operations.md,
Metrics): the pipeline's totals (``PipelineStats.rows_by_table_op``, which the service syncs
the metric from) grow when a batch commits, by what that batch holds. Rows taken and then
dropped (the parts of a transaction the stream aborts, a batch whose commit failed, the open
batch dropped at a stop) are not counted: they are counted when they land again, once."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from replicator.binlog.block import Block
from replicator.binlog.position import StreamPosition
from replicator.binlog.transaction import TransactionAssembler, TransactionPart
from replicator.binlog.xa import XaId
from replicator.config import FilterConfig, SinkConfig, SourceConfig
from replicator.metrics import Metrics
from replicator.pipeline.pipeline import Pipeline
from replicator.sink.changes import TableVersion
from replicator.sink.landing import LandingZone
from replicator.source.items import TransactionAborted
from replicator.source.stream import ReplicaStream

from .synthetic_events import COLUMNS, Events
from .test_pipeline_writer_thread import _FailAt, _Feed
from .test_stream_dropped_parts import _cut_then_whole, _handed

pytestmark = pytest.mark.timeout(60)

TORN = [(1, "torn"), (2, "torn"), (3, "torn"), (4, "torn"), (5, "torn")]


def _landed_rows(root: Path) -> int:
    return sum(pq.read_metadata(f).num_rows for f in (root / "db" / "t").glob("*.parquet"))


def _exported(pipeline: Pipeline, table: str, op: str) -> float:
    """What the service exports for the pipeline's totals (``Service._sync_metrics``)."""
    metrics = Metrics()
    metrics.row_changes.sync_many(dict(pipeline.stats.rows_by_table_op))
    return metrics.row_changes.value(table, op)


@pytest.mark.parametrize("restart", [False, True], ids=["next-group", "server-restart"])
async def test_the_parts_of_an_aborted_transaction_are_not_counted(
    tmp_path: Path, restart: bool
) -> None:
    """T1's parts are handed over, then its group is cut off (TransactionAborted); T2
    commits: one row landed, one counted."""
    events = _cut_then_whole(TORN, [(100, "ok")], restart=restart)
    cfg = SinkConfig(root=str(tmp_path), batch_max_seconds=999)
    zone = LandingZone(cfg)
    pipeline = Pipeline(cfg, FilterConfig(), zone, zone.recover())
    stream = ReplicaStream(SourceConfig(), StreamPosition("b.1", 4))
    pipeline.seed(StreamPosition("b.1", 4))
    assembler = TransactionAssembler(part_rows=2)
    aborted = 0
    for event in events:
        for fed in assembler.feed(event):
            assert stream._hand_over(fed, assembler)
            for item in _handed(stream):
                aborted += isinstance(item, TransactionAborted)
                await pipeline.handle(item)
    await pipeline.commit()
    await pipeline.close()
    assert aborted == 1
    assert _landed_rows(tmp_path) == 1
    assert pipeline.stats.row_changes == 1
    assert pipeline.stats.rows_by_table_op == {("db.t", "c"): 1}
    assert _exported(pipeline, "db.t", "c") == 1


async def test_a_transaction_sent_again_after_its_parts_were_aborted_counts_once(
    tmp_path: Path,
) -> None:
    """A reconnect inside a large transaction: its parts are dropped, and the stream sends
    it again whole after the reconnect."""
    feed = _Feed(tmp_path)
    pipeline, e = feed.pipeline, Events()
    pipeline.seed(StreamPosition("b.1", 4))
    transaction = [e.gtid(1), e.query("BEGIN"), *e.inserts(TORN), e.xid(1)]
    parts = TransactionAssembler(part_rows=2)
    handed = 0
    for event in transaction[:-1]:  # the connection breaks before the XID
        for item in parts.feed(event):
            assert isinstance(item, TransactionPart)
            handed += 1
            await pipeline.handle(item)
    assert handed
    await pipeline.handle(TransactionAborted(None))
    again = TransactionAssembler()
    for event in transaction:
        for item in again.feed(event):
            await pipeline.handle(item)
    await pipeline.commit()
    await pipeline.close()
    assert _landed_rows(tmp_path) == 5
    assert pipeline.stats.rows_by_table_op == {("db.t", "c"): 5}
    assert _exported(pipeline, "db.t", "c") == pipeline.stats.row_changes == 5


async def test_rows_count_when_their_batch_commits(tmp_path: Path) -> None:
    """Taken into the open batch: not yet counted; the batch dropped at a stop is never
    counted, and read again from the checkpoint by the next pipeline it counts once."""
    feed = _Feed(tmp_path)
    await feed.transaction([(1, "a"), (2, "b")])
    assert feed.pipeline.stats.rows_by_table_op == {}
    await feed.pipeline.commit()
    assert feed.pipeline.stats.rows_by_table_op == {("db.t", "c"): 2}
    await feed.transaction([(3, "c")])  # open, never committed: dropped at the stop
    await feed.pipeline.close()
    assert feed.pipeline.stats.rows_by_table_op == {("db.t", "c"): 2}
    assert feed.pipeline.stats.row_changes == 2

    zone = LandingZone(feed.cfg)
    replay = _Feed(tmp_path, pipeline=Pipeline(feed.cfg, FilterConfig(), zone, zone.recover()))
    replay.events.position, replay.gno = feed.events.position, feed.gno
    await replay.transaction([(3, "c")])  # what the checkpoint had not: read again
    await replay.pipeline.commit()
    await replay.pipeline.close()
    assert replay.pipeline.stats.rows_by_table_op == {("db.t", "c"): 1}
    assert _landed_rows(tmp_path) == 3


async def test_a_batch_whose_commit_failed_is_not_counted(tmp_path: Path) -> None:
    feed = _Feed(tmp_path, batch_max_rows=5)
    feed.zone.fault = _FailAt()
    await feed.transaction([(n, "x") for n in range(1, 6)])
    with pytest.raises(OSError, match="No space left"):
        await feed.pipeline.commit()
    await feed.pipeline.close()
    assert feed.pipeline.stats.rows_by_table_op == {}
    assert feed.pipeline.stats.row_changes == 0


async def test_snapshot_rows_count_when_their_chunk_commits(tmp_path: Path) -> None:
    feed = _Feed(tmp_path)
    pipeline = feed.pipeline
    at, ts = StreamPosition("b.1", 4), dt.datetime.now(dt.UTC)
    pipeline.seed(at)
    block = Block.from_rows([(1, "s"), (2, "s"), (3, "s")], len(COLUMNS))
    await pipeline.snapshot_rows(TableVersion("db", "t", COLUMNS), None, block, at, ts, 1)
    await pipeline.commit()  # no commit inside a chunk
    assert pipeline.stats.rows_by_table_op == {}
    await pipeline.snapshot_chunk_done(pipeline.snapshot)
    await pipeline.commit()
    await pipeline.close()
    assert pipeline.stats.rows_by_table_op == {("db.t", "r"): 3}
    assert _exported(pipeline, "db.t", "r") == _landed_rows(tmp_path) == 3


async def test_xa_rows_count_when_the_batch_of_their_xa_commit_commits(tmp_path: Path) -> None:
    feed = _Feed(tmp_path)
    e, xa, pipeline = feed.events, "X'616263',X'',1", feed.pipeline
    for event in [e.gtid(1), e.query(f"XA START {xa}"), *e.inserts([(1, "x"), (2, "y")]),
                  e.query(f"XA END {xa}"), e.prepare(XaId(1, b"abc", b""))]:  # fmt: skip
        for item in feed.assembler.feed(event):
            await pipeline.handle(item)
    await pipeline.commit()  # the PREPARE's batch: its rows are held, not landed
    assert pipeline.stats.rows_by_table_op == {}
    for event in [e.gtid(2), e.query(f"XA COMMIT {xa}")]:
        for item in feed.assembler.feed(event):
            await pipeline.handle(item)
    assert pipeline.stats.rows_by_table_op == {}
    await pipeline.commit()
    await pipeline.close()
    assert pipeline.stats.rows_by_table_op == {("db.t", "c"): 2}
    assert _landed_rows(tmp_path) == 2
