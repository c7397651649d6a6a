"""A run started from a binlog file and position checkpoints the GTID state too.

Against a throwaway MariaDB through real ``replicator run --stop-at-end`` processes: a first
run configured with ``start.file``/``start.position`` (the embedded demo's start), and a run
resumed after ``checkpoint set --file/--pos`` (a checkpoint with no GTID state at all, as
older versions also left). After the first batch, the checkpoint and the manifests carry the
server's GTID state, and the stream resumes by GTID.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from replicator.cli import main
from tests.harness.mariadb import MariaDBServer
from tests.live.daemon import new_http_port, run_to_end

pytestmark = pytest.mark.live

DB = "gtid_start"


def _config(path: Path, server: MariaDBServer, root: Path, file: str, position: int) -> Path:
    port = new_http_port()
    path.write_text(
        f"source:\n  host: {server.host}\n  port: {server.port}\n  user: repl\n"
        f"  password: replpass\n  server_id: {4000 + port % 1000}\n  heartbeat_seconds: 1\n"
        f"start:\n  file: {file}\n  position: {position}\n"
        f"sink:\n  root: {root}\n  batch_max_seconds: 0.5\n"
        f"filters:\n  include: ['{DB}.*']\n"
        f"service:\n  http_port: {port}\n  shutdown_timeout: 20\n"
    )
    return path


def _checkpoint(root: Path) -> dict[str, Any]:
    data = json.loads((root / "_state" / "checkpoint.json").read_text())
    assert isinstance(data, dict)
    return data


def _manifest_ends(root: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text())["end"] for p in sorted((root / "_manifests").glob("*.json"))]


def _port(config: Path) -> int:
    return int(config.read_text().split("http_port: ")[1].split()[0])


def test_runs_from_a_file_position_checkpoint_the_gtid_state(
    tmp_path: Path, mariadb_full_metadata: MariaDBServer
) -> None:
    server = mariadb_full_metadata
    server.execute(f"CREATE DATABASE {DB}")
    server.execute(f"CREATE TABLE {DB}.t (id INT PRIMARY KEY, v INT)")
    start = server.binlog_status()
    for n in (1, 2, 3):
        server.execute(f"INSERT INTO {DB}.t VALUES (%s, %s)", (n, n))
    after_three = server.binlog_status()
    root = tmp_path / "landing"
    config = _config(tmp_path / "c.yaml", server, root, start.file, start.position)

    run_to_end(config, tmp_path / "run1.log", _port(config))

    assert _checkpoint(root)["position"] == {
        "file": after_three.file,
        "position": after_three.position,
        "mariadb_gtid": after_three.gtid_binlog_pos,
    }
    assert all("mariadb_gtid" in end for end in _manifest_ends(root))

    # a checkpoint moved to a file/position has no GTID state: the next run learns it again
    moved = CliRunner().invoke(
        main,
        ["checkpoint", "set", "--config", str(config), "--file", start.file,
         "--pos", str(start.position)],
    )  # fmt: skip
    assert moved.exit_code == 0, moved.output
    assert _checkpoint(root)["position"] == {"file": start.file, "position": start.position}
    server.execute(f"INSERT INTO {DB}.t VALUES (4, 4)")
    after_four = server.binlog_status()
    batches = len(_manifest_ends(root))

    run_to_end(config, tmp_path / "run2.log", _port(config))

    assert _checkpoint(root)["position"] == {
        "file": after_four.file,
        "position": after_four.position,
        "mariadb_gtid": after_four.gtid_binlog_pos,
    }
    assert all("mariadb_gtid" in end for end in _manifest_ends(root)[batches:])
    learnt = [
        json.loads(line)
        for line in (tmp_path / "run2.log").read_text().splitlines()
        if "gtid state of the stream position learnt" in line
    ]
    assert [line["position"] for line in learnt] == [
        f"{start.file}:{start.position} (gtid {start.gtid_binlog_pos})"
    ]
