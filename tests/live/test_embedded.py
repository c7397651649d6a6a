"""The embedded demo: its server, its sample workload and what replicator lands from them.

The workload reports what it committed; these tests hold that report against the tables
(``SELECT COUNT(*)``), against the binary log the server wrote (row events by table and kind,
one GTID per transaction or DDL), and against the landing zone ``Service`` fills from the demo
config. They also pin down that the workload is deterministic for a seed, that it covers what
it promises (rollbacks, DDL, primary-key updates), and that a kept server directory continues
where the last run stopped.
"""

from __future__ import annotations

import gc
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from replicator.binlog.events import MariadbGtidEvent, RowsEvent, RowsKind
from replicator.embedded import EmbeddedServerError, Workload, WorkloadStats
from replicator.embedded.demo import Demo, demo_config, start_demo
from replicator.embedded.workload import TABLES
from replicator.service import RunOptions, Service
from replicator.source.binlog_file import read_binlog_files
from tests.harness import free_tcp_port
from tests.harness.mariadb import MariaDBServer

pytestmark = pytest.mark.live

_KIND = {RowsKind.INSERT: "inserted", RowsKind.UPDATE: "updated", RowsKind.DELETE: "deleted"}


def _table_counts(server: MariaDBServer, database: str) -> dict[str, int]:
    return {
        table: int(server.query(f"SELECT COUNT(*) FROM {database}.{table}")[0][0])
        for table in TABLES
    }


def _binlog_summary(server: MariaDBServer, database: str) -> dict[str, Any]:
    """Row changes by (table, kind), GTID groups (DDL / DML), and primary-key updates."""
    server.flush_binlogs()  # close the active file: every event of the run is on disk
    paths = [server.binlog_path(name) for name in server.binlog_files()]
    rows: Counter[tuple[str, str]] = Counter()
    groups: Counter[str] = Counter()
    key_updates = 0
    for event in read_binlog_files(paths):
        if isinstance(event, MariadbGtidEvent):
            groups["ddl" if event.standalone else "dml"] += 1
        elif isinstance(event, RowsEvent) and event.table.schema == database:
            rows[(event.table.table, _KIND[event.kind])] += len(event.rows)
            if event.kind is RowsKind.UPDATE and event.table.table == "customers":
                key_updates += sum(
                    b[0] != a[0] for b, a in zip(event.rows, event.after, strict=True)
                )
    return {"rows": rows, "groups": groups, "customer_key_updates": key_updates}


def _assert_stats_match_binlog(stats: WorkloadStats, summary: dict[str, Any]) -> None:
    for table in TABLES:
        counts = stats.tables[table]
        for kind in ("inserted", "updated", "deleted"):
            assert summary["rows"][(table, kind)] == getattr(counts, kind), (table, kind)
    assert summary["groups"]["dml"] == stats.transactions
    assert summary["groups"]["ddl"] == stats.ddl


def test_demo_workload_counts_match_tables_and_binlog(tmp_path: Path) -> None:
    with start_demo(tmp_path / "landing", temporary=True, rate=50, seed=7) as demo:
        time.sleep(2.5)
        stats = demo.workload.stop()
        assert demo.workload.error is None
        server = demo.server
        counts = _table_counts(server, "shop")
        summary = _binlog_summary(server, "shop")
        metadata = server.query("SELECT @@binlog_row_metadata, @@time_zone")

    assert stats.transactions >= 60  # 2.5 s at 50/s, less rollbacks and DDL
    assert counts == {table: stats.tables[table].expected_rows for table in TABLES}
    assert all(stats.tables[table].initial == 0 for table in TABLES)
    _assert_stats_match_binlog(stats, summary)
    assert stats.binlog_transactions == sum(summary["groups"].values())
    assert summary["customer_key_updates"] == stats.operations.get("renumber_customer", 0)
    assert metadata[0][0] == "FULL"
    assert not demo.server.is_running


async def test_service_lands_every_change_of_the_demo(tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    with start_demo(landing, temporary=True, rate=60, seed=11) as demo:
        time.sleep(2.0)
        stats = demo.workload.stop()
        assert demo.config.sink.batch_max_seconds <= 1.0
        assert demo.config.filters.include == ("shop.*",)
        code = await Service(demo.config, RunOptions(stop_at_end=True)).run()

    assert code == 0
    landed: dict[str, Counter[str]] = {}
    for table in TABLES:
        ops: Counter[str] = Counter()
        for path in sorted((landing / "shop" / table).glob("part-*.parquet")):
            ops.update(pq.read_table(path, columns=["_op"]).column("_op").to_pylist())
        landed[table] = ops
    expected = {
        table: Counter(
            {
                op: n
                for op, n in (
                    ("c", stats.tables[table].inserted),
                    ("u", stats.tables[table].updated),
                    ("d", stats.tables[table].deleted),
                )
                if n
            }
        )
        for table in TABLES
    }
    assert landed == expected


def test_workload_is_deterministic_and_covers_what_it_promises(mariadb: MariaDBServer) -> None:
    runs: list[tuple[WorkloadStats, dict[str, list[tuple[Any, ...]]]]] = []
    for database in ("embedded_det_a", "embedded_det_b"):
        mariadb.execute(f"DROP DATABASE IF EXISTS {database}")
        workload = Workload(mariadb.connect, database=database, seed=2024, rate=None)
        stats = workload.run(max_steps=700)
        contents = {
            table: mariadb.query(f"SELECT * FROM {database}.{table} ORDER BY 1, 2")
            for table in TABLES
        }
        runs.append((stats, contents))
        assert _table_counts(mariadb, database) == {
            table: stats.tables[table].expected_rows for table in TABLES
        }

    (stats, contents), (stats_b, contents_b) = runs
    assert stats == stats_b
    assert contents == contents_b
    assert stats.rolled_back > 0
    assert stats.ddl == 5 + 4  # CREATE DATABASE, 4 x CREATE TABLE, then each ADD COLUMN once
    for table in TABLES:
        counts = stats.tables[table]
        assert counts.inserted > 0, table
        assert counts.updated > 0, table
    assert stats.tables["orders"].deleted > 0
    assert stats.tables["order_items"].deleted > 0
    assert stats.tables["customers"].deleted > 0
    assert sum(stats.operations.values()) == stats.transactions
    for operation in ("renumber_customer", "move_order_line", "cancel_order", "purge_orders"):
        assert stats.operations.get(operation, 0) > 0, operation
    # the non-ASCII and edge values made it through utf8mb4 and BIGINT UNSIGNED
    names = " ".join(str(row[2]) for row in contents["customers"])
    assert any(ord(ch) > 0xFFFF for row in contents["products"] for ch in str(row[2]))
    assert any(ord(ch) > 0x7F for ch in names)
    assert any(row[9] is not None and row[9] >= 2**63 for row in contents["customers"])


def test_kept_server_dir_continues_the_same_server(tmp_path: Path) -> None:
    landing, server_dir = tmp_path / "landing", tmp_path / "demo-server"
    first = start_demo(landing, server_dir=server_dir, rate=40, seed=3)
    try:
        time.sleep(1.0)
        stats1 = first.workload.stop()
        first_files = first.server.binlog_files()
        gtid1 = first.server.binlog_status().gtid_binlog_pos
    finally:
        first.stop()
    assert (server_dir / "data").is_dir()
    assert not first.server.is_running

    with start_demo(landing, server_dir=server_dir, rate=40, seed=3) as second:
        assert second.server.has_datadir
        assert not second.server.created_datadir
        time.sleep(1.0)
        stats2 = second.workload.stop()
        server = second.server
        counts = _table_counts(server, "shop")
        files = server.binlog_files()
        gtid2 = server.binlog_status().gtid_binlog_pos
        assert demo_config(server, landing).start.file == first_files[0]

    assert {t: stats2.tables[t].initial for t in TABLES} == {
        t: stats1.tables[t].expected_rows for t in TABLES
    }
    assert counts == {t: stats2.tables[t].expected_rows for t in TABLES}
    assert stats2.ddl == 0  # the schema was already there
    assert files[: len(first_files)] == first_files
    assert int(gtid2.split("-")[2]) == int(gtid1.split("-")[2]) + stats2.binlog_transactions
    assert server_dir.is_dir()


def test_new_server_refuses_a_landing_zone_with_a_checkpoint(tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    (landing / "_state").mkdir(parents=True)
    (landing / "_state" / "checkpoint.json").write_text("{}")

    with pytest.raises(EmbeddedServerError, match="has a checkpoint") as refused:
        start_demo(landing, server_dir=tmp_path / "new-server")

    assert refused.value.exit_code == 1
    assert "remove" in refused.value.hint
    assert not (tmp_path / "new-server").exists()


def test_demo_handle_stop_is_idempotent(tmp_path: Path) -> None:
    demo: Demo = start_demo(tmp_path / "landing", temporary=True, rate=20, duration=0.5)
    base_dir = demo.server.base_dir
    demo.workload.join(30)
    first = demo.stop()
    second = demo.stop()

    assert first == second
    assert first.transactions > 0
    assert not base_dir.exists()


def test_run_without_a_source_is_the_demo(tmp_path: Path) -> None:
    """The README's first command: `replicator run` with nothing configured lands the demo."""
    import json
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("REPLICATOR_")}
    # every setting from the environment applies to the demo too (docs/configuration.md)
    port = free_tcp_port()
    env["REPLICATOR_SERVICE__HTTP_PORT"] = str(port)
    done = subprocess.run(
        [sys.executable, "-m", "replicator.cli", "run", "--for", "6"],
        cwd=tmp_path, env=env, capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    landing = tmp_path / "landing"
    assert json.loads((landing / "_state" / "lock").read_text())["http_port"] == port
    manifests = sorted((landing / "_manifests").glob("*.json"))
    assert len(manifests) >= 2
    tables = {f["table"] for m in manifests for f in json.loads(m.read_text())["files"]}
    assert tables == {f"shop.{t}" for t in TABLES}
    assert (tmp_path / ".replicator-demo").is_dir()  # kept for the next run
    assert b"demo: " in done.stderr


def test_a_server_start_leaves_no_socket_to_the_garbage_collector() -> None:
    """Waiting for a starting server opens no connection it does not close: until mariadbd
    listens, a pymysql connect to its unix socket fails and leaves that socket open (a
    ResourceWarning whenever the collector gets to it, failing whatever test runs then)."""
    gc.collect()  # what earlier tests left is theirs
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", ResourceWarning)
        with MariaDBServer() as server:
            assert server.query("SELECT 1") == [(1,)]
        gc.collect()
    unclosed = [str(w.message) for w in seen if issubclass(w.category, ResourceWarning)]
    assert unclosed == []
