"""End-to-end rows/s into an S3 API server beside the local disk, measured in one run.

Starts a throwaway MariaDB and writes ``--rows`` rows (the mixed columns of
``large_transaction``) in transactions of ``--txn-rows`` rows. Then the real daemon,
``replicator run --stop-at-end``, replicates that same binlog range twice from the same start
position: into a local directory, and into a bucket of moto's S3 API server (started here, on
localhost; the landing zone's object-store protocol: data files uploaded under their final
names, one PUT per manifest and checkpoint, the writer's lease). Each landing zone is then
read back through its manifests and must hold every row.

moto keeps objects in memory in a Python process on the same machine, so the S3 figure
measures the protocol and the client (pyarrow's S3 filesystem, HTTP, signing), not a real
network or S3's latency: expect real S3 to cost more per batch (tens of ms per PUT) and
about the same per row.

Run: ``.venv/bin/python benchmarks/object_store.py [--rows 300000] [--batch-rows 20000]``.
Prints a table.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.large_transaction import COLUMNS, INSERT
from replicator.landed.committed import committed_files, read_manifests
from replicator.storage import LocalStore, ObjectStoreOptions, Store, open_store
from tests.harness.mariadb import MariaDBServer
from tests.harness.s3 import ACCESS_KEY, REGION, SECRET_KEY, S3Server


def _run(config: Path, env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "replicator.cli", "run", "--config", str(config), "--stop-at-end"],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=False,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"replicator run exited {done.returncode}:\n{done.stderr.decode()[-3000:]}")
    return seconds, done.stderr.decode()


def _landed(store: Store) -> tuple[int, int, int, int]:
    """(rows, data files, data bytes, batches) as the manifests say, files read back."""
    files = committed_files(store).get("bench.big", [])
    fs, base = store.filesystem()
    import pyarrow.parquet as pq  # noqa: PLC0415 - after the path setup

    rows = sum(pq.ParquetFile(fs.open_input_file(f"{base}/{f.key}")).metadata.num_rows
               for f in files)  # fmt: skip
    size = sum(store.size(f.key) for f in files)
    return rows, len(files), size, len(read_manifests(store).manifests)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--txn-rows", type=int, default=100, help="rows per source transaction")
    parser.add_argument("--batch-rows", type=int, default=20_000, help="sink.batch_max_rows")
    args = parser.parse_args()
    with (
        MariaDBServer(["--binlog-row-metadata=FULL"]) as server,
        S3Server() as s3,
        tempfile.TemporaryDirectory(prefix="replicator-bench-") as tmp,
    ):
        server.execute("CREATE DATABASE bench")
        server.execute(f"CREATE TABLE bench.big ({COLUMNS})")
        status = server.binlog_status()
        t0 = time.perf_counter()
        for first in range(0, args.rows, args.txn_rows):
            rows = min(args.txn_rows, args.rows - first)
            server.execute(
                INSERT.format(rows=rows).replace("SELECT seq,", f"SELECT seq + {first},"),
                database="bench",
            )
        write_seconds = time.perf_counter() - t0
        url = f"s3://{s3.bucket('bench-landing')}/zone"
        targets: list[tuple[str, str, Store, dict[str, str]]] = [
            ("local disk", f"  root: {Path(tmp) / 'landing'}\n", LocalStore(Path(tmp) / "landing"),
             {}),
            ("S3 API (moto, localhost)", s3.sink_yaml(url),
             open_store(url, ObjectStoreOptions(endpoint=s3.endpoint, region=REGION,
                                                access_key=ACCESS_KEY, secret_key=SECRET_KEY)),
             s3.env()),
        ]  # fmt: skip
        results = []
        for name, sink, store, env in targets:
            config = Path(tmp) / f"{len(results)}.yaml"
            config.write_text(
                f"source:\n  host: {server.host}\n  port: {server.port}\n  user: repl\n"
                f"  password: replpass\n  server_id: {6262 + len(results)}\n"
                f"start:\n  gtid: '{status.gtid_binlog_pos}'\n"
                f"sink:\n{sink}  batch_max_rows: {args.batch_rows}\n"
                "service:\n  http_enabled: false\n"
            )
            seconds, _ = _run(config, env)
            landed, files, size, batches = _landed(store)
            if landed != args.rows:
                sys.exit(f"{name}: {landed} rows landed, {args.rows} written")
            results.append((name, seconds, landed, files, size, batches))
    print(
        f"source: {args.rows:,} rows in {args.rows // args.txn_rows:,} transactions "
        f"(written in {write_seconds:.1f} s); sink.batch_max_rows {args.batch_rows:,}"
    )
    header = ("landing zone", "seconds", "rows/s end to end", "batches", "files", "MiB")
    table = [
        (name, f"{seconds:.1f}", f"{landed / seconds:,.0f}", str(batches), str(files),
         f"{size / 2**20:.1f}")
        for name, seconds, landed, files, size, batches in results
    ]  # fmt: skip
    widths = [max(len(row[i]) for row in (header, *table)) for i in range(len(header))]
    for row in (header, tuple("-" * w for w in widths), *table):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))


if __name__ == "__main__":
    main()
