"""XA transactions land at XA COMMIT, are dropped at XA ROLLBACK, and outlive restarts.

MariaDB logs an XA transaction's rows at XA PREPARE and its outcome later as a statement of its
own; a run that stops between the two must keep the prepared rows (``_state/xa/``) and land
them, once, when a later run reads the XA COMMIT.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from replicator.sink.landing import FAULT_ENV
from tests.harness.mariadb import MariaDBServer

pytestmark = pytest.mark.live


def _run(config: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "replicator.cli", "run", "--config", str(config), "--stop-at-end"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _landed(root: Path) -> list[tuple[int, str, str | None]]:
    """(id, _op, _gtid) of every landed change of d.t, in `_seq` order."""
    table = ds.dataset(root / "d" / "t", format="parquet").to_table().sort_by("_seq")
    return list(zip(*(table[c].to_pylist() for c in ("id", "_op", "_gtid")), strict=True))


def _checkpoint(root: Path) -> dict[str, object]:
    data = json.loads((root / "_state" / "checkpoint.json").read_text())
    assert isinstance(data, dict)
    return data


def test_xa_lands_at_commit_dropped_at_rollback_across_runs(tmp_path: Path) -> None:
    with MariaDBServer(["--binlog-row-metadata=FULL"]) as server:
        server.execute("CREATE DATABASE d")
        server.execute("CREATE TABLE d.t (id INT PRIMARY KEY, v VARCHAR(20))")
        start = server.binlog_status().gtid_binlog_pos
        root = tmp_path / "landing"
        config = tmp_path / "replicator.yaml"
        config.write_text(
            f"source:\n  host: {server.host}\n  port: {server.port}\n  user: repl\n"
            "  password: replpass\n  server_id: 4344\n"
            f"start:\n  gtid: '{start}'\n"
            f"sink:\n  root: {root}\n  batch_max_rows: 1\n"
            "service:\n  http_port: 0\n"  # 9108 may be another worker's daemon's
        )
        a, b = server.connect(), server.connect()
        for conn, xid, row in ((a, "'xa-a','q',7", 1), (b, "'xa-b'", 2)):
            with conn.cursor() as cur:
                cur.execute(f"XA START {xid}")
                cur.execute("INSERT INTO d.t VALUES (%s, 'prepared')", (row,))
                cur.execute(f"XA END {xid}")
                cur.execute(f"XA PREPARE {xid}")
        server.execute("INSERT INTO d.t VALUES (10, 'plain')")

        # killed while the first batch writes its data: nothing of it may stay
        killed = _run(config, **{FAULT_ENV: "data:1"})
        assert killed.returncode == -9, killed.stderr[-2000:]
        first = _run(config)
        assert first.returncode == 0, first.stderr[-2000:]
        # prepared rows are held, not landed; the checkpoint names both transactions
        assert _landed(root) == [(10, "c", first_gtid := _landed(root)[0][2])]
        assert first_gtid is not None
        pending = _checkpoint(root)["xa_pending"]
        assert isinstance(pending, list)
        # one file per PREPARE: <formatID>-<gtrid hex>-<bqual hex>.<binlog file>.<position>
        assert [name.split(".")[0] for name in pending] == ["1-78612d62-", "7-78612d61-71"]
        assert sorted(p.name for p in (root / "_state" / "xa").iterdir()) == [
            f"{name}.pickle" for name in pending
        ]

        with a.cursor() as cur:
            cur.execute("XA COMMIT 'xa-a','q',7")
        commit_gtid = server.binlog_status().gtid_binlog_pos
        with b.cursor() as cur:
            cur.execute("XA ROLLBACK 'xa-b'")
        server.execute("INSERT INTO d.t VALUES (11, 'plain')")
        with a.cursor() as cur:  # one phase: an ordinary transaction in MariaDB's binlog
            cur.execute("XA START 'xa-c'")
            cur.execute("INSERT INTO d.t VALUES (3, 'one phase')")
            cur.execute("XA END 'xa-c'")
            cur.execute("XA COMMIT 'xa-c' ONE PHASE")
        second = _run(config)
        assert second.returncode == 0, second.stderr[-2000:]
        landed = _landed(root)
        assert [(row, op) for row, op, _ in landed] == [(10, "c"), (1, "c"), (11, "c"), (3, "c")]
        assert landed[1][2] == commit_gtid  # the XA COMMIT's GTID: when the row became visible
        assert server.query("SELECT id FROM d.t ORDER BY id") == [(1,), (3,), (10,), (11,)]
        assert _checkpoint(root)["xa_pending"] == []
        assert list((root / "_state" / "xa").iterdir()) == []
        a.close()
        b.close()
