"""The daemon takes small transactions in runs (``binlog.runs``): against a real MariaDB, a
mixed workload lands exactly what the daemon lands with the native core off
(``REPLICATOR_NATIVE=0``: the reference decoders, one event at a time): the same batches with
the same proofs, files and rows.

The workload has what ends or splits a run: one-row transactions on two tables interleaved,
transactions of several rows and tables, updates and deletes, values the native buffers do not
hold (zero dates with ``sql_mode=''``, JSON, SET, BIT), a rolled-back transaction, a column
added midway, a table and a column left out by the filters, and batches small enough that many
end inside a run.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.harness.mariadb import MariaDBServer
from tests.live.daemon import daemon_config, new_http_port, run_to_end
from tests.unit.test_runs import manifest

pytestmark = pytest.mark.live

_TABLES = (
    "CREATE TABLE a (id INT PRIMARY KEY, name VARCHAR(40), price DECIMAL(12,3), "
    "seen DATETIME(6), born DATE, doc JSON, tags SET('x','y','z'), flags BIT(5), note TEXT)",
    "CREATE TABLE b (id BIGINT UNSIGNED PRIMARY KEY, v VARCHAR(20) CHARACTER SET latin1)",
    "CREATE TABLE c (id INT PRIMARY KEY, secret VARCHAR(20))",
)


def _workload(server: MariaDBServer, database: str) -> None:
    rng = random.Random(31)
    conn = server.connect(database)
    conn.autocommit(True)
    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = ''")
        for n in range(1, 401):
            table = rng.choice("aab")
            if table == "a":
                born = "0000-00-00" if n % 17 == 0 else f"19{n % 90 + 10:02d}-0{n % 9 + 1}-1{n % 9}"
                cur.execute(
                    "INSERT INTO a (id, name, price, seen, born, doc, tags, flags, note) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    (
                        n,
                        f"name {n}" if n % 5 else None,
                        f"{n}.{n % 1000:03d}",
                        f"2026-12-0{n % 7 + 1} 10:11:{n % 60:02d}.{n:06d}",
                        born,
                        json.dumps({"n": n, "big": 2**63 + n}) if n % 3 else None,
                        "x,z" if n % 2 else "",
                        n % 32,
                        "é" * (n % 4),
                    ),
                )
            else:
                cur.execute("INSERT INTO b VALUES (%s, %s)", (2**64 - n, f"v{n}"))
            if n % 23 == 0:
                cur.execute("UPDATE a SET price = price + 1, name = 'changed' WHERE id < %s", (n,))
            if n % 41 == 0:
                cur.execute("DELETE FROM b WHERE id > %s", (2**64 - n + 5,))
            if n % 50 == 0:
                cur.execute("INSERT INTO c VALUES (%s, 'left out')", (n,))
            if n == 200:
                cur.execute("BEGIN")
                cur.execute("INSERT INTO b VALUES (1, 'rolled back')")
                cur.execute("ROLLBACK")
                cur.execute("ALTER TABLE a ADD COLUMN extra INT DEFAULT 7")
            if n % 61 == 0:
                cur.execute("BEGIN")
                cur.execute("INSERT INTO b VALUES (%s, 'together')", (n,))
                cur.execute("UPDATE a SET note = 'together' WHERE id = %s", (n - 1,))
                cur.execute("COMMIT")
    conn.close()


def _landed(root: Path) -> dict[str, Any]:
    manifests = [
        manifest(json.loads(path.read_text())) for path in sorted(root.glob("_manifests/*.json"))
    ]
    files = {
        entry["path"]: pq.read_table(root / entry["path"]).to_pylist()
        for found in manifests
        for entry in found["files"]
    }
    checkpoint = json.loads((root / "_state" / "checkpoint.json").read_text())
    kept = {k: checkpoint[k] for k in ("batch", "next_seq", "position")}
    return {"manifests": manifests, "files": files, "checkpoint": kept}


def test_runs_land_what_the_reference_decoders_land(
    mariadb_full_metadata: MariaDBServer, tmp_path: Path
) -> None:
    server = mariadb_full_metadata
    database = "runs_live"
    server.execute(f"DROP DATABASE IF EXISTS {database}")
    server.execute(f"CREATE DATABASE {database}")
    for statement in _TABLES:
        server.execute(statement, database=database)
    start = server.binlog_status().gtid_binlog_pos
    try:
        _workload(server, database)
        landed, taken_in_runs = {}, {}
        for name, env in (("runs", {}), ("reference", {"REPLICATOR_NATIVE": "0"})):
            root = tmp_path / name
            port = new_http_port()
            extra = (
                f"filters:\n  include: ['{database}.*']\n  exclude: ['{database}.c']\n"
                f"  exclude_columns: ['{database}.a.note']\n"
            )
            config = daemon_config(
                tmp_path / f"{name}.yaml",
                server,
                root,
                start_gtid=start,
                http_port=port,
                batch_max_rows=37,
                batch_max_seconds=3600,
                extra=extra,
            )
            daemon = run_to_end(config, tmp_path / f"{name}.log", port, env)
            (stopped,) = [line for line in daemon.log_lines() if line["event"] == "stopped"]
            taken_in_runs[name] = stopped["in_runs"], stopped["transactions"]
            landed[name] = _landed(root)
    finally:
        server.execute(f"DROP DATABASE IF EXISTS {database}")
    # most transactions came in runs; none without the native core
    in_runs, transactions = taken_in_runs["runs"]
    assert in_runs > transactions // 2
    assert taken_in_runs["reference"] == (0, transactions)
    runs, reference = landed["runs"], landed["reference"]
    assert len(reference["manifests"]) > 10
    rows = sum(len(r) for r in reference["files"].values())
    assert rows > 400
    assert not any(f.startswith(f"{database}/c/") for f in reference["files"])
    assert runs == reference
