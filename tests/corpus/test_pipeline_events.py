"""MySQL events the pipeline must act on, through a real ``Pipeline`` into a landing zone: an
INCIDENT stops it after what came before, and the rows of a transaction handed over in parts
get the transaction's commit time, not the time they were read."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from replicator.binlog import events as ev
from replicator.binlog.errors import IncidentError
from replicator.binlog.position import StreamPosition
from replicator.binlog.transaction import Transaction, TransactionAssembler, TransactionPart
from replicator.cli import main
from replicator.config import FilterConfig, SinkConfig
from replicator.landed.committed import read_manifests
from replicator.pipeline.pipeline import Pipeline
from replicator.sink.landing import LandingZone
from replicator.source.items import StreamItem

from .util import corpus_file, decode_all

WITH_GTIDS = "mysql-binlog-connector-rust/mysql-bin.000080"  # 5.7.40: GTIDs, no commit stamps
ANONYMOUS = "mysql-binlog-connector-java/mysql-bin.checksum-crc32"  # 5.7.21, ANONYMOUS_GTID


def _assembled(path: Path, part_rows: int | None = None) -> list[StreamItem]:
    assembler = TransactionAssembler(part_rows=part_rows)
    return [item for event in decode_all(path) for item in assembler.feed(event)]


async def _land(root: Path, items: Sequence[StreamItem], start: str) -> None:
    cfg = SinkConfig(root=str(root), batch_max_seconds=999, batch_max_rows=10**9)
    zone = LandingZone(cfg)
    pipeline = Pipeline(cfg, FilterConfig(), zone, zone.recover())
    pipeline.seed(StreamPosition(start, 4))
    try:
        for item in items:
            await pipeline.handle(item)
        await pipeline.commit()
    finally:
        await pipeline.close()


def _lost_events_after(transaction: Transaction) -> ev.IncidentEvent:
    """INCIDENT_LOST_EVENTS right after ``transaction``, as MySQL writes it when a change
    could not be logged (``Incident_log_event``: a 2-byte code, then the message)."""
    message = "error writing file"
    size = 19 + 2 + 1 + len(message) + 4
    header = ev.EventHeader(transaction.timestamp, 26, 1, size, transaction.end_position + size, 0)
    return ev.IncidentEvent(
        header,
        transaction.end_file,
        transaction.end_position,
        transaction.end_position + size,
        incident=1,
        message=message,
    )


def test_an_incident_stops_the_pipeline_after_what_came_before(
    corpus_dir: Path, tmp_path: Path
) -> None:
    items = _assembled(corpus_file(corpus_dir, WITH_GTIDS))
    first = next(i for i, item in enumerate(items) if isinstance(item, Transaction))
    before = items[first]
    assert isinstance(before, Transaction) and before.row_count > 0
    incident = _lost_events_after(before)
    items.insert(first + 1, incident)
    with pytest.raises(IncidentError) as caught:
        asyncio.run(_land(tmp_path, items, before.file))
    text = str(caught.value)
    assert "LOST_EVENTS (error writing file)" in text
    assert f"at {incident.file}:{incident.position}" in text
    assert f"next event is at {incident.file}:{incident.next_position}" in text
    assert caught.value.exit_code == 4
    # the transaction before it landed whole; nothing after it did
    manifests = read_manifests(tmp_path).manifests
    assert [m.data["rows"] for m in manifests] == [before.row_count]
    assert manifests[-1].data["end"]["position"] == before.end_position


def test_an_incident_of_none_is_no_stop(corpus_dir: Path) -> None:
    items = _assembled(corpus_file(corpus_dir, WITH_GTIDS))
    transaction = next(item for item in items if isinstance(item, Transaction))
    assert (
        IncidentError.of(dataclasses.replace(_lost_events_after(transaction), incident=0)) is None
    )


def test_dump_stops_at_an_incident(corpus_dir: Path) -> None:
    """The corpus's file from MySQL's bug 40482 holds an incident (of a code no server
    defines: it is no less a stop)."""
    path = corpus_file(corpus_dir, "rust_mysql_common/bug40482-bin.000001")
    result = CliRunner().invoke(main, ["dump", "--binlog-file", str(path)])
    assert result.exit_code == 4, result.output
    assert "an unknown incident (66) at bug40482-bin.000001:106" in result.stderr


@pytest.mark.parametrize("rel", [ANONYMOUS, WITH_GTIDS])
def test_the_parts_of_a_transaction_get_its_commit_time(
    corpus_dir: Path, tmp_path: Path, rel: str
) -> None:
    """Neither file's GTID events carry a commit timestamp (MySQL 5.7): the commit time is
    the header time of the GTID event, written at the commit as the XID event is."""
    items = _assembled(corpus_file(corpus_dir, rel), part_rows=1)
    index, whole = next(
        (i, item) for i, item in enumerate(items) if isinstance(item, Transaction) and item.parts
    )
    assert isinstance(whole, Transaction) and whole.mysql_gtid is not None
    assert whole.mysql_gtid.immediate_commit_timestamp is None
    parts = [
        part for part in items[index - whole.parts : index] if isinstance(part, TransactionPart)
    ]
    assert len(parts) == whole.parts > 0
    asyncio.run(_land(tmp_path, items[: index + 1], whole.file))
    rows = [
        row
        for path in tmp_path.rglob("part-*.parquet")
        for row in pq.read_table(path).to_pylist()
        if whole.position <= row["_binlog_pos"] < whole.end_position
    ]
    assert len(rows) == whole.row_count + sum(part.row_count for part in parts)
    assert {row["_ts"].timestamp() for row in rows} == {float(whole.timestamp)}
