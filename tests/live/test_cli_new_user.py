"""A new user's walk through the commands, against throwaway MariaDB servers.

Server A fills a landing zone (a real ``replicator run --stop-at-end``). Then:

* ``dump --config`` on A's config while the landing zone's lock records a running daemon
  registered with the same ``server_id`` is refused (exit 2, naming the daemon and
  ``--server-id``); with ``--server-id`` of its own it dumps A's rows;
* a fresh, unrelated server B named by a config over A's landing zone: ``status`` says the
  checkpoint's position is not in B's binlog (never "0 bytes behind"), and ``check``'s
  continuity finding names the landing zone by its absolute path, and as the embedded demo's
  when the demo's record names it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from replicator.cli import main
from replicator.embedded.demo import DemoRecord, default_server_dir
from replicator.sink.identity import read_identity
from replicator.sink.lock import LandingLock
from tests.harness.mariadb import MariaDBServer
from tests.live.conftest import own_server
from tests.live.daemon import daemon_config, new_http_port, run_to_end

pytestmark = pytest.mark.live

DB = "newuser"


def _landing_from(tmp_path: Path, a: MariaDBServer) -> tuple[Path, Path, str, int]:
    """A landing zone of A's ``DB.t`` ids 1..3: (root, A's config, start GTID, server_id)."""
    a.execute(f"CREATE DATABASE {DB}")
    a.execute(f"CREATE TABLE {DB}.t (id INT PRIMARY KEY, v VARCHAR(20))")
    start = a.binlog_status().gtid_binlog_pos
    for n in (1, 2, 3):
        a.execute(f"INSERT INTO {DB}.t VALUES (%s, %s)", (n, f"a{n}"))
    root = tmp_path / "landing"
    port = new_http_port()
    config = daemon_config(tmp_path / "a.yaml", a, root, start_gtid=start, http_port=port)
    run_to_end(config, tmp_path / "run-a.log", port)
    return root, config, start, 4000 + port % 1000  # daemon_config's server_id


def _dump(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "replicator.cli", "dump", "--config", str(config), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_dump_beside_the_daemon_of_its_config(tmp_path: Path, server_a: MariaDBServer) -> None:
    root, config, _, server_id = _landing_from(tmp_path, server_a)
    # the lock as a running daemon on this config holds it (this process runs)
    lock = LandingLock(root).acquire(
        "replicator run", server_id=server_id, replica_host="replicator-test"
    )
    try:
        refused = _dump(config, "--stop-at-end")
        own = _dump(config, "--stop-at-end", "--server-id", str(server_id + 1))
    finally:
        lock.release()
    assert refused.returncode == 2, refused.stderr
    assert refused.stdout == ""
    assert f"server_id {server_id}" in refused.stderr
    assert "pass --server-id" in refused.stderr
    assert own.returncode == 0, own.stderr
    ids = [json.loads(line)["after"]["id"] for line in own.stdout.splitlines()]
    assert ids == [1, 2, 3]


def test_another_server_over_the_landing_zone(tmp_path: Path, server_a: MariaDBServer) -> None:
    root, _, start, _ = _landing_from(tmp_path, server_a)
    checkpoint = json.loads((root / "_state" / "checkpoint.json").read_text())
    b = own_server()  # fresh and unrelated: its binlog is shorter than A's
    try:
        config = daemon_config(
            tmp_path / "b.yaml", b, root, start_gtid=start, http_port=new_http_port()
        )
        status = CliRunner().invoke(main, ["status", "--config", str(config), "--json"])
        assert status.exit_code == 0, status.output
        source = json.loads(status.stdout)["source"]
        assert source["reachable"] is True
        assert "checkpoint_behind_bytes" not in source, (source, checkpoint)
        assert source["checkpoint_not_in_binlog"]
        text = CliRunner().invoke(main, ["status", "--config", str(config)]).stdout
        assert "the checkpoint's position is not in this server's binlog" in text
        assert "0 bytes behind" not in text

        landing_id = read_identity(root)
        assert landing_id is not None
        DemoRecord(str(root), landing_id, "127.0.0.1", 1).write(default_server_dir(root))
        check = CliRunner().invoke(main, ["check", "--config", str(config)])
        report = " ".join(check.output.split())
        assert check.exit_code != 0, report
        assert "does not continue the history" in report
        assert f"the landing zone is {root}" in report
        assert "the embedded demo's" in report
    finally:
        b.stop()
