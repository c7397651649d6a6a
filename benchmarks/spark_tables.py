"""What ``materialize`` (the Spark job) costs a table: seconds and calls into the JVM.

No database server: a landing zone of ``--tables`` keyed tables, each a BIGINT key, ``--columns``
INT columns and a VARCHAR, three batches of inserts and one of updates with their before
images, written by the real commit protocol (tests/spark/zone.py). In one local Spark session
(``local[2]``, as the tests run it), ``replicator.spark.materialize`` builds the output from
nothing, ``--repeat`` times into fresh directories (the first run also warms the JVM and is
not shown). Shown per table: the median wall time, the Spark jobs it ran, and the calls the
driver made into the JVM (py4j commands: building a DataFrame expression is one or more each,
and every Python handle of a JVM object is deleted by one more). The calls are the steady
figure on a noisy machine; Spark's own work per job is the rest.

Run: ``.venv/bin/python benchmarks/spark_tables.py [--tables 4] [--columns 1,30] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ["TZ"] = "UTC"
time.tzset()


def _zone(root: Path, tables: int, columns: int) -> Path:
    from tests.spark.zone import Zone, int_col, table, text_col  # noqa: PLC0415

    versions = [
        table(
            f"bench.t{j}",
            int_col(0, "id"),
            *[int_col(1 + c, f"q{c}") for c in range(columns)],
            text_col(columns + 1, "name"),
            key=[0],
        )
        for j in range(tables)
    ]
    zone = Zone(root)
    for batch in range(3):
        zone.commit(
            [
                (v, "c", (batch * 10 + k, *[k] * columns, f"n{k}"))
                for v in versions
                for k in range(5)
            ]
        )
    zone.commit([(v, "u", (1, *[9] * columns, "x"), (1, *[1] * columns, "n1")) for v in versions])
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--columns", default="1,30", help="INT columns a table, comma-separated")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    import py4j.clientserver  # type: ignore[import-untyped]  # noqa: PLC0415
    from pyspark.sql import SparkSession  # noqa: PLC0415

    from replicator.spark.materialize import materialize  # noqa: PLC0415

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", "-Dlog4j2.level=ERROR")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    calls = [0]
    send = py4j.clientserver.ClientServerConnection.send_command

    def counted(self: Any, command: str) -> Any:
        calls[0] += 1
        return send(self, command)

    py4j.clientserver.ClientServerConnection.send_command = counted
    print(f"{args.tables} tables, {args.repeat} runs each after one to warm up")
    print("| INT columns | s a table | Spark jobs a table | JVM calls a table |")
    print("|---:|---:|---:|---:|")
    work = Path(tempfile.mkdtemp(prefix="spark-tables-"))
    try:
        for columns in (int(c) for c in args.columns.split(",")):
            zone = _zone(work / f"landing-{columns}", args.tables, columns)
            seconds, jobs, made = [], [], []
            for run in range(args.repeat + 1):
                group = f"run-{columns}-{run}"
                spark.sparkContext.setJobGroup(group, group)
                before, started = calls[0], time.perf_counter()
                materialize(spark, zone, work / f"out-{columns}-{run}")
                elapsed = time.perf_counter() - started
                if run:  # the first warms up
                    seconds.append(elapsed / args.tables)
                    made.append((calls[0] - before) / args.tables)
                    ran = spark.sparkContext.statusTracker().getJobIdsForGroup(group)
                    jobs.append(len(ran) / args.tables)
            print(
                f"| {columns} | {statistics.median(seconds):.2f} | {statistics.median(jobs):.1f}"
                f" | {statistics.median(made):.0f} |"
            )
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
