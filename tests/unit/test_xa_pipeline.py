"""Held XA transactions in the pipeline and the landing zone, on a real filesystem: what a
reconnect, a reused XA id and a crash between commit steps must not lose or mix up."""

from __future__ import annotations

from pathlib import Path

import pytest

from replicator.binlog import events as ev
from replicator.binlog.transaction import TransactionAssembler, TransactionPart
from replicator.binlog.xa import XaId
from replicator.config import FilterConfig, SinkConfig
from replicator.pipeline.pipeline import Pipeline
from replicator.sink.landing import FaultInjector, LandingZone
from replicator.source.items import TransactionAborted

from .synthetic_events import UUID, Events

XA = XaId(1, b"abc", b"")


class _Crash(Exception):
    pass


class _CrashAt(FaultInjector):
    """Raises where the real injector would SIGKILL: the commit stops at that step."""

    def at(self, step: str) -> None:
        if step == self.step:
            raise _Crash(step)


class _Feed:
    def __init__(self, root: Path) -> None:
        self.cfg = SinkConfig(root=str(root), batch_max_seconds=999)
        self.zone = LandingZone(self.cfg)
        self.pipeline = Pipeline(self.cfg, FilterConfig(), self.zone, self.zone.recover())
        self.events = Events()
        self.assembler = TransactionAssembler()

    async def send(self, *events: ev.Event) -> None:
        for event in events:
            for item in self.assembler.feed(event):
                await self.pipeline.handle(item)

    async def prepare(self) -> None:
        e = self.events
        await self.send(
            e.gtid(100), e.query(f"XA START {XA}"), e.query(f"XA END {XA}"), e.prepare(XA)
        )

    async def commit_xa(self) -> None:
        await self.send(self.events.gtid(101), self.events.query(f"XA COMMIT {XA}"))


async def test_reconnect_inside_a_large_transaction_keeps_held_xa(tmp_path: Path) -> None:
    feed = _Feed(tmp_path)
    await feed.prepare()
    # a huge transaction starts (its first part), then the connection breaks
    await feed.pipeline.handle(TransactionPart(f"{UUID}:2", 0, (), "b.1", 999, 0))
    await feed.pipeline.handle(TransactionAborted(f"{UUID}:2"))
    await feed.commit_xa()
    stats = feed.pipeline.stats
    await feed.pipeline.close()
    assert (stats.xa_committed, stats.xa_unknown) == (1, 0)


async def test_xa_id_used_again_never_overwrites_held_rows(tmp_path: Path) -> None:
    feed = _Feed(tmp_path)
    await feed.prepare()
    first = feed.pipeline._held[XA.key].position
    await feed.pipeline.commit()
    assert len(feed.pipeline.checkpoint.xa_pending) == 1
    # the same id committed, then prepared again; the batch dies before its manifest
    await feed.commit_xa()
    await feed.prepare()
    feed.zone.fault = _CrashAt(step="data")
    with pytest.raises(_Crash):
        await feed.pipeline.commit()
    zone = LandingZone(feed.cfg)
    checkpoint = zone.recover()
    held = zone.load_held(checkpoint.xa_pending)
    assert [item.position for item in held] == [first]  # the first PREPARE's rows, untouched
    assert [p.name for p in (tmp_path / "_state" / "xa").iterdir()] == [f"{held[0].name}.pickle"]


@pytest.mark.parametrize("step", ["data", "manifest", "publish", "checkpoint"])
async def test_crash_in_any_commit_step_keeps_the_held_set_consistent(
    tmp_path: Path, step: str
) -> None:
    feed = _Feed(tmp_path)
    await feed.prepare()
    feed.zone.fault = _CrashAt(step=step)
    with pytest.raises(_Crash):
        await feed.pipeline.commit()
    zone = LandingZone(feed.cfg)
    checkpoint = zone.recover()
    committed = step != "data"  # from the manifest on, the batch is committed
    assert len(checkpoint.xa_pending) == (1 if committed else 0)
    assert len(zone.load_held(checkpoint.xa_pending)) == (1 if committed else 0)
    assert len(list((tmp_path / "_state" / "xa").iterdir())) == (1 if committed else 0)


def _rows(feed: _Feed, rows: list[tuple[object, ...]]) -> list[ev.Event]:
    """A TABLE_MAP and a WRITE_ROWS of ``rows`` into db.t (id, v), at ``feed``'s position."""
    return feed.events.inserts(rows)


async def test_a_held_xa_read_back_after_a_restart_lands_between_other_transactions(
    tmp_path: Path,
) -> None:
    """A held XA transaction read back after a restart (its table version a copy of the one
    the stream's transactions use) commits between two transactions of the same table in
    one batch: the rows land in one file, in stream order (staging by version object put
    them in two lists of one file, and the writer stopped on _seq going back)."""
    import pyarrow.parquet as pq

    feed = _Feed(tmp_path)
    e = feed.events
    await feed.send(
        e.gtid(1), e.query(f"XA START {XA}"), *_rows(feed, [(1, "xa")]), e.query(f"XA END {XA}"),
        e.prepare(XA),
    )  # fmt: skip
    await feed.pipeline.commit()
    assert len(feed.pipeline.checkpoint.xa_pending) == 1
    await feed.pipeline.close()
    events = feed.events
    feed = _Feed(tmp_path)  # the restart: the held rows are read back from _state/xa
    feed.events = events
    await feed.send(e.gtid(2), e.query("BEGIN"), *_rows(feed, [(10, "a")]), e.xid(2))
    await feed.send(e.gtid(3), e.query(f"XA COMMIT {XA}"))
    await feed.send(e.gtid(4), e.query("BEGIN"), *_rows(feed, [(11, "b")]), e.xid(4))
    await feed.pipeline.commit()
    await feed.pipeline.close()
    files = sorted((tmp_path / "db" / "t").glob("*.parquet"))
    landed = sorted((r["_seq"], r["id"]) for f in files for r in pq.read_table(f).to_pylist())
    assert [i for _, i in landed] == [10, 1, 11]
    assert len(files) == 1
