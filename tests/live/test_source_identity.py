"""A landing zone follows one source history: a config pointed at another server is refused.

Against throwaway MariaDB servers and real ``replicator run --stop-at-end`` processes. Server
A fills a landing zone; then the config names:

* a fresh, unrelated server B (same ``server_id`` 1, same GTID domain 0) whose sequence is
  past the landing zone's checkpoint: ``run`` exits 4 before anything lands, naming the
  landing zone's history, and ``check --config`` reports the same;
* an unrelated server behind the landing zone: exit 4 too, never "purged" or a resync hint;
* a real replica of A (``log_slave_updates``, GTID mode, other binlog file names): accepted,
  and the next transactions land exactly once.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from replicator.cli import main
from tests.harness.mariadb import MariaDBServer
from tests.live.conftest import own_server
from tests.live.daemon import Daemon, daemon_config, new_http_port, run_to_end

pytestmark = pytest.mark.live

DB = "identity"


def _schema(server: MariaDBServer) -> None:
    server.execute(f"CREATE DATABASE {DB}")
    server.execute(f"CREATE TABLE {DB}.t (id INT PRIMARY KEY, v VARCHAR(20))")


def _insert(server: MariaDBServer, ids: range, label: str) -> None:
    for n in ids:
        server.execute(f"INSERT INTO {DB}.t VALUES (%s, %s)", (n, f"{label}{n}"))


def _manifests(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((root / "_manifests").glob("*.json"))}


def _last_manifest(root: Path) -> dict[str, Any]:
    data = json.loads(sorted((root / "_manifests").glob("*.json"))[-1].read_text())
    assert isinstance(data, dict)
    return data


def _landed(root: Path) -> list[tuple[int, str]]:
    """(id, v) of every committed row change of ``DB.t``."""
    rows: list[tuple[int, str]] = []
    for manifest in sorted((root / "_manifests").glob("*.json")):
        for entry in json.loads(manifest.read_text())["files"]:
            if entry["table"] == f"{DB}.t":
                table = pq.read_table(root / entry["path"], columns=["id", "v"])
                rows.extend(zip(table["id"].to_pylist(), table["v"].to_pylist(), strict=True))
    return sorted(rows)


def _landing_from_a(tmp_path: Path, a: MariaDBServer) -> tuple[Path, int, str]:
    """A landing zone of A's ``DB.t`` ids 1..3; returns (root, http port, start GTID)."""
    _schema(a)
    start = a.binlog_status().gtid_binlog_pos
    _insert(a, range(1, 4), "a")
    root = tmp_path / "landing"
    port = new_http_port()
    config = daemon_config(tmp_path / "a.yaml", a, root, start_gtid=start, http_port=port)
    run_to_end(config, tmp_path / "run-a.log", port)
    assert [n for n, _ in _landed(root)] == [1, 2, 3]
    proof = _last_manifest(root)["source"]
    assert proof["gtid"] == a.binlog_status().gtid_binlog_pos  # the last landed transaction
    assert proof["events"] == 1 and len(proof["digest"]) == 64
    return root, port, start


def _run_refused(config: Path, log: Path, port: int) -> str:
    daemon = Daemon(config, log, port, args=("--stop-at-end",)).start()
    try:
        code = daemon.wait(120)
    finally:
        daemon.kill()
    assert code == 4, daemon.log_tail()
    return log.read_text(errors="replace")


def _check(config: Path) -> tuple[int, str]:
    """``replicator check --config``: its exit code and report (lines unwrapped)."""
    result = CliRunner().invoke(main, ["check", "--config", str(config)])
    return result.exit_code, " ".join(result.output.split())


def test_an_unrelated_server_ahead_is_refused(tmp_path: Path, server_a: MariaDBServer) -> None:
    root, port, start = _landing_from_a(tmp_path, server_a)
    landing_id = _last_manifest(root)["landing_id"]
    last_gtid = _last_manifest(root)["source"]["gtid"]
    before = _manifests(root)
    b = own_server()
    try:
        _schema(b)
        _insert(b, range(1, 11), "b")  # same domain and server_id, sequence past A's
        b_seq = int(b.binlog_status().gtid_binlog_pos.split("-")[2])
        assert b_seq > int(last_gtid.split("-")[2])
        config = daemon_config(tmp_path / "b.yaml", b, root, start_gtid=start, http_port=port)

        output = _run_refused(config, tmp_path / "run-b.log", port)

        assert _manifests(root) == before  # nothing landed, nothing rewritten
        assert "does not continue the history this landing zone holds" in output
        assert landing_id in output and last_gtid in output
        assert "a different transaction under GTID" in output
        assert "when_needed" not in output and "purged" not in output
        code, report = _check(config)
        assert code != 0, report
        assert "continuity" in report and "does not continue the history" in report
        assert landing_id in report
    finally:
        b.stop()


def test_an_unrelated_server_behind_is_refused(tmp_path: Path, server_a: MariaDBServer) -> None:
    root, port, start = _landing_from_a(tmp_path, server_a)
    _insert(server_a, range(4, 8), "a")
    run_to_end(daemon_config(tmp_path / "a.yaml", server_a, root, start_gtid=start,
                             http_port=port), tmp_path / "run-a2.log", port)  # fmt: skip
    landing_id = _last_manifest(root)["landing_id"]
    before = _manifests(root)
    b = own_server()
    try:
        _schema(b)
        _insert(b, range(1, 3), "b")  # behind A: the landing zone's last GTID is not on B
        config = daemon_config(tmp_path / "b.yaml", b, root, start_gtid=start, http_port=port)

        output = _run_refused(config, tmp_path / "run-b.log", port)

        assert _manifests(root) == before
        assert "does not continue the history this landing zone holds" in output
        assert landing_id in output and "behind the landing zone" in output
        assert "when_needed" not in output and "purged" not in output
        code, report = _check(config)
        assert code != 0 and "behind the landing zone" in report, report
    finally:
        b.stop()


def _wait_replicated(replica: MariaDBServer, source: MariaDBServer) -> None:
    wanted = source.binlog_status().gtid_binlog_pos
    deadline = time.monotonic() + 60
    while replica.binlog_status().gtid_binlog_pos != wanted:
        status = replica.query("SHOW SLAVE STATUS")
        assert time.monotonic() < deadline, f"replica not at {wanted}: {status}"
        time.sleep(0.1)


def test_a_replica_of_the_source_continues_it(tmp_path: Path, server_a: MariaDBServer) -> None:
    root, port, start = _landing_from_a(tmp_path, server_a)
    # the replica writes its own binlog (other file names and positions, its own table ids)
    replica = own_server("--server-id=2", "--log-slave-updates", "--log-bin=replica-bin")
    try:
        replica.execute("FLUSH BINARY LOGS")
        replica.execute(
            f"CHANGE MASTER TO MASTER_HOST='{server_a.host}', MASTER_PORT={server_a.port}, "
            "MASTER_USER='repl', MASTER_PASSWORD='replpass', MASTER_USE_GTID=slave_pos"
        )
        replica.execute("START SLAVE")
        _wait_replicated(replica, server_a)
        _insert(server_a, range(4, 7), "a")  # lands from the replica
        _wait_replicated(replica, server_a)
        assert replica.binlog_status().file.startswith("replica-bin.")
        config = daemon_config(tmp_path / "r.yaml", replica, root, start_gtid=start, http_port=port)

        code, report = _check(config)
        assert code == 0 and "continuity" in report, report
        run_to_end(config, tmp_path / "run-r.log", port)

        assert _landed(root) == [(n, f"a{n}") for n in range(1, 7)]  # each once
        log = (tmp_path / "run-r.log").read_text()
        assert "source continuity proven" in log
        assert _last_manifest(root)["source"]["gtid"] == server_a.binlog_status().gtid_binlog_pos
    finally:
        replica.stop()
