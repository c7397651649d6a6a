"""The checkpoint: where the next run resumes, written only after a batch is durable.

``<root>/_state/checkpoint.json`` holds the last committed batch number, the next ``_seq`` to
hand out, and the stream position after the last committed transaction (binlog file and
position, and the GTID state: MariaDB ``D-S-N,...`` or a MySQL GTID set). It is replaced
atomically (write a temp file, fsync, rename, fsync the directory), so a crash leaves either
the old or the new checkpoint, never a torn one.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from pathlib import Path

from .binlog.gtid import MariadbGtidPosition, MysqlGtidSet
from .binlog.position import StreamPosition, is_past
from .errors import ConfigError, IntegrityError, ReplicatorError, SinkError
from .landed.contract import CHECKPOINT, is_digest
from .snapshot_progress import SnapshotState
from .storage import LocalStore, Store

FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class Checkpoint:
    batch: int  # last committed batch number (0: none yet)
    next_seq: int  # the `_seq` the next row change gets
    position: StreamPosition | None  # after the last committed transaction; None: not yet
    committed_at: str = ""
    # XA transactions prepared before ``position`` and not yet decided, by their file name
    # under ``_state/xa/``, where their rows wait for the XA COMMIT (sink.landing)
    xa_pending: tuple[str, ...] = ()
    # set by `replicator checkpoint set`: ``position`` is not where the last batch ended, and
    # the next batch's manifest says so (``start_moved``), which the manifest chain check needs
    moved: bool = False
    # set by `replicator checkpoint set` too: where the stream was before the move. Batches
    # that end before it may repeat transactions landed already, and say so (``replay``)
    replay_until: StreamPosition | None = None
    # the snapshot under way (tables still to read, the last key landed; snapshot_progress)
    snapshot: SnapshotState = field(default_factory=SnapshotState)
    # the sha256 of the manifest of ``batch`` as committed: with the manifests' chain of
    # links (each pins the one before it) it makes an edit of any of them show
    manifest_sha256: str | None = None

    def to_json(self) -> dict[str, object]:
        pos = self.position
        return {
            "format": FORMAT_VERSION,
            "batch": self.batch,
            "next_seq": self.next_seq,
            "committed_at": self.committed_at,
            "position": None if pos is None else position_to_json(pos),
            "xa_pending": list(self.xa_pending),
            "moved": self.moved,
            "replay_until": None
            if self.replay_until is None
            else position_to_json(self.replay_until),
            "snapshot": self.snapshot.to_json(),
            "manifest_sha256": self.manifest_sha256,
        }


def replay_after(replay_until: StreamPosition | None, end: StreamPosition) -> StreamPosition | None:
    """``replay_until`` as it stands after a batch ending at ``end``: the replay is over once
    a batch ends at or past it."""
    return None if replay_until is None or is_past(end, replay_until) else replay_until


def position_to_json(pos: StreamPosition) -> dict[str, object]:
    out: dict[str, object] = {"file": pos.file, "position": pos.position}
    if pos.mariadb_gtid is not None:
        out["mariadb_gtid"] = str(pos.mariadb_gtid)
    if pos.mysql_gtid is not None:
        out["mysql_gtid"] = str(pos.mysql_gtid)
    return out


def position_from_json(data: object, where: str) -> StreamPosition:
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: position is not an object")
    mariadb = data.get("mariadb_gtid")
    mysql = data.get("mysql_gtid")
    return StreamPosition(
        file=str(data.get("file", "")),
        position=int(data.get("position", 4)),
        mariadb_gtid=None if mariadb is None else MariadbGtidPosition.parse(str(mariadb)),
        mysql_gtid=None if mysql is None else MysqlGtidSet.parse(str(mysql)),
    )


CHECKPOINT_KEY = CHECKPOINT  # (the readers read it too: ``landed.checkpointed``)


class CheckpointStore:
    """The checkpoint of the landing zone at ``root`` (a directory, or a ``storage.Store``:
    on an object store the checkpoint is one PUT, which replaces it whole)."""

    def __init__(self, root: Path | Store) -> None:
        self.store = root if isinstance(root, Store) else LocalStore(root)
        self.path = self.store.uri(CHECKPOINT_KEY)  # for messages

    def load(self) -> Checkpoint:
        try:
            raw = self.store.read(CHECKPOINT_KEY)
        except FileNotFoundError:
            return Checkpoint(batch=0, next_seq=1, position=None)
        except OSError as exc:
            raise SinkError(f"cannot read checkpoint {self.path}: {exc.strerror or exc}") from exc
        try:
            data = json.loads(raw)
            if not isinstance(data, dict):
                raise TypeError("not a JSON object")
            batch, next_seq = data["batch"], data["next_seq"]
            if not (_is_int(batch) and _is_int(next_seq) and batch >= 0 and next_seq >= 1):
                raise ValueError(f"batch {batch!r} / next_seq {next_seq!r} out of range")
            position = data.get("position")
            pending = data.get("xa_pending", [])
            if not isinstance(pending, list):
                raise TypeError("xa_pending is not a list")
            pin = data.get("manifest_sha256")
            if pin is not None and not is_digest(pin):
                raise ValueError(f"manifest_sha256 {pin!r} is not a sha256")
            return Checkpoint(
                batch=batch,
                next_seq=next_seq,
                position=None if position is None else position_from_json(position, str(self.path)),
                committed_at=str(data.get("committed_at", "")),
                xa_pending=tuple(str(key) for key in pending),
                moved=data.get("moved", False) is True,
                replay_until=None
                if data.get("replay_until") is None
                else position_from_json(data["replay_until"], str(self.path)),
                snapshot=SnapshotState.from_json(data.get("snapshot"), str(self.path)),
                manifest_sha256=pin,
            )
        except (ValueError, KeyError, TypeError, ReplicatorError) as exc:
            raise IntegrityError(
                f"checkpoint {self.path} is unreadable: {exc}",
                hint="remove it to have it rebuilt from the manifests under _manifests/ (the "
                "stream then resumes after the last committed batch), or restore it from a "
                "backup; nothing was changed",
            ) from exc

    def save(self, checkpoint: Checkpoint) -> None:
        data = json.dumps(checkpoint.to_json(), indent=2, sort_keys=True).encode() + b"\n"
        try:
            self.store.write(CHECKPOINT_KEY, data)
        except OSError as exc:
            raise SinkError(
                f"cannot write {self.path}: {exc.strerror or exc}",
                hint="check free space and permissions of the landing zone; nothing was lost",
            ) from exc


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
