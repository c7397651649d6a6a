"""``checkpoint set`` forward past a DDL statement: the documented way on after a stop at an
ALTER that rewrote rows unlogged. The schema history must learn the DDL of the skipped range
(read from the binlog at the next start), or later rows would be decoded with the columns of
before it: under MINIMAL metadata, silently under the old names.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.harness.mariadb import MariaDBServer
from tests.live.daemon import ROOT, daemon_config, new_http_port

pytestmark = pytest.mark.live


def _cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "replicator.cli", *args, "--config", str(config)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_checkpoint_set_past_a_ddl_statement_applies_it_to_the_history(tmp_path: Path) -> None:
    with MariaDBServer(["--binlog-row-metadata=MINIMAL"]) as server:
        start = server.binlog_status().gtid_binlog_pos
        server.execute("CREATE DATABASE shop")
        server.execute("CREATE TABLE shop.t (id INT PRIMARY KEY, a INT)")
        server.execute("INSERT INTO shop.t VALUES (1, 1)")
        root = tmp_path / "landing"
        config = daemon_config(
            tmp_path / "c.yaml", server, root, start_gtid=start, http_port=new_http_port()
        )
        assert _cli(config, "run", "--stop-at-end").returncode == 0
        conn = server.connect("shop")
        with conn.cursor() as cur:  # outside strict mode a narrowed type rewrites rows unlogged
            cur.execute("SET SESSION sql_mode = ''")
            cur.execute("ALTER TABLE t CHANGE a renamed TINYINT")
        conn.close()
        past = server.binlog_status().gtid_binlog_pos
        server.execute("INSERT INTO shop.t VALUES (2, 3)")
        stopped = _cli(config, "run", "--stop-at-end")
        assert stopped.returncode == 4, stopped.stderr
        assert "ALTER TABLE t CHANGE a renamed TINYINT" in stopped.stderr
        assert "checkpoint set" in stopped.stderr
        moved = _cli(config, "checkpoint", "set", "--gtid", past)
        assert moved.returncode == 0, moved.stderr
        again = _cli(config, "run", "--stop-at-end")
        assert again.returncode == 0, again.stderr[-3000:]
        assert "skipped a statement that rewrote rows unlogged" in again.stderr
        assert "schema history advanced over a skipped range" in again.stderr
    rows = [
        row
        for path in sorted((root / "shop" / "t").glob("part-*.parquet"))
        for row in pq.read_table(path).to_pylist()
    ]
    latest = [row for row in rows if row["id"] == 2]
    assert len(latest) == 1
    assert latest[0]["renamed"] == 3  # under its name after the skipped statement
    assert "a" not in latest[0]
