"""The landing zone's commit protocol: every committed transaction lands exactly once.

Layout (docs/landing-zone.md, Layout): ``<root>/<database>/<table>/part-<first _seq>.parquet``
data files, ``<root>/_manifests/<batch>.json`` commit records, ``<root>/_state/checkpoint.json``,
``<root>/_schema/history-<batch>.json`` the schema history. Names starting with ``_`` or ``.``
are invisible to Spark.

A batch commits in these steps (each a named fault-injection point for the crash tests):

1. ``data``: every table's rows are written to hidden temp files ``.part-<seq>.parquet.tmp``
   in the table's directory, each fsync'd, then the directories; when the batch holds DDL,
   the schema history as of its end is written to ``_schema/history-<batch>.json`` (fsync'd,
   fault points ``history-mid`` and ``history``). A history file no manifest names is deleted
   at recovery, so the history is never ahead of or behind the data.
2. ``manifest``: the manifest (files, row counts, start and end positions, GTID state, seq
   range) is written atomically and fsync'd. **This is the commit point.**
3. ``publish``: each temp file is renamed to its final name; directories fsync'd.
4. ``checkpoint``: the checkpoint moves to the batch's end, atomically.

Each manifest entry records its file's size and SHA-256 (computed as it was written,
``sink.digest``), and the manifest pins the schema history it names by its SHA-256
(``schema_history_sha256``; ``load_history`` refuses other content).

Recovery at start (``recover``) first checks the manifests, their chain and the checkpoint
against them (``landed.manifests``), and every committed file (``sink.verify``: each data file
and committed compaction output there with its recorded size, the files of the batches after
the checkpoint and of the last ``HASHED_BATCHES`` with their hash); anything that does not add
up stops with exit 4 and changes nothing. It makes the landing zone's id when it has none
(``sink.identity``; every manifest carries it), then rolls every manifest newer than the
checkpoint forward (renames its files if a crash came between 2 and 3, then advances the
checkpoint) and deletes temp files no manifest names (a batch that never reached step 2; its
transactions are replayed from the checkpoint).
A data file therefore appears under its final name only once its batch is committed, and a
replayed batch rewrites the same names (they derive from ``_seq``, which the checkpoint
carries), never adding duplicates. A final file that would overwrite a committed one is
refused before anything is written.

Everything goes through the landing zone's ``storage.Store`` by key. On an object store
(``sink.root: s3://...``; docs/landing-zone.md, Object stores) there is no rename and no
directory fsync: step 1 uploads each data file under its final name, the manifest PUT (step 2)
is the single commit point, step 3 has nothing to do (its fault points stay, so the crash
test runs unchanged), the checkpoint is one PUT. Recovery there deletes the data files no
manifest names (what a batch killed before its manifest uploaded) instead of refusing them,
and a batch may overwrite such a leftover of its own name, never a file whose ``_seq`` a
manifest covers. A file a listing does not show is looked up by name before it counts as gone.

XA transactions prepared but not yet decided when a batch commits have their rows written to
``_state/xa/<xa id>.<file>.<position>.pickle`` in step 1 (fsync'd; a file only this program
writes and reads; one per PREPARE), and those names go into the manifest and the checkpoint
(``xa_pending``). The batch whose XA COMMIT lands the rows drops the name; files no
checkpoint names are deleted after each commit and at recovery. So a checkpoint past an XA
PREPARE still has that transaction's rows.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import pickle
import posixpath
import re
import signal
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from ..binlog.position import StreamPosition, is_past
from ..checkpoint import (
    Checkpoint,
    CheckpointStore,
    now_iso,
    position_from_json,
    position_to_json,
    replay_after,
)
from ..config import SinkConfig
from ..errors import IntegrityError, SinkError
from ..landed.checkpointed import check_pinned
from ..landed.compacted import read_records
from ..landed.contract import HELD_DIGESTS_KEY, PREVIOUS_DIGEST_KEY, safe_part
from ..landed.manifests import MANIFESTS, PROOF_KEY, Manifest, manifest_key, read_chain
from ..schema.history import SchemaHistory
from ..snapshot_progress import SnapshotState
from ..storage import LocalStore, Output, Store
from . import compaction, verify
from .changes import HeldXa, Run, TableVersion, rows_in
from .digest import DIGEST_KEY, HISTORY_DIGEST_KEY, check_history, hash_bytes
from .identity import LANDING_ID_KEY, establish
from .stores import landing_store

# pyarrow (under ``parquet_writer``) is imported with the first file written or schema asked:
# a daemon's start reaches its first binlog request without it (tests/unit/test_startup.py)
if TYPE_CHECKING:
    import pyarrow as pa

    from .parquet_writer import ParquetTableWriter, WrittenFile

log = structlog.get_logger("replicator")
HELD_XA = Path("_state") / "xa"
HELD_XA_KEY = HELD_XA.as_posix()
# a data file, its temp name (directories), a manifest's temp name: keys from the root
_TEMP = re.compile(r"[^/]+/[^/]+/\.part-[^/]*\.parquet\.tmp")
_MANIFEST_TEMP = re.compile(r"_manifests/\.\d{20}\.json\.tmp")
HELD_XA_FORMAT = 2  # bump when HeldXa, Run or Block change shape
HISTORY_DIR = "_schema"
COMMIT_STEPS = ("data", "manifest", "publish", "checkpoint")
# a start hashes the files of the batches after the checkpoint and of this many before it
# (every size is checked; ``replicator verify --deep`` hashes every file)
HASHED_BATCHES = 8
FAULT_ENV = "REPLICATOR_FAULT_CRASH_AT"
FAIL_ENV = "REPLICATOR_FAULT_FAIL_AT"


def _history_key(batch: int) -> str:
    """The key of the schema history as of ``batch`` (written with it, named by it)."""
    return f"{HISTORY_DIR}/history-{batch:020d}.json"


def _history_batch(key: str) -> int | None:
    """The batch of a history key ``_history_key`` made (None: another name)."""
    name = posixpath.basename(key)
    number = name.removeprefix("history-").removesuffix(".json")
    if len(number) != 20 or not number.isdigit() or key != _history_key(int(number)):
        return None
    return int(number)


def _shown(position: object) -> str:
    """A position as a manifest or checkpoint holds it, for messages."""
    if not isinstance(position, dict):
        return "no position"
    where = f"{position.get('file')}:{position.get('position')}"
    gtid = position.get("mariadb_gtid") or position.get("mysql_gtid")
    return where if gtid is None else f"GTID {gtid} ({where})"


def _position(data: object, manifest: Manifest) -> StreamPosition:
    try:
        return position_from_json(data, str(manifest.path))
    except (ValueError, TypeError) as exc:
        raise IntegrityError(
            f"manifest {manifest.path} has no readable end position: {exc}",
            hint="restore it from a backup; nothing was changed",
        ) from exc


@dataclass(slots=True)
class FaultInjector:
    """Crash (SIGKILL to ourselves) or fail (as a full disk would) at a named commit step, for
    the crash and failure tests.

    ``REPLICATOR_FAULT_CRASH_AT=<step>:<n>`` kills the process the ``n``-th time it reaches
    ``step`` (one of COMMIT_STEPS, ``publish-mid``: after a batch's first rename, the
    ``history`` steps, or a compaction's); ``REPLICATOR_FAULT_FAIL_AT=<step>:<n>`` raises
    ENOSPC there instead. Every batch reaches each commit step once, so for them ``n`` is
    the batch this process commits; the history steps are reached only by batches that
    write the schema history."""

    step: str | None = None
    times: int = 0
    _reached: int = 0
    fail: bool = False

    @classmethod
    def from_env(cls) -> FaultInjector:
        for name, fail in ((FAULT_ENV, False), (FAIL_ENV, True)):
            spec = os.environ.get(name, "")
            if spec:
                step, _, number = spec.partition(":")
                return cls(step=step, times=int(number or 1), fail=fail)
        return cls()

    def at(self, step: str) -> None:
        if self.step != step:
            return
        self._reached += 1
        if self._reached == self.times:
            if self.fail:
                raise OSError(errno.ENOSPC, f"No space left on device (fault injected: {step})")
            # said on stderr first, so a crash test tells this kill from one of its own
            os.write(2, f"fault injected: {step}:{self.times}\n".encode())
            os.kill(os.getpid(), signal.SIGKILL)


@dataclass(slots=True)
class _TableFile:
    version: TableVersion
    temp: str  # the key written (``Store.staged``: the final key itself on object stores)
    final: str
    writer: ParquetTableWriter


# how many of a batch's files are closed at once (``_close_all``)
CLOSE_WORKERS = 16


def _with_parents(folders: Iterable[str]) -> set[str]:
    """``folders`` (relative to the landing zone's root) and every folder above them, the
    root ("") included."""
    found: set[str] = set()
    for folder in folders:
        up = folder
        while up not in found:
            found.add(up)
            if not up:
                break
            up = posixpath.dirname(up)
    return found


@contextlib.contextmanager
def _naming(path: str) -> Iterator[None]:
    """An OSError raised inside names ``path`` (as its ``filename``) when it names no file
    itself: a write or an fsync that fails (a full disk, an I/O error) names none, an open,
    a mkdir or a rename names its own, which is kept."""
    try:
        yield
    except OSError as exc:
        if exc.filename is not None:
            raise
        raise OSError(exc.errno, exc.strerror or str(exc), path) from exc


def _write_failure(exc: OSError, where: str) -> str:
    """``(<path>): <cause>`` of a failed write, for a message: the file ``exc`` names, else
    ``where`` (what was being written)."""
    path = exc.filename if exc.filename is not None else where
    return f"({path}): {exc.strerror or exc}"


def _close_all(
    targets: list[_TableFile], uri: Callable[[str], str]
) -> list[tuple[_TableFile, WrittenFile]]:
    """Close every file of a batch (write what is buffered and the footer, then fsync it, or
    upload it whole to an object store), several at once: a close mostly waits on the disk or
    the network, and a batch spread over many tables has a file per table (1,000 fsyncs one
    after the other took 2.6 s here, 0.09 s sixteen at a time). The first failure, in the
    files' order, is raised once every close has ended, naming its file (``uri`` of its
    key); the caller aborts the batch then."""

    def close(target: _TableFile) -> WrittenFile:
        with _naming(uri(target.temp)):
            return target.writer.close()

    if len(targets) < 2:
        return [(t, close(t)) for t in targets]
    workers = min(CLOSE_WORKERS, len(targets))
    with ThreadPoolExecutor(workers, thread_name_prefix="replicator-close") as pool:
        closing = [pool.submit(close, t) for t in targets]
    return [(t, done.result()) for t, done in zip(targets, closing, strict=True)]


@dataclass(slots=True)
class Batch:
    """Row changes of whole transactions, on their way into one commit."""

    zone: LandingZone
    number: int
    first_seq: int
    start: StreamPosition | None
    start_moved: bool = False  # `checkpoint set` moved ``start`` away from the last batch's end
    rows: int = 0
    bytes: int = 0
    transactions: int = 0
    _files: dict[tuple[object, ...], _TableFile] = field(default_factory=dict)

    def add(self, version: TableVersion, changes: Sequence[Run]) -> None:
        """Append row changes of one table version (called from the writer thread)."""
        if not changes:
            return
        # the primary key too: each file's footer records one (parquet_writer)
        key = (version.schema, version.table, version.columns, version.primary_key)
        target = self._files.get(key)
        if target is None:
            target = self.zone._open_file(version, changes[0].seq)
            self._files[key] = target
        target.writer.write(changes)
        self.rows += rows_in(changes)

    def abort(self) -> None:
        for target in self._files.values():
            target.writer.abort()
        self._files.clear()

    def commit(
        self,
        end: StreamPosition,
        next_seq: int,
        held: Mapping[str, HeldXa] | None = None,
        *,
        records: Sequence[dict[str, Any]] = (),
        history: SchemaHistory | None = None,
        replay_until: StreamPosition | None = None,
        snapshot: SnapshotState | None = None,
        source: dict[str, Any] | None = None,
    ) -> Checkpoint:
        """Run the commit protocol; returns the new checkpoint. ``held``: the XA transactions
        prepared and undecided at ``end`` (stored with the batch's data); ``records``: the
        lifecycle records of the DDL in the batch; ``history``: the schema history as of
        ``end`` when it changed (written with the data, named by the manifest);
        ``snapshot``: the snapshot progress as of ``end`` (None: unchanged);
        ``replay_until``: set while the stream re-reads what landed before a ``checkpoint
        set`` moved it back (the batch says ``replay`` then); ``source``: the proof of the
        last transaction landed (``source.proof``; None: none yet)."""
        zone = self.zone
        held = held or {}
        pending = tuple(sorted(h.name for h in held.values()))
        try:
            # (a lease lost: nothing is deleted, the names may be the new writer's now)
            zone.confirm_writer()
            written = _close_all(list(self._files.values()), zone.store.uri)
            # the files' folders, and the folders above them: a table's folder made for this
            # batch must be as durable as the manifest that names its files
            with _naming(zone.location):
                zone.store.sync(
                    _with_parents(posixpath.dirname(t.temp) for t in self._files.values())
                )
            zone.confirm_writer()
            zone.store_held([h for h in held.values() if not h.stored])
            if history is None:
                history_path, history_pin = zone.history, zone.history_sha256
            else:
                history_path, history_pin = zone.store_history(self.number, history)
        except OSError as exc:
            self.abort()
            # the path: each step names what it wrote (``_naming``) when the OS does not
            raise SinkError(
                f"cannot write batch {self.number} {_write_failure(exc, zone.location)}",
                hint="check free space and permissions of the landing zone; the batch is "
                "replayed from the last checkpoint on restart",
            ) from exc
        zone.fault.at("data")
        manifest = {
            "batch": self.number,
            LANDING_ID_KEY: zone.landing_id,
            "committed_at": now_iso(),
            "first_seq": self.first_seq,
            "last_seq": next_seq - 1,
            "rows": self.rows,
            "transactions": self.transactions,
            "start": None if self.start is None else position_to_json(self.start),
            "start_moved": self.start_moved,
            "end": position_to_json(end),
            "xa_pending": list(pending),
            # each held file's sha256, checked before it is unpickled (load_held)
            HELD_DIGESTS_KEY: {n: pin for n in pending if (pin := zone._held.get(n)) is not None},
            "schema_history": history_path,
            HISTORY_DIGEST_KEY: history_pin,  # what load_history accepts (digest)
            PREVIOUS_DIGEST_KEY: zone.manifest_sha256,  # the link to the last batch's manifest
            "schema_changes": list(records),
            "replay": replay_until is not None,
            PROOF_KEY: source,
            "snapshot": (zone.snapshot if snapshot is None else snapshot).to_json(),
            "files": [
                {
                    "table": target.version.name,
                    "path": target.final,
                    "rows": info.rows,
                    "bytes": info.bytes,
                    DIGEST_KEY: info.sha256,  # of the bytes as written (digest)
                    "first_seq": info.first_seq,
                    "last_seq": info.last_seq,
                    "invalid_temporals": info.invalid_temporals,  # zero dates written as null
                }
                for target, info in written
            ],
        }
        zone.confirm_writer()
        written_manifest = json.dumps(manifest, indent=1, sort_keys=True).encode() + b"\n"
        zone.write_state(manifest_key(self.number), written_manifest)
        zone.manifest_sha256 = hash_bytes(written_manifest)
        zone.fault.at("manifest")
        zone.committed_through = next_seq - 1
        for index, (target, _) in enumerate(written):
            zone._publish(target.temp, target.final)  # nothing to do on object stores
            if index == 0:
                zone.fault.at("publish-mid")
        zone._sync({posixpath.dirname(t.final) for t, _ in written})
        zone.fault.at("publish")
        if snapshot is not None:
            zone.snapshot = snapshot
        checkpoint = Checkpoint(
            batch=self.number,
            next_seq=next_seq,
            position=end,
            committed_at=str(manifest["committed_at"]),
            xa_pending=pending,
            replay_until=replay_after(replay_until, end),
            snapshot=zone.snapshot,
            manifest_sha256=zone.manifest_sha256,
        )
        # a writer that stalled past its lease since the manifest is stopped here: the
        # checkpoint may be the new writer's by now. The files dropped below are only this
        # writer's own older ones (histories of earlier batches, XA transactions it saw
        # decided), so a stall after this check deletes nothing another writer made.
        zone.confirm_writer()
        zone.checkpoints.save(checkpoint)
        zone.fault.at("checkpoint")
        for item in held.values():
            item.stored = True
        zone.drop_held_decided(pending)
        zone.history_sha256, zone.history_batch = history_pin, self.number
        if history_path != zone.history:
            zone.history = history_path
            zone.drop_histories_before(self.number)
        self.zone.last_manifest = manifest
        return checkpoint


class LandingZone:
    def __init__(
        self, cfg: SinkConfig, *, fault: FaultInjector | None = None, store: Store | None = None
    ) -> None:
        self.cfg = cfg
        # where everything goes, by key (storage): a directory, or an object store
        self.store = store or landing_store(cfg)
        self.root = Path(cfg.root)  # sink.root as given (a directory only for local stores)
        self.location = self.store.location  # for messages: never with credentials
        self.landing_id: str | None = None  # set by recover() (sink.identity)
        self.fault = fault or FaultInjector()
        self.checkpoints = CheckpointStore(self.store)
        # the last _seq committed manifests cover: a data file named after a _seq up to it is
        # a committed one (names derive from _seq; object stores: a replayed batch may
        # overwrite a leftover of an uncommitted batch, never one of these)
        self.committed_through = 0
        self.last_manifest: dict[str, Any] | None = None
        # the schema history file the last committed manifest names (relative to root), the
        # sha256 that manifest pins it to (None: a manifest from before pins) and its batch
        self.history: str | None = None
        self.history_sha256: str | None = None
        self.history_batch: int | None = None
        # where the last committed batch ended (the schema history holds as of there); set by
        # recover()
        self.committed_end: StreamPosition | None = None
        # the snapshot progress as of the last commit (carried into batches without chunks)
        self.snapshot = SnapshotState()
        # the writer's lease (object stores; ``sink.lock``), confirmed before each write of a
        # commit: a writer that stalled past it and lost it to another must not write a name
        # the other may have committed (files, history, manifest)
        self.lease: Callable[[], None] | None = None
        # the held XA transactions this process wrote or read (the only ones it deletes
        # after a commit: ``drop_held_decided``), each with its sha256 as written or as the
        # last manifest pins it (None: a manifest from before pins; ``load_held``)
        self._held: dict[str, str | None] = {}
        # the sha256 of the last manifest committed: the next one's link, the checkpoint's pin
        self.manifest_sha256: str | None = None

    def confirm_writer(self) -> None:
        """The lease is still ours (``LandingZoneBusyError`` when another writer took it)."""
        if self.lease is not None:
            self.lease()

    def write_state(self, key: str, data: bytes) -> None:
        """Write a manifest atomically and durably: rename on a directory (which the writer's
        flock guards), one PUT on an object store, there conditional on no object of that
        name existing (``If-None-Match: *``, where the store has conditional writes), so two
        writers can never both commit one batch number."""
        try:
            if self.store.renames:
                self.store.write(key, data)
            else:
                self.store.create(key, data)
        except FileExistsError as exc:
            raise IntegrityError(
                f"{self.store.uri(key)} was committed by another writer while this process "
                "wrote the same batch; this process stops without committing it",
                hint="two writers ran on one landing zone: stop the other one (one writer per "
                "landing zone); the next start checks every committed file against its "
                "manifest",
            ) from exc
        except OSError as exc:
            raise SinkError(
                f"cannot write {self.store.uri(key)}: {exc.strerror or exc}",
                hint="check free space and permissions of the landing zone; nothing was lost",
            ) from exc

    def _sync(self, folders: set[str]) -> None:
        try:
            self.store.sync(folders)
        except OSError as exc:
            raise SinkError(
                f"cannot sync {self.location}: {exc.strerror or exc}",
                hint="the batch is committed (its manifest exists); restart to finish it",
            ) from exc

    def file_schema(self, version: TableVersion) -> pa.Schema:
        """The schema this landing zone's files of ``version`` have (``_open_file``)."""
        from .parquet_writer import file_schema  # noqa: PLC0415 - see the imports

        return file_schema(
            version,
            with_before=self.cfg.keep_before_image,
            with_absent=True,
            with_before_key=True,
            geometry_srid=self.cfg.geometry_srid,
        )

    def _open_file(self, version: TableVersion, first_seq: int) -> _TableFile:
        from .parquet_writer import ParquetTableWriter  # noqa: PLC0415 - see the imports

        directory = f"{safe_part(version.schema)}/{safe_part(version.table)}"
        final = f"{directory}/part-{first_seq:020d}.parquet"
        where = self.store.uri(final)
        # a final name is taken once its batch commits. On a directory it appears only then;
        # on an object store an uncommitted leftover of a crashed batch may hold it (the
        # replay overwrites it: same rows under the same name), so there the name is taken
        # when its _seq is one a manifest covers (committed, whether or not still there)
        if self.store.renames:
            taken = self.store.exists(final)
        else:
            taken = first_seq <= self.committed_through
        if taken:
            raise IntegrityError(
                f"{where} already exists: _seq {first_seq} was committed before",
                hint="the checkpoint is behind the committed data (restored from an old backup?); "
                "nothing was overwritten: restore the checkpoint that belongs to this landing zone",
            )
        temp = self.store.staged(final)
        target: Path | Output
        try:
            if isinstance(self.store, LocalStore):
                self.store.path(directory).mkdir(parents=True, exist_ok=True)
                target = self.store.path(temp)
            else:
                target = self.store.open_output(temp)
        except OSError as exc:
            raise SinkError(
                f"cannot create {self.store.uri(temp)}: {exc.strerror or exc}",
                hint="check the landing zone's permissions and free space",
            ) from exc
        writer = ParquetTableWriter(
            target,
            version,
            with_before=self.cfg.keep_before_image,
            with_absent=True,
            with_before_key=True,  # updates name the row they change (parquet_writer)
            row_group_rows=self.cfg.row_group_rows,
            compression=self.cfg.compression,
            geometry_srid=self.cfg.geometry_srid,
        )
        return _TableFile(version, temp, final, writer)

    def _publish(self, temp: str, final: str) -> None:
        try:
            self.store.publish(temp, final)
        except OSError as exc:
            raise SinkError(
                f"cannot publish {self.store.uri(final)}: {exc.strerror or exc}",
                hint="the batch is committed (its manifest exists); restart to finish it",
            ) from exc

    # -- held XA transactions ----------------------------------------------------------------

    def _held_key(self, name: str) -> str:
        return f"{HELD_XA_KEY}/{name}.pickle"

    def store_held(self, items: Sequence[HeldXa]) -> None:
        """Write held XA transactions durably (before the manifest that names them)."""
        for item in items:
            data = pickle.dumps((HELD_XA_FORMAT, item), protocol=pickle.HIGHEST_PROTOCOL)
            key = self._held_key(item.name)
            with _naming(self.store.uri(key)):
                self.store.write(key, data)
            self._held[item.name] = hash_bytes(data)

    def load_held(self, names: Sequence[str]) -> list[HeldXa]:
        """The held XA transactions a checkpoint names, each checked against the sha256 its
        batch's manifest pins before it is unpickled (a file only this program writes: an
        edited one would change the rows its XA COMMIT lands, or run code)."""
        found: list[HeldXa] = []
        for name in names:
            key = self._held_key(name)
            path = self.store.uri(key)
            hint = (
                "restore the file, or move the checkpoint back before its XA PREPARE with "
                "`replicator checkpoint set` to read them from the binlog again"
            )
            try:
                raw = self.store.read(key)
            except OSError as exc:
                raise IntegrityError(
                    f"the rows of prepared XA transaction {name} ({path}) cannot be read: {exc}",
                    hint=hint,
                ) from exc
            pinned, digest = self._held.get(name), hash_bytes(raw)
            if pinned is not None and digest != pinned:
                raise IntegrityError(
                    f"{path}, the rows of prepared XA transaction {name}, is not the file "
                    f"batch {self.history_batch} committed (sha256 {digest}, committed "
                    f"{pinned})",
                    hint=hint,
                )
            try:
                version, item = pickle.loads(raw)  # ours only
            except Exception as exc:  # truncated, or of another shape
                raise IntegrityError(
                    f"the rows of prepared XA transaction {name} ({path}) cannot be read: {exc}",
                    hint=hint,
                ) from exc
            if version != HELD_XA_FORMAT or not isinstance(item, HeldXa) or item.name != name:
                raise IntegrityError(
                    f"{path} does not hold XA transaction {name} in format {HELD_XA_FORMAT}",
                    hint="it was written by another version of replicator: move the checkpoint "
                    "back before its XA PREPARE with `replicator checkpoint set`",
                )
            item.stored = True
            found.append(item)
            self._held[name] = digest
        return found

    def drop_held_except(self, keep: Sequence[str]) -> None:
        """Delete held XA files no checkpoint names (decided, or never committed): at the
        start, when this process is the one writer."""
        wanted = {self._held_key(name) for name in keep}
        for key in self.store.list(HELD_XA_KEY):
            if key not in wanted:
                self.store.delete(key)
        self._held = {name: self._held.get(name) for name in keep}

    def drop_held_decided(self, pending: Sequence[str]) -> None:
        """Delete the held XA files this process wrote or read whose transactions are no
        longer pending (decided since): after a commit, never a file of a name it does not
        know, which may be another writer's that took the landing zone over meanwhile."""
        for name in sorted(self._held.keys() - set(pending)):
            self.store.delete(self._held_key(name))
        self._held = {name: self._held.get(name) for name in pending}

    # -- the schema history ------------------------------------------------------------------

    def store_history(self, batch: int, history: SchemaHistory) -> tuple[str, str]:
        """Write the history as of ``batch`` durably (before the manifest that names it);
        returns its path relative to the root and its sha256 (the manifest pins it). Fault
        points: ``history-mid`` (written, not yet in place) and ``history`` (in place,
        manifest not yet written)."""
        key = _history_key(batch)
        staged = self.store.staged(key)
        data = json.dumps(history.to_json(), sort_keys=True, separators=(",", ":")).encode()
        with _naming(self.store.uri(staged)):  # an OSError names the file it concerns
            output = self.store.open_output(staged)
            try:
                output.write(data)
                output.close()  # fsync'd (or uploaded: on an object store, already in place)
            except BaseException:
                output.abort()
                raise
        self.fault.at("history-mid")
        with _naming(self.store.uri(key)):
            self.store.publish(staged, key)
        with _naming(self.store.uri(HISTORY_DIR)):
            self.store.sync({HISTORY_DIR})
        self.fault.at("history")
        return key, hash_bytes(data)

    def load_history(self) -> SchemaHistory | None:
        """The schema history the last committed batch names (None: none written yet), as
        that batch's manifest pins it (``digest.check_history``: other content stops with an
        IntegrityError). A history no manifest pins yet (written before pins) is taken as it
        is, and pinned by the next manifest."""
        if self.history is None:
            return None
        path = self.store.uri(self.history)
        try:
            raw = self.store.read(self.history)
            check_history(raw, self.history_sha256, path, self.history_batch)
            history = SchemaHistory.from_json(json.loads(raw))
        except FileNotFoundError as exc:
            raise IntegrityError(
                f"the schema history {path} that the last manifest names is gone",
                hint="restore it from a backup; without it the columns of MINIMAL/NO_LOG "
                "binlogs cannot be named",
            ) from exc
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise IntegrityError(
                f"the schema history {path} cannot be read: {exc}",
                hint="restore it from a backup",
            ) from exc
        if self.history_sha256 is None:
            self.history_sha256 = hash_bytes(raw)
        return history

    def drop_histories_except(self, keep: str | None) -> None:
        """Delete history files other than ``keep`` (superseded, or of uncommitted batches):
        at the start, when this process is the one writer."""
        for key in self.store.list(HISTORY_DIR):
            if key != keep:
                self.store.delete(key)

    def drop_histories_before(self, batch: int) -> None:
        """Delete the history files of batches before ``batch`` (superseded by its own):
        after a commit, never one of a later batch, which may be another writer's that took
        the landing zone over meanwhile."""
        for key in self.store.list(HISTORY_DIR):
            number = _history_batch(key)
            if number is not None and number < batch:
                self.store.delete(key)

    def begin(self, checkpoint: Checkpoint) -> Batch:
        return Batch(
            zone=self,
            number=checkpoint.batch + 1,
            first_seq=checkpoint.next_seq,
            start=checkpoint.position,
            start_moved=checkpoint.moved,
        )

    # -- recovery --------------------------------------------------------------------------

    def recover(self) -> Checkpoint:
        """Finish or roll back whatever a crash left half done; return the checkpoint.

        Everything is checked before anything is changed (``landed.manifests``): the manifests
        one by one and as a chain, the checkpoint against them, every committed file. What
        does not add up stops with an ``IntegrityError`` and leaves the landing zone as it
        was; committed data is never deleted, moved or overwritten here."""
        store = self.store
        try:
            store.ensure()
        except OSError as exc:
            raise SinkError(
                f"cannot create the landing zone {self.location}: {exc.strerror or exc}",
                hint="check sink.root and its permissions",
            ) from exc
        checkpoint = self.checkpoints.load()
        manifests = read_chain(store)
        self._check_checkpoint(checkpoint, manifests)
        sizes = store.list_sizes()
        listed = set(sizes)
        referenced = self._check_files(manifests, checkpoint, sizes)
        history = manifests[-1].data.get("schema_history") if manifests else None
        if history is not None and not (history in listed or store.exists(history)):
            raise IntegrityError(
                f"the schema history {history} that batch {manifests[-1].batch} names is gone",
                hint="restore it from a backup; nothing was changed in the landing zone",
            )
        leftovers = self._check_no_strays(referenced, listed)
        self._establish_identity(manifests)
        superseded: set[str] | None = None
        for manifest in manifests:
            if manifest.batch <= checkpoint.batch:
                continue
            for item in manifest.entries:  # committed but maybe not yet published
                final = str(item["path"])
                if store.renames and not store.exists(final):
                    if superseded is None:  # a compaction replaced it (a checkpoint rebuilt)
                        superseded = compaction.superseded(store)
                    if final in superseded:
                        continue
                    self._publish(store.staged(final), final)
                    self._sync({posixpath.dirname(final)})
            end = position_from_json(manifest.data["end"], str(manifest.path))
            checkpoint = Checkpoint(
                batch=manifest.batch,
                next_seq=manifest.last_seq + 1,
                position=end,
                committed_at=str(manifest.data["committed_at"]),
                xa_pending=tuple(manifest.data.get("xa_pending", ())),
                replay_until=replay_after(checkpoint.replay_until, end),  # as Batch.commit
                snapshot=SnapshotState.from_json(manifest.data.get("snapshot"), str(manifest.path)),
                manifest_sha256=manifest.sha256,
            )
            self.checkpoints.save(checkpoint)
        self._remove_uncommitted(listed, leftovers)
        compaction.recover_if_idle(self.store, self.cfg.object_store.lease_seconds)
        self.committed_through = manifests[-1].last_seq if manifests else 0
        self._held = dict(manifests[-1].held_pins) if manifests else {}
        self.manifest_sha256 = manifests[-1].sha256 if manifests else None
        self.drop_held_except(checkpoint.xa_pending)
        self.snapshot = checkpoint.snapshot
        self.history = manifests[-1].data.get("schema_history") if manifests else None
        self.history_sha256 = manifests[-1].history_pin if manifests else None
        self.history_batch = manifests[-1].batch if manifests else None
        self.drop_histories_except(self.history)
        last = manifests[-1] if manifests else None
        self.committed_end = (
            None if last is None else position_from_json(last.data["end"], str(last.path))
        )
        return checkpoint

    def _establish_identity(self, manifests: list[Manifest]) -> None:
        recorded = manifests[-1].landing_id if manifests else None
        self.landing_id, how = establish(self.store, recorded)
        if how == "created" and manifests:
            log.info(
                "landing zone id created",
                landing=self.location,
                landing_id=self.landing_id,
                batches_without_id=len(manifests),
                hint="the landing zone was written before landing zones had ids; batches from "
                "now on carry this one",
            )
        elif how != "kept":
            log.info(f"landing zone id {how}", landing=self.location, landing_id=self.landing_id)

    def _check_checkpoint(self, checkpoint: Checkpoint, manifests: list[Manifest]) -> None:
        """The checkpoint must name a committed batch and the ``_seq`` that follows it."""
        where = self.checkpoints.path
        last = manifests[-1] if manifests else None
        if last is None:
            if checkpoint.batch != 0:
                raise IntegrityError(
                    f"checkpoint {where} names batch {checkpoint.batch}, but there is no "
                    f"manifest in {self.store.uri(MANIFESTS)}",
                    hint="the commit records were removed: restore _manifests/ from a backup, or "
                    "start over with an empty landing zone",
                )
            return
        if checkpoint.batch > last.batch:
            raise IntegrityError(
                f"checkpoint {where} names batch {checkpoint.batch}, but the last manifest is "
                f"batch {last.batch}",
                hint="manifests after it were removed: restore them from a backup",
            )
        if checkpoint.batch == 0:
            return  # a lost checkpoint: the manifests roll it forward
        first = manifests[0]
        if checkpoint.batch < first.batch:
            raise IntegrityError(
                f"checkpoint {where} names batch {checkpoint.batch}, before the first manifest "
                f"(batch {first.batch})",
                hint="restore the checkpoint or the manifests from one backup",
            )
        named = manifests[checkpoint.batch - first.batch]
        if checkpoint.next_seq != named.last_seq + 1:
            raise IntegrityError(
                f"checkpoint {where} says the next _seq is {checkpoint.next_seq}, but batch "
                f"{named.batch} ended at _seq {named.last_seq}",
                hint="the checkpoint does not belong to these manifests: restore it from a "
                "backup, or remove it to have it rebuilt from the manifests (the stream then "
                "resumes after the last manifest)",
            )
        self._check_checkpoint_position(checkpoint, named, manifests)
        self._check_checkpoint_state(checkpoint, named)

    def _check_checkpoint_state(self, checkpoint: Checkpoint, named: Manifest) -> None:
        """What the checkpoint carries besides its position is what its batch's manifest
        says: the prepared XA transactions held (a start deletes the held files of any it
        does not name) and the snapshot's progress (a table it leaves out is never read).
        Only a commit writes them; ``checkpoint set`` keeps them."""
        where = self.checkpoints.path
        fix = (
            "the checkpoint was changed by hand or does not belong to these manifests: remove "
            f"it to have it rebuilt from {self.store.uri(MANIFESTS)}; nothing was changed"
        )
        check_pinned(self.store, checkpoint.manifest_sha256, named.batch, [named])
        held = tuple(named.data.get("xa_pending", ()))
        if checkpoint.xa_pending != held:
            raise IntegrityError(
                f"checkpoint {where} holds the prepared XA transactions "
                f"{list(checkpoint.xa_pending)}, but batch {named.batch} held {list(held)}",
                hint=fix,
            )
        snapshot = SnapshotState.from_json(named.data.get("snapshot"), str(named.path))
        if checkpoint.snapshot.to_json() != snapshot.to_json():
            raise IntegrityError(
                f"checkpoint {where} has the snapshot's progress at "
                f"{checkpoint.snapshot.to_json()}, but batch {named.batch} left it at "
                f"{snapshot.to_json()}",
                hint=fix,
            )

    def _check_checkpoint_position(
        self, checkpoint: Checkpoint, named: Manifest, manifests: list[Manifest]
    ) -> None:
        """The checkpoint resumes where its batch ended, unless ``checkpoint set`` moved it
        (``moved``: what lands again before ``replay_until`` is marked ``replay``). Anything
        else, a position edited or lost, would re-land committed transactions unmarked (a
        keyless table would count them twice) or skip some: refused."""
        where = self.checkpoints.path
        end = _position(named.data.get("end"), named)
        ended = position_to_json(end)  # as the checkpoint writes it (GTID text normalised)
        found = None if checkpoint.position is None else position_to_json(checkpoint.position)
        fix = (
            "the checkpoint was changed by hand or does not belong to these manifests: remove "
            f"it to have it rebuilt from {self.store.uri(MANIFESTS)} (the stream resumes after "
            "the last batch), then use `replicator checkpoint set` to replay or skip (its "
            "batches say so); nothing was changed"
        )
        if not checkpoint.moved:
            if found != ended:
                raise IntegrityError(
                    f"checkpoint {where} resumes at {_shown(found)}, but batch {named.batch} "
                    f"ended at {_shown(ended)}",
                    hint=fix,
                )
        elif checkpoint.replay_until is None:
            raise IntegrityError(
                f"checkpoint {where} says it was moved, but not from where: it has no replay_until",
                hint=fix,
            )
        elif not is_past(checkpoint.replay_until, end):
            raise IntegrityError(
                f"checkpoint {where} marks replays only up to "
                f"{_shown(position_to_json(checkpoint.replay_until))}, before the end of "
                f"batch {named.batch} "
                f"({_shown(ended)}): transactions landed before would land again unmarked",
                hint=fix,
            )
        following = manifests[checkpoint.batch - manifests[0].batch + 1 :]
        started = following[0].data.get("start") if following else None
        if started is not None and position_to_json(_position(started, following[0])) != found:
            nxt = following[0]
            raise IntegrityError(
                f"checkpoint {where} resumes at {_shown(found)}, but batch {nxt.batch}, "
                f"committed after it, started at {_shown(nxt.data.get('start'))}",
                hint=fix,
            )

    def _check_files(
        self, manifests: list[Manifest], checkpoint: Checkpoint, sizes: dict[str, int]
    ) -> set[str]:
        """Every file that holds committed rows (a manifest's, or the compaction output that
        superseded it) must be there with the size its record gives (on a directory, for a
        batch the checkpoint has not reached, maybe still under its hidden temp name), and
        the files of the batches after the checkpoint and of the last ``HASHED_BATCHES``
        with their hash (``sink.verify``). Returns the keys manifests name. ``sizes``: a
        listing; a file it misses is looked up by name before it counts as gone (an object
        store's listing may lag)."""
        store = self.store
        referenced = {str(item["path"]) for m in manifests for item in m.entries}
        # read after the listing: a file is deleted only after the record superseding it is
        # committed, so one the listing missed is found superseded here or in ``check``
        records = read_records(store)
        files = verify.committed(manifests, records)
        newest = manifests[-1].batch if manifests else 0
        hashed_from = min(checkpoint.batch, newest - HASHED_BATCHES)

        report = verify.check(
            store,
            files,
            sizes,
            staged_ok=lambda item: item.may_be_staged(store, checkpoint.batch),
            hash_it=lambda item: item.record is None and item.batches[-1] > hashed_from,
            superseded=lambda: compaction.superseded(store),
        )
        if report.problems:
            lines = [problem.line() for problem in report.problems]
            shown = "; ".join(lines[:5]) + (
                f"; and {len(lines) - 5} more" if len(lines) > 5 else ""
            )
            raise IntegrityError(
                shown
                if len(lines) == 1
                else f"{len(lines)} committed files are not as committed: {shown}",
                hint="restore the file(s) from a backup (`replicator verify` lists every one); "
                "nothing was changed in the landing zone",
            )
        return referenced

    def _check_no_strays(self, referenced: set[str], listed: set[str]) -> list[str]:
        """Data files under their final names that no manifest names. On a directory they
        cannot come from this protocol (files are published only after their manifest): the
        manifest is lost, or someone put them there, and Spark would read them as data: stop
        rather than guess. On an object store data files are written under their final
        names before the manifest, so they are what a crash left of a batch that never
        committed: returned, to be deleted once every check passed."""
        strays = verify.stray_data_files(listed, referenced)
        if strays and self.store.renames:
            shown = ", ".join(strays[:3])
            raise IntegrityError(
                f"{len(strays)} data file(s) in the landing zone are named by no manifest: {shown}",
                hint="their manifest is missing (restore _manifests/ from a backup) or they "
                "were copied in by hand (move them out of the landing zone)",
            )
        return strays

    def _remove_uncommitted(self, listed: set[str], leftovers: list[str]) -> None:
        """Temp files left by batches that never reached their manifest (called after the
        roll-forward, which published every committed one); on object stores the data files
        of such batches (``leftovers``)."""
        for key in sorted(listed):
            if _TEMP.fullmatch(key) or _MANIFEST_TEMP.fullmatch(key):
                self.store.delete(key)
        for key in leftovers:
            self.store.delete(key)
            log.info("uncommitted file deleted", file=self.store.uri(key))
