"""The materialize job: committed change files in, one current-state Parquet table out per table.

``materialize(spark, landing, out)`` reads the committed manifests (``committed``; in-flight
and uncommitted files are never read), follows each table through its lifecycle records
(``lineage``: truncate, drop, create, rename), reads the row changes that make up its state
in one schema (``changes``: schema versions matched by column id, fills for added columns,
replayed copies left out) and merges them (``merge``) into ``<out>/<db>/<table>``, swapped in
atomically (``state``); ``table_job`` decides per table what to do:

* ``<out>/<db>/<table>/`` — the state, readable by ``spark.read.parquet`` with no options:
  the table's columns as of its newest schema version; with ``keep_metadata`` also the
  metadata columns of each row's latest change (``_op``, ``_seq``, ``_gtid``, ``_ts``,
  ``_server_id``, ``_binlog_file``, ``_binlog_pos``); with ``allow_unknown`` an ``_absent``
  list of the columns no row image carried (null in the row).
* One landing zone per output: each state records the landing zone's id (``identity``); an
  output built from another landing zone (one made again at the same path) stops the run
  with exit 4 before anything is written.
* Incremental: the state records the last landing batch it holds. A re-run merges the row
  changes of later batches into it; a table a later lifecycle record names, or a later replay
  batch touches, is rebuilt from scratch instead. Either way the result equals a run from
  scratch (``full_refresh``). A table that no longer exists has its output removed; one
  without rows (created, or created again) an empty state in its record's columns. Batches
  are applied in order only: a committed batch whose files are not all in place yet (a
  running daemon is publishing it) and everything after it wait for the next run
  (``TableResult.waiting``).

The lower-level pieces are public too: ``read_changes`` (the committed changes landed under a
name, one schema), ``lineage_changes`` (the changes that make up a table's current state,
across renames, after its last truncate, replays left out) and ``current_state`` (a table's
state as a lazy DataFrame, nothing written). Spark-side errors that mean the data cannot be
applied exactly (``merge``) come back as IntegrityError (exit 4); wrong options as
ConfigError (exit 2). A table that fails does not stop the others (``_failed``).

Tables are brought up to date ``MaterializeOptions.parallel`` at once (4 by default), from
driver threads that each start with their own copy of the caller's Spark properties (job
group, scheduler pool; ``_at_once``); the settings a state is written with are held for as
long as any of them writes (``output.write_settings``).

Names are taken literally: a database or table name may hold what Spark reads as a glob
(``[``, ``*``, ...; MySQL allows them quoted), so every path handed to Spark goes through
``committed.spark_uri``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from pyspark import InheritableThread
from pyspark.sql import DataFrame, SparkSession

from ..errors import ConfigError
from ..landed.batches import Landing, landing_root
from ..landed.committed import (
    TableDir,
    select_tables,
)
from ..landed.lineage import Ended
from ..landed.options import MaterializeOptions, TableResult
from ..landed.outputs import failed
from ..storage import Store
from . import identity
from . import state as st
from .changes import (
    FileVersion,
    TableChanges,
    file_versions,
    normalize,
    read_files,
    read_lineage,
    table_model,
    union_all,
)
from .merge import UNKNOWN
from .merge import current_state as merge_state
from .output import WRITE_CONF, read_state, state_schema, write_settings, write_state
from .table_job import run_table

__all__ = [
    "FileVersion",
    "MaterializeOptions",
    "TableResult",
    "WRITE_CONF",
    "current_state",
    "file_versions",
    "landing_tables",
    "lineage_changes",
    "materialize",
    "normalize",
    "read_changes",
    "read_state",
    "state_schema",
    "table_model",
    "union_all",
    "write_settings",
    "write_state",
]


def _root(landing: Path | str | Store) -> Path | Store:
    return landing_root(landing)


def _landing(root: Path | Store) -> Landing:
    return Landing.read(root)


def landing_tables(landing: Landing) -> list[TableDir]:
    """Every table name of the landing zone (``Landing.tables``)."""
    return landing.tables()


def _known(landing: Landing, table: str) -> None:
    if table not in {t.name for t in landing_tables(landing)}:
        raise ConfigError(
            f"table {table} is not in the landing zone {landing.root}",
            hint="name tables as database.table, as in the landing zone's directories",
        )


def _public(read: TableChanges) -> DataFrame:
    return read.changes.drop(UNKNOWN)


def read_changes(
    spark: SparkSession,
    landing: Path | str | Store,
    table: str,
    *,
    key: Sequence[str] | None = None,
) -> DataFrame:
    """Every committed change landed under the name ``table`` (``db.t``), as one DataFrame:
    the columns of the newest schema version landed under that name (older versions matched
    by column id, added columns filled; types widened over all versions), the metadata
    columns, ``_absent`` and ``_before_key`` (the update's before-image key; ``key``
    overrides the recorded primary key). Lifecycle records are not applied and replayed
    copies are kept: see ``lineage_changes`` for the changes that make up the table. A name
    without committed changes is a ConfigError: there is no schema to show."""
    found = _landing(_root(landing))
    _known(found, table)
    files = [f for f in found.files if f.table == table]
    if not files:
        raise ConfigError(f"table {table} has no committed changes yet")
    options = MaterializeOptions(keys={} if key is None else {table: tuple(key)})
    return _public(read_files(spark, table, files, options))


def _lineage_read(
    spark: SparkSession, landing: Path | str | Store, table: str, options: MaterializeOptions
) -> TableChanges:
    found = _landing(_root(landing))
    _known(found, table)
    target = found.table(table)
    if isinstance(target, Ended):
        raise ConfigError(
            f"table {table} does not exist at the end of the landing zone: {target.describe()}",
            hint="look it up under its new name, or read its old rows with read_changes",
        )
    read = read_lineage(spark, target, found.of(target.tables), found.rereading, options)
    if read is None:
        raise ConfigError(f"table {table} has no committed changes yet")
    return read[0]


def lineage_changes(
    spark: SparkSession,
    landing: Path | str | Store,
    table: str,
    *,
    options: MaterializeOptions | None = None,
) -> DataFrame:
    """The row changes that make up ``table``'s current state, in ``read_changes``'s
    layout: across the names it had (renames), after its last create or truncate, each
    change once (replays left out)."""
    return _public(_lineage_read(spark, landing, table, options or MaterializeOptions()))


def current_state(
    spark: SparkSession,
    landing: Path | str | Store,
    table: str,
    *,
    options: MaterializeOptions | None = None,
) -> DataFrame:
    """``table``'s current state from every committed change, as a lazy DataFrame (nothing
    is written; errors surface when it runs — see ``merge.failure``)."""
    read = _lineage_read(spark, landing, table, options or MaterializeOptions())
    return merge_state(read.model, read.changes).rows


def materialize(
    spark: SparkSession,
    landing: Path | str | Store,
    out: Path | str,
    *,
    tables: Sequence[str] | None = None,
    options: MaterializeOptions | None = None,
) -> list[TableResult]:
    """Bring ``<out>/<db>/<table>/`` up to date with the landing zone's committed batches
    for every table (or those ``tables`` names or globs select); see the module doc."""
    options = options or MaterializeOptions()
    if options.parallel < 1:
        raise ConfigError(
            f"parallel is {options.parallel}: at least one table is brought up to date at once",
            hint="pass --parallel 1 or more",
        )
    root = _root(landing)
    if isinstance(root, Path):
        root = root.resolve()
    target = Path(out).resolve()
    if isinstance(root, Path) and (target == root or root in target.parents):
        raise ConfigError(
            f"output directory {target} is inside the landing zone",
            hint="pass --out a directory outside --landing",
        )
    with st.lock(target):
        found = _landing(root)
        # every table of the output first: none is changed when one comes from elsewhere
        identity.check_output(
            st.outputs(target),
            target,
            root,
            found.landing_id,
            found.end,
            landing=found,
            refresh=options.full_refresh,
        )
        chosen = select_tables(landing_tables(found), tables)

        def one(table: TableDir) -> TableResult | Exception:
            try:
                return run_table(spark, found, target, table, options)
            except Exception as exc:  # one table's failure leaves the others' outputs alone
                return exc

        outcomes = _at_once(one, chosen, options.parallel)
        results = [o for o in outcomes if isinstance(o, TableResult)]
        failures = [
            (table.name, o)
            for table, o in zip(chosen, outcomes, strict=True)
            if isinstance(o, Exception)
        ]
        if failures:
            raise failed(results, failures)
        return results


_Item = TypeVar("_Item")
_Outcome = TypeVar("_Outcome")


def _at_once(
    run: Callable[[_Item], _Outcome], items: Sequence[_Item], threads: int
) -> list[_Outcome]:
    """``run`` of every item, in their order, from up to ``threads`` driver threads; ``run``
    catches its own errors. Each thread starts with its own copy of this thread's Spark
    properties (``InheritableThread``). They must not share one: Spark puts a query's SQL
    settings into its thread's properties while the query runs and takes them out after,
    so with one shared copy (what ``inheritable_thread_target`` gives every call) a query
    that ends takes them from under another one's jobs, which then run without them."""
    if threads == 1 or len(items) < 2:
        return [run(item) for item in items]
    outcomes: dict[int, _Outcome] = {}
    pending = iter(range(len(items)))
    taking = threading.Lock()

    def work() -> None:
        while True:
            with taking:
                index = next(pending, None)
            if index is None:
                return
            outcomes[index] = run(items[index])

    workers = [
        InheritableThread(target=work, name=f"materialize-{n}")
        for n in range(min(threads, len(items)))
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return [outcomes[index] for index in range(len(items))]
