"""A DDL scan passes whole MariaDB transactions of rows over natively
(``DumpStreamDecoder.skip_row_transactions``): what it reads is the read of statements only
without those transactions, at the same positions; every byte of them is still checked; it
stops before a transaction the stream's end check must see (``skip_bounds``).
"""

from __future__ import annotations

import zlib
from typing import NamedTuple

import pytest

from replicator.binlog import events as ev
from replicator.binlog.constants import CHECKSUM_CRC32
from replicator.binlog.errors import DecodeError
from replicator.binlog.framing import END_OF_STREAM, _NeedData
from replicator.binlog.gtid import MariadbGtid, MariadbGtidPosition, MysqlGtidSet
from replicator.binlog.parser import spells_begin
from replicator.binlog.position import StreamPosition
from replicator.binlog.stream import DumpStreamDecoder
from replicator.binlog.transaction import TransactionAssembler
from replicator.source.stream_end import skip_bounds

from .test_native import require_native
from .test_stream import SAMPLE, _artificial_rotate, _dump_stream, _raw_events

_XA_OR_STANDALONE = 0x01 | 0x40 | 0x80


class Scan(NamedTuple):
    events: list[ev.Event]  # what the read delivered
    skipped: int  # transactions passed over
    mariadb: list[list[tuple[int, int, int]]]  # per pass over: the last GTID of each domain
    mysql: list[tuple[bytes, int, int]]  # the runs of MySQL GTIDs passed over
    position: int  # at the end


def scan_skipping(
    data: bytes,
    chunk: int,
    limit: int = 0,
    watch: tuple[tuple[int, int], ...] = (),
    budget: int = -1,
    name: str = "sample.000001",
) -> Scan:
    """A read of statements only as the stream reader does it: between transactions, the
    buffered transactions of rows are passed over."""
    decoder = DumpStreamDecoder(file=name, position=4, checksum_alg=CHECKSUM_CRC32)
    decoder.parser.statements_only = True
    assembler = TransactionAssembler()
    scan = Scan([], 0, [], [], 0)
    skipped = 0
    for i in range(0, len(data), chunk):
        decoder.feed(data[i : i + chunk])
        while True:
            if not assembler.in_transaction:
                passed, mariadb, mysql = decoder.skip_row_transactions(limit, watch, budget)
                skipped += passed
                budget = budget if budget < 0 else budget - sum(1 + b - a for _, a, b in mysql)
                scan.mariadb.extend([mariadb] if mariadb else [])
                scan.mysql.extend(mysql)
            item = decoder.next_event()
            if isinstance(item, _NeedData) or item is END_OF_STREAM:
                break
            assert isinstance(item, ev.Event)
            scan.events.append(item)
            assembler.feed(item)
    return scan._replace(skipped=skipped, position=decoder.parser.position)


def scan_plain(data: bytes, name: str = "sample.000001") -> tuple[list[ev.Event], int]:
    """The read of statements only, nothing passed over."""
    decoder = DumpStreamDecoder(file=name, position=4, checksum_alg=CHECKSUM_CRC32)
    decoder.parser.statements_only = True
    decoder.feed(data)
    got: list[ev.Event] = []
    while not isinstance(item := decoder.next_event(), _NeedData) and item is not END_OF_STREAM:
        assert isinstance(item, ev.Event)
        got.append(item)
    return got, decoder.parser.position


def _row_transaction_end(events: list[ev.Event], at: int) -> int | None:
    """Where the transaction of rows starting at ``events[at]`` ends (its rows and TABLE_MAP
    events are not in a read of statements only), or None if none starts there."""
    first = events[at]
    if isinstance(first, ev.MariadbGtidEvent):
        if int(first.flags) & _XA_OR_STANDALONE:
            return None
        at += 1
    elif isinstance(first, ev.MysqlGtidEvent) and first.header.type_code in (33, 34):
        begin = events[at + 1] if at + 1 < len(events) else None
        if not isinstance(begin, ev.QueryEvent) or begin.query != "BEGIN":
            return None
        at += 2
    else:
        return None
    while at < len(events) and isinstance(events[at], (ev.AnnotateRowsEvent, ev.RowsQueryEvent)):
        at += 1
    return at + 1 if at < len(events) and isinstance(events[at], ev.XidEvent) else None


def removed_transactions(plain: list[ev.Event], got: list[ev.Event]) -> int:
    """How many whole transactions of rows ``got`` lacks; fails if it differs from ``plain``
    in anything else."""
    i = j = removed = 0
    matched: list[tuple[ev.Event, ev.Event]] = []  # (read, plain) at the same place
    while i < len(plain):
        here = plain[i]
        if j < len(got) and (type(got[j]), got[j].position) == (type(here), here.position):
            matched.append((got[j], here))
            i, j = i + 1, j + 1
            continue
        end = _row_transaction_end(plain, i)
        assert end is not None, f"{type(here).__name__} at {here.position} is missing"
        i, removed = end, removed + 1
    assert j == len(got)
    assert [read for read, _ in matched] == [same for _, same in matched]
    return removed


def _sample_stream() -> bytes:
    events = [e for _, e in _raw_events(SAMPLE.read_bytes())]
    return _dump_stream([_artificial_rotate(b"sample.000001", 4), *events])


@pytest.mark.parametrize("chunk", [1, 13, 512, 1 << 20])
def test_a_scan_reads_the_same_less_whole_transactions_of_rows(chunk: int) -> None:
    require_native()
    stream = _sample_stream()
    plain, end = scan_plain(stream)
    scan = scan_skipping(stream, chunk)
    assert removed_transactions(plain, scan.events) == scan.skipped
    assert scan.position == end
    assert any(isinstance(e, ev.QueryEvent) for e in scan.events)  # the DDL is read as ever


def test_all_in_one_buffer_every_transaction_of_rows_is_passed_over() -> None:
    require_native()
    scan = scan_skipping(_sample_stream(), 1 << 20)
    assert scan.skipped == 4  # the sample's four transactions of rows
    assert not any(isinstance(e, ev.XidEvent) for e in scan.events)


def _retagged(event: bytes, log_pos: int, domain: int | None = None, seq: int = 0) -> bytes:
    """``event`` with a new log_pos (and, for a MariaDB GTID, domain and seq_no), its CRC32
    made again."""
    body = bytearray(event[:-4])
    body[13:17] = log_pos.to_bytes(4, "little")
    if domain is not None:
        body[19:27] = seq.to_bytes(8, "little")
        body[27:31] = domain.to_bytes(4, "little")
    return bytes(body) + zlib.crc32(body).to_bytes(4, "little")


def _row_transactions(gtids: list[tuple[int, int]]) -> tuple[bytes, list[int]]:
    """A dump stream of the sample's first transaction of rows once per (domain, seq_no),
    after the sample's FORMAT_DESCRIPTION; (stream, position after each transaction)."""
    events = [e for _, e in _raw_events(SAMPLE.read_bytes())]
    first = next(i for i, e in enumerate(events) if e[4] == 162 and events[i + 1][4] == 160)
    template = events[first : first + 5]  # GTID, ANNOTATE_ROWS, TABLE_MAP, WRITE_ROWS, XID
    assert [e[4] for e in template] == [162, 160, 19, 23, 16]
    out, ends, pos = [events[0]], [], 4 + len(events[0])
    for domain, seq in gtids:
        for n, event in enumerate(template):
            pos += len(event)
            out.append(_retagged(event, pos, *((domain, seq) if n == 0 else ())))
        ends.append(pos)
    return _dump_stream([_artificial_rotate(b"sample.000001", 4), *out]), ends


def test_the_last_gtid_of_each_domain_comes_back_in_order() -> None:
    require_native()
    stream, ends = _row_transactions([(0, 1), (1, 2), (0, 3), (2, 4), (1, 5)])
    scan = scan_skipping(stream, 1 << 20)
    assert scan.skipped == 5
    assert not any(isinstance(e, (ev.MariadbGtidEvent, ev.XidEvent)) for e in scan.events)
    assert scan.position == ends[-1]
    (gtids,) = scan.mariadb  # one pass over all five
    server_id = int.from_bytes(stream[4 + 1 + 5 : 4 + 1 + 9], "little")  # of the rotate: 1
    assert [(d, s) for d, _, s in gtids] == [(0, 3), (2, 4), (1, 5)]
    assert {sid for _, sid, _ in gtids} == {server_id}
    # the stream moves its GTID state over them as handing each over would
    start = StreamPosition("sample.000001", 4, MariadbGtidPosition(()), None)
    one_by_one, by_last = start, start
    for domain, seq in [(0, 1), (1, 2), (0, 3), (2, 4), (1, 5)]:
        one_by_one = one_by_one.after(MariadbGtid(domain, server_id, seq), "", 0)
    for domain, sid, seq in gtids:
        by_last = by_last.after(MariadbGtid(domain, sid, seq), "", 0)
    assert by_last.mariadb_gtid == one_by_one.mariadb_gtid


def test_it_stops_before_what_the_end_check_must_see() -> None:
    require_native()
    stream, ends = _row_transactions([(0, 1), (0, 2), (1, 3), (0, 4)])
    # a position: the transaction ending there is left to the reader, as are those after it
    scan = scan_skipping(stream, 1 << 20, limit=ends[1])
    assert scan.skipped == 1
    xid_ends = [e.next_position for e in scan.events if isinstance(e, ev.XidEvent)]
    assert xid_ends == ends[1:]
    # a GTID: the first transaction of the watched domain at or past its seq_no is read
    scan = scan_skipping(stream, 1 << 20, watch=((1, 3),))
    assert scan.skipped == 3
    read = [e.gtid for e in scan.events if isinstance(e, ev.MariadbGtidEvent)]
    assert read == [MariadbGtid(1, 1, 3)]


def test_skip_bounds_keep_the_end_check_exact() -> None:
    gtid = MariadbGtidPosition((MariadbGtid(0, 1, 9), MariadbGtid(2, 1, 4)))
    end = StreamPosition("mysql-bin.000007", 800, gtid, None)
    here = StreamPosition("mysql-bin.000007", 4, MariadbGtidPosition(()), None)
    assert skip_bounds(None, "mysql-bin.000007", here) == (0, (), -1)
    assert skip_bounds(end, "mysql-bin.000007", here) == (800, ((0, 9), (2, 4)), -1)
    assert skip_bounds(end, "mysql-bin.000006", here)[0] == 0  # a rotate comes before the end
    assert skip_bounds(end, "mysql-bin.000008", here)[0] == 1  # past it: nothing passed over
    assert skip_bounds(StreamPosition("", 0, gtid, None), "mysql-bin.000007", here)[0] == 0
    at_zero = StreamPosition("mysql-bin.000007", 0, None, None)
    assert skip_bounds(at_zero, "mysql-bin.000007", here) == (1, (), -1)
    # MySQL: fewer GTIDs than the set lacks of the end's cannot make it cover the end
    uid = "3E11FA47-71CA-11E1-9E33-C80AA9429562"
    mysql_end = StreamPosition("", 0, None, MysqlGtidSet.parse(f"{uid}:1-100:200-209"))
    mysql_here = StreamPosition("mysql-bin.000007", 4, None, MysqlGtidSet.parse(f"{uid}:1-95"))
    assert skip_bounds(mysql_end, "mysql-bin.000007", mysql_here)[2] == 5 + 10 - 1
    covered = StreamPosition("mysql-bin.000007", 4, None, mysql_end.mysql_gtid)
    assert skip_bounds(mysql_end, "mysql-bin.000007", covered)[2] == 0


def test_the_bounds_pass_nothing_over_once_the_end_is_covered() -> None:
    """A start given as file and position learns its GTID set later: once the set covers the
    end, the next transaction ends the stream, anonymous or not (none may be passed over)."""
    uid = "3E11FA47-71CA-11E1-9E33-C80AA9429562"
    end = StreamPosition("", 0, None, MysqlGtidSet.parse(f"{uid}:1-5"))
    here = StreamPosition("mysql-bin.000007", 4, None, MysqlGtidSet.parse(f"{uid}:1-9"))
    assert skip_bounds(end, "mysql-bin.000007", here) == (1, (), 0)
    mariadb = MariadbGtidPosition((MariadbGtid(0, 1, 9),))
    covered = StreamPosition("mysql-bin.000007", 4, mariadb, None)
    assert skip_bounds(StreamPosition("", 0, mariadb, None), "mysql-bin.000007", covered)[0] == 1


def test_more_watched_domains_than_the_core_holds_pass_nothing_over() -> None:
    require_native()
    stream, _ = _row_transactions([(0, 1), (0, 2)])
    watch = tuple((domain, 10**6) for domain in range(100, 165))  # 65 domains, none in use
    assert scan_skipping(stream, 1 << 20, watch=watch).skipped == 0
    assert scan_skipping(stream, 1 << 20, watch=watch[:64]).skipped == 2


def test_a_begin_is_one_only_in_a_character_set_that_reads_ascii() -> None:
    """The parser decodes a statement in the client's character set: in UCS-2 the bytes
    BEGIN are no BEGIN, so a transaction opened by them is not one of rows."""
    utf8mb4, ucs2 = 45, 35
    charset = (4).to_bytes(1, "little")  # Q_CHARSET_CODE: client, connection, server
    assert spells_begin(charset + bytes.fromhex("2d002d002d00"))
    assert spells_begin(b"")  # no character set named: the parser reads UTF-8
    assert not spells_begin(charset + ucs2.to_bytes(2, "little") + bytes(4))
    assert spells_begin(charset + utf8mb4.to_bytes(2, "little") + bytes(4))


def test_every_byte_of_a_passed_over_transaction_is_checked() -> None:
    """A flipped byte anywhere in the transactions of rows (header, body or CRC32 of any of
    their events, or their packets' headers) is still a DecodeError, not a silent skip."""
    require_native()
    stream, ends = _row_transactions([(0, 1), (0, 2), (0, 3)])
    prefix = len(_dump_stream([_artificial_rotate(b"sample.000001", 4)])) - 9
    missed = []
    for offset in range(prefix, len(stream) - 9, 3):
        corrupted = bytearray(stream)
        corrupted[offset] ^= 0x5A
        try:
            scan_skipping(bytes(corrupted), 1 << 20)
        except DecodeError:
            continue
        missed.append(offset)
    assert missed == []
    assert ends  # the stream holds the transactions flipped above
