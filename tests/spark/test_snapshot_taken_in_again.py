"""Tables snapshotted again mid-stream (``tests/spark/taken_in_again.py``: taken in again by
the filters after rows were deleted and keys moved while they were left out, emptied while
left out, keyless ones the same, and ``replicator snapshot`` asked for tables landed already,
with the stream changing rows not read yet between the chunks). Each snapshot starts with a
``truncate`` record at its first chunk's point, with later chunks and stream changes after
it. After every run, every Spark reader shows exactly the source's rows: ``materialize``
carried along run by run (and once in the middle of a snapshot, so a later run meets the rest
of it), ``materialize`` from scratch, ``current_state``, and a Structured Streaming query per
table."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from replicator.landed.options import MaterializeOptions
from replicator.spark.materialize import current_state, materialize
from replicator.spark.streaming import start_current_state_stream
from tests.harness.mariadb import MariaDBServer
from tests.spark.taken_in_again import DB, TABLES, Rows, Scenario, run_through

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

pytestmark = [pytest.mark.live, pytest.mark.spark]


def _rows(frame: Any) -> Rows:
    return sorted((r.asDict() for r in frame.collect()), key=repr)


class Readers:
    """Every Spark reader of the landing zone, kept along the runs."""

    def __init__(self, spark: SparkSession, scenario: Scenario, tmp_path: Path) -> None:
        self.spark, self.scenario = spark, scenario
        self.carried = tmp_path / "carried"  # incremental, run after run
        self.streamed = tmp_path / "streamed"
        self.tmp = tmp_path
        self.queries: dict[str, StreamingQuery] = {}
        self.checks = 0

    def carry(self) -> None:
        materialize(self.spark, self.scenario.root, self.carried)

    def start_streams(self) -> None:
        for table in TABLES:
            self.queries[table] = start_current_state_stream(
                self.spark, self.scenario.root, f"{DB}.{table}", self.streamed,
                self.tmp / "checkpoints" / table, trigger_seconds=0.5,
            )  # fmt: skip

    def stop_streams(self) -> None:
        for query in self.queries.values():
            query.stop()
        for table, query in self.queries.items():
            assert query.exception() is None, (table, query.exception())

    def check(self, tables: tuple[str, ...] = TABLES) -> None:
        """Each reader shows each of ``tables`` as the source has it now."""
        self.checks += 1
        self.carry()
        fresh = self.tmp / f"fresh-{self.checks}"
        materialize(self.spark, self.scenario.root, fresh)
        full = MaterializeOptions(full_refresh=True)
        materialize(
            self.spark, self.scenario.root, self.carried.with_name("refreshed"), options=full
        )
        for query in self.queries.values():
            query.processAllAvailable()
        for table in tables:
            expected = self.scenario.source(table)
            got = {
                "carried": _rows(self.spark.read.parquet(str(self.carried / DB / table))),
                "fresh": _rows(self.spark.read.parquet(str(fresh / DB / table))),
                "refreshed": _rows(
                    self.spark.read.parquet(str(self.carried.with_name("refreshed") / DB / table))
                ),
                "current_state": _rows(
                    current_state(self.spark, self.scenario.root, f"{DB}.{table}")
                ),
            }
            if self.queries:
                got["streamed"] = _rows(self.spark.read.parquet(str(self.streamed / DB / table)))
            for reader, rows in got.items():
                assert rows == expected, (self.checks, table, reader)


async def test_tables_snapshotted_again_mid_stream_read_as_the_source_has_them(
    spark: SparkSession,
    mariadb_full_metadata: MariaDBServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scenario = Scenario(mariadb_full_metadata, tmp_path, monkeypatch)
    readers = Readers(spark, scenario, tmp_path)
    try:
        await run_through(scenario, readers, after_first=readers.start_streams)
    finally:
        readers.stop_streams()
