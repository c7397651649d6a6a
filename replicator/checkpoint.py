"""The checkpoint: where the next run resumes, written only after a batch is durable.

``<root>/_state/checkpoint.json`` holds the last committed batch number, the next ``_seq`` to
hand out, and the stream position after the last committed transaction (binlog file and
position, and the GTID state: MariaDB ``D-S-N,...`` or a MySQL GTID set). It is replaced
atomically (write a temp file, fsync, rename, fsync the directory), so a crash leaves either
the old or the new checkpoint, never a torn one.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
from dataclasses import dataclass
from pathlib import Path

from .binlog.gtid import MariadbGtidPosition, MysqlGtidSet
from .errors import ConfigError, SinkError
from .source.protocol import StreamPosition

FORMAT_VERSION = 1


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (renames, new files) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically and durably."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise SinkError(
            f"cannot write {path}: {exc.strerror}",
            hint="check free space and permissions of the landing zone; nothing was lost",
        ) from exc


@dataclass(frozen=True, slots=True)
class Checkpoint:
    batch: int  # last committed batch number (0: none yet)
    next_seq: int  # the `_seq` the next row change gets
    position: StreamPosition | None  # after the last committed transaction; None: not yet
    committed_at: str = ""
    # XA transactions prepared before ``position`` and not yet decided, by their file name
    # under ``_state/xa/``, where their rows wait for the XA COMMIT (sink.landing)
    xa_pending: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        pos = self.position
        return {
            "format": FORMAT_VERSION,
            "batch": self.batch,
            "next_seq": self.next_seq,
            "committed_at": self.committed_at,
            "position": None if pos is None else position_to_json(pos),
            "xa_pending": list(self.xa_pending),
        }


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


class CheckpointStore:
    def __init__(self, root: Path) -> None:
        self.path = root / "_state" / "checkpoint.json"

    def load(self) -> Checkpoint:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return Checkpoint(batch=0, next_seq=1, position=None)
        except OSError as exc:
            raise SinkError(f"cannot read checkpoint {self.path}: {exc.strerror}") from exc
        try:
            data = json.loads(raw)
            position = data.get("position")
            return Checkpoint(
                batch=int(data["batch"]),
                next_seq=int(data["next_seq"]),
                position=None if position is None else position_from_json(position, str(self.path)),
                committed_at=str(data.get("committed_at", "")),
                xa_pending=tuple(str(key) for key in data.get("xa_pending", ())),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(
                f"checkpoint {self.path} is unreadable: {exc}",
                hint="restore it from the latest manifest under _manifests/ or remove it "
                "to start from the configured start position",
            ) from exc

    def save(self, checkpoint: Checkpoint) -> None:
        data = json.dumps(checkpoint.to_json(), indent=2, sort_keys=True).encode() + b"\n"
        write_atomic(self.path, data)


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
