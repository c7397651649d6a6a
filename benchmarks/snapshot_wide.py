"""Peak memory of a snapshot of wide rows: chunks are capped by bytes, not only by rows.

From nothing: starts a throwaway MariaDB, fills ``wide.t`` with ``--rows`` rows of 100 columns
(95 INTs and four LONGBLOBs, one of which holds 1 MiB in every 4th row: about 262 KB a row,
524 MB at the default 2,000 rows), then runs ``replicator run --stop-at-end`` with default
snapshot settings (the initial snapshot lands every row) and prints a table: rows landed,
seconds, peak RSS of the daemon (``wait4``'s ``ru_maxrss``). Target: peak RSS < 600 MB (a 1 GiB
container never crash-loops on such a table); exits 1 when missed or when a row is missing.

Run: ``.venv/bin/python benchmarks/snapshot_wide.py [--rows 2000] [--no-key] [--code DIR]``;
``--no-key`` makes the table keyless (read in one pass, in blocks of ``snapshot.chunk_bytes``);
``--code DIR`` runs the daemon of another checkout (an older commit's worktree, for before and
after).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.dataset as ds

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.harness.mariadb import REPL_PASSWORD, REPL_USER, MariaDBServer  # noqa: E402

TARGET_RSS_MB = 600


def fill(server: MariaDBServer, rows: int, keyed: bool) -> int:
    """The table, ``rows`` rows; returns its blob bytes."""
    server.execute("CREATE DATABASE wide")
    columns = ", ".join(f"c{i} INT" for i in range(1, 96))
    key = "PRIMARY KEY" if keyed else ""
    server.execute(
        f"CREATE TABLE wide.t (id INT {key}, {columns}, "
        "b1 LONGBLOB, b2 LONGBLOB, b3 LONGBLOB, b4 LONGBLOB)"
    )
    values = ", ".join(f"seq+{i}" for i in range(1, 96))
    blobs = ", ".join(
        f"IF(seq % 4 = 0 AND (seq DIV 4) % 4 = {k}, REPEAT(CHAR(65 + seq % 26), 1048576), NULL)"
        for k in range(4)
    )
    for low in range(1, rows + 1, 100):
        high = min(low + 99, rows)
        server.execute(
            f"INSERT INTO wide.t SELECT seq, {values}, {blobs} FROM seq_{low}_to_{high}",
            database="wide",
        )
    (total,) = server.query("SELECT SUM(LENGTH(COALESCE(b1, b2, b3, b4, ''))) FROM wide.t")[0]
    return int(total or 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--no-key", action="store_true", help="a table without a primary key")
    parser.add_argument(
        "--code", type=Path, default=ROOT, help="run the replicator of this checkout (a baseline)"
    )
    args = parser.parse_args()
    with (
        MariaDBServer(["--binlog-row-metadata=FULL", "--max-allowed-packet=64M"]) as server,
        tempfile.TemporaryDirectory(prefix="replicator-wide-") as tmp_name,
    ):
        tmp = Path(tmp_name)
        blob_bytes = fill(server, args.rows, keyed=not args.no_key)
        config = tmp / "replicator.yaml"
        config.write_text(
            "service:\n  http_enabled: false\n  log_level: warning\n"
            f"source:\n  host: {server.host}\n  port: {server.port}\n  user: {REPL_USER}\n"
            f"  password: {REPL_PASSWORD}\n  server_id: 7777\n"
            f"sink:\n  root: {tmp / 'landing'}\n"
            "filters:\n  include: ['wide.*']\n"
        )
        began = time.monotonic()
        command = [sys.executable, "-m", "replicator.cli", "run", "--stop-at-end"]
        done = subprocess.run(
            [*command, "--config", str(config)],
            cwd=args.code,
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "PYTHONPATH": str(args.code)},
        )
        seconds = time.monotonic() - began
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        if done.returncode != 0:
            sys.exit(f"replicator run exited {done.returncode}:\n{done.stderr[-3000:]}")
        ids = ds.dataset(str(tmp / "landing" / "wide" / "t"), format="parquet").to_table(
            columns=["id"]
        )
        landed = len(set(ids.column("id").to_pylist()))
    print()
    print(f"{'table':<34} {'rows':>6} {'blob MB':>8} {'landed':>7} {'seconds':>8} {'peak RSS':>9}")
    name = "wide.t (100 columns" + (", no key)" if args.no_key else ")")
    print(
        f"{name:<34} {args.rows:>6,} {blob_bytes / 1e6:>8,.0f} {landed:>7,} {seconds:>8.1f} "
        f"{peak_mb:>6.0f} MB"
    )
    ok = peak_mb < TARGET_RSS_MB and landed == args.rows == ids.num_rows
    print(f"peak RSS < {TARGET_RSS_MB} MB and every row once: {'met' if ok else 'MISSED'}")
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
