"""Runs (``binlog.runs``): small transactions of rows taken by the native core many at a time
land exactly what reading them one event at a time lands.

A stream is read twice, as the replica reader reads it: one event at a time, and with runs
taken between transactions (``DumpStreamDecoder.take_run``, each closed by the transaction the
parser reads next). Both are landed by a real pipeline into a landing zone of their own; the
tables (every column and every metadata column, row by row) and the checkpoints must be the
same, whatever the chunks the stream arrives in. The stream is made of the sample binlog's
transactions of rows (an insert of every kind of column, some as buffers and some as
objects, an update, a delete), repeated under new GTIDs and positions, with DDL between.
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from replicator.binlog import events as ev
from replicator.binlog.constants import CHECKSUM_CRC32
from replicator.binlog.errors import ChecksumError, DecodeError
from replicator.binlog.framing import END_OF_STREAM, _NeedData
from replicator.binlog.gtid import MariadbGtidPosition
from replicator.binlog.position import StreamPosition
from replicator.binlog.runs import RowOrigins, TakenRun, TransactionRun
from replicator.binlog.stream import DumpStreamDecoder
from replicator.binlog.transaction import Transaction, TransactionAssembler
from replicator.checkpoint import position_to_json
from replicator.config import FilterConfig, Secret, SinkConfig, SourceConfig
from replicator.pipeline.pipeline import Pipeline
from replicator.sink.landing import LandingZone
from replicator.source.handoff import End
from replicator.source.items import StreamItem
from replicator.source.stream import ReplicaStream

from .test_native import require_native
from .test_stream import SAMPLE, _artificial_rotate, _dump_stream, _raw_events

NAME = "sample.000001"
_DDL = (370, 499)  # the sample's CREATE DATABASE and CREATE TABLE (event positions)


@dataclass
class Read:
    items: list[StreamItem] = field(default_factory=list)
    position: int = 0
    error: Exception | None = None

    @property
    def runs(self) -> list[TransactionRun]:
        return [item for item in self.items if isinstance(item, TransactionRun)]


def read(
    data: bytes,
    chunk: int,
    *,
    runs: bool,
    limit: int = 0,
    watch: tuple[tuple[int, int], ...] = (),
    budget: int = -1,
    max_images: int = 1 << 40,
    max_bytes: int = 1 << 20,
    name: str = NAME,
) -> Read:
    """The stream as the replica reader reads it (``source.stream``), with or without runs;
    a decode error ends the read (``error``)."""
    decoder = DumpStreamDecoder(file=name, position=4, checksum_alg=CHECKSUM_CRC32)
    assembler = TransactionAssembler()
    out = Read()
    pending: TakenRun | None = None
    try:
        for i in range(0, len(data), chunk):
            decoder.feed(data[i : i + chunk])
            while True:
                if runs and pending is None and not assembler.in_transaction:
                    decoder.runs = True
                    pending = decoder.take_run(
                        limit, watch, budget, max_images=max_images, max_bytes=max_bytes
                    )
                item = decoder.next_event()
                if isinstance(item, _NeedData) or item is END_OF_STREAM:
                    break
                assert isinstance(item, ev.Event)
                for fed in assembler.feed(item):
                    got: StreamItem = fed
                    if pending is not None:
                        got, pending = pending.closed_by(fed), None
                    out.items.append(got)
    except DecodeError as exc:
        out.error = exc
        if pending is not None:  # as source.stream: the run lands before the error
            out.items.append(pending.unclosed())
            pending = None
    assert pending is None  # a run never waits at the end
    out.position = decoder.parser.position
    return out


def _retagged(event: bytes, log_pos: int, seq: int | None = None) -> bytes:
    """``event`` with a new log_pos (a MariaDB GTID: a new seq_no), its CRC32 made again."""
    body = bytearray(event[:-4])
    body[13:17] = log_pos.to_bytes(4, "little")
    if seq is not None:
        body[19:27] = seq.to_bytes(8, "little")
    return bytes(body) + zlib.crc32(body).to_bytes(4, "little")


def _sample() -> tuple[list[bytes], list[bytes], list[list[bytes]]]:
    """The sample's events: (preamble up to its DDL, the DDL statements' GTID and QUERY,
    its four transactions of rows: insert, insert, update, delete)."""
    events = [e for _, e in _raw_events(SAMPLE.read_bytes())]
    starts = [i for i, e in enumerate(events) if e[4] == 162]  # MariaDB GTIDs
    transactions = [events[i : i + 5] for i in starts if events[i + 1][4] == 160]
    assert [[e[4] for e in t] for t in transactions] == [[162, 160, 19, 23, 16]] * 2 + [
        [162, 160, 19, 24, 16],
        [162, 160, 19, 25, 16],
    ]
    return events[: starts[0]], events[starts[0] : starts[2]], transactions


def stream_of(shape: list[int]) -> tuple[bytes, list[int]]:
    """A dump stream: the sample's preamble and DDL, then one transaction per entry of
    ``shape`` (an index into the sample's four transactions of rows; -1: its CREATE DATABASE
    statement again, a DDL that ends a run), under new GTIDs and positions. Returns the stream
    and the position after each transaction of ``shape``."""
    preamble, ddl, rows = _sample()
    out = [*preamble, *ddl]
    position = 4 + sum(len(e) for e in out)
    seq = 10
    ends = []
    for index in shape:
        template = ddl[:2] if index < 0 else rows[index]
        seq += 1
        for n, event in enumerate(template):
            position += len(event)
            out.append(_retagged(event, position, seq if n == 0 else None))
        ends.append(position)
    return _dump_stream([_artificial_rotate(NAME.encode(), 4), *out]), ends


# where the landing zones of these tests start: a position with a GTID state, so that the
# checkpoints and proofs follow GTIDs too (as a stream started from a GTID does)
START = StreamPosition(NAME, 4, MariadbGtidPosition(()), None)


async def _land_async(
    root: Path, items: list[StreamItem], start: StreamPosition = START, **sink: Any
) -> dict[str, Any]:
    filters = FilterConfig(**sink.pop("filters", {}))
    cfg = SinkConfig(root=str(root), batch_max_seconds=999, **sink)
    zone = LandingZone(cfg)
    pipeline = Pipeline(cfg, filters, zone, zone.recover())
    pipeline.seed(start)
    for item in items:
        await pipeline.handle(item)
    await pipeline.commit()
    await pipeline.close()
    checkpoint = pipeline.checkpoint
    assert checkpoint.position is not None
    return {"position": position_to_json(checkpoint.position), "next_seq": checkpoint.next_seq}


def land(root: Path, items: list[StreamItem], **sink: Any) -> tuple[dict[str, Any], pa.Table]:
    """Land ``items`` through a pipeline; (the checkpoint and the manifests, every row
    landed, by ``_seq``)."""
    checkpoint = asyncio.run(_land_async(root, items, **sink))
    checkpoint["manifests"] = [
        manifest(json.loads(path.read_text())) for path in sorted(root.glob("_manifests/*.json"))
    ]
    files = sorted((root / "shop" / "items").glob("*.parquet"))
    tables = [pq.read_table(f) for f in files]
    table = pa.concat_tables(tables, promote_options="default") if tables else pa.table({})
    return checkpoint, table.sort_by("_seq") if tables else table


def manifest(found: dict[str, Any]) -> dict[str, Any]:
    """A manifest less what differs between two landing zones of the same changes: when
    they committed, their ids, the files' hashes and sizes (bytes of the same rows), and so
    the link to the manifest before (a hash of its bytes)."""
    differ = ("committed_at", "landing_id", "previous_sha256")
    kept = {k: v for k, v in found.items() if k not in differ}
    kept["files"] = [
        {k: v for k, v in f.items() if k not in ("sha256", "bytes")} for f in found["files"]
    ]
    return kept


def _events_in(data: bytes) -> list[tuple[int, int]]:
    """(offset in the dump stream, type code) of every event in its packet."""
    out, at = [], 0
    while at + 4 <= len(data):
        length = int.from_bytes(data[at : at + 3], "little")
        if data[at + 4] == 0x00 and length > 19:
            out.append((at + 5, data[at + 5 + 4]))
        at += 4 + length
    return out


def _shape(length: int, seed: int, ddl: float = 0.02) -> list[int]:
    rng = random.Random(seed)
    return [-1 if rng.random() < ddl else rng.randrange(4) for _ in range(length)]


@pytest.fixture(autouse=True)
def _native_core() -> None:
    require_native()


@pytest.mark.parametrize(
    ("chunk", "in_runs"),
    # chunks smaller than a transaction never buffer two whole ones: no run, read as ever
    [(1, range(0, 1)), (97, range(0, 1)), (4096, range(300, 600)), (1 << 20, range(500, 600))],
)
def test_runs_land_what_one_event_at_a_time_lands(
    tmp_path: Path, chunk: int, in_runs: range
) -> None:
    data, _ = stream_of(_shape(600, seed=chunk))
    plain = read(data, chunk, runs=False)
    taken = read(data, chunk, runs=True)
    assert plain.error is None and taken.error is None
    assert taken.position == plain.position

    # whole transactions: as many, in the same order, as the plain read's
    def gtids(r: Read) -> list[str | None]:
        out: list[str | None] = []
        for item in r.items:
            if isinstance(item, TransactionRun):
                out.extend(_run_gtids(item))
            elif isinstance(item, ev.Event):
                continue
            else:
                out.append(item.gtid)  # type: ignore[union-attr]
        return out

    assert gtids(taken) == gtids(plain)
    assert sum(run.taken.transactions for run in taken.runs) in in_runs
    plain_checkpoint, plain_rows = land(tmp_path / "plain", plain.items)
    run_checkpoint, run_rows = land(tmp_path / "runs", taken.items)
    assert run_checkpoint == plain_checkpoint
    assert plain_rows.num_rows > 500
    assert run_rows.equals(plain_rows)


def _run_gtids(run: TransactionRun) -> list[str | None]:
    """The GTIDs of a run's transactions, from its segments' origins (one per transaction,
    in order), then its last's."""
    seen: list[str | None] = []
    for segment in run.taken.segments:
        texts = [segment.gtid] if segment.origins is None else _origin_gtids(segment.origins)
        for text in texts:
            if not seen or seen[-1] != text:
                seen.append(text)
    assert len(seen) == run.taken.transactions  # every transaction of the sample has rows
    assert run.last is not None
    return [*seen, run.last.gtid]


def _origin_gtids(origins: RowOrigins) -> list[str | None]:
    array = pa.Array.from_buffers(
        pa.string(),
        origins.events,
        [None, pa.py_buffer(origins.gtid_offsets), pa.py_buffer(origins.gtid_text)],
    )
    texts: list[str | None] = array.to_pylist()
    return texts


def test_a_run_is_closed_by_the_transaction_after_it(tmp_path: Path) -> None:
    data, ends = stream_of([0, 1, 2, 3, 0, 1])
    got = read(data, 1 << 20, runs=True)
    (run,) = got.runs
    # the first of each table's TABLE_MAP is read by the parser, which learns it then
    assert run.taken.transactions == 4  # the 2nd to the 5th
    assert run.last is not None
    assert run.last.end_position == ends[5]
    assert run.taken.end_position == ends[4] == run.last.position
    assert [s.kind for s in run.taken.segments] == [
        ev.RowsKind.INSERT,
        ev.RowsKind.UPDATE,
        ev.RowsKind.DELETE,
        ev.RowsKind.INSERT,
    ]
    # a segment of several events keeps each one's origins: positions, GTIDs, commit times
    data, ends = stream_of([0] * 7)
    (run,) = read(data, 1 << 20, runs=True).runs
    (segment,) = run.taken.segments
    assert segment.events == segment.block.count == 5
    assert segment.origins is not None
    assert _origin_gtids(segment.origins) == [f"0-1-{seq}" for seq in range(12, 17)]
    plain = read(data, 1 << 20, runs=False).items
    rows_events = [e for item in plain if not isinstance(item, ev.Event) for e in item.rows]  # type: ignore[union-attr]
    positions = [e.position for e in rows_events[1:6]]
    assert segment.position == positions[0]
    assert [segment.origins.position_of(row) for row in range(5)] == positions


def test_a_value_the_buffers_cannot_hold_starts_a_segment_of_objects() -> None:
    """The second insert's latin1 text is not ASCII: from its event on, that column comes
    as values (a new segment), as BlockSpec.decode takes it for one event."""
    data, _ = stream_of([0, 1, 0, 1, 0, 1])
    (run,) = read(data, 1 << 20, runs=True).runs
    first, second = run.taken.segments
    note = 6
    assert (first.events, second.events) == (1, 3)
    assert isinstance(first.block.columns[note], tuple)  # buffers
    assert isinstance(second.block.columns[note], list)


def test_ddl_ends_a_run_and_is_read_as_ever(tmp_path: Path) -> None:
    data, _ = stream_of([0, 1, 0, 1, -1, 0, 1, 0, 1])
    got = read(data, 1 << 20, runs=True)
    # before it, the first insert's table map is learned; after it, every one is known
    assert [run.taken.transactions for run in got.runs] == [2, 3]
    statements = [
        e.query
        for item in got.items
        if not isinstance(item, (TransactionRun, ev.Event))
        for e in item.events  # type: ignore[union-attr]
        if isinstance(e, ev.QueryEvent)
    ]
    assert [s.split(" (")[0] for s in statements] == [
        "CREATE DATABASE shop",
        "CREATE TABLE shop.items",
        "CREATE DATABASE shop",
    ]


def test_it_stops_before_what_the_end_check_must_see() -> None:
    data, ends = stream_of([0, 1, 0, 1, 0, 1, 0, 1])
    # a position: no transaction of a run ends at or past it; the one there closes a run
    got = read(data, 1 << 20, runs=True, limit=ends[5])
    first = got.runs[0]
    assert first.taken.end_position <= ends[5]
    assert first.last is not None
    assert first.last.end_position <= ends[5]
    # a GTID: none of a watched domain at or past its seq_no is in a run
    got = read(data, 1 << 20, runs=True, watch=((0, 15),))
    for run in got.runs:
        assert all(_seq(g) < 15 for g in _run_gtids(run)[:-1])


def _seq(gtid: str | None) -> int:
    assert gtid is not None
    return int(gtid.rsplit("-", 1)[1])


def test_a_transaction_the_parser_would_hand_out_in_parts_is_not_taken() -> None:
    data, _ = stream_of([0, 1, 0, 1, 0, 1])
    images = min(
        len(e) for t in _sample()[2] for e in t if e[4] in (23, 24, 25)
    )  # fewer image bytes than any rows event has
    assert read(data, 1 << 20, runs=True, max_images=images // 2).runs == []
    assert read(data, 1 << 20, runs=True).runs != []


def test_a_run_spans_about_max_bytes() -> None:
    data, _ = stream_of([0, 1] * 100)
    got = read(data, 1 << 20, runs=True, max_bytes=4096)
    assert len(got.runs) > 5
    assert all(run.taken.nbytes < 4096 + 1000 for run in got.runs)


def test_a_bad_checksum_inside_a_run_stops_exactly_there() -> None:
    """Every event a run takes is CRC32-checked: a flipped byte ends the run before its
    transaction, and the parser raises the mismatch at that event's position."""
    data, _ = stream_of([0, 1] * 20)
    rows_events = [at for at, code in _events_in(data) if code in (23, 24, 25)]
    flipped = bytearray(data)
    flipped[rows_events[30] + 30] ^= 0x40  # a byte of the 31st rows event's images
    plain = read(bytes(flipped), 1 << 20, runs=False)
    taken = read(bytes(flipped), 1 << 20, runs=True)
    assert isinstance(plain.error, ChecksumError)
    assert isinstance(taken.error, ChecksumError)
    assert str(taken.error) == str(plain.error)
    assert taken.runs  # the transactions before it were taken


@pytest.mark.parametrize(
    "bounds", [{"batch_max_rows": 1}, {"batch_max_rows": 7}, {"batch_max_bytes": 3000}]
)
def test_batches_end_where_they_end_one_transaction_at_a_time(
    tmp_path: Path, bounds: dict[str, int]
) -> None:
    """A run is split after the transaction that makes the batch due: the same batches,
    each with the proof of its last transaction, whatever the runs were."""
    data, _ = stream_of(_shape(300, seed=11))
    plain = read(data, 1 << 20, runs=False)
    taken = read(data, 1 << 20, runs=True)
    assert sum(run.taken.transactions for run in taken.runs) > 200
    plain_checkpoint, plain_rows = land(tmp_path / "plain", plain.items, **bounds)
    run_checkpoint, run_rows = land(tmp_path / "runs", taken.items, **bounds)
    assert len(plain_checkpoint["manifests"]) > 30
    assert run_checkpoint == plain_checkpoint
    assert run_rows.equals(plain_rows)


def test_excluded_columns_and_tables_land_the_same(tmp_path: Path) -> None:
    data, _ = stream_of(_shape(200, seed=3, ddl=0.0))
    plain = read(data, 1 << 20, runs=False)
    taken = read(data, 1 << 20, runs=True)
    assert taken.runs
    filters = {"exclude_columns": ["shop.items.name", "shop.items.tags"]}
    plain_checkpoint, plain_rows = land(tmp_path / "plain", plain.items, filters=filters)
    run_checkpoint, run_rows = land(tmp_path / "runs", taken.items, filters=filters)
    assert "name" not in run_rows.column_names
    assert run_rows.equals(plain_rows)
    assert run_checkpoint == plain_checkpoint
    excluded = {"exclude": ["shop.*"]}
    _, rows = land(tmp_path / "none", taken.items, filters=excluded)
    assert rows.num_rows == 0


def _spoiled(data: bytes, rows_event: int) -> bytes:
    """``data`` with a text value of its ``rows_event``-th rows event made invalid UTF-8 (the
    event's CRC32 made again): an event that decodes to an error, not a checksum mismatch."""
    at = [at for at, code in _events_in(data) if code in (23, 24, 25)][rows_event]
    size = int.from_bytes(data[at + 9 : at + 13], "little")
    event = bytearray(data[at : at + size])
    event[bytes(event).index(b"caf")] = 0xFF
    body = bytes(event[:-4])
    return data[:at] + body + zlib.crc32(body).to_bytes(4, "little") + data[at + size :]


def _replica_read(data: bytes, *, runs: bool) -> tuple[list[StreamItem], BaseException]:
    """What the replica stream (``source.stream.ReplicaStream``) hands over from ``data``
    sent on a socket, up to the error that stops it."""

    async def read() -> tuple[list[StreamItem], BaseException]:
        reader = ReplicaStream(SourceConfig(password=Secret("x")), START, runs=runs)
        reader._loop = asyncio.get_running_loop()
        reader._queue = asyncio.Queue()
        ours, peer = socket.socketpair()
        peer.sendall(data)
        peer.close()
        try:
            with pytest.raises(DecodeError) as stopped:
                await asyncio.to_thread(reader._read, ours, START, CHECKSUM_CRC32, None)
        finally:
            ours.close()
        items: list[StreamItem] = []
        while not reader._queue.empty():
            entry, _, _ = reader._queue.get_nowait()
            assert not isinstance(entry, (BaseException, End)), entry
            items.append(entry)
        return items, stopped.value

    return asyncio.run(read())


def test_a_run_lands_before_the_error_of_the_transaction_after_it(tmp_path: Path) -> None:
    """The transaction that would close a run does not decode: the run's transactions are
    handed over before the error, so the landing zone stops right before its cause, as one
    event at a time (and a skip of that one transaction skips nothing else)."""
    data, _ = stream_of([0, 1] * 20)
    spoiled = _spoiled(data, 28)  # the 29th transaction: the sample's first insert
    plain, plain_error = _replica_read(spoiled, runs=False)
    taken, taken_error = _replica_read(spoiled, runs=True)
    assert str(taken_error) == str(plain_error)
    assert [type(i) for i in taken if isinstance(i, TransactionRun)] != []
    unclosed = [i for i in taken if isinstance(i, TransactionRun) and i.last is None]
    assert len(unclosed) == 1 and unclosed[0].transactions > 1
    plain_landed, plain_rows = land(tmp_path / "plain", plain)
    taken_landed, taken_rows = land(tmp_path / "runs", taken)
    assert plain_landed["position"]["mariadb_gtid"] == "0-1-38"  # the 28 before it
    assert taken_landed == plain_landed
    assert taken_rows.equals(plain_rows)


def test_a_group_flagged_ddl_is_left_to_the_parser(tmp_path: Path) -> None:
    """A MariaDB GTID flagged DDL (as CREATE ... SELECT's is) starts no transaction a run
    takes, whatever events follow it: the parser reads it, and everything lands the same."""
    data, _ = stream_of([0, 1] * 10)
    gtids = [at for at, code in _events_in(data) if code == 162]
    at = gtids[12]  # the 12th transaction of rows (the first GTID is the DDL's)
    size = int.from_bytes(data[at + 9 : at + 13], "little")
    body = bytearray(data[at : at + size - 4])
    body[19 + 12] |= 0x20  # FL_DDL
    flagged = data[:at] + bytes(body) + zlib.crc32(body).to_bytes(4, "little") + data[at + size :]
    plain = read(flagged, 1 << 20, runs=False)
    taken = read(flagged, 1 << 20, runs=True)
    assert plain.error is None and taken.error is None
    seq = int.from_bytes(body[19:27], "little")
    in_runs = [g for run in taken.runs for g in _run_gtids(run)[:-1]]
    assert len(in_runs) > 10 and f"0-1-{seq}" not in in_runs
    assert land(tmp_path / "runs", taken.items) == land(tmp_path / "plain", plain.items)


def _under_id(event: bytes, table_id: int, name: bytes = b"items") -> bytes:
    """A TABLE_MAP or rows event of the sample's table ``shop.items`` under ``table_id`` (a
    TABLE_MAP: of the table ``name``, five letters), its CRC32 made again."""
    body = bytearray(event[:-4])
    body[19:25] = table_id.to_bytes(6, "little")
    if body[4] == 19:
        at = body.index(b"\x05items\x00")
        body[at + 1 : at + 6] = name
    return bytes(body) + zlib.crc32(body).to_bytes(4, "little")


def test_the_parser_takes_the_latest_table_map_of_every_id_a_run_mapped() -> None:
    """A run that maps more table ids than the native core keeps for the parser ends there,
    so the parser's table map of every id is the run's latest: a rows event of an id mapped
    only in an earlier transaction decodes as one event at a time decodes it (a run of 300
    ids once left the parser the map from before the run for the first of them)."""
    _, ddl, rows = _sample()
    gtid, annotate, table_map, insert, xid = rows[0]
    first = 1000
    maps = [(first, b"itemz"), *((i, b"items") for i in range(1, 301)), (first, b"items")]
    transactions = [[gtid, annotate, _under_id(table_map, i, n), _under_id(insert, i), xid]
        for i, n in [*maps, *maps[:-1]]]  # fmt: skip
    transactions.append([gtid, annotate, _under_id(insert, first), xid])  # no TABLE_MAP
    out = [*_sample()[0], *ddl]
    position = 4 + sum(len(e) for e in out)
    for seq, transaction in enumerate(transactions, start=100):
        for n, event in enumerate(transaction):
            position += len(event)
            out.append(_retagged(event, position, seq if n == 0 else None))
    data = _dump_stream([_artificial_rotate(NAME.encode(), 4), *out])

    plain = read(data, 1 << 20, runs=False)
    taken = read(data, 1 << 20, runs=True)

    assert plain.error is None and taken.error is None
    assert max(run.taken.transactions for run in taken.runs) > 64
    last = [item for item in (plain.items[-1], taken.items[-1]) if isinstance(item, Transaction)]
    assert [t.rows[0].table.table for t in last] == ["itemz", "itemz"]
