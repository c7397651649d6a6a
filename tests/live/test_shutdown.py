"""Stopping on time and saying how late the landing zone is: the real ``replicator run``.

* SIGTERM with a large backlog (rows written before the daemon starts, small batches) ends the
  process within ``service.shutdown_timeout`` (exit 0), not after landing the backlog; what it
  committed is a consistent prefix of the source, and the next start lands the rest exactly
  once;
* the lag it logs with each committed batch is the age of the newest change in that batch, so
  with a backlog written seconds before the start it is never below that delay (the reader
  being caught up says nothing about what has landed);
* SIGTERM while the process is still starting (imports, config) ends it with exit 0 and a log
  line, not by the signal;
* one outage of the source, however many attempts it takes to come back, is one
  ``replicator_source_reconnects_total``; the attempts have their own counter.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path

import pytest

from replicator.checkpoint import position_from_json
from replicator.landed.committed import committed_files, read_file
from replicator.storage import ObjectStoreOptions, open_store
from tests.harness.mariadb import MariaDBServer
from tests.harness.proxy import FaultProxy
from tests.harness.s3 import ACCESS_KEY, REGION, SECRET_KEY, S3Server
from tests.live.daemon import Daemon, daemon_config, landed_ids, new_http_port, run_to_end

pytestmark = pytest.mark.live

ROWS_PER_TRANSACTION = 100


def _prepare(server: MariaDBServer) -> str:
    server.execute("CREATE DATABASE shop")
    server.execute("CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(40))")
    return server.binlog_status().gtid_binlog_pos


def _backlog(server: MariaDBServer, transactions: int) -> int:
    """``transactions`` committed transactions of ROWS_PER_TRANSACTION rows each into shop.t
    (ids from 1); returns the number of rows."""
    with contextlib.closing(server.connect("shop")) as conn, conn.cursor() as cur:
        for n in range(transactions):
            first = n * ROWS_PER_TRANSACTION + 1
            rows = [(i, f"row {i}") for i in range(first, first + ROWS_PER_TRANSACTION)]
            cur.executemany("INSERT INTO t (id, v) VALUES (%s, %s)", rows)
    return transactions * ROWS_PER_TRANSACTION


def _committed(daemon: Daemon) -> list[dict[str, object]]:
    return [line for line in daemon.log_lines() if line.get("event") == "batch committed"]


def test_sigterm_with_a_backlog_stops_within_the_shutdown_timeout(tmp_path: Path) -> None:
    timeout = 3.0
    with MariaDBServer(["--binlog-row-metadata=FULL"]) as server:
        start = _prepare(server)
        total = _backlog(server, 1000)
        root = tmp_path / "landing"
        port = new_http_port()
        config = daemon_config(
            tmp_path / "c.yaml",
            server,
            root,
            start_gtid=start,
            http_port=port,
            batch_max_rows=ROWS_PER_TRANSACTION,
        )
        config.write_text(
            config.read_text().replace("shutdown_timeout: 20", f"shutdown_timeout: {timeout}")
        )
        daemon = Daemon(config, tmp_path / "run1.log", port).start()
        try:
            daemon.wait_for("a first commit", lambda: bool(_committed(daemon)))
            daemon.signal(signal.SIGTERM)
            signalled = time.monotonic()
            code = daemon.wait(60)
            seconds = time.monotonic() - signalled
        finally:
            daemon.kill()
        assert code == 0, daemon.log_tail()
        assert seconds < timeout + 1.5, daemon.log_tail()
        lines = daemon.log_lines()
        stopped = [line for line in lines if line["event"] == "stopped"]
        assert len(stopped) == 1, daemon.log_tail()
        first_run = landed_ids(root)
        assert 0 < len(first_run) < total  # stopped, not drained
        # a prefix of the source, in order, whole transactions only
        assert first_run == list(range(1, len(first_run) + 1))
        assert len(first_run) % ROWS_PER_TRANSACTION == 0
        checkpoint = json.loads((root / "_state" / "checkpoint.json").read_text())
        saved = position_from_json(checkpoint["position"], "checkpoint")
        assert saved.describe() == stopped[0]["position"]
        assert str(saved.mariadb_gtid) == f"0-1-{len(first_run) // ROWS_PER_TRANSACTION + 2}"

        run_to_end(config, tmp_path / "run2.log", port)
        assert landed_ids(root) == list(range(1, total + 1))  # the rest, exactly once
        landed = sorted(landed_ids(root))
        source = [int(row[0]) for row in server.query("SELECT id FROM shop.t ORDER BY id")]
        assert landed == source


def test_sigterm_with_a_commit_stuck_on_the_store_exits_on_time(
    tmp_path: Path, s3_server: S3Server
) -> None:
    """The object store stops answering (moto's server is paused) while batches commit: the
    stop cannot land the batch in progress, nor wait for the commit stuck in the writer
    thread. It abandons them and exits 0 on time; the next start recovers and lands every row
    exactly once."""
    timeout = 2.0
    url = f"s3://{s3_server.bucket('shutdown')}/zone"
    store = open_store(
        url,
        ObjectStoreOptions(
            endpoint=s3_server.endpoint, region=REGION, access_key=ACCESS_KEY, secret_key=SECRET_KEY
        ),
    )

    def landed() -> list[int]:
        files = committed_files(store).get("shop.t", [])
        return [i for f in files for i in read_file(f)["id"].to_pylist()]

    with MariaDBServer(["--binlog-row-metadata=FULL"]) as server:
        start = _prepare(server)
        total = _backlog(server, 100)
        port = new_http_port()
        config = daemon_config(
            tmp_path / "c.yaml",
            server,
            tmp_path / "unused",
            start_gtid=start,
            http_port=port,
            batch_max_rows=ROWS_PER_TRANSACTION,
        )
        text = config.read_text().replace(f"  root: {tmp_path / 'unused'}\n", "")
        text = text.replace(
            "sink:\n", "sink:\n" + s3_server.sink_yaml(url) + "    lease_seconds: 5\n"
        )
        config.write_text(text.replace("shutdown_timeout: 20", f"shutdown_timeout: {timeout}"))
        daemon = Daemon(config, tmp_path / "run1.log", port, env=s3_server.env()).start()
        paused = False
        try:
            daemon.wait_for("a first commit", lambda: bool(_committed(daemon)), 120)
            os.kill(s3_server.pid, signal.SIGSTOP)
            paused = True
            time.sleep(0.5)  # the next commit is under way, and stuck
            daemon.signal(signal.SIGTERM)
            signalled = time.monotonic()
            code = daemon.wait(60)
            seconds = time.monotonic() - signalled
        finally:
            if paused:
                os.kill(s3_server.pid, signal.SIGCONT)
            daemon.kill()
        assert code == 0, daemon.log_tail()
        assert seconds < timeout + 2.5, daemon.log_tail()  # the watchdog's second, and a margin
        events = [line["event"] for line in daemon.log_lines()]
        assert "stopped before everything read was committed" in events, daemon.log_tail()
        first_run = landed()
        assert 0 < len(first_run) < total
        time.sleep(6)  # the lease the stuck process kept expires
        again = Daemon(
            config, tmp_path / "run2.log", port, args=("--stop-at-end",), env=s3_server.env()
        ).start()
        try:
            assert again.wait(120) == 0, again.log_tail()
        finally:
            again.kill()
        assert sorted(landed()) == list(range(1, total + 1))


def test_the_logged_lag_is_the_age_of_what_was_committed(tmp_path: Path) -> None:
    delay = 4.0
    with MariaDBServer(["--binlog-row-metadata=FULL"]) as server:
        start = _prepare(server)
        began = time.time()  # the first of the backlog's transactions is written after this
        total = _backlog(server, 300)
        time.sleep(delay)
        root = tmp_path / "landing"
        port = new_http_port()
        config = daemon_config(
            tmp_path / "c.yaml",
            server,
            root,
            start_gtid=start,
            http_port=port,
            batch_max_rows=ROWS_PER_TRANSACTION,
        )
        daemon = Daemon(config, tmp_path / "run.log", port).start()
        try:
            daemon.wait_for("a first commit", lambda: bool(_committed(daemon)))
            metric = daemon.metric("replicator_replication_lag_seconds")
            scraped = time.time()
            daemon.wait_for("every row", lambda: len(landed_ids(root)) == total, 120)
            daemon.signal(signal.SIGTERM)
            assert daemon.wait(30) == 0
        finally:
            daemon.kill()
        lags = [float(str(line["lag"])) for line in _committed(daemon)]
        assert len(lags) >= total // ROWS_PER_TRANSACTION
        # every batch holds changes written before the delay: none is younger than it
        assert min(lags) >= delay, lags
        assert metric >= delay
        # the newest transaction of the first batch is at most as old as the backlog's start
        # (binlog timestamps are whole seconds: 1 s more)
        assert metric <= scraped - began + 1


def test_sigterm_while_starting_exits_cleanly(tmp_path: Path) -> None:
    port = new_http_port()
    config = tmp_path / "c.yaml"
    config.write_text(
        f"source:\n  host: 127.0.0.1\n  port: 9\n  password: x\n"
        f"sink:\n  root: {tmp_path / 'landing'}\nservice:\n  http_port: {port}\n"
    )
    log = tmp_path / "run.log"
    daemon = Daemon(config, log, port).start()
    try:
        time.sleep(0.2)
        daemon.signal(signal.SIGTERM)
        code = daemon.wait(30)
    finally:
        daemon.kill()
    text = log.read_text()
    assert code == 0, text
    assert "Traceback" not in text
    assert "stopped while starting" in text


def test_one_outage_is_one_reconnect_however_many_attempts(tmp_path: Path) -> None:
    with MariaDBServer(["--binlog-row-metadata=FULL"]) as server:
        start = _prepare(server)
        with FaultProxy(server.host, server.port) as proxy:
            port = new_http_port()
            config = daemon_config(
                tmp_path / "c.yaml", server, tmp_path / "landing", start_gtid=start, http_port=port
            )
            text = config.read_text().replace(f"port: {server.port}", f"port: {proxy.port}")
            config.write_text(
                text.replace(
                    "  heartbeat_seconds: 1\n",
                    "  heartbeat_seconds: 1\n  reconnect_initial_delay: 0.1\n"
                    "  reconnect_max_delay: 0.3\n",
                )
            )
            daemon = Daemon(config, tmp_path / "run.log", port).start()
            try:
                daemon.wait_for(
                    "streaming",
                    lambda: (
                        daemon.get("/metrics")[0] == 200
                        and daemon.metric("replicator_stream_connected") == 1
                    ),
                )
                proxy.refuse(True)  # new connections fail for a while
                proxy.cut_all()
                daemon.wait_for(
                    "several failed attempts",
                    lambda: daemon.metric("replicator_source_reconnect_attempts_total") >= 4,
                )
                proxy.refuse(False)
                daemon.wait_for(
                    "streaming again", lambda: daemon.metric("replicator_stream_connected") == 1
                )
                server.execute("INSERT INTO shop.t VALUES (1, 'after the outage')")
                daemon.wait_for("the row", lambda: landed_ids(tmp_path / "landing") == [1])
                reconnects = daemon.metric("replicator_source_reconnects_total")
                attempts = daemon.metric("replicator_source_reconnect_attempts_total")
                daemon.signal(signal.SIGTERM)
                assert daemon.wait(30) == 0
            finally:
                daemon.kill()
    assert reconnects == 1
    assert attempts >= 4  # three failed at least, and the one that worked
    lost = [e for e in daemon.log_lines() if e["event"] == "source connection lost, reconnecting"]
    assert len(lost) == 1
