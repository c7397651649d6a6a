"""What both outputs of ``replicator materialize`` share: one writer per output directory,
and each table's output where its name puts it."""

from __future__ import annotations

import contextlib
import errno
import fcntl
from collections.abc import Iterator, Sequence
from pathlib import Path

from ..errors import ConfigError, IntegrityError, ReplicatorError, SinkError
from .contract import table_rel
from .options import TableResult

__all__ = ["LOCK_FILE", "check_placed", "failed", "lock", "output_error"]

LOCK_FILE = ".replicator.lock"


@contextlib.contextmanager
def lock(out: Path, *, wait: bool = False) -> Iterator[None]:
    """Hold the output directory's write lock (one writer at a time). ``wait``: wait for
    another writer to let go instead of stopping (a streaming query's micro-batch)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        handle = open(out / LOCK_FILE, "a+b")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise output_error(out, exc) from exc
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


# what another --out fixes: the output (or a folder above it) is not a directory this user
# may write, or cannot be made. A full disk (ENOSPC, EDQUOT), an I/O error (EIO) or a
# process out of file handles is no bad argument: the same --out works once it is fixed
_BAD_OUT = frozenset(
    {
        errno.EACCES,  # not writable by this user
        errno.EPERM,
        errno.EROFS,  # on a read-only filesystem
        errno.ENOTDIR,  # a file where a folder of the path should be
        errno.EEXIST,  # a file where the output directory should be (mkdir)
        errno.EISDIR,  # a directory where the lock file should be
        errno.ENOENT,  # a folder of the path that cannot be made (a dangling link)
        errno.ELOOP,
        errno.ENAMETOOLONG,
    }
)


def output_error(out: Path | str, exc: OSError) -> ConfigError | SinkError:
    """The error for an output directory that cannot be made or written (``exc``), naming
    it: a bad argument (ConfigError, exit 2) when another --out fixes it (``_BAD_OUT``),
    else a failed write (SinkError, exit 1: a full disk is not the argument's fault)."""
    path = exc.filename
    shown = out if path is None or str(path) == str(out) else f"{out} ({path})"
    message = f"cannot use output directory {shown}: {exc.strerror or exc}"
    if exc.errno in _BAD_OUT:
        return ConfigError(message, hint="pass --out a writable directory")
    return SinkError(
        message,
        hint="free space (or inodes) on the output's filesystem, or repair it, then run again; "
        "nothing was changed",
    )


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


def failed(
    results: Sequence[TableResult], failures: Sequence[tuple[str, BaseException]]
) -> BaseException:
    """The first table's failure (its own type and exit code), with a note naming the table
    and its cause, the other tables that failed and those brought up to date: each table's
    output is its own (a failed one keeps its last complete state), so the run went on with
    the others (docs/spark.md, Exit codes; both outputs). A table whose changes cannot be
    applied exactly (IntegrityError, exit 4) comes first whatever failed before it: a monitor
    that watches for exit 4 must not miss it behind a full disk. The note is the run's last
    line: it says why too, when the message is far above it."""
    failures = sorted(failures, key=lambda failure: not isinstance(failure[1], IntegrityError))
    name, first = failures[0]
    note = f"materialize failed for table {name}: {_first_line(name, first)}"
    if len(failures) > 1:
        others = "; ".join(f"{t}: {_first_line(t, e)}" for t, e in failures[1:])
        note += f"; and for {len(failures) - 1} more: {others}"
    note += f"; {len(results)} other tables are up to date"
    first.add_note(note)
    return first


def _first_line(table: str, exc: BaseException) -> str:
    """The first line of a table's failure, without the hint (the message gives it) or the
    table's name (the note gives it)."""
    text = (Exception.__str__(exc) if isinstance(exc, ReplicatorError) else str(exc)).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return line.removeprefix(f"table {table}: ")
