"""Snapshots against a live MariaDB: every column type lands from a snapshot exactly as the
binlog lands it, and the progress is exactly-once across kills while writers keep writing.

The type check runs the all-types tables (tests/live/test_all_types.py: every column type
MariaDB has, zero dates, year 0, extreme numbers, every charset) twice into two landing
zones: once as inserts streamed from the binlog, once as a snapshot of the same stored rows
(read as binary result rows). The Parquet files must agree field for field (type and
metadata) and value for value. The same tables read as text result rows give the same
values as binary ones.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import replicator.source.stream as stream_module
from replicator.config import load_config
from replicator.service import RunOptions, Service
from replicator.snapshot.reader import ReadPoint, SnapshotReader
from replicator.source import dump_connection
from tests.harness.mariadb import MariaDBServer, mariadbd_version
from tests.live.daemon import Daemon, new_http_port
from tests.live.test_all_types import TABLES, WORKLOAD_SQL_MODE, _create_sql

pytestmark = pytest.mark.live
ROOT = Path(__file__).resolve().parents[2]
DB = "snap_types"
RUNS_METRIC = "replicator_transactions_in_runs_total"
METADATA = ("_op", "_seq", "_gtid", "_ts", "_server_id", "_binlog_file", "_binlog_pos")


def _config(server: MariaDBServer, root: Path, path: Path, extra: str = "") -> Path:
    path.write_text(
        "service:\n  http_enabled: false\n"
        f"source:\n  host: {server.host}\n  port: {server.port}\n  user: repl\n"
        f"  password: replpass\n  server_id: {5000 + os.getpid() % 1000}\n"
        f"sink:\n  root: {root}\n  batch_max_rows: 5000\n" + extra
    )
    return path


def _run(config: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "replicator.cli", *args, "--config", str(config)],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    return done


def _landed(root: Path, table: str, db: str = DB) -> pa.Table:
    directory = root / db / table
    return ds.dataset(str(directory), format="parquet").to_table().sort_by("id")


def _all_types(server: MariaDBServer, db: str) -> str:
    """``db`` made anew with the all-types tables and their rows; the GTID position between
    the tables and the rows."""
    server.execute(f"DROP DATABASE IF EXISTS {db}")
    server.execute(f"CREATE DATABASE {db}")
    for table in TABLES:
        server.execute(_create_sql(table), database=db)
    start = server.binlog_status().gtid_binlog_pos
    with contextlib.closing(server.connect(db)) as conn, conn.cursor() as cur:
        cur.execute(f"SET SESSION sql_mode = '{WORKLOAD_SQL_MODE}', time_zone = '+00:00'")
        for table in TABLES:
            names = ", ".join(f"`{n}`" for n in table.names)
            for i in range(table.rows):
                values = ", ".join(c.values[i] for c in table.columns)
                cur.execute(f"INSERT INTO `{table.name}` ({names}) VALUES ({i + 1}, {values})")
    return start


def _daemon_config(
    server: MariaDBServer, tmp_path: Path, port: int, start: str, include: str, extra: str = ""
) -> Path:
    """A daemon's config: from GTID ``start``, tables ``include``, batches due after 0.2 s,
    the landing zone ``tmp_path / "landing"``, its HTTP on ``port``."""
    config = tmp_path / "r.yaml"
    config.write_text(
        f"source:\n  host: {server.host}\n  port: {server.port}\n  user: repl\n"
        f"  password: replpass\n  server_id: {6000 + os.getpid() % 1000}\n"
        "  heartbeat_seconds: 1\n"
        f"start:\n  gtid: '{start}'\n"
        f"sink:\n  root: {tmp_path / 'landing'}\n  batch_max_seconds: 0.2\n"
        f"filters:\n  include: ['{include}']\n"
        f"service:\n  http_port: {port}\n" + extra
    )
    return config


def _three_rows(server: MariaDBServer, db: str) -> None:
    """Database ``db`` anew, with table ``t`` (id INT key, v VARCHAR(8)) of three rows."""
    server.execute(f"DROP DATABASE IF EXISTS {db}")
    server.execute(f"CREATE DATABASE {db}")
    server.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(8))", database=db)
    server.execute("INSERT INTO t VALUES (1, 'x'), (2, 'y'), (3, 'z')", database=db)


Folded = dict[str, dict[tuple[Any, ...], dict[str, Any]]]


def _field_names(schema: pa.Schema) -> dict[str, int]:
    """A file's (or a record's) table columns: name -> field id."""
    return {
        f.name: int(f.metadata[b"PARQUET:field_id"])
        for f in schema
        if f.metadata and b"PARQUET:field_id" in f.metadata
    }


def folded(root: Path) -> Folded:
    """The landing zone's keyed tables folded as docs/landing-zone.md tells a reader to: the
    committed row changes and lifecycle records in ``_seq`` order (``create``, ``truncate``
    and ``drop`` empty a table, ``rename`` moves it), the latest change per key (an update
    moves its row from ``_before_key``), each column under its newest name (by field id):
    table -> key values -> row."""
    events: list[tuple[int, str, Any]] = []
    newest: dict[int, tuple[int, str]] = {}  # field id -> (_seq, name)

    def named(seq: int, schema: pa.Schema) -> dict[str, int]:
        ids = _field_names(schema)
        for name, fid in ids.items():
            if newest.get(fid, (-1, ""))[0] <= seq:
                newest[fid] = (seq, name)
        return ids

    for path in sorted((root / "_manifests").glob("*.json")):
        manifest = json.loads(path.read_text())
        for record in manifest["schema_changes"]:
            if record.get("schema"):
                schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(record["schema"])))
                named(record["seq"], schema)
            events.append((record["seq"], "record", record))
        for entry in manifest["files"]:
            table = pq.read_table(root / entry["path"])
            ids = named(entry["last_seq"], table.schema)
            key = json.loads((table.schema.metadata or {})[b"replicator.primary_key"])
            assert key, f"{entry['table']} has no key: this fold is for keyed tables"
            for row in table.to_pylist():
                events.append((row["_seq"], "row", (entry["table"], ids, key, row)))
    state: Folded = {}
    for _, kind, item in sorted(events, key=lambda e: e[0]):
        if kind == "record":
            if item["op"] in ("create", "truncate", "drop"):
                state.pop(item["table"], None)
            elif item["op"] == "rename":
                state[item["to"]] = state.pop(item["table"], {})
            continue
        name, ids, key, row = item
        rows = state.setdefault(name, {})
        before = row["_before_key"]
        if row["_op"] == "u" and before is not None:
            rows.pop(tuple(before[k] for k in key), None)
        if row["_op"] == "d":
            rows.pop(tuple(row[k] for k in key), None)
        else:
            data = {newest[fid][1]: row[column] for column, fid in ids.items()}
            rows[tuple(row[k] for k in key)] = data
    return state


def selected(server: MariaDBServer, db: str, table: str, key: str) -> dict[tuple[Any, ...], Any]:
    """The source's rows of ``db.table`` as ``folded`` has them (a key of one column)."""
    with contextlib.closing(server.connect(db)) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT * FROM `{table}`")
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
    return {(row[key],): row for row in rows}


def _executed(server: MariaDBServer) -> int:
    """How many prepared statements the server has executed (``Com_stmt_execute``)."""
    return int(server.query("SHOW GLOBAL STATUS LIKE 'Com_stmt_execute'")[0][1])


def test_snapshot_lands_every_type_as_the_binlog_does(
    mariadb_full_metadata: MariaDBServer, tmp_path: Path
) -> None:
    server = mariadb_full_metadata
    if mariadbd_version() < (10, 10):
        pytest.skip("INET4 needs MariaDB 10.10+")
    start = _all_types(server, DB)
    include = f"filters:\n  include: ['{DB}.*']\n"
    streamed, snapshot = tmp_path / "streamed", tmp_path / "snapshot"
    _run(
        _config(server, streamed, tmp_path / "a.yaml", f"start:\n  gtid: '{start}'\n" + include),
        "run", "--stop-at-end",
    )  # fmt: skip
    executed = _executed(server)
    done = _run(
        _config(server, snapshot, tmp_path / "b.yaml", include + "snapshot:\n  chunk_rows: 2\n"),
        "run", "--stop-at-end",
    )  # fmt: skip
    assert '"initial snapshot"' in done.stderr
    # every chunk was read as a prepared statement's binary rows
    assert _executed(server) - executed >= sum(t.rows for t in TABLES) // 2
    compared = 0
    for table in TABLES:
        a, b = _landed(streamed, table.name), _landed(snapshot, table.name)
        data = [n for n in a.column_names if n not in METADATA]
        assert data == [n for n in b.column_names if n not in METADATA], table.name
        assert set(a.column("_op").to_pylist()) == {"c"}
        assert set(b.column("_op").to_pylist()) == {"r"}
        for name in data:
            fa, fb = a.schema.field(name), b.schema.field(name)
            assert fa.type == fb.type, (table.name, name)
            assert fa.metadata == fb.metadata, (table.name, name)
            assert a.column(name).to_pylist() == b.column(name).to_pylist(), (table.name, name)
            compared += 1
    assert compared > 100
    server.execute(f"DROP DATABASE IF EXISTS {DB}")


def test_binary_and_text_result_rows_read_every_type_alike(
    mariadb_full_metadata: MariaDBServer,
) -> None:
    """The snapshot reads rows as a prepared statement's binary rows; the same tables read as
    text rows (the reading kept for result types the binary reading does not know) give the
    same blocks, value for value: every column type MariaDB has, zero dates, year 0, extreme
    numbers, every charset. The server counts the prepared statements of the binary reads
    only."""
    from replicator.config import Secret, SourceConfig
    from replicator.snapshot.columns import column_defs
    from replicator.snapshot.reader import SnapshotReader
    from replicator.source.catalog import read_catalog, read_traits
    from tests.blocks import block_rows

    server = mariadb_full_metadata
    if mariadbd_version() < (10, 10):
        pytest.skip("INET4 needs MariaDB 10.10+")
    db = "snap_protocols"
    _all_types(server, db)
    with contextlib.closing(server.connect(db)) as conn:
        catalog = read_catalog(conn, read_traits(conn))
    cfg = SourceConfig(host=server.host, port=server.port, user="root", password=Secret(""))
    reader = SnapshotReader(cfg, "mariadb")
    compared = 0
    texts: dict[str, list[tuple[object, ...]]] = {}
    try:
        for table in TABLES:
            found = catalog.table(db, table.name)
            assert found is not None, table.name
            defs = column_defs(found)
            read: dict[bool, list[tuple[object, ...]]] = {}
            for binary in (True, False):
                before = _executed(server)
                rows = reader.rows(db, table.name, defs, (), None, None, binary=binary)
                read[binary] = [row for block, _ in rows for row in block_rows(block)[0]]
                assert _executed(server) - before == (1 if binary else 0), table.name
            assert len(read[True]) == table.rows, table.name
            texts[table.name] = read[False]
            for got, want in zip(read[True], read[False], strict=True):
                assert repr(got) == repr(want), (table.name, got, want)
                compared += len(want)
        # a server that takes no prepared statement: the same rows, read as text
        server.execute("SET GLOBAL max_prepared_stmt_count = 0")
        try:
            table = TABLES[0]
            found = catalog.table(db, table.name)
            assert found is not None
            before = _executed(server)
            rows = reader.rows(db, table.name, column_defs(found), (), None, None)
            as_text = [row for block, _ in rows for row in block_rows(block)[0]]
            assert _executed(server) == before
        finally:
            server.execute("SET GLOBAL max_prepared_stmt_count = DEFAULT")
        assert repr(as_text) == repr(texts[table.name])
    finally:
        reader.close()
    assert compared > 100
    server.execute(f"DROP DATABASE IF EXISTS {db}")


def test_a_snapshot_requested_while_small_transactions_stream_as_runs(
    mariadb_full_metadata: MariaDBServer, tmp_path: Path
) -> None:
    """`replicator snapshot` while one-row transactions stream in, taken in runs: the daemon
    goes on (a run reaches the snapshot's read views), and the landed changes and snapshot
    rows fold to exactly the table the source holds."""
    import threading

    server = mariadb_full_metadata
    db = "snap_runs"
    server.execute(f"DROP DATABASE IF EXISTS {db}")
    server.execute(f"CREATE DATABASE {db}")
    server.execute(f"CREATE TABLE {db}.a (id INT PRIMARY KEY, v INT)", database=db)
    server.execute(
        f"INSERT INTO {db}.a SELECT seq, seq FROM seq_1_to_3000", database=db
    )  # before the start: only the snapshot lands these
    start = server.binlog_status().gtid_binlog_pos
    root = tmp_path / "landing"
    port = new_http_port()
    config = _daemon_config(
        server, tmp_path, port, start, f"{db}.a", "snapshot:\n  chunk_rows: 100\n"
    )
    stop = threading.Event()

    def write() -> None:  # one-row autocommit transactions, as fast as they go
        with contextlib.closing(server.connect(db)) as conn, conn.cursor() as cur:
            n = 0
            while not stop.is_set():
                n += 1
                cur.execute(f"INSERT INTO a VALUES ({10_000 + n}, {n})")
                cur.execute(f"UPDATE a SET v = v + 1 WHERE id = {1 + (n * 7919) % 3000}")
                conn.commit()

    daemon = Daemon(config, tmp_path / "daemon.log", port).start()
    writer = threading.Thread(target=write, daemon=True)
    try:
        daemon.wait_for("ready", lambda: daemon.get("/readyz")[0] == 200)
        writer.start()

        def in_runs() -> bool:
            metrics = daemon.get("/metrics")[1]
            found = [line for line in metrics.splitlines() if line.startswith(RUNS_METRIC)]
            return bool(found) and float(found[0].split()[-1]) > 0

        daemon.wait_for("transactions taken in runs", in_runs)
        _run(config, "snapshot", "--tables", f"{db}.a")
        requests = root / "_state" / "snapshot-requests"
        daemon.wait_for("the request taken", lambda: not any(requests.iterdir()))

        def snapshot_done() -> bool:
            checkpoint = json.loads((root / "_state" / "checkpoint.json").read_text())
            return bool(checkpoint["snapshot"]["done"]) and not checkpoint["snapshot"]["tables"]

        daemon.wait_for("the snapshot", snapshot_done, timeout=120)
        stop.set()
        writer.join(30)
        end = server.binlog_status().gtid_binlog_pos

        def caught_up() -> bool:
            checkpoint = json.loads((root / "_state" / "checkpoint.json").read_text())
            return bool(checkpoint["position"].get("mariadb_gtid") == end)

        daemon.wait_for("the stream to the end", caught_up)
        assert daemon.get("/readyz")[0] == 200
    finally:
        stop.set()
        daemon.signal(signal.SIGTERM)
        daemon.wait(60)
    rows = sorted(_landed(root, "a", db).to_pylist(), key=lambda r: r["_seq"])
    assert {r["_op"] for r in rows} == {"r", "c", "u"}
    state: dict[int, int] = {}
    for row in rows:  # the changes in _seq order fold to the table (no deletes here)
        state[row["id"]] = row["v"]
    held = dict(server.query(f"SELECT id, v FROM {db}.a"))
    assert {int(k): int(v) for k, v in held.items()} == state
    server.execute(f"DROP DATABASE IF EXISTS {db}")


def test_a_running_daemon_takes_a_snapshot_request_and_new_tables_of_the_filters(
    mariadb_full_metadata: MariaDBServer, tmp_path: Path
) -> None:
    """`replicator snapshot` while the daemon runs: the table's rows land (as 'r', after a
    stream that had only changes), the request file goes once committed, `status` says done.
    Then a wider filters.include at the next start snapshots the table it takes in."""
    server = mariadb_full_metadata
    db = "snap_requests"
    server.execute(f"DROP DATABASE IF EXISTS {db}")
    server.execute(f"CREATE DATABASE {db}")
    server.execute(f"CREATE TABLE {db}.a (id INT PRIMARY KEY, v VARCHAR(10))", database=db)
    server.execute(f"CREATE TABLE {db}.b (id INT PRIMARY KEY, w INT)", database=db)
    server.execute(f"INSERT INTO {db}.a VALUES (1, 'x'), (2, 'y'), (3, 'z')", database=db)
    server.execute(f"INSERT INTO {db}.b VALUES (10, 1), (20, 2)", database=db)
    start = server.binlog_status().gtid_binlog_pos
    root = tmp_path / "landing"
    port = new_http_port()
    config = _daemon_config(server, tmp_path, port, start, f"{db}.a")
    daemon = Daemon(config, tmp_path / "daemon.log", port).start()
    try:
        daemon.wait_for("ready", lambda: daemon.get("/readyz")[0] == 200)
        server.execute(f"UPDATE {db}.a SET v = 'y2' WHERE id = 2", database=db)
        daemon.wait_for("the update", (root / db / "a").is_dir)
        done = _run(config, "snapshot", "--tables", f"{db}.*")
        assert "snapshot requested" in done.stdout
        requests = root / "_state" / "snapshot-requests"
        daemon.wait_for("the request taken and committed", lambda: not any(requests.iterdir()))

        def snapshot_done() -> bool:
            checkpoint = json.loads((root / "_state" / "checkpoint.json").read_text())
            return bool(checkpoint["snapshot"]["done"]) and not checkpoint["snapshot"]["tables"]

        daemon.wait_for("the snapshot", snapshot_done)
        rows = _landed(root, "a", db)
        ops = sorted(
            zip(rows.column("_op").to_pylist(), rows.column("id").to_pylist(), strict=True)
        )
        assert ops == [("r", 1), ("r", 2), ("r", 3), ("u", 2)]
        snapshot_v = {r["id"]: r["v"] for r in rows.to_pylist() if r["_op"] == "r"}
        assert snapshot_v == {1: "x", 2: "y2", 3: "z"}  # read after the update: its value
        status = json.loads(_run(config, "status", "--json", "--no-source").stdout)
        assert status["snapshot"]["tables"] == [] and status["snapshot"]["done_rows"] == 3
        assert not (root / db / "b").exists()  # not in filters.include: not asked for
        _run(config, "snapshot", "--tables", f"{db}.nope")  # a typo: the daemon says so
        daemon.wait_for(
            "the warning of a request that matched nothing",
            lambda: "snapshot request matched no replicated table" in daemon.log.read_text(),
        )
    finally:
        daemon.signal(signal.SIGTERM)
        daemon.wait(60)
    # a wider include: b is snapshotted at the next start, a is not read again
    config.write_text(config.read_text().replace(f"'{db}.a'", f"'{db}.*'"))
    done = _run(config, "run", "--stop-at-end")
    assert "snapshot of tables newly included" in done.stderr
    assert sorted(_landed(root, "b", db).column("id").to_pylist()) == [10, 20]
    assert _landed(root, "a", db).num_rows == 4
    server.execute(f"DROP DATABASE IF EXISTS {db}")


async def test_a_snapshot_starting_where_the_stream_begins_does_not_wait_for_its_events(
    mariadb_full_metadata: MariaDBServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server may hold the stream's first events back (MariaDB 11 sends them about 0.1 s
    after the dump request). An initial snapshot whose read view stands where the stream
    begins reads its first chunk at once. Here the dump request is held 3 s once the stream
    knows where it begins: the chunk's SELECT still runs before the request goes out, and the
    rows land whole."""
    server = mariadb_full_metadata
    db = "snap_origin"
    _three_rows(server, db)
    dumping = threading.Event()
    seen: dict[str, float] = {}
    request_dump = dump_connection.request_dump
    begin, rows = SnapshotReader.begin, SnapshotReader.rows

    def held_request(*args: Any, **kwargs: Any) -> None:
        dumping.set()  # the stream knows where it begins: it is set before the request
        time.sleep(3)
        seen["dump"] = time.monotonic()
        request_dump(*args, **kwargs)

    def begin_once_dumping(self: SnapshotReader) -> ReadPoint:
        dumping.wait(60)
        return begin(self)

    def first_rows(self: SnapshotReader, *args: Any, **kwargs: Any) -> Any:
        seen.setdefault("select", time.monotonic())
        return rows(self, *args, **kwargs)

    monkeypatch.setattr(stream_module, "request_dump", held_request)
    monkeypatch.setattr(SnapshotReader, "begin", begin_once_dumping)
    monkeypatch.setattr(SnapshotReader, "rows", first_rows)
    root = tmp_path / "landing"
    config = _config(server, root, tmp_path / "c.yaml", f"filters:\n  include: ['{db}.t']\n")
    await Service(load_config(config), RunOptions(stop_at_end=True)).run()
    assert dumping.is_set()
    assert seen["select"] < seen["dump"], seen
    landed = _landed(root, "t", db)
    assert landed.column("id").to_pylist() == [1, 2, 3]
    assert set(landed.column("_op").to_pylist()) == {"r"}
    server.execute(f"DROP DATABASE IF EXISTS {db}")


def test_a_table_whose_key_column_is_left_out_is_read_whole_after_a_truncate(
    mariadb_full_metadata: MariaDBServer, tmp_path: Path
) -> None:
    """With its key column left out (``filters.exclude_columns``) a table's landed rows are
    identified by all their columns, as a keyless table's are: a snapshot of it is read whole
    after a ``truncate`` record, or a second snapshot would add its rows again."""
    server = mariadb_full_metadata
    db = "snap_nokey"
    _three_rows(server, db)
    root = tmp_path / "landing"
    extra = (
        f"filters:\n  include: ['{db}.t']\n  exclude_columns: ['{db}.t.id']\n"
        "snapshot:\n  chunk_rows: 1\n"
    )
    _run(_config(server, root, tmp_path / "c.yaml", extra), "run", "--stop-at-end")
    manifests = [json.loads(p.read_text()) for p in sorted((root / "_manifests").glob("*.json"))]
    records = [r for m in manifests for r in m["schema_changes"] if r["table"] == f"{db}.t"]
    assert [r["op"] for r in records] == ["truncate"]
    landed = _landed_unsorted(root, "t", db)
    assert landed.column_names[:1] == ["v"]
    assert sorted(landed.column("v").to_pylist()) == ["x", "y", "z"]
    assert min(landed.column("_seq").to_pylist()) > records[0]["seq"]
    server.execute(f"DROP DATABASE IF EXISTS {db}")


def _landed_unsorted(root: Path, table: str, db: str) -> pa.Table:
    return ds.dataset(str(root / db / table), format="parquet").to_table()


async def test_a_table_taken_in_again_by_the_filters_lands_no_stale_rows(
    mariadb_full_metadata: MariaDBServer, tmp_path: Path
) -> None:
    """A keyed table the filters leave out for a while, then take in again: its rows deleted
    or moved to another key meanwhile never reached the landing zone. Its snapshot ("tables
    newly included") starts with a ``truncate`` record, so folding gives the source's rows
    (a table emptied meanwhile too: the record comes without rows)."""
    server = mariadb_full_metadata
    db = "snap_refilter"
    server.execute(f"DROP DATABASE IF EXISTS {db}")
    server.execute(f"CREATE DATABASE {db}")
    for statement in (
        "CREATE TABLE a (id INT PRIMARY KEY, v VARCHAR(10))",
        "CREATE TABLE b (id INT PRIMARY KEY, v VARCHAR(10))",
        "CREATE TABLE c (id INT PRIMARY KEY, v VARCHAR(10))",
        "INSERT INTO a VALUES (1, 'a')",
        "INSERT INTO b VALUES (1, 'one'), (2, 'two'), (3, 'three')",
        "INSERT INTO c VALUES (1, 'c1'), (2, 'c2')",
    ):
        server.execute(statement, database=db)
    root = tmp_path / "landing"
    wide = _config(server, root, tmp_path / "w.yaml", f"filters:\n  include: ['{db}.*']\n")
    narrow = _config(server, root, tmp_path / "n.yaml", f"filters:\n  include: ['{db}.a']\n")

    async def run(config: Path) -> None:
        await Service(load_config(config), RunOptions(stop_at_end=True)).run()

    await run(wide)  # the initial snapshot: a, b and c
    await run(narrow)  # b and c left out from here
    for statement in (
        "DELETE FROM b WHERE id = 1",
        "UPDATE b SET id = 20 WHERE id = 2",
        "UPDATE b SET v = 'THREE' WHERE id = 3",
        "DELETE FROM c",
        "INSERT INTO a VALUES (2, 'a2')",
    ):
        server.execute(statement, database=db)
    await run(narrow)  # the stream passes the changes of b and c without landing them
    await run(wide)  # b and c taken in again: snapshotted
    state = folded(root)
    assert state[f"{db}.a"] == selected(server, db, "a", "id")
    assert state[f"{db}.b"] == selected(server, db, "b", "id")
    assert selected(server, db, "c", "id") == {}
    assert state.get(f"{db}.c", {}) == {}
    manifests = [json.loads(p.read_text()) for p in (root / "_manifests").glob("*.json")]
    resets = [r["table"] for m in manifests for r in m["schema_changes"] if r["op"] == "truncate"]
    assert sorted(resets) == [f"{db}.b", f"{db}.c"]  # the initial snapshot needs none
    server.execute(f"DROP DATABASE IF EXISTS {db}")


@pytest.mark.parametrize("metadata", ["mariadb", "mariadb_full_metadata"])
def test_a_table_keyed_by_a_unique_index_lands_alike_from_snapshot_and_stream(
    metadata: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """No PRIMARY KEY but a UNIQUE index on NOT NULL columns: with binlog_row_metadata=FULL
    the TABLE_MAP logs that index as the key (the server takes it for one), where the schema
    history and the snapshot count none; a composite key declared out of column order: a
    stream read without column names took it in column order. Snapshot and stream files
    must record one key, or no reader builds the table."""
    from replicator.delta.materialize import materialize_delta
    from tests.harness.duckdb_delta import read_delta

    server: MariaDBServer = request.getfixturevalue(metadata)
    db = f"keys_{metadata}"
    server.execute(f"DROP DATABASE IF EXISTS {db}")
    server.execute(f"CREATE DATABASE {db}")
    server.execute("CREATE TABLE u (id INT NOT NULL, v INT, UNIQUE KEY (id))", database=db)
    server.execute("CREATE TABLE r (a INT, b INT, v INT, PRIMARY KEY (b, a))", database=db)
    for table in ("u", "r"):
        rows = "(1, 1, 1), (2, 2, 2), (3, 3, 3)" if table == "r" else "(1, 1), (2, 2), (3, 3)"
        server.execute(f"INSERT INTO {table} VALUES {rows}", database=db)
    root = tmp_path / "landing"
    config = _config(server, root, tmp_path / "c.yaml", f"filters:\n  include: ['{db}.*']\n")
    _run(config, "run", "--stop-at-end")  # the initial snapshot
    for table in ("u", "r"):
        key = "id" if table == "u" else "a"
        server.execute(f"UPDATE {table} SET v = 20 WHERE {key} = 2", database=db)
        server.execute(f"DELETE FROM {table} WHERE {key} = 3", database=db)
    server.execute("INSERT INTO u VALUES (4, 4)", database=db)
    server.execute("INSERT INTO r VALUES (4, 4, 4)", database=db)
    _run(config, "run", "--stop-at-end")  # the changes, streamed

    materialize_delta(root, tmp_path / "out")
    for table, columns in (("u", "id, v"), ("r", "a, b, v")):
        _, landed = read_delta(tmp_path / "out" / db / table)
        assert sorted(landed) == sorted(selected_rows(server, db, f"SELECT {columns} FROM {table}"))


def selected_rows(server: MariaDBServer, db: str, sql: str) -> list[tuple[Any, ...]]:
    with contextlib.closing(server.connect(db)) as conn, conn.cursor() as cur:
        cur.execute(sql)
        return [tuple(row) for row in cur.fetchall()]
