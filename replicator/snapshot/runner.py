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

A chunk is ``snapshot.chunk_rows`` rows after the last key landed; a table without a primary
key (or with one a range cannot walk: ENUM, SET, FLOAT, DOUBLE, BIT, GEOMETRY) is one chunk,
read in one read view and landed in one batch. The progress (``state``) is committed with
the batch that holds the rows.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import enum
import fnmatch
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import structlog

from ..binlog import events as ev
from ..binlog.constants import ColumnType as T
from ..binlog.gtid import MysqlGtid
from ..binlog.position import StreamPosition, is_past, position_reached
from ..binlog.transaction import Transaction, TransactionPart
from ..config import SnapshotConfig, SourceConfig
from ..errors import IntegrityError
from ..pipeline.pipeline import Pipeline
from ..snapshot_progress import SnapshotState
from .columns import SnapshotTypeError, column_defs
from .reader import ReadPoint, SnapshotReader

log = structlog.get_logger("replicator")
_UNWALKABLE = frozenset({T.ENUM, T.SET, T.FLOAT, T.DOUBLE, T.BIT, T.GEOMETRY, T.JSON, T.VECTOR})
_RETRY_SECONDS = 0.02
_MAX_RETRIES = 500  # about 10 s of reopened read views


@dataclass(frozen=True, slots=True)
class Progress:
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


Take = Callable[[], Awaitable[object | None]]
Handle = Callable[[object], Awaitable[None]]


class SnapshotRunner:
    def __init__(
        self,
        source: SourceConfig,
        config: SnapshotConfig,
        flavor: str,
        pipeline: Pipeline,
    ) -> None:
        self.config = config
        self.pipeline = pipeline
        self.reader = SnapshotReader(source, flavor)
        self.server_id = 0
        self._pending: object | None = None  # the first stream item after the point
        self._seen: tuple[str, int] | None = None  # the stream's last event end
        self._last_end: tuple[str, int] | None = None  # the last transaction's end
        self._reading: str | None = None  # the table the figures below are about
        self._table_started = time.monotonic()
        self._table_rows = 0  # read in this run
        self._estimate: int | None = None
        self.rows_read = 0  # since start (metrics)

    def has_work(self) -> bool:
        return self.pipeline.snapshot.active

    def queue(self, patterns: list[str]) -> list[str]:
        """Queue the replicated tables matching ``db.table`` globs; returns them."""
        history = self.pipeline.history
        assert history is not None
        wants = self.pipeline.filter.wants
        names = sorted(
            f"{schema}.{table}"
            for schema, table in history.catalog.tables
            if wants(schema, table)
            and any(fnmatch.fnmatchcase(f"{schema}.{table}", g) for g in patterns)
        )
        self.pipeline.snapshot = self.pipeline.snapshot.add(names)
        return names

    def take_pending(self) -> object | None:
        item, self._pending = self._pending, None
        return item

    def observe(self, item: object) -> None:
        """Every stream item handed to the pipeline: how far the stream has read."""
        if isinstance(item, Transaction):
            self._seen = self._last_end = (item.end_file, item.end_position)
        elif isinstance(item, ev.HeartbeatEvent):
            if item.log_file:
                self._seen = (item.log_file, item.log_position)
        elif isinstance(item, ev.Event) and item.header.log_pos and not item.header.artificial:
            self._seen = (item.file, item.next_position)

    def close(self) -> None:
        self.reader.close()

    async def step(self, take: Take, handle: Handle) -> None:
        """Land one chunk of the current table (or move past a table that is gone)."""
        loop = asyncio.get_running_loop()
        state = self.pipeline.snapshot
        table = self._table(state)
        if table is None:
            await self._finish(state, 0, "the table is not in the schema history (dropped?)")
            return
        if state.current != self._reading:
            self._reading = state.current
            self._table_started = time.monotonic()
            self._table_rows = 0
            self._estimate = await loop.run_in_executor(
                None, self.reader.estimate_rows, table.schema, table.name
            )
        point = await loop.run_in_executor(None, self.reader.begin)
        retries = 0
        try:
            while True:
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
                    await loop.run_in_executor(None, self.reader.end)
                    await asyncio.sleep(_RETRY_SECONDS)
                    point = await loop.run_in_executor(None, self.reader.begin)
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
            await self._read(point, self.pipeline.snapshot)
        finally:
            await loop.run_in_executor(None, self.reader.end)

    def progress(self) -> Progress:
        state = self.pipeline.snapshot
        if state.current is None:
            return Progress(None, 0, None, None, 0)
        rate = None
        if state.current == self._reading and self._table_rows:
            rate = self._table_rows / max(time.monotonic() - self._table_started, 1e-3)
        estimate = self._estimate if state.current == self._reading else None
        return Progress(state.current, state.rows, estimate, rate, len(state.tables))

    def _table(self, state: SnapshotState) -> Any:
        history = self.pipeline.history
        name = state.current
        if history is None or name is None:
            return None
        schema, _, table = name.partition(".")
        return history.catalog.table(schema, table)

    async def _read(self, point: ReadPoint, state: SnapshotState) -> None:
        loop = asyncio.get_running_loop()
        table = self._table(state)
        if table is None:  # dropped while the stream came to the point
            await self._finish(state, 0, "the table was dropped")
            return
        if not self.pipeline.filter.wants(table.schema, table.name):
            await self._finish(state, 0, "the table is no longer replicated")
            return
        defs = column_defs(table)
        folded = [c.casefold() for c in table.primary_key]
        key = tuple(
            next(i for i, c in enumerate(table.columns) if c.name.casefold() == k) for k in folded
        )
        walkable = bool(key) and not any(defs[i].real_type in _UNWALKABLE for i in key)
        version, keep = self.pipeline.filter.project(table.schema, table.name, defs, key)
        limit = self.config.chunk_rows if walkable else None
        after = state.after if walkable else None
        at = point.position if point.position.file else (self.pipeline.position or point.position)
        ts = dt.datetime.now(dt.UTC)
        rows_iter = self.reader.rows(
            table.schema, table.name, defs, key if walkable else (), after, limit
        )
        total = 0
        last: tuple[object, ...] | None = None
        reset = not walkable  # the whole table at once: it replaces what landed before
        while True:
            try:
                rows = await loop.run_in_executor(None, next, rows_iter, None)
            except (SnapshotTypeError, ValueError) as exc:
                raise IntegrityError(
                    f"snapshot of {version.name} at {point.describe()}: {exc}",
                    hint="leave the table out of the snapshot (`filters`), or report the "
                    "column's type and value; nothing of this chunk was landed",
                ) from exc
            if rows is None:
                break
            block, last = rows
            await self.pipeline.snapshot_rows(
                version, keep, block, at, ts, self.server_id, reset=reset
            )
            reset = False
            total += block.count
        self.rows_read += total
        self._table_rows += total
        if walkable and limit is not None and total == limit and last is not None:
            progress = state.advanced(tuple(last[i] for i in key), total)
            await self.pipeline.snapshot_chunk_done(progress)
            log.debug("snapshot chunk", table=state.current, rows=total, at=point.describe())
            return
        await self._finish(state, total, None)

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

    def _beyond(self, item: object, point: ReadPoint) -> bool:
        """A transaction the read view does not hold (it must land after the chunk)."""
        if not isinstance(item, (Transaction, TransactionPart)):
            return False
        mark = point.position
        if mark.mysql_gtid is not None:
            return item.gtid is None or not mark.mysql_gtid.contains(MysqlGtid.parse(item.gtid))
        return position_reached(item.file, item.position, mark.file, mark.position)
