"""Sans-I/O event sources: a binlog file's bytes, or a replication dump stream's bytes.

Both follow the same shape (h11's): ``feed(data)`` with whatever chunk arrived, then call
``next_event()`` until it returns ``NEED_DATA``. The I/O layer around them is a short loop.
"""

from __future__ import annotations

import binascii
import functools
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from . import native
from .constants import CHECKSUM_CRC32, EventType
from .errors import DecodeError
from .events import Event
from .framing import (
    END_OF_STREAM,
    MAX_PACKET,
    NEED_DATA,
    EndOfStream,
    FileFramer,
    GnoRun,
    Gtid3,
    PacketFramer,
    _NeedData,
    classify_dump_payload,
)
from .parser import (
    ROW_TRANSACTION_INSIDE,
    STATEMENTS_SPLIT_STOP,
    STEPPED_OVER,
    EventParser,
    spells_begin,
)
from .runs import TakenRun, segments_of
from .tablemap import SchemaLookup

__all__ = ["END_OF_STREAM", "NEED_DATA", "BinlogFileDecoder", "DumpStreamDecoder"]


class BinlogFileDecoder:
    """Events of one binlog file, from its first byte."""

    def __init__(
        self,
        file: str,
        *,
        schema_lookup: SchemaLookup | None = None,
        verify_checksum: bool = True,
    ) -> None:
        self.framer = FileFramer(file)
        self.parser = EventParser(
            file=file, schema_lookup=schema_lookup, verify_checksum=verify_checksum
        )
        self._file = file
        self._ready: deque[tuple[int, bytes]] = deque()  # framed and checked, not parsed yet

    def feed(self, data: bytes | memoryview) -> None:
        self.framer.feed(data)

    def next_event(self) -> Event | _NeedData:
        ready = self._ready
        if not ready:
            self._split_natively()
        if ready:
            offset, raw = ready.popleft()
            verified = True
        else:
            item = self.framer.next_event()
            if isinstance(item, _NeedData):
                return item
            offset, raw = item
            verified = False
        # Keep the file name this decoder was opened on: a ROTATE at the end of a file names
        # the next file, but positions in this file still belong to this one.
        self.parser.file = self._file
        return self.parser.parse(raw, position=offset, verified=verified)

    def _split_natively(self) -> None:
        """Frame the whole events buffered here in C, checking each one's CRC32 as the parser
        would, into ``_ready``. Anything else (the file's start, a FORMAT_DESCRIPTION, an event
        not whole yet or too short, a checksum that does not match) is left to the framer and
        parser, which raise the exact error."""
        parser = self.parser
        split = _native("split_file_events")
        if split is None or parser.checksum_alg is None:
            return
        crc = binascii.crc32 if parser.verifies_crc32 else None
        self._ready.extend(self.framer.split_events(split, crc))

    def finish(self) -> None:
        """Call once the whole file was fed; raises if it ended inside an event."""
        self.framer.finish()


class DumpStreamDecoder:
    """Events from a COM_BINLOG_DUMP / COM_BINLOG_DUMP_GTID response stream.

    ``checksum_alg`` is what the replica announced with ``@master_binlog_checksum``: the
    server then checksums every event it sends, including the artificial ROTATE that comes
    before the first FORMAT_DESCRIPTION."""

    def __init__(
        self,
        *,
        file: str = "",
        position: int = 4,
        checksum_alg: int = CHECKSUM_CRC32,
        schema_lookup: SchemaLookup | None = None,
        verify_checksum: bool = True,
        next_sequence: int = 1,
    ) -> None:
        self.framer = PacketFramer(next_sequence=next_sequence)
        self.parser = EventParser(
            file=file,
            position=position,
            checksum_alg=checksum_alg,
            schema_lookup=schema_lookup,
            verify_checksum=verify_checksum,
        )
        self._ready: deque[bytes] = deque()  # events framed and checked, not parsed yet
        # True: a reader that takes runs (``take_run``) between transactions: events are split
        # natively one transaction at a time (up to the next GTID), so that ``_ready`` is
        # empty at each transaction's end, where a run may start
        self.runs = False

    def feed(self, data: bytes | memoryview) -> None:
        """Bytes as they arrived; copied at once, so a reused receive buffer is fine."""
        self.framer.feed(data)

    def next_event(self) -> Event | _NeedData | EndOfStream:
        parser = self.parser
        ready = self._ready
        if ready:  # framed and checked natively (see _split_natively)
            return parser.parse(ready.popleft(), verified=True)
        if parser.statements_only:  # a read of statements only passes over rows
            self._step_natively()
        if self._split_natively():
            return parser.parse(ready.popleft(), verified=True)
        while True:
            if self._check_packet_length():
                # an event packet (0x00, then the event): take the event without the marker
                raw = self.framer.next_payload(skip=1)
                if isinstance(raw, _NeedData):
                    return raw
            else:  # EOF, ERR, or the rest of an event over 16 MiB
                payload = self.framer.next_payload()
                if isinstance(payload, _NeedData):
                    return payload
                found = classify_dump_payload(payload)
                if isinstance(found, EndOfStream):
                    return found
                raw = found
            if not parser.steps_over(raw):
                return parser.parse(raw)
            # a read of statements only passed over that one: the rows events after it too
            self._step_natively()

    def _split_natively(self) -> bool:
        """Frame the whole event packets buffered here in C, checking each as the framer
        and the parser would (sequence, marker, length, CRC32), into ``_ready``; True when
        there are some. Anything else (a FORMAT_DESCRIPTION, an EOF or ERR packet, an event
        over 16 MiB, a bad packet or checksum) is left to the framer and parser. A read of
        statements only stops at the next rows or TABLE_MAP event, for ``_step_natively``."""
        parser = self.parser
        split = _native("split_events")
        if split is None or parser.checksum_alg is None:
            return False
        crc = binascii.crc32 if parser.verifies_crc32 else None
        if self.runs and not parser.statements_only:
            events = self.framer.split_events(split, crc, _GTIDS, True)
        elif not parser.statements_only:
            events = self.framer.split_events(split, crc)
        else:  # up to the next rows or TABLE_MAP event, which _step_natively passes over, or
            # the next GTID, where skip_row_transactions may pass a whole transaction over
            events = self.framer.split_events(split, crc, STATEMENTS_SPLIT_STOP)
        self._ready.extend(events)
        return bool(self._ready)

    def _step_natively(self) -> None:
        """Pass over the rows and TABLE_MAP events buffered here in C (checked as
        ``EventParser.steps_over`` checks them), when the native core is there."""
        parser = self.parser
        step = _native("step_events")
        if step is None or parser.checksum_alg is None:
            return
        crc = binascii.crc32 if parser.verifies_crc32 else None
        parser.position, stepped = self.framer.step_events(step, parser.position, STEPPED_OVER, crc)
        parser.events_decoded += stepped

    def skip_row_transactions(
        self, limit: int, watch: Sequence[tuple[int, int]], budget: int
    ) -> tuple[int, list[Gtid3], list[GnoRun]]:
        """In a read of statements only, between two transactions: pass over the whole
        transactions of rows buffered here (MariaDB: GTID, ANNOTATE_ROWS, TABLE_MAP, rows,
        XID; MySQL: GTID, BEGIN, ROWS_QUERY, TABLE_MAP, rows, XID), natively and in one go,
        each event framed and CRC32-checked as ever. Such a read has nothing to deliver from
        them; the per-transaction work in Python was most of a DDL scan's time on a binlog of
        small transactions.

        Stops before a transaction that the stream's end check must see: one ending at or
        past ``limit`` in this file (0: no limit), one whose MariaDB GTID is in a domain of
        ``watch`` at or past that (domain, seq_no), or a MySQL GTID beyond the first
        ``budget`` (-1: no limit); see ``stream_end.skip_bounds``. Returns (transactions
        passed over, the last MariaDB GTID of each domain among them in the order of those
        last ones, their MySQL GTIDs as runs); (0, [], []) without the native core, without
        CRC32 checks, or with events already split here."""
        parser = self.parser
        skip = _native("skip_transactions")
        if skip is None or self._ready or not parser.statements_only or not parser.verifies_crc32:
            return 0, [], []
        parser.position, events, transactions, mariadb, mysql = self.framer.skip_transactions(
            skip,
            parser.position,
            limit,
            ROW_TRANSACTION_INSIDE,
            watch,
            budget,
            parser.post_header_length(EventType.QUERY, 13),
            spells_begin,
            binascii.crc32,
        )
        parser.events_decoded += events
        return transactions, mariadb, mysql

    def take_run(
        self,
        limit: int,
        watch: Sequence[tuple[int, int]],
        budget: int,
        *,
        max_images: int,
        max_bytes: int,
    ) -> TakenRun | None:
        """Between transactions: the whole transactions of rows buffered here, taken natively
        into a run (``runs``; their events framed and CRC32-checked as ever), up to about
        ``max_bytes`` of events, each with fewer than ``max_images`` bytes of row images. The
        transaction after them is left for ``next_event``: it closes the run
        (``TakenRun.closed_by``). ``limit``, ``watch`` and ``budget`` bound it as they bound
        ``skip_row_transactions``. None when nothing was taken: without the native core or
        CRC32 checks, in a read of statements only or of values only, with events already
        split here, or before the table maps are known."""
        parser = self.parser
        take = _native("take_transactions")
        if (
            take is None
            or self._ready
            or parser.statements_only
            or not parser.buffers
            or not parser.verifies_crc32
            or not parser.runs_ready()
        ):
            return None
        start = parser.position
        position, transactions, nbytes, mariadb, mysql, raw, mapped, counts, kept = (
            self.framer.take_transactions(
                take,
                start,
                limit,
                watch,
                budget,
                parser.post_headers(),
                spells_begin,
                binascii.crc32,
                parser.run_tables,
                max_images,
                max_bytes,
            )
        )
        if not transactions:
            return None
        parser.position = position
        parser.events_decoded += sum(count for _, count in counts)
        parser.tables.update(mapped)
        return TakenRun(
            transactions,
            segments_of(raw, parser.file),
            tuple(mariadb),
            tuple(mysql),
            parser.file,
            start,
            position,
            nbytes,
            tuple(counts),
            *kept,
        )

    def _check_packet_length(self) -> bool:
        """Cross-check a new packet's length with the event size inside it; True when the
        next payload is an event whose length checks out (its marker byte is 0x00).

        A dump packet holding an event is 0x00 then the event, so its length is
        ``event_size + 1`` (or 0xFFFFFF when the event continues in further packets). The
        packet length is the one field no checksum covers: checking it as soon as the event
        header is in means a corrupted length is caught at once, instead of the framer
        waiting for bytes that will never form the packet it announced.
        """
        framer = self.framer
        if framer.continuing:
            return False
        head = framer.peek(4 + 1 + 13)
        if len(head) < 4 + 1 + 13 or head[4] != 0x00:
            return False
        length = int.from_bytes(head[0:3], "little")
        event_size = int.from_bytes(head[4 + 1 + 9 : 4 + 1 + 13], "little")
        expected = min(event_size + 1, MAX_PACKET)
        if length != expected:
            raise DecodeError(
                f"packet of {length} bytes holds an event of {event_size} bytes",
                file=self.parser.file,
                position=self.parser.position,
                hint="the connection corrupted the stream; reconnect",
            )
        return True


# where a reader taking runs stops splitting: before the next transaction's GTID
_T = EventType
_GTIDS = bytes(
    code in (_T.MARIADB_GTID, _T.GTID, _T.ANONYMOUS_GTID, _T.GTID_TAGGED) for code in range(256)
)


@functools.cache
def _native(name: str) -> Callable[..., Any] | None:
    """The native core's function ``name``, or None without the core."""
    return getattr(native.core(), name) if native.available() else None
