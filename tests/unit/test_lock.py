"""The landing zone's writer lock: one writer at a time, dropped with the process, and the
check that the landing zone under a running writer is still the one it locked."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from replicator.errors import SinkError
from replicator.sink.lock import LandingLock, LandingZoneBusyError


def test_a_second_writer_is_refused_with_the_holder_named(tmp_path: Path) -> None:
    first = LandingLock(tmp_path).acquire("replicator run")
    with pytest.raises(LandingZoneBusyError) as raised:
        LandingLock(tmp_path).acquire("checkpoint set")
    assert raised.value.exit_code == 2
    assert f"pid {os.getpid()}" in str(raised.value)
    assert "replicator run" in str(raised.value)
    first.release()
    LandingLock(tmp_path).acquire("checkpoint set").release()


def test_the_lock_goes_with_a_killed_process(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; "
            "from replicator.sink.lock import LandingLock; "
            f"LandingLock(Path({str(tmp_path)!r})).acquire('test'); print('held', flush=True); "
            "time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == b"held\n"
        with pytest.raises(LandingZoneBusyError, match=f"pid {holder.pid}"):
            LandingLock(tmp_path).acquire("run")
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        deadline = time.monotonic() + 5
        while True:
            try:
                LandingLock(tmp_path).acquire("run").release()
                break
            except LandingZoneBusyError:
                assert time.monotonic() < deadline
                time.sleep(0.05)
    finally:
        holder.kill()
        holder.wait(10)


def test_a_removed_or_replaced_landing_zone_is_noticed(tmp_path: Path) -> None:
    root = tmp_path / "landing"
    lock = LandingLock(root).acquire("run")
    assert lock.still_ours()
    lock.check()
    shutil.rmtree(root)
    assert not lock.still_ours()
    with pytest.raises(SinkError, match="removed or replaced"):
        lock.check()
    root.mkdir()  # a new, empty landing zone at the same path is not ours either
    LandingLock(root).acquire("other").release()
    assert not lock.still_ours()
    lock.release()
