"""What ``materialize`` (the Spark job) costs a table: seconds and calls into the JVM.

No database server: a landing zone of ``--tables`` keyed tables, each a BIGINT key, ``--columns``
INT columns and a VARCHAR, three batches of inserts and one of updates with their before
images, written by the real commit protocol (tests/spark/zone.py). In one local Spark session
(``local[2]``, as the tests run it), ``replicator.spark.materialize`` builds the output from
nothing, ``--repeat`` times into fresh directories (the first run also warms the JVM and is
not shown), once for each ``--parallel`` (tables brought up to date at once). Shown per table:
the median wall time, the Spark jobs it ran, and the calls the
driver made into the JVM (py4j commands: building a DataFrame expression is one or more each,
and every Python handle of a JVM object is deleted by one more). The calls are the steady
figure on a noisy machine; Spark's own work per job is the rest.

Run: ``.venv/bin/python benchmarks/spark_tables.py [--tables 4] [--columns 1,30] [--repeat 3]
[--parallel 1,4]``. The job count relies on the tables' threads taking the caller's job group
(``materialize`` starts them as ``InheritableThread``s, each with its own copy of the
caller's properties).
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
    parser.add_argument(
        "--parallel",
        default="1,4",
        help="tables at once (MaterializeOptions.parallel), comma-separated",
    )
    args = parser.parse_args()

    import py4j.clientserver  # type: ignore[import-untyped]  # noqa: PLC0415
    from pyspark.sql import SparkSession  # noqa: PLC0415

    from replicator.spark.materialize import MaterializeOptions, materialize  # noqa: PLC0415

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
    print("| INT columns | tables at once | s a table | Spark jobs a table | JVM calls a table |")
    print("|---:|---:|---:|---:|---:|")
    work = Path(tempfile.mkdtemp(prefix="spark-tables-"))
    try:
        for columns in (int(c) for c in args.columns.split(",")):
            zone = _zone(work / f"landing-{columns}", args.tables, columns)
            for parallel in (int(p) for p in args.parallel.split(",")):
                options = MaterializeOptions(parallel=parallel)
                seconds, jobs, made = [], [], []
                for run in range(args.repeat + 1):
                    group = f"run-{columns}-{parallel}-{run}"
                    spark.sparkContext.setJobGroup(group, group)  # the tables' threads take it
                    before, started = calls[0], time.perf_counter()
                    materialize(spark, zone, work / f"out-{group}", options=options)
                    elapsed = time.perf_counter() - started
                    if run:  # the first warms up
                        seconds.append(elapsed / args.tables)
                        made.append((calls[0] - before) / args.tables)
                        ran = spark.sparkContext.statusTracker().getJobIdsForGroup(group)
                        jobs.append(len(ran) / args.tables)
                print(
                    f"| {columns} | {parallel} | {statistics.median(seconds):.2f} |"
                    f" {statistics.median(jobs):.1f} | {statistics.median(made):.0f} |",
                    flush=True,
                )
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
