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
* **One landing zone per checkpoint.** Spark's checkpoint remembers the manifests it has read
  by name (``<batch>.json``): a landing zone made again at the same path, or restored from an
  older backup, lands other batches under names it has seen, which the query would never
  read. So each micro-batch records at the checkpoint's root (``RECORD_FILE``) the landing
  zone id and the mark of the newest batch it applied, and what the output held after it;
  the start refuses (as each micro-batch does) an output or a checkpoint of another landing
  zone, or holding batches the landing zone does not (``identity``: the errors
  ``materialize`` gives, IntegrityError), and a checkpoint that has seen batches the output
  does not hold (the output removed, or restored from a backup: the query would not read
  them again; ConfigError). The way out of either is a new start: remove the output and the
  checkpoint together, or give the query a new checkpoint location.

``maxFilesPerTrigger`` bounds the landing batches one micro-batch takes. Each micro-batch
that changes the table rewrites its state, so a trigger interval of a few seconds (the landing
zone's own batch cadence) is the sensible minimum. Give each query its own output directory;
a micro-batch holds its lock while it writes (waiting for another writer to finish). The
query's name (``default_query_name``) is ``current_state_<db>.<table>_<digest>``, the digest
of the table's output path: unique per table and output, so queries of other tables or
outputs run side by side in one session, and a second query of the same table and output is
refused by Spark (``query_name`` replaces it).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from pyspark.sql.streaming.query import StreamingQuery

from ..durable import write_atomic
from ..errors import ConfigError, IntegrityError, SinkError
from ..landed.committed import CommittedFile, TableDir, read_manifests, spark_uri
from ..landed.contract import MANIFESTS
from ..landed.options import MaterializeOptions
from ..storage import is_url, redact_url
from . import identity
from . import state as st
from .materialize import landing_tables
from .table_job import Landing, run_table

__all__ = [
    "RECORD_FILE",
    "CheckpointRecord",
    "CurrentStateStream",
    "default_query_name",
    "start_current_state_stream",
    "stream_schema",
]

PUBLISH_WAIT_SECONDS = 30.0
MANIFEST_SCHEMA = "batch LONG"
RECORD_FILE = "replicator_stream.json"  # at the checkpoint location's root
RECORD_FORMAT = 1


def _landing(root: Path) -> Landing:
    """Every committed batch of the landing zone, published or not."""
    return Landing(root, read_manifests(root, unpublished=True).manifests)


def _table(landing: Landing, table: str) -> TableDir:
    for candidate in landing_tables(landing):
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


def default_query_name(table: TableDir, out: Path) -> str:
    """The default name of the query keeping ``table`` current in the output directory
    ``out`` (absolute): ``current_state_<db>.<table>_<digest>``, the digest (12 hex digits)
    of the table's output path. Unique per table and output: the name's table part is the
    table's own (``a_b.c`` and ``a.b_c`` differ), and one table streamed to two outputs gets
    two names."""
    digest = hashlib.sha256(str(out / table.rel).encode()).hexdigest()[:12]
    return f"current_state_{table.name}_{digest}"


@dataclass(frozen=True, slots=True)
class CheckpointRecord:
    """What a query's checkpoint has seen, written by each micro-batch that applied batches
    (``RECORD_FILE`` at the checkpoint location's root, where Spark looks at nothing it did
    not write). Spark's checkpoint remembers the manifests it read by name alone: this says
    of which landing zone they were, and what the output held after them."""

    table: str  # db.t
    output: str  # the table's output path (``<out>/<db>/<table>``, absolute)
    landing: str  # the landing root (absolute)
    landing_id: str | None  # its id (None: manifests written before ids)
    last_batch: int  # the newest landing batch the query's micro-batches applied
    batch_mark: str | None  # its mark (``Manifest.mark``)
    held: int | None  # the last batch the output's state or tombstone held after it (None: none)
    query: str | None  # the query's id (its checkpoint's ``metadata``)
    format: int = RECORD_FORMAT

    @classmethod
    def load(cls, checkpoint: Path) -> CheckpointRecord | None:
        """The record at ``checkpoint`` (None: none, no micro-batch has applied batches)."""
        path = checkpoint / RECORD_FILE
        try:
            data = json.loads(path.read_bytes())
            if data.get("format") != RECORD_FORMAT:
                raise ValueError(f"format {data.get('format')!r}")
            return cls(**data)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            raise SinkError(
                f"cannot read {path}: {exc}",
                hint="remove the query's checkpoint together with its output (or give the query "
                "a new checkpoint location and another output)",
            ) from exc

    def save(self, checkpoint: Path) -> None:
        data = json.dumps(asdict(self), indent=1, sort_keys=True).encode() + b"\n"
        write_atomic(
            checkpoint / RECORD_FILE,
            data,
            hint="check free space and permissions of the checkpoint location",
        )


def _start_over(out: Path, checkpoint: str) -> str:
    return (
        f"remove the output directory {out} together with the query's checkpoint {checkpoint} "
        "(or give the query another output and a new checkpoint location): the query then "
        "builds the output from this landing zone"
    )


def _check_seen(record: CheckpointRecord, landing: Landing, out: Path, checkpoint: str) -> None:
    """The batches the checkpoint has seen (``record``) are ``landing``'s: the same landing
    zone id, none past its end, the last one the same commit. Otherwise the landing zone
    holds other batches under names Spark has read, which the query would never read."""
    problem = None
    if record.landing_id is not None and record.landing_id != landing.landing_id:
        theirs = landing.landing_id or "(none: its manifests were written before landing zone ids)"
        problem = (
            f"was made against landing zone {record.landing_id}, but {landing.root} is landing "
            f"zone {theirs}: it has seen batches of another landing zone (was the landing zone "
            "removed and made again at the same path?)"
        )
    elif record.last_batch > landing.end:
        problem = (
            f"has seen batches up to {record.last_batch}, but the landing zone {landing.root} "
            f"ends at batch {landing.end}: it holds batches the landing zone does not (was it "
            "restored from an older backup?)"
        )
    else:
        now = landing.mark(record.last_batch)
        if record.batch_mark is not None and now is not None and record.batch_mark != now:
            problem = (
                f"has seen batch {record.last_batch}, and the landing zone {landing.root} holds "
                f"another batch {record.last_batch} (its _seq range or stream positions "
                "differ): it holds batches the landing zone does not (was it restored from an "
                "older backup?)"
            )
    if problem is not None:
        raise IntegrityError(
            f"table {record.table}: the streaming query's checkpoint {checkpoint} {problem}; "
            "Spark would skip the landing zone's batches of the numbers it has seen; nothing "
            "was changed",
            hint=_start_over(out, checkpoint),
        )


def _check_start(
    landing: Landing, out: Path, table: TableDir, checkpoint: Path | None, where: str
) -> None:
    """Before the query starts: the output's state (or tombstone) of ``table`` is of this
    landing zone and holds no batch it does not (``identity``, as ``materialize`` checks),
    and so is the checkpoint's record; and the checkpoint has seen no batch the output does
    not hold (Spark would not read it again)."""
    link = out / table.rel
    previous = st.held(link)
    record = None if checkpoint is None else CheckpointRecord.load(checkpoint)
    try:
        if previous is not None:
            identity.check(previous, out, landing.root, landing.landing_id, landing.end)
            identity.check_applied(previous, out, landing, refresh=False)
        if record is not None:
            _check_seen(record, landing, out, where)
    except IntegrityError as exc:
        exc.hint = _start_over(out, where)  # a query has no --full-refresh
        raise
    if record is None:
        return
    if record.output != str(link):
        problem = f"is the checkpoint of the query of {record.output}, not of {link}"
    elif record.held is None:
        return  # the table had no output after its last micro-batch
    elif previous is None:
        problem = (
            f"has seen batches up to {record.held}, but the output {link} does not exist "
            "(was it removed?)"
        )
    elif previous.last_batch < record.held:
        problem = (
            f"has seen batches up to {record.held}, but the output {link} holds batches up to "
            f"{previous.last_batch} only (was it restored from an older backup?)"
        )
    else:
        return
    raise ConfigError(
        f"table {table.name}: the streaming query's checkpoint {where} {problem}; Spark reads "
        "no batch it has seen again, so the query would not bring the output up to them",
        hint=f"remove the checkpoint {where} together with the output directory {out} (or "
        "start the query with a new checkpoint location): the query then builds the output "
        "from the landing zone",
    )


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
        previous = st.held(self.link)
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
        everything = _landing(self.landing)
        record = None if self.checkpoint is None else CheckpointRecord.load(self.checkpoint)
        if record is not None:  # the landing zone made again, or restored, while it ran
            _check_seen(record, everything, self.out, str(self.checkpoint))
        landing = Landing(self.landing, tuple(m for m in everything.manifests if m.batch <= newest))
        _wait_published([f for m in landing.manifests if m.batch > done for f in m.files])
        run_table(
            self.spark,
            landing,
            self.out,
            self.table,
            self.options,
            mode="stream",
            stream_batch=batch_id,
            stream_query=query,
        )
        if self.checkpoint is not None:
            self._record(landing, query)

    def _record(self, landing: Landing, query: str | None) -> None:
        """Record at the checkpoint what its query has seen (``CheckpointRecord``)."""
        after = st.held(self.link)
        assert self.checkpoint is not None
        CheckpointRecord(
            table=self.table.name,
            output=str(self.link),
            landing=str(self.landing),
            landing_id=landing.landing_id,
            last_batch=landing.end,
            batch_mark=landing.mark(landing.end),
            held=None if after is None else after.last_batch,
            query=query,
        ).save(self.checkpoint)


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
    query_name: str | None = None,
) -> StreamingQuery:
    """Start the query that keeps ``<out>/<db>/<table>`` current (see the module doc).

    ``checkpoint`` is the query's Spark checkpoint location (keep it next to ``out``);
    ``max_files_per_trigger`` bounds the landing batches per micro-batch; ``query_name``
    replaces the default name (``default_query_name``). Refuses (IntegrityError, ConfigError) an
    output or checkpoint of another landing zone, or one the query cannot go on from (see
    the module doc).
    """
    if is_url(str(landing)):
        raise ConfigError(
            f"landing zone {redact_url(str(landing))}: the streaming reader reads a directory",
            hint="materialize an object-store landing zone with `materialize` (batch) instead",
        )
    root = Path(landing).resolve()
    committed = _landing(root)
    found = _table(committed, table)
    target = Path(out).resolve()
    local = None if is_url(str(checkpoint)) else Path(checkpoint).resolve()
    _check_start(committed, target, found, local, str(checkpoint))
    merge = CurrentStateStream(spark, root, found, target, options or MaterializeOptions(), local)
    reader = (
        spark.readStream.schema(MANIFEST_SCHEMA)
        .option("multiLine", "true")
        .option("pathGlobFilter", "*.json")
    )
    if max_files_per_trigger is not None:
        reader = reader.option("maxFilesPerTrigger", str(max_files_per_trigger))
    return (
        reader.json(spark_uri(root / MANIFESTS))  # a landing path taken literally
        .writeStream.queryName(query_name or default_query_name(found, target))
        .foreachBatch(merge)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime=f"{trigger_seconds} seconds")
        .start()
    )
