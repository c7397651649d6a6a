"""A large transaction handed out in parts whose group the assembler then drops (the next
group's GTID, or a restarted server's FORMAT_DESCRIPTION, came before its XID: it never
committed) must not land: the stream tells the consumer to drop the parts
(``TransactionAborted``), or the pipeline would fold them into the next transaction's batch
and its proof."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from replicator.binlog import events as ev
from replicator.binlog.position import StreamPosition
from replicator.binlog.transaction import Transaction, TransactionAssembler
from replicator.config import FilterConfig, SinkConfig, SourceConfig
from replicator.pipeline.pipeline import Pipeline
from replicator.sink.landing import LandingZone
from replicator.source.handoff import End
from replicator.source.items import StreamItem, TransactionAborted
from replicator.source.proof import Proof
from replicator.source.stream import ReplicaStream

from .synthetic_events import Events


def _restart(e: Events) -> ev.FormatDescriptionEvent:
    start = e.position
    e.position += 50
    header = ev.EventHeader(1_700_000_000, 15, 1, 50, e.position, 0)
    return ev.FormatDescriptionEvent(
        header, "b.1", start, e.position, 4, "8.0.40", 0, 19, bytes(40), 1
    )


def _cut_then_whole(
    torn: Sequence[tuple[object, ...]],
    whole: Sequence[tuple[object, ...]],
    *,
    restart: bool = False,
) -> list[ev.Event]:
    """T1 (GTID 1) inserting ``torn``, whose XID never comes (``restart``: a restarted
    server's FORMAT_DESCRIPTION after it), then T2 (GTID 2) inserting ``whole``, committed."""
    e = Events()
    return [
        e.gtid(1),
        e.query("BEGIN"),
        *e.inserts(torn),
        *([_restart(e)] if restart else []),
        e.gtid(2),
        e.query("BEGIN"),
        *e.inserts(whole),
        e.xid(2),
    ]


def _handed(stream: ReplicaStream) -> list[StreamItem]:
    """What the stream handed over since the last call (its batch not yet flushed)."""
    batch, stream._handoff._batch = stream._handoff._batch, []
    items: list[StreamItem] = []
    for item, _, _ in batch:
        assert not isinstance(item, (BaseException, End))
        items.append(item)
    return items


async def _stream(
    tmp_path: Path, events: Sequence[ev.Event]
) -> tuple[list[StreamItem], Transaction | None, StreamPosition | None]:
    """Feed ``events`` as the stream's loop does (parts of two row images) and hand what
    it delivers to a pipeline; returns the items, the last whole transaction and the
    pipeline's position before it."""
    cfg = SinkConfig(root=str(tmp_path), batch_max_seconds=999)
    zone = LandingZone(cfg)
    pipeline = Pipeline(cfg, FilterConfig(), zone, zone.recover())
    stream = ReplicaStream(SourceConfig(), StreamPosition("b.1", 4))
    pipeline.seed(StreamPosition("b.1", 4))
    assembler = TransactionAssembler(part_rows=2)  # sink.large_transaction_rows
    seen: list[StreamItem] = []
    last, before = None, None
    for event in events:
        for fed in assembler.feed(event):
            assert stream._hand_over(fed, assembler)
            for item in _handed(stream):
                if isinstance(item, Transaction):
                    last, before = item, pipeline.position
                seen.append(item)
                await pipeline.handle(item)
    await pipeline.commit()
    await pipeline.close()
    return seen, last, before


def _landed(root: Path) -> list[int]:
    files = sorted((root / "db" / "t").glob("*.parquet"))
    return sorted(i for f in files for i in pq.read_table(f).column("id").to_pylist())


@pytest.mark.parametrize("cut_by", ["next group", "server restart"])
async def test_the_parts_of_a_group_that_never_ends_do_not_land(
    tmp_path: Path, cut_by: str
) -> None:
    events = _cut_then_whole(
        [(1, "torn"), (2, "torn"), (3, "torn")],  # handed out in parts
        [(100, "ok")],
        restart=cut_by == "server restart",
    )
    seen, last, before = await _stream(tmp_path, events)
    aborted = [i for i, item in enumerate(seen) if isinstance(item, TransactionAborted)]
    assert len(aborted) == 1
    assert last is not None and seen.index(last) > aborted[0]
    assert _landed(tmp_path) == [100]
    # the batch's proof is of T2 alone, as a later start reads T2 back from the server
    manifests = sorted((tmp_path / "_manifests").glob("*.json"))
    recorded = json.loads(manifests[-1].read_text())["source"]
    assert recorded["digest"] == Proof.of(last, before, None).digest


async def test_a_group_dropped_without_parts_out_aborts_nothing(tmp_path: Path) -> None:
    events = _cut_then_whole(
        [(1, "torn")],  # below the part size: nothing handed out
        [(100, "ok"), (101, "ok"), (102, "ok")],  # parts, then its end
    )
    seen, _, _ = await _stream(tmp_path, events)
    assert not any(isinstance(item, TransactionAborted) for item in seen)
    assert _landed(tmp_path) == [100, 101, 102]
