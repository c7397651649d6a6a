"""A snapshot while the source and its operators change things under it: a request taken while
a chunk is read or a commit is under way, a key that changes between two chunks, a table
renamed away and its name taken again, a column an instant ALTER takes away after a chunk's
read view opened. Each lands every row of the source, loses no request and does not stop.

The daemon runs in this process (``Service``); monkeypatching only places the source's DDL or
the request between two steps of the snapshot, or makes a step slow."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

import replicator.service as service_module
from replicator.config import load_config
from replicator.pipeline.pipeline import Pipeline
from replicator.service import RunOptions, Service
from replicator.snapshot.reader import ReadPoint, SnapshotReader
from replicator.snapshot.requests import write_request
from tests.harness.mariadb import MariaDBServer
from tests.live.test_snapshot import folded, selected

pytestmark = pytest.mark.live


def _config(server: MariaDBServer, root: Path, path: Path, extra: str = "") -> Path:
    path.write_text(
        "service:\n  http_enabled: false\n"
        f"source:\n  host: {server.host}\n  port: {server.port}\n  user: repl\n"
        f"  password: replpass\n  server_id: {5000 + os.getpid() % 1000}\n"
        "  heartbeat_seconds: 1\n"
        f"sink:\n  root: {root}\n  batch_max_rows: 5000\n" + extra
    )
    return path


def _landed(root: Path, db: str, table: str) -> pa.Table:
    return ds.dataset(str(root / db / table), format="parquet").to_table()


def _state(root: Path, db: str, table: str, key: str) -> dict[Any, dict[str, Any]]:
    """The landed rows folded in ``_seq`` order by ``key`` (latest wins; deletes remove)."""
    state: dict[Any, dict[str, Any]] = {}
    for row in sorted(_landed(root, db, table).to_pylist(), key=lambda r: r["_seq"]):
        if row["_op"] == "d":
            state.pop(row[key], None)
        else:
            state[row[key]] = row
    return state


def _database(server: MariaDBServer, db: str, *statements: str) -> None:
    server.execute(f"DROP DATABASE IF EXISTS {db}")
    server.execute(f"CREATE DATABASE {db}")
    for statement in statements:
        server.execute(statement, database=db)


@dataclass
class Between:
    """Statements to run at the source once the first chunk was read, before the next read
    view opens (``between_chunks``)."""

    server: MariaDBServer | None = None
    statements: list[tuple[str, str]] = field(default_factory=list)  # (database, statement)

    def plan(self, server: MariaDBServer, db: str, *statements: str) -> None:
        self.server = server
        self.statements.extend((db, s) for s in statements)


@pytest.fixture
def between_chunks(monkeypatch: pytest.MonkeyPatch) -> Iterator[Between]:
    planned = Between()
    begin, rows = SnapshotReader.begin, SnapshotReader.rows
    read = {"chunks": 0}

    def counting(self: SnapshotReader, *args: Any, **kwargs: Any) -> Any:
        read["chunks"] += not kwargs.get("descending")  # a chunk, not its greatest key
        return rows(self, *args, **kwargs)

    def begin_after_the_first(self: SnapshotReader) -> ReadPoint:
        if read["chunks"] == 1 and planned.server is not None:
            while planned.statements:
                db, statement = planned.statements.pop(0)
                planned.server.execute(statement, database=db)
        return begin(self)

    monkeypatch.setattr(SnapshotReader, "rows", counting)
    monkeypatch.setattr(SnapshotReader, "begin", begin_after_the_first)
    yield planned
    assert not planned.statements  # every statement ran


async def _snapshot(server: MariaDBServer, tmp_path: Path, include: str, chunk_rows: int) -> Path:
    root = tmp_path / "landing"
    extra = f"filters:\n  include: ['{include}']\nsnapshot:\n  chunk_rows: {chunk_rows}\n"
    config = _config(server, root, tmp_path / "c.yaml", extra)
    await Service(load_config(config), RunOptions(stop_at_end=True)).run()
    return root


@pytest.mark.parametrize(
    ("db", "create", "alter"),
    [
        # k runs the other way round from id: the old key's last value means nothing in k
        (
            "snapkey_swap",
            "CREATE TABLE t (id INT PRIMARY KEY, k INT NOT NULL, v VARCHAR(8))",
            "ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (k)",
        ),
        # one value for a key of two columns
        (
            "snapkey_widen",
            "CREATE TABLE t (id INT PRIMARY KEY, k INT NOT NULL, v VARCHAR(8))",
            "ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (id, k)",
        ),
    ],
)
async def test_a_key_that_changes_between_chunks_reads_the_table_again(
    mariadb_full_metadata: MariaDBServer,
    tmp_path: Path,
    between_chunks: Between,
    db: str,
    create: str,
    alter: str,
) -> None:
    server = mariadb_full_metadata
    _database(server, db, create, "INSERT INTO t SELECT seq, 11 - seq, 'x' FROM seq_1_to_10")
    between_chunks.plan(server, db, alter)
    root = await _snapshot(server, tmp_path, f"{db}.t", 3)
    assert sorted(_state(root, db, "t", "id")) == list(range(1, 11))
    server.execute(f"DROP DATABASE IF EXISTS {db}")


async def test_a_key_collation_that_changes_between_chunks_reads_the_table_again(
    mariadb_full_metadata: MariaDBServer, tmp_path: Path, between_chunks: Between
) -> None:
    """utf8mb4_bin sorts 'Z' before 'a'; utf8mb4_general_ci after: 'Z' as the last key
    read means another place in the new order."""
    server = mariadb_full_metadata
    db = "snapkey_collation"
    _database(
        server,
        db,
        "CREATE TABLE t (k VARCHAR(8) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PRIMARY KEY, "
        "n INT)",
        "INSERT INTO t VALUES ('Z', 1), ('a', 2), ('b', 3)",
    )
    between_chunks.plan(
        server,
        db,
        "ALTER TABLE t MODIFY k VARCHAR(8) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci",
    )
    root = await _snapshot(server, tmp_path, f"{db}.t", 1)
    assert sorted(row["n"] for row in _state(root, db, "t", "k").values()) == [1, 2, 3]
    server.execute(f"DROP DATABASE IF EXISTS {db}")


async def test_a_table_renamed_away_whose_name_is_taken_again_is_followed(
    mariadb_full_metadata: MariaDBServer, tmp_path: Path, between_chunks: Between
) -> None:
    """``RENAME TABLE t TO t_old; CREATE TABLE t LIKE t_old`` after the first chunk: the
    snapshot goes on with ``t_old``, not with the new, empty ``t``."""
    server = mariadb_full_metadata
    db = "snap_rotate"
    _database(
        server,
        db,
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(8))",
        "INSERT INTO t SELECT seq, 'x' FROM seq_1_to_6",
    )
    between_chunks.plan(server, db, "RENAME TABLE t TO t_old", "CREATE TABLE t LIKE t_old")
    root = await _snapshot(server, tmp_path, f"{db}.*", 2)
    # the rows read before the rename landed under t (the rename record moves them to t_old)
    before = sorted(_landed(root, db, "t").column("id").to_pylist())
    after = sorted(_landed(root, db, "t_old").column("id").to_pylist())
    assert before == [1, 2]
    assert after == [3, 4, 5, 6]
    server.execute(f"DROP DATABASE IF EXISTS {db}")


@pytest.mark.parametrize(
    "rename",
    [
        "RENAME TABLE a TO tmp, b TO a, tmp TO b",  # a swap
        "RENAME TABLE b TO c, a TO b",  # a rotation: b, still queued, moves on to c
    ],
)
async def test_tables_that_swap_or_rotate_names_mid_snapshot_are_each_read_once(
    mariadb_full_metadata: MariaDBServer, tmp_path: Path, between_chunks: Between, rename: str
) -> None:
    """After the first chunk of ``a``, ``a`` takes the name of ``b``, still queued, which
    takes another: each queued entry follows its table, so both are read through, once."""
    server = mariadb_full_metadata
    db = "snap_swap"
    _database(
        server,
        db,
        "CREATE TABLE a (id INT PRIMARY KEY, v VARCHAR(8))",
        "CREATE TABLE b (id INT PRIMARY KEY, v VARCHAR(8))",
        "INSERT INTO a SELECT seq, concat('a', seq) FROM seq_1_to_10",
        "INSERT INTO b SELECT seq, concat('b', seq) FROM seq_1_to_10",
    )
    between_chunks.plan(server, db, rename)
    root = await _snapshot(server, tmp_path, f"{db}.*", 3)
    names = sorted(name for (name,) in server.query(f"SHOW TABLES FROM {db}"))
    state = folded(root)
    assert sorted(state) == [f"{db}.{name}" for name in names]
    for name in names:
        assert state[f"{db}.{name}"] == selected(server, db, name, "id"), name
    read = sum(
        _landed(root, db, name).num_rows for name in ("a", "b", "c") if (root / db / name).is_dir()
    )
    assert read == 20  # every row once: none read twice
    server.execute(f"DROP DATABASE IF EXISTS {db}")


def _ddl_once_a_read_view_opens(
    monkeypatch: pytest.MonkeyPatch, server: MariaDBServer, db: str, view: int, statement: str
) -> dict[str, int]:
    """Run ``statement`` once the ``view``-th chunk's read view is open, before its SELECT;
    returns the count of read views opened (``open``)."""
    begin = SnapshotReader.begin
    views = {"open": 0}

    def begin_then_ddl(self: SnapshotReader) -> ReadPoint:
        point = begin(self)
        views["open"] += 1
        if views["open"] == view:
            server.execute(statement, database=db)
        return point

    monkeypatch.setattr(SnapshotReader, "begin", begin_then_ddl)
    return views


@pytest.mark.parametrize(
    "alter", ["ALTER TABLE t DROP COLUMN v", "ALTER TABLE t RENAME COLUMN v TO w"]
)
async def test_a_column_taken_away_after_the_read_view_opened_does_not_stop_the_run(
    mariadb_full_metadata: MariaDBServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    alter: str,
) -> None:
    """An instant ALTER committed between a chunk's read view and its SELECT: the SELECT
    names a column the table no longer has (1054); the chunk is read again past the DDL."""
    server = mariadb_full_metadata
    db = "snap_instant"
    _database(
        server,
        db,
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(8))",
        "INSERT INTO t SELECT seq, 'x' FROM seq_1_to_6",
    )
    views = _ddl_once_a_read_view_opens(monkeypatch, server, db, 2, alter)
    root = await _snapshot(server, tmp_path, f"{db}.t", 2)
    assert views["open"] >= 3
    assert sorted(_state(root, db, "t", "id")) == [1, 2, 3, 4, 5, 6]
    server.execute(f"DROP DATABASE IF EXISTS {db}")


async def test_columns_that_swap_names_after_the_read_view_opened_are_read_again(
    mariadb_full_metadata: MariaDBServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An instant swap of two columns' names between a chunk's read view and its SELECT: the
    SELECT takes the names as the table stands then, so each column's values would land
    under the other's field id. The chunk is dropped and read again past the ALTER."""
    server = mariadb_full_metadata
    db = "snap_column_swap"
    _database(
        server,
        db,
        "CREATE TABLE t (id INT PRIMARY KEY, a INT, b INT)",
        "INSERT INTO t SELECT seq, 10 + seq, 20 + seq FROM seq_1_to_4",
    )
    begin = SnapshotReader.begin
    swap = "ALTER TABLE t RENAME COLUMN a TO b, RENAME COLUMN b TO a, ALGORITHM=INSTANT"
    views = _ddl_once_a_read_view_opens(monkeypatch, server, db, 1, swap)
    root = await _snapshot(server, tmp_path, f"{db}.t", 2)
    monkeypatch.setattr(SnapshotReader, "begin", begin)
    await _snapshot(server, tmp_path, f"{db}.t", 2)  # lands the ALTER, if the first did not
    assert views["open"] >= 2
    want = selected(server, db, "t", "id")
    assert want[(1,)] == {"id": 1, "a": 21, "b": 11}
    assert folded(root)[f"{db}.t"] == want
    server.execute(f"DROP DATABASE IF EXISTS {db}")


async def _big_asked_for(
    server: MariaDBServer, tmp_path: Path, db: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, Path]:
    """A landing zone streaming ``db`` (big: 5 rows, small: 3) from a GTID start (no
    snapshot), brought to the end, then a snapshot of ``big`` asked for, taken within 50 ms
    by a running daemon; returns its root and config."""
    _database(
        server,
        db,
        "CREATE TABLE big (id INT PRIMARY KEY, v INT)",
        "CREATE TABLE small (id INT PRIMARY KEY, v INT)",
        "INSERT INTO big SELECT seq, seq FROM seq_1_to_5",
        "INSERT INTO small SELECT seq, seq FROM seq_1_to_3",
    )
    start = server.binlog_status().gtid_binlog_pos
    root = tmp_path / "landing"
    extra = f"start:\n  gtid: '{start}'\nfilters:\n  include: ['{db}.*']\n"
    config = _config(server, root, tmp_path / "c.yaml", extra)
    await Service(load_config(config), RunOptions(stop_at_end=True)).run()
    write_request(root, [f"{db}.big"])
    monkeypatch.setattr(service_module, "GUARD_SECONDS", 0.05)
    return root, config


def _small_is_kept(root: Path, db: str) -> None:
    """``small``'s request is honoured: its rows landed, or the request is still queued in
    the checkpoint or waiting as a file."""
    checkpoint = json.loads((root / "_state" / "checkpoint.json").read_text())
    waiting = list((root / "_state" / "snapshot-requests").glob("*.json"))
    landed = (
        sorted(_landed(root, db, "small").column("id").to_pylist())
        if (root / db / "small").is_dir()
        else []
    )
    queued = f"{db}.small" in (checkpoint["snapshot"] or {}).get("tables", [])
    assert landed == [1, 2, 3] or queued or waiting, (checkpoint["snapshot"], waiting, landed)


async def test_a_request_taken_while_a_chunk_is_read_is_kept(
    mariadb_full_metadata: MariaDBServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = mariadb_full_metadata
    db = "snap_request_read"
    root, config = await _big_asked_for(server, tmp_path, db, monkeypatch)
    rows = SnapshotReader.rows
    asked = {"small": False}

    def slow(self: SnapshotReader, schema: str, table: str, *args: Any, **kw: Any) -> Any:
        if table == "big" and not asked["small"]:
            asked["small"] = True
            write_request(root, [f"{db}.small"])
            time.sleep(1.0)  # a chunk that takes a second (a large table, a busy source)
        yield from rows(self, schema, table, *args, **kw)

    monkeypatch.setattr(SnapshotReader, "rows", slow)
    await Service(load_config(config), RunOptions(stop_at_end=True)).run()
    assert asked["small"]
    _small_is_kept(root, db)
    server.execute(f"DROP DATABASE IF EXISTS {db}")


async def test_a_request_taken_while_a_commit_is_under_way_is_kept(
    mariadb_full_metadata: MariaDBServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit under way wrote a progress from before the request: the request file must
    stay until a commit has its tables."""
    server = mariadb_full_metadata
    db = "snap_request_commit"
    root, config = await _big_asked_for(server, tmp_path, db, monkeypatch)
    commit_batch = Pipeline._commit_batch
    commits = {"n": 0}

    def slow(self: Pipeline, *args: Any) -> Any:
        commits["n"] += 1
        if commits["n"] == 1:  # the commit of big's snapshot: small is asked for meanwhile
            write_request(root, [f"{db}.small"])
            time.sleep(1.0)  # a commit that takes a second (an object store, a large batch)
        return commit_batch(self, *args)

    monkeypatch.setattr(Pipeline, "_commit_batch", slow)
    await Service(load_config(config), RunOptions(stop_at_end=True)).run()
    assert commits["n"] >= 1
    _small_is_kept(root, db)
    server.execute(f"DROP DATABASE IF EXISTS {db}")


async def test_an_xa_transaction_prepared_before_the_initial_snapshot_is_waited_for(
    mariadb_full_metadata: MariaDBServer, tmp_path: Path
) -> None:
    """Prepared before the stream begins, committed after: its rows are in no event the
    stream reads, and its commit lands nothing. The first read view waits for it to end (the
    stream goes on meanwhile), and so sees its rows."""
    server = mariadb_full_metadata
    db = "snap_xa"
    _database(
        server,
        db,
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(8))",
        "INSERT INTO t VALUES (1, 'a'), (2, 'b')",
    )
    with contextlib.closing(server.connect(db)) as xa, xa.cursor() as cur:
        cur.execute("XA START 'snapxa'")
        cur.execute("INSERT INTO t VALUES (3, 'xa')")
        cur.execute("UPDATE t SET v = 'xa' WHERE id = 1")
        cur.execute("XA END 'snapxa'")
        cur.execute("XA PREPARE 'snapxa'")
        started = time.monotonic()

        def commit_later() -> None:
            time.sleep(2.0)
            cur.execute("XA COMMIT 'snapxa'")

        committer = threading.Thread(target=commit_later)
        committer.start()
        try:
            root = await _snapshot(server, tmp_path, f"{db}.t", 100)
        finally:
            committer.join(30)
    assert time.monotonic() - started >= 2.0
    state = {k: r["v"] for k, r in _state(root, db, "t", "id").items()}
    assert state == {1: "xa", 2: "b", 3: "xa"}
    server.execute(f"DROP DATABASE IF EXISTS {db}")


@pytest.mark.parametrize(
    ("charset", "values"),
    [
        # 'a\\' 'a]' 'ab' 'b': sjis 0x5C as text comes back as 0x815F
        ("sjis", ["0x615c", "0x615d", "0x6162", "0x62"]),
        # NEC-selected IBM 0xED40 comes back as 0xFA5C; NEC 0x8790 as 0x81E0, before it
        ("cp932", ["0x41", "0x8790", "0x889f", "0xed40", "0xee40", "0xf040", "0xfa40"]),
    ],
)
async def test_a_key_whose_text_does_not_go_back_exactly_is_read_whole(
    mariadb_full_metadata: MariaDBServer, tmp_path: Path, charset: str, values: list[str]
) -> None:
    """A key the next chunk's WHERE would quote as text the server converts to other bytes:
    the table is read whole, every row once."""
    server = mariadb_full_metadata
    db = f"snap_{charset}"
    _database(
        server,
        db,
        f"CREATE TABLE t (k VARCHAR(8) CHARACTER SET {charset} PRIMARY KEY, n INT)",
        *(f"INSERT INTO t VALUES (_{charset} {v}, {i})" for i, v in enumerate(values)),
    )
    root = await _snapshot(server, tmp_path, f"{db}.t", 1)
    assert sorted(_landed(root, db, "t").column("n").to_pylist()) == list(range(len(values)))
    server.execute(f"DROP DATABASE IF EXISTS {db}")


async def test_a_char_key_of_a_no_pad_collation_is_read_whole(
    mariadb_full_metadata: MariaDBServer, tmp_path: Path
) -> None:
    """CHAR values are stored padded with spaces and sent without: under a NO PAD collation
    the key's index puts 'a\\t' before 'a' while ``k > 'a\\t'`` leaves 'a' out, so a walk of
    the key would skip rows. The table is read whole, after a truncate record."""
    server = mariadb_full_metadata
    db = "snap_nopad"
    _database(
        server,
        db,
        "CREATE TABLE t (k CHAR(4) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin "
        "PRIMARY KEY, n INT)",
        "INSERT INTO t VALUES ('a', 1), ('a\\t', 2), ('b', 3), ('b\\t', 4)",
    )
    order = [k for (k,) in server.query(f"SELECT k FROM {db}.t ORDER BY k")]
    assert order == ["a\t", "a", "b\t", "b"]  # the index's order, not the values'
    root = await _snapshot(server, tmp_path, f"{db}.t", 1)
    assert folded(root)[f"{db}.t"] == selected(server, db, "t", "k")
    manifests = [json.loads(p.read_text()) for p in (root / "_manifests").glob("*.json")]
    assert [r["op"] for m in manifests for r in m["schema_changes"]] == ["truncate"]
    server.execute(f"DROP DATABASE IF EXISTS {db}")


@pytest.mark.parametrize("chunk", [1, 2], ids=["first-chunk", "second-chunk"])
async def test_a_table_asked_for_again_while_its_chunk_is_handed_over_starts_again(
    mariadb_full_metadata: MariaDBServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    chunk: int,
) -> None:
    """A request for the table being read, taken while a chunk's rows are handed over (the
    service queues it between two awaits of the runner): the table is read again from its
    start after a truncate record, not advanced past the chunk as if nothing was asked."""
    server = mariadb_full_metadata
    db = f"snap_asked_mid_chunk{chunk}"
    _database(
        server,
        db,
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(8))",
        "INSERT INTO t SELECT seq, 'x' FROM seq_1_to_6",
    )
    handed = Pipeline.snapshot_rows
    asked = {"calls": 0, "times": 0}

    async def asked_while_handed(self: Pipeline, *args: Any, **kwargs: Any) -> None:
        await handed(self, *args, **kwargs)
        asked["calls"] += 1
        if asked["calls"] == chunk:
            asked["times"] += 1
            self.snapshot = self.snapshot.add([f"{db}.t"], reset=True)

    monkeypatch.setattr(Pipeline, "snapshot_rows", asked_while_handed)
    root = await _snapshot(server, tmp_path, f"{db}.t", 2)
    assert asked["times"] == 1
    assert folded(root)[f"{db}.t"] == selected(server, db, "t", "id")
    manifests = [json.loads(p.read_text()) for p in (root / "_manifests").glob("*.json")]
    assert [r["op"] for m in manifests for r in m["schema_changes"]] == ["truncate"]
    server.execute(f"DROP DATABASE IF EXISTS {db}")
