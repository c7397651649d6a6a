"""One writer per output directory of ``replicator materialize`` (either format)."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path

from ..errors import ConfigError, SinkError

__all__ = ["LOCK_FILE", "lock"]

LOCK_FILE = ".replicator.lock"


@contextlib.contextmanager
def lock(out: Path) -> Iterator[None]:
    """Hold the output directory's write lock (one writer at a time)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        handle = open(out / LOCK_FILE, "a+b")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise ConfigError(
            f"cannot use output directory {out}: {exc.strerror}",
            hint="pass --out a writable directory",
        ) from exc
    try:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SinkError(
                f"another materialize or stream is writing {out}",
                hint="wait for it to finish, or give this one another --out",
            ) from None
        yield
    finally:
        handle.close()
