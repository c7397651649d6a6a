"""The real ``replicator run`` process against a throwaway MariaDB and Mosquitto.

* metrics and health: /metrics, /healthz and /readyz answer while a workload runs; SIGTERM
  mid-workload exits 0 with everything it read committed; a restart continues where it stopped
  and the landing zone holds every source row exactly once;
* a second signal during the drain exits 1 at once, leaving the open batch uncommitted; the
  next start lands it, and every row is there exactly once;
* MQTT at the daemon level: with the broker stopped, landing goes on and the dropped-notification
  counter rises; a SIGKILLed daemon's status turns ``offline`` through its last will;
* an idle source whose binlog rotated reads nothing behind; a restart shows the checkpoint's
  batch as the last one;
* secrets: the source and broker passwords appear in no log line, metric, or file it writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from replicator.checkpoint import position_from_json
from replicator.cli import main
from tests.harness.mariadb import MariaDBServer
from tests.harness.mosquitto import MosquittoBroker
from tests.live.daemon import (
    Daemon,
    Writer,
    daemon_config,
    landed_ids,
    new_http_port,
    run_to_end,
)
from tests.live.test_notify import _listen

pytestmark = [pytest.mark.live, pytest.mark.mqtt]


def _prepare(server: MariaDBServer, database: str = "shop") -> str:
    server.execute(f"CREATE DATABASE {database}")
    server.execute(f"CREATE TABLE {database}.t (id INT PRIMARY KEY, v VARCHAR(40))")
    return server.binlog_status().gtid_binlog_pos


def test_metrics_health_sigterm_and_restart(tmp_path: Path, mosquitto: MosquittoBroker) -> None:
    with MariaDBServer(["--binlog-row-metadata=FULL"]) as server:
        start = _prepare(server)
        root = tmp_path / "landing"
        port = new_http_port()
        extra = (
            f"mqtt:\n  enabled: true\n  host: {mosquitto.host}\n  port: {mosquitto.port}\n"
            "  topic_prefix: daemon-test\n"
        )
        config = daemon_config(
            tmp_path / "c.yaml", server, root, start_gtid=start, http_port=port, extra=extra
        )
        writer = Writer(server).start()
        daemon = Daemon(config, tmp_path / "run1.log", port).start()
        try:
            daemon.wait_for("ready", lambda: daemon.get("/readyz")[0] == 200)
            assert daemon.get("/healthz")[0] == 200
            assert daemon.get("/readyz") == (200, "ready\n")
            daemon.wait_for(
                "three batches", lambda: daemon.metric("replicator_batches_committed_total") >= 3
            )
            assert daemon.metric("replicator_stream_connected") == 1
            assert daemon.metric("replicator_rows_committed_total") > 0
            assert daemon.metric("replicator_row_changes_total", table="shop.t", op="c") > 0
            assert daemon.metric("replicator_binlog_events_total", type="write_rows_v1") > 0
            assert daemon.metric("replicator_binlog_read_bytes_total") > 0
            assert daemon.metric("replicator_crc_errors_total") == 0
            assert daemon.metric("replicator_replication_lag_seconds") < 30
            assert daemon.metric("replicator_checkpoint_age_seconds") < 30
            running = _status(config)
            assert running["daemon"]["reachable"] is True
            assert running["daemon"]["ready"] is True
            assert running["daemon"]["streaming"] is True
            assert running["checkpoint"]["batch"] >= 3
            assert running["last_batch"]["tables"]["shop.t"] > 0
            assert running["source"]["reachable"] is True
            assert running["source"]["checkpoint_behind_bytes"] >= 0
            daemon.signal(signal.SIGTERM)  # mid-workload: the writer is still inserting
            code = daemon.wait(30)
        finally:
            daemon.kill()
        assert code == 0, daemon.log_tail()
        lines = daemon.log_lines()
        stopped = [line for line in lines if line["event"] == "stopped"]
        assert len(stopped) == 1
        first_run = landed_ids(root)
        # Everything read was committed, in order: the landed ids are exactly 1..k.
        assert first_run == list(range(1, len(first_run) + 1))
        checkpoint = json.loads((root / "_state" / "checkpoint.json").read_text())
        saved = position_from_json(checkpoint["position"], "checkpoint")
        assert saved.describe() == stopped[0]["position"], checkpoint
        # started from a GTID: the checkpoint carries the GTID state forward, not only file/pos
        assert saved.mariadb_gtid is not None
        assert str(saved.mariadb_gtid) == f"0-1-{len(first_run) + 2}"  # 2 DDL before the rows
        after = _status(config)
        assert after["daemon"]["reachable"] is False
        assert after["checkpoint"]["describe"] == stopped[0]["position"]
        assert after["last_batch"]["batch"] == checkpoint["batch"]
        batch_lines = [line for line in lines if line["event"] == "batch committed"]
        assert batch_lines[-1]["batch"] == checkpoint["batch"]
        assert {"rows", "tables", "bytes", "lag", "end"} <= set(batch_lines[-1])

        written = writer.stop()
        assert written > len(first_run)  # the workload went on after the stop
        run_to_end(config, tmp_path / "run2.log", port)
        assert sorted(landed_ids(root)) == list(range(1, written + 1))


def test_an_idle_source_reads_caught_up_after_a_rotation_and_a_restart(tmp_path: Path) -> None:
    """A rotated binlog (FLUSH BINARY LOGS; every server restart does it too) adds a rotate
    event and the next file's preamble, and no transaction: once a heartbeat says everything
    was sent, nothing is behind (else the stale-checkpoint alert fires on an idle source). A
    restarted daemon shows the checkpoint's batch as the last one, at its time."""
    with MariaDBServer(["--binlog-row-metadata=FULL"]) as server:
        start = _prepare(server)
        root = tmp_path / "landing"
        port = new_http_port()
        config = daemon_config(tmp_path / "c.yaml", server, root, start_gtid=start, http_port=port)
        daemon = Daemon(config, tmp_path / "run1.log", port).start()
        try:
            daemon.wait_for("ready", lambda: daemon.get("/readyz")[0] == 200)
            server.execute("INSERT INTO shop.t VALUES (1, 'x')")
            daemon.wait_for(
                "a commit", lambda: daemon.metric("replicator_batches_committed_total") == 1
            )
            server.execute("FLUSH BINARY LOGS")
            time.sleep(3)  # progress read every second: it has seen the new file by now
            daemon.wait_for(
                "nothing behind after the rotation",
                lambda: daemon.metric("replicator_binlog_behind_bytes") == 0,
                timeout=15,
            )
        finally:
            daemon.kill()
        checkpoint = json.loads((root / "_state" / "checkpoint.json").read_text())
        committed = dt.datetime.fromisoformat(checkpoint["committed_at"]).timestamp()
        daemon = Daemon(config, tmp_path / "run2.log", port).start()
        try:
            daemon.wait_for("ready again", lambda: daemon.get("/readyz")[0] == 200)
            assert daemon.metric("replicator_last_batch_number") == checkpoint["batch"] == 1
            assert daemon.metric("replicator_last_batch_timestamp_seconds") == pytest.approx(
                committed, abs=0.001
            )
        finally:
            daemon.kill()


def test_second_signal_exits_at_once_and_restart_lands_exactly_once(tmp_path: Path) -> None:
    with MariaDBServer(["--binlog-row-metadata=FULL"]) as server:
        start = _prepare(server)
        root = tmp_path / "landing"
        port = new_http_port()
        # batches commit at 100 rows only (never by age), so rows 201-250 stay in the open batch
        config = daemon_config(
            tmp_path / "c.yaml",
            server,
            root,
            start_gtid=start,
            http_port=port,
            batch_max_rows=100,
            batch_max_seconds=3600,
        )
        daemon = Daemon(config, tmp_path / "run1.log", port).start()
        try:
            daemon.wait_for("ready", lambda: daemon.get("/readyz")[0] == 200)
            with contextlib.closing(server.connect("shop")) as conn, conn.cursor() as cur:
                for n in range(1, 251):
                    cur.execute("INSERT INTO t (id, v) VALUES (%s, 'x')", (n,))
            daemon.wait_for(
                "all rows read, two batches committed",
                lambda: (  # (row changes count when committed: 200 of the 250 read)
                    daemon.metric("replicator_binlog_events_total", type="write_rows_v1") == 250
                    and daemon.metric("replicator_batches_committed_total") == 2
                    and daemon.metric("replicator_row_changes_total") == 200
                ),
            )
            # Stopped, the process holds both signals pending; they differ, so the kernel
            # cannot merge them, and on SIGCONT the second is handled before the drain commits.
            daemon.signal(signal.SIGSTOP)
            daemon.signal(signal.SIGTERM)
            daemon.signal(signal.SIGINT)
            signalled = time.monotonic()
            daemon.signal(signal.SIGCONT)
            code = daemon.wait(10)
            seconds = time.monotonic() - signalled
        finally:
            daemon.kill()
        assert code == 1, daemon.log_tail()
        assert seconds < 3
        events = [line["event"] for line in daemon.log_lines()]
        assert "exiting at once" in events
        assert "stopped" not in events
        assert landed_ids(root) == list(range(1, 201))  # the open batch was not committed

        run_to_end(config, tmp_path / "run2.log", port)
        assert landed_ids(root) == list(range(1, 251))


def _status(config: Path) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["status", "--config", str(config), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert isinstance(report, dict)
    text = CliRunner().invoke(main, ["status", "--config", str(config)])
    assert text.exit_code == 0
    assert "checkpoint" in text.output
    return report


def test_broker_outage_counts_drops_and_kill_sends_the_will(tmp_path: Path) -> None:
    broker = MosquittoBroker().start()
    try:
        asyncio.run(_outage_and_will(tmp_path, broker))
    finally:
        broker.close()


async def _outage_and_will(tmp_path: Path, broker: MosquittoBroker) -> None:
    prefix = "daemon-outage"
    with MariaDBServer(["--binlog-row-metadata=FULL"]) as server:
        start = _prepare(server)
        root = tmp_path / "landing"
        port = new_http_port()
        extra = (
            f"mqtt:\n  enabled: true\n  host: {broker.host}\n  port: {broker.port}\n"
            f"  topic_prefix: {prefix}\n  keepalive: 2\n  queue_size: 2\n"
            "  reconnect_initial_delay: 0.1\n  reconnect_max_delay: 0.5\n"
        )
        config = daemon_config(
            tmp_path / "c.yaml", server, root, start_gtid=start, http_port=port, extra=extra
        )
        daemon = Daemon(config, tmp_path / "run.log", port).start()
        writer = Writer(server, per_second=100)
        try:
            async with _listen(broker.host, broker.port, prefix) as inbox:
                await inbox.wait_until(lambda: inbox.states() == ["online"], 30, "online")
            writer.start()
            await asyncio.to_thread(
                daemon.wait_for,
                "a notified batch",
                lambda: daemon.metric("replicator_batches_committed_total") >= 1,
            )
            broker.stop()
            batches_at_outage = daemon.metric("replicator_batches_committed_total")
            await asyncio.to_thread(
                daemon.wait_for,
                "landing during the outage",
                lambda: (
                    daemon.metric("replicator_batches_committed_total") >= batches_at_outage + 6
                ),
            )
            dropped = daemon.metric("replicator_notifications_dropped_total")
            assert daemon.get("/healthz")[0] == 200
            broker.start()
            async with _listen(broker.host, broker.port, prefix) as inbox:
                await inbox.wait_until(lambda: "online" in inbox.states(), 30, "online again")
                writer.stop()
                daemon.signal(signal.SIGKILL)
                await inbox.wait_until(lambda: inbox.states()[-1:] == ["offline"], 10, "will")
        finally:
            writer.stop()
            daemon.kill()
    assert dropped >= 3  # 6+ commits while away, a queue of 2: the oldest were dropped
    ids = landed_ids(root)
    assert ids == list(range(1, len(ids) + 1))  # landing never stopped or skipped
