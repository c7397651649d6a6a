"""The replica stream: whole transactions from a live server, in order, across reconnects.

A reader thread owns the socket: it connects (pymysql does the handshake, auth and TLS),
registers as a replica, sends the dump command, then reads bytes into the sans-I/O
``DumpStreamDecoder`` and groups events with ``TransactionAssembler``. Finished items go to
the event loop through a bounded queue; when the consumer is slow the thread blocks on the
queue and stops reading the socket, so memory stays bounded and TCP pushes back on the
server. Reading and decoding never run on the event loop.

On a lost connection, a silent server (nothing for 2x the heartbeat period), a CRC mismatch or
a protocol error, the thread reconnects with exponential backoff and jitter and resumes after
the last transaction it handed over: a transaction is delivered whole or not at all, so
nothing is skipped or repeated. A CRC mismatch that recurs at the same position
``max_checksum_retries`` times, or a purged binlog (ERR 1236), ends the stream with an error.
Each attempt is logged (warning) with its cause. ``StreamStats`` counts outages (a loss of the
source, however many attempts it takes to come back: a session that streams ends one) apart
from attempts. ``stop()`` ends the stream at once, dropping what the consumer has not taken.

A start given as a binlog file and position carries no GTID state, yet a checkpoint should
(it survives failover and purged files). The stream learns it: on MariaDB at connect
(``BINLOG_GTID_POS``), on MySQL with GTIDs on from the PREVIOUS_GTIDS event that opens each
binlog file (every GTID of the files before it: exact while no transaction of the file has
been taken). It then hands a ``GtidStateLearned`` item over, in order with the transactions,
and the consumer's position takes it (``StreamPosition.with_gtid_of``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import random
import re
import socket
import threading
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import pymysql
import structlog

from ..binlog import events as ev
from ..binlog.constants import CHECKSUM_CRC32, CHECKSUM_OFF, EventType
from ..binlog.errors import ChecksumError, DecodeError, SchemaMismatchError, ServerError
from ..binlog.framing import EndOfStream, _NeedData
from ..binlog.gtid import MariadbGtidPosition, MysqlGtidSet
from ..binlog.position import StreamPosition, is_past, position_reached
from ..binlog.stream import DumpStreamDecoder
from ..binlog.tablemap import SchemaLookup
from ..binlog.transaction import Ending, Transaction, TransactionAssembler, TransactionPart
from ..config import SourceConfig
from ..errors import (
    ConfigError,
    IntegrityError,
    PositionGoneError,
    ReplicatorError,
    ServerRefusedError,
)
from .connection import describe_source, open_connection
from .errors import SourceUnavailableError, error_code, translate_error
from .items import GtidStateLearned, StreamItem, TransactionAborted
from .protocol import (
    BINLOG_SEND_ANNOTATE_ROWS_EVENT,
    COM_BINLOG_DUMP,
    COM_BINLOG_DUMP_GTID,
    COM_REGISTER_SLAVE,
    MARIADB_SLAVE_CAPABILITY_MINE,
    dump_gtid_payload,
    dump_payload,
    register_replica_payload,
)
from .server_info import ServerInfo, mariadb_gtid_at, server_info

if TYPE_CHECKING:
    from ..schema.tracker import SchemaTracker


_READ_SIZE = 256 * 1024
# While the socket has more bytes waiting (a full read), decoded items are handed to the loop
# at most this often: each hand-over is a round trip between the threads (and a GIL hand-off)
_HAND_OVER_SECONDS = 0.02
# what the server sends before it reaches the start position (a new file's preamble), and how
# long it may then be silent while it reads its binlog up to the start (``_read_events``)
_PREAMBLE = frozenset(
    {
        EventType.ROTATE,
        EventType.FORMAT_DESCRIPTION,
        EventType.MARIADB_GTID_LIST,
        EventType.MARIADB_BINLOG_CHECKPOINT,
        EventType.PREVIOUS_GTIDS,
    }
)
START_SCAN_SECONDS = 120.0
log = structlog.get_logger("replicator")
# MariaDB ER_SLAVE_SAME_ID (4052) "A slave with the same server_uuid/server_id is already
# connected"; MySQL sends 1236 "A slave with the same server_uuid/server_id as this slave has
# connected to the master" to the replica it drops
_SAME_ID = re.compile(r"same server_uuid/server_id|\b4052\b")
CLASH_COUNT = 3  # same-id refusals within CLASH_WINDOW seconds before we say so
CLASH_WINDOW = 120.0
ER_MASTER_FATAL_ERROR_READING_BINLOG = 1236
# access denied / specific privilege needed (ER_SPECIFIC_ACCESS_DENIED_ERROR, ...)
_REFUSED_AT_START = frozenset({1044, 1045, 1142, 1227})


class _End:
    """Queue sentinel: the stream is over (``--stop-at-end`` reached or closed)."""


@dataclass(slots=True)
class StreamStats:
    """Counters for metrics and tests (read from the loop, written by the reader thread)."""

    connects: int = 0
    reconnects: int = 0  # outages: losses of the source, however many attempts each took
    reconnect_attempts: int = 0  # every attempt to connect again, failed or not
    checksum_errors: int = 0
    transactions: int = 0
    bytes_received: int = 0
    heartbeats: int = 0
    discarded_incomplete: int = 0
    streaming: bool = False  # the dump is under way on the current connection
    streaming_seen: bool = False  # the dump was under way at least once
    last_error: str = ""
    checksum_failures_at: dict[tuple[str, int], int] = field(default_factory=dict)
    events_by_type: dict[int, int] = field(default_factory=dict)  # binlog event type code


@dataclass(frozen=True, slots=True)
class ServerFacts:
    flavor: str  # "mariadb" or "mysql"
    version: tuple[int, int, int]
    checksum: str  # "CRC32" or "NONE"
    binlog_format: str  # "ROW", "MIXED", "STATEMENT" ("" when the server does not say)
    end: StreamPosition  # end of the binlog when we connected, with the GTID state there


def server_facts(info: ServerInfo) -> ServerFacts:
    """What the stream needs from ``server_info``: flavor, checksum, and the end of the
    binlog (file, position, GTID state) when we connected."""
    if not info.log_bin:
        raise ServerRefusedError(
            "the server's binary log is off (log_bin = OFF)",
            hint="turn it on in the server's my.cnf (log_bin, binlog_format = ROW, server_id; "
            "docs/source-setup.md) and restart the server; `replicator check` lists every "
            "setting",
        )
    if info.binlog_end is None:
        monitor = (
            "BINLOG MONITOR"
            if info.is_mariadb and info.version >= (10, 5, 2)
            else "REPLICATION CLIENT"
        )
        raise ServerRefusedError(
            "the account may not read the end of the binary log"
            + (f" ({', '.join(info.denied)} refused)" if info.denied else ""),
            hint=f"GRANT {monitor} ON *.* TO <the replication account>; (see `replicator check`)",
        )
    mariadb_gtid = mysql_gtid = None
    if info.is_mariadb:
        mariadb_gtid = MariadbGtidPosition.parse(info.gtid_binlog_pos or "")
    elif (info.gtid_mode or "").upper() == "ON":
        mysql_gtid = MysqlGtidSet.parse(info.gtid_executed or "")
    return ServerFacts(
        flavor=info.flavor,
        version=info.version,
        checksum=(info.binlog_checksum or "NONE").upper(),
        binlog_format=(info.binlog_format or "").upper(),
        end=StreamPosition(
            info.binlog_end.file, info.binlog_end.position, mariadb_gtid, mysql_gtid
        ),
    )


def _gtid_covers(start: StreamPosition, end: StreamPosition) -> bool:
    """True when ``start`` already includes every transaction up to ``end``."""
    if start.mariadb_gtid is not None and end.mariadb_gtid is not None:
        return all(start.mariadb_gtid.contains(g) for g in end.mariadb_gtid)
    if start.mysql_gtid is not None and end.mysql_gtid is not None:
        return start.mysql_gtid.issuperset(end.mysql_gtid)
    return False


class ReplicaStream:
    """Async iterator over whole transactions and control events of a live server.

    ``start`` is where to begin: a ``StreamPosition`` (GTID state and/or file/position), or
    None for "now" (the end of the binlog at connect time). With ``stop_at_end`` the stream
    ends once everything up to the end of the binlog at start has been delivered.
    ``report_host``: the host name it registers with as a replica (COM_REGISTER_SLAVE); None:
    it does not register (a short read, as ``source.continuity`` makes with server_id 0).
    ``row_images=False`` makes it a read of statements only (a DDL scan): rows and TABLE_MAP
    events are checked and passed over (inside a TRANSACTION_PAYLOAD: decoded without their
    rows), and only the transactions left holding a statement are delivered (the others still
    move ``position``).
    """

    def __init__(
        self,
        cfg: SourceConfig,
        start: StreamPosition | None,
        *,
        stop_at_end: bool = False,
        schema_lookup: SchemaLookup | None = None,
        queue_size: int | None = None,
        part_rows: int | None = None,
        name: str = "replica-reader",
        objects: bool = False,
        row_images: bool = True,
        end: StreamPosition | None = None,
        tracker: SchemaTracker | None = None,
        report_host: str | None = "replicator",
    ) -> None:
        self.cfg = cfg
        self.stats = StreamStats()
        self.position: StreamPosition | None = start  # after the last delivered transaction
        # where streaming began: the given start, or the end of the binlog at the first connect
        self.origin: StreamPosition | None = start
        self.facts: ServerFacts | None = None
        self._stop_at_end = stop_at_end
        self._schema_lookup = schema_lookup
        self._objects = objects  # rows events as values only, no buffers (block.py)
        # False: a read of statements only (a DDL scan; see the class docstring)
        self._row_images = row_images
        self._queue_size = queue_size or max(16, cfg.buffer_events // 100)
        # each item with its row images, counted once by the reader (see _deliver)
        self._queue: asyncio.Queue[tuple[StreamItem | BaseException | _End, int]] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._socket_lock = threading.Lock()
        self._socket: socket.socket | None = None
        # where to stop: ``end`` as given, or with ``stop_at_end`` the binlog's end at start
        self._end: StreamPosition | None = end
        # the schema history as the decoder sees it (DDL applied as decoded; see schema.tracker)
        self._tracker = tracker
        self._name = name
        # the host name registered with the source (SHOW SLAVE HOSTS shows it; see sink.lock)
        self._report_host = report_host
        self._finished = False
        self._part_rows = part_rows
        self._open_parts: str | bool = False  # gtid (or True) of a transaction with parts out
        # The hand-off is bounded by items and by row images: a few parts of a huge
        # transaction must not pile up while the consumer writes Parquet.
        self._row_budget = max(1, cfg.buffer_rows)
        self._rows_queued = 0
        self._items_queued = 0
        self._room = threading.Condition()
        self._batch: list[tuple[StreamItem | BaseException | _End, int]] = []  # see _deliver
        self._clashes: list[float] = []  # monotonic times of same-server_id refusals
        self._join_within = 30.0  # seconds aclose waits for the reader thread (see stop)

    # -- asyncio side ----------------------------------------------------------------------

    async def __aenter__(self) -> ReplicaStream:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        # bounded by _deliver (items and row images), so putting never waits on the loop
        self._queue = asyncio.Queue()
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def __aiter__(self) -> ReplicaStream:
        return self

    async def __anext__(self) -> StreamItem:
        if self._queue is None:
            raise RuntimeError("ReplicaStream.start() was not called")
        if self._finished:
            raise StopAsyncIteration
        return self._took(await self._queue.get())

    def next_ready(self) -> StreamItem | None:
        """The next item if the reader has handed it over already, else None (no waiting:
        a consumer taking many items in a row skips a task and a wait per item). Ends and
        raises as ``__anext__`` does."""
        queue = self._queue
        if queue is None or self._finished or queue.empty():
            return None
        return self._took(queue.get_nowait())

    def _took(self, entry: tuple[StreamItem | BaseException | _End, int]) -> StreamItem:
        item, rows = entry
        with self._room:
            self._items_queued -= 1
            self._rows_queued -= rows
            self._room.notify()
        if isinstance(item, _End):
            self._finished = True
            raise StopAsyncIteration
        if isinstance(item, BaseException):
            self._finished = True
            raise item
        return item

    def stop(self, *, join_within: float = 30.0) -> None:
        """Stop now (the consumer is shutting down): the reader reads no more, and what it
        decoded that the consumer has not taken is dropped (the consumer's checkpoint is
        before it: it is read again at the next start). ``aclose`` then waits at most
        ``join_within`` seconds for the reader thread (a daemon thread: it cannot hold the
        process)."""
        self._join_within = min(self._join_within, join_within)
        self._stopping.set()
        self._close_socket()
        with self._room:  # unblock a reader waiting for room in the queue
            self._room.notify_all()
        if self._queue is not None:
            while not self._queue.empty():
                self._queue.get_nowait()

    async def aclose(self) -> None:
        self.stop()
        thread = self._thread
        if thread is not None and thread.is_alive():
            join = functools.partial(thread.join, max(0.0, self._join_within))
            await asyncio.get_running_loop().run_in_executor(None, join)

    # -- reader thread ---------------------------------------------------------------------

    def _deliver(self, item: StreamItem | BaseException | _End, *, now: bool = True) -> bool:
        """Hand an item to the loop, waiting for room. False when the stream is stopping.

        Room is counted here, in items and row images. With ``now=False`` the item joins a
        batch that ``_flush`` hands over in one go, once per chunk read from the socket: a
        round trip to the loop per transaction costs as much as decoding a small one."""
        rows = item.row_count if isinstance(item, (Transaction, TransactionPart)) else 0
        while True:
            with self._room:
                if self._stopping.is_set():
                    return False
                # always let one item through, however large, so the stream cannot stall
                if self._items_queued < self._queue_size and (
                    not self._rows_queued or self._rows_queued + rows <= self._row_budget
                ):
                    self._items_queued += 1
                    self._rows_queued += rows
                    break
                if not self._batch:
                    self._room.wait(0.5)
                    continue
            # full, partly with our own batch: the consumer can only make room from what it
            # has, so send the batch (never while holding the lock the consumer takes)
            if not self._flush():
                return False
        self._batch.append((item, rows))
        return self._flush() if now else True

    def _flush(self) -> bool:
        """Hand the batched items to the loop and wait until they are queued (reader thread
        only). False when the stream is stopping or the loop is gone.

        The wait matters as much as the hand-off: it is when the loop thread gets the GIL
        without contention. A reader that never waits makes every GIL acquisition of the loop
        thread (each wake-up, each socket call) wait out the interpreter's switch interval,
        and the event loop falls behind by tens of milliseconds."""
        batch = self._batch
        if not batch:
            return True
        self._batch = []
        assert self._loop is not None
        try:
            future = asyncio.run_coroutine_threadsafe(self._put_all(batch), self._loop)
        except RuntimeError:  # loop closed
            return False
        while not self._stopping.is_set():
            try:
                future.result(timeout=0.5)
                return True
            except TimeoutError:
                continue
            except (RuntimeError, concurrent.futures.CancelledError):  # loop closed
                return False
        future.cancel()
        return False

    async def _put_all(self, batch: list[tuple[StreamItem | BaseException | _End, int]]) -> None:
        assert self._queue is not None
        for entry in batch:
            self._queue.put_nowait(entry)

    def _close_socket(self) -> None:
        with self._socket_lock:
            sock, self._socket = self._socket, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()

    def _run(self) -> None:
        delay = self.cfg.reconnect_initial_delay
        lost = False  # in an outage: the source was lost and no session has streamed since
        while not self._stopping.is_set():
            received = self.stats.bytes_received  # moves once this session's dump streams
            if self._tracker is not None:
                self._tracker.rewind()  # (re)start after the last transaction handed over
            try:
                if self._session():
                    self._deliver(_End())
                    return
                delay = self.cfg.reconnect_initial_delay
            except SchemaMismatchError as exc:
                # the table changed since these events were written: final, not a torn stream
                self._deliver(exc)
                return
            except DecodeError as exc:
                # torn or corrupted bytes: re-read from the last whole transaction, unless the
                # same position keeps failing (then the binlog itself is bad)
                try:
                    self._decode_failed(exc)
                except IntegrityError as fatal:
                    self._deliver(fatal)
                    return
            except (ServerRefusedError, IntegrityError, ConfigError) as exc:
                self._deliver(exc)
                return
            except SourceUnavailableError as exc:
                self.stats.last_error = str(exc)
            except Exception as exc:
                if self._stopping.is_set():
                    return
                if not _is_transient(exc):
                    self._deliver(exc)  # a bug: surface it, never loop on it
                    return
                self.stats.last_error = f"{type(exc).__name__}: {exc}"
            finally:
                self._close_socket()
            # One outage, however many attempts it takes: a new one begins when the source is
            # lost after a session that streamed (or at the first failure).
            outage = not lost or self.stats.bytes_received != received
            if outage:
                lost = True
                if self.stats.bytes_received != received:
                    delay = self.cfg.reconnect_initial_delay  # it streamed: back off afresh
            if not self._stopping.is_set():
                self._log_reconnect(delay, outage=outage)
            if self._open_parts is not False and not self._stopping.is_set():
                gtid = self._open_parts if isinstance(self._open_parts, str) else None
                self._open_parts = False
                if not self._deliver(TransactionAborted(gtid)):
                    return
            if self._stopping.is_set():
                return
            self.stats.reconnects += outage
            self.stats.reconnect_attempts += 1
            jitter = random.uniform(0, delay)  # backoff jitter, not cryptography
            self._stopping.wait(delay / 2 + jitter / 2)
            delay = min(delay * 2, self.cfg.reconnect_max_delay)

    def _log_reconnect(self, delay: float, *, outage: bool) -> None:
        """One warning per lost connection (``outage``: the first failure since the stream
        last ran) and one per further failed attempt, with its cause; repeated same-id
        refusals (another replica registered with our ``server_id``) say so."""
        cause = self.stats.last_error
        now = time.monotonic()
        if _SAME_ID.search(cause):
            self._clashes = [t for t in self._clashes if now - t < CLASH_WINDOW] + [now]
        if not self.stats.streaming_seen:
            event = "cannot stream from the source, retrying"
        elif outage:
            event = "source connection lost, reconnecting"
        else:
            event = "source still unreachable, retrying"
        log.warning(
            event,
            cause=cause,
            source=describe_source(self.cfg),
            resume=None if self.position is None else self.position.describe(),
            outage=self.stats.reconnects + outage,
            attempt=self.stats.reconnect_attempts + 1,
            retry_in_s=round(delay, 2),
        )
        if len(self._clashes) >= CLASH_COUNT:
            log.error(
                "another replica uses our server_id",
                server_id=self.cfg.server_id,
                refusals=len(self._clashes),
                window_s=CLASH_WINDOW,
                hint="two replicas with one server_id take the binlog dump from each other in "
                "turn: give this replicator (source.server_id) or the other replica its own id; "
                "`replicator check` lists the replicas connected to the source",
            )
            self._clashes.clear()

    def _session(self) -> bool:
        """One connection's worth of streaming. True when the stream is complete."""
        cfg = self.cfg
        try:
            conn = open_connection(cfg)
        except ReplicatorError:
            raise
        except Exception as exc:
            # a reply mangled on the way (or a server dying mid-handshake): try again
            raise SourceUnavailableError(f"connecting failed: {type(exc).__name__}: {exc}") from exc
        try:
            try:
                facts = server_facts(server_info(conn))
            except ReplicatorError:
                raise
            except Exception as exc:
                raise SourceUnavailableError(
                    f"reading the server's state failed: {type(exc).__name__}: {exc}"
                ) from exc
            self.stats.connects += 1
            if self.facts is None:
                _refuse_statement_format(facts)
                self.facts = facts
                if self._stop_at_end and self._end is None:
                    self._end = facts.end
            if self.position is None:
                self.position = facts.end  # "now"
            if self.origin is None:
                self.origin = self.position
            start = self.position
            if not start.has_gtid and start.file and facts.flavor == "mariadb":
                start = self._learn_mariadb_gtid(conn, start)
            end = self._end
            if end is not None and (
                _gtid_covers(start, end)
                or (
                    not start.has_gtid
                    and start.file
                    and position_reached(start.file, start.position, end.file, end.position)
                )
            ):
                return True
            checksum = CHECKSUM_CRC32 if facts.checksum == "CRC32" else CHECKSUM_OFF
            try:
                self._prepare_session(conn, facts, start)
                if self._report_host is not None:  # None: a reader that does not register
                    self._register(conn)
                self._send_dump(conn, facts, start)
            except pymysql.err.Error as exc:
                # privileges (REPLICATION SLAVE) are refusals; a dropped link is retried
                if error_code(exc) in _REFUSED_AT_START:
                    raise self._refused(str(exc.args[-1]) if exc.args else str(exc)) from exc
                raise translate_error(exc, where=describe_source(cfg), account=cfg.user) from exc
            sock = conn._sock  # the dump stream is read raw from here on
            assert sock is not None
            sock.settimeout(max(1.0, 2 * cfg.heartbeat_seconds))
            with self._socket_lock:
                self._socket = sock
            # a start behind the binlog's end: the server reads up to it first (_read_events)
            behind = not is_past(start, facts.end)
            return self._read(sock, start, checksum, end, behind=behind)
        finally:
            self.stats.streaming = False
            with contextlib.suppress(Exception):
                conn.close()

    def _learn_mariadb_gtid(
        self, conn: pymysql.connections.Connection, start: StreamPosition
    ) -> StreamPosition:
        """The GTID state at a start given as file/position (``BINLOG_GTID_POS``); the
        start unchanged when the server does not know it there."""
        try:
            found = mariadb_gtid_at(conn, start.file, start.position)
        except pymysql.err.Error as exc:
            raise translate_error(
                exc, where=describe_source(self.cfg), account=self.cfg.user
            ) from exc
        if found is None:
            return start
        return self._learned(replace(start, mariadb_gtid=found))

    def _learned(self, position: StreamPosition) -> StreamPosition:
        """``position`` (the current one with its GTID state) from now on; the consumer is
        told in order with the transactions."""
        self.position = position
        if self.origin is not None:
            self.origin = self.origin.with_gtid_of(position)
        log.info("gtid state of the stream position learnt", position=position.describe())
        self._deliver(GtidStateLearned(position), now=False)
        return position

    def _prepare_session(
        self, conn: pymysql.connections.Connection, facts: ServerFacts, start: StreamPosition
    ) -> None:
        period_ns = int(self.cfg.heartbeat_seconds * 1_000_000_000)
        statements = [
            f"SET @master_binlog_checksum = '{facts.checksum}'",
            f"SET @master_heartbeat_period = {period_ns}",
        ]
        if facts.flavor == "mysql" and facts.version >= (8, 0, 26):
            statements.append(f"SET @source_binlog_checksum = '{facts.checksum}'")
        if facts.flavor == "mariadb":
            statements.append(f"SET @mariadb_slave_capability = {MARIADB_SLAVE_CAPABILITY_MINE}")
            if start.mariadb_gtid is not None:
                statements += [
                    f"SET @slave_connect_state = '{start.mariadb_gtid}'",
                    "SET @slave_gtid_strict_mode = 1",
                    "SET @slave_gtid_ignore_duplicates = 0",
                ]
        with conn.cursor() as cur:
            for sql in statements:
                cur.execute(sql)

    def _register(self, conn: pymysql.connections.Connection) -> None:
        payload = register_replica_payload(
            self.cfg.server_id, host=self._report_host or "", user=""
        )
        conn._execute_command(COM_REGISTER_SLAVE, payload)
        conn._read_ok_packet()

    def _send_dump(
        self, conn: pymysql.connections.Connection, facts: ServerFacts, start: StreamPosition
    ) -> None:
        flags = BINLOG_SEND_ANNOTATE_ROWS_EVENT if self.cfg.annotate_rows else 0
        if facts.flavor == "mysql" and start.mysql_gtid is not None:
            payload = dump_gtid_payload(self.cfg.server_id, start.mysql_gtid, flags=flags)
            conn._execute_command(COM_BINLOG_DUMP_GTID, payload)
            return
        if facts.flavor == "mariadb" and start.mariadb_gtid is not None:
            # the server starts from @slave_connect_state; the file name must be empty
            payload = dump_payload(self.cfg.server_id, "", 4, flags=flags)
        else:
            payload = dump_payload(self.cfg.server_id, start.file, start.position, flags=flags)
        conn._execute_command(COM_BINLOG_DUMP, payload)

    def _read(
        self,
        sock: socket.socket,
        start: StreamPosition,
        checksum: int,
        end: StreamPosition | None,
        *,
        behind: bool = True,
    ) -> bool:
        decoder = DumpStreamDecoder(
            file=start.file,
            position=start.position,
            checksum_alg=checksum,
            schema_lookup=self._schema_lookup,
            verify_checksum=True,
        )
        decoder.parser.objects = self._objects
        decoder.parser.row_images = self._row_images
        assembler = TransactionAssembler(part_rows=self._part_rows)
        try:
            return self._read_events(sock, decoder, assembler, end, behind)
        finally:
            self._flush()  # whatever was handed over (position moved) reaches the consumer

    def _read_events(
        self,
        sock: socket.socket,
        decoder: DumpStreamDecoder,
        assembler: TransactionAssembler,
        end: StreamPosition | None,
        behind: bool,
    ) -> bool:
        buffer = bytearray(_READ_SIZE)
        view = memoryview(buffer)
        tracker = self._tracker
        silence = max(1.0, 2 * self.cfg.heartbeat_seconds)
        # A packet length is cross-checked with its event as soon as the header is in; this
        # is the backstop for anything else that leaves bytes arriving but no event forming.
        misframed_after = max(30.0, 10 * self.cfg.heartbeat_seconds)
        last_event = handed_at = time.monotonic()
        decoded = decoder.parser.events_decoded
        events_here = 0
        by_type = self.stats.events_by_type
        # Before the first event past the start, the server may be silent for long while
        # heartbeats are not late: it sends the new file's preamble (rotate, format
        # description, GTID list) at once, then reads its binlog up to the start position,
        # sending nothing, and heartbeats only once it waits at the end. A start early in a
        # large binlog (or one on a slow disk) took longer than 2x the heartbeat period and
        # was reported as a silent server. So the silence allowed grows until then (only for
        # a start behind the binlog's end: at the end there is nothing to read up to).
        scanning = behind
        sock.settimeout(max(silence, START_SCAN_SECONDS) if behind else silence)
        while not self._stopping.is_set():
            try:
                count = sock.recv_into(view)
            except TimeoutError as exc:
                if scanning:
                    raise SourceUnavailableError(
                        f"no event past the start position for {max(silence, START_SCAN_SECONDS):g}"
                        " s after the binlog dump began (the server reads its binlog up to the "
                        "start position first)",
                        hint="the connection is reconnected automatically; a start in a very "
                        "large binlog on a slow disk takes long: check the server's disk",
                    ) from exc
                raise SourceUnavailableError(
                    f"no event or heartbeat for {silence:g} s",
                    hint="the connection is reconnected automatically",
                ) from exc
            if count == 0:
                raise SourceUnavailableError("the server closed the replication connection")
            self.stats.bytes_received += count
            self.stats.streaming = self.stats.streaming_seen = True
            decoder.feed(view[:count])  # copied into the framer at once
            while True:
                try:
                    event = decoder.next_event()
                except ServerError as exc:
                    raise self._server_error(exc, at_start=events_here == 0) from exc
                if isinstance(event, _NeedData):
                    break
                if isinstance(event, EndOfStream):
                    raise SourceUnavailableError("the server ended the binlog dump")
                events_here += 1
                code = event.header.type_code
                by_type[code] = by_type.get(code, 0) + 1
                if scanning and code not in _PREAMBLE:
                    scanning = False  # at the start position: heartbeats are due from now
                    sock.settimeout(silence)
                for item in feed(assembler, tracker, event):
                    if not self._hand_over(item, assembler):
                        return False
                    if end is not None and self._reached(item, assembler, end):
                        return True
            # Caught up (the read did not fill the buffer): hand over at once, latency is what
            # counts. Behind: batch the hand-overs, throughput is.
            now = time.monotonic()
            if count < len(buffer) or now - handed_at >= _HAND_OVER_SECONDS:
                if not self._flush():
                    return False
                handed_at = now
            if decoder.parser.events_decoded != decoded:  # also events only stepped over
                decoded = decoder.parser.events_decoded
                last_event = now
            # Bytes keep coming but no event completes: a corrupted packet length is making
            # the framer wait for data that will never form an event (heartbeats included).
            if time.monotonic() - last_event > misframed_after:
                raise SourceUnavailableError(
                    f"no complete event for {misframed_after:g} s while {decoder.framer.buffered} "
                    "bytes arrived: the stream is misframed",
                    hint="the connection is reconnected automatically",
                )
        return False

    def _hand_over(self, item: StreamItem, assembler: TransactionAssembler) -> bool:
        assert self.position is not None
        self.stats.discarded_incomplete = assembler.discarded_incomplete
        if isinstance(item, TransactionPart):
            self._open_parts = item.gtid if item.gtid is not None else True
        elif isinstance(item, Transaction):
            self._open_parts = False
            self.stats.transactions += 1
            self.position = self.position.after(item.typed_gtid, item.end_file, item.end_position)
            if self._tracker is not None:
                self._tracker.mark()
            elif item.ending is Ending.DDL and _may_change_columns(item):
                self._schema_changed()
            if (
                not self._row_images
                and not item.parts  # parts handed out wait for their transaction's end
                and not any(isinstance(e, ev.QueryEvent) for e in item.events)
            ):
                return True  # a read of statements only: nothing in it to deliver
        elif isinstance(item, ev.HeartbeatEvent):
            self.stats.heartbeats += 1
        elif isinstance(item, ev.PreviousGtidsEvent) and self.facts is not None:
            learned = previous_gtids_state(self.position, item, self.facts)
            if learned is not None and not assembler.in_transaction:
                self._learned(learned)
        return self._deliver(item, now=False)

    def _schema_changed(self) -> None:
        """A DDL statement went by: any schema looked up before it may be stale now.

        Which table it changed is not known: ``QueryEvent.schema`` is the session's default
        database (``USE a; ALTER TABLE b.t ...`` logs ``a``), and parsing every DDL dialect is
        fragile. So the whole cache is forgotten; each table is looked up once more."""
        forget = getattr(self._schema_lookup, "forget", None)
        if forget is not None:
            forget()

    def _reached(
        self, item: StreamItem, assembler: TransactionAssembler, end: StreamPosition
    ) -> bool:
        assert self.position is not None
        if assembler.in_transaction:
            return False
        if isinstance(item, Transaction):
            return _gtid_covers(self.position, end) or bool(
                end.file
                and position_reached(item.end_file, item.end_position, end.file, end.position)
            )
        if not end.file:  # an end given as GTIDs only: reached by transactions alone
            return False
        if isinstance(item, ev.HeartbeatEvent) and item.log_file:
            return position_reached(item.log_file, item.log_position, end.file, end.position)
        if isinstance(item, ev.Event) and item.header.log_pos and not item.header.artificial:
            # Control events between transactions carry real positions too: when the binlog
            # ends with a rotate (FORMAT_DESCRIPTION, GTID list, checkpoint of the new file),
            # the end is reached here instead of a heartbeat period later.
            return position_reached(item.file, item.next_position, end.file, end.position)
        return False

    def _decode_failed(self, exc: DecodeError) -> None:
        """Count a decode failure at its position; raise IntegrityError once it persists."""
        if isinstance(exc, ChecksumError):
            self.stats.checksum_errors += 1
        self.stats.last_error = str(exc)
        here = self.position
        key = (
            exc.file or (here.file if here else ""),
            exc.position if exc.position is not None else (here.position if here else 0),
        )
        seen = self.stats.checksum_failures_at.get(key, 0) + 1
        self.stats.checksum_failures_at[key] = seen
        if seen >= self.cfg.max_checksum_retries:
            raise IntegrityError(
                f"{exc} (failed {seen} times at {key[0]}:{key[1]})",
                hint=(
                    "the same position failed every time it was read: first start replicator "
                    "again (a flaky network or proxy can corrupt the stream repeatedly; the "
                    "restart re-reads it from the last committed batch); if it fails there "
                    "again, inspect the binlog at that position with mysqlbinlog/mariadb-binlog "
                    "--verify-binlog-checksum"
                ),
            ) from exc

    def _refused(self, message: str) -> ServerRefusedError:
        return ServerRefusedError(
            f"the server refused to serve the binlog to {self.cfg.user!r}: {message}",
            hint=(
                "reading the binary log needs REPLICATION SLAVE: GRANT REPLICATION SLAVE ON "
                f"*.* TO '{self.cfg.user}'@'%'; (use the account's host; `replicator check` "
                "lists every privilege the account lacks)"
            ),
        )

    def _server_error(self, exc: ServerError, *, at_start: bool) -> ReplicatorError:
        """The server's ERR packet. 1236 when the dump starts means the position is gone
        (purged binlog, unknown GTID): final. Anything else, or an ERR in mid-stream (which
        may be a corrupted event marker), is retried from the last whole transaction."""
        if at_start and exc.code in _REFUSED_AT_START:
            return self._refused(exc.server_message)
        if exc.code == ER_MASTER_FATAL_ERROR_READING_BINLOG and at_start:
            assert self.position is not None
            return PositionGoneError(
                f"the server cannot send the binlog from {self.position.describe()}: "
                f"{exc.server_message}",
                hint=(
                    "those binlog files or GTIDs were purged (or the position is wrong); "
                    "set snapshot.mode: when_needed to snapshot every table again from "
                    "now on, or replay from a position the server still has (SHOW BINARY "
                    "LOGS, @@gtid_purged)"
                ),
            )
        return SourceUnavailableError(
            f"server error {exc.code} during the binlog dump: {exc.server_message}"
        )


def previous_gtids_state(
    position: StreamPosition, event: ev.PreviousGtidsEvent, facts: ServerFacts
) -> StreamPosition | None:
    """MySQL opens each binlog file with PREVIOUS_GTIDS: every GTID of the files before it.
    A ``position`` without a GTID set that no transaction of that file has passed yet (the
    start of the file, or the end of an earlier one) has exactly that set. None when the
    event tells nothing: GTIDs off (the set is empty then, and meaningless), a position that
    has a state already, or one inside the file (a start past its first transactions)."""
    if facts.end.mysql_gtid is None or position.has_gtid or event.header.artificial:
        return None
    if position.file == event.file and position.position > event.position:
        return None
    return replace(position, mysql_gtid=event.gtid_set)


def feed(
    assembler: TransactionAssembler, tracker: SchemaTracker | None, event: ev.Event
) -> list[Transaction | TransactionPart | ev.Event]:
    """One decoded event through the schema tracker (its DDL applied before the next event is
    decoded) and the assembler; an incomplete group the assembler drops takes the DDL it
    applied out of the tracker again."""
    if tracker is None:
        return assembler.feed(event)
    event = tracker.on_event(event)
    dropped = assembler.discarded_incomplete
    items = assembler.feed(event)
    if assembler.discarded_incomplete != dropped:
        tracker.discard_open(event)
    return items


def _refuse_statement_format(facts: ServerFacts) -> None:
    """At the first connect: a server that logs changes as SQL (STATEMENT, or MIXED, which
    picks statements whenever it deems them safe) cannot be streamed exactly. Later changes of
    the setting, and sessions that set their own, are caught per statement by the pipeline."""
    if facts.binlog_format in ("", "ROW"):
        return
    raise ServerRefusedError(
        f"the source logs changes as SQL statements (binlog_format={facts.binlog_format}), "
        "which cannot be turned into row changes exactly",
        hint="SET GLOBAL binlog_format = 'ROW'; and binlog_format = ROW in the server's "
        "my.cnf, then reconnect (or restart) the applications so their sessions log rows; "
        "see `replicator check`",
    )


def _is_transient(exc: BaseException) -> bool:
    """Failures worth a reconnect: the network, the server going away, torn bytes."""
    if isinstance(exc, SchemaMismatchError):
        return False
    if isinstance(exc, (OSError, EOFError, DecodeError)):
        return True
    if isinstance(exc, pymysql.err.OperationalError):
        return True
    return isinstance(exc, pymysql.err.InterfaceError)


# DDL that cannot change a table's columns: no reason to look every table up again after it
# (schedulers and maintenance jobs can issue these often)
_NO_COLUMN_CHANGE = (
    "GRANT ", "REVOKE ", "TRUNCATE ", "ANALYZE ", "OPTIMIZE ", "FLUSH ", "CREATE USER ",
    "DROP USER ", "ALTER USER ", "RENAME USER ", "SET PASSWORD", "CREATE ROLE ", "DROP ROLE ",
    "CREATE DATABASE ", "CREATE SCHEMA ", "CREATE EVENT ", "ALTER EVENT ", "DROP EVENT ",
    "CREATE PROCEDURE ", "DROP PROCEDURE ", "CREATE FUNCTION ", "DROP FUNCTION ",
    "CREATE DEFINER", "CREATE TRIGGER ", "DROP TRIGGER ",
)  # fmt: skip


def _may_change_columns(transaction: Transaction) -> bool:
    """False only for DDL known not to touch columns; anything else (and anything unknown)
    may have changed a table we cached."""
    for event in transaction.events:
        if isinstance(event, ev.QueryEvent):
            statement = " ".join(event.query.split()).upper()
            if not statement.startswith(_NO_COLUMN_CHANGE):
                return True
    return False
