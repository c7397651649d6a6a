"""What both outputs of ``replicator materialize`` share: one writer per output directory,
and each table's output where its name puts it."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path

from ..errors import ConfigError, IntegrityError, SinkError
from .contract import table_rel

__all__ = ["LOCK_FILE", "check_placed", "lock"]

LOCK_FILE = ".replicator.lock"


@contextlib.contextmanager
def lock(out: Path, *, wait: bool = False) -> Iterator[None]:
    """Hold the output directory's write lock (one writer at a time). ``wait``: wait for
    another writer to let go instead of stopping (a streaming query's micro-batch)."""
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
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            raise SinkError(
                f"another materialize or stream is writing {out}",
                hint="wait for it to finish, or give this one another --out",
            ) from None
        yield
    finally:
        handle.close()


def check_placed(table: str, rel: str, *, remove: str, moves_whole: bool = False) -> None:
    """Stop when the output of ``table`` found at ``rel`` (``<db>/<table>`` under the output)
    is not where its name puts it now (``contract.table_rel``): an earlier version of
    materialize wrote it before directory names were escaped as they are now. Left there, it
    would stay as it was, beside the table built anew under its new name. ``remove``: how to
    take it away, for the hint; ``moves_whole``: the hint offers to move it instead."""
    where = table_rel(table).as_posix()
    if rel != where:
        move = f"move {rel} to {where} (it moves whole), or " if moves_whole else ""
        raise IntegrityError(
            f"the output of {table} is at {rel}, but its directory is {where} now (see "
            "docs/landing-zone.md, Directory names); left there it would no longer be "
            "brought up to date",
            hint=f"{move}{remove}: the next run builds it anew from the landing zone",
        )
