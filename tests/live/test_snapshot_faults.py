"""Snapshots under faults, against a live MariaDB: a source that goes silent under a chunk,
chunks capped by bytes, and a table dropped or renamed while its snapshot runs.

A real ``replicator run --stop-at-end`` snapshots through the fault proxy
(tests/harness/proxy.py) where a test needs the network to fail. The silent source must be
noticed within ``snapshot.query_timeout`` (a warning, /readyz naming the snapshot), the chunk
read again once the link is back, and every row land exactly once; a SIGTERM during the
silence must end the run with exit 0 within ``service.shutdown_timeout``. A DROP or RENAME of
the table being read is made to land between a chunk's read view and its SELECT (the test
holds a write lock on the table, so the SELECT waits for it and then finds no such table):
the daemon goes on, the other tables complete, and a renamed table's rows all land.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.harness.mariadb import MariaDBServer
from tests.harness.proxy import FaultProxy
from tests.live.daemon import Daemon, daemon_config, landed_ids, new_http_port

pytestmark = pytest.mark.live

FAILED = "snapshot source query failed, reconnecting"
QUERY_TIMEOUT = 2.0


def _fill(server: MariaDBServer, db: str, tables: dict[str, int], pad: int) -> None:
    """``tables``: name -> rows (ids 1..rows, each with ``pad`` bytes of text)."""
    server.execute(f"DROP DATABASE IF EXISTS {db}")
    server.execute(f"CREATE DATABASE {db}")
    for name, rows in tables.items():
        server.execute(f"CREATE TABLE {db}.{name} (id INT PRIMARY KEY, pad VARCHAR(2000))")
        for low in range(1, rows + 1, 5000):
            high = min(low + 4999, rows)
            server.execute(
                f"INSERT INTO {name} SELECT seq, REPEAT('x', {pad}) FROM seq_{low}_to_{high}",
                database=db,
            )
        server.execute(f"ANALYZE TABLE {db}.{name}")  # the row width the first chunk uses


def _daemon(
    tmp_path: Path,
    server: MariaDBServer,
    db: str,
    *,
    port: int | None = None,
    snapshot: str = "",
    service: str = "",
) -> Daemon:
    """A ``run --stop-at-end`` of a new landing zone snapshotting ``db`` (through ``port``)."""
    http = new_http_port()
    config = daemon_config(
        tmp_path / "c.yaml",
        server,
        tmp_path / "landing",
        start_gtid=server.binlog_status().gtid_binlog_pos,
        http_port=http,
        extra=f"snapshot:\n  mode: initial\n{snapshot}filters:\n  include: ['{db}.*']\n",
    )
    text = config.read_text().replace(f"port: {server.port}", f"port: {port or server.port}")
    text = text.replace(
        "  heartbeat_seconds: 1\n",
        "  heartbeat_seconds: 1\n  connect_timeout: 2\n  reconnect_initial_delay: 0.2\n"
        "  reconnect_max_delay: 1\n",
    )
    config.write_text(text.replace("  progress_seconds: 1\n", f"  progress_seconds: 1\n{service}"))
    return Daemon(config, tmp_path / "run.log", http, args=("--stop-at-end",))


def _events(daemon: Daemon, event: str) -> list[dict[str, Any]]:
    return [line for line in daemon.log_lines() if line.get("event") == event]


def _landing(root: Path, table: str) -> Callable[[], bool]:
    return lambda: (root / "_manifests").is_dir() and len(landed_ids(root, table)) > 0


def test_a_silent_snapshot_query_is_logged_and_the_chunk_read_again(
    mariadb_full_metadata: MariaDBServer, tmp_path: Path
) -> None:
    server = mariadb_full_metadata
    db, rows = "snap_stall", 8_000
    _fill(server, db, {"t": rows}, pad=200)
    root = tmp_path / "landing"
    with FaultProxy(server.host, server.port) as proxy:
        daemon = _daemon(
            tmp_path,
            server,
            db,
            port=proxy.port,
            snapshot=f"  chunk_rows: 20\n  query_timeout: {QUERY_TIMEOUT}\n",
        ).start()
        try:
            daemon.wait_for("a first chunk", _landing(root, f"{db}.t"))
            proxy.set_blackhole(True)  # bytes stop both ways, the sockets stay open
            silent = time.monotonic()
            daemon.wait_for("the stall logged", lambda: bool(_events(daemon, FAILED)), 30)
            noticed = time.monotonic() - silent
            readiness: list[tuple[int, str]] = []

            def named() -> bool:
                readiness.append(daemon.get("/readyz"))
                return "snapshot" in readiness[-1][1]

            daemon.wait_for("/readyz naming the snapshot", named, 20)
            proxy.set_blackhole(False)
            code = daemon.wait(120)
        finally:
            daemon.kill()
    assert code == 0, daemon.log_tail()
    assert noticed < QUERY_TIMEOUT + 6, noticed
    first = _events(daemon, FAILED)[0]
    assert first["level"] == "warning"
    assert first["table"] == f"{db}.t"
    assert first["source"] == f"127.0.0.1:{proxy.port}"
    assert "timed out" in first["cause"], first
    assert readiness[-1][0] == 503
    assert f"the source query on {db}.t failed" in readiness[-1][1], readiness[-1]
    assert _events(daemon, "snapshot source query works again")
    assert sorted(landed_ids(root, f"{db}.t")) == list(range(1, rows + 1))  # each row exactly once


def test_sigterm_while_a_snapshot_query_hangs_exits_0_within_the_shutdown_timeout(
    mariadb_full_metadata: MariaDBServer, tmp_path: Path
) -> None:
    server = mariadb_full_metadata
    db, rows, shutdown = "snap_stall_term", 20_000, 10.0
    _fill(server, db, {"t": rows}, pad=200)
    root = tmp_path / "landing"
    with FaultProxy(server.host, server.port) as proxy:
        daemon = _daemon(
            tmp_path,
            server,
            db,
            port=proxy.port,
            snapshot="  chunk_rows: 20\n  query_timeout: 120\n",  # the read hangs on
            service=f"  shutdown_timeout: {shutdown}\n",
        )
        daemon.config.write_text(daemon.config.read_text().replace("  shutdown_timeout: 20\n", ""))
        daemon.start()
        try:
            daemon.wait_for("a first chunk", _landing(root, f"{db}.t"))
            proxy.set_blackhole(True)
            time.sleep(1.5)  # a snapshot query is waiting on the silent link now
            daemon.signal(signal.SIGTERM)
            asked = time.monotonic()
            code = daemon.wait(60)
            took = time.monotonic() - asked
        finally:
            daemon.kill()
            proxy.set_blackhole(False)
    assert code == 0, daemon.log_tail()
    assert took < shutdown, took
    landed = landed_ids(root, f"{db}.t")
    assert 0 < len(landed) < rows
    assert len(set(landed)) == len(landed)  # committed chunks stay, none twice
    assert sorted(landed) == list(range(1, len(landed) + 1))  # chunks in key order, no gap


def test_chunks_end_at_snapshot_chunk_bytes(
    mariadb_full_metadata: MariaDBServer, tmp_path: Path
) -> None:
    """Rows of 1,009 to 1,011 bytes on the wire and a 5,000-byte cap: every chunk is the 5
    rows that reach the cap (4 do not), although chunk_rows would take 1,000. The last one
    reaches the greatest key the first saw: the table is done (no chunk logged for it)."""
    server = mariadb_full_metadata
    db, rows = "snap_bytes", 100
    _fill(server, db, {"t": rows}, pad=1000)
    root = tmp_path / "landing"
    daemon = _daemon(
        tmp_path,
        server,
        db,
        snapshot="  chunk_rows: 1000\n  chunk_bytes: 5000\n",
        service="  log_level: debug\n",
    ).start()
    try:
        code = daemon.wait(120)
    finally:
        daemon.kill()
    assert code == 0, daemon.log_tail()
    chunks = [line for line in _events(daemon, "snapshot chunk") if line["table"] == f"{db}.t"]
    assert [c["rows"] for c in chunks] == [5] * 19, chunks
    (done,) = [
        line for line in _events(daemon, "snapshot table done") if line["table"] == f"{db}.t"
    ]
    assert done["rows"] == rows
    assert all(5000 <= c["bytes"] < 5000 + 1011 for c in chunks), chunks
    assert sorted(landed_ids(root, f"{db}.t")) == list(range(1, rows + 1))


def _under_lock(server: MariaDBServer, db: str, table: str, statement: str) -> None:
    """``statement`` run while ``table`` is write-locked: the snapshot's next SELECT of it
    waits for the lock inside its read view, then finds the table gone."""
    conn = server.connect(db)
    try:
        with conn.cursor() as cur:
            cur.execute(f"LOCK TABLES {table} WRITE")
            time.sleep(1.0)  # the next chunk's SELECT is waiting for the lock now
            cur.execute(statement)
            cur.execute("UNLOCK TABLES")
    finally:
        conn.close()


def test_drop_and_rename_of_tables_under_their_snapshot(
    mariadb_full_metadata: MariaDBServer, tmp_path: Path
) -> None:
    server = mariadb_full_metadata
    db, rows = "snap_ddl", 5_000
    _fill(server, db, {"a": rows, "b": rows, "c": 1_000}, pad=100)
    root = tmp_path / "landing"
    daemon = _daemon(tmp_path, server, db, snapshot="  chunk_rows: 10\n").start()
    try:
        daemon.wait_for("the snapshot of a", _landing(root, f"{db}.a"))
        _under_lock(server, db, "a", "DROP TABLE a")
        daemon.wait_for("the snapshot of b", _landing(root, f"{db}.b"))
        _under_lock(server, db, "b", "ALTER TABLE b RENAME TO b2")
        code = daemon.wait(300)
    finally:
        daemon.kill()
    assert code == 0, daemon.log_tail()
    changed = _events(daemon, "snapshot table changed at the source")
    assert [(c["level"], c["table"]) for c in changed] == [
        ("warning", f"{db}.a"),
        ("warning", f"{db}.b"),
    ]
    assert all("1146" in c["cause"] or "doesn't exist" in c["cause"] for c in changed), changed
    skipped = _events(daemon, "snapshot table skipped")
    assert [(s["level"], s["table"]) for s in skipped] == [("warning", f"{db}.a")]
    assert "dropped" in skipped[0]["reason"]
    renamed = _events(daemon, "snapshot table renamed, going on under the new name")
    assert [(r["table"], r["renamed_to"]) for r in renamed] == [(f"{db}.b", f"{db}.b2")]
    # a: what landed before the drop, once each (its drop record follows in the landing zone)
    a = landed_ids(root, f"{db}.a")
    assert 0 < len(a) < rows and sorted(a) == list(range(1, len(a) + 1))
    # b: every row once, under the old name before the rename and the new one after it
    b, b2 = landed_ids(root, f"{db}.b"), landed_ids(root, f"{db}.b2")
    assert b and b2
    assert sorted(b + b2) == list(range(1, rows + 1))
    assert sorted(landed_ids(root, f"{db}.c")) == list(range(1, 1_001))
    done = {d["table"] for d in _events(daemon, "snapshot table done")}
    assert done == {f"{db}.b2", f"{db}.c"}
