"""On a terminal, ``replicator run`` shows a catch-up progress line: bytes behind, the rate
the gap closes at, and an ETA (the daemon's stderr is a real pseudo-terminal here)."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.mariadb import MariaDBServer

pytestmark = pytest.mark.live


def _read_all(fd: int) -> str:
    chunks: list[bytes] = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def _run_on_a_terminal(config: Path) -> tuple[int, str]:
    """``replicator run --stop-at-end`` with its stderr on a pseudo-terminal: its exit code
    and everything it said there."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "replicator.cli", "run", "--config", str(config), "--stop-at-end"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=follower,
    )
    os.close(follower)
    try:
        said = _read_all(leader)
        return proc.wait(timeout=120), said
    finally:
        proc.kill()
        os.close(leader)


def test_catch_up_progress_line_on_a_terminal(tmp_path: Path) -> None:
    with MariaDBServer(["--binlog-row-metadata=FULL"]) as server:
        server.execute("CREATE DATABASE shop")
        server.execute("CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(100))")
        start = server.binlog_status().gtid_binlog_pos
        # a backlog of 500 transactions of 1000 rows each: about a second of catching up at
        # full speed, so several readings 0.1 s apart see the gap closing
        for n in range(500):
            server.execute(
                f"INSERT INTO shop.t SELECT seq, REPEAT('x', 60) "
                f"FROM seq_{n * 1000 + 1}_to_{n * 1000 + 1000}",
                database="shop",
            )
        config = tmp_path / "replicator.yaml"
        config.write_text(
            f"source:\n  host: {server.host}\n  port: {server.port}\n  user: repl\n"
            "  password: replpass\n  server_id: 4345\n"
            f"start:\n  gtid: '{start}'\n"
            f"sink:\n  root: {tmp_path / 'landing'}\n  batch_max_rows: 20000\n"
            "service:\n  http_port: 0\n  progress_seconds: 0.1\n"
        )
        code, said = _run_on_a_terminal(config)
    lines = [line for line in said.splitlines() if "catching up" in line]
    assert code == 0, said[-3000:]
    assert lines, said[-3000:]
    assert any("behind, closing at" in line and "ETA" in line for line in lines), lines
    assert "batch committed" in said  # the console renderer, not JSON, on a terminal
    assert '"event":' not in said


def test_snapshot_progress_line_on_a_terminal(tmp_path: Path) -> None:
    """An initial snapshot shows, per table: rows landed of the source's estimate, rows/s and
    an ETA."""
    with MariaDBServer() as server:
        server.execute("CREATE DATABASE shop")
        server.execute("CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(100))")
        server.execute(
            "INSERT INTO shop.t SELECT seq, REPEAT('x', 60) FROM seq_1_to_300000", database="shop"
        )
        server.execute("ANALYZE TABLE shop.t")  # the estimate the ETA is computed from
        config = tmp_path / "replicator.yaml"
        config.write_text(
            f"source:\n  host: {server.host}\n  port: {server.port}\n  user: repl\n"
            "  password: replpass\n  server_id: 4346\n"
            f"sink:\n  root: {tmp_path / 'landing'}\n"
            "snapshot:\n  chunk_rows: 2000\n"
            "filters:\n  include: ['shop.*']\n"
            "service:\n  http_port: 0\n  progress_seconds: 0.1\n"
        )
        code, said = _run_on_a_terminal(config)
    assert code == 0, said[-3000:]
    lines = [line for line in said.splitlines() if "snapshot progress" in line]
    assert lines, said[-3000:]
    assert any(
        "shop.t: " in line and "rows of about" in line and "rows/s" in line and "ETA" in line
        for line in lines
    ), lines
