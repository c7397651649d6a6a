"""Every reconnect of the replica stream is logged, at warning, with its cause.

A real ``replicator run`` streams from the throwaway MariaDB through the fault proxy
(tests/harness/proxy.py); the proxy resets the connection three times and stalls it once
(no heartbeat gets through). Each cut must give exactly one warning naming what happened,
and their number must equal ``replicator_source_reconnects_total``; the rows written around
the cuts all land.
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

DB = "shop"
LOST = "source connection lost, reconnecting"


def _warnings(daemon: Daemon) -> list[dict[str, Any]]:
    return [line for line in daemon.log_lines() if line.get("event") == LOST]


def _streaming_again(daemon: Daemon, reconnects: int) -> Callable[[], bool]:
    def check() -> bool:
        return (
            daemon.get("/metrics")[0] == 200
            and daemon.metric("replicator_source_reconnects_total") == reconnects
            and daemon.metric("replicator_stream_connected") == 1
        )

    return check


def test_each_reconnect_is_logged_with_its_cause(tmp_path: Path) -> None:
    with MariaDBServer(["--binlog-row-metadata=FULL"]) as server:
        server.execute(f"CREATE DATABASE {DB}")
        server.execute(f"CREATE TABLE {DB}.t (id INT PRIMARY KEY, v VARCHAR(40))")
        start = server.binlog_status().gtid_binlog_pos
        with FaultProxy(server.host, server.port) as proxy:
            port = new_http_port()
            config = daemon_config(
                tmp_path / "c.yaml",
                server,
                tmp_path / "landing",
                start_gtid=start,
                http_port=port,
                extra="",
            )
            text = config.read_text().replace(f"port: {server.port}", f"port: {proxy.port}")
            config.write_text(
                text.replace(
                    "  heartbeat_seconds: 1\n",
                    "  heartbeat_seconds: 1\n  reconnect_initial_delay: 0.1\n"
                    "  reconnect_max_delay: 0.5\n",
                )
            )
            daemon = Daemon(config, tmp_path / "run.log", port).start()
            try:
                daemon.wait_for("streaming", _streaming_again(daemon, 0))
                for cut in (1, 2, 3):
                    server.execute(f"INSERT INTO {DB}.t VALUES (%s, 'before cut')", (cut,))
                    assert proxy.cut_all() >= 1
                    daemon.wait_for(f"reconnect {cut}", _streaming_again(daemon, cut))
                proxy.set_blackhole(True)  # bytes stop, the socket stays open
                daemon.wait_for("silence noticed", lambda: len(_warnings(daemon)) >= 4)
                proxy.set_blackhole(False)
                proxy.cut_all()  # the stalled connection is gone for good
                deadline = time.monotonic() + 60
                while daemon.metric("replicator_stream_connected") != 1:
                    assert time.monotonic() < deadline, daemon.log_tail()
                    time.sleep(0.2)
                server.execute(f"INSERT INTO {DB}.t VALUES (4, 'after the cuts')")
                daemon.wait_for("all rows", lambda: sorted(landed_ids(tmp_path / "landing"))
                                == [1, 2, 3, 4])  # fmt: skip
                reconnects = daemon.metric("replicator_source_reconnects_total")
                warnings = _warnings(daemon)
                daemon.signal(signal.SIGTERM)
                assert daemon.wait(30) == 0
            finally:
                daemon.kill()

    assert len(warnings) == reconnects >= 4
    assert {w["level"] for w in warnings} == {"warning"}
    assert [w["attempt"] for w in warnings[:3]] == [1, 2, 3]
    # a reset names the reset; the stall names the silence
    assert all("reset" in w["cause"].lower() for w in warnings[:3]), warnings[:3]
    assert "no event or heartbeat for 2 s" in warnings[3]["cause"]
    assert all(w["source"] == f"127.0.0.1:{proxy.port}" for w in warnings)
    assert all(w["resume"] for w in warnings)
