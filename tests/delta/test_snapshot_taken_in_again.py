"""Tables snapshotted again mid-stream (``tests/spark/taken_in_again.py``: taken in again by
the filters after rows were deleted and keys moved while they were left out, emptied while
left out, keyless ones the same, and ``replicator snapshot`` asked for tables landed already,
with the stream changing rows not read yet between the chunks). Each snapshot starts with a
``truncate`` record at its first chunk's point, with later chunks and stream changes after
it. After every run, ``materialize --format delta`` shows exactly the source's rows, read
back by DuckDB: by MERGE and by deletion vectors, each carried along run by run (and once in
the middle of a snapshot, so a later run meets the rest of it), and each from scratch."""

from __future__ import annotations

from pathlib import Path

import pytest

from replicator.delta.materialize import materialize_delta
from replicator.landed.options import MaterializeOptions
from tests.harness.duckdb_delta import read_delta
from tests.harness.mariadb import MariaDBServer
from tests.spark.taken_in_again import DB, TABLES, Rows, Scenario, run_through

pytestmark = [pytest.mark.live, pytest.mark.delta]
MODES = {"merge": False, "vectors": True}  # keyed tables' batches by MERGE, by vectors


def _read(path: Path) -> Rows:
    names, rows = read_delta(path)
    return sorted((dict(zip(names, r, strict=True)) for r in rows), key=repr)


class Readers:
    """The Delta outputs of the landing zone, kept along the runs: by MERGE and by
    deletion vectors."""

    def __init__(self, scenario: Scenario, tmp_path: Path) -> None:
        self.scenario, self.tmp = scenario, tmp_path
        self.checks = 0

    def carry(self) -> None:
        for mode, vectors in MODES.items():
            options = MaterializeOptions(deletion_vectors=vectors)
            materialize_delta(self.scenario.root, self.tmp / f"carried-{mode}", options=options)

    def check(self, tables: tuple[str, ...] = TABLES) -> None:
        """Each output shows each of ``tables`` as the source has it now."""
        self.checks += 1
        self.carry()
        outputs = [self.tmp / f"carried-{mode}" for mode in MODES]
        for mode, vectors in MODES.items():
            fresh = self.tmp / f"fresh-{mode}-{self.checks}"
            materialize_delta(
                self.scenario.root, fresh, options=MaterializeOptions(deletion_vectors=vectors)
            )
            outputs.append(fresh)
        for table in tables:
            expected = self.scenario.source(table)
            for out in outputs:
                assert _read(out / DB / table) == expected, (self.checks, table, out.name)


async def test_tables_snapshotted_again_mid_stream_read_as_the_source_has_them(
    mariadb_full_metadata: MariaDBServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario = Scenario(mariadb_full_metadata, tmp_path, monkeypatch)
    await run_through(scenario, Readers(scenario, tmp_path))
