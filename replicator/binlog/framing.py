"""Split byte streams into whole events: binlog files on disk and the replication protocol.

* Files: 4 magic bytes ``\\xfebin`` then events back to back, each sized by its header
  (``event_size`` at offset 9 of the v4 header; mysql-server ``binlog_event.h``).
* Network: MySQL packets (3-byte length, 1-byte sequence id; ``sql-common/net_serv.cc``
  ``my_net_read``). A payload of exactly 0xFFFFFF bytes continues in the next packet, so
  events over 16 MiB arrive split. Each dump-stream payload starts with 0x00 followed by one
  event, or is an EOF (0xFE, short) or ERR (0xFF) packet (``sql/rpl_binlog_sender.cc``).

Both framers are sans-I/O: ``feed()`` bytes in any chunking, then call ``next_*()`` until it
returns ``NEED_DATA``. Fed bytes are copied once into the framer's buffer (a memoryview over a
reused receive buffer is fine) and once out of it, as each whole event.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from .constants import BINLOG_MAGIC, EVENT_HEADER_SIZE
from .errors import DecodeError, ServerError, TruncatedError

# a MariaDB GTID as the native core gives it: (domain_id, server_id, seq_no)
Gtid3 = tuple[int, int, int]
# consecutive MySQL GTIDs of one source as the native core gives them: (uuid, first, last gno)
GnoRun = tuple[bytes, int, int]
# what the native skip_transactions returns
Skipped = tuple[int, int, int, int, int, list[Gtid3], list[GnoRun]]
# what the native take_transactions returns (runs)
Taken = tuple[
    int, int, int, int, int, list[Gtid3], list[GnoRun], list[Any], list[Any], list[Any],
    tuple[bytes, bytes, bytes],
]  # fmt: skip


class _NeedData:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA: Final = _NeedData()
MAX_PACKET = 0xFFFFFF


class _Buffer:
    """A growable byte buffer with a read cursor; consumed bytes are dropped in bulk."""

    __slots__ = ("_buf", "_start")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._start = 0

    def feed(self, data: bytes | memoryview) -> None:
        if self._start and self._start >= len(self._buf) // 2:
            del self._buf[: self._start]
            self._start = 0
        self._buf += data

    def __len__(self) -> int:
        return len(self._buf) - self._start

    def peek(self, offset: int, length: int) -> bytes:
        start = self._start + offset
        return bytes(self._buf[start : start + length])

    def take(self, length: int) -> bytes:
        start = self._start
        with memoryview(self._buf) as view:  # one copy (a bytearray slice would be two)
            out = bytes(view[start : start + length])
        self._start = start + length
        return out

    def skip(self, length: int) -> None:
        self._start += length


class FileFramer:
    """Cuts a binlog file's bytes into ``(offset, event bytes)``."""

    def __init__(self, file: str = "", *, start_offset: int = 0) -> None:
        self.file = file
        self._buffer = _Buffer()
        # A file read from the start begins with the magic; a caller resuming mid-file passes
        # the offset it seeked to and no magic is expected.
        self._offset = start_offset
        self._magic_pending = start_offset == 0

    @property
    def offset(self) -> int:
        """File offset of the next event to be returned."""
        return self._offset

    def feed(self, data: bytes | memoryview) -> None:
        self._buffer.feed(data)

    def next_event(self) -> tuple[int, bytes] | _NeedData:
        buf = self._buffer
        if self._magic_pending:
            if len(buf) < len(BINLOG_MAGIC):
                return NEED_DATA
            magic = buf.take(len(BINLOG_MAGIC))
            if magic != BINLOG_MAGIC:
                raise DecodeError(
                    f"not a binary log: file starts with {magic.hex()} instead of fe62696e",
                    file=self.file,
                    position=0,
                    hint="pass a MySQL/MariaDB binlog file (mysql-bin.NNNNNN)",
                )
            self._magic_pending = False
            self._offset = len(BINLOG_MAGIC)
        if len(buf) < EVENT_HEADER_SIZE:
            return NEED_DATA
        size = int.from_bytes(buf.peek(9, 4), "little")
        if size < EVENT_HEADER_SIZE:
            raise DecodeError(
                f"event size {size} is smaller than the event header",
                file=self.file,
                position=self._offset,
            )
        if len(buf) < size:
            return NEED_DATA
        offset = self._offset
        self._offset += size
        return offset, buf.take(size)

    def split_events(
        self, split: Callable[..., tuple[int, list[bytes]]], *args: object
    ) -> list[tuple[int, bytes]]:
        """Take the whole events buffered with the native ``split_file_events`` (which checks
        each one and stops before anything unusual): ``(offset, event bytes)`` in order."""
        if self._magic_pending:
            return []
        buf = self._buffer
        buf._start, events = split(buf._buf, buf._start, *args)
        out = []
        offset = self._offset
        for raw in events:
            out.append((offset, raw))
            offset += len(raw)
        self._offset = offset
        return out

    def finish(self) -> None:
        """Call at end of input: leftover bytes mean the last event is cut short."""
        if self._magic_pending and len(self._buffer) == 0:
            raise DecodeError("empty file is not a binary log", file=self.file, position=0)
        if len(self._buffer):
            raise TruncatedError(
                f"file ends inside an event ({len(self._buffer)} bytes of a partial event)",
                file=self.file,
                position=self._offset,
                hint="the file is truncated or still being written; read it again later",
            )


@dataclass(frozen=True, slots=True)
class EndOfStream:
    """The server's EOF packet: it has no more events (non-blocking dump) or is shutting down."""


END_OF_STREAM: Final = EndOfStream()


class PacketFramer:
    """Reassembles protocol packets into payloads, joining 16 MiB continuations.

    Sequence ids must increase by one modulo 256; a gap means lost or corrupted bytes.
    """

    def __init__(self, *, next_sequence: int = 1) -> None:
        self._buffer = _Buffer()
        self._sequence = next_sequence
        self._parts: list[bytes] = []
        self.bytes_received = 0

    def feed(self, data: bytes | memoryview) -> None:
        self.bytes_received += len(data)
        self._buffer.feed(data)

    @property
    def buffered(self) -> int:
        return len(self._buffer) + sum(len(p) for p in self._parts)

    @property
    def continuing(self) -> bool:
        """True while the next packet continues a payload of 0xFFFFFF-byte packets."""
        return bool(self._parts)

    def peek(self, length: int) -> bytes:
        """The first ``length`` buffered bytes (fewer if not yet received), not consumed."""
        return self._buffer.peek(0, min(length, len(self._buffer)))

    def step_events(
        self, step: Callable[..., tuple[int, int, int, int]], position: int, *args: object
    ) -> tuple[int, int]:
        """Pass over whole event packets with the native ``step_events`` (which checks each
        one and stops before anything unusual); (position after them, events passed over)."""
        if self._parts:
            return position, 0
        buf = self._buffer
        offset, self._sequence, position, stepped = step(
            buf._buf, buf._start, self._sequence, position, *args
        )
        buf._start = offset
        return position, stepped

    def skip_transactions(
        self, skip: Callable[..., Skipped], position: int, *args: object
    ) -> tuple[int, int, int, list[Gtid3], list[GnoRun]]:
        """Pass over whole transactions with the native ``skip_transactions`` (which checks
        each event and stops before anything unusual); (position after them, events and
        transactions passed over, the last MariaDB GTID of each domain among them, their
        MySQL GTIDs as runs)."""
        if self._parts:
            return position, 0, 0, [], []
        buf = self._buffer
        offset, self._sequence, position, events, transactions, mariadb, mysql = skip(
            buf._buf, buf._start, self._sequence, position, *args
        )
        buf._start = offset
        return position, events, transactions, mariadb, mysql

    def take_transactions(
        self, take: Callable[..., Taken], position: int, *args: object
    ) -> tuple[
        int,
        int,
        int,
        list[Gtid3],
        list[GnoRun],
        list[Any],
        list[Any],
        list[Any],
        tuple[bytes, bytes, bytes],
    ]:
        """Take whole transactions of rows with the native ``take_transactions`` (which checks
        each event and stops before anything unusual; see ``runs``): (position after them,
        transactions, bytes they span, their MariaDB GTIDs, their MySQL GTIDs, their segments,
        the latest table map of each table id, event counts by type, and the records and row
        images a split takes)."""
        if self._parts:
            return position, 0, 0, [], [], [], [], [], (b"", b"", b"")
        buf = self._buffer
        offset, self._sequence, position, *rest = take(
            buf._buf, buf._start, self._sequence, position, *args
        )
        buf._start = offset
        return (position, *rest)  # type: ignore[return-value]

    def split_events(
        self, split: Callable[..., tuple[int, int, list[bytes]]], *args: object
    ) -> list[bytes]:
        """Take the whole event packets buffered with the native ``split_events`` (which
        checks each one and stops before anything unusual): their events, in order."""
        if self._parts:
            return []
        buf = self._buffer
        buf._start, self._sequence, events = split(buf._buf, buf._start, self._sequence, *args)
        return events

    def next_payload(self, *, skip: int = 0) -> bytes | _NeedData:
        """The next whole payload; ``skip`` drops its first bytes (the dump stream's 0x00
        marker before an event) without copying the rest again."""
        buf = self._buffer
        while True:
            if len(buf) < 4:
                return NEED_DATA
            head = buf.peek(0, 4)
            length = int.from_bytes(head[:3], "little")
            if len(buf) < 4 + length:
                return NEED_DATA
            sequence = head[3]
            if sequence != self._sequence:
                raise DecodeError(
                    f"packet sequence id {sequence} where {self._sequence} was expected",
                    hint="the connection lost or corrupted bytes; reconnect",
                )
            self._sequence = (sequence + 1) & 0xFF
            buf.skip(4)
            if length == MAX_PACKET:
                self._parts.append(buf.take(length))
                continue
            if self._parts:
                self._parts.append(buf.take(length))
                payload = b"".join(self._parts)
                self._parts = []
                return payload[skip:] if skip else payload
            if skip > length:
                raise DecodeError(f"packet of {length} bytes is shorter than its marker")
            buf.skip(skip)
            return buf.take(length - skip)


def parse_err_packet(payload: bytes) -> ServerError:
    """ERR packet: 0xFF, error code (2), '#' and 5-byte SQL state, message."""
    code = int.from_bytes(payload[1:3], "little")
    if payload[3:4] == b"#":
        state = payload[4:9].decode("ascii", "replace")
        message = payload[9:]
    else:
        state, message = "HY000", payload[3:]
    return ServerError(code, state, message.decode("utf-8", "replace"))


def classify_dump_payload(payload: bytes) -> bytes | EndOfStream:
    """One dump-stream payload: the event bytes, END_OF_STREAM, or raise the server's error."""
    if not payload:
        raise DecodeError("empty packet in the binlog dump stream")
    marker = payload[0]
    if marker == 0x00:
        return payload[1:]
    if len(payload) >= 1 + 13 and int.from_bytes(payload[10:14], "little") + 1 == len(payload):
        # An event whose 0x00 marker was corrupted: its header's size field still matches the
        # packet exactly, which no ERR or EOF packet's text does.
        raise DecodeError(
            f"corrupted packet marker 0x{marker:02x} before an event",
            hint="the connection corrupted the stream; reconnect",
        )
    if marker == 0xFE and len(payload) < 9:
        return END_OF_STREAM
    if marker == 0xFF:
        raise parse_err_packet(payload)
    raise DecodeError(f"unexpected packet marker 0x{marker:02x} in the binlog dump stream")
