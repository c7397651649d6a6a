"""One writer per landing zone: an exclusive lock held for as long as a process writes it.

Two daemons writing one ``sink.root`` (another ``server_id``, other batch sizes) hand out the
same ``_seq`` numbers and batch numbers, overwrite each other's manifests and leave files no
manifest names. So every process that writes a landing zone (``replicator run``,
``replicator checkpoint set``) first takes ``<root>/_state/lock`` with ``flock(LOCK_EX |
LOCK_NB)``; a second one finds it taken and stops at once with the holder's pid, host and start
time (written into the file by the holder; the file itself is never deleted, so the lock
cannot be split between two inodes).

The kernel drops the lock when the holder's process ends, however it ends (SIGKILL
included), so a crashed daemon never leaves a stale lock behind. ``flock`` works on local
filesystems; on NFS, Linux maps it to a POSIX byte-range lock held by the server (NFSv4),
which serves as well.

Object stores (S3 and the like) have no such lock: there the writer holds a *lease*
(``LeaseLock``), the object ``_state/lease.json`` naming an owner id, pid, host and an expiry
(``sink.object_store.lease_seconds`` ahead), renewed by the holder every few seconds while it
runs. A process finding an unexpired lease of another owner refuses to start; a lease a killed
holder left expires, so the next start waits at most ``lease_seconds`` (none when the holder
ran on the same host and pid namespace and its process is gone). Every write of the lease is
conditional on the version last read or written (``Store.create``: ``If-None-Match: *``;
``Store.replace``: ``If-Match``; ``conditional_s3``), so of two writers started in the same
instant only one gets it. A store without conditional writes (``Store.conditional`` says why: a
store that ignores the headers, or one pyarrow alone reaches) cannot make "read the lease, then
write ours" atomic; the start says so in a warning, and there the lease guards only against a
second writer configured on a landing zone in use. The holder reads the lease back each time it
renews it and stops when another owner took it.

The record also says what the holder is, for the commands that only read a landing zone:
``replicator run`` adds its ``server_id``, the name it registers with the source as a replica
(``replica_host``: ``replicator check`` tells the daemon's own registration from another
replica's by it) and the address of its HTTP port (``http``: ``replicator status --landing``
asks that daemon); ``release`` adds when it let go (``ended``). ``read_record`` reads it
without touching the lock, and says whether the holder still holds it (not let go, and its
process runs: a killed holder cannot say it ended).

While it runs, the holder checks ``still_ours()``: the lock file at its path must still be
the inode it locked. When the landing zone was deleted or replaced under a running daemon,
that check fails and the daemon stops instead of writing into a directory nobody reads.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..errors import ConfigError, SinkError
from ..storage import LocalStore, Store

LOCK_FILE = Path("_state") / "lock"
LEASE_KEY = "_state/lease.json"


class LandingZoneBusyError(ConfigError):
    """Another process holds the landing zone (two writers configured on one ``sink.root``).
    ``holder`` is what that process recorded about itself ({} when unknown)."""

    def __init__(self, message: str, *, hint: str, holder: dict[str, Any] | None = None) -> None:
        super().__init__(message, hint=hint)
        self.holder = holder or {}


class WriterLock(Protocol):
    """What ``replicator run`` and ``checkpoint set`` hold while they write (``LandingLock``
    on a directory, ``LeaseLock`` on an object store)."""

    def acquire(self, purpose: str, **facts: object) -> WriterLock: ...
    def note(self, **facts: object) -> None: ...
    def check(self) -> None: ...
    def release(self) -> None: ...
    def __enter__(self) -> WriterLock: ...
    def __exit__(self, *exc: object) -> None: ...


def writer_lock(store: Store, lease_seconds: float = 60.0) -> WriterLock:
    """The writer lock for the landing zone in ``store``."""
    if isinstance(store, LocalStore):
        return LandingLock(store.root)
    return LeaseLock(store, lease_seconds)


class LandingLock:
    """The exclusive writer lock of the landing zone at ``root``."""

    def __init__(self, root: Path, path: Path = LOCK_FILE) -> None:
        self.root = root
        self.path = root / path  # the compaction lock is another file (``compaction``)
        self._fd: int | None = None
        self._identity: tuple[int, int] | None = None
        self._record: dict[str, object] = {}

    def acquire(self, purpose: str, **facts: object) -> LandingLock:
        """Take the lock (never waits); ``purpose`` and ``facts`` (JSON values) are recorded
        for the next one to read."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise SinkError(
                f"cannot open the landing zone lock {self.path}: {exc.strerror}",
                hint="check that sink.root is a directory this user may write",
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise LandingZoneBusyError(
                f"the landing zone {self.root} is in use by another replicator process "
                f"({describe_holder(holder)})",
                hint="run one writer per landing zone: stop the other process, or give this "
                "one its own sink.root",
                holder=holder,
            ) from None
        except OSError as exc:
            os.close(fd)
            raise SinkError(
                f"cannot lock the landing zone {self.root}: {exc.strerror}",
                hint="the filesystem of sink.root must support flock (local disks and NFSv4 do)",
            ) from exc
        self._record = {
            **_this_process(),
            "since": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "purpose": purpose,
            **facts,
        }
        stat = os.fstat(fd)
        self._fd, self._identity = fd, (stat.st_dev, stat.st_ino)
        self._write_record()
        return self

    def note(self, **facts: object) -> None:
        """Add ``facts`` to the holder's record (known only after the lock was taken)."""
        self._record.update(facts)
        self._write_record()

    def _write_record(self) -> None:
        if self._fd is None:
            return
        data = json.dumps(self._record).encode() + b"\n"
        with contextlib.suppress(OSError):  # the record only informs; the flock is the lock
            os.pwrite(self._fd, data, 0)
            os.ftruncate(self._fd, len(data))

    def still_ours(self) -> bool:
        """True while the lock file at its path is the one this process locked."""
        if self._identity is None:
            return False
        try:
            stat = os.stat(self.path)
        except OSError:
            return False
        return (stat.st_dev, stat.st_ino) == self._identity

    def check(self) -> None:
        """Raise ``SinkError`` when the landing zone was removed or replaced under us."""
        if not self.still_ours():
            raise SinkError(
                f"the landing zone {self.root} was removed or replaced while this process "
                "was writing it",
                hint="nothing more is written there; restore the landing zone (or start over "
                "with an empty one) and start replicator again",
            )

    def release(self) -> None:
        if self._fd is not None:  # the record says so: the holder's process may go on
            self.note(ended=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))
        fd, self._fd, self._identity = self._fd, None, None
        if fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def __enter__(self) -> LandingLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


@dataclass(frozen=True, slots=True)
class LockRecord:
    """What the last holder of a landing zone's lock wrote about itself (``read_record``)."""

    pid: int
    host: str
    since: str
    purpose: str
    facts: dict[str, Any]  # everything else it recorded (server_id, replica_host, http)
    ended: str | None  # when it let go of the lock (None: it holds it, or was killed)
    # it still holds the lock: not let go, and its process runs; None: on another host, and
    # not let go (its process cannot be seen from here)
    running: bool | None

    def describe(self) -> str:
        until = f" until {self.ended}" if self.ended else ""
        return f"pid {self.pid} on {self.host}, {self.purpose} since {self.since}{until}"


def read_record(root: Path | Store) -> LockRecord | None:
    """The record of the landing zone's last lock holder (None: none, or unreadable). Reads
    only: the lock is never taken, so a daemon starting meanwhile is not disturbed."""
    store = root if isinstance(root, Store) else LocalStore(root)
    key = LOCK_FILE.as_posix() if store.renames else LEASE_KEY
    try:
        record = json.loads(store.read(key) or b"{}")
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("pid"), int):
        return None
    # (what it says of a process only informs: an old record's host name is taken as proof)
    beside_us = _beside_us(record, unrecorded=True)
    pid, host = int(record.pop("pid")), str(record.pop("host", ""))
    record.pop(PID_NAMESPACE, None)
    ended = record.pop("ended", None)
    expires = record.pop("expires", None)
    record.pop("owner", None)
    running: bool | None = None
    if ended is not None:
        running = False
    elif beside_us:
        running = _process_exists(pid)
    elif isinstance(expires, int | float) and expires < time.time():
        running = False  # a lease not renewed: its holder is gone
    return LockRecord(
        pid=pid,
        host=host,
        since=str(record.pop("since", "")),
        purpose=str(record.pop("purpose", "")),
        facts=record,
        ended=None if ended is None else str(ended),
        running=running,
    )


# where a holder's pid means something: the pid namespace (Linux), beside the host name.
# Containers on one host may share a host name (host networking, a fixed `hostname:`) and
# still not see each other's processes: a pid there is no proof of anything.
PID_NAMESPACE = "pid_namespace"


def _pid_namespace() -> str | None:
    try:
        return os.readlink("/proc/self/ns/pid")  # "pid:[4026531836]"
    except OSError:
        return None


def _this_process() -> dict[str, Any]:
    """What a lock or lease record says of its holder: pid, host and pid namespace."""
    return {"pid": os.getpid(), "host": socket.gethostname(), PID_NAMESPACE: _pid_namespace()}


def _beside_us(record: dict[str, Any], *, unrecorded: bool) -> bool:
    """The holder of ``record`` ran where this process sees its pid: the same host name and
    pid namespace (both without one: a host without pid namespaces). ``unrecorded``: what a
    record written before namespaces were recorded counts as, on the same host name."""
    if record.get("host") != socket.gethostname():
        return False
    if PID_NAMESPACE not in record:
        return unrecorded
    return bool(record[PID_NAMESPACE] == _pid_namespace())


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: it exists
    return True


def _read_holder(fd: int) -> dict[str, Any]:
    """The record a lock file's holder wrote about itself ({} when none could be read)."""
    try:
        record = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) and "pid" in record else {}


def describe_holder(record: dict[str, Any]) -> str:
    """``pid 12 on host-a, replicator compact since 2026-...``, or ``holder unknown``."""
    if "pid" not in record:
        return "holder unknown"
    return (
        f"pid {record.get('pid')} on {record.get('host')}, {record.get('purpose', 'writing')} "
        f"since {record.get('since')}"
    )


class LeaseLock:
    """The writer's lease on a landing zone in an object store (module docstring)."""

    def __init__(self, store: Store, lease_seconds: float = 60.0, key: str = LEASE_KEY) -> None:
        self.store = store
        self.lease_seconds = lease_seconds
        self.key = key  # the writer's lease; compaction holds its own (``compaction``)
        self.where = store.uri(key)
        self.owner = uuid.uuid4().hex
        self._record: dict[str, object] = {}
        self._held = False
        self._renewed = 0.0
        # the version of the lease object we read or wrote last: every write of ours is
        # conditional on it (``Store.create``/``replace``), so of two writers that read the
        # same lease only one can write theirs
        self._tag: str | None = None
        self._exists = False
        # a renewal runs in a worker thread while the loop may note facts or release: each
        # read-then-write of the lease (and its tag) is done under this lock
        self._mutex = threading.RLock()

    def _read(self) -> dict[str, Any] | None:
        try:
            raw, self._tag = self.store.read_tagged(self.key)
        except FileNotFoundError:
            self._exists, self._tag = False, None
            return None
        except OSError as exc:
            raise SinkError(
                f"cannot read the landing zone lease {self.where}: {exc.strerror or exc}",
                hint="check sink.root, sink.object_store and the credentials",
            ) from exc
        self._exists = True
        try:
            record = json.loads(raw)
        except ValueError:
            return None  # torn by hand: nobody's lease
        return record if isinstance(record, dict) else None

    def _write(self) -> None:
        now = time.time()
        self._record["expires"] = now + self.lease_seconds
        data = json.dumps(self._record).encode() + b"\n"
        try:
            if self._exists:
                self._tag = self.store.replace(self.key, data, self._tag)
            else:
                self._tag = self.store.create(self.key, data)
                self._exists = True
        except FileExistsError as exc:
            self._held = False
            raise LandingZoneBusyError(
                f"the landing zone lease {self.where} was written by another process between "
                "this one's reading and writing it",
                hint="run one writer per landing zone (a second one started at the same "
                "instant, or this one stalled past its lease); this process stops writing",
            ) from exc
        except OSError as exc:
            raise SinkError(
                f"cannot write the landing zone lease {self.where}: {exc.strerror or exc}",
                hint="check that the credentials may write sink.root",
            ) from exc
        self._renewed = now

    def acquire(self, purpose: str, **facts: object) -> LeaseLock:
        """Take the lease unless another owner holds an unexpired one (never waits)."""
        try:
            self.store.ensure()  # a missing bucket is named as such (ConfigError)
            missing = self.store.conditional()
        except OSError as exc:
            raise SinkError(
                f"cannot reach the landing zone {self.store.location}: {exc.strerror or exc}",
                hint="check sink.root, sink.object_store and the credentials",
            ) from exc
        if missing is not None:
            # structlog (and asyncio under it) only here: ``status`` reads the lock without
            # logging, and must not pay for them (tests/unit/test_startup.py)
            import structlog  # noqa: PLC0415

            structlog.get_logger("replicator").warning(
                "no conditional writes: two writers started in the same instant could both "
                "take the lease",
                lease=self.where,
                why=missing,
                hint="run one writer per landing zone (a Deployment with replicas: 1 and the "
                "Recreate strategy)",
            )
        found = self._read()
        if found is not None and found.get("ended") is None and found.get("owner") != self.owner:
            expires = found.get("expires")
            pid = found.get("pid")
            # a holder on this host whose process is gone (killed) left its lease behind
            # (a lease from before namespaces were recorded: its expiry decides)
            gone = (
                _beside_us(found, unrecorded=False)
                and isinstance(pid, int)
                and not _process_exists(pid)
            )
            if not gone and isinstance(expires, int | float) and expires > time.time():
                raise LandingZoneBusyError(
                    f"the landing zone {self.store.location} is in use by another replicator "
                    f"process ({describe_holder(found)}; its lease runs "
                    f"{expires - time.time():.0f} s more)",
                    hint="run one writer per landing zone: stop the other process, or give this "
                    "one its own sink.root; a lease a killed process left expires after "
                    "sink.object_store.lease_seconds",
                    holder=found,
                )
        self._record = {
            "owner": self.owner,
            **_this_process(),
            "since": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "purpose": purpose,
            **facts,
        }
        self._write()
        self._held = True
        self._confirm()
        return self

    def _confirm(self) -> None:
        found = self._read()
        if found is None or found.get("owner") != self.owner:
            self._held = False
            holder = "nobody" if found is None else f"pid {found.get('pid')} on {found.get('host')}"
            raise LandingZoneBusyError(
                f"the landing zone lease {self.where} was taken over ({holder} holds it now)",
                hint="run one writer per landing zone; this process stops writing",
            )

    def note(self, **facts: object) -> None:
        with self._mutex:
            self._record.update(facts)
            if self._held:
                self._write()

    def check(self) -> None:
        """Renew the lease when a third of it has passed, after reading it back: a lease
        another owner took (ours expired, or it was removed) stops this writer."""
        if not self._held:
            raise SinkError(f"the landing zone lease {self.where} is not held")
        if time.time() - self._renewed < self.lease_seconds / 3:
            return
        self.renew()

    def renew(self) -> None:
        """Read the lease back (``LandingZoneBusyError`` when another owner took it), then
        extend it by ``lease_seconds`` from now, whenever it was last renewed."""
        with self._mutex:
            if not self._held:
                raise SinkError(f"the landing zone lease {self.where} is not held")
            self._confirm()
            self._write()

    def release(self) -> None:
        with self._mutex:
            if not self._held:
                return
            self._held = False
            self._record["ended"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
            with contextlib.suppress(SinkError, LandingZoneBusyError):  # it expires anyway
                self._write()

    def __enter__(self) -> LeaseLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
