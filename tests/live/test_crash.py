"""Exactly-once landing through crashes: SIGKILL at random instants and inside each commit
step (the schema-history write included), restart each time; at the end the landing zone holds
exactly the source's row changes.

Two oracles: the server's binlog, decoded apart from the landing (per table, the multiset of
(``_op``, row values) must be equal, and every ``_seq`` unique); and the server's tables
themselves: the state the landed changes add up to (the latest change per primary key by
``_seq``, deletes removed) must be exactly what ``SELECT *`` returns, which does not depend
on our decoder at all.

DDL runs in the stream too (``notes`` gains and loses columns and is truncated): the committed
schema history must end with exactly the columns the source shows, and each DDL statement must
be recorded once, in the history and as a lifecycle record of one manifest, whatever the kills.

The same test runs on an object store (moto's S3 API server, started by the test): no
renames, data files under their final names before the manifest, the writer's lease instead
of flock. It is lighter there (each commit step killed once, and a few random instants,
instead of 36+ kills) to keep the suite's time; both oracles are the same, read back through
the manifests from the S3 server, and a listing of the bucket may show no data file that no
manifest names once the last run is done.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

from replicator.binlog import events as ev
from replicator.landed.committed import committed_files, read_file
from replicator.sink.committed_history import load_committed_history
from replicator.sink.landing import FAULT_ENV
from replicator.source.binlog_file import read_binlog_file
from replicator.storage import LocalStore, ObjectStoreOptions, Store, open_store
from tests.harness.mariadb import MariaDBServer
from tests.harness.s3 import ACCESS_KEY, REGION, SECRET_KEY, S3Server

pytestmark = pytest.mark.live

KEYS = {"orders": ("id",), "items": ("id", "line"), "events": ("id",)}
TABLES = {
    "orders": "id INT PRIMARY KEY, customer INT, amount DECIMAL(12,2), note VARCHAR(100)",
    "items": "id INT, line INT, sku VARCHAR(20), qty BIGINT UNSIGNED, PRIMARY KEY (id, line)",
    "events": "id BIGINT PRIMARY KEY, at DATETIME(6), payload TEXT",
}
STEPS = ("data", "history-mid", "history", "manifest", "publish-mid", "publish", "checkpoint")
NOTES = "id INT PRIMARY KEY, v VARCHAR(20)"  # the table DDL runs on (checked by its history)
DDL_EVERY = 20  # transactions (the history kill points fire only when DDL commits)
MAX_TRANSACTIONS = 20000  # a cap: the writer runs until the last kill
# how long a run with a fault ``step:N`` may take before it is killed from outside: the fault
# fires the N-th time (1 or 2) the run reaches the step, within its first seconds (a history
# step is reached by a batch that holds DDL, one every DDL_EVERY transactions), or never (the
# workload is over); a longer wait only waited for nothing
FAULT_WAIT = 8.0


# kill schedules: the fault for each kill in turn (None: a random instant), repeated until
# every step has fired at least once
LOCAL_SCHEDULE: tuple[str | None, ...] = (*STEPS, None)
S3_SCHEDULE: tuple[str | None, ...] = (*STEPS, None, None, None, None)


def _config(path: Path, server: MariaDBServer, sink: str) -> Path:
    path.write_text(
        f"source:\n  host: {server.host}\n  port: {server.port}\n  user: repl\n"
        "  password_env: CRASH_TEST_PASSWORD\n  server_id: 3131\n  heartbeat_seconds: 1\n"
        "  reconnect_initial_delay: 0.05\n"
        f"sink:\n{sink}  batch_max_rows: 40\n  batch_max_seconds: 0.2\n"
        "  large_transaction_rows: 1000000\n"
        "filters:\n  include: ['shop.*']\n"
        # no metrics server: a port another test's daemon holds must not fail a restart
        "service:\n  http_enabled: false\n"
    )
    return path


def _workload(
    server: MariaDBServer, seed: int, stop: threading.Event, counted: list[int], ddl: list[str]
) -> None:
    """Transactions until ``stop`` (at most MAX_TRANSACTIONS), paced so that the daemon is
    killed and restarted many times while they run; ``counted`` gets how many ran, ``ddl``
    every DDL statement."""
    rng = random.Random(seed)
    conn = server.connect("shop")
    n = 0
    added: list[str] = []
    try:
        with conn.cursor() as cur:
            while n < MAX_TRANSACTIONS and not stop.is_set():
                if n % DDL_EVERY == DDL_EVERY - 1:
                    if len(added) >= 3 or (added and rng.random() < 0.3):
                        statement = f"ALTER TABLE notes DROP COLUMN {added.pop(0)}"
                    elif rng.random() < 0.2:
                        statement = "TRUNCATE TABLE notes"
                    else:
                        added.append(f"c{n}")
                        statement = f"ALTER TABLE notes ADD COLUMN c{n} INT DEFAULT {n}"
                    cur.execute(statement)
                    ddl.append(statement)
                    cur.execute("INSERT INTO notes (id, v) VALUES (%s, 'x')", (n,))
                cur.execute("BEGIN")
                for _ in range(rng.randrange(1, 6)):
                    key = rng.randrange(300)
                    cur.execute(
                        "INSERT INTO orders VALUES (%s, %s, %s, %s) ON DUPLICATE KEY UPDATE "
                        "amount = amount + 1, note = VALUES(note)",
                        (key, rng.randrange(50), f"{rng.randrange(10000)}.25", f"n{n}"),
                    )
                    cur.execute(
                        "INSERT INTO items VALUES (%s, %s, %s, %s) ON DUPLICATE KEY UPDATE "
                        "qty = qty + 1",
                        (key, rng.randrange(3), f"sku{n}", rng.randrange(2**63)),
                    )
                if rng.random() < 0.3:
                    cur.execute(
                        "INSERT INTO events VALUES (%s, NOW(6), %s)", (n, "x" * rng.randrange(300))
                    )
                if rng.random() < 0.15:
                    cur.execute("DELETE FROM orders WHERE id = %s", (rng.randrange(300),))
                cur.execute("ROLLBACK" if rng.random() < 0.05 else "COMMIT")
                n += 1
                time.sleep(0.02)
    finally:
        conn.close()
        counted.append(n)


# (op, key) of each row change, counted
Changes = Counter[tuple[object, tuple[object, ...]]]


def _expected(server: MariaDBServer, start_file: str, start_pos: int) -> dict[str, Changes]:
    server.flush_binlogs()
    out: dict[str, Changes] = {name: Counter() for name in TABLES}
    for name in server.binlog_files():
        for event in read_binlog_file(server.binlog_path(name)):
            if not isinstance(event, ev.RowsEvent) or event.table.table not in TABLES:
                continue
            if (name, event.position) < (start_file, start_pos):
                continue
            rows = out[event.table.table]
            if event.kind is ev.RowsKind.UPDATE:
                rows.update(("u", _key(v)) for v in event.after)
            elif event.kind is ev.RowsKind.INSERT:
                rows.update(("c", _key(v)) for v in event.rows)
            else:
                rows.update(("d", _key(v)) for v in event.rows)
    return out


def _key(values: tuple[object, ...]) -> tuple[object, ...]:
    return tuple(str(v) for v in values)


def _table(store: Store, name: str) -> pa.Table:
    """Every committed change of ``shop.<name>``, read through the manifests."""
    files = committed_files(store).get(f"shop.{name}", [])
    return pa.concat_tables([read_file(f) for f in files], promote_options="permissive")


def _landed(store: Store) -> tuple[dict[str, Changes], list[int]]:
    out: dict[str, Changes] = {name: Counter() for name in TABLES}
    seqs: list[int] = []
    for name in TABLES:
        table = _table(store, name)
        data = table.to_pylist()
        columns = [c for c in table.column_names if not c.startswith("_")]
        for row in data:
            values = tuple(row[c] for c in columns)
            out[name][(row["_op"], _key(values))] += 1
            seqs.append(row["_seq"])
    return out, seqs


def _state(store: Store, name: str) -> set[tuple[object, ...]]:
    """The table as the landed changes leave it: the latest change per key, deletes removed."""
    table = _table(store, name)
    columns = [c for c in table.column_names if not c.startswith("_")]
    latest: dict[tuple[object, ...], dict[str, object]] = {}
    for row in sorted(table.to_pylist(), key=lambda r: r["_seq"]):
        key = tuple(row[c] for c in KEYS[name])
        if row["_op"] == "d":
            latest.pop(key, None)
        else:
            latest[key] = row
    return {tuple(row[c] for c in columns) for row in latest.values()}


def _run(
    config: Path,
    log: Path,
    *,
    stop_at_end: bool = False,
    fault: str | None = None,
    extra_env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    env = dict(os.environ, CRASH_TEST_PASSWORD="replpass", **(extra_env or {}))
    env.pop(FAULT_ENV, None)
    if fault:
        env[FAULT_ENV] = fault
    args = [sys.executable, "-m", "replicator.cli", "run", "--config", str(config)]
    if stop_at_end:
        args.append("--stop-at-end")
    with open(log, "wb") as stderr:  # a file, not a pipe nobody drains while it runs
        return subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=stderr)


def test_sigkill_anywhere_lands_everything_exactly_once(tmp_path: Path) -> None:
    root = tmp_path / "landing"
    _crash_test(tmp_path, f"  root: {root}\n", LocalStore(root), {}, LOCAL_SCHEDULE, 36)
    assert not list(root.glob("shop/*/.*.tmp"))
    listed = {str(p.relative_to(root)) for p in root.glob("shop/*/part-*.parquet")}
    assert listed == _committed_keys(LocalStore(root))


def test_sigkill_anywhere_lands_everything_exactly_once_on_s3(
    tmp_path: Path, s3_server: S3Server
) -> None:
    url = f"s3://{s3_server.bucket('crash-landing')}/zone"
    store = open_store(
        url,
        ObjectStoreOptions(
            endpoint=s3_server.endpoint, region=REGION, access_key=ACCESS_KEY, secret_key=SECRET_KEY
        ),
    )
    # what a batch killed between its data files and its manifest leaves under a name its
    # replay does not take again (the replays here mostly rewrite the same names)
    stray = "shop/orders/part-99999999999999999999.parquet"
    _crash_test(
        tmp_path,
        s3_server.sink_yaml(url),
        store,
        s3_server.env(),
        S3_SCHEDULE,
        0,
        before_last_run=lambda: store.write(stray, b"PAR1 uncommitted"),
    )
    # the last run's recovery deleted what crashed batches left: every data file a listing
    # of the bucket shows is one a manifest names
    assert not store.exists(stray)
    listed = {key for key in store.list("shop") if "/part-" in key}
    assert listed == _committed_keys(store)
    assert not [key for key in store.list() if key.endswith(".tmp")]


def _committed_keys(store: Store) -> set[str]:
    return {f.key for files in committed_files(store).values() for f in files}


def _crash_test(
    tmp_path: Path,
    sink: str,
    store: Store,
    env: dict[str, str],
    schedule: tuple[str | None, ...],
    min_kills: int,
    before_last_run: Callable[[], None] | None = None,
) -> None:
    """Kill the daemon by ``schedule`` (at least ``min_kills`` times, and until every commit
    step fired) while a workload runs; then check the landing zone in ``store`` against both
    oracles."""
    min_kills = max(min_kills, len(schedule))
    with MariaDBServer(["--binlog-row-metadata=FULL"]) as server:
        server.execute("CREATE DATABASE shop")
        for name, columns in (*TABLES.items(), ("notes", NOTES)):
            server.execute(f"CREATE TABLE shop.{name} ({columns})")
        status = server.binlog_status()
        config = _config(tmp_path / "replicator.yaml", server, sink)
        # start where the workload starts
        config.write_text(config.read_text() + f"start:\n  gtid: '{status.gtid_binlog_pos}'\n")
        # a first batch seeds and commits the schema history before any DDL runs (a history
        # seeded after DDL it has not seen would not know ``notes`` at the start position)
        server.execute("INSERT INTO shop.notes (id, v) VALUES (-1, 'before')")
        log = tmp_path / "run.log"
        first = _run(config, log, stop_at_end=True, extra_env=env)
        assert first.wait(timeout=120) == 0, log.read_text(errors="replace")[-3000:]
        stop = threading.Event()
        counted: list[int] = []
        ddl: list[str] = []
        writer = threading.Thread(target=_workload, args=(server, 1, stop, counted, ddl))
        writer.start()
        rng = random.Random(99)
        kills = kills_while_writing = 0
        step_kills: Counter[str] = Counter()  # kills the daemon did itself, inside a commit step
        try:
            while kills < min_kills or set(step_kills) != set(STEPS):
                assert kills < min_kills + 24, f"faults never fired: {step_kills}"
                step = schedule[kills % len(schedule)]
                fault = None if step is None else f"{step}:{rng.randrange(1, 3)}"
                proc = _run(config, log, fault=fault, extra_env=env)
                try:
                    proc.wait(timeout=rng.uniform(0.4, 2.0) if fault is None else FAULT_WAIT)
                except subprocess.TimeoutExpired:
                    proc.send_signal(signal.SIGKILL)
                    proc.wait()
                said = log.read_text(errors="replace")
                assert proc.returncode == -signal.SIGKILL, f"run exited {proc.returncode}: {said}"
                kills += 1
                kills_while_writing += writer.is_alive()
                if fault is not None and f"fault injected: {fault}" in said:
                    step_kills[fault.split(":")[0]] += 1
        finally:
            stop.set()
            writer.join()
        if before_last_run is not None:
            before_last_run()
        final = _run(config, log, stop_at_end=True, extra_env=env)
        final.wait(timeout=300)
        assert final.returncode == 0, log.read_text(errors="replace")[-3000:]
        expected = _expected(server, status.file, status.position)
        source = {name: set(server.query(f"SELECT * FROM shop.{name}")) for name in TABLES}
        notes_columns = [
            str(row[0])
            for row in server.query(
                "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'shop' "
                "AND TABLE_NAME = 'notes' ORDER BY ORDINAL_POSITION"
            )
        ]
    landed, seqs = _landed(store)
    assert kills >= min_kills
    assert kills_while_writing == kills  # every restart had to catch up with a live workload
    assert counted[0] < MAX_TRANSACTIONS  # the writer ran until the last kill
    assert set(step_kills) == set(STEPS)
    assert sum(sum(c.values()) for c in expected.values()) > 1000
    for name in TABLES:
        assert landed[name] == expected[name], name
        assert _state(store, name) == source[name], name
        assert len(source[name]) > 50, name
    assert len(seqs) == len(set(seqs))
    # the schema history: neither ahead of nor behind the data, each DDL once
    history = load_committed_history(store)
    notes = history.catalog.table("shop", "notes")
    assert notes is not None
    assert [c.name for c in notes.columns] == notes_columns
    assert [c.statement for c in history.changes] == ddl
    records = [
        record["statement"]
        for key in store.list("_manifests")
        for record in json.loads(store.read(key)).get("schema_changes", [])
    ]
    assert records == ddl
    assert len(ddl) >= 10
