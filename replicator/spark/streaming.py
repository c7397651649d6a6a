"""Structured Streaming example: one table's landing directory as a stream, merged micro-batch
by micro-batch into a current-state table (the same layout ``materialize`` writes).

    from replicator.spark.streaming import start_current_state_stream

    query = start_current_state_stream(
        spark, "/data/landing", "shop.orders", out="/data/current", checkpoint="/data/ckpt"
    )
    query.awaitTermination()

``spark.readStream.schema(S).parquet("<landing>/<db>/<table>")`` lists the directory on every
trigger and hands each micro-batch's new files to ``foreachBatch``, which merges their
changes into ``<out>/<db>/<table>`` (``merge``; ``state``: a new version, then an atomic
swap). What makes that exact:

* **Never a partial file.** The daemon writes each data file under a hidden name
  (``.part-<seq>.parquet.tmp``; Spark's file source skips names starting with ``.`` or
  ``_``), fsyncs it, commits the manifest, and only then renames it to ``part-<seq>.parquet``
  in one ``rename(2)``. A listing sees a file whole or not at all, and only once it is
  committed. The merge still checks every file against the manifests and stops on one that
  no manifest names (a file copied in by hand).
* **The right schema.** ``S`` is Spark's view of the newest committed file when the query
  starts (``stream_schema``). A micro-batch holding a file of another schema (an ALTER TABLE
  while the query runs) does not use the stream's rows, where Spark would drop new columns
  or fail on a widened type: it reads its files itself, casting every schema version to one
  schema as ``materialize`` does. The query never needs a restart for a schema change.
* **Whole batches, in order.** The state advances by whole landing batches: a micro-batch
  applies every committed file of the table up to the newest batch it saw, reading
  directly those the stream has not delivered yet (files of one batch may arrive in two
  micro-batches, in any order), and drops rows of batches already applied. Changes are
  therefore applied in ``_seq`` order however the directory listing orders files.
* **Exactly once.** The state records the last micro-batch id it holds: a micro-batch Spark
  re-runs after a crash (its id not yet in the checkpoint's commit log) is skipped when the
  state already has it; the swap changes state and id together.

``maxFilesPerTrigger`` bounds the files one micro-batch takes. Each micro-batch rewrites the
table's state, so a trigger interval of a few seconds (the landing zone's own batch cadence)
is the sensible minimum. Give each query its own output directory.
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming.query import StreamingQuery

from ..errors import ConfigError, IntegrityError, SinkError
from . import state as st
from .committed import (
    CommittedFile,
    TableDir,
    file_schema,
    read_manifests,
    table_dirs,
    table_identity,
)
from .materialize import (
    WRITE_CONF,
    MaterializeOptions,
    file_versions,
    normalize,
    read_state,
    session_conf,
    state_schema,
    table_model,
    union_all,
    write_state,
)
from .merge import current_state

__all__ = ["CurrentStateStream", "start_current_state_stream", "stream_schema"]

PUBLISH_WAIT_SECONDS = 30.0


def _table(landing: Path, table: str) -> TableDir:
    for found in table_dirs(landing):
        if found.name == table:
            return found
    raise ConfigError(
        f"table {table} is not in the landing zone {landing}",
        hint="start the stream once the table has committed changes",
    )


def _committed(landing: Path, table: TableDir, *, after: int = 0) -> list[CommittedFile]:
    """The files committed manifests after batch ``after`` list for ``table``, published
    or about to be."""
    return [
        f
        for m in read_manifests(landing, after=after, unpublished=True).manifests
        for f in m.files
        if f.table_dir == table.rel
    ]


def _newest(landing: Path, table: TableDir) -> CommittedFile:
    files = [f for f in _committed(landing, table) if f.path.is_file()]
    if not files:
        raise ConfigError(
            f"table {table.name} has no committed files yet",
            hint="start the stream once the table has committed changes",
        )
    return max(files, key=lambda f: (f.batch, f.last_seq or -1))


def stream_schema(spark: SparkSession, landing: Path | str, table: str) -> T.StructType:
    """Spark's schema of ``table``'s newest committed file (what ``readStream`` needs)."""
    root = Path(landing)
    schema: T.StructType = spark.read.parquet(str(_newest(root, _table(root, table)).path)).schema
    return schema


def _local_path(uri: str) -> Path:
    return Path(urllib.parse.unquote(urllib.parse.urlparse(uri).path))


@dataclass(slots=True)
class CurrentStateStream:
    """The ``foreachBatch`` function: merges a micro-batch into ``<out>/<db>/<table>``."""

    spark: SparkSession
    landing: Path
    table: TableDir
    out: Path
    reference: pa.Schema  # Arrow schema of the file the stream's schema came from
    options: MaterializeOptions = field(default_factory=MaterializeOptions)

    @property
    def link(self) -> Path:
        return self.out / self.table.rel

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        found = st.load(self.link)
        previous = None if found is None else found[0]
        if previous is not None:
            self._check(previous)
            if batch_id <= previous.stream_batch:
                return  # a re-run of a micro-batch the state already holds
        done = 0 if previous is None else previous.last_batch
        uris = {
            _local_path(str(row[0])): str(row[0])
            for row in batch.select(F.input_file_name()).distinct().collect()
        }
        committed = {f.path: f for f in _committed(self.landing, self.table, after=done)}
        if any(path not in committed for path in uris):  # a replay of applied batches?
            committed = {f.path: f for f in _committed(self.landing, self.table)}
        for path in uris:
            if path not in committed:
                raise IntegrityError(
                    f"table {self.table.name}: {path} is in the landing zone but in no "
                    "committed manifest",
                    hint="only `replicator run` may write the landing zone; move the file "
                    "away and restart the query",
                )
        newest = max((committed[p].batch for p in uris), default=0)
        if newest <= done:
            if previous is not None:
                st.update(self.link, replace(previous, stream_batch=batch_id))
            return
        needed = [f for f in committed.values() if done < f.batch <= newest]
        _wait_published(needed)
        uniform = all(file_schema(p).equals(self.reference, check_metadata=False) for p in uris)
        streamed = [f for f in needed if f.path in uris] if uniform else []
        frames: list[tuple[int, DataFrame]] = []
        if streamed:
            rows = batch.filter(F.input_file_name().isin([uris[f.path] for f in streamed]))
            frames.append((max(f.last_seq or -1 for f in streamed), rows))
        for version in file_versions([f for f in needed if f not in streamed]):
            frames.append((version.newest, self.spark.read.parquet(*version.paths)))
        frames.sort(key=lambda item: item[0])  # schema versions oldest first
        self._merge([f for _, f in frames], needed, found, newest, batch_id)

    def _check(self, previous: st.TableState) -> None:
        if previous.mode != "stream" or previous.landing != str(self.landing):
            raise ConfigError(
                f"{self.link} holds a state written by {previous.mode} from {previous.landing}",
                hint="give the stream its own output directory",
            )

    def _merge(
        self,
        frames: Sequence[DataFrame],
        needed: Sequence[CommittedFile],
        found: tuple[st.TableState, Path] | None,
        newest: int,
        batch_id: int,
    ) -> None:
        spark, options, name = self.spark, self.options, self.table.name
        previous = None if found is None else found[0]
        override = options.keys.get(name)
        key = table_identity(
            name,
            [(f.path, file_schema(f.path)) for f in needed],
            override=None if override is None else tuple(override),
            previous=None if previous is None or override is not None else tuple(previous.key),
        )
        model = table_model(
            name, frames, key, options, None if previous is None else state_schema(previous)
        )
        changes = union_all([normalize(f, model) for f in frames])
        base = None if found is None else read_state(spark, found, model)
        merged = current_state(model, changes, base)
        last_seqs = [f.last_seq for f in needed if f.last_seq is not None]
        if previous is not None and previous.last_seq is not None:
            last_seqs.append(previous.last_seq)

        def write(directory: Path) -> int:
            with session_conf(spark, WRITE_CONF):
                return write_state(merged, directory)[0]

        st.publish(
            self.link,
            write,
            st.TableState(
                table=name,
                landing=str(self.landing),
                mode="stream",
                last_batch=newest,
                stream_batch=batch_id,
                last_seq=max(last_seqs) if last_seqs else None,
                key=list(model.key),
                keep_metadata=options.keep_metadata,
                allow_unknown=options.allow_unknown,
                schema=merged.rows.schema.json(),
                rows=0,
            ),
        )


def _wait_published(needed: Sequence[CommittedFile]) -> None:
    """A batch's files are renamed into place right after its manifest: wait for that."""
    deadline = time.monotonic() + PUBLISH_WAIT_SECONDS
    while not all(f.path.is_file() for f in needed):
        if time.monotonic() > deadline:
            missing = next(f.path for f in needed if not f.path.is_file())
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

    ``checkpoint`` is the query's Spark checkpoint location (keep it next to ``out``).
    """
    root = Path(landing).resolve()
    found = _table(root, table)
    newest = _newest(root, found)
    schema = spark.read.parquet(str(newest.path)).schema
    merge = CurrentStateStream(
        spark,
        root,
        found,
        Path(out).resolve(),
        file_schema(newest.path),
        options or MaterializeOptions(),
    )
    reader = spark.readStream.schema(schema)
    if max_files_per_trigger is not None:
        reader = reader.option("maxFilesPerTrigger", str(max_files_per_trigger))
    return (
        reader.parquet(str(root / found.rel))
        .writeStream.queryName(f"current_state_{found.rel.parent.name}_{found.rel.name}")
        .foreachBatch(merge)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime=f"{trigger_seconds} seconds")
        .start()
    )
