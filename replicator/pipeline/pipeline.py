"""From the replica stream to committed batches.

Each rows event of a transaction becomes one ``Run``: its block of row images
(``binlog.block``), numbered as one ``_seq`` range, with the metadata once, filtered by
database/table globs (and columns dropped); runs are appended to the open batch. A batch
commits, whole transactions only, when it reaches ``batch_max_rows`` row changes,
``batch_max_bytes`` binlog bytes, or ``batch_max_seconds`` of age. A transaction too large
for memory arrives in parts; its rows stream into the batch's staging files as they come and
the batch commits at its end. Converting rows and writing Parquet run in a worker thread (the
writer thread), and the commit protocol (``sink.landing``) in another (the commit thread), each
in the order they are handed over, a commit only once the rows handed over before it are
written, so the event loop stays free and one batch's commit (closing its files encodes most
of their Parquet) runs beside the next batch's rows:

* row changes are staged in the loop and handed to the worker in chunks of about
  ``STAGE_ROWS`` (a conversion per transaction would spend more on fixed costs than on rows);
  a snapshot block goes at once, and the reader goes on while the blocks ahead of it hold at
  most ``SNAPSHOT_INFLIGHT_BYTES`` of the source's bytes (a block of wide rows is large
  however few its rows), so that reading the next blocks overlaps the worker's encoding;
* a due batch's commit is handed over like a chunk, and the loop goes on decoding the next
  batch while the worker encodes and commits (Parquet encoding releases the GIL, so this
  runs on a second core). What the commit did (checkpoint, stats, ``on_commit``) is applied
  in the loop once it is done, in order; an error of the worker is raised in the loop at the
  next hand-over. At most ``INFLIGHT_ROWS`` row changes and ``MAX_INFLIGHT_COMMITS``
  commits wait for the worker, so what the loop has taken is never far ahead of what has
  landed; ``commit()`` and ``close()`` called from outside wait for all of it. A stop out of
  time calls ``abandon()`` instead: what is still queued is dropped, never half-landed.

XA: the rows of a transaction that ends at XA PREPARE are held (``HeldXa``) and land with
the transaction that commits them (``XA COMMIT``), which gives them their ``_seq``, ``_gtid``
and ``_ts``; ``XA ROLLBACK`` drops them. Held transactions outlive batches and restarts
through the landing zone (``_state/xa/``). An XA COMMIT of a transaction prepared before the
stream's start has no rows here: it is counted and logged, never guessed.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import dataclasses
import datetime as dt
import fnmatch
import functools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, NoReturn

import structlog

from ..binlog import events as ev
from ..binlog.block import Block
from ..binlog.constants import EventType
from ..binlog.errors import IncidentError
from ..binlog.position import StreamPosition
from ..binlog.runs import TakenRun, TransactionRun
from ..binlog.schema import ColumnDef
from ..binlog.transaction import Ending, Transaction, TransactionPart
from ..binlog.xa import xa_id_of
from ..checkpoint import Checkpoint, replay_after
from ..config import FilterConfig, SinkConfig
from ..errors import ConfigError, IntegrityError, SinkError
from ..landed.contract import SNAPSHOT_RESET
from ..schema import ddl
from ..schema.history import SchemaChange, SchemaHistory
from ..schema.ledger import SchemaLedger
from ..schema.model import Table
from ..schema.tracker import SchemaChangeEvent, TableLearnedEvent
from ..sink.changes import HeldXa, Run, TableVersion, rows_in
from ..sink.landing import Batch, LandingZone
from ..snapshot_progress import SnapshotState
from ..source.items import GtidStateLearned, StreamItem, TransactionAborted
from ..source.proof import Digest, Proof
from .lifecycle import Columns, check_name, landed_schema, schema_records
from .statements import StatementLoggedError, check_statement

log = structlog.get_logger("replicator")
_PRE_GA_ROWS = frozenset(
    {EventType.PRE_GA_WRITE_ROWS, EventType.PRE_GA_UPDATE_ROWS, EventType.PRE_GA_DELETE_ROWS}
)
Groups = list[tuple[TableVersion, list[Run]]]
STAGE_ROWS = 16_384
"""Row changes staged in the loop before they are handed to the writer thread..."""
STAGE_BYTES = 8 << 20
"""...or binlog bytes of the rows events they came in (wide rows: 16k rows of 32 KiB each
would be half a GiB)."""
INFLIGHT_ROWS = 6 * STAGE_ROWS
"""Row changes handed to the writer thread and not yet converted, at most (memory). Enough
that the stream goes on while the writer thread encodes a committed batch's Parquet (a batch
of 100k rows takes it about a tenth of a second), instead of stalling on each commit. On the
standard benchmark 6 chunks land as fast as 8 with about 15 MB less at the peak (4 chunks:
25 MB less, 3% slower)."""
INFLIGHT_BYTES = 6 * STAGE_BYTES
"""Binlog bytes of the row changes handed to the writer thread and not yet converted, at most
(memory: ``INFLIGHT_ROWS`` of wide rows would be GiBs)."""
SNAPSHOT_INFLIGHT_BYTES = 16 << 20
"""Bytes read from the source (snapshot blocks) handed to the writer thread and not yet done,
beyond which a snapshot block waits once one more is on its way (memory: one block of wide
rows can be as large as ``snapshot.chunk_bytes``, and one always goes). Blocks of narrow rows
are small (``snapshot.reader.FETCH_ROWS`` rows), and while the writer thread encodes a row
group (128k rows: about a fifth of a second on the standard table) the reader fills about a
dozen; a bound of one waiting block made the two take turns (docs/performance.md,
Snapshots)."""
SNAPSHOT_INFLIGHT = 16
"""Snapshot hand-overs waiting for the writer thread at most, whatever their bytes (a bound
for blocks whose bytes are not known)."""
MAX_INFLIGHT_COMMITS = 2
"""Commits handed to the writer thread and not yet done, at most (beyond the one the loop is
handing over). Without this bound small batches piled up behind the writer thread by the
thousand (``INFLIGHT_ROWS`` counts rows, and a commit has none): the loop, seconds ahead of
what had landed, reported that as no lag, and a stop had to land them all."""
_INFLIGHT_POLL = 0.5  # seconds
_SKIPPED = object()  # what the writer thread returns for work it dropped (see abandon)


class PipelineInterrupted(Exception):
    """A stop ran out of time while the pipeline waited for the writer thread (``interrupt``).
    What was being taken may be half-staged, so nothing may commit any more: the caller
    abandons the pipeline (``abandon``), and the checkpoint stays where it was."""


@dataclass(frozen=True, slots=True)
class _Commit:
    """A commit handed to the writer thread: what the loop applies once it is done."""

    batch: Batch
    started: float
    held: dict[str, HeldXa]
    history_mark: int  # the changes of the schema history this commit covers (SchemaLedger)
    snapshot: SnapshotState  # the snapshot progress this commit lands
    proof: dict[str, Any] | None  # the manifest's source proof (source.proof)
    newest: dt.datetime | None = None  # the commit time (``_ts``) of its newest transaction
    # its row changes by (table, op): added to ``PipelineStats.rows_by_table_op`` once it is
    # committed (``Pipeline._committed``)
    counts: dict[tuple[str, str], int] = field(default_factory=dict)


@dataclass(slots=True)
class PipelineStats:
    transactions: int = 0
    row_changes: int = 0
    # row changes committed, by (table, op): added when their batch commits, never for rows
    # taken and then dropped (an aborted transaction's parts, a batch that failed or was
    # dropped at a stop; they are counted when they land again)
    rows_by_table_op: dict[tuple[str, str], int] = field(default_factory=dict)
    batches: int = 0
    last_batch_rows: int = 0
    last_batch_seconds: float = 0.0
    last_commit_time: float = 0.0  # monotonic
    last_event_timestamp: int = 0  # binlog header time of the last committed transaction
    # the commit time (``_ts``, epoch seconds) of the newest transaction of the last committed
    # batch (0.0: none yet): what the lag is measured from
    last_committed_ts: float = 0.0
    filtered_transactions: int = 0
    aborted_parts: int = 0
    xa_prepared: int = 0  # XA transactions held at PREPARE
    xa_committed: int = 0  # landed at their XA COMMIT
    xa_rolled_back: int = 0  # dropped at XA ROLLBACK
    xa_unknown: int = 0  # outcomes of transactions prepared before the stream's start


class TableFilter:
    """Include/exclude globs over ``db.table``; excluded columns over ``db.table.column``."""

    def __init__(self, cfg: FilterConfig) -> None:
        self._cfg = cfg
        self._columns = cfg.exclude_columns
        self._tables: dict[tuple[str, str], bool] = {}
        self._versions: dict[object, tuple[TableVersion, tuple[int, ...] | None]] = {}
        self._last_map: ev.TableMapEvent | None = None
        self._last: tuple[TableVersion, tuple[int, ...] | None] = (
            TableVersion("", "", ()),
            None,
        )

    def wants(self, schema: str, table: str) -> bool:
        key = (schema, table)
        found = self._tables.get(key)
        if found is None:
            found = self._tables[key] = self._cfg.wants(schema, table)
        return found

    def version(self, table_map: ev.TableMapEvent) -> tuple[TableVersion, tuple[int, ...] | None]:
        """The landed table version and, when columns are excluded, the kept indexes."""
        last = self._last_map
        if table_map is last:  # the rows events of one table map (held: no id reuse)
            return self._last
        if (
            last is not None
            and table_map.columns is last.columns  # the parser's cached decode (held)
            and table_map.table == last.table
            and table_map.schema == last.schema
            and table_map.primary_key == last.primary_key
        ):  # the next transaction's TABLE_MAP of the same table: no hashing of its columns
            self._last_map = table_map
            return self._last
        # keyed by content, never by id(): table map objects come and go
        key = (table_map.schema, table_map.table, table_map.columns, table_map.primary_key)
        cached = self._versions.get(key)
        if cached is None:
            cached = self._version(table_map)
            if len(self._versions) > 10_000:
                self._versions.clear()
            self._versions[key] = cached
        self._last_map, self._last = table_map, cached
        return cached

    def _version(self, table_map: ev.TableMapEvent) -> tuple[TableVersion, tuple[int, ...] | None]:
        return self.project(
            table_map.schema, table_map.table, table_map.columns, tuple(table_map.primary_key)
        )

    def project(
        self, schema: str, table: str, columns: tuple[ColumnDef, ...], primary: tuple[int, ...]
    ) -> tuple[TableVersion, tuple[int, ...] | None]:
        """The landed version of a table with these columns and, when columns are
        excluded (or are MariaDB long UNIQUE hash fields, ``binlog.tablemap``), the indexes
        kept."""
        keep: tuple[int, ...] | None = None
        hashes = bool(columns) and columns[-1].long_unique_hash  # they come last
        if self._columns or hashes:
            prefix = f"{schema}.{table}."
            kept = tuple(
                i
                for i, c in enumerate(columns)
                if not c.long_unique_hash
                and not any(
                    fnmatch.fnmatchcase(prefix + (c.name or f"col_{i + 1}"), g)
                    for g in self._columns
                )
            )
            if len(kept) != len(columns):
                keep = kept
                columns = tuple(columns[i] for i in kept)
        return TableVersion(schema, table, columns, primary), keep


def _followed(state: SnapshotState, change: SchemaChange) -> SnapshotState:
    """The snapshot's queue after ``change``: each entry follows its table through RENAMEs
    (in statement order, so a swap ``a TO tmp, b TO a, tmp TO b`` swaps the entries), and a
    table dropped leaves the queue; the one being read ends there (its ``drop`` record
    governs the rows of it that landed)."""
    if not state.active:
        return state
    current = state.current
    was = {name: name for name in state.tables}  # each entry's name before the statement
    for effect in change.effects:
        if isinstance(effect, ddl.TableRenamed):
            old, new = effect.before.qualified, effect.after.qualified
            if old in was:
                was[new] = was.pop(old)
            state = state.moved(old, new)
            continue
        if isinstance(effect, ddl.TableDropped):
            gone: tuple[Table, ...] = (effect.table,)
        elif isinstance(effect, ddl.DatabaseDropped):
            gone = effect.tables
        else:
            continue
        for table in gone:
            if table.qualified in state.tables:
                log.warning(
                    "snapshot table skipped",
                    table=table.qualified,
                    reason="dropped at the source (its drop record governs the rows landed)"
                    if table.qualified == state.current
                    else "dropped at the source before its snapshot",
                    at=change.point.describe(),
                )
            state = state.dropped(table.qualified)
            was.pop(table.qualified, None)
    for name, old in was.items():
        if name == old:
            continue
        if old == current:
            log.warning(
                "snapshot table renamed, going on under the new name",
                table=old,
                renamed_to=name,
                at=change.point.describe(),
            )
        else:
            log.info(
                "snapshot table renamed, queued under the new name",
                table=old,
                renamed_to=name,
                at=change.point.describe(),
            )
    return state


def _commit_time(transaction: Transaction | TransactionPart, fallback: int) -> dt.datetime:
    gtid = getattr(transaction, "mysql_gtid", None)
    if isinstance(gtid, ev.MysqlGtidEvent) and gtid.immediate_commit_timestamp:
        return dt.datetime.fromtimestamp(gtid.immediate_commit_timestamp / 1_000_000, dt.UTC)
    return _utc_second(fallback)


def _group(out: Groups, version: TableVersion, run: Run) -> None:
    """``run`` after ``out``'s runs: with the last group's when it is of the same table
    version, else in a group of its own."""
    if out and (out[-1][0] is version or out[-1][0] == version):
        out[-1][1].append(run)
    else:
        out.append((version, [run]))


def _utc_micros(micros: int) -> dt.datetime:
    """A commit time in microseconds (a run's, ``binlog.runs``) as ``_commit_time`` makes
    it: whole seconds from the header's time, others from MySQL's commit timestamp."""
    if micros % 1_000_000 == 0:
        return _utc_second(micros // 1_000_000)
    return dt.datetime.fromtimestamp(micros / 1_000_000, dt.UTC)


@functools.lru_cache(maxsize=256)
def _utc_second(seconds: int) -> dt.datetime:
    """A binlog header's time (whole seconds, shared by the many transactions of a busy
    second) as an aware datetime, made once per second."""
    return dt.datetime.fromtimestamp(seconds, dt.UTC)


class Pipeline:
    """Consumes stream items; commits batches to the landing zone."""

    def __init__(
        self,
        sink: SinkConfig,
        filters: FilterConfig,
        zone: LandingZone,
        checkpoint: Checkpoint,
        *,
        on_commit: Callable[[dict[str, Any], PipelineStats], None] | None = None,
        on_commit_failed: Callable[[BaseException], None] | None = None,
        history: SchemaLedger | SchemaHistory | None = None,
        proof: dict[str, Any] | None = None,
        columns: Columns | None = None,
    ) -> None:
        self.sink = sink
        # how a history table's columns land (``snapshot.columns.column_defs``): gives create
        # and alter records the table's file schema (``lifecycle.landed_schema``); None: none
        self._columns = columns
        self.zone = zone
        self.filter = TableFilter(filters)
        self.checkpoint = checkpoint
        self.stats = PipelineStats()
        self.on_commit = on_commit
        # told once, as soon as the loop sees it, that a batch failed to land: its rows or its
        # commit failed in the writer thread (the error itself is raised later, see _reap)
        self.on_commit_failed = on_commit_failed
        # the writer thread converts rows and writes them; the commit thread commits batches
        # (closing a batch's files encodes most of their Parquet), so that one batch's commit
        # runs beside the next one's rows (see _submit)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="parquet-writer")
        self._committer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="batch-commit")
        self._last_work: Future[Any] | None = None  # the writer thread's
        self._batch: Batch | None = None
        self._batch_started = 0.0
        self._batch_bytes = 0
        self._batch_rows = 0  # staged, in flight and written
        # Row changes staged for the writer thread, each version's in stream order: one write
        # a file a chunk, however the transactions interleave their tables. By table version
        # as the landing zone names files (equal versions are one file whatever the objects:
        # a held XA's version read back after a restart is a copy), found by the version
        # object's id first (the index keeps the object, so its id is not reused meanwhile).
        self._staged: dict[TableVersion, list[Run]] = {}
        self._staged_index: dict[int, tuple[TableVersion, list[Run]]] = {}
        self._staged_rows = 0
        self._staged_bytes = 0  # binlog bytes of the staged rows' events (see STAGE_BYTES)
        # work handed to the writer and commit threads, oldest first: (future, rows, commit or
        # None, the batch it writes, the bytes its snapshot blocks took to read, the binlog
        # bytes of its stream rows, its order)
        self._inflight: deque[tuple[asyncio.Future[Any], int, _Commit | None, Batch, int, int, int]]
        self._inflight = deque()
        self._inflight_rows = 0
        self._inflight_commits = 0
        self._inflight_bytes = 0  # of snapshot blocks, as read from the source
        self._inflight_row_bytes = 0  # binlog bytes of the stream's rows (INFLIGHT_BYTES)
        self._abandoned = False  # stopping out of time: the writer thread runs nothing more
        self._interrupted = False  # see interrupt()
        self._wake: asyncio.Future[None] | None = None  # ends a wait for the writer thread
        self._newest: dt.datetime | None = None  # ``_ts`` of the open batch's newest transaction
        # the open batch's row changes by (table, op), counted as they are taken (``_count``)
        # and added to the stats' totals only once the batch commits (``_committed``)
        self._batch_counts: dict[tuple[str, str], int] = {}
        self._next_batch: Batch | None = None  # follows a commit still in the writer thread
        # the first work that failed, by the order it was handed over in, and its error: work
        # handed over after it does not run (see _guarded)
        self._failed: tuple[int, BaseException] | None = None
        self._failing = threading.Lock()
        self._handed = 0  # work handed over so far (its order)
        self._error: BaseException | None = None  # the first one the loop saw (see _reap)
        self._error_raised = False
        self._failed_batch: Batch | None = None  # its work failed: close() drops its files
        self._next_seq = checkpoint.next_seq
        self._position: StreamPosition | None = checkpoint.position
        # the GTID state the stream learnt for a start without one (GtidStateLearned)
        self._learned: StreamPosition | None = None
        self._in_parts = False
        # prepared XA transactions awaiting their outcome, and the set the checkpoint holds
        self._held: dict[str, HeldXa] = {
            item.key: item for item in zone.load_held(checkpoint.xa_pending)
        }
        self._held_committed = dict(self._held)
        # The run's schema history (each DDL's effects are landed as lifecycle records of the
        # open batch, and the history is written with the batch that holds them; the ledger
        # says when): a history given as it is counts as not written yet. None: no history
        # kept (offline tools).
        self.ledger = (
            SchemaLedger(history, landed=False) if isinstance(history, SchemaHistory) else history
        )
        self._records: list[dict[str, Any]] = []  # lifecycle records of the open batch
        self.require_names = history is not None  # rows need named columns to land
        self._named: TableVersion | None = None  # the last version whose names were checked
        # after `checkpoint set` moved the stream back: batches up to here are replays (as of
        # the last commit handed over: the commit thread must not read what the loop changes)
        self._replay_until = checkpoint.replay_until
        # the snapshot progress as of the last chunk taken, and as of the last commit
        self.snapshot = checkpoint.snapshot
        self._snapshot_committed = checkpoint.snapshot
        self._in_chunk = False  # a snapshot chunk is being added: no commit in between
        # The source proof (source.proof): of the last transaction taken, made at commit time
        # from the transaction and the position before it; a batch without one carries the
        # last proof forward (``proof``: the last manifest's).
        self._proof = self._proof_committed = proof
        self._last: Transaction | None = None
        self._last_before: StreamPosition | None = None
        self._last_parts: Digest | None = None  # the digest a large transaction's parts fed
        self._parts_digest: Digest | None = None  # ... while its parts come

    @property
    def position(self) -> StreamPosition | None:
        """After the last transaction added to a batch (committed or not)."""
        return self._position

    def seed(self, origin: StreamPosition) -> None:
        """Where the stream began, when there is no checkpoint yet: the first batch's start, and
        the GTID state the checkpoint carries forward (without it, a first run started at "now"
        would checkpoint file/position only)."""
        if self._position is None:
            self._position = origin

    @property
    def history(self) -> SchemaHistory | None:
        """The schema history as of the last transaction taken (None: none kept)."""
        return None if self.ledger is None else self.ledger.history

    async def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def _open(self) -> Batch:
        if self._batch is None:
            self._batch = self._next_batch or self.zone.begin(self.checkpoint)
            self._next_batch = None
            self._batch_started = time.monotonic()
            self._batch_bytes = 0
            self._batch_rows = 0
            self._newest = None
        return self._batch

    async def _stage(self, batch: Batch, groups: Groups, *, nbytes: int = 0, size: int = 0) -> None:
        """Add row changes to the batch: staged here, handed to the writer thread in chunks
        (``nbytes``: what they took to read, for a snapshot block; ``size``: the binlog bytes
        of the rows events they came in, for the stream's)."""
        index = self._staged_index
        for version, changes in groups:
            hit = index.get(id(version))
            if hit is None:
                hit = index[id(version)] = (version, self._staged.setdefault(version, []))
            hit[1].extend(changes)
            rows = rows_in(changes)
            self._staged_rows += rows
            self._batch_rows += rows
        self._staged_bytes += size
        if self._staged_rows >= STAGE_ROWS or self._staged_bytes >= STAGE_BYTES:
            await self._hand_over(batch, nbytes=nbytes)

    def _unstage(self) -> None:
        """Nothing staged (handed over, or dropped)."""
        self._staged, self._staged_index, self._staged_rows = {}, {}, 0
        self._staged_bytes = 0

    async def _hand_over(self, batch: Batch, *, nbytes: int = 0) -> None:
        """Give the staged rows to the writer thread (without waiting for them)."""
        if self._staged:
            staged, rows, size = list(self._staged.items()), self._staged_rows, self._staged_bytes
            self._unstage()
            self._submit(rows, None, self._append, batch, staged, nbytes=nbytes, size=size)
        await self._reap()

    def _submit(
        self,
        rows: int,
        commit: _Commit | None,
        fn: Callable[..., Any],
        batch: Batch,
        *args: Any,
        nbytes: int = 0,
        size: int = 0,
    ) -> None:
        """Hand work over: rows to the writer thread, a commit to the commit thread, where
        it waits for the rows handed over before it (its batch's last ones among them), and
        commits run one after another. So a batch's commit never starts before its rows are
        written, and the next batch's rows are converted while it commits."""
        order = self._handed
        self._handed += 1
        if commit is None:
            work = self._executor.submit(self._guarded, order, fn, batch, *args)
            self._last_work = work
        else:
            work = self._committer.submit(self._after, self._last_work, order, fn, batch, *args)
        future = asyncio.wrap_future(work)
        self._inflight.append((future, rows, commit, batch, nbytes, size, order))
        self._inflight_rows += rows
        self._inflight_row_bytes += size
        self._inflight_commits += commit is not None
        self._inflight_bytes += nbytes
        # applied as soon as it is done, not at the next hand-over: an idle stream must still
        # report (metrics, notifications) the batch it committed, and see an error at once
        future.add_done_callback(lambda _: self._collect_done())

    def _after(
        self, rows: Future[Any] | None, order: int, fn: Callable[..., Any], *args: Any
    ) -> Any:
        """A commit (commit thread): once the rows handed over before it are done (written,
        failed or dropped: ``_guarded`` then refuses the commit)."""
        if rows is not None:
            # Future.exception returns once the rows are written or failed, and also once a
            # stop out of time cancels them in the writer's queue (``close``), which
            # concurrent.futures.wait would never see: the commit thread would wait forever.
            with contextlib.suppress(BaseException):
                rows.exception()
            if rows.cancelled():
                return _SKIPPED  # never written: nothing to commit
        return self._guarded(order, fn, *args)

    def _guarded(self, order: int, fn: Callable[..., Any], *args: Any) -> Any:
        """Run handed-over work (writer or commit thread), the ``order``-th handed over.
        Once an item fails, nothing handed over after it runs: a commit must never follow rows
        that were not written, nor a commit that failed (what came before it still does: the
        writer thread may run the next batch's rows while a commit runs). After ``abandon``
        nothing runs (the work is dropped, not failed)."""
        if self._abandoned:
            return _SKIPPED
        failed = self._failed
        if failed is not None and failed[0] < order:
            raise SinkError(
                "the writer thread stopped at an earlier error", hint="see the error before this"
            ) from failed[1]
        try:
            return fn(*args)
        except BaseException as exc:
            self._fail(order, exc)
            raise

    def _fail(self, order: int, exc: BaseException) -> None:
        """The ``order``-th work failed (or applying it did): what comes after it is refused."""
        with self._failing:
            if self._failed is None or order < self._failed[0]:
                self._failed = (order, exc)

    def _collect_done(self) -> None:
        """Take the finished work off the head of the queue, in order, applying commits.
        Never raises: the first error (of the work, or of applying a commit) is kept for
        ``_reap`` to raise, and nothing is applied after it. An error of the work means the
        batch did not land: ``on_commit_failed`` hears of it here, also when ``close`` is what
        finds it (and nothing raises it)."""
        inflight = self._inflight
        while self._error is None and inflight and inflight[0][0].done():
            future, rows, commit, batch, nbytes, size, order = inflight.popleft()
            self._inflight_rows -= rows
            self._inflight_row_bytes -= size
            self._inflight_commits -= commit is not None
            self._inflight_bytes -= nbytes
            try:
                result = future.result()
            except BaseException as exc:  # the batch's rows or its commit
                self._stop_at(exc, batch, order)
                # cancelled by close() running out of time: abandoned, not a failed commit
                cancelled = self._abandoned and isinstance(exc, CancelledError)
                if self.on_commit_failed is not None and not cancelled:
                    self.on_commit_failed(exc)
                return
            if result is _SKIPPED:  # dropped by abandon(): nothing landed
                continue
            if commit is not None:
                try:
                    self._committed(commit, *result)
                except BaseException as exc:  # the batch landed: not a failed commit
                    self._stop_at(exc, batch, order)

    def _raise_error(self) -> NoReturn:
        """Raise the writer or commit thread's first error (``close`` logs one never raised)."""
        assert self._error is not None
        self._error_raised = True
        raise self._error

    def _stop_at(self, exc: BaseException, batch: Batch, order: int) -> None:
        """Keep the first error for ``_reap`` to raise in the loop's own flow."""
        self._error = exc
        self._fail(order, exc)  # nothing handed over after it runs
        self._failed_batch = batch  # its open files are dropped by close()

    async def _reap(self, *, everything: bool = False, snapshot: bool = False) -> None:
        """Apply what the writer thread has done; wait while more than ``INFLIGHT_ROWS`` rows
        (or ``INFLIGHT_BYTES`` of them) or ``MAX_INFLIGHT_COMMITS`` commits are waiting for
        it (or, with ``everything``, until it is idle; with ``snapshot``, also while more
        than one hand-over is and they hold more than ``SNAPSHOT_INFLIGHT_BYTES`` or number
        more than ``SNAPSHOT_INFLIGHT``). Raises the first error of the writer thread (again
        on every later call: the pipeline is done). Raises PipelineInterrupted once
        ``interrupt`` was called."""
        while True:
            self._collect_done()
            if self._error is not None:
                self._raise_error()
            if self._interrupted:
                raise PipelineInterrupted("the stop ran out of time")
            if not self._inflight:
                return
            if not (
                everything
                or self._inflight_rows > INFLIGHT_ROWS
                or self._inflight_row_bytes > INFLIGHT_BYTES
                or self._inflight_commits > MAX_INFLIGHT_COMMITS
                or (snapshot and self._snapshot_full())
            ):
                return
            if self._wake is None:
                self._wake = asyncio.get_running_loop().create_future()
            await asyncio.wait(
                [self._inflight[0][0], self._wake], return_when=asyncio.FIRST_COMPLETED
            )

    def _snapshot_full(self) -> bool:
        waiting = len(self._inflight)
        return waiting > 1 and (
            waiting > SNAPSHOT_INFLIGHT or self._inflight_bytes > SNAPSHOT_INFLIGHT_BYTES
        )

    async def _drop_staged(self) -> None:
        """Forget staged rows and wait until the writer thread is idle (the batch is being
        dropped); commits handed over before are applied, or their error raised."""
        self._unstage()
        await self._reap(everything=True)

    def _changes(
        self,
        transaction: Transaction | TransactionPart,
        events: Iterable[ev.Event],
        ts: dt.datetime,
    ) -> Groups:
        """Row changes grouped by table version, in order, with ``_seq`` assigned."""
        out, self._next_seq = self._collect(events, transaction.gtid, ts, self._next_seq)
        self._count(out)
        return out

    def _collect(
        self,
        events: Iterable[ev.Event],
        gtid: str | None,
        ts: dt.datetime,
        seq: int,
    ) -> tuple[Groups, int]:
        """One run per rows event of ``events``, grouped by table version, numbered from
        ``seq``."""
        out: Groups = []
        for event in events:
            if not isinstance(event, ev.RowsEvent):
                if isinstance(event, TableLearnedEvent):  # a history change, no record
                    seq = self._schema_change(event.change, ts, seq)
                    continue
                if isinstance(event, ev.OpaqueEvent) and event.header.type_code in _PRE_GA_ROWS:
                    raise IntegrityError(
                        f"pre-GA rows event at {event.file}:{event.position} cannot be landed",
                        hint="this binlog comes from a MySQL 5.1 development build",
                    )
                if isinstance(event, SchemaChangeEvent):
                    seq = self._schema_change(event.change, ts, seq)
                elif isinstance(event, (ev.QueryEvent, ev.OpaqueEvent)):
                    check_statement(event, gtid, self.filter.wants)
                continue
            table = event.table
            if not self.filter.wants(table.schema, table.table):
                continue
            version, keep = self._version(table, event.file, event.position)
            block = event.block
            if keep is not None:
                block = block.project(keep)
            run = Run(
                event.kind.value,
                seq,
                gtid,
                ts,
                event.header.server_id,
                event.file,
                event.position,
                block,
            )
            seq += block.count
            _group(out, version, run)
        return out, seq

    def _version(
        self, table: ev.TableMapEvent, file: str, position: int
    ) -> tuple[TableVersion, tuple[int, ...] | None]:
        """The landed version of the table of rows at ``file:position`` (and the indexes of
        the columns kept), its names checked."""
        version, keep = self.filter.version(table)
        # (a version is made once per table shape: the names of one were checked before)
        if version is not self._named:
            check_name(table.schema, table.table, f"{file}:{position}")
            if self.require_names and any(c.name is None for c in table.columns):
                raise IntegrityError(
                    f"rows of {version.name} at {file}:{position}, but the names of its "
                    "columns are not known (the table is not in the schema history and the "
                    "binlog does not log names)",
                    hint="set binlog_row_metadata=FULL on the source, or start a new landing "
                    "zone from after the statement that created or changed the table",
                )
            self._named = version
        return version, keep

    def _segments(self, run: TakenRun) -> Groups:
        """The rows of transactions taken as a run (``binlog.runs``), one ``Run`` per
        segment, grouped by table version, in order, with ``_seq`` assigned."""
        out: Groups = []
        seq = self._next_seq
        for segment in run.segments:
            table = segment.table
            if not self.filter.wants(table.schema, table.table):
                continue
            version, keep = self._version(table, segment.file, segment.position)
            block = segment.block if keep is None else segment.block.project(keep)
            changes = Run(
                segment.kind.value,
                seq,
                segment.gtid,
                _utc_micros(segment.timestamp),
                segment.server_id,
                segment.file,
                segment.position,
                block,
                segment.origins,
            )
            seq += block.count
            _group(out, version, changes)
        self._next_seq = seq
        self._count(out)
        return out

    async def _take_run(self, run: TakenRun, *, closed: bool = True) -> None:
        """The transactions a run took before its last one (which is taken as any
        transaction; ``closed`` False: there is none, and the batch's proof is of the run's
        last). A batch ends where it would one transaction at a time: the run is split after
        the transaction that makes it due, which the batch's proof is then of."""
        while run.transactions:
            start = self._position or StreamPosition()
            index = self._due_in(run)
            if index is None:
                await self._take_part(run)
                if not closed:
                    self._prove(run, run.transactions - 1, start)
                return
            head, run = run.split(index)
            await self._take_part(head)
            self._prove(head, index, start)
            await self.commit(wait=False)

    def _prove(self, run: TakenRun, index: int, start: StreamPosition) -> None:
        """The proof of the batch ends with transaction ``index`` of ``run``, which was taken
        from ``start``: hashed from the row images the run keeps."""
        last = run.record(index)
        before = start
        if index:
            mariadb, mysql = run.gtids_before(index)
            before = start.after_many(mariadb, mysql, run.file, last.start)
        digest = Digest(last.gtid)
        for kind, table, images in run.rows_of(index):
            digest.add_rows(kind, table, images)
        self._proof = Proof(last.gtid, before, digest.hexdigest(), digest.events).to_json()
        self._last = self._last_parts = None
        self._newest = _utc_micros(last.timestamp)
        self.stats.last_event_timestamp = last.xid_timestamp

    async def _take_part(self, run: TakenRun) -> None:
        """Transactions of a run, whole: their rows are staged, the position moves past
        them."""
        batch = self._open()
        await self._stage(batch, self._segments(run), size=run.nbytes)
        batch.transactions += run.transactions
        self._batch_bytes += run.nbytes
        self.stats.transactions += run.transactions
        self._position = (self._position or StreamPosition()).after_many(
            run.mariadb, run.mysql, run.file, run.end_position
        )

    def _due_in(self, run: TakenRun) -> int | None:
        """The first of a run's transactions after which the open batch is due, as ``due``
        tells after each transaction (None: none of them)."""
        self._open()
        sink = self.sink
        if self.due():  # by its age
            return 0
        rows_left = sink.batch_max_rows - self._batch_rows
        bytes_left = sink.batch_max_bytes - self._batch_bytes
        landed = self._landed_rows(run)

        def due_after(index: int) -> bool:
            found = run.record(index)
            return landed(found.rows_end) >= rows_left or found.end - run.position >= bytes_left

        if not due_after(run.transactions - 1):
            return None
        return bisect.bisect_left(range(run.transactions), True, key=due_after)

    def _landed_rows(self, run: TakenRun) -> Callable[[int], int]:
        """How many of a run's first rows (in stream order) land: all, unless the filters
        leave some of its tables out."""
        wanted = [self.filter.wants(s.table.schema, s.table.table) for s in run.segments]
        if all(wanted):
            return lambda rows: rows
        counts = [s.block.count for s in run.segments]

        def landed(rows: int) -> int:
            total = start = 0
            for count, lands in zip(counts, wanted, strict=True):
                if lands:
                    total += max(0, min(count, rows - start))
                start += count
            return total

        return landed

    def _schema_change(self, change: SchemaChange, ts: dt.datetime, seq: int) -> int:
        """Record a DDL statement: its lifecycle records join the open batch (numbered from
        ``seq``) and the change the schema ledger. Returns the next ``_seq``."""
        landed = (
            None
            if self._columns is None
            else functools.partial(
                landed_schema,
                columns=self._columns,
                project=self.filter.project,
                file_schema=self.zone.file_schema,
            )
        )
        records = schema_records(change, ts, seq, self.filter.wants, landed)
        if self.ledger is not None:
            self.ledger.record(dataclasses.replace(change, seq=seq))
        self._records.extend(records)
        self.snapshot = _followed(self.snapshot, change)
        return seq + len(records)

    def _count(self, groups: Groups) -> None:
        """Count row changes taken into the open batch (one add a rows event or segment):
        they reach ``stats.rows_by_table_op`` when the batch commits."""
        counts = self._batch_counts
        for version, changes in groups:
            name = version.name
            for run in changes:
                key = (name, run.op)
                counts[key] = counts.get(key, 0) + run.block.count

    def _xa(self, transaction: Transaction, ts: dt.datetime) -> Groups:
        """The rows an XA part lands now: none at PREPARE (held) or ROLLBACK, the held rows
        at COMMIT, renumbered as this transaction's."""
        prepare = next(
            (e for e in reversed(transaction.events) if isinstance(e, ev.XaPrepareEvent)), None
        )
        if prepare is not None and prepare.one_phase:  # MySQL XA COMMIT ... ONE PHASE
            return self._changes(transaction, transaction.events, ts)
        xa = xa_id_of(transaction)
        if xa is None:
            raise IntegrityError(
                f"XA transaction at {transaction.file}:{transaction.position} names no XA id"
            )
        if transaction.ending is Ending.XA_PREPARE:
            if transaction.parts:
                raise ConfigError(
                    f"XA transaction {xa} has more row changes than "
                    "sink.large_transaction_rows (or more binlog bytes of them than "
                    "sink.large_transaction_bytes): its rows cannot be held until XA COMMIT",
                    hint="raise the setting above the XA transaction's size",
                )
            groups, _ = self._collect(transaction.events, None, ts, 0)
            self._held[xa.key] = HeldXa(
                xa.key, str(xa), groups, transaction.file, transaction.position
            )
            self.stats.xa_prepared += 1
            return []
        held = self._held.pop(xa.key, None)
        if transaction.ending is Ending.XA_ROLLBACK:
            self.stats.xa_rolled_back += 1
            return []
        if held is None:
            self.stats.xa_unknown += 1
            log.warning(
                "xa_commit_without_prepare",
                xid=str(xa),
                at=f"{transaction.end_file}:{transaction.end_position}",
                hint="the XA PREPARE came before the position this stream started from, so "
                "its rows are not in the landing zone; replay from before it to land them",
            )
            return []
        out: Groups = []
        seq, gtid = self._next_seq, transaction.gtid
        for version, runs in held.groups:
            fresh: list[Run] = []
            for run in runs:
                fresh.append(run._replace(seq=seq, gtid=gtid, ts=ts))
                seq += run.block.count
            out.append((version, fresh))
        self._next_seq = seq
        self._count(out)
        self.stats.xa_committed += 1
        return out

    def _append(self, batch: Batch, groups: Groups) -> None:
        for version, changes in groups:
            batch.add(version, changes)

    async def handle(self, item: StreamItem) -> None:
        """Take one stream item; commits when a batch is due."""
        if self._error is not None:  # the writer thread failed: nothing more is taken
            self._raise_error()
        if isinstance(item, TransactionPart):
            if not self._in_parts and self._batch is not None and self._batch.transactions:
                # a huge transaction gets a batch of its own; committing what came before it
                # (rows, or only held XA and positions) means an abort of its parts loses
                # nothing the stream will not send again
                await self.commit()
            self._in_parts = True
            if self._parts_digest is None:
                self._parts_digest = Digest(item.gtid)
            self._parts_digest.add(item.events)  # parts are not kept: hashed as they pass
            batch = self._open()
            ts = _commit_time(item, item.timestamp)
            groups = self._changes(item, item.events, ts)
            await self._stage(batch, groups, size=item.row_bytes)
            return
        if isinstance(item, GtidStateLearned):
            # a start without a GTID state: from here on the checkpoint carries one
            self._learned = item.position
            if self._position is not None:
                self._position = self._position.with_gtid_of(item.position)
            return
        if isinstance(item, TransactionAborted):
            # parts of a transaction the stream will send again, or that never committed
            self.stats.aborted_parts += 1
            await self._drop_staged()
            if self._batch is not None:
                await self._run(self._batch.abort)
            self._batch = None
            self._next_batch = None
            self._batch_counts = {}  # nothing of it landed: the stream sends it again
            self._next_seq = self.checkpoint.next_seq
            self._position = self.checkpoint.position
            if self._position is not None:
                self._position = self._position.with_gtid_of(self._learned)
            self._held = dict(self._held_committed)
            self.snapshot = self._snapshot_committed
            self._records = []
            if self.ledger is not None:
                self.ledger.roll_back()
            self._in_parts = False
            self._proof, self._last, self._parts_digest = self._proof_committed, None, None
            self._replay_until = self.checkpoint.replay_until
            return
        if isinstance(item, TransactionRun):
            await self._take_run(item.taken, closed=item.last is not None)
            if item.last is None:  # the run alone, right before the stream's error
                return
            item = item.last
        if isinstance(item, ev.IncidentEvent):
            stop = IncidentError.of(item)
            if stop is not None:  # what came before it is whole: it lands, then the stop
                await self.commit()
                raise stop
            return
        if not isinstance(item, Transaction):
            return
        batch = self._open()
        ts = _commit_time(item, item.timestamp)
        records = len(self._records)
        taken = 0 if self.ledger is None else self.ledger.mark  # the history before it
        snapshot = self.snapshot  # ... and the snapshot's queue, which follows its renames
        try:
            if item.ending.is_xa:
                groups = self._xa(item, ts)
            else:
                groups = self._changes(item, item.events, ts)
        except StatementLoggedError:
            # every transaction before it lands, so the landing zone stops exactly before the
            # statement: nothing of this transaction was staged, and a DDL it held before the
            # statement is taken back (its record and history change would land without it)
            del self._records[records:]
            if self.ledger is not None:
                self.ledger.take_back(taken)
            self.snapshot = snapshot
            await self.commit()
            raise
        if not item.ending.is_xa:
            await self._stage(batch, groups, size=item.row_bytes)
        elif groups:  # an XA COMMIT's rows, held since its PREPARE (their bytes not known
            await self._stage(batch, groups)  # here): handed over at once, not piled up
            await self._hand_over(batch)
        batch.transactions += 1
        self._batch_bytes += item.end_position - item.position if not item.parts else 0
        self.stats.transactions += 1
        self.stats.last_event_timestamp = item.timestamp
        self._newest = ts
        self._last, self._last_before = item, self._position  # for the proof (at commit)
        self._last_parts, self._parts_digest = self._parts_digest, None
        self._position = (self._position or StreamPosition()).after(
            item.typed_gtid, item.end_file, item.end_position
        )
        was_parts = self._in_parts
        self._in_parts = False
        if was_parts or self.due():
            await self.commit(wait=False)

    async def resync(self, change: SchemaChange, start: StreamPosition) -> None:
        """The source no longer has the binlog after the checkpoint (``snapshot.mode:
        when_needed``): the stream goes on from ``start``. ``change`` turns the history's
        catalog into the source's at ``start`` (``schema.history.resync_change``); its
        lifecycle records land and are committed at once, so a later abort cannot take the
        jump back. Prepared XA transactions held from before the gap are let go: their
        outcome is in the gap, and the snapshot reads what they did."""
        if self._error is not None:
            self._raise_error()
        batch = self._open()
        self._newest = dt.datetime.now(dt.UTC)
        self._next_seq = self._schema_change(change, self._newest, self._next_seq)
        self._held = {}
        self._position = start
        self._proof, self._last = None, None  # the history follows on from the gap: unproven
        self.snapshot = SnapshotState(filters=self.snapshot.filters)
        batch.transactions += 1
        await self.commit()

    # -- snapshot chunks (replicator.snapshot) ----------------------------------------------

    async def snapshot_rows(
        self,
        version: TableVersion,
        keep: tuple[int, ...] | None,
        block: Block,
        at: StreamPosition,
        ts: dt.datetime,
        server_id: int,
        *,
        reset: bool = False,
        nbytes: int = 0,
    ) -> None:
        """A block of rows a snapshot read at ``at`` (the stream stands exactly there): they
        land as ``_op = 'r'`` in the open batch, numbered on, and never split from the rest of their
        chunk by a commit (``snapshot_chunk_done`` ends the chunk). ``reset``: a
        ``truncate`` lifecycle record comes first (``snapshot_reset``): the rows are the
        whole table (one read of a table without a usable key: the changes landed before
        them are in them already, and a multiset cannot tell which), or the first chunk of a
        table whose landed rows may be stale. ``nbytes``: the bytes the block took to read
        (what the reader may have in flight is bounded by them)."""
        if self._error is not None:
            self._raise_error()
        if reset:
            self.snapshot_reset(version.name, at, ts)
        self._in_chunk = True
        batch = self._open()
        if keep is not None:
            block = block.project(keep)
        seq = self._next_seq
        run = Run("r", seq, None, ts, server_id, at.file, at.position, block)
        self._newest = ts
        self._next_seq = seq + block.count
        groups: Groups = [(version, [run])]
        self._count(groups)
        await self._stage(batch, groups, nbytes=nbytes)
        # a block is big enough alone; staged, blocks pile up
        await self._hand_over(batch, nbytes=nbytes)
        await self._reap(snapshot=True)  # interrupt() ends this wait too

    def snapshot_reset(self, table: str, at: StreamPosition, ts: dt.datetime) -> None:
        """A ``truncate`` lifecycle record of ``table`` at the snapshot point ``at``, in the
        open batch and the chunk under way: the table's rows as of ``at`` follow (none, for
        a table that is empty now), and what landed of it before is in them already, or
        stale (a table the filters left out for a while): readers drop it."""
        if self._error is not None:
            self._raise_error()
        self._in_chunk = True
        self._open()
        self._records.append(
            {
                "seq": self._next_seq,
                "op": "truncate",
                "table": table,
                "gtid": None,
                "file": at.file,
                "position": at.position,
                "ts": ts.isoformat().replace("+00:00", "Z"),
                "statement": SNAPSHOT_RESET,
            }
        )
        self._next_seq += 1

    async def snapshot_chunk_done(self, progress: SnapshotState) -> None:
        """A chunk was added whole: the progress lands with it."""
        self._in_chunk = False
        batch = self._open()
        batch.transactions += 1  # a unit the batch may commit after
        self.snapshot = progress
        if self.due():
            await self.commit(wait=False)

    @property
    def in_transaction(self) -> bool:
        """Inside a large transaction's parts (no snapshot chunk may come between)."""
        return self._in_parts

    def due(self) -> bool:
        batch = self._batch
        if batch is None or batch.transactions == 0:
            return False
        return (
            self._batch_rows >= self.sink.batch_max_rows
            or self._batch_bytes >= self.sink.batch_max_bytes
            or time.monotonic() - self._batch_started >= self.sink.batch_max_seconds
        )

    def seconds_until_due(self) -> float | None:
        if self._error is not None:
            return 0.0  # commit() raises it
        if self._batch is None or self._batch.transactions == 0:
            # work in the writer thread: look again soon, so that an idle stream still
            # reports a commit that failed
            return _INFLIGHT_POLL if self._inflight else None
        return max(0.0, self.sink.batch_max_seconds - (time.monotonic() - self._batch_started))

    async def commit(self, *, wait: bool = True) -> None:
        """Commit the open batch (whole transactions only). Without ``wait`` the commit runs
        in the writer thread while the loop goes on (see the module doc)."""
        if self._interrupted:  # what the batch holds may be half-staged
            raise PipelineInterrupted("the stop ran out of time")
        batch = self._batch
        if batch is not None and not self._in_parts and not self._in_chunk and batch.transactions:
            assert self._position is not None
            # the history goes with the batch that changed it (and with the first one)
            mark, history = (0, None) if self.ledger is None else self.ledger.for_commit()
            if self._last is not None:
                proof = Proof.of(self._last, self._last_before, self._last_parts)
                self._proof, self._last, self._last_parts = proof.to_json(), None, None
            commit = _Commit(
                batch,
                time.monotonic(),
                dict(self._held),
                mark,
                self.snapshot,
                self._proof,
                newest=self._newest,
                counts=self._batch_counts,
            )
            records, self._records = self._records, []
            self._batch_counts = {}
            await self._hand_over(batch)
            replay_until = self._replay_until
            self._replay_until = replay_after(replay_until, self._position)
            self._submit(
                0,
                commit,
                self._commit_batch,
                batch,
                self._position,
                self._next_seq,
                commit.held,
                records,
                history,
                commit.snapshot,
                commit.proof,
                replay_until,
            )
            self._batch = None
            # what zone.begin(the new checkpoint) gives, before the checkpoint exists
            self._next_batch = Batch(self.zone, batch.number + 1, self._next_seq, self._position)
        if wait:
            await self._reap(everything=True)

    def _commit_batch(
        self,
        batch: Batch,
        end: StreamPosition,
        next_seq: int,
        held: dict[str, HeldXa],
        records: list[dict[str, Any]],
        history: SchemaHistory | None,
        snapshot: SnapshotState,
        proof: dict[str, Any] | None,
        replay_until: StreamPosition | None,
    ) -> tuple[Checkpoint, dict[str, Any] | None]:
        """The commit protocol (commit thread)."""
        checkpoint = batch.commit(
            end,
            next_seq,
            held,
            records=records,
            history=history,
            replay_until=replay_until,
            snapshot=snapshot,
            source=proof,
        )
        return checkpoint, self.zone.last_manifest

    @property
    def committed_snapshot(self) -> SnapshotState:
        """The snapshot progress as the last commit wrote it (``on_commit`` hears of it)."""
        return self._snapshot_committed

    def _committed(
        self, commit: _Commit, checkpoint: Checkpoint, manifest: dict[str, Any] | None
    ) -> None:
        """A commit the writer thread has done, applied in the loop."""
        batch = commit.batch
        self.checkpoint = checkpoint
        self._held_committed = commit.held
        if self.ledger is not None:
            self.ledger.committed(commit.history_mark)
        self._snapshot_committed = commit.snapshot
        self._proof_committed = commit.proof
        self.stats.batches += 1
        self.stats.row_changes += batch.rows
        totals = self.stats.rows_by_table_op
        for key, count in commit.counts.items():
            totals[key] = totals.get(key, 0) + count
        self.stats.last_batch_rows = batch.rows
        self.stats.last_batch_seconds = time.monotonic() - commit.started
        self.stats.last_commit_time = time.monotonic()
        if commit.newest is not None:
            self.stats.last_committed_ts = commit.newest.timestamp()
        if self.on_commit is not None and manifest is not None:
            self.on_commit(manifest, self.stats)

    @property
    def settled(self) -> bool:
        """Everything taken is committed: no open batch with transactions, nothing staged,
        nothing waiting for the writer thread."""
        batch = self._batch
        return (
            (batch is None or batch.transactions == 0)
            and not self._staged
            and not self._inflight
            and not self._in_parts
        )

    def interrupt(self) -> None:
        """The stop is out of time: a wait for the writer thread under way, and every later
        ``commit``, raises PipelineInterrupted (what was being taken may be half-staged)."""
        self._interrupted = True
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    def abandon(self) -> None:
        """Land nothing more (a stop out of time): work still queued for the writer thread is
        dropped, and the open batch with it. The item the writer thread is running finishes
        (a commit under way completes, or, cut short by the process's end, is rolled forward
        or dropped by the next start's recovery). What was not committed is read again from
        the checkpoint; the staging files of the dropped batches are deleted by the next
        start's recovery (no manifest names them)."""
        self._abandoned = True
        self._unstage()

    async def close(self, timeout: float | None = None) -> bool:
        """Drop an uncommitted batch (its transactions replay from the checkpoint); commits
        already handed to the writer thread finish first (an error is not raised here: the
        caller is closing, usually because of it). ``timeout``: wait at most this long for
        them. False when the writer thread was still busy then (the caller must not let
        another writer in before the process ends: see ``abandon``)."""
        self._unstage()
        pending = [future for future, *_ in self._inflight]
        if pending:
            await asyncio.wait(pending, timeout=timeout)
        self._collect_done()
        if any(not future.done() for future in pending):
            self._abandoned = True  # what is still queued is dropped as it comes up
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._committer.shutdown(wait=False, cancel_futures=True)
            return False
        for future, *_ in self._inflight:  # what follows an error: its errors are known
            if not future.cancelled():
                future.exception()
        error = self._error
        if error is not None and not self._error_raised:  # a stop out of time, say: unseen
            log.error(
                "a batch failed to land while stopping",
                error=str(error) or type(error).__name__,
                hint="nothing of it is half-landed: the next start reads it again from the "
                "checkpoint",
            )
        if not self._abandoned:  # abandoned: no time to spend; recovery deletes the files
            # the failed batch, the open one, and those handed over after the failure (the
            # writer thread may have written their rows beside the failed commit)
            dropped = (self._failed_batch, self._batch, *(entry[3] for entry in self._inflight))
            for batch in {id(b): b for b in dropped if b is not None}.values():
                await self._run(batch.abort)
        self._batch = self._failed_batch = None
        self._batch_counts = {}
        self._executor.shutdown(wait=True)
        self._committer.shutdown(wait=True)
        return True
