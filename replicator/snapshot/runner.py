"""Snapshot chunks, interleaved with the stream so that each lands exactly at its point.

For every chunk: open a read view and learn its binlog point P (``reader.begin``); bring the
stream exactly to P (hand the pipeline every transaction before P, hold back the first one
after it); read the chunk's rows; add them to the open batch as ``_op = 'r'``; go on with the
stream. The landing zone then holds, in ``_seq`` order, the changes before P, the table's
rows as of P, and the changes after P: folding them gives the source's state, with writes
going on, with no lock and no write on the source, and with no window of keys to reconcile.
If the stream has already gone past P when P is learned (a transaction written to the binlog
before its commit was visible), the read view is dropped and opened again.

Because the stream stands at P while a chunk is read, the schema history is exactly as of P
too: the columns a chunk is read with are the ones its rows had, even with DDL going on.

A chunk is ``snapshot.chunk_rows`` rows after the last key landed, or fewer once its rows
reach ``snapshot.chunk_bytes`` (the SELECT's LIMIT follows the table's row width as read so
far, and a read that reaches the bytes stops there): a chunk is read whole before any of it is
handed to the pipeline, so a chunk that fails part way lands nothing, and what it holds is
bounded by bytes, not rows. A table without a primary key (or with one a range cannot walk:
ENUM, SET, FLOAT, DOUBLE, BIT, GEOMETRY, CHAR of a NO PAD collation) is one chunk, read in one
read view and streamed to the pipeline as it is read; it starts with a ``truncate`` record, so
a read of it that fails part way is superseded by the next one. So does the first chunk of a
table queued with ``reset`` (taken in again by the filters, asked for again: what landed of it
may be stale). The progress (``state``) is committed with the batch that holds the rows.

The source can fail under a chunk: a query that gets no answer within
``snapshot.query_timeout``, a dropped connection. Nothing of the chunk has landed then; the
failure is logged, ``trouble`` names it (``/readyz``), and the chunk is read again on a new
connection after the source's reconnect back-off. A stop (the service's stop event) ends any
wait at once (``SnapshotStopped``): a blocked read is woken, committed chunks stay.

A table dropped or renamed under its snapshot: the chunk's SELECT fails (1146; 1412 for a
table rebuilt; 1054 for a column an instant ALTER took away), and the next chunk's read view
is past the DDL, so the stream has taken it
when the next chunk would be read. A dropped table's snapshot ends there (a warning; its
``drop`` record governs what landed); a renamed one goes on under its new name from the same
key (the ``rename`` record moves what landed to the new name). The pipeline renames the
queue's entries as the stream takes each RENAME and drops a dropped table's entry
(``SnapshotState.moved``, ``dropped``), so tables still queued follow theirs too, swaps
included. An instant ALTER that keeps the names a chunk's SELECT asks for but changes what
they name (two columns swapping names) is found once the chunk is read: the table's columns,
read in the chunk's transaction, differ from the history's (``TableChanged``, as above).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import enum
import fnmatch
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog

from ..binlog import events as ev
from ..binlog.block import Block
from ..binlog.constants import ColumnType as T
from ..binlog.gtid import MysqlGtid
from ..binlog.position import StreamPosition, is_past, position_reached
from ..binlog.runs import TransactionRun
from ..binlog.transaction import Transaction, TransactionPart
from ..config import SnapshotConfig, SourceConfig
from ..errors import IntegrityError
from ..pipeline.lifecycle import check_name
from ..pipeline.pipeline import Pipeline
from ..schema import ddl
from ..schema.model import ServerTraits, no_pad
from ..snapshot_progress import SnapshotState
from ..source.connection import describe_source
from ..source.errors import SourceUnavailableError
from ..source.items import StreamItem
from .columns import SnapshotTypeError, column_defs
from .fastread import ReadStats
from .reader import ReadPoint, SnapshotReader, TableChanged

log = structlog.get_logger("replicator")
_UNWALKABLE = frozenset({T.ENUM, T.SET, T.FLOAT, T.DOUBLE, T.BIT, T.GEOMETRY, T.JSON, T.VECTOR})
# The character sets whose text keys go back to the server exactly: the next chunk's WHERE
# sends the last key as text the server converts to the column's character set, and in others
# (sjis, cp932, big5, eucjpms, greek, hebrew, ...) its tables and the decoding here disagree
# on some values (sjis 0x5C comes back as 0x815F): rows after such a key would be skipped, or
# read again for ever. A table keyed by other text is read whole.
_KEY_CHARSETS = frozenset({"utf8mb4", "utf8mb3", "utf8", "ascii", "latin1", "binary"})
_RETRY_SECONDS = 0.02
_MAX_RETRIES = 500  # about 10 s of reopened read views
_BUSY_NOTICE = 30.0  # seconds a query may wait before readiness names it
_MAX_CHANGED = 2  # chunks in a row that find the table gone while the history still has it
_T = TypeVar("_T")


# how often a snapshot waiting for prepared XA transactions looks again
_PREPARED_POLL_SECONDS = 1.0


class SnapshotStopped(Exception):
    """The service's stop event ended a snapshot wait (nothing of the chunk landed)."""


class _SourceFailed(Exception):
    """A snapshot query failed on the source side (retried by ``step``)."""

    def __init__(self, cause: SourceUnavailableError, doing: str) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.doing = doing


@dataclass(frozen=True, slots=True)
class SnapshotProgress:
    """Where the snapshot stands (for the terminal, ``replicator status`` and /metrics)."""

    table: str | None  # the table being read (None: nothing to read)
    rows: int  # rows of it landed (before a restart too)
    estimate: int | None  # the source's estimate of its rows (information_schema)
    rows_per_second: float | None  # this run's reading rate for it
    tables_left: int  # the current table included

    @property
    def eta_seconds(self) -> float | None:
        if self.estimate is None or not self.rows_per_second:
            return None
        return max(0.0, self.estimate - self.rows) / self.rows_per_second

    def describe(self) -> str:
        if self.table is None:
            return "done"
        text = f"{self.table}: {self.rows:,} rows"
        if self.estimate:
            share = min(100.0, 100.0 * self.rows / self.estimate)
            text += f" of about {self.estimate:,} ({share:.0f}%)"
        if self.rows_per_second is not None:
            text += f", {self.rows_per_second:,.0f} rows/s"
        eta = self.eta_seconds
        if eta is not None:
            text += f", ETA {_duration(eta)}"
        if self.tables_left > 1:
            text += f"; {self.tables_left - 1} more table(s) after it"
        return text


def _duration(seconds: float) -> str:
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


class _Relation(enum.Enum):
    BEHIND = 0
    AT = 1
    AHEAD = 2


Take = Callable[[], Awaitable[StreamItem | None]]
Handle = Callable[[StreamItem], Awaitable[None]]
Seed = Callable[[], None]


class SnapshotRunner:
    def __init__(
        self,
        source: SourceConfig,
        config: SnapshotConfig,
        flavor: str,
        pipeline: Pipeline,
        stop: asyncio.Event | None = None,
    ) -> None:
        self.source = source
        self.config = config
        self.pipeline = pipeline
        self.reader = SnapshotReader(source, flavor, config.query_timeout)
        self._stop = stop  # set: every wait ends with SnapshotStopped
        self._failures = 0  # chunks in a row the source failed under
        self._trouble: str | None = None  # why no chunk lands now (readiness)
        self._busy: tuple[str, float] | None = None  # the query waiting, since when
        self._changed = 0  # chunks in a row whose table was gone at the source
        self._row_bytes: float | None = None  # the current table's bytes per row
        self._measured = False  # ...as read (else the server's estimate)
        self.server_id = 0
        self._pending: StreamItem | None = None  # the first stream item after the point
        self._seen: tuple[str, int] | None = None  # the stream's last event end
        self._last_end: tuple[str, int] | None = None  # the last transaction's end
        self._reading: str | None = None  # the table the figures below are about
        self._table_started = time.monotonic()
        self._table_rows = 0  # read in this run
        self._estimate: int | None = None
        self.rows_read = 0  # since start (metrics)
        # XA transactions prepared before the stream began (``settle_prepared``), to wait for
        # before the first read view; None: not looked for yet
        self._prepared: frozenset[str] | None = None
        self._settle = False
        self._hold_until = 0.0  # no step before then (waiting for those transactions)

    def settle_prepared(self) -> None:
        """The stream began where this snapshot does (an initial snapshot, a resync): an XA
        transaction prepared before then has its rows in no event the stream reads, and its
        commit lands nothing. So the first read view waits until the transactions prepared
        at the source now have ended: read views after their commit see their rows."""
        self._settle = True

    def has_work(self) -> bool:
        return self.pipeline.snapshot.active

    def ready(self) -> bool:
        """A step would read now (not while waiting for prepared XA transactions: the
        stream goes on meanwhile)."""
        return time.monotonic() >= self._hold_until

    def queue(
        self, patterns: list[str], request: str | None = None, *, reset: bool = False
    ) -> list[str]:
        """Queue the replicated tables matching ``db.table`` globs (for ``request``, a
        `replicator snapshot` request's key); returns them. ``reset``: each table's snapshot
        starts with a ``truncate`` record (``SnapshotState.reset``)."""
        history = self.pipeline.history
        assert history is not None
        wants = self.pipeline.filter.wants
        tables = [
            (schema, table)
            for schema, table in history.catalog.tables
            if wants(schema, table)
            and any(fnmatch.fnmatchcase(f"{schema}.{table}", g) for g in patterns)
        ]
        for schema, table in tables:
            check_name(schema, table, "the snapshot")
        names = sorted(f"{schema}.{table}" for schema, table in tables)
        self.pipeline.snapshot = self.pipeline.snapshot.add(names, request, reset=reset)
        return names

    def take_pending(self) -> StreamItem | None:
        item, self._pending = self._pending, None
        return item

    def observe(self, item: StreamItem) -> None:
        """Every stream item handed to the pipeline: how far the stream has read."""
        if isinstance(item, TransactionRun):
            if item.last is None:
                self._seen = self._last_end = (item.taken.file, item.taken.end_position)
                return
            item = item.last
        if isinstance(item, Transaction):
            self._seen = self._last_end = (item.end_file, item.end_position)
        elif isinstance(item, ev.HeartbeatEvent):
            if item.log_file:
                self._seen = (item.log_file, item.log_position)
        elif isinstance(item, ev.Event) and item.header.log_pos and not item.header.artificial:
            self._seen = (item.file, item.next_position)

    def close(self) -> None:
        self.reader.close()

    def trouble(self) -> str | None:
        """Why no snapshot chunk is landing now, for readiness (None: nothing known)."""
        if self._trouble is not None:
            return self._trouble
        busy = self._busy
        if busy is not None and time.monotonic() - busy[1] >= _BUSY_NOTICE:
            waited = time.monotonic() - busy[1]
            return f"snapshot: waiting {waited:.0f} s for the source to answer ({busy[0]})"
        return None

    async def step(self, take: Take, handle: Handle, seed: Seed) -> None:
        """Land one chunk of the current table (or move past a table that is gone). A source
        query that fails or stalls is logged and retried after a back-off (nothing of the
        chunk landed); a stop ends any wait with ``SnapshotStopped``. ``seed`` puts a
        pipeline that has handled nothing yet where the stream begins, once the stream knows
        (a server may hold its first events back for a while, 0.1 s by MariaDB 11)."""
        try:
            await self._step(take, handle, seed)
        except _SourceFailed as exc:
            await self._back_off(exc)
            return
        except TableChanged as exc:
            self._table_changed(exc)
            return
        if self._failures:
            log.info(
                "snapshot source query works again",
                table=self.pipeline.snapshot.current,
                attempts=self._failures,
            )
        self._failures = 0
        self._trouble = None
        self._changed = 0

    async def _io(self, doing: str, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(*args)`` (a blocking reader call) in a worker thread; a stop wakes it and
        raises ``SnapshotStopped``; a source that fails raises ``_SourceFailed``."""
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(None, fn, *args)
        self._busy = (doing, time.monotonic())
        try:
            if self._stop is None:
                return await future
            stop = asyncio.ensure_future(self._stop.wait())
            waits: set[asyncio.Future[Any]] = {future, stop}
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stop.cancel()
            if not future.done():
                self.reader.abort()  # the blocked read fails at once; its error is dropped
                future.add_done_callback(lambda f: f.cancelled() or f.exception())
                raise SnapshotStopped(doing)
            return future.result()
        except SourceUnavailableError as exc:
            raise _SourceFailed(exc, doing) from exc
        finally:
            self._busy = None

    async def _back_off(self, failed: _SourceFailed) -> None:
        """Log a failed chunk, and wait (the source's reconnect back-off) before the next."""
        self._failures += 1
        cfg = self.source
        delay = min(
            cfg.reconnect_initial_delay * 2 ** min(self._failures - 1, 30), cfg.reconnect_max_delay
        )
        delay = delay / 2 + random.uniform(0, delay) / 2  # backoff jitter, not cryptography
        state = self.pipeline.snapshot
        self.reader.close()
        self._trouble = (
            f"snapshot: the source query on {state.current} failed ({failed.doing}), "
            f"reconnecting (attempt {self._failures})"
        )
        log.warning(
            "snapshot source query failed, reconnecting",
            table=state.current,
            doing=failed.doing,
            cause=str(failed.cause),
            source=describe_source(cfg),
            timeout_s=self.config.query_timeout,
            attempt=self._failures,
            retry_in_s=round(delay, 2),
            resume="the table's first row" if state.after is None else "after the last key landed",
        )
        await self._pause(delay)

    async def _pause(self, seconds: float) -> None:
        if self._stop is None:
            await asyncio.sleep(seconds)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), seconds)
            raise SnapshotStopped("waiting to reconnect")

    def _table_changed(self, exc: TableChanged) -> None:
        """The chunk's table is gone at the source: the stream has the DDL ahead (the next
        chunk's read view is past it). More than twice in a row with the history still
        knowing the table: the source and the binlog disagree (a DDL not logged)."""
        self._changed += 1
        state = self.pipeline.snapshot
        if self._changed > _MAX_CHANGED:
            raise IntegrityError(
                f"the snapshot of {state.current} finds the table gone or changed at the "
                f"source {self._changed} times in a row, but the binlog never dropped, renamed "
                f"or altered it so: {exc}",
                hint="a DDL statement was run without the binary log (sql_log_bin=0); leave "
                "the table out (`filters`) or start a new landing zone",
            ) from exc
        log.warning(
            "snapshot table changed at the source",
            table=state.current,
            cause=exc.args[0],
            hint=exc.hint,
        )

    async def _step(self, take: Take, handle: Handle, seed: Seed) -> None:
        state = self.pipeline.snapshot
        table = self._table(state)
        if table is None:
            table = await self._follow(state)
            if table is None:
                return
            state = self.pipeline.snapshot
        if self._settle and not await self._prepared_ended():
            return
        if state.current != self._reading:
            self._reading = state.current
            self._table_started = time.monotonic()
            self._table_rows = 0
            self._row_bytes = None
            estimate = await self._io(
                f"estimate of {state.current}", self.reader.estimate_rows, table.schema, table.name
            )
            self._estimate = estimate.rows
            self._row_bytes, self._measured = estimate.row_bytes, False
        point = await self._io("open a read view", self.reader.begin)
        retries = 0
        try:
            while True:
                seed()
                relation = self._relation(point)
                if relation is _Relation.AT:
                    break
                if relation is _Relation.AHEAD:
                    retries += 1
                    if retries > _MAX_RETRIES:
                        raise IntegrityError(
                            f"the stream stands past every snapshot point the source reports "
                            f"(last: {point.describe()}, stream: {self._describe_here()})",
                            hint="the source's binlog and its consistent snapshots disagree; "
                            "report the server version. Nothing of this chunk was landed",
                        )
                    await self._io("close a read view", self.reader.end)
                    await self._pause(_RETRY_SECONDS)
                    point = await self._io("open a read view", self.reader.begin)
                    continue
                item = self.take_pending()
                if item is None:
                    item = await take()
                if item is None:
                    continue
                if self._beyond(item, point):
                    self._pending = item
                    break
                await handle(item)
            fresh = self.pipeline.snapshot
            if fresh.current != state.current:
                if fresh.done != state.done:  # the stream dropped the table: the next step
                    return  # starts the next one
                self._reading = fresh.current  # renamed: the same table goes on
            await self._read(point, fresh)
        finally:
            with contextlib.suppress(SnapshotStopped):  # a stop: the connection is dropped
                await self._io("close a read view", self.reader.end)

    async def _prepared_ended(self) -> bool:
        """Have the XA transactions prepared when the snapshot began ended? (``settle``)"""
        now = await self._io("list prepared XA transactions", self.reader.prepared)
        if now is None:  # the account may not list them
            log.warning(
                "snapshot cannot list prepared XA transactions (XA RECOVER was refused)",
                hint="an XA transaction prepared before this snapshot began and committed "
                "after it would be missing: grant the account XA RECOVER (MySQL: "
                "XA_RECOVER_ADMIN), or make sure none is prepared when the snapshot starts",
            )
            self._settle = False
            return True
        if self._prepared is None:
            self._prepared = frozenset(now)
            if now:
                log.warning(
                    "snapshot waits for XA transactions prepared before it began to end",
                    prepared=len(now),
                    xids=sorted(now)[:5],
                    hint="their rows are in no binlog event the stream reads: a read view "
                    "after their commit sees them (XA COMMIT or XA ROLLBACK them at the source)",
                )
        if self._prepared & set(now):
            self._hold_until = time.monotonic() + _PREPARED_POLL_SECONDS
            return False
        if self._prepared:
            log.info("snapshot goes on: the prepared XA transactions have ended")
        self._settle = False
        return True

    def progress(self) -> SnapshotProgress:
        state = self.pipeline.snapshot
        if state.current is None:
            return SnapshotProgress(None, 0, None, None, 0)
        rate = None
        if state.current == self._reading and self._table_rows:
            rate = self._table_rows / max(time.monotonic() - self._table_started, 1e-3)
        estimate = self._estimate if state.current == self._reading else None
        return SnapshotProgress(state.current, state.rows, estimate, rate, len(state.tables))

    def _table(self, state: SnapshotState) -> Any:
        history = self.pipeline.history
        name = state.current
        if history is None or name is None:
            return None
        schema, _, table = name.partition(".")
        return history.catalog.table(schema, table)

    async def _follow(self, state: SnapshotState) -> Any:
        """The current table is not in the schema history: the stream took its DROP or
        RENAME. Renamed (and still replicated): the snapshot goes on under the new name from
        the same key (the ``rename`` record moved what landed), and that table is returned.
        Otherwise the table's snapshot ends here (None)."""
        history = self.pipeline.history
        name = state.current
        assert history is not None and name is not None
        catalog = history.catalog
        schema, _, table = name.partition(".")
        key = catalog.key(schema, table)
        # the last change that took the name away, then the renames of the table after it
        changes = history.changes
        index = _taken_away(catalog, changes, range(len(changes) - 1, -1, -1), key)
        fate: object = None
        at = None
        while index is not None:
            fate = _fate(catalog, changes[index], key)
            if fate is _DROPPED or not isinstance(fate, tuple):
                break
            key, at = fate, changes[index].point
            index = _taken_away(catalog, changes, range(index + 1, len(changes)), key)
        found = None if fate is _DROPPED or at is None else catalog.tables.get(key)
        if found is not None and at is not None:
            if not self.pipeline.filter.wants(found.schema, found.name):
                await self._finish(state, 0, f"renamed to {found.qualified}, not replicated")
                return None
            log.warning(
                "snapshot table renamed, going on under the new name",
                table=name,
                renamed_to=found.qualified,
                at=at.describe(),
            )
            self.pipeline.snapshot = state.renamed(found.qualified)
            self._reading = found.qualified if self._reading == name else self._reading
            return found
        why = "not in the schema history"
        if fate is _DROPPED:
            why = "dropped at the source (its drop record governs the rows landed)"
        await self._finish(state, 0, why)
        return None

    async def _read(self, point: ReadPoint, state: SnapshotState) -> None:
        table = self._table(state)
        if table is None:  # dropped or renamed while the stream came to the point
            table = await self._follow(state)
            if table is None:
                return
            state = self.pipeline.snapshot
        if not self.pipeline.filter.wants(table.schema, table.name):
            await self._finish(state, 0, "the table is no longer replicated")
            return
        defs = column_defs(table)
        folded = [c.casefold() for c in table.primary_key]
        key = tuple(
            next(i for i, c in enumerate(table.columns) if c.name.casefold() == k) for k in folded
        )
        shape = _key_shape(table, key)
        if state.after is not None and not _same_key(state, shape):
            # ``after`` is a key value of another key: the key changed (columns, type or
            # collation) or another table took the name while this one went on elsewhere
            moved = _holder(self.pipeline.history, state, table)
            if moved is not None:
                log.warning(
                    "snapshot table renamed, its name taken again: going on under the new name",
                    table=state.current,
                    renamed_to=moved.qualified,
                )
                self.pipeline.snapshot = state.renamed(moved.qualified)
                if self._reading == state.current:
                    self._reading = moved.qualified
                return
            log.warning(
                "snapshot table key changed, read again from its start",
                table=state.current,
                key=list(shape),
                was=None if state.key is None else list(state.key),
            )
            state = self.pipeline.snapshot = state.restarted()
        version, keep = self.pipeline.filter.project(table.schema, table.name, defs, key)
        # a key column left out by filters.exclude_columns: readers identify the landed rows
        # by all their columns, so the table is read whole after a truncate, as a keyless one
        landed = {column.index for column in version.columns}
        traits = self.pipeline.history.catalog.traits if self.pipeline.history else None
        walkable = (
            bool(key)
            and all(i in landed for i in key)
            and not any(defs[i].real_type in _UNWALKABLE for i in key)
            and all(_sent_back_exactly(table.columns[i].charset) for i in key)
            and not any(_padded_no_pad(table.columns[i], traits) for i in key)
        )
        limit = self._limit() if walkable else None
        after = state.after if walkable else None
        until = state.until if walkable else None
        doing = f"read {state.current}"
        if walkable and after is None:
            # the table's first chunk: its greatest key now ends the walk (a row of a greater
            # key is inserted after this read point, and the stream lands it), so a table
            # that grows as fast as it is read is read through all the same
            until = await self._io(doing, self.reader.greatest, table.schema, table.name, defs, key)
        at = point.position if point.position.file else (self.pipeline.position or point.position)
        ts = dt.datetime.now(dt.UTC)
        stats = ReadStats()
        rows_iter = self.reader.rows(
            table.schema,
            table.name,
            defs,
            key if walkable else (),
            after,
            limit,
            self.config.chunk_bytes if walkable else None,
            stats,
            None if walkable else self.config.chunk_bytes,  # a table read whole: its blocks
            until=until,
        )
        total = 0
        last: tuple[object, ...] | None = None
        held: list[tuple[Block, int]] = []  # a walkable chunk is handed over once read whole
        # the whole table at once, or the first chunk of a table whose landed rows may be
        # stale (``SnapshotState.reset``): a truncate record first, then the rows
        reset = not walkable or state.resets
        while True:
            read_before = stats.bytes
            try:
                rows = await self._io(doing, next, rows_iter, None)
            except (SnapshotTypeError, ValueError) as exc:
                raise IntegrityError(
                    f"snapshot of {version.name} at {point.describe()}: {exc}",
                    hint="leave the table out of the snapshot (`filters`), or report the "
                    "column's type and value; nothing of this chunk was landed",
                ) from exc
            if rows is None:
                break
            block, last = rows
            total += block.count
            nbytes = stats.bytes - read_before
            if walkable:
                held.append((block, nbytes))
                continue
            await self.pipeline.snapshot_rows(
                version, keep, block, at, ts, self.server_id, reset=reset, nbytes=nbytes
            )
            reset = False
        # the SELECT took the columns' names as the table stands now, not as of the point:
        # they must still be the history's (``TableChanged`` drops the chunk)
        names = [c.name for c in table.columns]
        await self._io(doing, self.reader.check_columns, table.schema, table.name, names)
        fresh = self.pipeline.snapshot
        if (fresh.current, fresh.after, fresh.rows) != (state.current, state.after, state.rows):
            # the progress moved back while the chunk was read (a transaction's parts were
            # dropped, and the chunks staged with them): this chunk is read again from there
            log.debug("snapshot chunk read again", table=state.current, at=point.describe())
            return
        for block, nbytes in held:
            await self.pipeline.snapshot_rows(
                version, keep, block, at, ts, self.server_id, reset=reset, nbytes=nbytes
            )
            reset = False
        held.clear()
        if reset and state.resets:  # no row to follow it: the table is empty now
            self.pipeline.snapshot_reset(version.name, at, ts)
        self.rows_read += total
        self._table_rows += total
        if total:
            self._row_bytes, self._measured = stats.bytes / total, True
        reached = None if last is None else tuple(last[i] for i in key)
        more = limit is not None and (total == limit or stats.cut) and reached != until
        # the progress as it is now (a request may have queued tables meanwhile)
        state = self.pipeline.snapshot
        if (state.after, state.rows) != (fresh.after, fresh.rows) or (
            state.resets and not fresh.resets
        ):
            # moved while the rows were handed over: a request asked for this table again
            # (it starts again, after a truncate), or the progress went back (the chunk is
            # read again from there); either way the rows handed over are superseded
            log.debug("snapshot chunk superseded", table=state.current, at=point.describe())
            return
        if walkable and more and reached is not None:
            progress = state.advanced(reached, total, shape, until)
            await self.pipeline.snapshot_chunk_done(progress)
            log.debug(
                "snapshot chunk",
                table=state.current,
                rows=total,
                bytes=stats.bytes,
                at=point.describe(),
            )
            return
        await self._finish(state, total, None)

    def _limit(self) -> int:
        """The next chunk's LIMIT: ``chunk_rows``, or fewer when the table's rows are wide:
        as many as fill ``chunk_bytes`` at the width read so far, four times that at the
        server's estimate (the read stops at the bytes in any case; rows the LIMIT let
        through beyond them are read and dropped)."""
        rows = self.config.chunk_rows
        if self._row_bytes:
            share = 1 if self._measured else 4
            rows = min(rows, int(share * self.config.chunk_bytes / self._row_bytes) + 1)
        return max(rows, 1)

    async def _finish(self, state: SnapshotState, rows: int, why: str | None) -> None:
        seconds = max(time.monotonic() - self._table_started, 1e-6)
        done = state.rows + rows
        if why is None:
            log.info(
                "snapshot table done",
                table=state.current,
                rows=done,
                rows_per_s=round(self._table_rows / seconds),
                tables_left=len(state.tables) - 1,
            )
        else:
            log.warning("snapshot table skipped", table=state.current, reason=why)
        self._reading = None
        await self.pipeline.snapshot_chunk_done(state.finished(rows))

    def _relation(self, point: ReadPoint) -> _Relation:
        here = self.pipeline.position
        mark = point.position
        if mark.mysql_gtid is not None:
            if here is None or here.mysql_gtid is None:
                return _Relation.BEHIND
            if not is_past(StreamPosition(mysql_gtid=mark.mysql_gtid), here):
                return _Relation.AHEAD  # the stream has a transaction the read view lacks
            return _Relation.AT if is_past(here, mark) else _Relation.BEHIND
        last = self._last_end  # a transaction handled in this run that ends after the point
        if (
            last is not None
            and last != (mark.file, mark.position)
            and position_reached(*last, mark.file, mark.position)
        ):
            return _Relation.AHEAD
        if (
            here is not None
            and here.file
            and position_reached(here.file, here.position, mark.file, mark.position)
        ):
            return _Relation.AT
        seen = self._seen
        if seen is not None and position_reached(seen[0], seen[1], mark.file, mark.position):
            return _Relation.AT
        return _Relation.BEHIND

    def _describe_here(self) -> str:
        here = self.pipeline.position
        return "the start" if here is None else here.describe()

    def _beyond(self, item: StreamItem, point: ReadPoint) -> bool:
        """A transaction the read view does not hold (it must land after the chunk). A run
        (a snapshot requested while runs are on) by its first transaction: one that starts
        after the point lands after the chunk; one that starts before it is handed over whole,
        and if it reaches past the point the stream stands ahead of it, so the read view is
        opened again (``_relation``), as for a transaction in the binlog before its commit was
        visible."""
        if isinstance(item, TransactionRun):
            first = item.taken.record(0)
            return self._past(point, first.gtid, item.taken.file, first.start)
        if not isinstance(item, (Transaction, TransactionPart)):
            return False
        return self._past(point, item.gtid, item.file, item.position)

    @staticmethod
    def _past(point: ReadPoint, gtid: str | None, file: str, position: int) -> bool:
        """Whether a transaction (its GTID, where it starts) lies past the read view."""
        mark = point.position
        if mark.mysql_gtid is not None:
            return gtid is None or not mark.mysql_gtid.contains(MysqlGtid.parse(gtid))
        return position_reached(file, position, mark.file, mark.position)


_DROPPED = object()


def _fate(catalog: Any, change: Any, key: tuple[str, str]) -> object:
    """What ``change`` did to the table named ``key``: None (kept its name), ``_DROPPED``, or
    the key it was renamed to."""
    now = key
    for effect in change.effects:
        if isinstance(effect, ddl.TableRenamed):
            if catalog.key(effect.before.schema, effect.before.name) == now:
                now = catalog.key(effect.after.schema, effect.after.name)
        elif isinstance(effect, ddl.TableDropped):
            if catalog.key(effect.table.schema, effect.table.name) == now:
                return _DROPPED
        elif isinstance(effect, ddl.DatabaseDropped) and any(
            catalog.key(t.schema, t.name) == now for t in effect.tables
        ):
            return _DROPPED
    return None if now == key else now


def _taken_away(catalog: Any, changes: Any, indexes: range, key: tuple[str, str]) -> int | None:
    """The first of ``indexes`` whose change dropped or renamed the table ``key``."""
    return next((i for i in indexes if _fate(catalog, changes[i], key) is not None), None)


def _key_shape(table: Any, key: tuple[int, ...]) -> tuple[str, ...]:
    """What a table's key is, for its progress (``SnapshotState.key``): each key column's id
    (the schema history's, unique in the catalog and kept across renames), type, character
    set and collation."""
    return tuple(
        f"{c.id}:{c.column_type}:{c.charset}:{c.collation}" for c in (table.columns[i] for i in key)
    )


def _same_key(state: SnapshotState, shape: tuple[str, ...]) -> bool:
    """``state.after`` is a value of the key ``shape`` describes (progress written before
    keys were recorded: as many values as columns)."""
    if state.key is None:
        return state.after is not None and len(state.after) == len(shape)
    return state.key == shape


def _holder(history: Any, state: SnapshotState, named: Any) -> Any:
    """The table that holds the key columns ``state.key`` names, when it is another than
    ``named`` (the table renamed away, another created under its name); else None."""
    if state.key is None or history is None:
        return None
    first = state.key[0].partition(":")[0]
    if first in ("0", "None"):  # no id given: nothing to find the table by
        return None
    for table in history.catalog.tables.values():
        if table.qualified != named.qualified and any(str(c.id) == first for c in table.columns):
            return table
    return None


def _padded_no_pad(column: Any, traits: ServerTraits | None) -> bool:
    """A CHAR key column of a NO PAD collation: the server stores its values padded with
    spaces and sends them without, and its index orders the padded values ('a<TAB>'
    before 'a'), while a WHERE compares the value sent, unpadded, and trailing characters
    count ('a' < 'a<TAB>'): a chunk's ``k > last`` would skip rows. Such a key is not walked."""
    return column.data_type == "char" and no_pad(column, traits)


def _sent_back_exactly(charset: str | None) -> bool:
    """A key column of ``charset`` (None: not text) goes back to the server exactly as the
    next chunk's WHERE quotes it (``_KEY_CHARSETS``)."""
    return charset is None or charset.lower() in _KEY_CHARSETS
