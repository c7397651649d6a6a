"""Durable writes of the output directory's small files (state JSON, tombstones, links).

The same two steps as the daemon's checkpoint (``replicator.checkpoint``), kept here so that
``spark/`` imports nothing of the daemon (``contract`` says why): write under a hidden temp
name, fsync, ``rename(2)`` over the target, fsync the directory.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from ..errors import SinkError

__all__ = ["fsync_dir", "write_atomic"]


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (renames, new files, removals) durable."""
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
            hint="check free space and permissions of the output directory",
        ) from exc
