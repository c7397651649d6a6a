"""Every binlog file of the corpus walks to its end, or fails exactly where it must.

Event counts are checked against the corpus manifest (made by walking ``event_size``) and the
upstream projects' own expectations (INDEX.md). Feeding the same bytes whole, in odd-sized
chunks, and one byte at a time must give the same events.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest

from replicator.binlog import events as ev
from replicator.binlog.constants import CHECKSUM_CRC32
from replicator.binlog.errors import DecodeError, TruncatedError
from replicator.binlog.parser import EventParser
from replicator.errors import IntegrityError
from replicator.schema.history import Point, SchemaHistory
from replicator.schema.model import Catalog, Database, ServerTraits
from replicator.schema.tracker import SchemaTracker
from replicator.source.binlog_file import read_binlog_file

from .util import CORPUS_DIR, corpus_file, decode_all, file_bytes

# file -> (error class, position of the event or byte that must fail, words in the message)
EXPECTED_FAILURES: dict[str, tuple[type[DecodeError], int, str]] = {
    # text-mangled copy: magic bytes became U+FFFD
    "canal/tsdb/mysql-bin.000001": (DecodeError, 0, "not a binary log"),
    "mysql-binlog-connector-rust/non-binlog": (DecodeError, 0, "not a binary log"),
    "rust_mysql_common/binlog_truncated_event.000001": (TruncatedError, 4, "ends inside an event"),
    "rust_mysql_common/binlog_truncated_prev_gtid_event.000001": (
        TruncatedError,
        120,
        "ends inside an event",
    ),
    # INDEX.md: a broken QUERY event of size 171; the upstream walk stops there too
    "rust_mysql_common/corrupt-relay-bin.000624": (DecodeError, 91204, "QUERY"),
    # INDEX.md: a broken XID event of size 0x26 (a 5.2 development build's numbering)
    "rust_mysql_common/ver_5_1-wl2325_r.001": (DecodeError, 428, "XID event body is 19 bytes"),
}

# Upstream test expectations (INDEX.md sections 2 and 6), besides the manifest.
UPSTREAM_COUNTS = {
    "mysql-binlog-connector-java/mysql-bin.sakila.gz": 1462,
    "mysql-binlog-connector-java/mysql-bin.compressed": 5,
    "mysql-binlog-connector-java/mysql-bin.checksum-none": 191,
    "mysql-binlog-connector-java/mysql-bin.checksum-crc32": 303,
    "mysql-binlog-connector-rust/mysql-bin.000057": 8,
    "mysql-binlog-connector-rust/mysql-bin.000080": 37,
}


def _manifest(corpus: Path) -> list[dict[str, object]]:
    entries: list[dict[str, object]] = json.loads((corpus / "manifest.json").read_text())
    return [e for e in entries if e.get("events") is not None]


def _binlog_paths() -> list[str]:
    if not (CORPUS_DIR / "manifest.json").exists():
        return ["<corpus absent>"]
    return [str(e["path"]) for e in _manifest(CORPUS_DIR)]


def _event_start_offsets(data: bytes) -> list[int]:
    offsets, pos = [], 4
    while pos + 19 <= len(data):
        offsets.append(pos)
        size = int.from_bytes(data[pos + 9 : pos + 13], "little")
        if size < 19:
            break
        pos += size
    return offsets


@pytest.mark.parametrize("rel", sorted(EXPECTED_FAILURES))
def test_file_fails_where_expected(corpus_dir: Path, rel: str) -> None:
    assert rel in {str(e["path"]) for e in _manifest(corpus_dir)}
    error, position, words = EXPECTED_FAILURES[rel]
    with pytest.raises(error) as info:
        decode_all(corpus_dir / rel)
    assert info.value.position == position
    assert words in str(info.value)


@pytest.mark.parametrize("rel", [p for p in _binlog_paths() if p not in EXPECTED_FAILURES])
def test_file_walks(corpus_dir: Path, rel: str) -> None:
    path = corpus_dir / rel
    manifest = {str(e["path"]): e for e in _manifest(corpus_dir)}
    events = decode_all(path)
    assert len(events) == manifest[rel]["events"]
    assert len(events) == UPSTREAM_COUNTS.get(rel, len(events))
    assert isinstance(events[0], ev.FormatDescriptionEvent)
    # positions tile the file: each event starts where the previous one ended
    data = file_bytes(path)
    assert [e.position for e in events] == _event_start_offsets(data)
    assert events[-1].next_position == len(data)


def test_every_manifest_file_is_walked(corpus_dir: Path) -> None:
    walked = set(_binlog_paths())
    on_disk = {
        str(p.relative_to(corpus_dir))
        for p in corpus_dir.rglob("*")
        if p.is_file()
        and not p.name.endswith((".md", ".json", ".txt"))
        and "_reference-decodes" not in p.parts
        and p.parent.name != "vitess"
    }
    assert on_disk == walked


@pytest.mark.parametrize(
    "rel",
    [
        "rust_mysql_common/mysql-enum-string-set.000001",
        "mysql-binlog-connector-rust/mysql-bin.000057",
        "rust_mysql_common/mariadb-bin.000001",
        "rust_mysql_common/json.binlog.000001",
    ],
)
@pytest.mark.parametrize("chunk", [1, 7, 4096])
def test_chunked_feeding_gives_the_same_events(corpus_dir: Path, rel: str, chunk: int) -> None:
    path = corpus_dir / rel
    assert decode_all(path, chunk=chunk) == decode_all(path)


def test_aurora_vendor_event_is_ignored_and_counted(corpus_dir: Path) -> None:
    events = decode_all(corpus_dir / "mysql-binlog-connector-java/mysql-bin.aurora-padding")
    assert [type(e) for e in events[:3]] == [
        ev.FormatDescriptionEvent,
        ev.PreviousGtidsEvent,
        ev.MysqlGtidEvent,
    ]
    padding = events[3]
    assert isinstance(padding, ev.IgnoredEvent)
    assert padding.header.type_code == 100
    assert padding.header.event_size == 928
    begin = events[4]
    assert isinstance(begin, ev.QueryEvent)
    assert begin.query == "BEGIN"


def test_vendor_event_without_ignorable_flag_stops(corpus_dir: Path) -> None:
    data = bytearray(
        file_bytes(corpus_dir / "mysql-binlog-connector-java/mysql-bin.aurora-padding")
    )
    start = _event_start_offsets(bytes(data))[3]
    data[start + 17] &= ~0x80 & 0xFF  # clear LOG_EVENT_IGNORABLE_F
    end = start + int.from_bytes(data[start + 9 : start + 13], "little")
    data[end - 4 : end] = zlib.crc32(data[start : end - 4]).to_bytes(4, "little")
    parser = EventParser(file="aurora")
    offsets = _event_start_offsets(bytes(data))
    for offset in offsets[:3]:
        size = int.from_bytes(data[offset + 9 : offset + 13], "little")
        parser.parse(bytes(data[offset : offset + size]), position=offset)
    with pytest.raises(DecodeError, match="unknown event type 100") as info:
        parser.parse(bytes(data[start:end]), position=start)
    assert info.value.position == start


def test_vitess_payload_event(corpus_dir: Path) -> None:
    """A lone 8.0 TRANSACTION_PAYLOAD event, stored without its CRC (INDEX.md section 8)."""
    raw = corpus_file(corpus_dir, "vitess/mysql56_small_compressed_trx_payload.event").read_bytes()
    assert int.from_bytes(raw[9:13], "little") == len(raw) + 4
    event_bytes = raw + zlib.crc32(raw).to_bytes(4, "little")
    parser = EventParser(checksum_alg=CHECKSUM_CRC32)
    payload = parser.parse(event_bytes)
    assert isinstance(payload, ev.TransactionPayloadEvent)
    inner = payload.events
    assert [type(e) for e in inner] == [ev.QueryEvent, ev.TableMapEvent, ev.RowsEvent, ev.XidEvent]
    query, table_map, rows = inner[0], inner[1], inner[2]
    assert isinstance(query, ev.QueryEvent) and query.query == "BEGIN"
    assert isinstance(table_map, ev.TableMapEvent)
    assert (table_map.schema, table_map.table) == ("vt_commerce", "customer")
    assert isinstance(rows, ev.RowsEvent)
    # no charset metadata in this event: the VARCHAR comes back as bytes
    assert list(rows.rows) == [(1, b"mlord@planetscale.com"), (2, b"sup@planetscale.com")]


def test_a_functional_index_stops_at_its_statement(corpus_dir: Path) -> None:
    """MySQL 8's index on an expression adds a hidden column to the rows: the schema history
    refuses the statement that makes it (naming it), before any row is decoded."""
    path = corpus_file(corpus_dir, "rust_mysql_common/rpl_unfiltered_hidden_gcol.000001")
    seed = Catalog(ServerTraits("mysql", (8, 0, 17), 0)).with_database(Database("test", "utf8mb4"))
    tracker = SchemaTracker(SchemaHistory(seed, Point(path.name, 4)), lambda s, t: True)
    with pytest.raises(IntegrityError) as stopped:
        for event in read_binlog_file(path, schema_lookup=tracker):
            tracker.on_event(event)
    assert "an index on an expression" in str(stopped.value)
    assert "CREATE TABLE" in str(stopped.value) or "INDEX" in str(stopped.value)
