"""Snapshot throughput, side by side with mariadb-dump and pymysql, on the standard table.

From nothing: starts a throwaway MariaDB, writes the standard table ``bench.t`` (the 13 mixed
columns of ``side_by_side.py``, about 10% NULLs, ``--rows`` rows after its inserts, updates
and deletes), then reads the whole table ``--repeat`` times with each reader, one at a time,
each in its own process:

(a)  pymysql: ``SELECT *`` with an unbuffered cursor, every value converted by pymysql;
(b)  ``mariadb-dump --single-transaction --quick`` of the table to /dev/null (C);
(c)  replicator: ``replicator run --stop-at-end`` on a fresh landing zone (initial snapshot,
     ``snapshot.chunk_rows`` from ``--chunk-rows``), until every row is committed Parquet:
     wall time of the whole process, start-up included;
(c') with ``--text``: (c) with the chunks' SELECTs sent as text (the daemon's reading before it
     used prepared statements, kept for servers that take none), side by side;
(d)  peak RSS of each (``wait4`` of the child process), and with ``--text`` the CPU time the
     server spent for (b), (c) and (c') (``/proc/<mariadbd>/stat``).

Rows per second are the table's rows over each reader's wall time; the table prints medians
over the repetitions and the ratio to (a) and to (b).

Target (issue "snapshots at dump speed"): (c) at least as many rows/s as (b), peak RSS < 300
MB.

``--table types`` reads ``bench.types`` instead: ``--rows`` rows of the types the snapshot
once read as Python values (TIME with and without a fraction, BIT(12), BIT(64), ENUM, SET,
BINARY(8)) beside an INT key, made by MariaDB's sequence engine.

Run: ``.venv/bin/python benchmarks/snapshot.py [--rows 1000000] [--repeat 3] [--table
standard|types] [--text]``; ``--quick`` is a small smoke run; ``--data-dir DIR`` keeps the
server and its table for the next run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow.dataset as ds

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.side_by_side import _child, compile_trees, prepare
from tests.harness.mariadb import REPL_PASSWORD, REPL_USER, MariaDBServer

TARGET_VS_DUMP = 1.0
TARGET_RSS_MB = 300.0

_PYMYSQL = """
import sys, time, pymysql, pymysql.cursors
host, port, user, password = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
conn = pymysql.connect(host=host, port=port, user=user, password=password, database="bench")
began = time.perf_counter()
rows = 0
with conn.cursor(pymysql.cursors.SSCursor) as cur:
    cur.execute("SELECT * FROM " + sys.argv[5])
    while True:
        got = cur.fetchmany(10000)
        if not got:
            break
        rows += len(got)
print(rows, time.perf_counter() - began)
"""

# replicator run, its snapshot SELECTs as text (SnapshotReader.rows' ``binary`` off)
_TEXT_PROTOCOL = """
import runpy, sys
import replicator.snapshot.reader as reader
defaults = list(reader.SnapshotReader.rows.__defaults__)
defaults[-1] = False
reader.SnapshotReader.rows.__defaults__ = tuple(defaults)
sys.argv = ["replicator", *sys.argv[1:]]
runpy.run_module("replicator.cli", run_name="__main__")
"""


def _server_cpu(server: MariaDBServer) -> float:
    """CPU seconds (user + system) the server process has used so far."""
    fields = Path(f"/proc/{server.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


TYPES_COLUMNS = (
    "id INT PRIMARY KEY, tm TIME(3), tm0 TIME, b BIT(12), b64 BIT(64), "
    "e ENUM('red','green','blue'), s SET('a','b','c'), bn BINARY(8)"
)
TYPES_ROW = (
    "seq, SEC_TO_TIME(CAST(seq % 300000 AS SIGNED) - 150000 + 0.125), SEC_TO_TIME(seq % 86400), "
    "seq % 4096, seq * 7919, 1 + seq % 3, seq % 8, UNHEX(LPAD(HEX(seq), 16, '0'))"
)


def prepare_types(server: MariaDBServer, rows: int) -> None:
    """``bench.types`` with ``rows`` rows (kept when it has them already)."""
    server.execute("CREATE DATABASE IF NOT EXISTS bench")
    found = server.query(
        "SELECT COUNT(*) FROM information_schema.TABLES "
        "WHERE TABLE_SCHEMA = 'bench' AND TABLE_NAME = 'types'"
    )
    if int(found[0][0]) and int(server.query("SELECT COUNT(*) FROM bench.types")[0][0]) == rows:
        return
    server.execute("DROP TABLE IF EXISTS bench.types")
    server.execute(f"CREATE TABLE bench.types ({TYPES_COLUMNS})")
    server.execute(
        f"INSERT INTO bench.types SELECT {TYPES_ROW} FROM seq_1_to_{int(rows)}", database="bench"
    )


def _median(values: list[float]) -> float:
    return statistics.median(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--chunk-rows", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--quick", action="store_true", help="20k rows, one repetition")
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--table", choices=("standard", "types"), default="standard")
    parser.add_argument("--text", action="store_true", help="also (c') with text SELECTs")
    args = parser.parse_args()
    if args.quick:
        args.rows, args.repeat = 20_000, 1
    base = args.data_dir or Path(tempfile.mkdtemp(prefix="snapshot-bench-"))
    base.mkdir(parents=True, exist_ok=True)
    compile_trees(None)
    with MariaDBServer(base_dir=base / "server") as server:
        table = "t" if args.table == "standard" else "types"
        if args.table == "standard":
            prepare(server, "standard", args.rows, args.seed, base / "workload.json")
        else:
            prepare_types(server, args.rows)
        table_rows = int(server.query(f"SELECT COUNT(*) FROM bench.{table}")[0][0])
        print(f"bench.{table}: {table_rows:,} rows", flush=True)
        results: dict[str, list[tuple[float, float]]] = {"a": [], "b": [], "c": []}
        server_cpu: dict[str, list[float]] = {"b": [], "c": []}
        if args.text:
            results["c'"], server_cpu["c'"] = [], []
        dump = shutil.which("mariadb-dump") or "mysqldump"
        work = Path(tempfile.mkdtemp(prefix="snapshot-runs-"))
        for rep in range(args.repeat):
            out, seconds, rss = _child(
                [sys.executable, "-c", _PYMYSQL, server.host, str(server.port), "root", "", table]
            )
            assert int(out.split()[0]) == table_rows
            results["a"].append((seconds, rss))
            used = _server_cpu(server)
            _, seconds, rss = _child(
                [dump, "-h", server.host, "-P", str(server.port), "-u", "root",
                 "--single-transaction", "--quick", "--skip-lock-tables", "bench", table],
                stdout=subprocess.DEVNULL,
            )  # fmt: skip
            server_cpu["b"].append(_server_cpu(server) - used)
            results["b"].append((seconds, rss))
            root = work / f"landing-{rep}"
            config = work / f"replicator-{rep}.yaml"
            config.write_text(
                f"source:\n  host: {server.host}\n  port: {server.port}\n"
                f"  user: {REPL_USER}\n  password: {REPL_PASSWORD}\n  server_id: {7400 + rep}\n"
                f"sink:\n  root: {root}\n  batch_max_rows: 200000\n"
                f"snapshot:\n  chunk_rows: {args.chunk_rows}\n"
                f"filters:\n  include: ['bench.{table}']\n"
                "service:\n  http_enabled: false\n  log_level: warning\n"
            )
            runs = {"c": ["-m", "replicator.cli"], "c'": ["-c", _TEXT_PROTOCOL]}
            for key in [k for k in ("c", "c'") if k in results]:  # interleaved, side by side
                used = _server_cpu(server)
                _, seconds, rss = _child(
                    [sys.executable, *runs[key], "run", "--stop-at-end", "--config", str(config)]
                )
                server_cpu[key].append(_server_cpu(server) - used)
                landed = ds.dataset(str(root / "bench" / table), format="parquet").count_rows()
                assert landed == table_rows, (landed, table_rows)
                results[key].append((seconds, rss))
                shutil.rmtree(root)
            print(f"repetition {rep + 1}/{args.repeat} done", flush=True)
        names = {
            "a": "(a) pymysql SELECT *",
            "b": "(b) mariadb-dump",
            "c": "(c) replicator snapshot -> Parquet",
            "c'": "(c') the same, SELECTs as text",
        }
        rate = {k: table_rows / _median([s for s, _ in v]) for k, v in results.items()}
        print()
        print(
            f"{'reader':38} {'rows/s':>12} {'vs (a)':>8} {'vs (b)':>8} {'peak RSS MB':>12} "
            f"{'server CPU s':>13}"
        )
        for key, label in names.items():
            if key not in results:
                continue
            rss = max(r for _, r in results[key])
            cpu = f"{_median(server_cpu[key]):>13.2f}" if key in server_cpu else ""
            print(
                f"{label:38} {rate[key]:>12,.0f} {rate[key] / rate['a']:>7.2f}x "
                f"{rate[key] / rate['b']:>7.2f}x {rss:>12.0f} {cpu}"
            )
        if args.text:
            pairs = [c / t for (c, _), (t, _) in zip(results["c"], results["c'"], strict=True)]
            shown = ", ".join(f"{r:.3f}" for r in pairs)
            print(f"\n(c) / (c') time, pair by pair: {shown}")
        met = (
            rate["c"] >= TARGET_VS_DUMP * rate["b"]
            and max(r for _, r in results["c"]) < TARGET_RSS_MB
        )
        print(
            f"\ntarget (c) >= {TARGET_VS_DUMP:.1f}x (b) and < {TARGET_RSS_MB:.0f} MB: "
            f"{'met' if met else 'NOT met'} ({table_rows:,} rows, medians of {args.repeat})"
        )
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
