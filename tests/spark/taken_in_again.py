"""A landing zone where tables are snapshotted again mid-stream, for the readers' tests
(tests/spark/test_snapshot_taken_in_again.py, tests/delta/test_snapshot_taken_in_again.py).

Database ``again`` on a live MariaDB, read in chunks of 4 rows, through four runs of the daemon
(``Service`` in this process):

1. every table (``again.*``): the initial snapshot;
2. only ``a`` and ``r``: meanwhile ``k`` (keyed) loses rows and has a key moved, ``e`` (keyed)
   and ``ebag`` (keyless) are emptied, ``bag`` (keyless) loses one copy of a duplicate and
   gains others. The stream passes those changes without landing them;
3. every table again, with ``replicator snapshot`` asking for ``r`` (landed all along): ``k``,
   ``e``, ``bag`` and ``ebag`` are taken in again, each snapshot starting with a ``truncate``
   record at its first chunk's point (``e`` and ``ebag``: the record alone). Changes made
   before the run land before those records; rows not read yet are updated, deleted and
   moved to keys below and above the walk between the chunks of ``k`` and ``r``;
4. ``replicator snapshot`` asks for ``k``, ``bag`` and ``e`` again while the stream goes on
   (changes between ``k``'s chunks again).

``Scenario.mid`` is called once, between two chunks of ``k`` in run 3, after the batch that
holds ``k``'s ``truncate`` record is committed: a reader brought up to date there meets the
record with the rest of the snapshot still to come. ``Scenario.source`` is what the readers
must show: the source's rows by SELECT (a list sorted by ``repr``; keyless tables keep their
duplicates).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import pytest

from replicator.config import load_config
from replicator.service import RunOptions, Service
from replicator.snapshot.reader import ReadPoint, SnapshotReader
from replicator.snapshot.requests import write_request
from tests.harness.mariadb import MariaDBServer

DB = "again"
TABLES = ("a", "bag", "e", "ebag", "k", "r")  # a and r are never left out
LEFT_OUT = ("bag", "e", "ebag", "k")
Rows = list[dict[str, Any]]

CREATE = [
    "CREATE TABLE a (id INT PRIMARY KEY, v VARCHAR(16))",
    "CREATE TABLE k (id INT PRIMARY KEY, v VARCHAR(16))",
    "CREATE TABLE e (id INT PRIMARY KEY, v VARCHAR(16))",
    "CREATE TABLE r (id INT PRIMARY KEY, v VARCHAR(16))",
    "CREATE TABLE bag (n INT, s VARCHAR(8))",
    "CREATE TABLE ebag (n INT)",
    "INSERT INTO a VALUES (1, 'a1')",
    "INSERT INTO k SELECT seq, CONCAT('k', seq) FROM seq_1_to_30",
    "INSERT INTO e VALUES (1, 'e1'), (2, 'e2'), (3, 'e3')",
    "INSERT INTO r SELECT seq, CONCAT('r', seq) FROM seq_1_to_20",
    "INSERT INTO bag VALUES (1, 'x'), (1, 'x'), (2, 'y'), (3, 'z')",
    "INSERT INTO ebag VALUES (1), (1)",
]
LEFT_OUT_CHANGES = [  # while the filters leave k, e, bag and ebag out
    "DELETE FROM k WHERE id IN (1, 2)",
    "UPDATE k SET id = 101 WHERE id = 3",  # moved past every key
    "UPDATE k SET id = 1 WHERE id = 6",  # moved to a key deleted before
    "UPDATE k SET v = 'out' WHERE id = 4",
    "INSERT INTO k VALUES (31, 'k31')",
    "DELETE FROM e",
    "DELETE FROM bag WHERE n = 1 LIMIT 1",
    "UPDATE bag SET s = 'Y' WHERE n = 2",
    "INSERT INTO bag VALUES (4, 'w'), (4, 'w')",
    "DELETE FROM ebag",
    "INSERT INTO a VALUES (2, 'a2')",
    "UPDATE r SET v = 'left' WHERE id = 1",
]
BEFORE_TAKEN_IN = [  # after that run, before the next: the stream lands them before the truncate
    "UPDATE k SET v = 'pre' WHERE id = 10",
    "DELETE FROM k WHERE id = 11",
    "UPDATE k SET id = 11 WHERE id = 12",
    "INSERT INTO bag VALUES (5, 'v')",
    "DELETE FROM bag WHERE n = 3",
]
# (table, chunks of it read) -> statements run before the next read view opens
BETWEEN_TAKEN_IN: dict[tuple[str, int], list[str]] = {
    ("k", 1): [
        "UPDATE k SET v = 'mid' WHERE id = 25",  # not read yet
        "DELETE FROM k WHERE id = 26",
        "UPDATE k SET id = 0 WHERE id = 27",  # below the walk: only the stream lands it
        "UPDATE k SET id = 200 WHERE id = 28",  # past the walk's greatest key
        "UPDATE k SET v = 'read' WHERE id = 4",  # read already
        "INSERT INTO k VALUES (300, 'new')",
        "INSERT INTO bag VALUES (1, 'x')",
        "UPDATE bag SET s = 'W' WHERE n = 4 LIMIT 1",
        "INSERT INTO ebag VALUES (7)",
        "INSERT INTO a VALUES (3, 'a3')",
    ],
    ("k", 3): [
        "DELETE FROM k WHERE id IN (29, 300)",
        "UPDATE k SET id = 2 WHERE id = 30",
        "UPDATE k SET v = 'late' WHERE id = 31",
        "DELETE FROM ebag",
        "INSERT INTO e VALUES (9, 'e9')",
    ],
    ("r", 1): [
        "UPDATE r SET v = 'mid' WHERE id = 15",
        "DELETE FROM r WHERE id = 16",
        "UPDATE r SET id = 0 WHERE id = 17",
        "UPDATE r SET id = 50 WHERE id = 18",
        "UPDATE r SET v = 'read' WHERE id = 2",
    ],
}
BETWEEN_ASKED_AGAIN: dict[tuple[str, int], list[str]] = {
    ("k", 1): [
        "UPDATE k SET v = 'again' WHERE id = 20",
        "DELETE FROM k WHERE id = 21",
        "UPDATE k SET id = -1 WHERE id = 22",
        "UPDATE k SET id = 400 WHERE id = 23",
        "DELETE FROM bag WHERE n = 4",
        "INSERT INTO bag VALUES (6, 'u'), (6, 'u')",
        "DELETE FROM e",
    ],
    ("k", 2): [
        "DELETE FROM k WHERE id = 24",
        "INSERT INTO k VALUES (24, 'back')",
        "UPDATE bag SET n = 7 WHERE n = 6 LIMIT 1",
    ],
}


class Scenario:
    """The runs above, one call each (``left_out``, ``taken_in_again``, ``asked_again``; the
    constructor makes the database and runs the initial snapshot)."""

    def __init__(
        self, server: MariaDBServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        self.server = server
        self.root = tmp_path / "landing"
        self.tmp = tmp_path
        self.between: dict[tuple[str, int], list[str]] = {}
        self.mid: Callable[[], None] | None = None
        self._chunks: dict[str, int] = {}
        self._last: str | None = None
        self._hook(monkeypatch)
        server.execute(f"DROP DATABASE IF EXISTS {DB}")
        server.execute(f"CREATE DATABASE {DB}")
        for statement in CREATE:
            server.execute(statement, database=DB)

    def _hook(self, monkeypatch: pytest.MonkeyPatch) -> None:
        begin, rows = SnapshotReader.begin, SnapshotReader.rows

        def counting(self_: SnapshotReader, schema: str, table: str, *a: Any, **kw: Any) -> Any:
            if schema == DB and not kw.get("descending"):  # a chunk, not its greatest key
                self._chunks[table] = self._chunks.get(table, 0) + 1
                self._last = table
            return rows(self_, schema, table, *a, **kw)

        def begin_between(self_: SnapshotReader) -> ReadPoint:
            if self._last is not None:
                at = (self._last, self._chunks[self._last])
                for statement in self.between.pop(at, []):
                    self.server.execute(statement, database=DB)
                if at == ("k", 2) and self.mid is not None:
                    self._wait_for_reset("k")
                    mid, self.mid = self.mid, None
                    mid()
            return begin(self_)

        monkeypatch.setattr(SnapshotReader, "rows", counting)
        monkeypatch.setattr(SnapshotReader, "begin", begin_between)

    def _wait_for_reset(self, table: str) -> None:
        """Until a committed batch holds ``table``'s truncate record (the daemon commits
        while its snapshot reader waits here, in a thread of its own)."""
        deadline = time.monotonic() + 60
        while not any(
            r["op"] == "truncate" and r["table"] == f"{DB}.{table}"
            for m in self.manifests()
            for r in m["schema_changes"]
        ):
            assert time.monotonic() < deadline, "no truncate record of again.k committed"
            time.sleep(0.1)

    def manifests(self) -> list[dict[str, Any]]:
        folder = self.root / "_manifests"
        return [json.loads(p.read_text()) for p in sorted(folder.glob("[0-9]*.json"))]

    def resets(self) -> list[str]:
        """The tables of every truncate record, in batch order."""
        return [
            r["table"].partition(".")[2]
            for m in self.manifests()
            for r in m["schema_changes"]
            if r["op"] == "truncate"
        ]

    def _config(self, name: str, include: str) -> Path:
        path = self.tmp / f"{name}.yaml"
        path.write_text(
            "service:\n  http_enabled: false\n"
            f"source:\n  host: {self.server.host}\n  port: {self.server.port}\n"
            f"  user: repl\n  password: replpass\n  server_id: {5400 + os.getpid() % 1000}\n"
            "  heartbeat_seconds: 1\n"
            f"sink:\n  root: {self.root}\n  batch_max_rows: 6\n  batch_max_seconds: 0.2\n"
            f"filters:\n  include: {include}\n"
            "snapshot:\n  chunk_rows: 4\n"
        )
        return path

    async def _run(self, include: str, between: dict[tuple[str, int], list[str]]) -> None:
        self.between = {at: list(statements) for at, statements in between.items()}
        self._chunks, self._last = {}, None
        config = self._config("wide" if "*" in include else "narrow", include)
        await Service(load_config(config), RunOptions(stop_at_end=True)).run()
        assert not self.between, f"statements never ran: {self.between}"

    def execute(self, statements: list[str]) -> None:
        for statement in statements:
            self.server.execute(statement, database=DB)

    async def initial(self) -> None:
        await self._run(f"['{DB}.*']", {})

    async def left_out(self) -> None:
        narrow = f"['{DB}.a', '{DB}.r']"
        await self._run(narrow, {})  # k, e, bag and ebag left out from here
        self.execute(LEFT_OUT_CHANGES)
        await self._run(narrow, {})  # the stream passes their changes
        self.execute(BEFORE_TAKEN_IN)

    async def taken_in_again(self, mid: Callable[[], None] | None = None) -> None:
        write_request(self.root, [f"{DB}.r"])
        self.mid = mid
        await self._run(f"['{DB}.*']", BETWEEN_TAKEN_IN)
        assert self.mid is None, "the reader in the middle never ran"

    async def asked_again(self) -> None:
        write_request(self.root, [f"{DB}.k", f"{DB}.bag", f"{DB}.e"])
        await self._run(f"['{DB}.*']", BETWEEN_ASKED_AGAIN)

    def source(self, table: str) -> Rows:
        with contextlib.closing(self.server.connect(DB)) as conn, conn.cursor() as cur:
            cur.execute(f"SELECT * FROM `{table}`")
            names = [d[0] for d in cur.description]
            return sorted((dict(zip(names, r, strict=True)) for r in cur.fetchall()), key=repr)


class Readers(Protocol):
    """What a readers' test brings to ``run_through``."""

    def check(self, tables: tuple[str, ...] = TABLES) -> None:
        """Every output of ``tables`` equals the source."""

    def carry(self) -> None:
        """Bring the outputs carried from run to run up to date."""


async def run_through(
    scenario: Scenario, readers: Readers, after_first: Callable[[], None] = lambda: None
) -> None:
    """The four runs, ``readers`` checked after each (``after_first``: once the first is
    checked), and the ``truncate`` records each snapshot again wrote."""
    await scenario.initial()
    readers.check()
    after_first()
    await scenario.left_out()
    readers.check(tables=("a", "r"))  # the others hold what landed before they left
    before = len(scenario.resets())  # keyless tables' snapshots have one each
    await scenario.taken_in_again(mid=readers.carry)
    assert sorted(scenario.resets()[before:]) == sorted([*LEFT_OUT, "r"])
    readers.check()
    before = len(scenario.resets())
    await scenario.asked_again()
    assert sorted(scenario.resets()[before:]) == ["bag", "e", "k"]
    readers.check()
