"""The materialize job: committed change files in, one current-state Parquet table out per table.

``materialize(spark, landing, out)`` reads, for every table of the landing zone, the files
committed manifests list (``committed``; in-flight and uncommitted files are never read),
casts their schema versions to one schema (``schema``), applies them to the table's previous
state (``merge``) and swaps the new state in atomically (``state``):

* ``<out>/<db>/<table>/`` — the state, readable by ``spark.read.parquet`` with no options:
  the table's columns as of its newest schema version; with ``keep_metadata`` also the
  metadata columns of each row's latest change (``_op``, ``_seq``, ``_gtid``, ``_ts``,
  ``_server_id``, ``_binlog_file``, ``_binlog_pos``); with ``allow_unknown`` an ``_absent``
  list of the columns no row image carried (null in the row).
* Incremental: the state records the last landing batch it holds. A re-run reads only the
  manifests after it and merges their changes into the state; the result equals a run from
  scratch (``full_refresh``). Batches are applied in order only: a committed batch whose
  files are not all in place yet (a running daemon is publishing it) and everything after it
  wait for the next run (``TableResult.waiting``).

The lower-level pieces are public too: ``read_changes`` (all committed changes of a table,
one schema) and ``current_state`` (a table's state as a lazy DataFrame, nothing written).
Spark-side errors that mean the data cannot be applied exactly (``merge``) come back as
IntegrityError (exit 4); wrong options as ConfigError (exit 2).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..errors import ConfigError
from . import state as st
from .committed import (
    CommittedFile,
    TableDir,
    check_landing,
    file_schema,
    read_manifests,
    select_tables,
    table_dirs,
    table_identity,
)
from .merge import ABSENT, BEFORE, BEFORE_KEY, META, Merged, TableModel, failure
from .merge import current_state as merge_state
from .schema import conform, conform_frame, find_field, unify

__all__ = [
    "FileVersion",
    "MaterializeOptions",
    "TableResult",
    "WRITE_CONF",
    "current_state",
    "file_versions",
    "materialize",
    "normalize",
    "read_changes",
    "read_state",
    "state_schema",
    "session_conf",
    "table_model",
    "union_all",
    "write_state",
]

AUX = frozenset({*META, ABSENT, BEFORE, BEFORE_KEY})
# Session settings while the state is written: microsecond timestamps (not INT96), and
# dates before 1582 written as they are (proleptic Gregorian, as the landing zone's).
WRITE_CONF = {
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.parquet.datetimeRebaseModeInWrite": "CORRECTED",
    "spark.sql.parquet.int96RebaseModeInWrite": "CORRECTED",
}


@dataclass(frozen=True, slots=True)
class MaterializeOptions:
    keep_metadata: bool = False  # keep the latest change's metadata columns per row
    allow_unknown: bool = False  # columns no row image carried: null + ``_absent``, not error
    assume_stable_keys: bool = False  # updates without ``_before_key`` keep their key
    keys: Mapping[str, Sequence[str]] = field(default_factory=dict)  # db.t -> key; () = none
    full_refresh: bool = False  # ignore the existing state, rebuild from every manifest


@dataclass(frozen=True, slots=True)
class TableResult:
    table: str
    path: Path
    action: str  # "built", "merged", "unchanged", "empty" (no committed files yet)
    batches: int  # landing batches with changes of this table applied now
    changes: int  # row changes applied now
    rows: int  # rows in the state
    unmatched: int  # keyless tables: deletes/updates of rows not in the state (ignored)
    last_batch: int  # the state holds every batch up to this one
    waiting: int | None  # first committed batch not yet published (applied next run)


# ------------------------------------------------------------------------ reading changes


@dataclass(frozen=True, slots=True)
class FileVersion:
    """Committed files of one table with one schema."""

    paths: tuple[str, ...]
    newest: int  # highest _seq (or batch) in them: orders the versions


def file_versions(files: Sequence[CommittedFile]) -> list[FileVersion]:
    """``files`` grouped by schema (from their footers; Spark reads each group as one),
    oldest version first."""
    groups: list[tuple[pa.Schema, list[CommittedFile]]] = []
    for item in files:
        schema = file_schema(item.path)
        for have, members in groups:
            if have.equals(schema, check_metadata=False):
                members.append(item)
                break
        else:
            groups.append((schema, [item]))
    versions = [
        FileVersion(
            tuple(str(m.path) for m in members),
            max(m.last_seq if m.last_seq is not None else -1 for m in members),
        )
        for _, members in groups
    ]
    return sorted(versions, key=lambda v: v.newest)


def _table_columns(schema: T.StructType) -> T.StructType:
    return T.StructType([f for f in schema.fields if f.name not in AUX])


def table_model(
    table: str,
    frames: Sequence[DataFrame],
    key: Sequence[str],
    options: MaterializeOptions,
    previous: T.StructType | None = None,
) -> TableModel:
    versions = [_table_columns(f.schema) for f in frames]
    if previous is not None:
        versions.insert(0, _table_columns(previous))
    columns = unify(versions)
    resolved: list[str] = []
    for name in key:
        found = find_field(columns, name)
        if found is None:
            raise ConfigError(
                f"table {table}: key column {name} is not among its columns "
                f"({', '.join(columns.names)})",
                hint=f"check --key {table}=...",
            )
        resolved.append(found.name)
    return TableModel(
        name=table,
        columns=columns,
        key=tuple(resolved),
        keep_metadata=options.keep_metadata,
        allow_unknown=options.allow_unknown,
        assume_stable_keys=options.assume_stable_keys,
    )


def normalize(frame: DataFrame, model: TableModel) -> DataFrame:
    """One schema version's changes in the merge layout (``merge`` module doc)."""
    identity = model.identity_type
    source = find_field(frame.schema, BEFORE_KEY) or find_field(frame.schema, BEFORE)
    before_key = (
        F.lit(None).cast(identity)
        if source is None
        else conform(F.col(source.name), source.dataType, identity)
    )
    absent: Column = (
        F.col(ABSENT)
        if find_field(frame.schema, ABSENT) is not None
        else F.array().cast("array<string>")
    )
    extra = {m: F.col(m) for m in META}
    extra[ABSENT] = absent
    extra[BEFORE_KEY] = before_key
    return conform_frame(frame, model.columns, extra=extra)


def union_all(frames: Sequence[DataFrame]) -> DataFrame:
    out = frames[0]
    for frame in frames[1:]:
        out = out.union(frame)
    return out


def _read(
    spark: SparkSession,
    table: str,
    files: Sequence[CommittedFile],
    options: MaterializeOptions,
    *,
    previous_key: tuple[str, ...] | None = None,
    previous_schema: T.StructType | None = None,
) -> tuple[TableModel, DataFrame]:
    schemas = [(f.path, file_schema(f.path)) for f in files]
    override = options.keys.get(table)
    key = table_identity(
        table,
        schemas,
        override=None if override is None else tuple(override),
        previous=previous_key if override is None else None,
    )
    frames = [spark.read.parquet(*v.paths) for v in file_versions(files)]
    model = table_model(table, frames, key, options, previous_schema)
    return model, union_all([normalize(f, model) for f in frames])


def _table_files(landing: Path, table: str) -> list[CommittedFile]:
    wanted = [t for t in table_dirs(landing) if t.name == table]
    if not wanted:
        raise ConfigError(
            f"table {table} is not in the landing zone {landing}",
            hint="name tables as database.table, as in the landing zone's directories",
        )
    rel = wanted[0].rel
    return [f for m in read_manifests(landing).manifests for f in m.files if f.table_dir == rel]


def read_changes(
    spark: SparkSession, landing: Path | str, table: str, *, key: Sequence[str] | None = None
) -> DataFrame:
    """Every committed change of ``table`` (``db.t``) as one DataFrame: the table's
    columns (newest schema version, types widened over all versions), the metadata columns,
    ``_absent`` and ``_before_key`` (the update's before-image key; ``key`` overrides the
    recorded primary key). Empty tables are a ConfigError: there is no schema to show."""
    root = Path(landing)
    files = _table_files(root, table)
    if not files:
        raise ConfigError(f"table {table} has no committed changes yet")
    options = MaterializeOptions(keys={} if key is None else {table: tuple(key)})
    return _read(spark, table, files, options)[1]


def current_state(
    spark: SparkSession,
    landing: Path | str,
    table: str,
    *,
    options: MaterializeOptions | None = None,
) -> DataFrame:
    """``table``'s current state from every committed change, as a lazy DataFrame (nothing
    is written; errors surface when it runs — see ``merge.failure``)."""
    options = options or MaterializeOptions()
    root = Path(landing)
    files = _table_files(root, table)
    if not files:
        raise ConfigError(f"table {table} has no committed changes yet")
    model, changes = _read(spark, table, files, options)
    return merge_state(model, changes).rows


# ------------------------------------------------------------------------------ the job


@contextlib.contextmanager
def session_conf(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """Set session settings for a while, then put the old values back."""
    saved = {k: spark.conf.get(k, None) for k in settings}
    for k, v in settings.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, old in saved.items():
            if old is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, old)


def count_rows(directory: Path) -> int:
    """Rows in the Parquet files Spark wrote to ``directory`` (from their footers)."""
    return sum(pq.ParquetFile(p).metadata.num_rows for p in directory.glob("part-*"))


def write_state(merged: Merged, directory: Path) -> tuple[int, int]:
    """Run the merge into ``directory``; returns (rows, unmatched). A merge that cannot
    apply a change exactly raises its IntegrityError (``merge.failure``)."""
    groups = merged.groups
    if groups is not None:
        groups.persist()
    try:
        merged.rows.write.option("compression", "zstd").parquet(str(directory))
        unmatched = 0
        if groups is not None:
            total = groups.agg(F.sum("unmatched")).first()
            unmatched = int(total[0] or 0) if total is not None else 0
    except Exception as exc:
        found = failure(exc)
        if found is not None:
            raise found from None
        raise
    finally:
        if groups is not None:
            groups.unpersist()
    return count_rows(directory), unmatched


def state_schema(previous: st.TableState) -> T.StructType:
    """The Spark schema of a state's rows, as recorded with it."""
    schema: T.StructType = T.StructType.fromJson(json.loads(previous.schema))
    return schema


def read_state(
    spark: SparkSession, found: tuple[st.TableState, Path], model: TableModel
) -> DataFrame:
    """An earlier state's rows, cast to ``model``'s columns, with the metadata and
    ``_absent`` columns ``model`` keeps."""
    previous, directory = found
    frame = spark.read.schema(state_schema(previous)).parquet(str(directory))
    extra = {m: F.col(m) for m in META} if model.keep_metadata else {}
    if model.allow_unknown:
        extra[ABSENT] = F.col(ABSENT)
    return conform_frame(frame, model.columns, extra=extra)


def _check_options(previous: st.TableState, landing: Path, options: MaterializeOptions) -> None:
    problems = []
    if previous.mode != "batch":
        problems.append(f"it is written by a {previous.mode} query")
    if previous.landing != str(landing):
        problems.append(f"it was built from {previous.landing}")
    if previous.keep_metadata != options.keep_metadata:
        problems.append(f"it was built with keep_metadata={previous.keep_metadata}")
    if previous.allow_unknown != options.allow_unknown:
        problems.append(f"it was built with allow_unknown={previous.allow_unknown}")
    if problems:
        raise ConfigError(
            f"the existing state of {previous.table} does not match this run: "
            + "; ".join(problems),
            hint="use the same options, another --out, or --full-refresh",
        )


def _run_table(
    spark: SparkSession,
    landing: Path,
    out: Path,
    table: TableDir,
    files: Sequence[CommittedFile],
    end: int,
    waiting: int | None,
    options: MaterializeOptions,
) -> TableResult:
    link = out / table.rel
    st.clean(link)
    found = None if options.full_refresh else st.load(link)
    previous = None if found is None else found[0]
    if previous is not None:
        _check_options(previous, landing, options)
    done = 0 if previous is None else previous.last_batch
    new = [f for f in files if f.batch > done]

    def result(action: str, rows: int, unmatched: int = 0) -> TableResult:
        return TableResult(
            table=table.name,
            path=link,
            action=action,
            batches=len({f.batch for f in new}),
            changes=sum(f.rows for f in new),
            rows=rows,
            unmatched=unmatched,
            last_batch=max(end, done),
            waiting=waiting,
        )

    if not new:
        if previous is None:
            return result("empty", 0)
        if end > previous.last_batch:
            st.update(link, replace(previous, last_batch=end))
        return result("unchanged", previous.rows)
    model, changes = _read(
        spark,
        table.name,
        new,
        options,
        previous_key=None if previous is None else tuple(previous.key),
        previous_schema=None if previous is None else state_schema(previous),
    )
    if previous is not None and list(model.key) != previous.key:
        raise ConfigError(
            f"table {table.name}: the existing state is keyed by ({', '.join(previous.key)}), "
            f"this run by ({', '.join(model.key)})",
            hint="rebuild with --full-refresh to change a table's identity columns",
        )
    base = None if found is None else read_state(spark, found, model)
    merged = merge_state(model, changes, base)
    last_seqs = [f.last_seq for f in new if f.last_seq is not None]
    unmatched = 0

    def write(directory: Path) -> int:
        nonlocal unmatched
        with session_conf(spark, WRITE_CONF):
            rows, unmatched = write_state(merged, directory)
        return rows

    recorded = st.publish(
        link,
        write,
        st.TableState(
            table=table.name,
            landing=str(landing),
            mode="batch",
            last_batch=max(end, done),
            stream_batch=-1,
            last_seq=max(last_seqs) if last_seqs else None,
            key=list(model.key),
            keep_metadata=options.keep_metadata,
            allow_unknown=options.allow_unknown,
            schema=merged.rows.schema.json(),
            rows=0,
        ),
    )
    return result("merged" if previous is not None else "built", recorded.rows, unmatched)


def materialize(
    spark: SparkSession,
    landing: Path | str,
    out: Path | str,
    *,
    tables: Sequence[str] | None = None,
    options: MaterializeOptions | None = None,
) -> list[TableResult]:
    """Bring ``<out>/<db>/<table>/`` up to date with the landing zone's committed batches
    for every table (or those ``tables`` names or globs select); see the module doc."""
    options = options or MaterializeOptions()
    root = Path(landing).resolve()
    check_landing(root)
    target = Path(out).resolve()
    if target == root or root in target.parents:
        raise ConfigError(
            f"output directory {target} is inside the landing zone",
            hint="pass --out a directory outside --landing",
        )
    chosen = select_tables(table_dirs(root), tables)
    results: list[TableResult] = []
    with st.lock(target):
        done: dict[Path, int] = {}
        for table in chosen:
            found = None if options.full_refresh else st.load(target / table.rel)
            done[table.rel] = 0 if found is None else found[0].last_batch
        after = min(done.values(), default=0)
        manifests = read_manifests(root, after=after)
        end = manifests.last_batch if manifests.last_batch is not None else after
        by_dir: dict[Path, list[CommittedFile]] = {}
        for manifest in manifests.manifests:
            for item in manifest.files:
                by_dir.setdefault(item.table_dir, []).append(item)
        for table in chosen:
            results.append(
                _run_table(
                    spark,
                    root,
                    target,
                    table,
                    by_dir.get(table.rel, []),
                    max(end, done[table.rel]),
                    manifests.waiting,
                    options,
                )
            )
    return results
