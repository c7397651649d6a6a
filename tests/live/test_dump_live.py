"""``replicator dump --config`` against a live server equals ``dump --binlog-file``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.mariadb import MariaDBServer

pytestmark = pytest.mark.live


def _dump(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "replicator.cli", "dump", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )


def test_live_dump_equals_file_dump(tmp_path: Path) -> None:
    # FULL metadata: names and labels are in the binlog, so the file dump has them too and
    # the two outputs must agree to the byte position
    with MariaDBServer(["--binlog-row-metadata=FULL"]) as server:
        server.execute("CREATE DATABASE shop")
        server.execute(
            "CREATE TABLE shop.items (id INT PRIMARY KEY, name VARCHAR(20) CHARACTER SET utf8mb4,"
            " price DECIMAL(10,2), kind ENUM('a','b'), at DATETIME(6))"
        )
        status = server.binlog_status()
        for i in range(30):
            server.execute(
                "INSERT INTO shop.items VALUES (%s, %s, %s, 'b', '2026-01-01 00:00:00.5')",
                (i, f"n\u00e9{i}", i * 1.25),
            )
        server.execute("UPDATE shop.items SET price = price + 1 WHERE id < 10")
        server.execute("DELETE FROM shop.items WHERE id >= 25")
        config = tmp_path / "replicator.yaml"
        config.write_text(
            f"source:\n  host: {server.host}\n  port: {server.port}\n  user: repl\n"
            "  password_env: TEST_REPL_PASSWORD\n  server_id: 777\n  heartbeat_seconds: 1\n"
        )
        env = {"TEST_REPL_PASSWORD": "replpass", "PATH": "/usr/bin:/bin"}
        live = _dump(
            "--config",
            str(config),
            "--start-gtid",
            status.gtid_binlog_pos,
            "--stop-at-end",
            env=env,
        )
        assert live.returncode == 0, live.stderr
        server.flush_binlogs()
        from_file = _dump("--binlog-file", str(server.binlog_path(status.file)))
        assert from_file.returncode == 0, from_file.stderr
    live_rows = [json.loads(line) for line in live.stdout.splitlines()]
    file_rows = [json.loads(line) for line in from_file.stdout.splitlines()]
    after_start = [r for r in file_rows if r["position"] >= status.position]
    assert len(live_rows) == 30 + 10 + 5
    assert live_rows == after_start
    assert live_rows[0]["after"] == {
        "id": 0,
        "name": "n\u00e90",
        "price": "0.00",
        "kind": "b",
        "at": "2026-01-01 00:00:00.500000",
    }
    assert "replpass" not in live.stderr + live.stdout


def test_live_dump_bad_password_exits_3(tmp_path: Path, mariadb: MariaDBServer) -> None:
    config = tmp_path / "replicator.yaml"
    config.write_text(
        f"source:\n  host: {mariadb.host}\n  port: {mariadb.port}\n  user: repl\n"
        "  password: wrong-secret-42\n"
    )
    result = _dump("--config", str(config), "--stop-at-end")
    assert result.returncode == 3
    assert "wrong-secret-42" not in result.stderr + result.stdout
