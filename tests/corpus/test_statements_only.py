"""A DDL scan's read of statements only, over every corpus file that walks to its end.

Served as a dump stream (each event in its packet), a file read of statements only gives
the same events as a full read, less its rows and TABLE_MAP events (passed over, natively
when the core is built), at the same positions: MySQL 5.x v1 rows, MariaDB compressed rows,
TRANSACTION_PAYLOAD (inner rows keep their header with no images), partial JSON updates.
"""

from __future__ import annotations

import zlib
from pathlib import Path
from uuid import UUID

import pytest

from replicator.binlog import events as ev
from replicator.binlog.constants import CHECKSUM_CRC32, CHECKSUM_OFF
from replicator.binlog.framing import END_OF_STREAM, _NeedData
from replicator.binlog.gtid import MariadbGtidPosition, MysqlGtidSet
from replicator.binlog.parser import _STATUS_VAR_SIZES
from replicator.binlog.position import StreamPosition
from replicator.binlog.stream import DumpStreamDecoder
from replicator.binlog.versions import is_mariadb
from tests.unit.test_native import require_native
from tests.unit.test_skip_row_transactions import (
    removed_transactions,
    scan_plain,
    scan_skipping,
)

from .test_walk import EXPECTED_FAILURES, _binlog_paths
from .util import decode_all, file_bytes

_STEPPED = (ev.RowsEvent, ev.TableMapEvent)


def _dump_stream(events: list[bytes]) -> bytes:
    out, sequence = bytearray(), 1
    for event in events:
        payload = b"\x00" + event
        assert len(payload) < 0xFFFFFF  # the corpus has no event over 16 MiB
        out += len(payload).to_bytes(3, "little") + bytes([sequence & 0xFF]) + payload
        sequence += 1
    return bytes(out)


def _served(path: Path) -> tuple[str, bytes]:
    """The file's name and its events as a dump stream serves them."""
    data = file_bytes(path)
    raw, pos = [], 4
    while pos < len(data):
        size = int.from_bytes(data[pos + 9 : pos + 13], "little")
        raw.append(data[pos : pos + size])
        pos += size
    return path.name.removesuffix(".gz"), _dump_stream(raw)


def served_with_crc32(corpus_dir: Path, rel: str) -> tuple[str, bytes, StreamPosition]:
    """The file as a dump stream serves it, and where a landing zone of it starts (with an
    empty GTID state of the server's flavour, so that positions follow GTIDs); skips a file
    that does not walk to its end or has not one FORMAT_DESCRIPTION announcing CRC32 (only
    checked events are taken in whole transactions)."""
    if rel in EXPECTED_FAILURES:
        pytest.skip("this file does not walk to its end (test_walk checks where it stops)")
    path = corpus_dir / rel
    formats = [e for e in decode_all(path) if isinstance(e, ev.FormatDescriptionEvent)]
    if len(formats) != 1 or formats[0].checksum_alg != CHECKSUM_CRC32:
        pytest.skip("not one FORMAT_DESCRIPTION announcing CRC32 (only checked events pass)")
    name, stream = _served(path)
    if is_mariadb(formats[0].server_version):
        return name, stream, StreamPosition(name, 4, MariadbGtidPosition(()), None)
    return name, stream, StreamPosition(name, 4, None, MysqlGtidSet(()))


def _read(stream: bytes, name: str, checksum: int, row_images: bool) -> list[ev.Event]:
    decoder = DumpStreamDecoder(file=name, position=4, checksum_alg=checksum)
    decoder.parser.statements_only = not row_images
    got: list[ev.Event] = []
    for i in range(0, len(stream), 4096):
        decoder.feed(stream[i : i + 4096])
        while not isinstance(item := decoder.next_event(), _NeedData):
            assert item is not END_OF_STREAM
            assert isinstance(item, ev.Event)
            got.append(item)
    return got


def _shape(event: ev.Event) -> tuple[object, ...]:
    query = event.query if isinstance(event, ev.QueryEvent) else None
    inner = None
    if isinstance(event, ev.TransactionPayloadEvent):
        inner = tuple(type(e).__name__ for e in event.events)
    return type(event).__name__, event.position, event.next_position, query, inner


@pytest.mark.parametrize("rel", _binlog_paths())
def test_a_read_of_statements_gives_every_other_event(corpus_dir: Path, rel: str) -> None:
    if rel in EXPECTED_FAILURES:
        pytest.skip("this file does not walk to its end (test_walk checks where it stops)")
    path = corpus_dir / rel
    full = decode_all(path)
    formats = [e for e in full if isinstance(e, ev.FormatDescriptionEvent)]
    if len(formats) != 1 or formats[0].checksum_alg not in (CHECKSUM_CRC32, CHECKSUM_OFF):
        pytest.skip("not one FORMAT_DESCRIPTION announcing CRC32 or none")
    name, stream = _served(path)
    checksum = formats[0].checksum_alg
    expected = [
        _shape(e) for e in _read(stream, name, checksum, True) if not isinstance(e, _STEPPED)
    ]
    got = [_shape(e) for e in _read(stream, name, checksum, False)]
    assert got == expected


@pytest.mark.parametrize("rel", _binlog_paths())
def test_a_scan_passes_over_whole_transactions_of_rows_only(corpus_dir: Path, rel: str) -> None:
    """Passing MariaDB transactions of rows over natively, between transactions, leaves the
    read of statements only as it was less whole transactions of rows, and ends at the same
    position, whatever the server wrote (MySQL's transactions are never passed over)."""
    require_native()
    name, stream, _ = served_with_crc32(corpus_dir, rel)
    plain, end = scan_plain(stream, name)
    scan = scan_skipping(stream, 1 << 16, name=name)
    assert removed_transactions(plain, scan.events) == scan.skipped
    assert scan.position == end
    # the MySQL GTIDs passed over are those of the transactions left out, in order
    read = {e.position for e in scan.events}
    left_out = [
        (UUID(e.uuid).bytes, e.gno)
        for e in plain
        if isinstance(e, ev.MysqlGtidEvent) and not e.anonymous and e.position not in read
    ]
    assert [(uid, gno) for uid, first, last in scan.mysql for gno in range(first, last + 1)] == (
        left_out
    )


def test_a_scan_passes_no_more_mysql_gtids_over_than_its_budget(corpus_dir: Path) -> None:
    """The end check of a MySQL stream needs the transaction whose GTID completes the end's
    set: ``budget`` caps the GTIDs passed over (``skip_bounds`` gives one fewer than the set
    lacks), and the reader takes the rest."""
    require_native()
    path = corpus_dir / "rust_mysql_common" / "mysql-enum-string-set.000001"
    name, stream = _served(path)
    plain, end = scan_plain(stream, name)
    passed = {}
    for budget in (-1, 0, 1):
        scan = scan_skipping(stream, 1 << 16, budget=budget, name=name)
        assert removed_transactions(plain, scan.events) == scan.skipped
        assert scan.position == end
        passed[budget] = sum(1 + last - first for _, first, last in scan.mysql)
    assert passed[-1] >= 2  # the file has MySQL transactions of rows to pass over
    assert (passed[0], passed[1]) == (0, 1)


def _charset_at(status: bytes) -> int:
    """Where the client's character set id is in a QUERY event's status variables."""
    pos = 0
    while status[pos] != 4:  # Q_CHARSET_CODE
        size = _STATUS_VAR_SIZES[status[pos]]
        pos += 1 + (size if isinstance(size, int) else size(status, pos + 1))
    return pos + 1


def test_a_begin_in_a_character_set_that_reads_ascii_otherwise_is_not_passed_over(
    corpus_dir: Path,
) -> None:
    """A MySQL transaction whose BEGIN names UCS-2 as the client's character set (a server
    refuses it as one; a crafted stream is the only way) is not a BEGIN to the parser, so it
    is not passed over: the read is the same as without the native pass."""
    require_native()
    path = corpus_dir / "rust_mysql_common" / "mysql-enum-string-set.000001"
    data = bytearray(file_bytes(path))
    pos, changed = 4, 0
    while pos < len(data):
        size = int.from_bytes(data[pos + 9 : pos + 13], "little")
        body = data[pos + 19 : pos + size - 4]
        if data[pos + 4] == 2 and body.endswith(b"BEGIN") and not changed:
            at = _charset_at(bytes(body[13 : 13 + int.from_bytes(body[11:13], "little")]))
            start = pos + 19 + 13 + at
            data[start : start + 2] = (35).to_bytes(2, "little")  # ucs2_general_ci
            data[pos + size - 4 : pos + size] = zlib.crc32(data[pos : pos + size - 4]).to_bytes(
                4, "little"
            )
            changed = pos
        pos += size
    assert changed
    path = corpus_dir.parent / "never-read" / path.name  # a name only
    raw, pos = [], 4
    while pos < len(data):
        size = int.from_bytes(data[pos + 9 : pos + 13], "little")
        raw.append(bytes(data[pos : pos + size]))
        pos += size
    stream = _dump_stream(raw)
    plain, end = scan_plain(stream, path.name)
    assert any(isinstance(e, ev.QueryEvent) and e.position == changed for e in plain)
    scan = scan_skipping(stream, 1 << 16, name=path.name)
    assert removed_transactions(plain, scan.events) == scan.skipped
    assert scan.position == end
    assert any(e.position == changed for e in scan.events)  # read, not passed over
