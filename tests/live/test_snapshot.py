"""Snapshots against a live MariaDB: every column type lands from a snapshot exactly as the
binlog lands it, and the progress is exactly-once across kills while writers keep writing.

The type check runs the all-types tables (tests/live/test_all_types.py: every column type
MariaDB has, zero dates, year 0, extreme numbers, every charset) twice into two landing
zones: once as inserts streamed from the binlog, once as a snapshot of the same stored rows.
The Parquet files must agree field for field (type and metadata) and value for value.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from tests.harness.mariadb import MariaDBServer, mariadbd_version
from tests.live.test_all_types import TABLES, WORKLOAD_SQL_MODE, _create_sql

pytestmark = pytest.mark.live
ROOT = Path(__file__).resolve().parents[2]
DB = "snap_types"
METADATA = ("_op", "_seq", "_gtid", "_ts", "_server_id", "_binlog_file", "_binlog_pos")


def _config(server: MariaDBServer, root: Path, path: Path, extra: str = "") -> Path:
    path.write_text(
        "service:\n  http_enabled: false\n"
        f"source:\n  host: {server.host}\n  port: {server.port}\n  user: repl\n"
        f"  password: replpass\n  server_id: {5000 + os.getpid() % 1000}\n"
        f"sink:\n  root: {root}\n  batch_max_rows: 5000\n" + extra
    )
    return path


def _run(config: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "replicator.cli", *args, "--config", str(config)],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    return done


def _landed(root: Path, table: str) -> pa.Table:
    directory = root / DB / table
    return ds.dataset(str(directory), format="parquet").to_table().sort_by("id")


def test_snapshot_lands_every_type_as_the_binlog_does(
    mariadb_full_metadata: MariaDBServer, tmp_path: Path
) -> None:
    server = mariadb_full_metadata
    if mariadbd_version() < (10, 10):
        pytest.skip("INET4 needs MariaDB 10.10+")
    server.execute(f"DROP DATABASE IF EXISTS {DB}")
    server.execute(f"CREATE DATABASE {DB}")
    for table in TABLES:
        server.execute(_create_sql(table), database=DB)
    start = server.binlog_status().gtid_binlog_pos
    with contextlib.closing(server.connect(DB)) as conn, conn.cursor() as cur:
        cur.execute(f"SET SESSION sql_mode = '{WORKLOAD_SQL_MODE}', time_zone = '+00:00'")
        for table in TABLES:
            names = ", ".join(f"`{n}`" for n in table.names)
            for i in range(table.rows):
                values = ", ".join(c.values[i] for c in table.columns)
                cur.execute(f"INSERT INTO `{table.name}` ({names}) VALUES ({i + 1}, {values})")
    include = f"filters:\n  include: ['{DB}.*']\n"
    streamed, snapshot = tmp_path / "streamed", tmp_path / "snapshot"
    _run(
        _config(server, streamed, tmp_path / "a.yaml", f"start:\n  gtid: '{start}'\n" + include),
        "run", "--stop-at-end",
    )  # fmt: skip
    done = _run(
        _config(server, snapshot, tmp_path / "b.yaml", include + "snapshot:\n  chunk_rows: 2\n"),
        "run", "--stop-at-end",
    )  # fmt: skip
    assert '"initial snapshot"' in done.stderr
    compared = 0
    for table in TABLES:
        a, b = _landed(streamed, table.name), _landed(snapshot, table.name)
        data = [n for n in a.column_names if n not in METADATA]
        assert data == [n for n in b.column_names if n not in METADATA], table.name
        assert set(a.column("_op").to_pylist()) == {"c"}
        assert set(b.column("_op").to_pylist()) == {"r"}
        for name in data:
            fa, fb = a.schema.field(name), b.schema.field(name)
            assert fa.type == fb.type, (table.name, name)
            assert fa.metadata == fb.metadata, (table.name, name)
            assert a.column(name).to_pylist() == b.column(name).to_pylist(), (table.name, name)
            compared += 1
    assert compared > 100
    server.execute(f"DROP DATABASE IF EXISTS {DB}")
