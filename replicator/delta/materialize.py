"""``materialize --format delta``: each table's current state as a Delta Lake table.

``materialize_delta(landing, out)`` brings ``<out>/<db>/<table>/`` up to date with the
landing zone's committed batches, with delta-rs (``deltalake``) and no Spark:

* **Exactly once.** Every commit this writes carries a Delta *app transaction*
  (``txn``) whose application id names the landing zone (``replicator-<landing id>``) and
  whose version is the last landing batch the table holds, in the same commit as the data.
  A run applies the batches after that version; a crash at any instant leaves either the
  old version or the new one, never half. A Delta table under ``<out>`` without this landing
  zone's application id was built from something else: the run stops (exit 4) before any
  table is changed.
* **Incremental by MERGE.** A run reads only the row changes of later batches, folds them
  (``fold``) together with the output's rows of the identities they touch (a keyed table's
  keys, a keyless table's whole rows, read by a filtered scan), and MERGEs the result in
  one commit: keys that no longer exist are deleted, the others inserted or replaced; a
  keyless table's touched rows are replaced by their new number of copies. Its cost follows
  the number of changes, not the table's size. When a keyed table's touched keys lie in
  files of ``rewrite.REWRITE_FROM_ROWS`` rows or more, the same commit is made file by
  file instead (``rewrite``), in the memory of one file.
* **Rebuilt when the shape changes.** A lifecycle record naming the table (truncate, drop,
  create, rename), a replay batch touching it, or a schema change (a column added, dropped,
  renamed or widened) rewrites the table from its whole lineage in one overwrite commit.
  Delta's column mapping would keep renames without a rewrite, but delta-rs 1.6 reads
  column-mapped tables back as nulls through ``DeltaTable.to_pyarrow_table`` (Polars and
  pandas users), so the tables stay unmapped and a schema change costs one rewrite.
* A table that no longer exists (dropped, renamed away) has its output deleted.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import re
import shutil
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import structlog

from ..errors import ConfigError, IntegrityError, ReplicatorError, SinkError
from ..landed.batches import Landing, landing_root, why_rebuild
from ..landed.committed import CommittedFile, TableDir, read_manifests, select_tables
from ..landed.lineage import Ended
from ..landed.options import MaterializeOptions, TableResult
from ..landed.outputs import check_placed, failed, lock, output_error
from ..storage import LocalStore, Store, is_url, open_store
from . import vectors
from .build import Built, build
from .changes import read_files, read_lineage, scan_lineage
from .files import write_files
from .fold import Folded, fold, identities
from .layout import ABSENT, Model, output_schema
from .rewrite import REWRITE_FROM_ROWS, locate, mark_deleted, rewrite

log = structlog.get_logger("replicator")

__all__ = ["APP_PREFIX", "follow_delta", "materialize_delta"]

APP_PREFIX = "replicator-"  # + the landing zone's id: the app transaction's application id
_ACTION = "__replicator_action"
_INDEX = "__replicator_row"
_RECORD = "replicator"  # the commit-info key of what a run recorded (options, key, batch)
_CHECKPOINT_EVERY = 100  # versions between checkpoints (delta-rs's default interval)
_SMALL_FILES = 32  # small files that make a batch with deletion vectors compact them
_SMALL_BYTES = 8 << 20  # what counts as small, and the size compaction makes
_TIMESTAMP_NTZ = "timestampNtz"  # the Delta table feature of timestamp_ntz columns


def app_id(landing: Landing) -> str:
    """The application id of this landing zone's app transactions."""
    return APP_PREFIX + (landing.landing_id or "unidentified")


@dataclass(frozen=True, slots=True)
class _Existing:
    """A Delta table at a table's output path, and what this writer recorded in it."""

    table: Any  # deltalake.DeltaTable; None: a log that cannot be loaded, to be removed
    version: int | None  # the last landing batch it holds (None: not of this landing zone)
    record: dict[str, Any]


@dataclass(frozen=True)
class _Out:
    """Where the tables go: a directory, or an object store's URL (``s3://bucket/prefix``;
    credentials and endpoint from the environment, as for the landing zone)."""

    root: str
    store: Store
    storage: dict[str, str]  # delta-rs's storage options

    @classmethod
    def of(cls, out: Path | str, landing: Path | Store | None = None) -> _Out:
        if isinstance(out, str) and is_url(out):
            endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
            storage = {"AWS_ALLOW_HTTP": "true"} if (endpoint or "").startswith("http:") else {}
            return cls(out.rstrip("/"), open_store(out), storage)
        target = Path(out).resolve()
        if isinstance(landing, Path) and (target == landing or landing in target.parents):
            raise ConfigError(
                f"output directory {target} is inside the landing zone",
                hint="pass --out a directory outside --landing",
            )
        try:
            target.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise output_error(target, exc) from exc
        return cls(str(target), LocalStore(target), {})

    @property
    def local(self) -> Path | None:
        return self.store.root if isinstance(self.store, LocalStore) else None

    def uri(self, rel: str) -> str:
        """What delta-rs takes for ``<out>/<rel>``: a local path as it is, an object store's
        URL quoted (delta-rs parses it as a URL: a ``#`` or ``?`` in a table name would end
        it there, and two such tables share one Delta table)."""
        if self.local is not None:
            return f"{self.root}/{rel}"
        return f"{self.root}/{quote(rel)}"

    def lock(self) -> contextlib.AbstractContextManager[None]:
        """One run per directory (a lock file); on an object store, Delta's own optimistic
        commits keep two runs from applying a batch twice (the second one fails)."""
        return lock(self.local) if self.local is not None else contextlib.nullcontext()

    def tables(self) -> list[str]:
        """The ``<db>/<table>`` of every Delta table under the output."""
        logs = {k.split("/_delta_log/")[0] for k in self.store.list() if "/_delta_log/" in k}
        return sorted(r for r in logs if r.count("/") == 1 and not r.startswith("."))

    def holds_files(self, rel: str) -> bool:
        return bool(self.store.list(rel + "/"))

    def remove(self, rel: str) -> None:
        """Delete a table's output (after the table was dropped or renamed away): its data
        files first, then its Delta log, newest entry first. A run killed on the way leaves
        a Delta table of an older version, which the next run removes again; never a log
        without its first versions, which no reader can load."""
        keys = self.store.list(rel + "/")
        log = sorted((k for k in keys if k.startswith(f"{rel}/_delta_log/")), reverse=True)
        for key in [k for k in keys if k not in set(log)] + log:
            self.store.delete(key)
        if self.local is not None:  # the folders left
            shutil.rmtree(self.local / rel, ignore_errors=True)


def materialize_delta(
    landing: Path | str | Store,
    out: Path | str,
    *,
    tables: Sequence[str] | None = None,
    options: MaterializeOptions | None = None,
) -> list[TableResult]:
    """Bring ``<out>/<db>/<table>/`` (Delta tables) up to date; see the module doc."""
    options = options or MaterializeOptions()
    root = landing_root(landing)
    target = _Out.of(out, root)
    with target.lock():
        source = Landing.read(root)
        opened = _check_output(target, source)
        chosen = [t.name for t in select_tables(source.tables(), tables)]
        return _apply(source, target, chosen, options, opened=opened)


def follow_delta(
    landing: Path | str | Store,
    out: Path | str,
    *,
    tables: Sequence[str] | None = None,
    options: MaterializeOptions | None = None,
    interval: float = 0.5,
    stop: threading.Event,
    report: Callable[[TableResult], None] = lambda result: None,
) -> None:
    """Apply each committed batch as it lands (``--follow``), until ``stop`` is set: the
    manifests after the last one seen are read every ``interval`` seconds, and only the
    tables they touch are brought up to date (each in one commit, as ``materialize_delta``
    does). ``stop`` is looked at between tables, never inside a commit."""
    options = options or MaterializeOptions()
    root = landing_root(landing)
    target = _Out.of(out, root)
    with target.lock():
        found = read_manifests(root)
        known = list(found.manifests)
        source = Landing(root, tuple(known), found.waiting)
        opened = _check_output(target, source)
        chosen = [t.name for t in select_tables(source.tables(), tables)]
        for result in _apply(source, target, chosen, options, stop=stop, opened=opened):
            report(result)
        options = replace(options, full_refresh=False)
        while not stop.wait(interval):
            after = known[-1].batch if known else 0
            found = read_manifests(root, after=after)
            if not found.manifests:
                continue
            known.extend(found.manifests)
            source = Landing(root, tuple(known), found.waiting, cached=True)
            touched = sorted(
                {f.table for m in found.manifests for f in m.files}
                | {n for m in found.manifests for r in m.records for n in (r.table, r.to) if n}
            )
            if tables:
                touched = [
                    n for n in touched if any(n == p or fnmatch.fnmatchcase(n, p) for p in tables)
                ]
            for result in _apply(source, target, touched, options, stop=stop):
                report(result)


def _apply(
    landing: Landing,
    target: _Out,
    names: Sequence[str],
    options: MaterializeOptions,
    *,
    stop: threading.Event | None = None,
    opened: dict[str, _Existing] | None = None,
) -> list[TableResult]:
    """Bring the tables ``names`` up to date (``opened``: outputs already opened, by their
    ``<db>/<table>``)."""
    # every table's output first: none is changed when one is of another landing zone
    places = {name: _Place(target, TableDir.named(name).rel.as_posix()) for name in names}
    opened = opened or {}
    existing: dict[str, _Existing | None] = {}
    failures: list[tuple[str, BaseException]] = []
    for name, place in places.items():
        try:
            existing[name] = opened[place.rel] if place.rel in opened else _open(place, landing)
        except IntegrityError:  # one that cannot be trusted stops the run, as below
            raise
        except Exception as exc:  # one that cannot be read fails its table alone
            failures.append((name, _table_failure(name, f"read the output {place.shown}", exc)))
    for name, found in existing.items():
        if found is not None:
            _check_applied(landing, name, places[name], found, options.full_refresh)
    # then each table on its own, as the Parquet output does (docs/spark.md, Exit codes):
    # a table that fails keeps its last commit, and the others are still brought up to date
    results: list[TableResult] = []
    for name in names:
        if stop is not None and stop.is_set():
            break
        if name not in existing:
            continue
        try:
            results.append(_run_table(landing, places[name], name, existing[name], options))
        except Exception as exc:
            doing = f"bring the Delta table {places[name].shown} up to date"
            failures.append((name, _table_failure(name, doing, exc)))
    if failures:
        raise failed(results, failures)
    return results


# the OS's error in delta-rs's text: "... (os error 28)", or Rust's "Os { code: 30, ... }"
_OS_ERROR = re.compile(r"\(os error (\d+)\)|\bOs \{ code: (\d+)")


def _table_failure(name: str, doing: str, exc: Exception) -> Exception:
    """What a table's failure says: replicator's own errors as they are (the note of
    ``failed`` names the table); an OSError or a delta-rs error (whose text names neither
    the table nor the path: "Generic LocalFileSystem error") as a SinkError (exit 1) naming
    the table, what failed (``doing``: "bring the Delta table <path> up to date") and the
    OS's cause when delta-rs gives one (a full disk, a read-only filesystem); anything else
    as it is."""
    from deltalake.exceptions import DeltaError  # noqa: PLC0415 - optional dependency

    if isinstance(exc, ReplicatorError) or not isinstance(exc, (OSError, DeltaError)):
        return exc
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    code: int | None
    if isinstance(exc, OSError) and exc.strerror:  # Python's own: the cause and its file
        code = exc.errno
        cause = exc.strerror if exc.filename is None else f"{exc.filename}: {exc.strerror}"
    else:  # delta-rs's (a DeltaError, or an OSError with its text alone): the cause is inside
        found = _OS_ERROR.search(text)
        code = None if found is None else int(found.group(1) or found.group(2))
        cause = first if code is None else f"{os.strerror(code)} ({first})"
    error = SinkError(
        f"table {name}: cannot {doing}: {cause}",
        hint="free space on the output's filesystem or fix its permissions, then run again: "
        "the table keeps its last commit"
        if code is not None
        else "run again once the cause is fixed (another writer of the table? see delta-rs's "
        "message): the table keeps its last commit",
    )
    error.__cause__, error.__suppress_context__ = exc, True  # as ``raise error from exc``
    return error


def _check_applied(
    landing: Landing, name: str, place: _Place, existing: _Existing, refresh: bool
) -> None:
    """The output holds no batch the landing zone lacks or holds as another commit
    (``Landing.check_applied``): the mark recorded with the batch the table is at. Every
    commit records its batch (``_record``) beside the app transaction of the same batch, so
    the two differ only in a log edited or pieced together from two copies: which batch the
    table holds is then unknown, and the run stops (with ``--full-refresh`` it rebuilds).
    A record without a batch (an older replicator's) has its number checked alone."""
    if existing.version is None:
        return
    record = existing.record
    if "batch" in record and record["batch"] != existing.version and not refresh:
        raise IntegrityError(
            f"table {name}: the Delta table {place.shown} holds batches up to "
            f"{existing.version} by its app transaction ({app_id(landing)}), but its last "
            f"commit by replicator records batch {record['batch']}: its log was edited, or "
            "pieced together from two copies; nothing was changed",
            hint="rebuild the table with --full-refresh, or delete its output",
        )
    mark = record.get("batch_mark") if record.get("batch") == existing.version else None
    landing.check_applied(
        name,
        str(place.shown),
        existing.version,
        mark if isinstance(mark, str) else None,
        refresh=refresh,
    )


def _check_output(target: _Out, landing: Landing) -> dict[str, _Existing]:
    """Every Delta table already under the output, chosen or not, must be of this landing
    zone: an output that mixes two landing zones would hold tables one of them never had.
    Returns them opened, by their ``<db>/<table>``."""
    found = {}
    for rel in target.tables():
        existing = _open(_Place(target, rel), landing)
        if existing is not None:
            name = existing.record.get("table")
            if isinstance(name, str):
                check_placed(name, rel, remove="remove it", moves_whole=True)
            found[rel] = existing
    return found


@dataclass(frozen=True, slots=True)
class _Place:
    """One table's output."""

    out: _Out
    rel: str  # <db>/<table>, escaped as the landing zone's directories are

    @property
    def uri(self) -> str:
        return self.out.uri(self.rel)

    @property
    def shown(self) -> Path | str:
        local = self.out.local
        return local / self.rel if local is not None else f"{self.out.root}/{self.rel}"

    def remove(self) -> None:
        self.out.remove(self.rel)


# what a table's first commit leaves before it is made: data files named by ``files``
# (``part-<uuid hex>.snappy.parquet``) or by delta-rs, and delta-rs's temporary commit file
_UNCOMMITTED = re.compile(
    r"part-[0-9a-f]{32}\.snappy\.parquet"
    r"|part-\d{5}-[0-9a-f-]{36}-c000(?:\.[a-z0-9]+)?\.parquet"
    r"|_delta_log/_commit_[0-9a-f-]+\.json\.tmp"
)


def _first_commit_never_made(place: _Place) -> bool:
    """The table's directory holds only what a first build writes before its commit (a run
    killed in between): files no Delta log names, so no table's rows. The build goes on as
    for a new table; they stay (not deleted: they could be another writer's) and are
    named in a warning."""
    keys = place.out.store.list(place.rel + "/")
    names = [key[len(place.rel) + 1 :] for key in keys]
    if not names or not all(_UNCOMMITTED.fullmatch(name) for name in names):
        return False
    log.warning(
        "a table's first commit was never made (a run was stopped while writing it): its "
        "files are left unreferenced and the table is built again",
        table=str(place.shown),
        files=len(names),
    )
    return True


def _ended(place: _Place, landing: Landing) -> Ended | None:
    """How the table whose output ``place`` is ended (None: it exists, or never did)."""
    for item in landing.tables():
        if item.rel.as_posix() == place.rel:
            found = landing.plan.table(item.name)
            return found if isinstance(found, Ended) else None
    return None


def _unloadable(place: _Place, landing: Landing, exc: Exception) -> _Existing:
    """A Delta log no reader loads (a run of an older replicator killed while it deleted
    the output, log first): the output of a table that has ended is left to be removed
    (``_Existing.table`` None); any other stops the run."""
    ended = _ended(place, landing)
    if ended is None:
        raise IntegrityError(
            f"the Delta table {place.shown} cannot be read: {exc}",
            hint="restore it from a backup, or delete it and run again to build it anew",
        ) from exc
    log.warning(
        "the output of a table that has ended cannot be read (its removal was stopped "
        "midway): it is removed",
        table=str(place.shown),
        ended=ended.describe(),
    )
    return _Existing(None, None, {})


def _open(place: _Place, landing: Landing) -> _Existing | None:
    from deltalake import DeltaTable  # noqa: PLC0415 - optional dependency
    from deltalake.exceptions import DeltaError  # noqa: PLC0415

    storage = place.out.storage
    if not DeltaTable.is_deltatable(place.uri, storage_options=storage):
        if place.out.holds_files(place.rel) and not _first_commit_never_made(place):
            if place.out.holds_files(f"{place.rel}/_delta_log") and _ended(place, landing):
                return _unloadable(place, landing, ValueError("its log holds no Delta table"))
            raise IntegrityError(
                f"{place.shown} exists and is not a Delta table",
                hint="pass --out a directory that only materialize --format delta writes",
            )
        return None
    try:
        table = DeltaTable(place.uri, storage_options=storage)
    except DeltaError as exc:
        return _unloadable(place, landing, exc)
    version = table.transaction_version(app_id(landing))
    if version is None:
        raise IntegrityError(
            f"the Delta table {place.shown} was not built from this landing zone "
            f"({landing.root}; it holds no app transaction {app_id(landing)})",
            hint="pass another --out, or delete the output to build it from this landing zone",
        )
    return _Existing(table, version, _recorded(table))


def _recorded(table: Any) -> dict[str, Any]:
    for commit in table.history(20):
        text = commit.get(_RECORD)
        if isinstance(text, str):
            loaded = json.loads(text)
            if isinstance(loaded, dict):
                return loaded
    return {}


def _check_options(name: str, record: dict[str, Any], options: MaterializeOptions) -> None:
    problems = []
    for item in ("keep_metadata", "allow_unknown"):
        if record.get(item) is not None and record[item] != getattr(options, item):
            problems.append(f"it was built with {item}={record[item]}")
    if problems:
        raise ConfigError(
            f"the existing Delta table of {name} does not match this run: " + "; ".join(problems),
            hint="use the same options, another --out, or --full-refresh",
        )


def _result(
    landing: Landing,
    name: str,
    place: _Place,
    action: str,
    files: Sequence[CommittedFile] = (),
    **fields: Any,
) -> TableResult:
    base = TableResult(
        table=name,
        path=place.shown,
        action=action,
        batches=len({f.batch for f in files}),
        changes=sum(f.rows for f in files),
        rows=0,
        unmatched=0,
        last_batch=landing.end,
        waiting=landing.waiting,
    )
    return replace(base, **fields)


def _run_table(
    landing: Landing,
    place: _Place,
    name: str,
    existing: _Existing | None,
    options: MaterializeOptions,
) -> TableResult:
    if existing is not None and not options.full_refresh:
        _check_options(name, existing.record, options)
    done = existing.version if existing is not None else None
    new = [m for m in landing.manifests if done is None or m.batch > done]
    why = why_rebuild(new, name) if existing is not None else None
    if existing is None or existing.table is None or options.full_refresh or why is not None:
        return _rebuild(landing, place, name, existing, options, why)
    files = [f for m in new for f in m.files if f.table == name]
    if not files:
        return _result(landing, name, place, "unchanged", rows=_count(existing.table, place))
    return _merge(landing, place, name, existing, files, options)


def _rebuild(
    landing: Landing,
    place: _Place,
    name: str,
    existing: _Existing | None,
    options: MaterializeOptions,
    why: str | None,
) -> TableResult:
    landing = landing.current()
    target = landing.table(name)
    if existing is not None and existing.table is None:  # a log no reader loads
        place.remove()
        existing = None
    if isinstance(target, Ended):
        if existing is not None:
            place.remove()
        return _result(landing, name, place, "removed", detail=target.describe())
    files = landing.of(target.tables)
    scan = scan_lineage(target, files, landing.rereading, options)
    if scan is None:  # no file yet: the columns a create or alter record gives, if any
        empty = read_lineage(target, files, landing.rereading, options)
        if empty is None:
            if existing is not None:
                place.remove()
            return _result(landing, name, place, "empty", detail="no committed rows yet")
        model: Model = empty[0].model
        built, used = Built(), []
        _overwrite(place, [], landing, model, _wants_vectors(options, existing))
    else:
        model = scan.model
        parts, built = build(scan)
        _overwrite(place, parts, landing, model, _wants_vectors(options, existing))
        used = scan.files
    return _result(
        landing,
        name,
        place,
        "built",
        used,
        rows=built.rows,
        unmatched=built.unmatched,
        detail=why,
    )


def _merge(
    landing: Landing,
    place: _Place,
    name: str,
    existing: _Existing,
    files: Sequence[CommittedFile],
    options: MaterializeOptions,
) -> TableResult:
    table = existing.table
    recorded_key = existing.record.get("key")
    previous_schema = _own_columns(pa.schema(table.schema().to_arrow()), options)
    read = read_files(
        name,
        files,
        options,
        previous_key=tuple(recorded_key)
        if recorded_key is not None and name not in options.keys
        else None,
        previous_schema=previous_schema,
    )
    model = read.model
    if recorded_key is not None and list(model.key) != list(recorded_key):
        raise ConfigError(
            f"table {name}: the existing Delta table is keyed by ({', '.join(recorded_key)}), "
            f"this run by ({', '.join(model.key)})",
            hint="rebuild with --full-refresh to change a table's identity columns",
        )
    if not _same_columns(model.schema, previous_schema):
        return _rebuild(landing, place, name, existing, options, "rebuilt: its columns changed")
    store = place.out.store
    wants = _wants_vectors(options, existing)
    if wants and model.key and not _has_vectors(table):
        _enable_vectors(table)
    located = locate(table, store, place.rel, model, read.changes)
    if located is not None and located.version is not None:  # deletion vectors
        folded, marks = mark_deleted(located, store, place.rel, model, read.changes)
        version = located.version + 1
        info = {_RECORD: json.dumps(_record(landing, model, wants))}
        vectors.commit(
            store, place.rel, version, marks, app=app_id(landing), batch=landing.end, info=info
        )
        if version % _CHECKPOINT_EVERY == 0:  # as delta-rs does after its own commits
            table.update_incremental()
            table.create_checkpoint()
        table.update_incremental()
        _compact_small(table, _commit(landing, model, wants))
    elif located is not None and located.rows >= REWRITE_FROM_ROWS:
        folded, actions = rewrite(located, store, place.rel, model, read.changes)
        table.create_write_transaction(
            actions,
            mode="append",
            schema=output_schema(model),
            commit_properties=_commit(landing, model, wants),
        )
        table.update_incremental()
    else:
        state = _rows_of(table, place, identities(model, read.changes), model)
        folded = fold(model, read.changes, state)
        _merge_commit(table, folded, model, _commit(landing, model, wants))
    return _result(
        landing,
        name,
        place,
        "merged",
        files,
        rows=_count(table, place),
        unmatched=folded.unmatched,
    )


def _compact_small(table: Any, commit: Any) -> None:
    """With deletion vectors each batch adds a small file (its rows' new versions) whose key
    range spans the batch's keys, so every later batch reads it; once ``_SMALL_FILES`` of
    them gather, they are compacted (delta-rs's bin-packing of the files under
    ``_SMALL_BYTES``, one commit of its own; the table's large files are left as they
    are). The number of files a batch reads then stays bounded between ``--optimize``
    runs, and with it a ``--follow``'s latency."""
    sizes = pa.table(table.get_add_actions(flatten=True)).column("size_bytes")
    small = pc.sum(pc.less(sizes, _SMALL_BYTES)).as_py() or 0  # (null: no file left)
    if small >= _SMALL_FILES:
        table.optimize.compact(target_size=_SMALL_BYTES, commit_properties=commit)
        table.update_incremental()


def _wants_vectors(options: MaterializeOptions, existing: _Existing | None) -> bool:
    """Whether a keyed table's batches go by deletion vectors (``vectors``): always once
    the table has them; else as ``--[no-]deletion-vectors`` says; else for a table built
    now, and for one built by a run that chose them (its record), not for older tables
    (their readers may not read vectors)."""
    if existing is not None and _has_vectors(existing.table):
        return True
    if options.deletion_vectors is not None:
        return options.deletion_vectors
    return existing is None or bool(existing.record.get("deletion_vectors"))


def _has_vectors(table: Any) -> bool:
    """Whether the table has the deletion vectors feature (``vectors``)."""
    protocol = table.protocol()
    return vectors.FEATURE in set(protocol.reader_features or ()) | set(
        protocol.writer_features or ()
    )


def _enable_vectors(table: Any) -> None:
    """Turn deletion vectors on (protocol 3/7 with the ``deletionVectors`` feature): a
    commit of its own, before the first batch applied with them. Delta features are never
    turned off; the table keeps them until its output is deleted."""
    from deltalake import TableFeatures  # noqa: PLC0415 - optional dependency

    # (not ``set_table_properties``: delta-rs 1.6 then adds reader features such as
    # ``variantType`` that Spark's delta-spark 3 cannot read)
    table.alter.add_feature(TableFeatures.DeletionVectors, allow_protocol_versions_increase=True)
    table.update_incremental()


def _enable_timestamp_ntz(table: Any, schema: pa.Schema) -> None:
    """Turn the feature ``timestampNtz`` on (protocol 3/7) before an overwrite brings a
    DATETIME column (Delta's ``timestamp_ntz``) into a table without it: a commit of its
    own, as for deletion vectors. delta-rs turns it on when it creates a table, but its
    overwrite commits such a schema without it, and no reader (delta-rs, DuckDB) loads the
    table after. The other commits never change the schema (a column change rebuilds)."""
    from deltalake import TableFeatures  # noqa: PLC0415 - optional dependency
    from deltalake.schema import Schema  # noqa: PLC0415

    if '"timestamp_ntz"' not in Schema.from_arrow(schema).to_json():
        return
    protocol = table.protocol()
    if _TIMESTAMP_NTZ in set(protocol.reader_features or ()):
        return
    table.alter.add_feature(
        TableFeatures.TimestampWithoutTimezone, allow_protocol_versions_increase=True
    )
    table.update_incremental()


# ------------------------------------------------------------------------------ Delta I/O


def _record(landing: Landing, model: Model, vectors: bool) -> dict[str, Any]:
    """What a commit records of the run that made it (its commit info's ``replicator``)."""
    return {
        "deletion_vectors": vectors,
        "table": model.name,
        "landing": str(landing.root),
        "batch": landing.end,
        "batch_mark": landing.mark(landing.end),
        "key": list(model.key),
        "keep_metadata": model.keep_metadata,
        "allow_unknown": model.allow_unknown,
    }


def _commit(landing: Landing, model: Model, vectors: bool) -> Any:
    from deltalake import CommitProperties, Transaction  # noqa: PLC0415

    record = _record(landing, model, vectors)
    return CommitProperties(
        app_transactions=[Transaction(app_id=app_id(landing), version=landing.end)],
        custom_metadata={_RECORD: json.dumps(record)},
    )


def _overwrite(
    place: _Place, parts: Iterable[pa.Table], landing: Landing, model: Model, vectors: bool
) -> None:
    """Replace the table's rows (and schema) with ``parts``, in one commit (``files``)."""
    from deltalake import DeltaTable  # noqa: PLC0415
    from deltalake.schema import Schema  # noqa: PLC0415
    from deltalake.transaction import create_table_with_add_actions  # noqa: PLC0415

    schema = output_schema(model)
    actions = list(write_files(place.out.store, place.rel, parts, model.key))
    storage = place.out.storage
    if DeltaTable.is_deltatable(place.uri, storage_options=storage):
        table = DeltaTable(place.uri, storage_options=storage)
        _enable_timestamp_ntz(table, schema)
        table.create_write_transaction(
            actions,
            mode="overwrite",
            schema=schema,
            commit_properties=_commit(landing, model, vectors),
        )
    else:
        create_table_with_add_actions(
            place.uri,
            Schema.from_arrow(schema),
            actions,
            mode="overwrite",
            storage_options=storage,
            commit_properties=_commit(landing, model, vectors),
        )


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _merge_commit(table: Any, folded: Folded, model: Model, commit: Any) -> None:
    """One MERGE commit: every row of the touched identities replaced by ``folded.rows``."""
    schema = output_schema(model)
    columns = {_quote(f.name): f"s.{_quote(f.name)}" for f in schema}
    action = f"s.{_quote(_ACTION)}"
    if model.key:
        alive = folded.rows.select(list(model.key))
        gone = folded.touched.join(alive, list(model.key), join_type="left anti")
        source = _with_action(folded.rows, "u", schema)
        source = pa.concat_tables([source, _with_action(_padded(gone, schema), "d", schema)])
        on = " AND ".join(f"t.{_quote(k)} = s.{_quote(k)}" for k in model.key)
        bounds = _bounds(folded.touched)
        if bounds is not None:  # the MERGE then reads only the files the range may be in
            on = f"{bounds.sql('t')} AND {on}"
        merger = (
            table.merge(source, on, source_alias="s", target_alias="t", commit_properties=commit)
            .when_matched_delete(predicate=f"{action} = 'd'")
            .when_matched_update(updates=columns, predicate=f"{action} = 'u'")
            .when_not_matched_insert(updates=columns, predicate=f"{action} = 'u'")
        )
    else:
        touched = _with_action(_padded(folded.touched, schema), "d", schema)
        source = pa.concat_tables([touched, _with_action(folded.rows, "i", schema)])
        bounds = _bounds(folded.touched)
        on = " AND ".join(
            [f"({action} = 'd')"]
            + ([] if bounds is None else [bounds.sql("t")])
            + [
                f"(t.{_quote(n)} IS NOT DISTINCT FROM s.{_quote(n)})"
                for n in folded.touched.column_names
            ]
        )
        merger = (
            table.merge(source, on, source_alias="s", target_alias="t", commit_properties=commit)
            .when_matched_delete()
            .when_not_matched_insert(updates=columns, predicate=f"{action} = 'i'")
        )
    merger.execute()


def _with_action(rows: pa.Table, action: str, schema: pa.Schema) -> pa.Table:
    rows = rows.select(schema.names).cast(schema)
    return rows.append_column(_ACTION, pa.array([action] * rows.num_rows, pa.string()))


def _padded(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """``rows`` (some of ``schema``'s columns) with the others null."""
    arrays = [
        rows[f.name] if f.name in rows.column_names else pa.nulls(rows.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(arrays, schema=schema)


@dataclass(frozen=True, slots=True)
class _Bounds:
    """The range of the first identity column the touched identities lie in: what lets a
    scan and a MERGE skip every file whose key range (its statistics) lies outside it."""

    column: str
    low: Any
    high: Any

    def expression(self) -> Any:
        return (pc.field(self.column) >= self.low) & (pc.field(self.column) <= self.high)

    def sql(self, alias: str | None) -> str:
        name = _quote(self.column) if alias is None else f"{alias}.{_quote(self.column)}"
        return f"({name} >= {_literal(self.low)} AND {name} <= {_literal(self.high)})"


def _literal(value: Any) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(int(value))


def _bounds(touched: pa.Table) -> _Bounds | None:
    """None when the first identity column is not an integer or text one (no plain literal
    for the predicate), or holds a null (a range cannot hold it)."""
    first = touched.column_names[0]
    column = touched.column(first)
    kind = column.type
    if not (pa.types.is_integer(kind) or pa.types.is_string(kind)):
        return None
    if column.null_count or not len(column):
        return None
    found = pc.min_max(column)
    return _Bounds(first, found["min"].as_py(), found["max"].as_py())


def _rows_of(table: Any, place: _Place, touched: pa.Table, model: Model) -> pa.Table:
    """The output's rows of the identities in ``touched``: a scan filtered on the first
    identity column, then (keyed tables) the exact keys. Keyless tables keep every row
    the filter found: folding them in again is exact, only a little more work."""
    schema = output_schema(model)
    first = touched.column_names[0]
    values = touched[first].combine_chunks()
    # (as one array: an empty chunked value set loses its type, and ``isin`` then fails)
    test = pc.field(first).isin(values.drop_null())
    if values.null_count:
        test = test | pc.field(first).is_null()
    bounds = _bounds(touched)
    if bounds is not None:  # lets the scan skip the files outside the range
        test = bounds.expression() & test
    if _has_vectors(table):  # a scan that applies them (pyarrow's dataset refuses)
        where = None if bounds is None else bounds.sql(None)
        scanned = pa.table(table.scan(columns=schema.names, predicate=where).read_all())
        found = scanned.cast(schema).filter(test)  # (its text comes as string_view)
    else:  # the files the test may hold a row of (their statistics), filtered once read
        # (not by the scan: it takes its test to each file's own types, and a file delta-rs
        # wrote holds text as string_view, which a test of text cannot be compared with)
        dataset = table.to_pyarrow_dataset()
        parts = [
            pa.Table.from_batches([batch]).select(schema.names).cast(schema).filter(test)
            for fragment in dataset.get_fragments(filter=test)
            for batch in fragment.to_batches(schema=dataset.schema, columns=schema.names)
        ]
        found = pa.concat_tables(parts) if parts else schema.empty_table()
    found = found.cast(schema)
    if model.key and found.num_rows:  # the exact keys (a join cannot carry list columns)
        keys = list(model.key)
        index = pa.array(np.arange(found.num_rows, dtype=np.int64))
        narrow = found.select(keys).append_column(_INDEX, index)
        hit = narrow.join(touched.select(keys), keys, join_type="left semi")
        found = found.take(np.sort(hit.column(_INDEX).to_numpy()))
    return found


def _own_columns(schema: pa.Schema, options: MaterializeOptions) -> pa.Schema:
    """A Delta table's columns without the metadata and ``_absent`` this writer adds."""
    from .layout import META  # noqa: PLC0415

    extra = set(META) if options.keep_metadata else set()
    if options.allow_unknown:
        extra.add(ABSENT)
    return pa.schema([f for f in schema if f.name not in extra])


def _same_columns(a: pa.Schema, b: pa.Schema) -> bool:
    return [(f.name, f.type) for f in a] == [(f.name, f.type) for f in b]


def _count(table: Any, place: _Place) -> int:
    """The table's rows: its files' rows, less those their deletion vectors delete."""
    actions = pa.table(table.get_add_actions(flatten=True))
    stored = int(pc.sum(actions["num_records"]).as_py() or 0) if actions.num_rows else 0
    if not _has_vectors(table):
        return stored
    _, live = vectors.live_files(place.out.store, place.rel)
    return stored - sum(int((f.vector or {}).get("cardinality", 0)) for f in live.values())


@dataclass(frozen=True, slots=True)
class Optimized:
    table: str
    files_removed: int
    files_added: int
    vacuumed: int  # files of older versions deleted


def optimize_delta(
    out: Path | str,
    *,
    tables: Sequence[str] | None = None,
    retention_hours: float = 168.0,
) -> list[Optimized]:
    """``--optimize``: rewrite each Delta table's small files into few large ones, ordered
    by its key (Z-order; keyless tables are compacted), then delete the files no version
    within ``retention_hours`` reads (vacuum). Readers of older versions than that fail,
    as with any Delta vacuum; the current version is never touched."""
    from deltalake import CommitProperties, DeltaTable  # noqa: PLC0415

    target = _Out.of(out)
    results = []
    with target.lock():
        for rel in target.tables():
            name = rel.replace("/", ".")
            try:
                table = DeltaTable(target.uri(rel), storage_options=target.storage)
                record = _recorded(table)
                name = str(record.get("table") or name)
                if tables and not any(name == p or fnmatch.fnmatchcase(name, p) for p in tables):
                    continue
                commit = CommitProperties(custom_metadata={_RECORD: json.dumps(record)})
                key = record.get("key") or []
                if key:
                    metrics = table.optimize.z_order(key, commit_properties=commit)
                else:
                    metrics = table.optimize.compact(commit_properties=commit)
                vacuumed = table.vacuum(
                    retention_hours=int(retention_hours),
                    enforce_retention_duration=False,
                    dry_run=False,
                    commit_properties=commit,
                )
                swept = (
                    vectors.vacuum_vectors(target.store, rel, retention_hours)
                    if _has_vectors(table)
                    else 0
                )
            except Exception as exc:  # named: delta-rs's text names neither table nor path
                doing = f"optimize the Delta table {_Place(target, rel).shown}"
                error = _table_failure(name, doing, exc)
                if error is exc:
                    raise
                raise error from exc
            results.append(
                Optimized(
                    name,
                    int(metrics.get("numFilesRemoved", 0)),
                    int(metrics.get("numFilesAdded", 0)),
                    len(vacuumed) + swept,
                )
            )
    return results
