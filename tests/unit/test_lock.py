"""The landing zone's writer lock: one writer at a time, dropped with the process, and the
check that the landing zone under a running writer is still the one it locked."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from replicator.errors import SinkError
from replicator.sink import lock
from replicator.sink.lock import LandingLock, LandingZoneBusyError, read_record


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


def test_the_record_says_what_the_holder_is_and_whether_it_runs(tmp_path: Path) -> None:
    assert read_record(tmp_path) is None
    lock = LandingLock(tmp_path).acquire("replicator run", server_id=4242, replica_host="r-1")
    lock.note(http_host="127.0.0.1", http_port=9108)
    record = read_record(tmp_path)
    assert record is not None
    assert (record.pid, record.purpose, record.running) == (os.getpid(), "replicator run", True)
    assert record.facts == {
        "server_id": 4242,
        "replica_host": "r-1",
        "http_host": "127.0.0.1",
        "http_port": 9108,
    }
    lock.release()
    released = read_record(tmp_path)
    assert released is not None and released.ended is not None
    assert released.running is False  # let go, though this process runs on
    # a process that held it and was gone without letting go: its pid says it
    code = (
        "from pathlib import Path; from replicator.sink.lock import LandingLock; "
        f"LandingLock(Path({str(tmp_path)!r})).acquire('checkpoint set')"
    )
    done = subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    assert done.returncode == 0
    gone = read_record(tmp_path)
    assert gone is not None
    assert (gone.purpose, gone.running, gone.facts, gone.ended) == (
        "checkpoint set",
        False,
        {},
        None,
    )


def _killed_holder(root: Path, **record: object) -> bool | None:
    """Whether ``read_record`` takes the holder of a lock record left on this host by a
    process that is gone (``record``: the namespace key as it was written) for running."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (root / "_state").mkdir(parents=True, exist_ok=True)
    fields = {"pid": dead.pid, "host": socket.gethostname(), "since": "2026-12-01T00:00:00Z"}
    (root / lock.LOCK_FILE).write_text(json.dumps({**fields, **record}))
    found = read_record(root)
    assert found is not None and found.pid == dead.pid
    return found.running


@pytest.mark.parametrize(
    ("ours", "record", "running"),
    [
        ("pid:[1]", {"pid_namespace": "pid:[1]"}, False),  # this host, this namespace
        ("pid:[1]", {"pid_namespace": "pid:[2]"}, None),  # another container: cannot tell
        ("pid:[1]", {}, False),  # written before namespaces: its host name tells
        (None, {"pid_namespace": None}, False),  # a host without pid namespaces
    ],
    ids=["same", "another-namespace", "from-before", "no-namespaces"],
)
def test_a_dead_holder_on_this_host_is_told_by_its_pid_namespace(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    ours: str | None,
    record: dict[str, object],
    running: bool | None,
) -> None:
    monkeypatch.setattr(lock, "_pid_namespace", lambda: ours)
    assert _killed_holder(tmp_path, **record) is running
