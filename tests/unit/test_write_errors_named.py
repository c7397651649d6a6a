"""A write that fails says where: the file (or, when the OS names none, the folder or the
landing zone) and the OS's cause, and a full disk is no bad argument (exit 1, not 2).

The tests of a full filesystem mount a small tmpfs: they need root (``mount``) and skip
without it, and are marked ``tools`` (a program outside Python); the others need nothing.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from replicator.binlog.gtid import MariadbGtidPosition
from replicator.binlog.position import StreamPosition
from replicator.cli import main
from replicator.config import SinkConfig
from replicator.errors import ConfigError, IntegrityError, SinkError
from replicator.landed.outputs import failed, lock
from replicator.schema.history import Point, SchemaHistory
from replicator.schema.model import Catalog
from replicator.sink.landing import FaultInjector, LandingZone


def _end(number: int) -> StreamPosition:
    return StreamPosition(
        "mysql-bin.000001", 1000 + number, MariadbGtidPosition.parse(f"0-1-{number}")
    )


def _commit_history(zone: LandingZone) -> SinkError:
    """The error of committing the next batch with a schema history (written with it)."""
    checkpoint = zone.recover()
    history = SchemaHistory(Catalog(), Point("mysql-bin.000001", 4))
    with pytest.raises(SinkError) as failed:
        zone.begin(checkpoint).commit(_end(1), checkpoint.next_seq, history=history)
    return failed.value


def test_a_failed_history_write_names_the_path_the_os_names(tmp_path: Path) -> None:
    zone = LandingZone(SinkConfig(root=str(tmp_path)))
    (tmp_path / "_schema").write_text("a file where the history's folder goes")
    error = _commit_history(zone)
    assert str(error).startswith(f"cannot write batch 1 ({tmp_path / '_schema'}): File exists")


def test_a_failed_write_that_names_no_file_names_the_landing_zone(tmp_path: Path) -> None:
    # a full disk fails the write or the fsync, which name no file (the injected fault too)
    zone = LandingZone(SinkConfig(root=str(tmp_path)))
    zone.fault = FaultInjector(step="history-mid", times=1, fail=True)
    error = _commit_history(zone)
    assert str(error).startswith(f"cannot write batch 1 ({tmp_path}): No space left on device")


def test_an_output_that_is_a_file_is_a_bad_argument(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.write_text("not a directory")
    with pytest.raises(ConfigError) as failed, lock(out):
        pass
    assert failed.value.exit_code == 2
    assert str(failed.value) == (
        f"cannot use output directory {out}: File exists (pass --out a writable directory)"
    )


# -- a full filesystem (root only) ---------------------------------------------------------


@contextlib.contextmanager
def _tmpfs(where: Path, size: str, inodes: int = 1000) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounts a tmpfs to fill it up: needs root")
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},nr_inodes={inodes}", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _fill(zone: Path) -> None:
    """Fill the filesystem's blocks (its inodes stay free)."""
    with open(zone / "filler", "wb", buffering=0) as handle, pytest.raises(OSError) as full:
        while True:
            handle.write(b"\0" * 65536)
    assert full.value.errno == errno.ENOSPC


@pytest.mark.tools
def test_an_output_on_a_full_filesystem_is_not_a_bad_argument(tmp_path: Path) -> None:
    with _tmpfs(tmp_path / "disk", "1m", inodes=2) as disk:  # the root folder, one file
        (disk / "filler").write_bytes(b"")  # the last inode
        out = disk / "out"
        with pytest.raises(SinkError) as failed, lock(out):
            pass
    assert failed.value.exit_code == 1
    assert str(failed.value).startswith(
        f"cannot use output directory {out}: No space left on device ("
    )


@pytest.mark.tools
def test_a_snapshot_request_on_a_full_disk_names_where(tmp_path: Path) -> None:
    with _tmpfs(tmp_path / "disk", "4m") as disk:
        root = disk / "landing"
        zone = LandingZone(SinkConfig(root=str(root)))
        checkpoint = zone.recover()
        zone.begin(checkpoint).commit(_end(1), checkpoint.next_seq)
        _fill(disk)
        result = CliRunner().invoke(
            main, ["snapshot", "--landing", str(root), "--tables", "shop.t"]
        )
    assert result.exit_code == 1, result.output
    requests = root / "_state" / "snapshot-requests"
    assert result.stderr.startswith(
        f"error: cannot write the snapshot request ({requests}): No space left on device ("
    ), result.stderr
    assert result.stdout == ""


def test_the_last_line_of_a_run_with_failed_tables_says_why() -> None:
    """``failed`` (both outputs of materialize): the note, printed last, names each failed
    table and its cause (the message's first line, without its hint or the table's name)."""
    first = SinkError("table a.t: cannot bring the Delta table /o/a/t up to date: No space left")
    other = OSError(errno.EIO, "Input/output error")
    error = failed([], [("a.t", first), ("b.u", other)])
    assert error is first
    assert first.__notes__ == [
        "materialize failed for table a.t: cannot bring the Delta table /o/a/t up to date: "
        "No space left; and for 1 more: b.u: [Errno 5] Input/output error; 0 other tables are "
        "up to date"
    ]


def test_a_table_that_cannot_be_applied_exactly_sets_the_exit_code() -> None:
    """A full disk in one table, then changes another cannot apply exactly: the run ends with
    the integrity failure (exit 4), not with the first one in line (exit 1)."""
    full = SinkError("table a.t: cannot bring the Delta table /o/a/t up to date: No space left")
    wrong = IntegrityError("table b.u: a key column is NULL in batch 7")
    error = failed([], [("a.t", full), ("b.u", wrong)])
    assert error is wrong
    assert wrong.__notes__[0].startswith(
        "materialize failed for table b.u: a key column is NULL in batch 7; and for 1 more: "
        "a.t: cannot bring the Delta table"
    )
