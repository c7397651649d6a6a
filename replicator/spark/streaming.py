"""Structured Streaming: one table's current state kept up to date by a streaming query over
the landing zone's commit records (the same layout and rules as ``materialize``).

    from replicator.spark.streaming import start_current_state_stream

    query = start_current_state_stream(
        spark, "/data/landing", "shop.orders", out="/data/current", checkpoint="/data/ckpt"
    )
    query.awaitTermination()

The query's source is the manifests directory ``<landing>/_manifests/`` (``readStream``,
JSON, one row per committed batch); ``foreachBatch`` brings ``<out>/<db>/<table>`` up to the
newest batch the micro-batch saw (``table_job``, as ``materialize`` does). Why the manifests,
not the table's directory: a manifest is the commit point of every batch, while a lifecycle
record adds no file to the table's directory — a DROP, TRUNCATE or RENAME would never start a
micro-batch there, and the state would keep rows the table no longer has. What makes it exact:

* **Committed data only, never a partial file.** Manifests are written under hidden temp
  names (``.<batch>.json.tmp``, which Spark's file source skips) and renamed into place; the
  data files of a batch are renamed into place right after its manifest, and the micro-batch
  waits for them. Data files are read from the manifests, never by listing.
* **Whole batches, in order.** Each micro-batch applies every committed batch up to the
  newest one it saw, merging row changes into the state.
* **Lifecycle records applied exactly.** A batch with a record naming the table (truncate,
  drop, create, rename to or from it, alter), or a replay batch touching it, makes the
  micro-batch rebuild the state from scratch by the table's lineage, reading other names'
  files directly (``lineage``, ``changes``). A table dropped or renamed away has its output
  removed, and a tombstone keeps the query's place, so a later CREATE (or a rename into the
  name) brings it back without a restart; an ALTER TABLE needs no restart either.
* **Exactly once.** The state (or tombstone) records the last landing batch and micro-batch
  id it holds: a micro-batch Spark re-runs after a crash is skipped, or finds nothing new.

``maxFilesPerTrigger`` bounds the landing batches one micro-batch takes. Each micro-batch
that changes the table rewrites its state, so a trigger interval of a few seconds (the landing
zone's own batch cadence) is the sensible minimum. Give each query its own output directory;
a micro-batch holds its lock while it writes (waiting for another writer to finish).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from pyspark.sql.streaming.query import StreamingQuery

from ..errors import ConfigError, SinkError
from ..landed.committed import CommittedFile, TableDir, read_manifests, spark_uri
from ..landed.contract import MANIFESTS
from ..landed.options import MaterializeOptions
from ..storage import is_url, redact_url
from . import state as st
from .materialize import landing_tables
from .table_job import Landing, run_table

__all__ = ["CurrentStateStream", "start_current_state_stream", "stream_schema"]

PUBLISH_WAIT_SECONDS = 30.0
MANIFEST_SCHEMA = "batch LONG"


def _table(landing: Path, table: str) -> TableDir:
    found = read_manifests(landing, unpublished=True)
    for candidate in landing_tables(Landing(landing, found.manifests)):
        if candidate.name == table:
            return candidate
    raise ConfigError(
        f"table {table} is not in the landing zone {landing}",
        hint="start the stream once the table has committed changes",
    )


def stream_schema(spark: SparkSession, landing: Path | str, table: str) -> T.StructType:
    """Spark's schema of ``table``'s newest committed file."""
    root = Path(landing)
    files = [
        f
        for m in read_manifests(root).manifests
        for f in m.files
        if f.table == table and f.exists()
    ]
    if not files:
        raise ConfigError(
            f"table {table} has no committed files yet",
            hint="start the stream once the table has committed changes",
        )
    newest = max(files, key=lambda f: (f.batch, f.last_seq or -1))
    schema: T.StructType = spark.read.parquet(newest.spark_path).schema
    return schema


@dataclass(slots=True)
class CurrentStateStream:
    """The ``foreachBatch`` function: brings ``<out>/<db>/<table>`` up to the newest landing
    batch of a micro-batch of manifests (rows with a ``batch`` column)."""

    spark: SparkSession
    landing: Path
    table: TableDir
    out: Path
    options: MaterializeOptions = field(default_factory=MaterializeOptions)
    checkpoint: Path | None = None  # the query's checkpoint location (a directory)

    @property
    def link(self) -> Path:
        return self.out / self.table.rel

    def query_id(self) -> str | None:
        """The id of the query the micro-batch ids count in, as its checkpoint records it
        (``metadata``, written when the query first starts): a checkpoint made anew (or
        removed) starts a new query, whose micro-batch ids start again at 0."""
        if self.checkpoint is None:
            return None
        try:
            found = json.loads((self.checkpoint / "metadata").read_text().splitlines()[0])
        except (OSError, ValueError, IndexError):
            return None
        return str(found["id"]) if isinstance(found, dict) and "id" in found else None

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        # one writer per output directory, as for ``materialize``: another writer's
        # clean-up removes versions its link does not point at, this one's unfinished one
        with st.lock(self.out, wait=True):
            self._apply(batch, batch_id)

    def _apply(self, batch: DataFrame, batch_id: int) -> None:
        found = st.load(self.link)
        previous = found[0] if found is not None else st.load_gone(self.link)
        query = self.query_id()
        if (
            previous is not None
            and previous.mode == "stream"
            and query is not None
            and previous.stream_query == query
            and batch_id <= previous.stream_batch
        ):
            return  # a re-run of a micro-batch the state already holds (a crash's)
        done = 0 if previous is None else previous.last_batch
        seen = [int(row[0]) for row in batch.select("batch").collect() if row[0] is not None]
        newest = max([done, *seen])
        manifests = tuple(
            m for m in read_manifests(self.landing, unpublished=True).manifests if m.batch <= newest
        )
        _wait_published([f for m in manifests if m.batch > done for f in m.files])
        run_table(
            self.spark,
            Landing(self.landing, manifests),
            self.out,
            self.table,
            self.options,
            mode="stream",
            stream_batch=batch_id,
            stream_query=query,
        )


def _wait_published(needed: Sequence[CommittedFile]) -> None:
    """A batch's files are renamed into place right after its manifest: wait for that."""
    deadline = time.monotonic() + PUBLISH_WAIT_SECONDS
    while not all(f.exists() for f in needed):
        if time.monotonic() > deadline:
            missing = next(f.path for f in needed if not f.exists())
            raise SinkError(
                f"committed file {missing} is not published",
                hint="the daemon stopped inside a commit: start `replicator run`, which "
                "finishes it, then restart the query",
            )
        time.sleep(0.1)


def start_current_state_stream(
    spark: SparkSession,
    landing: Path | str,
    table: str,
    out: Path | str,
    checkpoint: Path | str,
    *,
    trigger_seconds: float = 5.0,
    max_files_per_trigger: int | None = None,
    options: MaterializeOptions | None = None,
) -> StreamingQuery:
    """Start the query that keeps ``<out>/<db>/<table>`` current (see the module doc).

    ``checkpoint`` is the query's Spark checkpoint location (keep it next to ``out``);
    ``max_files_per_trigger`` bounds the landing batches per micro-batch.
    """
    if is_url(str(landing)):
        raise ConfigError(
            f"landing zone {redact_url(str(landing))}: the streaming reader reads a directory",
            hint="materialize an object-store landing zone with `materialize` (batch) instead",
        )
    root = Path(landing).resolve()
    found = _table(root, table)
    merge = CurrentStateStream(
        spark,
        root,
        found,
        Path(out).resolve(),
        options or MaterializeOptions(),
        None if is_url(str(checkpoint)) else Path(checkpoint).resolve(),
    )
    reader = (
        spark.readStream.schema(MANIFEST_SCHEMA)
        .option("multiLine", "true")
        .option("pathGlobFilter", "*.json")
    )
    if max_files_per_trigger is not None:
        reader = reader.option("maxFilesPerTrigger", str(max_files_per_trigger))
    return (
        reader.json(spark_uri(root / MANIFESTS))  # a landing path taken literally
        .writeStream.queryName(f"current_state_{found.rel.parent.name}_{found.rel.name}")
        .foreachBatch(merge)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime=f"{trigger_seconds} seconds")
        .start()
    )
