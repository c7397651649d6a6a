"""The source proof a manifest records (``source.proof``), on real parser output and a real
landing zone: the digest ignores what differs between hosts serving one history (table ids,
event flags) and sees what differs between histories (row images, tables, GTIDs); each batch
records its last transaction, a batch without one carries the last proof on, and a large
transaction hashed part by part gives the digest of the whole."""

from __future__ import annotations

import datetime as dt
import json
import struct
from pathlib import Path
from typing import Any

import pytest

from replicator.binlog import events as ev
from replicator.binlog.block import Block
from replicator.binlog.constants import CHECKSUM_OFF, EVENT_HEADER_SIZE
from replicator.binlog.parser import EventParser, row_image_bytes
from replicator.binlog.position import StreamPosition
from replicator.binlog.transaction import Transaction, TransactionAssembler
from replicator.config import FilterConfig, SinkConfig
from replicator.errors import IntegrityError
from replicator.landed.manifests import parse_manifest
from replicator.pipeline.pipeline import Pipeline
from replicator.sink.changes import TableVersion
from replicator.sink.landing import LandingZone
from replicator.snapshot_progress import SnapshotState
from replicator.source.proof import Digest, Proof
from replicator.storage import LocalStore

from .synthetic_events import Events

TABLE_MAP, WRITE_ROWS_V2 = 19, 30
LONG = 3


def _event(type_code: int, body: bytes, position: int) -> bytes:
    size = EVENT_HEADER_SIZE + len(body)
    header = struct.pack("<IBIIIH", 1_700_000_000, type_code, 1, size, position + size, 0)
    return header + body


def _parsed(table_id: int, ids: list[int], *, table: bytes = b"t", flags: int = 1) -> ev.RowsEvent:
    """A TABLE_MAP and a WRITE_ROWS (v2) of ``db.<table> (id INT)`` through the real parser."""
    parser = EventParser(file="b.1", position=4, checksum_alg=CHECKSUM_OFF)
    tid = table_id.to_bytes(6, "little")
    table_map = (
        tid + b"\x01\x00" + b"\x02db\x00" + bytes([len(table)]) + table + b"\x00"
        + b"\x01" + bytes([LONG]) + b"\x00" + b"\x00"
    )  # fmt: skip
    parser.parse(_event(TABLE_MAP, table_map, 4))
    images = b"".join(b"\x00" + struct.pack("<i", n) for n in ids)  # null bitmap, value
    rows = tid + flags.to_bytes(2, "little") + b"\x02\x00" + b"\x01" + b"\x01" + images
    event = parser.parse(_event(WRITE_ROWS_V2, rows, 100))
    assert isinstance(event, ev.RowsEvent)
    return event


def _digest(gtid: str, *events: ev.Event) -> str:
    digest = Digest(gtid)
    digest.add(events)
    return digest.hexdigest()


def test_row_images_are_the_bytes_after_the_bitmaps() -> None:
    event = _parsed(70, [1, 2])
    images = row_image_bytes(event)
    assert images is not None
    assert bytes(images) == b"\x00\x01\x00\x00\x00\x00\x02\x00\x00\x00"


def test_the_digest_ignores_table_ids_and_flags_and_sees_content() -> None:
    here = _digest("0-1-5", _parsed(70, [1, 2]))
    assert _digest("0-1-5", _parsed(4242, [1, 2], flags=0)) == here  # another host's ids
    assert _digest("0-1-5", _parsed(70, [1, 3])) != here  # another row
    assert _digest("0-1-5", _parsed(70, [1, 2], table=b"u")) != here  # another table
    assert _digest("0-1-6", _parsed(70, [1, 2])) != here  # another GTID


def test_statements_count_but_begin_and_commit_do_not() -> None:
    e = Events()
    rows = _parsed(70, [1])
    assert _digest("0-1-5", e.query("BEGIN"), rows, e.query("COMMIT")) == _digest("0-1-5", rows)
    digest = Digest("0-1-5")
    digest.add([e.query("ALTER TABLE db.t ADD c INT")])
    assert digest.events == 1
    assert digest.hexdigest() != _digest("0-1-5")


COLUMNS = _parsed(70, [1]).table.columns


class _Feed:
    """Transactions of parser-made rows events into a pipeline on a real landing zone."""

    def __init__(self, root: Path, **sink: Any) -> None:
        self.cfg = SinkConfig(root=str(root), batch_max_seconds=999, **sink)
        self.zone = LandingZone(self.cfg)
        self.pipeline = Pipeline(self.cfg, FilterConfig(), self.zone, self.zone.recover())
        self.pipeline.require_names = False
        self.pipeline.seed(StreamPosition("b.1", 4))
        self.events = Events()
        self.gno = 0
        self.handed: list[Transaction] = []

    async def transaction(self, *ids: list[int], part_rows: int | None = None) -> None:
        self.gno += 1
        e = self.events
        rows = [_parsed(10 + self.gno, chunk) for chunk in ids]
        assembler = TransactionAssembler(part_rows=part_rows)
        for event in [e.gtid(self.gno), e.query("BEGIN"), *rows, e.xid(self.gno)]:
            for item in assembler.feed(event):
                if isinstance(item, Transaction):
                    self.handed.append(item)
                await self.pipeline.handle(item)


def _manifests(root: Path) -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted((root / "_manifests").glob("*.json"))]


async def test_each_batch_records_its_last_transaction_and_empty_ones_carry_it(
    tmp_path: Path,
) -> None:
    feed = _Feed(tmp_path)
    await feed.transaction([1, 2])
    await feed.transaction([3])
    await feed.pipeline.commit()
    last = feed.handed[-1]
    # a batch of snapshot rows only: no transaction of the stream in it
    version = TableVersion("db", "t", COLUMNS)
    at = StreamPosition("b.1", 999)
    block = Block.from_rows([(9,)], 1)
    await feed.pipeline.snapshot_rows(version, None, block, at, dt.datetime.now(dt.UTC), 1)
    await feed.pipeline.snapshot_chunk_done(SnapshotState())
    await feed.pipeline.commit()
    await feed.pipeline.close()

    first, second = _manifests(tmp_path)
    assert first["source"] == {
        "gtid": last.gtid,
        "before": {"file": "b.1", "position": feed.handed[0].end_position},
        "digest": _digest(str(last.gtid), *last.events),
        "events": 1,
    }
    assert second["transactions"] == 1 and second["rows"] == 1  # the chunk
    assert second["source"] == first["source"]


async def test_a_large_transaction_hashed_by_parts_has_the_whole_ones_digest(
    tmp_path: Path,
) -> None:
    whole = _Feed(tmp_path / "whole")
    await whole.transaction([1, 2], [3], [4, 5])
    await whole.pipeline.commit()
    await whole.pipeline.close()
    parts = _Feed(tmp_path / "parts", large_transaction_rows=2)
    await parts.transaction([1, 2], [3], [4, 5], part_rows=2)
    await parts.pipeline.commit()
    await parts.pipeline.close()

    assert parts.handed[-1].parts > 0  # it came in parts
    [by_parts] = _manifests(tmp_path / "parts")
    [at_once] = _manifests(tmp_path / "whole")
    assert by_parts["source"] == at_once["source"]


def test_a_manifest_with_a_malformed_proof_is_refused(tmp_path: Path) -> None:
    good = {
        "batch": 1,
        "committed_at": "2026-11-26T00:00:00Z",
        "first_seq": 1,
        "last_seq": 0,
        "rows": 0,
        "transactions": 1,
        "end": {"file": "b.1", "position": 4},
        "files": [],
    }
    path = tmp_path / "00000000000000000001.json"
    store = LocalStore(tmp_path)
    for proof in (None, Proof("0-1-5", None, "a" * 64, 2).to_json()):
        parse_manifest(path, json.dumps({**good, "source": proof}).encode(), store)
    for bad in ({"gtid": "0-1-5", "digest": "xyz", "events": 1}, "0-1-5", {"digest": "a" * 64}):
        with pytest.raises(IntegrityError, match="invalid 'source' proof"):
            parse_manifest(path, json.dumps({**good, "source": bad}).encode(), store)
