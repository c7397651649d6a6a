"""Durable writes of small files: the daemon's checkpoint, the Spark side's state and links.

Write under a hidden temp name, fsync, ``rename(2)`` over the target, fsync the directory.
It imports nothing of ours but ``errors``, so both sides use it (``spark/`` imports nothing of
the daemon: ``landed.contract`` says why).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from .errors import SinkError

__all__ = ["fsync_dir", "write_atomic"]


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (renames, new files, removals) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(
    path: Path,
    data: bytes,
    *,
    hint: str = "check free space and permissions of the output directory",
) -> None:
    """Replace ``path`` with ``data`` atomically and durably (``SinkError`` with ``hint``)."""
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
            hint=hint,
        ) from exc
