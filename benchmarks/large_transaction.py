"""Peak memory of ``replicator run`` landing one huge transaction (default 5M rows).

Starts a throwaway MariaDB, writes a single ``INSERT ... SELECT`` of ``--rows`` rows (13 mixed
columns, about 10% NULLs) in one transaction, then runs the real daemon as a child process,
``replicator run --stop-at-end``, into a fresh landing zone. The transaction must land whole
(one batch, one manifest, every row) while the process's memory stays bounded: the stream hands
it over in parts of ``sink.large_transaction_rows`` row changes, which go straight into the
batch's staging files and commit at the XID.

Peak RSS is the child's ``ru_maxrss`` from ``wait4`` (the kernel's high-water mark of the
whole process, Python, pyarrow and the reader thread included); it is also sampled from
``/proc`` while the run goes, to show the curve stays flat.

With ``--wide-mib N`` the transaction is instead N MiB of wide rows (32 KiB each, a LONGBLOB):
a few thousand rows, fewer than any row bound, so only the bounds in bytes
(``sink.large_transaction_bytes``, ``source.buffer_bytes`` and the pipeline's) keep the memory
flat; peak RSS must not grow with N (target < 800 MB at any N).

Run: ``.venv/bin/python benchmarks/large_transaction.py [--rows 5000000] [--wide-mib 400]``.
Prints a table. Target (issue 4): the 5M-row transaction lands with peak RSS < 500 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.harness.mariadb import MariaDBServer

TARGET_MB = 500
TARGET_WIDE_MB = 800
WIDE_ROW_KIB = 32
COLUMNS = (
    "id BIGINT PRIMARY KEY, a INT, b INT UNSIGNED, c BIGINT, d DECIMAL(12,2), e DOUBLE, "
    "f VARCHAR(40), g VARCHAR(200), h DATETIME(3), i DATE, j TINYINT, k CHAR(8), l TEXT"
)
# One statement, one transaction: every value derived from the sequence number, ~10% NULLs.
INSERT = """
INSERT INTO bench.big
SELECT seq,
       IF(seq % 10 = 1, NULL, CAST((seq * 7919) % 2147483647 AS SIGNED) - 1073741823),
       IF(seq % 10 = 2, NULL, (seq * 104729) % 4294967295),
       IF(seq % 10 = 3, NULL, CAST(seq * 1000003 AS SIGNED) - 4611686018427387904),
       IF(seq % 10 = 4, NULL, (seq % 100000000) / 100),
       IF(seq % 10 = 5, NULL, seq / 7),
       IF(seq % 10 = 6, NULL, REPEAT('x', seq % 40)),
       IF(seq % 10 = 7, NULL, CONCAT('row ', seq, REPEAT('y', seq % 60))),
       IF(seq % 10 = 8, NULL, '2026-01-02 03:04:05.678' + INTERVAL (seq % 86400) SECOND),
       IF(seq % 10 = 9, NULL, '2026-01-02' + INTERVAL (seq % 3650) DAY),
       IF(seq % 10 = 0, NULL, CAST(seq % 256 AS SIGNED) - 128),
       'abcdefgh',
       IF(seq % 3 = 0, NULL, REPEAT('text ', seq % 20))
FROM seq_1_to_{rows}
"""
WIDE_COLUMNS = "id BIGINT PRIMARY KEY, b LONGBLOB"
WIDE_INSERT = "INSERT INTO bench.big SELECT seq, REPEAT(MD5(seq), 1024) FROM seq_1_to_{rows}"


def vm_rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def run_daemon(config: Path) -> tuple[int, float, float, list[float], str]:
    """(exit code, seconds, peak RSS MB from wait4, sampled RSS MB, stderr tail)."""
    with tempfile.TemporaryFile() as log:
        began = time.perf_counter()
        command = [sys.executable, "-m", "replicator.cli", "run", "--stop-at-end"]
        proc = subprocess.Popen(
            [*command, "--config", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        samples: list[float] = []
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid == proc.pid:
                break
            rss = vm_rss_mb(proc.pid)
            if rss is not None:
                samples.append(rss)
            time.sleep(0.5)
        seconds = time.perf_counter() - began
        proc.returncode = os.waitstatus_to_exitcode(status)
        log.seek(0)
        tail = log.read().decode(errors="replace")[-3000:]
    return proc.returncode, seconds, usage.ru_maxrss / 1024, samples, tail


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--part-rows", type=int, default=50_000, help="large_transaction_rows")
    parser.add_argument("--wide-mib", type=int, default=0, help="MiB of 32 KiB rows instead")
    args = parser.parse_args()
    target = TARGET_WIDE_MB if args.wide_mib else TARGET_MB
    if args.wide_mib:
        args.rows = args.wide_mib * 1024 // WIDE_ROW_KIB
    with (
        MariaDBServer(["--binlog-row-metadata=FULL"]) as server,
        tempfile.TemporaryDirectory(prefix="replicator-bench-") as tmp,
    ):
        server.execute("CREATE DATABASE bench")
        server.execute(f"CREATE TABLE bench.big ({WIDE_COLUMNS if args.wide_mib else COLUMNS})")
        status = server.binlog_status()
        t0 = time.perf_counter()
        insert = WIDE_INSERT if args.wide_mib else INSERT
        server.execute(insert.format(rows=args.rows), database="bench")
        write_seconds = time.perf_counter() - t0
        binlog_bytes = sum(
            server.binlog_path(name).stat().st_size for name in server.binlog_files()
        )
        root = Path(tmp) / "landing"
        config = Path(tmp) / "replicator.yaml"
        config.write_text(
            f"source:\n  host: {server.host}\n  port: {server.port}\n  user: repl\n"
            "  password: replpass\n  server_id: 6161\n"
            f"start:\n  gtid: '{status.gtid_binlog_pos}'\n"
            f"sink:\n  root: {root}\n  large_transaction_rows: {args.part_rows}\n"
        )
        code, seconds, peak_mb, samples, tail = run_daemon(config)
        if code != 0:
            sys.exit(f"replicator run exited {code}:\n{tail}")
        manifests = [json.loads(p.read_text()) for p in sorted((root / "_manifests").glob("*"))]
        files = sorted((root / "bench" / "big").glob("*.parquet"))
        landed = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
        parquet_bytes = sum(f.stat().st_size for f in files)
    whole = len(manifests) == 1 and manifests[0]["transactions"] == 1
    print(f"source: {args.rows} rows in one INSERT, written in {write_seconds:.1f} s")
    rows = [
        ("rows landed", f"{landed:,}"),
        ("in one batch (one manifest, one transaction)", "yes" if whole else "NO"),
        ("binlog bytes", f"{binlog_bytes / 2**20:,.0f} MiB"),
        ("Parquet bytes", f"{parquet_bytes / 2**20:,.0f} MiB in {len(files)} files"),
        ("replicator run --stop-at-end", f"{seconds:.1f} s"),
        ("rows/s end to end", f"{landed / seconds:,.0f}"),
        ("RSS sampled: first / median / last", _curve(samples)),
        ("peak RSS (wait4 ru_maxrss)", f"{peak_mb:.0f} MB"),
        (f"target < {target} MB", "met" if peak_mb < target else "MISSED"),
    ]
    width = max(len(name) for name, _ in rows)
    print(f"{'measure':<{width}}  value")
    print("-" * (width + 30))
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    if landed != args.rows or not whole or peak_mb >= target:
        sys.exit(1)


def _curve(samples: list[float]) -> str:
    if not samples:
        return "n/a"
    ordered = sorted(samples)
    return f"{samples[0]:.0f} / {ordered[len(ordered) // 2]:.0f} / {samples[-1]:.0f} MB"


if __name__ == "__main__":
    main()
