"""The flagship end-to-end test: source tables == what Spark materializes from the landing zone.

A seeded random workload (``flagship_workload``: six tables, every type, 50k+ row changes with
inserts, updates, primary-key updates, deletes, multi-table and rolled-back transactions, and
ADD COLUMN / MODIFY COLUMN / CREATE TABLE mid-stream) runs on a throwaway MariaDB. The real
daemon replicates it (``replicator run --stop-at-end``), ``materialize`` turns the landing zone
into current-state tables with PySpark, and ``materialize --format delta`` into Delta tables
(read back by DuckDB), and every table of both is compared with the source's own ``SELECT``:
zero differing rows or values. Once with ``binlog_row_metadata=FULL`` (names and
labels in the binlog), once with ``MINIMAL`` (from information_schema, read after all the DDL).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq
import pytest

from replicator.delta.materialize import materialize_delta
from replicator.spark.materialize import materialize
from tests.harness.duckdb_delta import read_delta_arrow
from tests.harness.mariadb import MariaDBServer
from tests.spark.flagship_workload import (
    DB,
    KEYS,
    Workload,
    canonical,
    connect,
    expected_rows,
    kinds,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.live, pytest.mark.spark]
ROOT = Path(__file__).resolve().parents[2]
ROW_CHANGES = 50_000


def _actual_rows(
    path: Path, table: str, kind: dict[str, str], *, delta: bool = False
) -> dict[tuple[Any, ...], dict[str, Any]]:
    rows = (read_delta_arrow(path) if delta else pq.read_table(path)).to_pylist()
    key = KEYS.get(table, ("id",))
    out = {}
    for row in rows:
        assert set(row) == set(kind), f"{table}: columns {sorted(row)} != {sorted(kind)}"
        values = {n: canonical(kind[n], v) for n, v in row.items()}
        out[tuple(values[k] for k in key)] = values
    assert len(out) == len(rows), f"{table}: duplicate keys in the materialized table"
    return out


def _differences(expected: dict[Any, Any], actual: dict[Any, Any]) -> list[str]:
    out = [f"missing {k}" for k in expected.keys() - actual.keys()]
    out += [f"extra {k}: {actual[k]}" for k in actual.keys() - expected.keys()]
    for k in expected.keys() & actual.keys():
        for name, value in expected[k].items():
            if actual[k][name] != value:
                out.append(f"{k}.{name}: source {value!r}, materialized {actual[k][name]!r}")
    return sorted(out)


@pytest.mark.parametrize("metadata", ["FULL", "MINIMAL"])
def test_source_tables_equal_the_materialized_landing_zone(
    spark: SparkSession, tmp_path: Path, metadata: str
) -> None:
    with MariaDBServer([f"--binlog-row-metadata={metadata}"]) as server:
        start = server.binlog_status().gtid_binlog_pos
        conn = connect(server.host, server.port)
        workload = Workload(conn, seed=20261122)
        workload.setup()
        stats = workload.run(ROW_CHANGES)
        root = tmp_path / "landing"
        config = tmp_path / "replicator.yaml"
        config.write_text(
            f"source:\n  host: {server.host}\n  port: {server.port}\n  user: repl\n"
            "  password: replpass\n  server_id: 7070\n"
            f"start:\n  gtid: '{start}'\n"
            f"sink:\n  root: {root}\n  batch_max_rows: 5000\n"
            "service:\n  http_enabled: false\n"
        )
        command = [sys.executable, "-m", "replicator.cli", "run", "--stop-at-end", "--config"]
        done = subprocess.run(
            [*command, str(config)],
            cwd=ROOT, capture_output=True, timeout=600, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr.decode()[-3000:]
        out = tmp_path / "current"
        results = materialize(spark, root, out)
        delta = tmp_path / "delta"
        delta_results = materialize_delta(root, delta)
        expected = {t: expected_rows(conn, t, workload.cols) for t in workload.cols}
        conn.close()

    assert stats.row_changes >= ROW_CHANGES
    assert (stats.rolled_back, stats.pk_updates, stats.ddl) >= (20, 100, 3)
    assert {r.table for r in results} == {f"{DB}.{t}" for t in workload.cols}
    assert {r.table for r in delta_results} == {f"{DB}.{t}" for t in workload.cols}
    differences: dict[str, list[str]] = {}
    for table in workload.cols:
        assert len(expected[table]) > 100
        # the Parquet output as pyarrow reads it, and the Delta output as DuckDB reads it
        for shown, path, is_delta in (("parquet", out, False), ("delta", delta, True)):
            kind = kinds(table, workload.cols)
            actual = _actual_rows(path / DB / table, table, kind, delta=is_delta)
            found = _differences(expected[table], actual)
            if found:
                differences[f"{shown} {table}"] = [*found[:10], f"... {len(found)} in all"]
    assert differences == {}
