"""Runs: many small transactions of rows taken from the dump stream at once.

Most transactions of an OLTP source change a row or a few: GTID, TABLE_MAP, one rows event,
XID. Read one event at a time, each costs several Python objects per event and per
transaction in the reader, the hand-over and the pipeline, far more than decoding its row.
Between transactions, ``DumpStreamDecoder.take_run`` hands the buffered packets to the native
core (``_rowcore_c/runs.c``), which walks the whole transactions of rows only (every event
framed and CRC32-checked as ever), decodes their row images into blocks, consecutive rows
events of one table and kind into one block, and gives for each rows event what the landing
zone's metadata columns take from it (``RowOrigins``). The result, a ``TakenRun``, is closed
by the transaction the parser reads next, the usual way (``TakenRun.closed_by``): a
``TransactionRun`` is delivered whole, and the pipeline takes its last transaction as any
other (a batch may end there; its proof is of that transaction).

A transaction is taken only in the forms the core knows whole: MariaDB GTID (not standalone,
not XA) or MySQL GTID/ANONYMOUS_GTID and BEGIN, annotations, TABLE_MAP events the parser has
decoded before under the same schema (``EventParser.run_tables``), WRITE/UPDATE/DELETE_ROWS
(v1 or v2, not compressed, not partial JSON) with every column in the image, then XID, with
fewer row image bytes than ``part_rows`` (so never one the parser would hand out in parts).
Anything else ends the run before it and is read by the parser, which raises the exact error
for a bad event.
"""

from __future__ import annotations

import bisect
import struct
from array import array
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple
from uuid import UUID

from ..errors import InternalError
from . import events as ev
from .block import Block
from .framing import GnoRun, Gtid3
from .records import record
from .transaction import Transaction

if TYPE_CHECKING:
    from .rows import TableDecoder

__all__ = ["RowOrigins", "RunSegment", "TakenRun", "TransactionRun"]

RunTable = tuple["ev.TableMapEvent", "TableDecoder"]  # the parser's table map entry


@record
class RowOrigins:
    """Where each rows event of a segment came from, as Arrow buffers (one value per event,
    little-endian): where its rows end in the segment (int32), its position, its server id,
    its transaction's commit time (int64; microseconds since the epoch, UTC) and GTID (text:
    int32 offsets, the bytes, a validity bitmap when some are null)."""

    ends: bytes
    positions: bytes
    server_ids: bytes
    timestamps: bytes
    gtid_validity: bytes | None
    gtid_nulls: int
    gtid_offsets: bytes
    gtid_text: bytes

    @property
    def events(self) -> int:
        return len(self.ends) // 4

    def event_of(self, row: int) -> int:
        """The event that holds row ``row``."""
        return bisect.bisect_right(array("i", self.ends), row)

    def position_of(self, row: int) -> int:
        return array("q", self.positions)[self.event_of(row)]

    def gtid(self, event: int) -> str | None:
        """The GTID text of event ``event``."""
        validity = self.gtid_validity
        if validity is not None and not validity[event >> 3] >> (event & 7) & 1:
            return None
        offsets = array("i", self.gtid_offsets)
        return self.gtid_text[offsets[event] : offsets[event + 1]].decode("ascii")

    def slice(self, start: int, stop: int) -> RowOrigins:
        """The origins of rows ``start`` to ``stop`` (a block too large to convert at once is
        halved, and its origins with it)."""
        ends = array("i", self.ends)
        first = bisect.bisect_right(ends, start)
        last = bisect.bisect_left(ends, stop) + 1  # past the event that holds row stop - 1
        cut = array("i", (min(end, stop) - start for end in ends[first:last]))
        offsets = array("i", self.gtid_offsets)[first : last + 1]
        text = self.gtid_text[offsets[0] : offsets[-1]]
        shifted = array("i", (o - offsets[0] for o in offsets))
        validity, nulls = None, 0
        if self.gtid_validity is not None:
            bits = [self.gtid_validity[i >> 3] >> (i & 7) & 1 for i in range(first, last)]
            nulls = bits.count(0)
            if nulls:
                packed = bytearray((len(bits) + 7) // 8)
                for i, bit in enumerate(bits):
                    packed[i >> 3] |= bit << (i & 7)
                validity = bytes(packed)
        return RowOrigins(
            cut.tobytes(),
            self.positions[first * 8 : last * 8],
            self.server_ids[first * 8 : last * 8],
            self.timestamps[first * 8 : last * 8],
            validity,
            nulls,
            shifted.tobytes(),
            text,
        )


class TxnRecord(NamedTuple):
    """A transaction a run took (``_rowcore_c/runs.c``, TxnRecord): where its rows and rows
    events end among the run's (counted in stream order), where it starts and ends, its commit
    time (microseconds, UTC) and its XID's header time, and its GTID: MariaDB (domain, server
    id, seq_no), MySQL (uuid, gno), or none (an ANONYMOUS_GTID)."""

    rows_end: int
    events_end: int
    start: int
    end: int
    timestamp: int
    xid_timestamp: int
    gtid_type: int
    domain: int
    server_id: int
    pad: int
    number: int
    sid: bytes

    @property
    def gtid(self) -> str | None:
        """The GTID as ``Transaction.gtid`` gives it."""
        if self.gtid_type == _MARIADB_GTID:
            return f"{self.domain}-{self.server_id}-{self.number}"
        if self.gtid_type == _MYSQL_GTID:
            return f"{UUID(bytes=self.sid)}:{self.number}"
        return None


_TXN = struct.Struct("<6qi3IQ16s")
_MARIADB_GTID, _MYSQL_GTID = 162, 33


def _cut_segment(segment: RunSegment, rows: int) -> tuple[RunSegment, RunSegment]:
    """A segment as two at row ``rows`` (an event's first row); the second one's first event
    gives its values."""
    origins = segment.origins
    assert origins is not None  # several events: their origins are kept
    event = origins.event_of(rows)
    count = segment.block.count
    first = RunSegment(
        segment.table,
        segment.kind,
        segment.block.slice(0, rows),
        event,
        segment.gtid,
        segment.timestamp,
        segment.server_id,
        segment.file,
        segment.position,
        origins.slice(0, rows),
    )
    rest_origins = origins.slice(rows, count)
    second = RunSegment(
        segment.table,
        segment.kind,
        segment.block.slice(rows, count),
        segment.events - event,
        rest_origins.gtid(0),
        array("q", rest_origins.timestamps)[0],
        array("q", rest_origins.server_ids)[0],
        segment.file,
        array("q", rest_origins.positions)[0],
        rest_origins,
    )
    return first, second


@record
class RunSegment:
    """Consecutive rows events of one table map and kind, from one or more transactions of a
    run: their rows as one block, the first event's origins as values and, when there are
    more events, every event's (``origins``)."""

    table: ev.TableMapEvent  # as the parser decoded it (an earlier event of the same bytes)
    kind: ev.RowsKind
    block: Block
    events: int
    gtid: str | None  # the first event's
    timestamp: int  # commit time of the first event's transaction, microseconds (UTC)
    server_id: int
    file: str
    position: int  # of the first event
    origins: RowOrigins | None


@record
class TakenRun:
    """Transactions the native core took between two transactions, waiting for the one the
    parser reads next to close them (``closed_by``).

    Besides their rows (``segments``, in stream order) it keeps what ending a batch after any
    one of them takes (``split``): a record of each transaction (``records``: ``_TXN``), and
    the row images of every rows event (``images``, ``image_ends``), which that transaction's
    proof hashes (``rows_of``)."""

    transactions: int
    segments: tuple[RunSegment, ...]
    mariadb: tuple[Gtid3, ...]  # the last GTID of each domain, in the order of those
    mysql: tuple[GnoRun, ...]  # the MySQL GTIDs, as runs
    file: str
    position: int  # where the first transaction starts
    end_position: int  # where the last one ends
    nbytes: int  # binlog bytes the transactions span
    counts: tuple[tuple[int, int], ...]  # (event type, events)
    records: bytes
    images: bytes
    image_ends: bytes  # int64 per rows event

    @property
    def row_count(self) -> int:
        return sum(s.block.count for s in self.segments)

    def record(self, index: int) -> TxnRecord:
        """The record of transaction ``index`` (0-based)."""
        return TxnRecord(*_TXN.unpack_from(self.records, index * _TXN.size))

    def gtids_before(self, stop: int) -> tuple[tuple[Gtid3, ...], tuple[GnoRun, ...]]:
        """The GTIDs of transactions ``0`` to ``stop - 1`` as ``mariadb`` and ``mysql``
        hold those of them all."""
        last: dict[int, Gtid3] = {}
        runs: list[GnoRun] = []
        for index in range(stop):
            found = self.record(index)
            if found.gtid_type == _MARIADB_GTID:
                last.pop(found.domain, None)  # moved to the end: the order of the last ones
                last[found.domain] = (found.domain, found.server_id, found.number)
            elif found.gtid_type == _MYSQL_GTID:
                if runs and runs[-1][0] == found.sid and runs[-1][2] + 1 == found.number:
                    runs[-1] = (found.sid, runs[-1][1], found.number)
                else:
                    runs.append((found.sid, found.number, found.number))
        return tuple(last.values()), tuple(runs)

    def rows_of(self, index: int) -> list[tuple[str, str, bytes]]:
        """The rows events of transaction ``index`` as its proof hashes them: (kind,
        ``db.table``, row images), in order."""
        first = self.record(index - 1).events_end if index else 0
        stop = self.record(index).events_end
        ends = array("q", self.image_ends)
        out: list[tuple[str, str, bytes]] = []
        event = 0
        for segment in self.segments:
            for _ in range(segment.events):
                if first <= event < stop:
                    start = ends[event - 1] if event else 0
                    table = f"{segment.table.schema}.{segment.table.table}"
                    out.append((segment.kind.value, table, self.images[start : ends[event]]))
                event += 1
        return out

    def split(self, index: int) -> tuple[TakenRun, TakenRun]:
        """The run as two: transactions ``0`` to ``index``, and the rest."""
        cut = self.record(index)
        rows, events = cut.rows_end, cut.events_end
        head: list[RunSegment] = []
        tail: list[RunSegment] = []
        start = 0
        for segment in self.segments:
            count = segment.block.count
            if start + count <= rows:
                head.append(segment)
            elif start >= rows:
                tail.append(segment)
            else:  # transactions on both sides: only a segment of several events
                first, rest = _cut_segment(segment, rows - start)
                head.append(first)
                tail.append(rest)
            start += count
        ends = array("q", self.image_ends)
        image_cut = ends[events - 1] if events else 0
        rest_ends = array("q", (end - image_cut for end in ends[events:]))
        records = [
            _TXN.pack(
                *found._replace(
                    rows_end=found.rows_end - rows, events_end=found.events_end - events
                )
            )
            for found in (self.record(i) for i in range(index + 1, self.transactions))
        ]
        mariadb, mysql = self.gtids_before(index + 1)
        taken = cut.end - self.position
        return (
            TakenRun(
                index + 1,
                tuple(head),
                mariadb,
                mysql,
                self.file,
                self.position,
                cut.end,
                taken,
                self.counts,
                self.records[: (index + 1) * _TXN.size],
                self.images[:image_cut],
                ends[:events].tobytes(),
            ),
            TakenRun(
                self.transactions - index - 1,
                tuple(tail),
                self.mariadb,  # what they all had: the same after the head's
                self.mysql,
                self.file,
                cut.end,
                self.end_position,
                self.nbytes - taken,
                (),
                b"".join(records),
                self.images[image_cut:],
                rest_ends.tobytes(),
            ),
        )

    def closed_by(self, last: object) -> TransactionRun:
        """The run, with the transaction the parser read right after it (by construction the
        next item: ``DumpStreamDecoder.take_run`` leaves one whole transaction of rows)."""
        if not isinstance(last, Transaction):
            raise InternalError(f"a run was followed by {type(last).__name__}, not a transaction")
        return TransactionRun(self, last)

    def unclosed(self) -> TransactionRun:
        """The run alone: the transaction after it did not read (its error follows the run,
        so the run's whole transactions land before the stop, as without runs)."""
        return TransactionRun(self, None)


@record
class TransactionRun:
    """Whole transactions of rows, in stream order: those the native core took (``taken``),
    then ``last``, read by the parser (None only right before the error that stops the
    stream: ``TakenRun.unclosed``). Delivered whole, never split."""

    taken: TakenRun
    last: Transaction | None

    @property
    def transactions(self) -> int:
        return self.taken.transactions + (self.last is not None)

    @property
    def row_count(self) -> int:
        return self.taken.row_count + (0 if self.last is None else self.last.row_count)

    @property
    def row_bytes(self) -> int:
        """The binlog bytes its transactions span (the events of the last one's rows)."""
        return self.taken.nbytes + (0 if self.last is None else self.last.row_bytes)


_KINDS = {
    23: ev.RowsKind.INSERT,
    30: ev.RowsKind.INSERT,
    24: ev.RowsKind.UPDATE,
    31: ev.RowsKind.UPDATE,
    25: ev.RowsKind.DELETE,
    32: ev.RowsKind.DELETE,
}

# what the core gives for a segment (runs.c, segment_result)
RawSegment = tuple[
    RunTable, int, int, tuple[object, ...], tuple[object, ...] | None, int, str | None, int, int,
    int, tuple[bytes, bytes, bytes, bytes, bytes | None, int, bytes, bytes] | None,
]  # fmt: skip


def segments_of(raw: Sequence[RawSegment], file: str) -> tuple[RunSegment, ...]:
    """The core's segments as ``RunSegment``s of binlog file ``file``."""
    out: list[RunSegment] = []
    for token, code, rows, columns, after, events, gtid, ts, server_id, position, origins in raw:
        table, decoder = token
        block = Block(rows, columns, after, decoder.natives)  # type: ignore[arg-type]
        out.append(
            RunSegment(
                table,
                _KINDS[code],
                block,
                events,
                gtid,
                ts,
                server_id,
                file,
                position,
                None if origins is None else RowOrigins(*origins),
            )
        )
    return tuple(out)
