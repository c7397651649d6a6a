"""Compaction and retention: many small committed files of a table rewritten as few large ones.

A landing zone gains one file per table per batch; Spark's listing and planning slow down with
every one. ``compact`` merges runs of committed files into ``<db>/<table>/compact-<first
_seq>-<last _seq>.parquet`` (the ``_seq`` range of the manifest entries it holds, 20 digits
each) and commits them with one **compaction record**, ``_compactions/<id, 20 digits>.json``
(docs/landing-zone.md, Compaction). Manifests are never rewritten: a record says which files
(manifest entries, or outputs of earlier records) each output supersedes, and readers that go
by the manifests (``landed.committed``) read the output instead.

What may be merged (``plan``): consecutive files (by ``_seq``) of one landed table whose Parquet
schemas are equal, footer and field metadata included (table version, column ids, fills, primary
key), of batches the checkpoint has passed (published), older than ``older_than``, that are
neither replays nor the first batch after ``checkpoint set`` (readers tell replayed copies by
their batch, so those stay their own files), and never across a lifecycle record of the table
(create/alter/truncate/drop/rename naming it, by ``_seq``). Rows keep every column, their
``_seq`` order and the footer.

A run holds the compaction lock (``compaction_lock``; one compactor at a time): on a
directory ``_state/compact.lock`` (``flock``), on an object store the lease
``_state/compact-lease.json`` (``CompactionLease``: renewed while outputs are written, read
back just before the commit point):

1. ``recover``: roll committed outputs forward (a staged output whose record exists is
   published) and delete the outputs of a run that died before its record: only those its
   **intent** names, and only when its id is the next record number (``_check_complete``);
2. ``retain``: delete the files superseded by records older than ``retention``;
3. ``intent``: write ``_compactions/<id>.intent.json``, naming the id the record will take and
   every output about to be written with the files it replaces (``Intent``);
4. ``data``: write each output to its staged key (``Store.staged``: a hidden temp name on
   local disks, the final key on object stores), checking that every row of the superseded
   files comes over once, in ``_seq`` order, and hashing what is written (``sha256``);
5. ``record``: after checking that the lock is still held and every output is there as
   written (size and hash), write the compaction record atomically. **This is the commit
   point**: before it the superseded files are the committed ones, after it the outputs;
6. ``publish``: rename staged outputs into place (local disks), remove the intent, then
   retention again.

Records are found by number, as manifests are: after the listing the next numbers are asked
for by name (an object store's listing may lag). Nothing is deleted unless the records are
complete: a gap in their numbers, an intent beyond the next number, an intent whose replaced
files are gone, or an output no record or intent names means a record was lost, and stops
with an ``IntegrityError`` naming it (deleting the outputs of a lost record would delete the
only copy of its rows once retention has run).

Fault points (``REPLICATOR_FAULT_CRASH_AT``, as the daemon's): ``compact-intent`` (before the
first output), ``compact-data-mid`` (after the first output), ``compact-data``,
``compact-record``, ``compact-publish``, ``compact-retain-mid`` (after the first deletion).

The daemon keeps landing meanwhile: it only adds batches after the checkpoint, and the
compactor only touches files of batches before it. The daemon's recovery accepts files that a
committed record superseded being gone (``superseded``), leaves ``compact-*`` files alone
unless it can take the compaction lock (``recover_if_idle``: a lease a live compactor holds
keeps it out), and its stray check only looks at ``part-*`` names.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import re
import secrets
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from ..errors import IntegrityError, SinkError
from ..landed.checkpointed import check_pinned, check_reached, checkpoint_pin
from ..landed.compacted import (
    OUTPUT_NAME,
    CompactionRecord,
    Intent,
    Output,
    Piece,
    compaction_keys,
    intent_key,
    missing_record,
    output_name,
    probe_records,
    read_intents,
    read_records,
    record_error,
    record_key,
    records_numbered,
)
from ..landed.contract import COMPACTIONS
from ..landed.manifests import Manifest, read_chain
from ..storage import LocalStore, Store
from .digest import DIGEST_KEY, HashingStream, hash_bytes, hash_key
from .lock import LandingLock, LandingZoneBusyError, LeaseLock, describe_holder
from .parquet_options import writer_options

# pyarrow is imported where files are read or written: a daemon's start recovers through this
# module (``recover_if_idle``) long before it writes its first file (tests/unit/test_startup.py)
if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

log = structlog.get_logger("replicator")

LOCK_KEY = "_state/compact.lock"
LEASE_KEY = "_state/compact-lease.json"  # the lock on object stores
_STAGED = re.compile(r"\.compact-\d{20}-\d{20}(?:-[0-9a-f]{8,32})?\.parquet\.tmp")
DEFAULT_TARGET_BYTES = 128 * 1024 * 1024
DEFAULT_RETENTION = 86400.0  # a day: longer than Spark jobs that listed the old files run


def _write_new(store: Store, key: str, data: dict[str, Any]) -> None:
    """Write an intent or a record that must not exist yet. On an object store the PUT is
    conditional (``If-None-Match: *``, where the store has it): of two compactors that got
    the same number (two started in the same instant on a store without leases that hold),
    only one commits it. A directory's flock already keeps a second compactor out."""
    raw = json.dumps(data, indent=1).encode() + b"\n"
    if store.renames:
        store.write(key, raw)
        return
    try:
        store.create(key, raw)
    except FileExistsError as exc:
        raise IntegrityError(
            f"{store.uri(key)} was written by another compactor meanwhile; this run commits "
            "nothing",
            hint="run one compactor per landing zone; the next run cleans up after this one",
        ) from exc


@dataclass(slots=True)
class Live:
    """Which files hold the committed data after the records: each manifest entry's file, or
    the output that superseded it (transitively)."""

    pieces: dict[str, Piece] = field(default_factory=dict)  # live path -> piece
    superseded: dict[str, int] = field(default_factory=dict)  # path -> record number
    replaced_by: dict[str, str] = field(default_factory=dict)  # path -> output replacing it
    outputs: set[str] = field(default_factory=set)  # every committed output path
    origins: dict[str, list[str]] = field(default_factory=dict)  # output -> manifest entries

    def apply(self, record: CompactionRecord, *, strict: bool = True) -> None:
        for output in record.outputs:
            held: list[str] = []
            for old in output.replaces:
                found = self.pieces.pop(old.path, None)
                if strict and found != old:
                    raise record_error(
                        record_key(record.number),
                        f"replaces {old.path}, which is not a committed, live file as it says",
                    )
                self.superseded[old.path] = record.number
                self.replaced_by[old.path] = output.piece.path
                held.extend(self.origins.pop(old.path, [old.path]))
            self.pieces[output.piece.path] = output.piece
            self.outputs.add(output.piece.path)
            self.origins[output.piece.path] = held


def live_files(manifests: Sequence[Manifest], records: Sequence[CompactionRecord]) -> Live:
    live = Live()
    for manifest in manifests:
        for item in manifest.entries:
            live.pieces[str(item["path"])] = Piece(
                str(item["path"]),
                str(item["table"]),
                int(item["rows"]),
                int(item["first_seq"]),
                int(item["last_seq"]),
            )
    for record in records:
        live.apply(record)
    return live


def superseded(store: Store) -> set[str]:
    """Paths committed records superseded (gone after retention, or about to be), once the
    records are proven complete (``_check_complete``): with a record lost, the files it
    superseded are gone for a reason no record shows, and the lost record is what is named.
    Needs no lock: the table folders are listed first, then the intents read, then the
    records asked for again: an output listed was named by an intent then (it is written
    after its intent), and an intent gone meanwhile went after its record was written (or
    after its outputs were deleted: ``_check_complete`` looks again)."""
    listed = _table_keys(store)
    keys = compaction_keys(store)
    intents = read_intents(store, keys.intents)
    records = records_numbered(store, probe_records(store, list(keys.records)))
    live = _check_complete(store, records, intents, listed)[0]
    return set(live.superseded)


# ---------------------------------------------------------------------------- the lock


# what each holder of the compaction lock records as its purpose
COMPACTOR = "replicator compact"
DAEMON_ROUND = "compaction round of a daemon (sink.compaction.every)"
START_RECOVERY = "recovery at a daemon's start"
# how long ``replicator compact`` waits for a daemon's start recovery to let go of the lock
# (a recovery lists the landing zone and deletes leftovers: seconds, not a compaction's time)
RECOVERY_WAIT_SECONDS = 60.0


class CompactionGuard:
    """What a compactor holds while it runs: ``CompactionLock`` on a directory,
    ``CompactionLease`` on an object store (``compaction_lock``). Each holder records its
    purpose (``COMPACTOR``, ``DAEMON_ROUND``, ``START_RECOVERY``) for the one it keeps out."""

    where: str
    purpose: str
    lock: LandingLock | LeaseLock

    def take_or_holder(self) -> dict[str, Any] | None:
        """Take it (None), or return what the holder keeping it recorded ({} when unknown)."""
        try:
            self.lock.acquire(self.purpose)
        except LandingZoneBusyError as exc:
            return exc.holder
        return None

    def take_or_skip(self, skipped: str, **detail: object) -> bool:
        """Take it (True), or log ``skipped`` naming the holder keeping it (False): for the
        daemon's rounds and start recovery, which never wait for a compactor."""
        holder = self.take_or_holder()
        if holder is None:
            return True
        log.info(skipped, landing=self.where, holder=describe_holder(holder), **detail)
        return False

    def release(self) -> None:
        self.lock.release()

    def check(self) -> None:  # a flock needs no renewal
        """While holding it: keep it (``SinkError`` when it was lost)."""

    def renew(self) -> None:
        """Just before the commit point: make sure it is still held, for long enough."""

    @contextlib.contextmanager
    def held(self, recovery_wait: float = RECOVERY_WAIT_SECONDS) -> Iterator[None]:
        """Hold it for ``replicator compact``: another compactor keeps this one out at once;
        a daemon's start recovery is waited for, up to ``recovery_wait`` seconds."""
        deadline = time.monotonic() + recovery_wait
        while (found := self.take_or_holder()) is not None:
            recovering = found.get("purpose") == START_RECOVERY
            if recovering and time.monotonic() < deadline:
                time.sleep(0.2)
                continue
            raise SinkError(
                f"the compaction lock on {self.where} is held by another process "
                f"({describe_holder(found)})",
                hint=(
                    f"a daemon's start recovery did not end within {recovery_wait:.0f} s: run "
                    "`replicator compact` again when it has"
                    if recovering
                    else "wait for it to finish; one compactor at a time"
                ),
            )
        try:
            yield
        finally:
            self.release()


class CompactionLock(CompactionGuard):
    """One compactor at a time on a directory: ``flock`` on ``<root>/_state/compact.lock``
    (released by the kernel however the holder ends), the holder's record inside. The
    daemon's writer lock is another file: a compactor runs beside a running daemon."""

    def __init__(self, store: LocalStore, purpose: str = COMPACTOR) -> None:
        self.lock = LandingLock(store.root, Path(LOCK_KEY))
        self.where = store.location
        self.purpose = purpose


class CompactionLease(CompactionGuard):
    """One compactor at a time on an object store: a lease object, ``_state/compact-lease.json``
    (owner, pid, host, expiry), taken, renewed and read back as the writer's lease
    (``lock.LeaseLock``; another object, so a compactor runs beside a running daemon).

    A lease of another owner that has not expired (and whose process, on this host, still
    runs) keeps this one out; a killed compactor's lease expires after ``lease_seconds``
    (at once on its own host). Without conditional writes (pyarrow offers none) reading the
    lease and writing ours is not atomic: the lease guards against the mistake of a second
    compactor (or the daemon's recovery) running on a landing zone being compacted, not
    against two started in the same instant. The holder renews it while it writes
    (``check``) and reads it back just before its commit point (``renew``): a compactor whose
    lease another took (its outputs may have been deleted as leftovers) stops uncommitted."""

    lock: LeaseLock

    def __init__(self, store: Store, lease_seconds: float = 60.0, purpose: str = COMPACTOR) -> None:
        self.where = store.location
        self.lock = LeaseLock(store, lease_seconds, key=LEASE_KEY)
        self.purpose = purpose

    def check(self) -> None:
        try:
            self.lock.check()
        except LandingZoneBusyError as exc:
            raise SinkError(str(exc), hint=_TAKEN_OVER) from None

    def renew(self) -> None:
        try:
            self.lock.renew()
        except LandingZoneBusyError as exc:
            raise SinkError(str(exc), hint=_TAKEN_OVER) from None


_TAKEN_OVER = (
    "another compactor (or a daemon's recovery) took the compaction lease: its lease had "
    "expired (a process stalled longer than sink.object_store.lease_seconds); nothing of this "
    "run was committed, run it again"
)


def compaction_lock(
    store: Store, lease_seconds: float = 60.0, purpose: str = COMPACTOR
) -> CompactionGuard:
    """The compaction lock of ``store``: a ``flock`` on a directory, a lease on an object
    store (``sink.object_store.lease_seconds``); ``purpose`` is what its holder records."""
    if isinstance(store, LocalStore):
        return CompactionLock(store, purpose)
    return CompactionLease(store, lease_seconds, purpose)


# ---------------------------------------------------------------------------- recovery


def _table_keys(store: Store) -> list[str]:
    return [k for k in store.list() if k.count("/") == 2 and not k.startswith(("_", "."))]


def _output_of(key: str) -> str | None:
    """The compaction output a table folder's key is, or stages; None for other files."""
    folder, _, name = key.rpartition("/")
    if OUTPUT_NAME.fullmatch(name):
        return key
    if _STAGED.fullmatch(name):
        return f"{folder}/{name[1 : -len('.tmp')]}"
    return None


def _check_complete(
    store: Store,
    records: Sequence[CompactionRecord],
    intents: dict[int, Intent],
    listed: Sequence[str],
) -> tuple[Live, Intent | None]:
    """Prove that no record is lost before anything is deleted: with records 1..n, an intent
    may only be of a committed compaction (its record names its outputs) or of compaction
    n + 1, and every compaction output in the table folders (``listed``, read before the
    records) is named by a record or by that intent (outputs are written only after their
    intent, and the intent is removed only after the record). Returns what the records
    make live, and the intent of compaction n + 1 (a run that died before its record)."""
    live = Live()
    for record in records:
        live.apply(record, strict=False)
    number = len(records) + 1
    for found, intent in sorted(intents.items()):
        if found > number:
            raise missing_record(store, number, f"the intent {intent_key(found)} is there")
        written = {o.piece.path for o in records[found - 1].outputs} if found < number else set()
        if found < number and not set(intent.outputs) <= written:
            raise IntegrityError(
                f"compaction intent {store.uri(intent_key(found))} names outputs its record "
                f"{record_key(found)} does not",
                hint="two compactors wrote this landing zone at once: restore _compactions/ "
                "from a backup; nothing was deleted",
            )
    pending = intents.get(number)
    named = set(live.outputs)
    if pending is not None:
        for path in pending.outputs:
            if path in named:
                raise record_error(
                    intent_key(number), f"names {path}, an output of a record", "compaction intent"
                )
        named.update(pending.outputs)
    strays = [k for k in listed if (o := _output_of(k)) is not None and o not in named]
    strays = [k for k in strays if store.exists(k)]  # a recovery deletes outputs, then intents
    if strays:
        shown = ", ".join(store.uri(k) for k in strays[:3])
        raise IntegrityError(
            f"{len(strays)} compaction output(s) are named by no compaction record or intent: "
            f"{shown}; compaction record {store.uri(record_key(number))} is missing (an output "
            "is written after its intent, and the intent is removed after the record), or "
            "they were copied in",
            hint=f"restore {record_key(number)} (and any later records) from a backup of "
            "_compactions/; if none is missing, move these files out of the landing zone. "
            "Nothing was deleted",
        )
    return live, pending


def recover(
    store: Store,
    records: Sequence[CompactionRecord] | None = None,
    published: set[str] | None = None,
) -> int:
    """Under the compaction lock: once the records are proven complete (``_check_complete``),
    publish committed outputs still staged, delete the outputs the intent of a compaction
    that never committed names, then the intents and the temps of records never written.
    Returns how many files were deleted; the outputs published go into ``published``.

    A compaction provably never committed when its intent has the next record number, no
    record has it, no output it names was renamed into place (directories: that comes after
    the record) and every file it would replace is still there (retention deletes them only
    after the record): otherwise its record was lost, and deleting its outputs would delete
    the only copy of rows, so nothing is deleted."""
    listed = _table_keys(store)
    keys = compaction_keys(store)
    intents = read_intents(store, keys.intents)
    records = records_numbered(store, keys.records) if records is None else records
    live, pending = _check_complete(store, records, intents, listed)
    number = len(records) + 1
    seen = set(listed)

    def there(key: str) -> bool:  # a listing may lag: what it misses is asked for by name
        return key in seen or store.exists(key)

    for path, replaces in (pending.outputs if pending is not None else {}).items():
        if store.renames and store.exists(path):
            raise missing_record(
                store,
                number,
                f"{store.uri(path)}, an output its intent names, is in place, which an output "
                "is only after its record",
            )
        for old in replaces:
            if not (there(old.path) or there(store.staged(old.path))):
                raise missing_record(
                    store,
                    number,
                    f"{store.uri(old.path)}, which its intent says it replaces, is gone "
                    "(retention deletes such files only after the record)",
                )
    removed = 0
    folders: set[str] = set()
    for path in sorted(live.outputs):  # committed: roll forward
        staged = store.staged(path)
        if staged == path or staged not in seen:  # staged only on a directory: listed
            continue
        if store.exists(path):  # a copy of an output in place: not read by anyone
            store.delete(staged)
            removed += 1
        else:
            store.publish(staged, path)
            if published is not None:
                published.add(path)
        folders.add(path.rpartition("/")[0])
    for path in sorted(pending.outputs if pending is not None else ()):
        staged = store.staged(path)  # an object store's is the final key
        if store.exists(staged):
            store.delete(staged)
            folders.add(path.rpartition("/")[0])
            removed += 1
            log.info(
                "uncommitted compaction output deleted", file=store.uri(staged), compaction=number
            )
    store.sync(folders)
    for found in intents:
        store.delete(intent_key(found))
    for key in keys.temps:
        store.delete(key)
        removed += 1
    if intents or keys.temps:
        store.sync({COMPACTIONS})
    return removed


def recover_if_idle(store: Store, lease_seconds: float = 60.0) -> bool:
    """The daemon's start: ``recover`` unless a compactor runs (it recovers for itself, and
    its outputs in the making must not be taken for leftovers): only with the compaction
    lock (``compaction_lock``) taken. Returns whether it recovered."""
    lock = compaction_lock(store, lease_seconds, START_RECOVERY)
    if not lock.take_or_skip(
        "compaction recovery skipped: a compactor runs", hint="it cleans up for itself"
    ):
        return False
    try:
        recover(store)
    finally:
        lock.release()
    return True


def retain(
    store: Store,
    records: Sequence[CompactionRecord],
    retention: float,
    fault: Any = None,
    keep: Callable[[], None] | None = None,
    fresh: Collection[str] = (),
) -> list[str]:
    """Delete the files superseded by records older than ``retention`` seconds; returns them.
    Live files are never deleted (a path superseded once and committed again is kept).
    ``keep`` is called before each deletion (it renews the compaction lease). ``fresh``:
    outputs published only now (their rename was left undone): readers resolved the files
    they replace until now, so the grace period counts from now for their records (and on a
    directory from each output's rename, ``Store.published_at``).

    A record keeps naming the files it replaced long after they are gone, so what is still
    there is found by listing each folder concerned once, not by asking for every file
    (on an object store a request each, for as many files as the records ever replaced)."""
    now = time.time()
    live = Live()
    for record in records:
        live.apply(record, strict=False)

    def grace_over(record: CompactionRecord) -> bool:
        """The readers that resolved the files a record replaces have had ``retention``:
        counted from the record, and where the outputs are renamed into place (a directory)
        from the rename, which a killed run leaves to a later one."""
        if record.age(now) < retention or any(o.piece.path in fresh for o in record.outputs):
            return False
        for output in record.outputs:
            at = store.published_at(output.piece.path) if store.renames else None
            if at is not None and now - at < retention:
                return False
        return True

    superseded = [
        old.path
        for record in records
        if grace_over(record)
        for output in record.outputs
        for old in output.replaces
        if old.path not in live.pieces
    ]
    holders = _holders(live, superseded)
    held = [holder for holder, _ in holders.values()]
    folders = {path.rpartition("/")[0] for path in (*superseded, *held)}
    present = {key for folder in sorted(folders) for key in store.list(folder)}
    # A file goes only while the output holding its rows now is there: with that output
    # lost, the file is the only copy (readers fall back to it), so nothing is deleted.
    for path in dict.fromkeys(superseded):
        holder, number = holders[path]
        if path in present and holder not in present:
            raise IntegrityError(
                f"compaction output {store.uri(holder)} (record {record_key(number)}) is "
                f"missing: it holds the rows of {store.uri(path)}, which retention would "
                "delete; nothing was deleted",
                hint=f"restore {holder} from a backup (the record has its size and SHA-256); "
                "until then the files it replaced are what readers read",
            )
    deleted: list[str] = []
    for path in dict.fromkeys(superseded):
        if path not in present:
            continue
        if keep is not None:
            keep()
        store.delete(path)
        deleted.append(path)
        if fault is not None and len(deleted) == 1:
            fault.at("compact-retain-mid")
    store.sync({path.rpartition("/")[0] for path in deleted})
    return deleted


def _holders(live: Live, paths: Sequence[str]) -> dict[str, tuple[str, int]]:
    """For each of ``paths`` (files the records ``live`` applied replaced), the output that
    holds its rows now and the number of the record that wrote it: the output that replaced
    it, or the one that replaced that output in turn, and so on."""
    found: dict[str, tuple[str, int]] = {}
    for path in paths:
        at, seen = path, {path}
        number = live.superseded[at]
        while at in live.replaced_by:
            number, at = live.superseded[at], live.replaced_by[at]
            if at in seen:  # a name committed again
                break
            seen.add(at)
        found[path] = (at, number)
    return found


# ---------------------------------------------------------------------------- planning


def read_landing(store: Store) -> tuple[list[Manifest], int]:
    """The committed manifests (checked as the daemon checks them) and the checkpoint's
    batch: files of batches up to it are published. The checkpoint is read first (the
    daemon writes a batch's manifest before the checkpoint naming it), and must not name a
    batch above the newest manifest (``checkpointed``): removed manifests would have their
    batches' files taken for nobody's, and their rows merged away."""
    batch, pin = checkpoint_pin(store)
    manifests = read_chain(store)  # each linked to the one before it (``check_link``)
    check_reached(store, batch, manifests[-1].batch if manifests else None)
    check_pinned(store, pin, batch, manifests)  # ... and its batch's, pinned by it
    return manifests, batch


@dataclass(frozen=True, slots=True)
class Candidate:
    """A live file and what planning needs to know of it."""

    piece: Piece
    bytes: int
    eligible: bool  # old enough, of published batches that are not replays
    schema: pa.Schema | None  # None until read (eligible files only)


@dataclass(frozen=True, slots=True)
class Group:
    table: str
    members: tuple[Candidate, ...]
    run: str | None = None  # the run's token in its output's name (object stores)

    @property
    def output_replaces(self) -> tuple[Piece, ...]:
        return tuple(m.piece for m in self.members)

    @property
    def output(self) -> Piece:
        first, last = self.members[0].piece, self.members[-1].piece
        folder = first.path.rpartition("/")[0]
        return Piece(
            f"{folder}/{output_name(first.first_seq, last.last_seq, self.run)}",
            self.table,
            sum(m.piece.rows for m in self.members),
            first.first_seq,
            last.last_seq,
        )


def plan(
    tables: dict[str, list[Candidate]],
    boundaries: dict[str, list[int]],
    target_bytes: int,
    run: str | None = None,
) -> list[Group]:
    """Groups of consecutive candidates to merge (``tables``: each table's live files in
    ``_seq`` order; ``boundaries``: the ``_seq`` of each lifecycle record naming it). A
    group never spans an ineligible file, a schema or footer change or a lifecycle record,
    and closes once it reaches ``target_bytes``; a file that size or larger stays alone, and
    so does a group of one, and a file with a record inside its ``_seq`` range (a batch's
    file holds rows from before and after a TRUNCATE of its table)."""
    groups: list[Group] = []
    for table, files in sorted(tables.items()):
        marks = sorted(boundaries.get(table, ()))
        runs: list[list[Candidate]] = [[]]
        size = 0
        for item in files:
            current = runs[-1]
            inside = any(item.piece.first_seq < m < item.piece.last_seq for m in marks)
            if not item.eligible or item.bytes >= target_bytes or inside:
                runs.append([])
                size = 0
                continue
            if current:
                last = current[-1]
                split = any(last.piece.last_seq < m < item.piece.first_seq for m in marks)
                schema = last.schema
                if split or schema is None or not schema.equals(item.schema, check_metadata=True):
                    current = []
                    runs.append(current)
                    size = 0
            current.append(item)
            size += item.bytes
            if size >= target_bytes:
                runs.append([])
                size = 0
        groups.extend(Group(table, tuple(found), run) for found in runs if len(found) > 1)
    return groups


# ---------------------------------------------------------------------------- running


@dataclass(frozen=True, slots=True)
class Settings:
    older_than: float = 86400.0  # seconds: only batches committed at least this long ago
    target_bytes: int = DEFAULT_TARGET_BYTES
    retention: float = DEFAULT_RETENTION  # seconds superseded files are kept
    compression: str = "zstd"
    row_group_rows: int = 128_000


@dataclass(frozen=True, slots=True)
class Result:
    record: int | None  # the record committed (None: nothing to merge)
    outputs: int
    merged: int  # files superseded by this run
    deleted: int  # superseded files removed by retention
    files_before: int  # live data files before the run
    files_after: int

    def describe(self) -> str:
        what = (
            "nothing to compact"
            if self.record is None
            else f"compaction {self.record}: {self.merged} files merged into {self.outputs}"
        )
        return (
            f"{what}; live data files {self.files_before} -> {self.files_after}; "
            f"{self.deleted} superseded files deleted"
        )


def _now_iso() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _committed_at(manifest: Manifest) -> float:
    text = str(manifest.data["committed_at"]).replace("Z", "+00:00")
    return dt.datetime.fromisoformat(text).timestamp()


def footer(store: Store, path: str) -> tuple[pa.Schema, int]:
    """A file's schema and the bytes its data takes (compressed column chunks): the size it
    adds to a merged file, without the footer and page overhead a small file repeats."""
    import pyarrow as pa  # noqa: PLC0415 - see the imports
    import pyarrow.parquet as pq  # noqa: PLC0415

    fs, base = store.filesystem()
    try:
        with fs.open_input_file(f"{base}/{path}") as handle:
            source = pq.ParquetFile(handle)
            return source.schema_arrow, _data_bytes(source.metadata)
    except (OSError, pa.ArrowException) as exc:
        raise IntegrityError(
            f"cannot read the footer of committed file {store.uri(path)}: {exc}",
            hint="the file is committed, so it was complete: restore it from a backup",
        ) from exc


def _data_bytes(meta: pq.FileMetaData) -> int:
    return int(
        sum(
            meta.row_group(g).column(c).total_compressed_size
            for g in range(meta.num_row_groups)
            for c in range(meta.num_columns)
        )
    )


def candidates(
    store: Store,
    manifests: Sequence[Manifest],
    live: Live,
    checkpoint_batch: int,
    older_than: float,
    *,
    settled: Mapping[str, int] | None = None,
    target_bytes: int | None = None,
) -> tuple[dict[str, list[Candidate]], dict[str, list[int]]]:
    """Each table's live files in ``_seq`` order, with whether they may merge (every manifest
    entry they hold is of a batch up to the checkpoint, not a replay, old enough), and the
    ``_seq`` of the lifecycle records naming each table (as ``table`` or rename ``to``).

    Planning sizes a file by its footer. ``settled``: the data bytes of outputs as their
    records give them; one at ``target_bytes`` or more stays alone whatever its schema, so
    its footer is not read (outputs at the target size are most live files of a compacted
    zone, and each run would otherwise read all of them again)."""
    now = time.time()
    ok_batches = {
        m.batch
        for m in manifests
        if m.batch <= checkpoint_batch
        and not m.data.get("replay")
        and not m.data.get("start_moved")
        and now - _committed_at(m) >= older_than
    }
    entry_batch = {str(f["path"]): m.batch for m in manifests for f in m.entries}
    boundaries: dict[str, list[int]] = {}
    for manifest in manifests:
        for change in manifest.data.get("schema_changes") or ():
            for name in {change.get("table"), change.get("to")} - {None}:
                boundaries.setdefault(str(name), []).append(int(change["seq"]))
    pieces = sorted(live.pieces.items(), key=lambda kv: kv[1].first_seq)
    eligible = [
        path
        for path, _ in pieces
        if {entry_batch.get(p, -1) for p in live.origins.get(path, [path])} <= ok_batches
    ]
    sizes = settled or {}
    footers: dict[str, tuple[pa.Schema | None, int]] = {
        path: (None, sizes[path])
        for path in eligible
        if path in sizes and target_bytes is not None and sizes[path] >= target_bytes
    }
    unread = [path for path in eligible if path not in footers]
    footers.update(zip(unread, store.each(lambda p: footer(store, p), unread), strict=True))
    tables: dict[str, list[Candidate]] = {}
    for path, piece in pieces:
        schema, size = footers.get(path, (None, 0))
        tables.setdefault(piece.table, []).append(Candidate(piece, size, path in footers, schema))
    return tables, boundaries


def _increasing(seqs: pa.Array) -> bool:
    import pyarrow.compute as pc  # noqa: PLC0415 - see the imports

    return len(seqs) < 2 or bool(pc.all(pc.greater(seqs[1:], seqs[:-1])).as_py())


def _recorded(
    manifests: Sequence[Manifest], records: Sequence[CompactionRecord]
) -> dict[str, tuple[int | None, str | None]]:
    """Each committed file's size and hash as its commit record gives them (None: not
    recorded, in records written before)."""
    out: dict[str, tuple[int | None, str | None]] = {}
    for manifest in manifests:
        for item in manifest.entries:
            size = item.get("bytes")
            out[str(item["path"])] = (
                size if isinstance(size, int) else None,
                item.get(DIGEST_KEY),
            )
    for record in records:
        for output in record.outputs:
            out[output.piece.path] = (output.bytes, output.sha256)
    return out


# An input file up to this size is read whole at once, checked against its commit record and
# parsed from those very bytes; a larger one is hashed as a stream and then opened again. On an
# object store, opening a file for Parquet costs a HEAD and several ranged GETs besides the
# reads that hashed it, and compaction inputs are mostly small files.
WHOLE_READ_BYTES = 16 * 1024 * 1024


@contextlib.contextmanager
def _input(store: Store, path: str, recorded: tuple[int | None, str | None]) -> Iterator[Any]:
    """A file about to be merged, checked against its commit record first (``_check_input``),
    opened for ``pq.ParquetFile``."""
    import pyarrow as pa  # noqa: PLC0415 - see the imports

    size = recorded[0]
    fs, base = store.filesystem()
    if size is not None and size <= WHOLE_READ_BYTES:
        with fs.open_input_stream(f"{base}/{path}") as stream:
            data = _read_up_to(stream, size + 1)
        if len(data) <= size:  # a longer file is never held whole: it fails the check below
            digest = hash_bytes(data) if recorded[1] is not None else None
            _check_input(store, path, recorded, (len(data), digest))
            yield pa.BufferReader(data)
            return
    _check_input(store, path, recorded)
    with fs.open_input_file(f"{base}/{path}") as handle:
        yield handle


def _read_up_to(stream: Any, limit: int) -> bytes:
    """The first ``limit`` bytes of ``stream`` (all of it when it is shorter)."""
    parts: list[bytes] = []
    left = limit
    while left > 0:
        chunk = stream.read(left)
        if not chunk:
            break
        parts.append(bytes(chunk))
        left -= len(chunk)
    return b"".join(parts)


def _check_input(
    store: Store,
    path: str,
    recorded: tuple[int | None, str | None],
    found: tuple[int, str | None] | None = None,
) -> None:
    """A file about to be merged is what its commit record says (size, and hash where
    recorded): an output made of a damaged file would carry the damage under a new, valid
    hash, and retention would then delete the file that shows it. ``found``: the file's size
    and hash (None where no hash is recorded) when its bytes are at hand already."""
    size, digest = recorded
    if size is None and digest is None:
        return
    if found is not None:
        found_size, found_digest = found
    elif digest is not None:
        found_size, found_digest = hash_key(store, path)
    else:
        found_size, found_digest = store.size(path), None
    if (size is not None and found_size != size) or (digest is not None and found_digest != digest):
        raise IntegrityError(
            f"committed file {store.uri(path)} is not what its commit record says (size "
            f"{found_size}, recorded {size}; sha256 {found_digest}, "
            f"recorded {digest}); nothing was compacted",
            hint="restore the file from a backup (`replicator verify --deep` lists every "
            "damaged file)",
        )


def _write_output(
    store: Store,
    group: Group,
    settings: Settings,
    keep: Callable[[], None],
    recorded: dict[str, tuple[int | None, str | None]] | None = None,
) -> Output:
    """Copy the group's files, in order, into the output's staged key; every row once, and
    the bytes hashed on their way out. Each file is checked against its commit record first
    (``recorded``) and its Parquet page checksums as it is read. ``keep`` is called before
    each file (it renews the compaction lease)."""
    import pyarrow as pa  # noqa: PLC0415 - see the imports
    import pyarrow.parquet as pq  # noqa: PLC0415

    target = group.output
    staged = store.staged(target.path)
    schema = group.members[0].schema
    assert schema is not None
    sink = store.open_output(staged)
    stream = HashingStream(sink.stream)
    buffered = stream.arrow_sink()
    writer: pq.ParquetWriter | None = None
    footer: list[pq.FileMetaData] = []  # the output's, once written
    try:
        writer = pq.ParquetWriter(
            buffered, schema, metadata_collector=footer, **writer_options(settings.compression)
        )
        previous = -1
        rows = 0
        for member in group.members:
            keep()
            piece = member.piece
            checked = (recorded or {}).get(piece.path, (None, None))
            with _input(store, piece.path, checked) as handle:
                source = pq.ParquetFile(handle, page_checksum_verification=True)
                if not source.schema_arrow.equals(schema, check_metadata=True):
                    raise IntegrityError(
                        f"{store.uri(piece.path)} changed its schema while being compacted",
                        hint="committed files are never rewritten: restore it from a backup",
                    )
                count = 0
                for batch in source.iter_batches(batch_size=settings.row_group_rows):
                    seqs = batch.column("_seq")
                    if len(seqs) and (
                        seqs[0].as_py() <= previous
                        or seqs[0].as_py() < piece.first_seq
                        or seqs[-1].as_py() > piece.last_seq
                        or not _increasing(seqs)
                    ):
                        raise IntegrityError(
                            f"{store.uri(piece.path)} holds _seq out of order or outside "
                            f"{piece.first_seq}..{piece.last_seq}",
                            hint="the file is not as its manifest says: restore it from a backup",
                        )
                    if len(seqs):
                        previous = seqs[-1].as_py()
                    writer.write_table(
                        pa.Table.from_batches([batch], schema=schema),
                        row_group_size=settings.row_group_rows,
                    )
                    count += batch.num_rows
            if count != piece.rows:
                raise IntegrityError(
                    f"{store.uri(piece.path)} holds {count} rows, its commit record says "
                    f"{piece.rows}",
                    hint="the file is not as its manifest says: restore it from a backup",
                )
            rows += count
        writer.close()
        buffered.close()  # the rest of its buffer through the hash
        written = sink.close()
    except BaseException:
        # closed now, or their finalizers write to the aborted file
        for part in (writer, buffered):
            if part is not None:
                with contextlib.suppress(Exception):
                    part.close()
        sink.abort()
        raise
    if written != stream.size:  # every byte must have gone through the hash
        raise SinkError(
            f"compaction output {store.uri(staged)} holds {written} bytes, {stream.size} were "
            "written and hashed",
            hint="nothing of this run was committed; run it again",
        )
    return Output(
        target, written, group.output_replaces, stream.hexdigest(), _data_bytes(footer[0])
    )


_CHANGED_HINT = (
    "another compactor or a daemon's recovery ran meanwhile, or something else wrote there; "
    "nothing of this run was committed, run it again"
)


def _confirm_outputs(store: Store, outputs: Sequence[Output], lock: CompactionGuard | None) -> None:
    """Before the commit point: every output is there as written (its size and ``sha256``
    read back), and the lock is still ours (renewed after the reading: the record is
    written well within it, and checked again by size). On an object store outputs lie at
    their final keys, where a recovery that took an expired lease deletes them as leftovers:
    a record naming an output that is gone, or that other bytes replaced, would lose rows."""
    for output in outputs:
        if lock is not None:
            lock.check()
        staged = store.staged(output.piece.path)
        try:
            size, digest = hash_key(store, staged)
        except FileNotFoundError:
            size, digest = -1, ""
        if size != output.bytes:
            raise SinkError(
                f"compaction output {store.uri(staged)} is gone or changed before its commit "
                f"({size} bytes, {output.bytes} written)",
                hint=_CHANGED_HINT,
            )
        if digest != output.sha256:
            raise SinkError(
                f"compaction output {store.uri(staged)} is gone or changed before its commit: "
                f"{DIGEST_KEY} {digest}, {output.sha256} written",
                hint=_CHANGED_HINT,
            )
    if lock is not None:
        lock.renew()
    for output in outputs:
        staged = store.staged(output.piece.path)
        try:
            size = store.size(staged)
        except FileNotFoundError:
            size = -1
        if size != output.bytes:
            raise SinkError(
                f"compaction output {store.uri(staged)} is gone or changed before its commit",
                hint=_CHANGED_HINT,
            )


def _landing_id(manifests: Sequence[Manifest]) -> str | None:
    return manifests[-1].landing_id if manifests else None


def compact(
    store: Store, settings: Settings, fault: Any = None, lock: CompactionGuard | None = None
) -> Result:
    """One compaction run (module doc); the caller holds the compaction lock, ``lock`` (kept
    while outputs are written, and confirmed just before the commit point)."""
    keep = lock.check if lock is not None else (lambda: None)
    records = read_records(store)
    published: set[str] = set()
    recover(store, records, published)
    deleted = retain(store, records, settings.retention, fault, keep, published)
    manifests, checkpoint_batch = read_landing(store)
    live = live_files(manifests, records)
    before = len(live.pieces)
    settled = {
        o.piece.path: o.data_bytes for r in records for o in r.outputs if o.data_bytes is not None
    }
    tables, boundaries = candidates(
        store,
        manifests,
        live,
        checkpoint_batch,
        settings.older_than,
        settled=settled,
        target_bytes=settings.target_bytes,
    )
    recorded = _recorded(manifests, records)
    # a token of this run in its outputs' names on an object store, where they are written
    # at their final keys (a directory stages them under a lock no other compactor holds)
    run = None if store.renames else secrets.token_hex(8)
    groups = plan(tables, boundaries, settings.target_bytes, run)
    if not groups:
        return Result(None, 0, 0, len(deleted), before, before)
    number = len(records) + 1
    for group in groups:  # an intent never names a file that is there: recovery deletes them
        path = group.output.path
        if path in live.outputs or store.exists(path) or store.exists(store.staged(path)):
            raise IntegrityError(
                f"compaction output {path} exists already",
                hint="a committed output is never written again: restore _compactions/ "
                "from a backup",
            )
    intent = Intent(number, _now_iso(), {g.output.path: g.output_replaces for g in groups})
    _write_new(store, intent_key(number), intent.to_json())
    if fault is not None:
        fault.at("compact-intent")
    outputs: list[Output] = []
    try:
        for group in groups:
            outputs.append(_write_output(store, group, settings, keep, recorded))
            if fault is not None and len(outputs) == 1:
                fault.at("compact-data-mid")
        store.sync({o.piece.path.rpartition("/")[0] for o in outputs})
    except OSError as exc:
        for output in outputs:
            store.delete(store.staged(output.piece.path))
        raise SinkError(
            f"cannot write compaction outputs in {store.location}: {exc.strerror or exc}",
            hint="check free space and permissions; nothing was committed, the next run "
            "(or the daemon's start) removes what its intent names and starts over",
        ) from exc
    if fault is not None:
        fault.at("compact-data")
    _confirm_outputs(store, outputs, lock)
    record = CompactionRecord(number, _now_iso(), _landing_id(manifests), tuple(outputs))
    _write_new(store, record_key(record.number), record.to_json())  # the commit point
    if fault is not None:
        fault.at("compact-record")
    folders: set[str] = set()
    for output in outputs:
        staged = store.staged(output.piece.path)
        if staged != output.piece.path:
            store.publish(staged, output.piece.path)
            folders.add(output.piece.path.rpartition("/")[0])
    store.sync(folders)
    store.delete(intent_key(number))  # a crash before: recovery sees it committed
    if fault is not None:
        fault.at("compact-publish")
    records.append(record)
    live.apply(record)
    deleted += retain(store, records, settings.retention, fault, keep)
    merged = sum(len(o.replaces) for o in outputs)
    log.info(
        "compaction committed",
        compaction=record.number,
        outputs=len(outputs),
        merged=merged,
        deleted=len(deleted),
    )
    return Result(record.number, len(outputs), merged, len(deleted), before, len(live.pieces))


def run_compaction(
    store: Store, settings: Settings, fault: Any = None, lease_seconds: float = 60.0
) -> Result:
    """``replicator compact``: take the compaction lock (``compaction_lock``), then
    ``compact``."""
    lock = compaction_lock(store, lease_seconds)
    with lock.held():
        return compact(store, settings, fault, lock)
