"""The replica stream: whole transactions from a live server, in order, across reconnects.

A reader thread owns the socket: it connects (pymysql does the handshake, auth and TLS),
registers as a replica, sends the dump command (``source.dump_connection``), then reads bytes
into the sans-I/O ``DumpStreamDecoder`` and groups events with ``TransactionAssembler``.
Finished items go to the event loop through a bounded hand-off (``source.handoff``): when the
consumer is slow the thread blocks there and stops reading the socket, so memory stays bounded
and TCP pushes back on the server. Reading and decoding never run on the event loop.

On a lost connection, a silent server (nothing for 2x the heartbeat period), a CRC mismatch or
a protocol error, the thread reconnects with exponential backoff and jitter and resumes after
the last transaction it handed over: a transaction is delivered whole or not at all, so
nothing is skipped or repeated. A CRC mismatch that recurs at the same position
``max_checksum_retries`` times, or a purged binlog (ERR 1236), ends the stream with an error
(``source.dump_failures`` tells final failures from passing ones). Each attempt is logged
(warning) with its cause (``source.reconnect_log``). ``StreamStats`` counts outages (a loss of
the source, however many attempts it takes to come back: a session that streams ends one) apart
from attempts. ``stop()`` ends the stream at once, dropping what the consumer has not taken.

A start given as a binlog file and position carries no GTID state, yet a checkpoint should
(it survives failover and purged files). The stream learns it (``source.gtid_learning``): on
MariaDB at connect (``BINLOG_GTID_POS``), on MySQL with GTIDs on from the PREVIOUS_GTIDS event
that opens each binlog file (every GTID of the files before it: exact while no transaction of
the file has been taken). It then hands a ``GtidStateLearned`` item over, in order with the
transactions, and the consumer's position takes it (``StreamPosition.with_gtid_of``).

Where a bounded stream ends is ``source.stream_end``; how the schema tracker and the schema
lookup follow the stream's DDL is ``source.schema_follow``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
import socket
import threading
import time
from typing import TYPE_CHECKING

import structlog

from ..binlog import events as ev
from ..binlog.constants import CHECKSUM_CRC32, CHECKSUM_OFF, EventType
from ..binlog.errors import DecodeError, SchemaMismatchError, ServerError
from ..binlog.framing import EndOfStream, _NeedData
from ..binlog.position import StreamPosition, is_past
from ..binlog.runs import TakenRun, TransactionRun
from ..binlog.stream import DumpStreamDecoder
from ..binlog.tablemap import SchemaLookup
from ..binlog.transaction import Ending, Transaction, TransactionAssembler, TransactionPart
from ..config import SourceConfig
from ..errors import ConfigError, IntegrityError, ServerRefusedError
from .dump_connection import DumpSocket, connect, read_facts, request_dump
from .dump_failures import count_decode_failure, is_transient, server_error
from .errors import SourceUnavailableError
from .facts import ServerFacts, refuse_statement_format, server_facts
from .gtid_learning import mariadb_start_state, previous_gtids_state
from .handoff import End, Entry, HandOff
from .items import GtidStateLearned, StreamItem, TransactionAborted
from .reconnect_log import ReconnectLog
from .schema_follow import feed, forget_schemas, may_change_columns
from .stream_end import end_reached, skip_bounds, start_reached
from .stream_stats import StreamStats

if TYPE_CHECKING:
    import pymysql

    from ..schema.tracker import SchemaTracker

# the stream's parts, importable from here as before the split
__all__ = [
    "ReplicaStream",
    "ServerFacts",
    "StreamStats",
    "feed",
    "previous_gtids_state",
    "server_facts",
]

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
# a run (``ReplicaStream(runs=True)``) spans about this many bytes of events at most: the
# memory its blocks take, beside the hand-off's bounds
_RUN_BYTES = 1 << 20
_NO_PARTS = 1 << 62  # no sink.large_transaction_rows: a transaction is never handed out in parts
log = structlog.get_logger("replicator")


class ReplicaStream:
    """Async iterator over whole transactions and control events of a live server.

    ``start`` is where to begin: a ``StreamPosition`` (GTID state and/or file/position), or
    None for "now" (the end of the binlog at connect time). With ``stop_at_end`` the stream
    ends once everything up to the end of the binlog at start has been delivered.
    ``report_host``: the host name it registers with as a replica (COM_REGISTER_SLAVE); None:
    it does not register (a short read, as ``source.continuity`` makes with server_id 0).
    ``statements_only=True`` makes it a read of statements only (a DDL scan): rows and TABLE_MAP
    events are checked and passed over (inside a TRANSACTION_PAYLOAD: decoded without their
    rows), and only the transactions left holding a statement are delivered (the others still
    move ``position``). ``runs=True`` delivers whole transactions of rows many at a time, as
    ``TransactionRun``s, where the native core can take them (``runs``).
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
        part_bytes: int | None = None,
        name: str = "replica-reader",
        buffers: bool = True,
        statements_only: bool = False,
        end: StreamPosition | None = None,
        tracker: SchemaTracker | None = None,
        report_host: str | None = "replicator",
        runs: bool = False,
    ) -> None:
        self.cfg = cfg
        self.stats = StreamStats()
        self.position: StreamPosition | None = start  # after the last delivered transaction
        # where streaming began: the given start, or the end of the binlog at the first connect
        self.origin: StreamPosition | None = start
        self.facts: ServerFacts | None = None
        self._stop_at_end = stop_at_end
        self._schema_lookup = schema_lookup
        self._buffers = buffers  # False: rows events as values only, no buffers (block.py)
        # False: a read of statements only (a DDL scan; see the class docstring)
        self._statements_only = statements_only
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        # The hand-off is bounded by items and by row images: a few parts of a huge
        # transaction must not pile up while the consumer writes Parquet.
        self._handoff = HandOff(
            self._stopping,
            queue_size=queue_size or max(16, cfg.buffer_events // 100),
            row_budget=max(1, cfg.buffer_rows),
            byte_budget=max(1, cfg.buffer_bytes),
        )
        self._socket = DumpSocket()
        # where to stop: ``end`` as given, or with ``stop_at_end`` the binlog's end at start
        self._end: StreamPosition | None = end
        # the schema history as the decoder sees it (DDL applied as decoded; see schema.tracker)
        self._tracker = tracker
        self._name = name
        # the host name registered with the source (SHOW SLAVE HOSTS shows it; see sink.lock)
        self._report_host = report_host
        self._part_rows = part_rows
        self._part_bytes = part_bytes
        self._open_parts: str | bool = False  # gtid (or True) of a transaction with parts out
        self._drops_seen = 0  # groups this session's assembler dropped, as handed over
        self._reconnect_log = ReconnectLog(cfg)
        # True: small transactions of rows come as runs (``TransactionRun``, binlog.runs) where
        # the native core can take them. The consumer may turn this on while the stream runs
        # (the reader looks before each run), never off: runs already handed over stay runs.
        self.runs = runs
        self._waiting_run: TakenRun | None = None  # a run waiting for the transaction closing it
        self._join_within = 30.0  # seconds aclose waits for the reader thread (see stop)

    # The hand-off's loop and queue, as tests that drive the reader's side by hand set them.
    @property
    def _loop(self) -> asyncio.AbstractEventLoop | None:
        return self._handoff.loop

    @_loop.setter
    def _loop(self, loop: asyncio.AbstractEventLoop | None) -> None:
        self._handoff.loop = loop

    @property
    def _queue(self) -> asyncio.Queue[Entry] | None:
        return self._handoff.queue

    @_queue.setter
    def _queue(self, queue: asyncio.Queue[Entry] | None) -> None:
        self._handoff.queue = queue

    # -- asyncio side ----------------------------------------------------------------------

    async def __aenter__(self) -> ReplicaStream:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def start(self) -> None:
        self._handoff.open()
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def __aiter__(self) -> ReplicaStream:
        return self

    async def __anext__(self) -> StreamItem:
        return await self._handoff.get()

    def next_ready(self) -> StreamItem | None:
        """The next item if the reader has handed it over already, else None (no waiting:
        a consumer taking many items in a row skips a task and a wait per item). Ends and
        raises as ``__anext__`` does."""
        return self._handoff.next_ready()

    def stop(self, *, join_within: float = 30.0) -> None:
        """Stop now (the consumer is shutting down): the reader reads no more, and what it
        decoded that the consumer has not taken is dropped (the consumer's checkpoint is
        before it: it is read again at the next start). ``aclose`` then waits at most
        ``join_within`` seconds for the reader thread (a daemon thread: it cannot hold the
        process)."""
        self._join_within = min(self._join_within, join_within)
        self._stopping.set()
        self._socket.close()
        self._handoff.stop()

    async def aclose(self) -> None:
        self.stop()
        thread = self._thread
        if thread is not None and thread.is_alive():
            join = functools.partial(thread.join, max(0.0, self._join_within))
            await asyncio.get_running_loop().run_in_executor(None, join)

    # -- reader thread ---------------------------------------------------------------------

    def _run(self) -> None:
        delay = self.cfg.reconnect_initial_delay
        lost = False  # in an outage: the source was lost and no session has streamed since
        while not self._stopping.is_set():
            received = self.stats.bytes_received  # moves once this session's dump streams
            if self._tracker is not None:
                self._tracker.rewind()  # (re)start after the last transaction handed over
            try:
                if self._session():
                    self._handoff.deliver(End())
                    return
                delay = self.cfg.reconnect_initial_delay
            except SchemaMismatchError as exc:
                # the table changed since these events were written: final, not a torn stream
                self._handoff.deliver(exc)
                return
            except DecodeError as exc:
                # torn or corrupted bytes: re-read from the last whole transaction, unless the
                # same position keeps failing (then the binlog itself is bad)
                try:
                    count_decode_failure(
                        self.stats, exc, self.position, self.cfg.max_checksum_retries
                    )
                except IntegrityError as fatal:
                    self._handoff.deliver(fatal)
                    return
            except (ServerRefusedError, IntegrityError, ConfigError) as exc:
                self._handoff.deliver(exc)
                return
            except SourceUnavailableError as exc:
                self.stats.last_error = str(exc)
            except Exception as exc:
                if self._stopping.is_set():
                    return
                if not is_transient(exc):
                    self._handoff.deliver(exc)  # a bug: surface it, never loop on it
                    return
                self.stats.last_error = f"{type(exc).__name__}: {exc}"
            finally:
                self._socket.close()
            # One outage, however many attempts it takes: a new one begins when the source is
            # lost after a session that streamed (or at the first failure).
            outage = not lost or self.stats.bytes_received != received
            if outage:
                lost = True
                if self.stats.bytes_received != received:
                    delay = self.cfg.reconnect_initial_delay  # it streamed: back off afresh
            if not self._stopping.is_set():
                self._reconnect_log.failed(self.stats, self.position, delay, outage=outage)
            if self._stopping.is_set():
                return
            if self._open_parts is not False and not self._abort_parts(now=True):
                return
            self.stats.reconnects += outage
            self.stats.reconnect_attempts += 1
            jitter = random.uniform(0, delay)  # backoff jitter, not cryptography
            self._stopping.wait(delay / 2 + jitter / 2)
            delay = min(delay * 2, self.cfg.reconnect_max_delay)

    def _session(self) -> bool:
        """One connection's worth of streaming. True when the stream is complete."""
        cfg = self.cfg
        conn = connect(cfg)
        try:
            facts = read_facts(conn)
            self.stats.connects += 1
            if self.facts is None:
                refuse_statement_format(facts)
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
            if end is not None and start_reached(start, end):
                return True
            checksum = CHECKSUM_CRC32 if facts.checksum == "CRC32" else CHECKSUM_OFF
            request_dump(conn, cfg, facts, start, report_host=self._report_host)
            sock = self._socket.take(conn, max(1.0, 2 * cfg.heartbeat_seconds))
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
        found = mariadb_start_state(conn, self.cfg, start)
        if found is None:
            return start
        return self._learned(found)

    @property
    def backed_up(self) -> bool:
        """The reader holds an item the consumer has no room for yet (``HandOff``)."""
        return self._handoff.backed_up

    def _learned(self, position: StreamPosition) -> StreamPosition:
        """``position`` (the current one with its GTID state) from now on; the consumer is
        told in order with the transactions."""
        self.position = position
        if self.origin is not None:
            self.origin = self.origin.with_gtid_of(position)
        log.info("gtid state of the stream position learnt", position=position.describe())
        self._handoff.deliver(GtidStateLearned(position), now=False)
        return position

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
        decoder.parser.buffers = self._buffers
        decoder.parser.statements_only = self._statements_only
        assembler = TransactionAssembler(part_rows=self._part_rows, part_bytes=self._part_bytes)
        self._drops_seen = 0
        self._waiting_run = None
        try:
            return self._read_events(sock, decoder, assembler, end, behind)
        except BaseException:
            # The transaction that would close a run did not read (a bad event, a broken
            # connection): the run's whole transactions are handed over before the error, so
            # the stop stands right before its cause, as without runs.
            waiting, self._waiting_run = self._waiting_run, None
            if waiting is not None:
                self._hand_over(waiting.unclosed(), assembler)
            raise
        finally:
            self._handoff.flush()  # whatever was handed over (position moved) reaches the consumer

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
        by_type = self.stats.events_by_type
        past_start = False  # an event past the preamble came: an ERR now is not the start's
        # Before the first event past the start, the server may be silent for long while
        # heartbeats are not late: it sends the new file's preamble (rotate, format
        # description, GTID list) at once, then reads its binlog up to the start position,
        # sending nothing, and heartbeats only once it waits at the end. A start early in a
        # large binlog (or one on a slow disk) took longer than 2x the heartbeat period and
        # was reported as a silent server. So the silence allowed grows until then (only for
        # a start behind the binlog's end: at the end there is nothing to read up to).
        scanning = behind
        # a read of statements only delivers nothing of a transaction of rows: whole ones are
        # passed over natively (their events framed and CRC32-checked all the same)
        skipping = self._statements_only and tracker is None
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
            self.stats.heard_at = time.time()  # the source's silence, whatever the pipeline does
            self.stats.streaming = self.stats.streaming_seen = True
            decoder.feed(view[:count])  # copied into the framer at once
            while True:
                if skipping and not assembler.in_transaction:
                    passed = self._skip_row_transactions(decoder, end)
                    past_start |= passed > 0
                    if scanning and passed:
                        scanning = False  # past the start: heartbeats are due from now
                        sock.settimeout(silence)
                elif self.runs and self._waiting_run is None and not assembler.in_transaction:
                    pending = self._waiting_run = self._take_run(decoder, end)
                    if pending is not None:
                        past_start = True
                        for code, count in pending.counts:
                            by_type[code] = by_type.get(code, 0) + count
                        if scanning:
                            scanning = False  # past the start: heartbeats are due from now
                            sock.settimeout(silence)
                try:
                    event = decoder.next_event()
                except ServerError as exc:
                    raise server_error(
                        exc,
                        at_start=not past_start,
                        position=self.position,
                        user=self.cfg.user,
                    ) from exc
                if isinstance(event, _NeedData):
                    break
                if isinstance(event, EndOfStream):
                    raise SourceUnavailableError("the server ended the binlog dump")
                code = event.header.type_code
                by_type[code] = by_type.get(code, 0) + 1
                if code not in _PREAMBLE:
                    past_start = True
                if scanning and code not in _PREAMBLE:
                    scanning = False  # at the start position: heartbeats are due from now
                    sock.settimeout(silence)
                for fed in feed(assembler, tracker, event):
                    item: StreamItem = fed
                    waiting = self._waiting_run
                    if waiting is not None:  # the transaction read right after a run
                        item = waiting.closed_by(fed)
                        self._waiting_run = None
                    if not self._hand_over(item, assembler):
                        return False
                    if end is not None and self._reached(item, assembler, end):
                        return True
            # Caught up (the read did not fill the buffer): hand over at once, latency is what
            # counts. Behind: batch the hand-overs, throughput is.
            now = time.monotonic()
            if count < len(buffer) or now - handed_at >= _HAND_OVER_SECONDS:
                if not self._handoff.flush():
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

    def _skip_row_transactions(self, decoder: DumpStreamDecoder, end: StreamPosition | None) -> int:
        """Between transactions of a read of statements only: pass the buffered transactions
        of rows over, moving the position as handing each over would; how many."""
        assert self.position is not None
        position, file = self.position, decoder.parser.file
        skipped, mariadb, mysql = decoder.skip_row_transactions(*skip_bounds(end, file, position))
        if not skipped:
            return 0
        self.position = position.after_many(mariadb, mysql, file, decoder.parser.position)
        self.stats.transactions += skipped
        self.stats.transactions_passed_over += skipped
        return skipped

    def _take_run(self, decoder: DumpStreamDecoder, end: StreamPosition | None) -> TakenRun | None:
        """Between transactions: the buffered transactions of rows the native core can take,
        as a run that the next transaction closes (None: none)."""
        assert self.position is not None
        decoder.runs = True
        limit, watch, budget = skip_bounds(end, decoder.parser.file, self.position)
        return decoder.take_run(
            limit,
            watch,
            budget,
            # (fewer image bytes than either: a transaction the assembler would hand out in
            # parts is never taken whole into a run)
            max_images=min(self._part_rows or _NO_PARTS, self._part_bytes or _NO_PARTS),
            max_bytes=_RUN_BYTES,
        )

    def _abort_parts(self, *, now: bool) -> bool:
        """The transaction whose parts went out will not end here: the consumer drops them."""
        gtid = self._open_parts if isinstance(self._open_parts, str) else None
        self._open_parts = False
        return self._handoff.deliver(TransactionAborted(gtid), now=now)

    def _hand_over(self, item: StreamItem, assembler: TransactionAssembler) -> bool:
        assert self.position is not None
        if assembler.discarded_incomplete != self._drops_seen:
            self.stats.discarded_incomplete += assembler.discarded_incomplete - self._drops_seen
            self._drops_seen = assembler.discarded_incomplete
            # a group the assembler dropped: its end never came (the next group or a
            # restarted server's first event came first), so it never committed; if it was
            # the one whose parts went out, they must not land with what follows
            if self._open_parts is not False and not self._abort_parts(now=False):
                return False
        if isinstance(item, TransactionPart):
            self._open_parts = item.gtid if item.gtid is not None else True
        elif isinstance(item, TransactionRun):
            taken = item.taken
            self.position = self.position.after_many(
                taken.mariadb, taken.mysql, taken.file, taken.end_position
            )
            self.stats.transactions += taken.transactions
            self.stats.transactions_in_runs += taken.transactions
            if item.last is not None:
                self._took(item.last)
            elif self._tracker is not None:
                self._tracker.mark()
        elif isinstance(item, Transaction):
            self._took(item)
            if self._tracker is None and item.ending is Ending.DDL and may_change_columns(item):
                forget_schemas(self._schema_lookup)
            if (
                self._statements_only
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
        return self._handoff.deliver(item, now=False)

    def _took(self, transaction: Transaction) -> None:
        """A whole transaction is handed over: the stream stands after it."""
        assert self.position is not None
        self._open_parts = False
        self.stats.transactions += 1
        self.position = self.position.after(
            transaction.typed_gtid, transaction.end_file, transaction.end_position
        )
        if self._tracker is not None:
            self._tracker.mark()

    def _reached(
        self, item: StreamItem, assembler: TransactionAssembler, end: StreamPosition
    ) -> bool:
        assert self.position is not None
        return end_reached(
            item, in_transaction=assembler.in_transaction, position=self.position, end=end
        )
