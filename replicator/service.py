"""``replicator run``: source -> pipeline -> landing zone, as named tasks of one TaskGroup.

Start-up finishes or rolls back any half-done commit (``LandingZone.recover``), then resumes
from the checkpoint (or the configured start). The tasks: ``replicate`` (stream into batches,
commit), ``notify`` (MQTT, best effort), ``http`` (/metrics, /healthz, /readyz) and
``progress`` (bytes behind the source, a line on a terminal while catching up). The first
SIGTERM/SIGINT stops reading (what was decoded and not taken is dropped), commits the batch in
progress if that is done within ``service.shutdown_timeout`` or else abandons it, and exits 0,
however large the backlog: the checkpoint is the truth, and the next start reads the rest
again. A second signal exits at once (safe by the commit protocol: the next start recovers).
The lag (logs, ``/metrics``) is the age of the newest change of the last committed batch.

Metrics are not counted on the hot path: the stream, pipeline and notifier keep running totals,
which a scrape hook copies into the Prometheus counters just before each scrape.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import logging
import os
import secrets
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog

from .binlog import events as ev
from .binlog.constants import EventType
from .binlog.position import StreamPosition, covers, is_past, start_position
from .checkpoint import Checkpoint, position_from_json
from .config import Config, FilterConfig
from .errors import IntegrityError, PositionGoneError, ReplicatorError
from .metrics import Metrics, MetricsServer, Status
from .notify import Notifier
from .pipeline.pipeline import Pipeline, PipelineInterrupted, PipelineStats, TableFilter
from .progress import CatchUpTracker, bytes_behind, heard_at
from .schema.history import Point, RewindError, SchemaChange, SchemaHistory, resync_change
from .schema.ledger import SchemaLedger
from .schema.model import Catalog
from .schema.tracker import SchemaTracker
from .sink import compaction
from .sink.landing import FaultInjector, LandingZone
from .sink.lock import LeaseLock, writer_lock
from .snapshot.columns import column_defs
from .snapshot.requests import read_requests
from .snapshot.runner import SnapshotRunner, SnapshotStopped
from .source.connection import describe_source, open_connection
from .source.continuity import landed, prove
from .source.errors import SourceUnavailableError
from .source.items import StreamItem
from .source.seeding import apply_skipped_ddl, seed_history
from .source.server_info import BinlogFile, server_info
from .source.stream import ReplicaStream

log = structlog.get_logger("replicator")
_T = TypeVar("_T")
GUARD_SECONDS = 2.0
HTTP_SERVE_WITHIN = 0.25
"""The HTTP port listens before the source is read and answers once the stream has begun, or
this many seconds after it listens if that comes first (``_serve_http``)."""
OVERRUN_SECONDS = 1.0
"""How long past ``service.shutdown_timeout`` a stop may still have work under way (a commit
in the writer thread, a call to the source) before the process ends without it."""


@dataclass(slots=True)
class RunOptions:
    stop_at_end: bool = False
    shutdown_timeout: float | None = None  # None: service.shutdown_timeout from the config
    progress_to_terminal: bool | None = None  # None: when stderr is a terminal
    run_for: float | None = None  # stop (as on SIGTERM) after this many seconds
    # the process is the daemon's own (`replicator run`): a stop that overruns ends it
    watchdog: bool = False


class Service:
    def __init__(self, config: Config, options: RunOptions) -> None:
        self.config = config
        self.options = options
        self.zone = LandingZone(config.sink, fault=FaultInjector.from_env())
        self.lock = writer_lock(self.zone.store, config.sink.object_store.lease_seconds)
        self._stop = asyncio.Event()
        self._signals = 0
        self._deadline: float | None = None  # monotonic: when a stop must be done by
        self._abandoned = False  # the stop ran out of time: what was not committed is dropped
        self._unfinished = False  # ... and the writer thread was still busy at the end
        self.pipeline: Pipeline | None = None
        self.stream: ReplicaStream | None = None
        self.notifier = Notifier(config.mqtt)
        # readiness: nothing through the stream for this long means stalled (heartbeats come
        # every heartbeat_seconds on an idle source)
        self.metrics = Metrics(stall_seconds=max(30.0, 3 * config.source.heartbeat_seconds))
        self.http: MetricsServer | None = None
        self._serving: asyncio.Task[None] | None = None  # the HTTP port's (``_serve_http``)
        self._ready_taken = 0  # items taken without waiting (see _take)
        self.metrics.on_scrape(self._sync_metrics)
        self.metrics.hears(self._heard_from_source)
        self.snapshots: SnapshotRunner | None = None
        self._live_for_snapshot = False  # --stop-at-end, but the stream runs until it is done
        self._requests: set[str] = set()  # snapshot requests (keys) deleted once committed
        # the name every stream of this process registers with as a replica: random, and in
        # the landing zone's lock, so `replicator check` tells this daemon's registration of
        # server_id from another replica's (sink.lock, source.preflight_checks)
        self.replica_host = f"replicator-{secrets.token_hex(6)}"
        self._proof: dict[str, Any] | None = None  # the last manifest's (source.continuity)
        # the last heartbeat, with the pipeline's position when it came (see _stream_at)
        self._heard: tuple[StreamPosition | None, ev.HeartbeatEvent] | None = None

    def _on_signal(self) -> None:
        self._signals += 1
        if self._signals == 1:
            self._request_stop("signal")
        else:
            log.warning("exiting at once", reason="second signal")
            os._exit(1)

    def _request_stop(self, reason: str) -> None:
        """Stop: the stream reads no more and drops what it decoded that was not taken; what
        is complete commits within ``service.shutdown_timeout`` from now, else it is abandoned
        (``_finish``). Should work still be under way a second after that (a commit stuck in
        the writer thread, a call to the source), the watchdog of ``replicator run``
        (``RunOptions.watchdog``) ends the process, exit 0: safe by the commit protocol, as a
        second signal is, and the next start recovers."""
        if self._stop.is_set():
            return
        timeout = self._shutdown_timeout()
        self._deadline = time.monotonic() + timeout
        log.info("stopping", reason=reason, timeout_s=timeout, hint="a second signal exits at once")
        self._stop.set()
        if self.stream is not None:
            self.stream.stop(join_within=timeout)
        asyncio.get_running_loop().call_later(timeout, self._out_of_time)
        if self.options.watchdog:  # armed until the process ends: exiting may wait too
            watchdog = threading.Timer(timeout + OVERRUN_SECONDS, self._overrun)
            watchdog.daemon = True
            watchdog.start()

    def _out_of_time(self) -> None:
        """The stop's time is up: waits for the writer thread end (``_finish`` abandons)."""
        if self.pipeline is not None:
            self.pipeline.interrupt()

    def _overrun(self) -> None:
        """The watchdog (its own thread): the stop overran its time."""
        log.warning(
            "exiting: work still under way past service.shutdown_timeout",
            timeout_s=self._shutdown_timeout(),
            hint="nothing half-done counts: the next start rolls a commit under way forward or "
            "drops it, and reads what was not committed again",
        )
        os._exit(0)

    def _shutdown_timeout(self) -> float:
        return self.options.shutdown_timeout or self.config.service.shutdown_timeout

    def _time_left(self) -> float:
        """Seconds left for the stop under way (counted from now if it had no deadline)."""
        if self._deadline is None:
            self._deadline = time.monotonic() + self._shutdown_timeout()
        return max(0.0, self._deadline - time.monotonic())

    def _committed(self, manifest: dict[str, Any], stats: PipelineStats) -> None:
        if stats.last_committed_ts > 0:  # the lag: the age of the newest change landed
            self.metrics.observe_event_time(stats.last_committed_ts)
        runner = self.snapshots
        if runner is not None:  # requests whose tables the committed progress has queued
            for key in sorted(runner.pipeline.committed_snapshot.asked - self._requests):
                self.zone.store.delete(key)
                self._requests.add(key)
        files: list[dict[str, Any]] = manifest.get("files", [])
        tables = sorted({str(f["table"]) for f in files})
        log.info(
            "batch committed",
            batch=manifest["batch"],
            rows=manifest["rows"],
            transactions=manifest["transactions"],
            tables=tables,
            bytes=sum(int(f["bytes"]) for f in files),
            end=manifest["end"],
            seconds=round(stats.last_batch_seconds, 3),
            lag=round(self.metrics.lag_seconds, 1),  # the age of its newest change, now
        )
        self.metrics.batch_committed(
            batch=int(manifest["batch"]),
            rows=int(manifest["rows"]),
            bytes_written=sum(int(f["bytes"]) for f in files),
            transactions=int(manifest["transactions"]),
            seconds=stats.last_batch_seconds,
        )
        self.metrics.zero_dates.inc(amount=sum(int(f.get("invalid_temporals", 0)) for f in files))
        by_table: dict[str, dict[str, Any]] = {}
        for f in files:
            entry = by_table.setdefault(str(f["table"]), {"rows": 0, "files": []})
            entry["rows"] += int(f["rows"])
            entry["files"].append(f["path"])
        # best effort: never waits on the broker, drops are counted
        self.notifier.notify(
            {
                "batch": manifest["batch"],
                "committed_at": manifest["committed_at"],
                "rows": manifest["rows"],
                "tables": by_table,
                "end": manifest["end"],
            }
        )

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._on_signal)
        if self.options.run_for is not None:
            loop.call_later(self.options.run_for, self._request_stop, "--for")
        log.debug("config", config=dataclasses.asdict(self.config))  # secrets print as ****
        # one writer per landing zone (a crash drops the lock with the process)
        source = self.config.source
        self.lock.acquire(
            "replicator run",
            server_id=source.server_id,
            replica_host=self.replica_host,
            source=describe_source(source),
        )
        if isinstance(self.lock, LeaseLock):  # a directory's lock cannot be taken over
            self.zone.lease = self.lock.check
        try:
            return await self._run_locked(loop)
        except _StoppedWaiting:
            return 0  # a first SIGTERM exits 0 (nothing was landed while waiting)
        finally:
            if self._unfinished:  # a commit may still be under way: no other writer yet
                log.warning("the writer lock is kept until the process ends (work under way)")
            else:
                self.lock.release()

    async def _run_locked(self, loop: asyncio.AbstractEventLoop) -> int:
        await self._start_http()  # probes answer (not ready) while the history is seeded
        gone: PositionGoneError | None = None
        try:
            while True:
                checkpoint = await loop.run_in_executor(None, self.zone.recover)
                self.metrics.checkpoint_saved(_epoch(checkpoint), batch=checkpoint.batch)
                start = checkpoint.position or start_position(
                    self.config.start.gtid, self.config.start.file, self.config.start.position
                )
                log.info(
                    "starting",
                    landing=self.zone.location,
                    resume=None if start is None else start.describe(),
                    batch=checkpoint.batch,
                    next_seq=checkpoint.next_seq,
                )
                if checkpoint.replay_until is not None and start is not None:
                    # `checkpoint set` moved the stream back: say what lands again, and how
                    log.info(
                        "replaying",
                        replay_from=start.describe(),
                        replay_until=checkpoint.replay_until.describe(),
                        note="batches that end before replay_until land transactions again; "
                        "their manifests say replay: true, and readers count each change once",
                    )
                if gone is None:  # before anything is read or lands: the same history?
                    self._proof = await self._prove_source(checkpoint)
                history, start, unwritten = await self._schema_history(start)
                ledger = SchemaLedger(history, landed=not unwritten)  # the run's one history
                resync = None
                if gone is not None:
                    resync, start = await self._resync(ledger.catalog, start, gone)
                    self.notifier = Notifier(self.config.mqtt)  # the first one has closed
                    self._sync_metrics()  # the old objects' last totals, then new ones count
                    self.metrics.sources_replaced()
                try:
                    return await self._stream(checkpoint, start, ledger, resync)
                except PositionGoneError as exc:
                    if not self._resyncs(exc, resynced=gone is not None):
                        raise
                    gone = exc
        finally:
            if self._serving is not None:
                self._serving.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._serving
            if self.http is not None:
                await self.http.close()

    async def _prove_source(self, checkpoint: Checkpoint) -> dict[str, Any] | None:
        """Prove that the configured server continues the history the landing zone holds
        (``source.continuity``; an IntegrityError stops the run before anything lands).
        Returns the last manifest's proof, which batches without transactions carry on."""
        loop = asyncio.get_running_loop()
        zone = await loop.run_in_executor(None, landed, self.zone.store, checkpoint.batch)
        verdict = await self._until_answered(
            lambda: prove(self.config.source, zone, snapshot_mode=self._snapshot_mode()),
            retrying="cannot reach the source to prove its continuity, retrying",
            stopped="stopped before the source's continuity with the landing zone was proven",
        )
        if verdict.proven:
            log.info("source continuity proven", detail=verdict.detail)
        elif zone.batch:
            log.warning("source continuity not proven", detail=verdict.detail)
        return None if zone.proof is None else zone.proof.to_json()

    def _resyncs(self, exc: BaseException, *, resynced: bool) -> bool:
        """Whether the run goes on after ``exc`` with a resync (``snapshot.mode: when_needed``
        and the checkpoint's binlog gone): once per run at most."""
        gone = isinstance(exc, PositionGoneError)
        return gone and not resynced and self._snapshot_mode() == "when_needed"

    def _snapshot_mode(self) -> str:
        mode = self.config.snapshot.mode
        if mode is None:
            start = self.config.start
            return "never" if start.gtid or start.file else "initial"
        return mode

    async def _resync(
        self, catalog: Catalog, gone_from: StreamPosition, exc: PositionGoneError
    ) -> tuple[SchemaChange, StreamPosition]:
        """``snapshot.mode: when_needed`` and the source no longer has the binlog after the
        checkpoint: the stream goes on from the source's binlog end, with a change that brings
        the history's tables (``catalog``) to the source's as of there and a snapshot of every
        table."""
        log.warning(
            "the source no longer has the checkpoint's binlog: snapshotting every table again",
            checkpoint=gone_from.describe(),
            cause=str(exc),
        )
        seed = await seed_history(self.config.source, None, report_host=self.replica_host)
        start = seed.start
        assert start.file  # the binlog end as the server reports it
        # recorded just before the start (a change at the start itself would be "not yet
        # had" by a stream resuming exactly there)
        point = Point(start.file, start.position - 1)
        change = resync_change(
            catalog,
            seed.history.catalog,
            point,
            f"-- snapshot.mode when_needed: the binlog from {gone_from.describe()} to "
            f"{start.describe()} is gone from the source; every table is read again",
        )
        return change, start

    async def _schema_history(
        self, start: StreamPosition | None
    ) -> tuple[SchemaHistory, StreamPosition, bool]:
        """The landing zone's schema history as of ``start`` (rewound when the stream starts
        before changes it recorded), or a new one seeded from the source. Returns it, the
        start (resolved when it was "now") and whether it is not the history the landing zone
        holds (seeded, rewound, or advanced over a skipped range): the first commit writes it
        then (``SchemaLedger``)."""
        history = await asyncio.get_running_loop().run_in_executor(None, self.zone.load_history)
        if history is not None and start is not None:
            at = start
            _check_valid_from(history, start)
            try:
                dropped = history.rewind(lambda p: covers(at, p.file, p.position, p.gtid))
            except RewindError as exc:
                raise IntegrityError(
                    f"the schema history cannot be rewound to {start.describe()}: {exc}",
                    hint="the position is ahead in one GTID domain and behind in another: "
                    "move the checkpoint to a position the binlog reached as a whole (all "
                    "domains at or before the same point), or start a new landing zone there",
                ) from exc
            if dropped:
                log.info("schema history rewound", changes_dropped=dropped, to=at.describe())
            end = self.zone.committed_end
            advanced = 0
            if not dropped and end is not None and not is_past(end, start):
                # `checkpoint set` moved the stream forward: the skipped range's DDL
                advanced = await apply_skipped_ddl(
                    self.config.source,
                    history,
                    end,
                    start,
                    self.config.filters.wants,
                    report_host=self.replica_host,
                )
            return history, start, dropped + advanced > 0
        seed = await self._until_answered(
            lambda: seed_history(self.config.source, start, report_host=self.replica_host),
            retrying="cannot read the source's tables, retrying",
            stopped="stopped before the source's tables could be read",
        )
        return seed.history, seed.start, True

    async def _until_answered(
        self, attempt: Callable[[], Awaitable[_T]], *, retrying: str, stopped: str
    ) -> _T:
        """``attempt()`` until the source answers it: a ``SourceUnavailableError`` is logged
        (``retrying``) and tried again after the source's back-off; a stop (SIGTERM) ends the
        attempt, or the wait, at once: ``stopped`` is logged and ``run`` exits 0."""
        delay = self.config.source.reconnect_initial_delay
        tries = 0
        while True:
            task = asyncio.ensure_future(attempt())
            stop = asyncio.ensure_future(self._stop.wait())
            try:
                await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stop.cancel()
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                break
            try:
                return task.result()
            except SourceUnavailableError as exc:
                tries += 1
                log.warning(
                    retrying,
                    cause=str(exc),
                    source=describe_source(self.config.source),
                    attempt=tries,
                    retry_in_s=round(delay, 2),
                )
            try:
                await asyncio.wait_for(self._stop.wait(), delay)
            except TimeoutError:
                delay = min(delay * 2, self.config.source.reconnect_max_delay)
                continue
            break
        log.info("stopped", detail=stopped)
        raise _StoppedWaiting(stopped)

    async def _stream(
        self,
        checkpoint: Checkpoint,
        start: StreamPosition,
        ledger: SchemaLedger,
        resync: SchemaChange | None = None,
    ) -> int:
        pipeline = self._new_pipeline(checkpoint, ledger)
        self.pipeline = pipeline
        if resync is not None:
            await pipeline.resync(resync, start)
        # the reader thread decodes ahead of the pipeline: it works on a view the ledger hands
        # out (see schema.ledger for why it cannot share the ledger's history)
        tracker = SchemaTracker(ledger.reader_view(), TableFilter(self.config.filters).wants)
        runner = self._snapshot_runner(checkpoint, pipeline, ledger.catalog, resync is not None)
        # a snapshot needs the stream beside it until its last chunk: it ends the run then
        self._live_for_snapshot = self.options.stop_at_end and pipeline.snapshot.active
        stop_at_end = self.options.stop_at_end and not self._live_for_snapshot
        stream = ReplicaStream(
            self.config.source,
            start,
            stop_at_end=stop_at_end,
            schema_lookup=tracker,
            part_rows=self.config.sink.large_transaction_rows,
            part_bytes=self.config.sink.large_transaction_bytes,
            tracker=tracker,
            report_host=self.replica_host,
            # runs of small transactions, but not while a snapshot reads beside the stream:
            # its chunks land between transactions at the points it reads at (``_replicate``
            # turns them on once it is done)
            runs=runner is None or not runner.has_work(),
        )
        self.stream = stream
        if self._stop.is_set():  # stopped while starting: nothing is read
            stream.stop(join_within=self._time_left())
        try:
            async with stream, asyncio.TaskGroup() as group:
                notifier = group.create_task(self.notifier.run(), name="notify")
                progress = group.create_task(self._progress(pipeline), name="progress")
                guard = group.create_task(self._guard(), name="guard")
                compactor = group.create_task(self._compact_every(), name="compact")
                try:
                    await group.create_task(self._replicate(stream, pipeline), name="replicate")
                except BaseException as exc:
                    if not self._resyncs(exc, resynced=resync is not None):
                        reason = str(exc) if isinstance(exc, ReplicatorError) else "stopped"
                        self.metrics.fatal(reason)
                    raise
                finally:
                    progress.cancel()
                    guard.cancel()
                    compactor.cancel()
                    stopping = self._stop.is_set()
                    await self.notifier.close(
                        timeout=min(5.0, self._time_left()) if stopping else 5.0
                    )
                    with contextlib.suppress(asyncio.CancelledError):
                        await notifier
        except BaseExceptionGroup as group:
            raise _first_error(group) from None
        finally:
            idle = await pipeline.close(self._time_left() if self._stop.is_set() else None)
            self._unfinished = not idle
            runner.close()
        committed = pipeline.checkpoint.position  # where the next start resumes
        log.info(
            "stopped",
            batches=pipeline.stats.batches,
            rows=pipeline.stats.row_changes,
            transactions=pipeline.stats.transactions,
            in_runs=stream.stats.transactions_in_runs,
            position=None if committed is None else committed.describe(),
            abandoned=self._abandoned,
            notifications_dropped=self.notifier.stats.dropped,
        )
        return 0

    def _new_pipeline(self, checkpoint: Checkpoint, ledger: SchemaLedger | None) -> Pipeline:
        return Pipeline(
            self.config.sink,
            self.config.filters,
            self.zone,
            checkpoint,
            on_commit=self._committed,
            on_commit_failed=self._commit_failed,
            history=ledger,
            proof=self._proof,
            columns=column_defs,  # create and alter records carry the table's file schema
        )

    def _commit_failed(self, exc: BaseException) -> None:
        # The pipeline says so as soon as the writer thread fails, wherever the error surfaces
        # later (the run stops on it): counted, and named by /readyz until then.
        self.metrics.commit_failed(str(exc) or type(exc).__name__)

    def _snapshot_runner(
        self, checkpoint: Checkpoint, pipeline: Pipeline, catalog: Catalog, resync: bool
    ) -> SnapshotRunner:
        """The snapshot of this run: the initial one of a new landing zone, every table again
        after a resync, the one under way, tables the filters newly take in (unless
        ``snapshot.mode: never`` is set), and what `replicator snapshot` asked for."""
        cfg = self.config
        runner = SnapshotRunner(
            cfg.source, cfg.snapshot, catalog.traits.flavor, pipeline, stop=self._stop
        )
        mode = self._snapshot_mode()
        filters = (cfg.filters.include, cfg.filters.exclude)
        before = pipeline.snapshot.filters
        if resync:
            tables = runner.queue(["*"])
            runner.settle_prepared()
            log.info("snapshot after the resync", tables=len(tables))
        elif checkpoint.batch == 0 and checkpoint.position is None and mode != "never":
            tables = runner.queue(["*"])
            runner.settle_prepared()
            log.info("initial snapshot", tables=len(tables))
        elif before is not None and before != filters and cfg.snapshot.mode != "never":
            # tables the filters take in now: their rows before today are in no binlog read
            old = FilterConfig(include=before[0], exclude=before[1])
            added = [
                f"{schema}.{table}"
                for schema, table in catalog.tables
                if not old.wants(schema, table)
            ]
            # the landing zone may hold rows of them from before they were left out, which
            # the stream did not keep in step since: their snapshots replace them
            tables = runner.queue(added, reset=True) if added else []
            log.info("snapshot of tables newly included", tables=tables)
        pipeline.snapshot = dataclasses.replace(pipeline.snapshot, filters=filters)
        self.snapshots = runner
        self._take_requests()
        return runner

    def _take_requests(self, found: list[tuple[str, list[str]]] | None = None) -> None:
        """Queue what `replicator snapshot` asked for. The progress records each request it
        has queued (``SnapshotState.asked``), and a request file is deleted once a commit
        has written such a progress: a progress that goes back to the last commit (the parts
        of a transaction dropped) forgets it, and the file is taken again."""
        runner = self.snapshots
        if runner is None:
            return
        for key, patterns in read_requests(self.zone.store) if found is None else found:
            if key in runner.pipeline.snapshot.asked or key in self._requests:
                continue
            # a table asked for again may have landed rows the stream did not keep in step
            # (left out by the filters for a while, `snapshot.mode: never`): they are replaced
            tables = runner.queue(patterns, request=key, reset=True)
            if tables:
                log.info("snapshot requested", patterns=patterns, tables=tables)
            else:  # a typo, or tables the filters leave out: say so, not an empty list
                log.warning(
                    "snapshot request matched no replicated table",
                    patterns=patterns,
                    hint="name tables as db.table (globs allowed) that filters.include takes "
                    "in; `replicator schema show` lists the tables the landing zone knows",
                )

    async def _guard(self) -> None:
        """Every few seconds: is the landing zone still the one we locked? A landing zone
        deleted or replaced under a running daemon (idle or not) stops it (exit 1)."""
        while True:
            await asyncio.sleep(GUARD_SECONDS)
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, self.lock.check)  # an object store's lease: I/O
            if self.snapshots is not None:  # read off the loop (a listing on object stores)
                found = await loop.run_in_executor(None, read_requests, self.zone.store)
                self._take_requests(found)

    async def _compact_every(self) -> None:
        """``sink.compaction.every``: compact the landing zone on a timer, beside the stream
        (``sink.compaction``: it only touches batches the checkpoint passed). A round is
        skipped while a ``replicator compact`` holds the compaction lock; a failed round is
        logged and the stream goes on (nothing half-done is committed)."""
        settings = self.config.sink.compaction
        if settings.every <= 0:
            return
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(settings.every)
            try:
                result = await loop.run_in_executor(None, self._compact_once)
            except ReplicatorError as exc:
                log.error("compaction failed", error=str(exc), hint=exc.hint)
                continue
            except OSError as exc:
                log.warning("compaction failed", error=str(exc), hint="retried next round")
                continue
            if result is not None and result.record is not None:
                log.info("compacted", detail=result.describe())

    def _compact_once(self) -> compaction.Result | None:
        chosen = self.config.sink.compaction
        store = self.zone.store
        lock = compaction.compaction_lock(
            store, self.config.sink.object_store.lease_seconds, compaction.DAEMON_ROUND
        )
        if not lock.take_or_skip("compaction round skipped: the compaction lock is held"):
            return None
        try:
            return compaction.compact(
                store,
                compaction.Settings(
                    older_than=chosen.older_than,
                    target_bytes=chosen.target_bytes,
                    retention=chosen.retention,
                    compression=self.config.sink.compression,
                    row_group_rows=self.config.sink.row_group_rows,
                ),
                lock=lock,
            )
        finally:
            lock.release()

    async def _start_http(self) -> None:
        service = self.config.service
        if not service.http_enabled:
            return
        self.http = MetricsServer(
            self.metrics, host=service.http_host, port=service.http_port, ready=self._ready
        )
        await self.http.listen()
        log.info("http listening", host=service.http_host, port=self.http.port)
        self.lock.note(http_host=service.http_host, http_port=self.http.port)
        self._serving = asyncio.create_task(self._serve_http(self.http), name="http")

    async def _serve_http(self, http: MetricsServer) -> None:
        """Answer on the port once the stream has begun (its first bytes came), or
        ``HTTP_SERVE_WITHIN`` seconds after it listens (a slow or unreachable source, the
        history still being seeded), whichever comes first: aiohttp's import (a tenth of a
        second) then does not hold up the first binlog request. A probe that connects before
        is answered then (it waits in the socket's backlog)."""
        loop = asyncio.get_running_loop()
        until = loop.time() + HTTP_SERVE_WITHIN
        while loop.time() < until and not self._stop.is_set():
            stream = self.stream
            if stream is not None and stream.stats.bytes_received > 0:
                break
            await asyncio.sleep(0.01)
        await http.serve()

    def _ready(self) -> Status:
        self._sync_metrics()
        status = self.metrics.readiness()
        # the stream waits while a snapshot chunk is read: a snapshot query the source does
        # not answer is the cause to name (the stream's silence only follows from it)
        snapshot = None if self.snapshots is None else self.snapshots.trouble()
        if snapshot is not None and not status.reason.startswith("fatal"):
            return Status(False, snapshot)
        return status

    def _sync_metrics(self) -> None:
        """Copy the running totals of the stream, pipeline and notifier into the metrics."""
        m = self.metrics
        stream, pipeline = self.stream, self.pipeline
        if stream is not None:
            stats = stream.stats
            m.reconnects.sync(total=stats.reconnects)
            m.reconnect_attempts.sync(total=stats.reconnect_attempts)
            m.binlog_bytes.sync(total=stats.bytes_received)
            m.crc_errors.sync(total=stats.checksum_errors)
            m.transactions_in_runs.sync(total=stats.transactions_in_runs)
            m.events.sync_many(
                {(_event_name(code),): n for code, n in list(stats.events_by_type.items())}
            )
            m.set_connected(stats.streaming)
        if pipeline is not None:
            m.row_changes.sync_many(dict(pipeline.stats.rows_by_table_op))
            ps = pipeline.stats
            m.xa_transactions.sync_many(
                {
                    ("prepared",): ps.xa_prepared,
                    ("committed",): ps.xa_committed,
                    ("rolled_back",): ps.xa_rolled_back,
                    ("unknown",): ps.xa_unknown,
                }
            )
        m.notifications_dropped.sync(total=self.notifier.stats.dropped)
        if self.snapshots is not None:
            m.snapshot_progress(self.snapshots.progress())

    async def _progress(self, pipeline: Pipeline) -> None:
        """Every ``service.progress_seconds``: how far behind the source's binlog end we are.

        Sets ``replicator_binlog_behind_bytes``; on a terminal, also a line with the rate the
        gap closes at and an ETA while catching up."""
        interval = self.config.service.progress_seconds
        if interval <= 0:
            return
        to_terminal = self.options.progress_to_terminal
        if to_terminal is None:
            to_terminal = sys.stderr.isatty()
        loop = asyncio.get_running_loop()
        tracker = CatchUpTracker()
        while True:
            await asyncio.sleep(interval)
            runner = self.snapshots
            if runner is not None and runner.has_work():
                snapshot = runner.progress()
                log.log(
                    logging.INFO if to_terminal else logging.DEBUG,
                    "snapshot progress",
                    progress=snapshot.describe(),
                    table=snapshot.table,
                    rows=snapshot.rows,
                    estimate=snapshot.estimate,
                    tables_left=snapshot.tables_left,
                )
            position = pipeline.position
            if position is None or not position.file:
                continue
            try:
                files = await loop.run_in_executor(None, self._binlog_files)
            except ReplicatorError as exc:
                log.debug("progress: cannot list binlog files", error=str(exc))
                continue
            behind = bytes_behind(files, *self._stream_at(position))
            if behind is None:
                continue
            self.metrics.behind_bytes.set(behind)
            progress = tracker.observe(time.monotonic(), behind)
            log.debug("progress", behind_bytes=behind, position=position.describe())
            if to_terminal and not progress.caught_up:
                log.info(
                    "catching up",
                    progress=progress.describe(),
                    position=position.describe(),
                    rows=pipeline.stats.row_changes,
                    lag=round(self.metrics.lag_seconds, 1),  # of what has landed
                )

    def _heard_from_source(self) -> float:
        """When the source was last heard (epoch seconds; 0: never): now while the reader
        holds what the pipeline has no room for (it reads no more until then: the silence
        would be the pipeline's), else when it last read bytes."""
        stream = self.stream
        if stream is None:
            return 0.0
        return time.time() if stream.backed_up else stream.stats.heard_at

    def _stream_at(self, position: StreamPosition) -> tuple[str, int]:
        """Where the stream stands in the source's binlog: the pipeline's ``position`` (after
        the last transaction it took), or the last heartbeat's when no transaction came since.
        A heartbeat comes when the server has sent everything, past what moves no transaction:
        a rotation's end of file and the next file's preamble (a ``FLUSH BINARY LOGS``, a
        server restart), which the position after the last transaction never passes."""
        heard = self._heard
        if heard is None or heard[0] is not position or not heard[1].log_file:
            return position.file, position.position
        return heard_at(position.file, position.position, heard[1].log_file, heard[1].log_position)

    def _binlog_files(self) -> tuple[BinlogFile, ...]:
        conn = open_connection(self.config.source, read_timeout=10)
        try:
            return server_info(conn).binlog_files or ()
        finally:
            conn.close()

    async def _replicate(self, stream: ReplicaStream, pipeline: Pipeline) -> None:
        iterator = stream.__aiter__()
        stop = asyncio.create_task(self._stop.wait(), name="stop-signal")
        runner = self.snapshots

        async def take() -> StreamItem | None:
            return await self._take(iterator, pipeline, stop)

        async def handle(item: StreamItem) -> None:
            await self._handle(item, stream, pipeline)

        def seed() -> None:
            if pipeline.position is None and stream.origin is not None:
                pipeline.seed(stream.origin)

        try:
            while not self._stop.is_set():
                if (
                    runner is not None
                    and runner.has_work()
                    and runner.ready()
                    and not pipeline.in_transaction
                ):
                    await runner.step(take, handle, seed)
                    if not runner.has_work():
                        if self._live_for_snapshot:
                            break  # the stream stands past the end it had at start
                        stream.runs = True
                    continue
                item = None if runner is None else runner.take_pending()
                if item is None:
                    item = await take()
                if item is not None:
                    await handle(item)
        except (_Stopped, SnapshotStopped, StopAsyncIteration, PipelineInterrupted):
            pass
        finally:
            stop.cancel()
        await self._finish(pipeline)

    async def _finish(self, pipeline: Pipeline) -> None:
        """Commit what is complete. At the stream's end (``--stop-at-end``) that takes as long
        as the commits take, unless a signal comes meanwhile; once stopping, it has what is
        left of ``service.shutdown_timeout`` (``_out_of_time`` interrupts the pipeline then),
        and what has not landed by then is abandoned: never half-landed, the checkpoint stays
        before it and the next start reads it again."""
        try:
            await pipeline.commit()
            return
        except PipelineInterrupted:
            pass
        pipeline.abandon()
        self._abandoned = True
        committed = pipeline.checkpoint.position
        log.warning(
            "stopped before everything read was committed",
            timeout_s=self._shutdown_timeout(),
            resume=None if committed is None else committed.describe(),
            hint="nothing half-done is landed: the next start reads the rest again from the "
            "checkpoint",
        )

    async def _take(
        self, iterator: ReplicaStream, pipeline: Pipeline, stop: asyncio.Task[Any]
    ) -> StreamItem | None:
        """The next stream item, or None after committing a batch that became due while
        waiting. Raises StopAsyncIteration at the stream's end, _Stopped on a signal."""
        if not self._stop.is_set():
            try:
                ready = iterator.next_ready()  # handed over: no task, no wait
            except ReplicatorError:
                await pipeline.commit()  # as below
                raise
            if ready is not None:
                self._ready_taken += 1
                if self._ready_taken % 64 == 0:
                    await asyncio.sleep(0)  # the loop's other tasks (HTTP, signals) run too
                return ready
        wait = pipeline.seconds_until_due()
        item_task = asyncio.ensure_future(iterator.__anext__())
        done, _ = await asyncio.wait(
            {item_task, stop}, timeout=wait, return_when=asyncio.FIRST_COMPLETED
        )
        if item_task not in done:
            item_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await item_task
            if self._stop.is_set():
                raise _Stopped
            await pipeline.commit()  # the batch is old enough
            return None
        try:
            item = item_task.result()
        except ReplicatorError:
            # the stream stops (a DDL it cannot follow, a CRC mismatch that persists, ...):
            # every whole transaction before the stop lands first, so the checkpoint stops
            # right before the cause
            await pipeline.commit()
            raise
        return item

    async def _handle(self, item: StreamItem, stream: ReplicaStream, pipeline: Pipeline) -> None:
        if pipeline.position is None and stream.origin is not None:
            pipeline.seed(stream.origin)  # where the stream began (see _replicate's seed)
        await pipeline.handle(item)
        if self.snapshots is not None:
            self.snapshots.observe(item)
        # the lag is measured at each commit (_committed), from what landed; a heartbeat says
        # there is nothing more to read, which makes it 0 once everything read has landed
        if isinstance(item, ev.HeartbeatEvent):
            if not pipeline.in_transaction:
                self._heard = (pipeline.position, item)
            if pipeline.settled:
                self.metrics.observe_heartbeat()
                return
        self.metrics.observe_progress()


class _Stopped(Exception):
    """The first signal arrived while waiting for the stream."""


class _StoppedWaiting(Exception):
    """The first signal arrived while waiting for the source to answer (nothing landed)."""


def _event_name(code: int) -> str:
    try:
        return EventType(code).name.lower()
    except ValueError:
        return f"type_{code}"


def _epoch(checkpoint: Checkpoint) -> float | None:
    """The checkpoint's commit time as epoch seconds (None: no checkpoint yet)."""
    if not checkpoint.committed_at:
        return None
    try:
        return dt.datetime.fromisoformat(checkpoint.committed_at).timestamp()
    except ValueError:
        return None


def _check_valid_from(history: SchemaHistory, start: StreamPosition) -> None:
    """A start before the first position the history describes would decode rows with the
    columns of a later time: refused (when the two are positions of one kind: a GTID-only
    start and a file/position tell nothing about each other)."""
    if history.valid_from is not None:
        first = position_from_json(history.valid_from, "the schema history")
    elif history.seed_point is not None:
        first = StreamPosition(history.seed_point.file, history.seed_point.position)
    else:
        return
    comparable = (
        (start.mariadb_gtid is not None and first.mariadb_gtid is not None)
        or (start.mysql_gtid is not None and first.mysql_gtid is not None)
        or bool(start.file and first.file)
    )
    if comparable and not is_past(start, first):
        raise IntegrityError(
            f"the stream would start at {start.describe()}, before the schema history of this "
            f"landing zone begins ({first.describe()}): rows there would be decoded with the "
            "columns of a later time",
            hint="move the checkpoint to that position or later (`replicator checkpoint set`), "
            "or start a new landing zone from the earlier position",
        )


def _first_error(group: BaseExceptionGroup) -> BaseException:
    """The first leaf of a TaskGroup's exception group: the cause the user needs to see."""
    first = group.exceptions[0]
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    return first
