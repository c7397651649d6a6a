"""Prometheus metrics and the health/readiness endpoints, served on one small HTTP port.

``Metrics`` owns its own ``CollectorRegistry`` (never the process-global one, so two services or
two tests in one process cannot collide) and gives the service typed calls: ``batch_committed``,
``observe_event_time``/``observe_heartbeat``, ``set_connected``, ``checkpoint_saved``... Every
counter is a ``CumulativeCounter``, which is bumped with ``inc`` or *synced* to a cumulative total
kept elsewhere. The objects that do the work already count (``StreamStats``, ``PipelineStats``,
``NotifierStats``), so the service need not call into metrics on the hot path: it can register a
scrape hook (``Metrics.on_scrape``) that syncs those totals right before each scrape.

Sync from cumulative totals: ``counter.sync(*labels, total=n)`` adds how much ``n`` grew since
the last sync of the same label values, so the exported counter stays monotonic however often it
is synced. A total *smaller* than the last one means its source started again from zero (a new
stream object after a restart), and the whole new total is added, as Prometheus' ``rate()``
treats a counter reset. When the source object is replaced, call ``source_replaced()`` so the
next total counts from zero even if it has already outgrown the old one. Feed one counter either
by ``inc`` or by ``sync`` from one source; ``inc`` calls do not move the sync baseline.

Replication lag (``replicator_replication_lag_seconds``) is the age of the last committed change:
"now minus the commit time (``_ts``) of the newest transaction of the last committed batch", set
at each commit (``observe_event_time``). What the reader has seen says nothing about what has
landed, so it is never measured from there. Two protocol facts shape it (docs/operations.md,
Metrics): heartbeats and artificial events (the fake ROTATE that opens a dump) carry timestamp 0, so
``observe_event_time`` ignores any timestamp <= 0; and the server sends a heartbeat only when it
has had nothing to send for a heartbeat period, i.e. we have read everything, so a heartbeat with
everything read committed (``observe_heartbeat``) sets the lag to 0. Without it an idle source
would look ever further behind. A stalled connection sends neither, so the lag would freeze at
its last value: ``replicator_source_silence_seconds`` (seconds since the last event or heartbeat,
computed at scrape time) is the metric to alert on for that, and
``replicator_checkpoint_age_seconds`` for a commit that stalls. The checkpoint age is also
computed at scrape time; until a checkpoint is known it counts from start-up, so a process that
never checkpoints still alerts.

No secret can reach a metric: the only labels are event types, tables (``db.table``) and ops.
Health and readiness reasons are short texts served by ``/readyz``, never metric labels.

``MetricsServer`` serves ``/metrics`` (Prometheus text format, or OpenMetrics when the
scraper's ``Accept`` asks for it), ``/healthz`` (200 while the loop answers and the service is not
in a fatal state; a blocked loop cannot answer, which the probe's own timeout turns into a
failure) and ``/readyz`` (200 while streaming from the source with no failing commit; 503 with the
reason otherwise); 404 for other paths, 405 for methods other than GET and HEAD. aiohttp's server
does the HTTP on the daemon's loop, with its limits and timeouts (see the class). Rendering runs
inline on the loop (it takes well under a millisecond for this registry); health and readiness
checks must be as quick.
"""

from __future__ import annotations

import asyncio
import logging
import math
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Final, Protocol, TypeVar

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.exposition import choose_encoder

from .errors import ConfigError

if TYPE_CHECKING:  # aiohttp is imported when a server starts (a quarter second at start-up)
    from aiohttp import web

__all__ = [
    "Check",
    "CumulativeCounter",
    "Metrics",
    "MetricsServer",
    "Status",
]

log = structlog.get_logger("replicator.metrics")

Clock = Callable[[], float]


class SnapshotFigures(Protocol):
    """What the metrics read of the snapshot's progress (``snapshot.runner.SnapshotProgress``)."""

    @property
    def tables_left(self) -> int: ...
    @property
    def rows(self) -> int: ...
    @property
    def estimate(self) -> int | None: ...
    @property
    def eta_seconds(self) -> float | None: ...


LabelValues = tuple[str, ...]
_Labels = TypeVar("_Labels", bound=tuple[str, ...])

_REASON_CHARS: Final = 200


def _short(reason: str) -> str:
    """One line, at most ``_REASON_CHARS`` characters: fit for a probe's response body."""
    text = " ".join(reason.split())
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 3] + "..."


@dataclass(frozen=True, slots=True)
class Status:
    """The answer of a health or readiness check: ``ok``, or not, with a short reason."""

    ok: bool
    reason: str = ""


Check = Callable[[], Status]


class CumulativeCounter:
    """A Prometheus counter that is bumped (``inc``) or synced to a cumulative total (``sync``).

    Label values are positional, in the order of the counter's label names.
    """

    __slots__ = ("_arity", "_children", "_counter", "_synced", "_values")

    def __init__(
        self,
        registry: CollectorRegistry,
        name: str,
        documentation: str,
        labelnames: tuple[str, ...] = (),
    ) -> None:
        self._counter = Counter(name, documentation, labelnames, registry=registry)
        self._arity = len(labelnames)
        self._children: dict[LabelValues, Counter] = {}
        self._values: dict[LabelValues, float] = {}
        self._synced: dict[LabelValues, float] = {}

    def _child(self, labels: LabelValues) -> Counter:
        child = self._children.get(labels)
        if child is None:
            if len(labels) != self._arity:
                raise ValueError(f"expected {self._arity} label values, got {len(labels)}")
            child = self._counter.labels(*labels) if labels else self._counter
            self._children[labels] = child
        return child

    def inc(self, *labels: str, amount: float = 1) -> None:
        """Add ``amount`` (>= 0) to the series with these label values."""
        if amount < 0:
            raise ValueError(f"a counter only goes up (amount={amount})")
        if amount:
            self._child(labels).inc(amount)
            self._values[labels] = self._values.get(labels, 0) + amount

    def sync(self, *labels: str, total: float) -> None:
        """Follow a cumulative ``total`` kept elsewhere: add how much it grew since last time.

        A total below the previous one means the source restarted from zero: all of it is new.
        """
        if total < 0:
            raise ValueError(f"a cumulative total cannot be negative (total={total})")
        last = self._synced.get(labels, 0)
        self._synced[labels] = total
        self.inc(*labels, amount=total - last if total >= last else total)

    def sync_many(self, totals: Mapping[_Labels, float]) -> None:
        """``sync`` each label-values tuple to its total, e.g. a ``{("db.t", "c"): n}``."""
        for labels, total in totals.items():
            self.sync(*labels, total=total)

    def source_replaced(self) -> None:
        """The object whose totals are synced was replaced: count the next totals from zero."""
        self._synced.clear()

    def value(self, *labels: str) -> float:
        """What this counter exports for these label values (0 if never counted)."""
        return self._values.get(labels, 0)


class Metrics:
    """Every metric the replicator exports, in a registry of its own (``self.registry``).

    ``clock`` gives wall-clock seconds since the epoch (binlog timestamps are epoch seconds);
    tests pass a fake one.
    """

    def __init__(self, *, clock: Clock = time.time, stall_seconds: float = math.inf) -> None:
        self.registry = CollectorRegistry()
        self._clock = clock
        # readiness fails once nothing came through the stream for this long (a stalled
        # reader, socket or lookup), even while the connection still counts as up
        self._stall_seconds = stall_seconds
        self._started = clock()
        self._hooks: list[Callable[[], None]] = []
        r = self.registry

        self.events = CumulativeCounter(
            r, "replicator_binlog_events", "Binlog events read, by event type.", ("type",)
        )
        self.row_changes = CumulativeCounter(
            r,
            "replicator_row_changes",
            "Row changes committed to the landing zone, by table (db.table) and op (c/u/d/r).",
            ("table", "op"),
        )
        self.binlog_bytes = CumulativeCounter(
            r, "replicator_binlog_read_bytes", "Bytes of binlog read from the source."
        )
        self.batches = CumulativeCounter(
            r, "replicator_batches_committed", "Batches committed (files, manifest, checkpoint)."
        )
        self.rows = CumulativeCounter(
            r, "replicator_rows_committed", "Row changes committed in batches."
        )
        self.parquet_bytes = CumulativeCounter(
            r, "replicator_parquet_written_bytes", "Bytes of Parquet files committed."
        )
        self.reconnects = CumulativeCounter(
            r,
            "replicator_source_reconnects",
            "Outages of the source: losses of the replication connection (or failures to make "
            "it), one each however many attempts it takes to stream again.",
        )
        self.reconnect_attempts = CumulativeCounter(
            r,
            "replicator_source_reconnect_attempts",
            "Attempts to connect to the source again after an outage began, failed or not.",
        )
        self.crc_errors = CumulativeCounter(
            r, "replicator_crc_errors", "Binlog events whose CRC32 did not match."
        )
        self.transactions_in_runs = CumulativeCounter(
            r,
            "replicator_transactions_in_runs",
            "Transactions of rows the native core took many at a time (runs).",
        )
        self.zero_dates = CumulativeCounter(
            r,
            "replicator_zero_dates_nulled",
            "Zero or invalid dates and timestamps written as null.",
        )
        self.notifications_dropped = CumulativeCounter(
            r,
            "replicator_notifications_dropped",
            "Commit notifications dropped (queue full, unencodable, refused by the broker on "
            "every try, or left at shutdown).",
        )
        self.commit_failures = CumulativeCounter(
            r, "replicator_commit_failures", "Batch commits that failed."
        )
        self.xa_transactions = CumulativeCounter(
            r,
            "replicator_xa_transactions",
            "XA transactions by outcome: prepared (held), committed (landed), rolled_back "
            "(dropped), unknown (an XA COMMIT whose PREPARE came before the stream's start).",
            ("outcome",),
        )

        self._lag = Gauge(
            "replicator_replication_lag_seconds",
            "Age of the last committed change: seconds between the commit time (_ts) of the "
            "newest transaction of the last committed batch and that commit; 0 after a "
            "heartbeat with everything read committed.",
            registry=r,
        )
        self._lag_value = 0.0
        self._last_message: float | None = None  # the pipeline took something from the stream
        self._heard: Callable[[], float] = lambda: 0.0  # bytes came from the source (``hears``)
        Gauge(
            "replicator_source_silence_seconds",
            "Seconds since the last event or heartbeat from the source (since start before one).",
            registry=r,
        ).set_function(self._silence)
        self._last_checkpoint: float | None = None
        Gauge(
            "replicator_checkpoint_age_seconds",
            "Seconds since the checkpoint last advanced (since start before one is known).",
            registry=r,
        ).set_function(self._checkpoint_age)
        self._connected = Gauge(
            "replicator_stream_connected",
            "1 while the binlog dump is under way on a live connection, else 0.",
            registry=r,
        )
        self._connected_value = False
        self.behind_bytes = Gauge(
            "replicator_binlog_behind_bytes",
            "Binlog bytes between our position and the end of the source's binlog "
            "(refreshed every service.progress_seconds).",
            registry=r,
        )
        self._snapshot_tables = Gauge(
            "replicator_snapshot_tables_pending",
            "Tables the snapshot has still to read, the one being read included.",
            registry=r,
        )
        self._snapshot_rows = Gauge(
            "replicator_snapshot_table_rows",
            "Rows of the table being snapshotted that have landed (its rows as 'r' are in "
            "replicator_row_changes_total too).",
            registry=r,
        )
        self._snapshot_estimate = Gauge(
            "replicator_snapshot_table_rows_estimate",
            "The source's estimate of the rows of the table being snapshotted (NaN: none).",
            registry=r,
        )
        self._snapshot_eta = Gauge(
            "replicator_snapshot_table_eta_seconds",
            "Seconds until the table being snapshotted is read, at this run's rate (NaN: not "
            "known yet).",
            registry=r,
        )

        self._last_batch = Gauge(
            "replicator_last_batch_number", "Number of the last committed batch.", registry=r
        )
        self._last_batch_rows = Gauge(
            "replicator_last_batch_rows", "Row changes in the last committed batch.", registry=r
        )
        self._last_batch_bytes = Gauge(
            "replicator_last_batch_bytes", "Parquet bytes of the last committed batch.", registry=r
        )
        self._last_batch_transactions = Gauge(
            "replicator_last_batch_transactions",
            "Source transactions in the last committed batch.",
            registry=r,
        )
        self._last_batch_seconds = Gauge(
            "replicator_last_batch_duration_seconds",
            "How long writing and committing the last batch took.",
            registry=r,
        )
        self._last_batch_time = Gauge(
            "replicator_last_batch_timestamp_seconds",
            "When the last batch was committed (seconds since the epoch).",
            registry=r,
        )

        self._fatal = ""
        self._commit_error = ""

    # -- the service's calls ---------------------------------------------------------------

    def batch_committed(
        self,
        *,
        batch: int,
        rows: int,
        bytes_written: int,
        rows_by_table_op: Mapping[tuple[str, str], int] | None = None,
        transactions: int = 0,
        seconds: float = 0.0,
    ) -> None:
        """A batch is durable and the checkpoint advanced: count it, refresh the last-batch
        gauges and the checkpoint time, and clear a previous commit failure.

        ``rows_by_table_op`` is this batch's ``{("db.table", "c"): n}``; leave it out when
        ``row_changes`` is synced from cumulative totals instead.
        """
        now = self._clock()
        self.batches.inc()
        self.rows.inc(amount=rows)
        self.parquet_bytes.inc(amount=bytes_written)
        for (table, op), count in (rows_by_table_op or {}).items():
            self.row_changes.inc(table, op, amount=count)
        self._last_batch.set(batch)
        self._last_batch_rows.set(rows)
        self._last_batch_bytes.set(bytes_written)
        self._last_batch_transactions.set(transactions)
        self._last_batch_seconds.set(seconds)
        self._last_batch_time.set(now)
        self._last_checkpoint = now
        self._commit_error = ""

    def snapshot_progress(self, progress: SnapshotFigures) -> None:
        """Where the snapshot stands (``snapshot.runner.SnapshotProgress``)."""
        self._snapshot_tables.set(progress.tables_left)
        self._snapshot_rows.set(progress.rows)
        estimate, eta = progress.estimate, progress.eta_seconds
        self._snapshot_estimate.set(math.nan if estimate is None else estimate)
        self._snapshot_eta.set(math.nan if eta is None else eta)

    def sources_replaced(self) -> None:
        """The stream, pipeline and notifier whose totals are synced were made anew (a resync
        runs the stream again): their next totals count from zero."""
        for counter in (
            self.events,
            self.row_changes,
            self.binlog_bytes,
            self.reconnects,
            self.reconnect_attempts,
            self.crc_errors,
            self.transactions_in_runs,
            self.notifications_dropped,
            self.xa_transactions,
        ):
            counter.source_replaced()

    def commit_failed(self, reason: str) -> None:
        """A batch commit failed; readiness reports it until the next ``batch_committed``.
        ``reason`` is served by ``/readyz``: keep secrets out of it."""
        self.commit_failures.inc()
        self._commit_error = _short(reason) or "unknown error"

    def checkpoint_saved(self, at: float | None = None, *, batch: int = 0) -> None:
        """The checkpoint advanced at ``at`` (epoch seconds; default now). Call it at start-up
        with the recovered checkpoint's time and ``batch``: the last batch's number and time
        are then those of the batch committed before the start (its rows, bytes and duration
        are known from this process's first commit on)."""
        self._last_checkpoint = self._clock() if at is None else at
        if batch > 0:
            self._last_batch.set(batch)
            if at is not None:
                self._last_batch_time.set(at)

    def observe_event_time(self, ts_seconds: float) -> None:
        """A batch committed whose newest transaction has commit time ``ts_seconds`` (what
        the stream delivered earlier): the lag is now its age. Timestamps <= 0 (heartbeats,
        artificial events) carry no time and are ignored. A timestamp ahead of our clock
        (clock skew) counts as no lag."""
        if ts_seconds <= 0:
            return
        now = self._clock()
        self._last_message = now
        self._set_lag(max(0.0, now - ts_seconds))

    def observe_progress(self) -> None:
        """Something other than a timed event came through the stream (a part of a large
        transaction, a control event): the stream moves, the lag is unchanged."""
        self._last_message = self._clock()

    def observe_heartbeat(self) -> None:
        """A heartbeat arrived with everything read committed: the source has nothing more to
        send and nothing is waiting to land, so the lag is 0. (A heartbeat while batches are
        still to commit is ``observe_progress``.)"""
        self._last_message = self._clock()
        self._set_lag(0.0)

    def set_connected(self, connected: bool) -> None:
        """Whether the dump is under way on a live connection (feeds readiness too)."""
        self._connected_value = connected
        self._connected.set(1 if connected else 0)

    def fatal(self, reason: str) -> None:
        """The service is in a state it will not recover from: health and readiness fail."""
        self._fatal = _short(reason) or "unknown error"

    def hears(self, heard: Callable[[], float]) -> None:
        """``heard()``: when bytes last came from the source (epoch seconds; 0 never), as the
        reader thread saw them, whether or not the pipeline took them yet: the silence is the
        source's, and a pipeline that takes nothing (a commit that hangs) is told apart."""
        self._heard = heard

    def on_scrape(self, hook: Callable[[], None]) -> None:
        """Run ``hook`` before each render, e.g. to ``sync`` counters from a stats object."""
        self._hooks.append(hook)

    # -- reading -----------------------------------------------------------------------------

    @property
    def lag_seconds(self) -> float:
        return self._lag_value

    @property
    def connected(self) -> bool:
        return self._connected_value

    def health(self) -> Status:
        if self._fatal:
            return Status(False, f"fatal: {self._fatal}")
        return Status(True, "ok")

    def readiness(self) -> Status:
        if self._fatal:
            return Status(False, f"fatal: {self._fatal}")
        if not self._connected_value:
            return Status(False, "not streaming from the source")
        silence = self._silence()
        if silence > self._stall_seconds:
            return Status(False, f"stalled: nothing from the source stream for {silence:.0f} s")
        idle = self._idle()
        if idle > self._stall_seconds:
            return Status(
                False,
                f"stalled: nothing taken from the source stream for {idle:.0f} s while it "
                "streams (a commit that does not finish? see replicator_checkpoint_age_seconds)",
            )
        if self._commit_error:
            return Status(False, f"last commit failed: {self._commit_error}")
        return Status(True, "ready")

    def render(self, accept: str = "") -> tuple[bytes, str]:
        """Run the scrape hooks, then encode the registry for a scraper sending ``accept``:
        the Prometheus text format, or OpenMetrics when asked. Returns (body, content type)."""
        for hook in self._hooks:
            try:
                hook()
            except Exception as exc:  # a broken hook must not take the other metrics down
                log.warning("metrics scrape hook failed", hook=repr(hook), error=repr(exc))
        encoder, content_type = choose_encoder(accept)
        return encoder(self.registry), content_type

    # -- internals ---------------------------------------------------------------------------

    def _set_lag(self, seconds: float) -> None:
        self._lag_value = seconds
        self._lag.set(seconds)

    def _silence(self) -> float:
        """Seconds since the source last sent something (taken by the pipeline or not)."""
        return min(self._idle(), max(0.0, self._clock() - self._heard()))

    def _idle(self) -> float:
        """Seconds since the pipeline last took something from the stream."""
        since = self._started if self._last_message is None else self._last_message
        return max(0.0, self._clock() - since)

    def _checkpoint_age(self) -> float:
        since = self._started if self._last_checkpoint is None else self._last_checkpoint
        return max(0.0, self._clock() - since)


# -- the HTTP side ---------------------------------------------------------------------------

_TEXT: Final = "text/plain; charset=utf-8"
_BACKLOG: Final = 128  # aiohttp's sites' default
_SHUTDOWN_SECONDS: Final = 1.0  # close() waits this long at most for answers under way


class _ToStructlog(logging.Handler):
    """aiohttp reports through the standard logging; its records join ours on structlog. A
    malformed request is the client's mistake: debug, without a traceback."""

    def emit(self, record: logging.LogRecord) -> None:
        from aiohttp.http_exceptions import HttpProcessingError  # noqa: PLC0415 - see the imports

        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, HttpProcessingError):
            log.debug("malformed http request", error=str(error))
        elif record.exc_info:
            log.log(record.levelno, record.getMessage(), exc_info=record.exc_info)
        else:
            log.log(record.levelno, record.getMessage())


_server_log = logging.getLogger("replicator.metrics.http")
_server_log.addHandler(_ToStructlog())
_server_log.setLevel(logging.DEBUG)  # structlog's own level decides what is written
_server_log.propagate = False


class MetricsServer:
    """``/metrics``, ``/healthz`` and ``/readyz`` on one port; ``port=0`` picks a free one.

    ``health`` and ``ready`` default to ``metrics.health`` and ``metrics.readiness``; any
    callable returning a ``Status`` quickly will do. A check that raises counts as failing.

    aiohttp's low-level server does the HTTP, with its own limits on request and header lines
    and the number of headers (a malformed or oversized request gets 400). ``idle_timeout`` is
    its keep-alive timeout, which also runs from the moment a connection opens: a connection
    with no whole request in that time is closed, however many bytes dribble in, so idle or
    slow clients hold a connection that long at most. It serves on the daemon's event loop and
    leaves its signals alone.

    ``start`` is ``listen`` then ``serve``. ``listen`` binds and listens on the port (a port
    taken is a ``ConfigError`` there) without aiohttp; ``serve`` imports aiohttp (a tenth of a
    second) and answers, the connections made in between included: they wait in the socket's
    backlog. The daemon listens before it reads the source and serves once its stream has
    begun (``service``), so that the import does not hold up its first binlog request.
    """

    def __init__(
        self,
        metrics: Metrics,
        *,
        host: str,
        port: int,
        health: Check | None = None,
        ready: Check | None = None,
        idle_timeout: float = 5.0,
    ) -> None:
        self.metrics = metrics
        self._host = host
        self._requested_port = port
        self._health = health or metrics.health
        self._ready = ready or metrics.readiness
        self._idle_timeout = idle_timeout
        self._runner: web.ServerRunner | None = None
        self._started = False
        self._served = False
        self._sockets: list[socket.socket] = []  # bound and listening (``listen``)
        self._addresses: tuple[tuple[str, int], ...] = ()
        self._routes: dict[str, Callable[[web.BaseRequest], web.Response]] = {
            "/metrics": self._metrics,
            "/healthz": lambda _: self._probe(self._health, "health"),
            "/readyz": lambda _: self._probe(self._ready, "readiness"),
        }

    async def start(self) -> None:
        await self.listen()
        await self.serve()

    async def listen(self) -> None:
        """Bind and listen on every address the host resolves to, as asyncio's
        ``create_server`` (which aiohttp's sites use) does: SO_REUSEADDR, IPv6 sockets
        IPv6-only, aiohttp's backlog. Nothing is answered until ``serve``."""
        if self._started:
            raise RuntimeError("the metrics server was already started")
        self._started = True
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(
                self._host or None,
                self._requested_port,
                type=socket.SOCK_STREAM,
                flags=socket.AI_PASSIVE,
            )
            # "::" alone takes IPv4 too (as on most Linux hosts by default, whatever the
            # host's setting), so probes and `status` that ask 127.0.0.1 reach it; where IPv4
            # has its own socket (all addresses, "" or a name), IPv6 keeps to IPv6
            v6only = len({info[0] for info in infos}) > 1
            for family, kind, proto, _, address in dict.fromkeys(infos):
                sock = socket.socket(family, kind, proto)
                self._sockets.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, True)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, v6only)
                try:
                    sock.bind(address)
                except OSError as err:  # worded as asyncio words it
                    raise OSError(
                        err.errno,
                        f"error while attempting to bind on address {address!r}: "
                        f"{(err.strerror or str(err)).lower()}",
                    ) from None
                sock.listen(_BACKLOG)
                sock.setblocking(False)
        except OSError as exc:
            self._close_sockets()
            raise ConfigError(
                f"cannot listen for metrics on {self._host}:{self._requested_port}: "
                f"{exc.strerror or exc}",
                hint="set another port (service.http_port, or REPLICATOR_SERVICE__HTTP_PORT in "
                "the environment; 0 picks a free one) or address (service.http_host), or stop "
                "what is using that port",
            ) from exc
        # (host, port) of each socket; IPv6 socket names carry flow info and scope id too
        names = [sock.getsockname() for sock in self._sockets]
        self._addresses = tuple((str(a[0]), int(a[1])) for a in names)
        log.info("metrics server listening", addresses=[f"{h}:{p}" for h, p in self._addresses])

    async def serve(self) -> None:
        """Answer on the sockets ``listen`` opened (once)."""
        if not self._sockets:
            raise RuntimeError("the metrics server is not listening")
        if self._served:
            raise RuntimeError("the metrics server is already serving")
        self._served = True
        from aiohttp import web  # noqa: PLC0415 - see the imports

        server = web.Server(
            self._handle,
            logger=_server_log,
            access_log=None,  # no line per scrape or probe
            keepalive_timeout=self._idle_timeout,
            lingering_time=self._idle_timeout,  # a request body we never read: drained so long
        )
        # the daemon handles SIGTERM/SIGINT itself (a graceful drain, then exit)
        runner = web.ServerRunner(server, handle_signals=False, shutdown_timeout=_SHUTDOWN_SECONDS)
        await runner.setup()
        self._runner = runner  # ``close`` cleans it up from here on
        for sock in self._sockets:
            await web.SockSite(runner, sock, backlog=_BACKLOG).start()

    def _close_sockets(self) -> None:
        sockets, self._sockets = self._sockets, []
        for sock in sockets:
            sock.close()

    @property
    def addresses(self) -> tuple[tuple[str, int], ...]:
        """(host, port) of every listening socket (a name like ``localhost`` may give two)."""
        if not self._addresses:
            raise RuntimeError("the metrics server is not started")
        return self._addresses

    @property
    def port(self) -> int:
        """The bound port (of the first socket, when the host resolved to several)."""
        return self.addresses[0][1]

    async def close(self) -> None:
        """Stop listening and drop the connections still open. Safe to call twice."""
        runner, self._runner = self._runner, None
        if runner is None and not self._sockets:
            return
        if runner is not None:
            await runner.cleanup()
        self._close_sockets()  # what was never served (closing twice does nothing)
        self._addresses = ()
        log.info("metrics server closed")

    async def __aenter__(self) -> MetricsServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- one request -------------------------------------------------------------------------

    async def _handle(self, request: web.BaseRequest) -> web.Response:
        route = self._routes.get(request.path)
        if route is None:
            return _text(404, "not found: try /metrics, /healthz or /readyz")
        if request.method not in ("GET", "HEAD"):
            return _text(405, "method not allowed: use GET or HEAD", allow="GET, HEAD")
        try:
            return route(request)
        except Exception:
            log.exception("metrics endpoint failed", path=request.path)
            return _text(500, "internal error")

    def _metrics(self, request: web.BaseRequest) -> web.Response:
        from aiohttp import web  # noqa: PLC0415 - see the imports

        body, content_type = self.metrics.render(",".join(request.headers.getall("Accept", [])))
        return web.Response(
            body=body, headers={"Content-Type": content_type, "Cache-Control": "no-store"}
        )

    @staticmethod
    def _probe(check: Check, what: str) -> web.Response:
        try:
            status = check()
        except Exception as exc:
            log.warning(f"{what} check raised", error=repr(exc))
            return _text(503, f"{what} check raised {type(exc).__name__}")
        if status.ok:
            return _text(200, _short(status.reason) or "ok")
        return _text(503, _short(status.reason) or f"{what} check failed")


def _text(status: int, text: str, *, allow: str = "") -> web.Response:
    from aiohttp import web  # noqa: PLC0415 - see the imports

    headers = {"Content-Type": _TEXT, "Cache-Control": "no-store"}
    if allow:
        headers["Allow"] = allow
    return web.Response(status=status, body=(text + "\n").encode("utf-8"), headers=headers)
