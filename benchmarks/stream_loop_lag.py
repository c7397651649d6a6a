"""Event-loop lag and memory of the live replica stream.

Starts a throwaway MariaDB, writes a standard OLTP-like workload (13 columns, ~10% NULLs) into
its binlog, then streams it with ``ReplicaStream`` while a ticker task on the same event loop
measures how late it wakes up (loop lag). Three runs:

* full speed: the consumer takes transactions as fast as they come;
* paced: the consumer takes 50k rows/s (the rate the issue names);
* slow consumer: the consumer sleeps; the bounded hand-off must keep memory flat.

Run: ``.venv/bin/python benchmarks/stream_loop_lag.py [--rows 300000]``. Prints a table.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from replicator.binlog.gtid import MariadbGtidPosition
from replicator.binlog.position import StreamPosition
from replicator.binlog.transaction import Transaction
from replicator.config import Secret, SourceConfig
from replicator.source.stream import ReplicaStream
from tests.harness.mariadb import MariaDBServer

COLUMNS = (
    "id BIGINT PRIMARY KEY, a INT, b INT UNSIGNED, c BIGINT, d DECIMAL(12,2), e DOUBLE, "
    "f VARCHAR(40), g VARCHAR(200), h DATETIME(3), i DATE, j TINYINT, k CHAR(8), l TEXT"
)


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def write_workload(server: MariaDBServer, rows: int, seed: int = 42) -> None:
    rng = random.Random(seed)
    server.execute("CREATE DATABASE IF NOT EXISTS bench")
    server.execute(f"CREATE TABLE bench.t ({COLUMNS})")
    conn = server.connect("bench")
    batch = 500

    def maybe(value: object) -> object:
        return None if rng.random() < 0.1 else value

    with conn.cursor() as cur:
        for start in range(0, rows, batch):
            values = [
                (
                    n,
                    maybe(rng.randrange(-(2**31), 2**31)),
                    maybe(rng.randrange(2**32)),
                    maybe(rng.randrange(-(2**63), 2**63)),
                    maybe(f"{rng.randrange(10**10)}.{rng.randrange(100):02d}"),
                    maybe(rng.random() * 1e6),
                    maybe("x" * rng.randrange(40)),
                    maybe("y" * rng.randrange(200)),
                    maybe("2026-01-02 03:04:05.678"),
                    maybe("2026-01-02"),
                    maybe(rng.randrange(-128, 128)),
                    maybe("abcdefgh"),
                    maybe("text " * rng.randrange(20)),
                )
                for n in range(start, min(start + batch, rows))
            ]
            cur.executemany("INSERT INTO t VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)", values)
    conn.close()


async def measure(
    cfg: SourceConfig, start: StreamPosition, *, rows_per_second: float | None, slow: bool
) -> dict[str, float]:
    lags: list[float] = []
    stop = asyncio.Event()

    async def ticker() -> None:
        interval = 0.005
        while not stop.is_set():
            before = time.perf_counter()
            await asyncio.sleep(interval)
            lags.append(time.perf_counter() - before - interval)

    rows = 0
    rss_samples: list[float] = []
    began = time.perf_counter()
    tick = asyncio.create_task(ticker())
    async with ReplicaStream(cfg, start, stop_at_end=True, queue_size=64) as stream:
        async for item in stream:
            if not isinstance(item, Transaction):
                continue
            rows += item.row_count
            if rows_per_second is not None:
                ahead = rows / rows_per_second - (time.perf_counter() - began)
                if ahead > 0:
                    await asyncio.sleep(ahead)
            if slow:
                await asyncio.sleep(0.02)
                rss_samples.append(rss_mb())
                if len(rss_samples) >= 150:
                    break
    elapsed = time.perf_counter() - began
    stop.set()
    await tick
    lags.sort()
    return {
        "rows": rows,
        "seconds": elapsed,
        "rows_per_s": rows / elapsed,
        "lag_p50_ms": statistics.median(lags) * 1000,
        "lag_p99_ms": lags[int(len(lags) * 0.99) - 1] * 1000,
        "lag_max_ms": lags[-1] * 1000,
        "rss_first_mb": rss_samples[0] if rss_samples else rss_mb(),
        "rss_last_mb": rss_samples[-1] if rss_samples else rss_mb(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=300_000)
    args = parser.parse_args()
    with MariaDBServer(["--binlog-row-metadata=FULL"]) as server:
        server.flush_binlogs()
        status = server.binlog_status()
        start = StreamPosition(
            status.file, status.position, MariadbGtidPosition.parse(status.gtid_binlog_pos)
        )
        t0 = time.perf_counter()
        write_workload(server, args.rows)
        print(f"workload: {args.rows} rows written in {time.perf_counter() - t0:.1f} s")
        cfg = SourceConfig(
            host=server.host,
            port=server.port,
            user="repl",
            password=Secret("replpass"),
            server_id=5151,
            heartbeat_seconds=2.0,
        )
        runs = {
            "full speed": asyncio.run(measure(cfg, start, rows_per_second=None, slow=False)),
            "paced 50k rows/s": asyncio.run(
                measure(cfg, start, rows_per_second=50_000, slow=False)
            ),
            "slow consumer": asyncio.run(measure(cfg, start, rows_per_second=None, slow=True)),
        }
    header = (
        f"{'run':<18} {'rows':>8} {'rows/s':>9} {'lag p50':>8} {'lag p99':>8} "
        f"{'lag max':>8} {'RSS first':>9} {'RSS last':>9}"
    )
    print(header)
    print("-" * len(header))
    for name, r in runs.items():
        print(
            f"{name:<18} {r['rows']:>8.0f} {r['rows_per_s']:>9.0f} {r['lag_p50_ms']:>6.1f}ms "
            f"{r['lag_p99_ms']:>6.1f}ms {r['lag_max_ms']:>6.1f}ms {r['rss_first_mb']:>7.0f}MB "
            f"{r['rss_last_mb']:>7.0f}MB"
        )
    print(f"peak RSS of the whole process: {peak_rss_mb():.0f} MB")


if __name__ == "__main__":
    main()
