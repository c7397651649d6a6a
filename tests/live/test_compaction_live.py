"""Compaction under concurrent landing and SIGKILL: the daemon lands about a thousand small
batches while ``replicator compact`` runs again and again, killed by SIGKILL inside each of
its steps (``REPLICATOR_FAULT_CRASH_AT``) and at random instants, and the daemon itself is
killed and restarted twice. At the end the committed files are compacted to a few per table,
and what the committed readers return (``landed.committed`` + ``landed.compacted``, pyarrow
only) is the same before and after the last compaction, and equals the source by its two
oracles (as ``test_crash``): the binlog decoded apart from the landing, and ``SELECT *``. An
incremental read started halfway (after the batch a reader had read then) returns exactly the
rows after it, none twice, across the compactions in between.

``notes`` gains a column every so often: its files of different schemas never merge.
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
from pathlib import Path

import pyarrow as pa
import pytest

from replicator.binlog import events as ev
from replicator.landed.committed import CommittedFile, committed_files, read_manifests
from replicator.landed.compacted import read_arrow, read_records
from replicator.sink.landing import FAULT_ENV
from replicator.source.binlog_file import read_binlog_file
from replicator.storage import LocalStore, ObjectStoreOptions, Store, open_store
from tests.harness.mariadb import MariaDBServer
from tests.harness.s3 import ACCESS_KEY, REGION, SECRET_KEY, S3Server

pytestmark = pytest.mark.live

KEYS = {"orders": ("id",), "items": ("id", "line")}
TABLES = {
    "orders": "id INT PRIMARY KEY, customer INT, amount DECIMAL(12,2), note VARCHAR(100)",
    "items": "id INT, line INT, sku VARCHAR(20), qty BIGINT UNSIGNED, PRIMARY KEY (id, line)",
}
NOTES = "id INT PRIMARY KEY, v VARCHAR(20)"
TRANSACTIONS = 1000
STEPS = ("compact-data-mid", "compact-data", "compact-record", "compact-publish")
COMPACT_ARGS = ("--older-than", "0s", "--target-size", "1MB", "--retention", "0s")


def _config(path: Path, server: MariaDBServer, root: Path | str, gtid: str) -> Path:
    sink = f"  root: {root}\n" if isinstance(root, Path) else root
    path.write_text(
        f"source:\n  host: {server.host}\n  port: {server.port}\n  user: repl\n"
        "  password_env: COMPACT_TEST_PASSWORD\n  server_id: 3232\n  heartbeat_seconds: 1\n"
        "  reconnect_initial_delay: 0.05\n"
        f"start:\n  gtid: '{gtid}'\n"
        f"sink:\n{sink}  batch_max_rows: 3\n  batch_max_seconds: 0.05\n"
        "filters:\n  include: ['shop.*']\n"
        # no metrics server: a port another test's daemon holds must not fail a restart
        "service:\n  http_enabled: false\n"
    )
    return path


def _env(fault: str | None = None, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ, COMPACT_TEST_PASSWORD="replpass", **(extra or {}))
    env.pop(FAULT_ENV, None)
    if fault:
        env[FAULT_ENV] = fault
    return env


def _daemon(
    config: Path, log: Path, *, stop_at_end: bool = False, extra: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-m", "replicator.cli", "run", "--config", str(config)]
    if stop_at_end:
        args.append("--stop-at-end")
    with open(log, "ab") as stderr:
        return subprocess.Popen(
            args, env=_env(extra=extra), stdout=subprocess.DEVNULL, stderr=stderr
        )


def _compact(
    config: Path, log: Path, fault: str | None = None, extra: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-m", "replicator.cli", "compact", "--config", str(config)]
    with open(log, "ab") as out:
        return subprocess.Popen(
            [*args, *COMPACT_ARGS], env=_env(fault, extra), stdout=out, stderr=subprocess.STDOUT
        )


def _killed_by_fault(
    config: Path, log: Path, step: str, extra: dict[str, str] | None = None
) -> bool:
    """Run `replicator compact` with a kill injected at the first pass through ``step``.
    True when it fired (killed, the injection logged); False when the run never reached the
    step (nothing to merge, or retain, yet) and exited cleanly. Any other outcome fails the test."""
    fault = f"{step}:1"
    before = log.stat().st_size if log.exists() else 0
    proc = _compact(config, log, fault, extra)
    proc.wait(timeout=60)
    said = log.read_bytes()[before:].decode(errors="replace")
    outcome = (proc.returncode, f"fault injected: {fault}" in said)
    assert outcome in {(-signal.SIGKILL, True), (0, False)}, said[-2000:]
    return outcome[0] == -signal.SIGKILL


def _killed_after(
    config: Path, log: Path, seconds: float, extra: dict[str, str] | None = None
) -> bool:
    """Run `replicator compact` and SIGKILL it ``seconds`` in (a random instant). True when
    it was killed; False when it finished first. Any outcome but those two fails the test."""
    proc = _compact(config, log, None, extra)
    killed = False
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        killed = True
    assert proc.returncode in (0, -signal.SIGKILL)
    return killed


def _whole_run(config: Path, log: Path) -> None:
    """Run `replicator compact` to its end, which must be a clean exit."""
    proc = _compact(config, log)
    assert proc.wait(timeout=60) == 0, log.read_text()[-2000:]


def _burst(server: MariaDBServer, store: Store, round_: int, batches: int = 4) -> None:
    """Commit ``batches`` one-row transactions (notes rows of ids no workload uses) and wait
    until the running daemon has landed that many more batches."""
    before = len(store.list("_manifests"))
    conn = server.connect("shop")
    try:
        with conn.cursor() as cur:
            for n in range(batches):
                cur.execute(
                    "INSERT INTO notes (id, v) VALUES (%s, 'burst')", (-1000 - round_ * 100 - n,)
                )
                conn.commit()
                time.sleep(0.3)  # one batch each (the daemon commits on a quiet stream)
    finally:
        conn.close()
    deadline = time.monotonic() + 60
    while len(store.list("_manifests")) < before + 2 and time.monotonic() < deadline:
        time.sleep(0.2)


def _workload(
    server: MariaDBServer,
    done: threading.Event,
    counted: list[int],
    transactions: int = TRANSACTIONS,
    pause: float = 0.01,
    hold: threading.Event | None = None,
) -> None:
    """Write the workload; with `hold`, wait for it before the last transaction."""
    rng = random.Random(7)
    conn = server.connect("shop")
    added = 0
    try:
        with conn.cursor() as cur:
            for n in range(transactions):
                if hold is not None and n == transactions - 1:
                    # (a thread's failure fails no test: a hold that timed out shows in the
                    # test's own counts of runs and kills)
                    hold.wait(timeout=600)
                if n % 150 == 149:
                    added += 1
                    cur.execute(f"ALTER TABLE notes ADD COLUMN c{added} INT DEFAULT {n}")
                cur.execute("BEGIN")
                for _ in range(rng.randrange(1, 3)):
                    key = rng.randrange(200)
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
                cur.execute("INSERT INTO notes (id, v) VALUES (%s, 'x')", (n,))
                if rng.random() < 0.15:
                    cur.execute("DELETE FROM orders WHERE id = %s", (rng.randrange(200),))
                cur.execute("COMMIT")
                counted.append(n)
                time.sleep(pause)
    finally:
        conn.close()
        done.set()


# (op, key) of each row change, counted
Changes = Counter[tuple[object, tuple[object, ...]]]


def _key(values: tuple[object, ...]) -> tuple[object, ...]:
    return tuple(str(v) for v in values)


def _expected(server: MariaDBServer, start: tuple[str, int]) -> dict[str, Changes]:
    server.flush_binlogs()
    out: dict[str, Changes] = {name: Counter() for name in (*TABLES, "notes")}
    for name in server.binlog_files():
        for event in read_binlog_file(server.binlog_path(name)):
            if not isinstance(event, ev.RowsEvent) or event.table.table not in out:
                continue
            if (name, event.position) < start:
                continue
            rows = out[event.table.table]
            if event.table.table == "notes":  # its columns change: count the changes only
                values = event.after if event.kind is ev.RowsKind.UPDATE else event.rows
                rows.update(("u" if event.kind is ev.RowsKind.UPDATE else "c", ()) for _ in values)
            elif event.kind is ev.RowsKind.UPDATE:
                rows.update(("u", _key(v)) for v in event.after)
            elif event.kind is ev.RowsKind.INSERT:
                rows.update(("c", _key(v)) for v in event.rows)
            else:
                rows.update(("d", _key(v)) for v in event.rows)
    return out


def _read(files: list[CommittedFile], table: str) -> pa.Table:
    columns = ["_seq", "_op"] if table == "notes" else None
    if columns is None:
        names = [f.name for f in read_arrow(files[:1]).schema]
        columns = names
    return read_arrow(files, columns)


def _committed(root: Path | Store, after: int = 0) -> dict[str, list[dict[str, object]]]:
    """Every committed row per table, as the committed readers return them, in _seq order."""
    out = {}
    for name, files in committed_files(root, after=after).items():
        table = name.split(".")[1]
        out[table] = sorted(_read(files, table).to_pylist(), key=lambda r: int(str(r["_seq"])))
    return out


def _reader_now(root: Path | Store) -> tuple[int, dict[str, list[dict[str, object]]]]:
    """What a reader reads now: the last batch, and the rows up to it."""
    manifests = read_manifests(root).manifests
    by_table: dict[str, list[CommittedFile]] = {}
    for manifest in manifests:
        for item in manifest.files:
            by_table.setdefault(item.table, []).append(item)
    rows = {
        name.split(".")[1]: sorted(
            _read(files, name.split(".")[1]).to_pylist(), key=lambda r: int(str(r["_seq"]))
        )
        for name, files in by_table.items()
    }
    return manifests[-1].batch, rows


def _changes(rows: list[dict[str, object]], table: str) -> Changes:
    if table == "notes":
        return Counter((str(r["_op"]), ()) for r in rows)
    columns = [c for c in rows[0] if not c.startswith("_")]
    return Counter((str(r["_op"]), _key(tuple(r[c] for c in columns))) for r in rows)


def _state(rows: list[dict[str, object]], table: str) -> set[tuple[object, ...]]:
    columns = [c for c in rows[0] if not c.startswith("_")]
    latest: dict[tuple[object, ...], dict[str, object]] = {}
    for row in rows:
        key = tuple(row[c] for c in KEYS[table])
        if row["_op"] == "d":
            latest.pop(key, None)
        else:
            latest[key] = row
    return {tuple(row[c] for c in columns) for row in latest.values()}


def _files(root: Path) -> dict[str, int]:
    """Parquet files in each table directory (what a directory listing sees)."""
    return {d.name: len(list(d.glob("*.parquet"))) for d in sorted((root / "shop").iterdir())}


def _live(root: Path | Store) -> dict[str, int]:
    return {t.split(".")[1]: len({f.path for f in fs}) for t, fs in committed_files(root).items()}


def test_compaction_under_concurrent_landing_and_sigkill(tmp_path: Path) -> None:
    started = time.monotonic()
    with MariaDBServer(["--binlog-row-metadata=FULL"]) as server:
        server.execute("CREATE DATABASE shop")
        for name, columns in (*TABLES.items(), ("notes", NOTES)):
            server.execute(f"CREATE TABLE shop.{name} ({columns})")
        status = server.binlog_status()
        root = tmp_path / "landing"
        config = _config(tmp_path / "replicator.yaml", server, root, status.gtid_binlog_pos)
        server.execute("INSERT INTO shop.notes (id, v) VALUES (-1, 'before')")
        log, compact_log = tmp_path / "run.log", tmp_path / "compact.log"
        first = _daemon(config, log, stop_at_end=True)
        assert first.wait(timeout=120) == 0, log.read_text(errors="replace")[-3000:]
        daemon = _daemon(config, log)
        done, landing_for = threading.Event(), threading.Event()
        counted: list[int] = []
        # the writer keeps its last transaction back until six compaction runs and both
        # daemon kills have happened while it lands, however fast this machine lands
        writer = threading.Thread(
            target=_workload, args=(server, done, counted), kwargs={"hold": landing_for}
        )
        writer.start()
        rng = random.Random(5)
        fired: Counter[str] = Counter()
        runs = random_kills = daemon_kills = concurrent = 0
        midway: tuple[int, dict[str, list[dict[str, object]]]] | None = None
        try:
            while not done.is_set() or set(+fired) != set(STEPS):  # +: those that fired
                assert runs < 40, f"faults never fired: {fired}"
                kind = runs % 6
                if kind < len(STEPS):  # killed by itself inside a step
                    fired[STEPS[kind]] += _killed_by_fault(config, compact_log, STEPS[kind])
                elif kind == 4:  # killed at a random instant
                    random_kills += _killed_after(config, compact_log, rng.uniform(0.3, 1.2))
                else:  # a whole run
                    _whole_run(config, compact_log)
                runs += 1
                concurrent += not done.is_set()
                if runs in (2, 6) and not done.is_set():  # the daemon dies too
                    daemon.send_signal(signal.SIGKILL)
                    daemon.wait()
                    daemon_kills += 1
                    daemon = _daemon(config, log)
                if runs >= 6:
                    landing_for.set()
                if midway is None and len(counted) > TRANSACTIONS // 2:
                    midway = _reader_now(root)
        finally:
            landing_for.set()
            writer.join()
            daemon.send_signal(signal.SIGKILL)
            daemon.wait()
        final = _daemon(config, log, stop_at_end=True)
        assert final.wait(timeout=300) == 0, log.read_text(errors="replace")[-3000:]
        expected = _expected(server, (status.file, status.position))
        source = {name: set(server.query(f"SELECT * FROM shop.{name}")) for name in TABLES}
    manifests = read_manifests(root).manifests
    batches = manifests[-1].batch
    written = Counter(f.table.split(".")[1] for m in manifests for f in m.files)
    before_files, before_live = _files(root), _live(root)
    before = _committed(root)
    result = subprocess.run(
        [sys.executable, "-m", "replicator.cli", "compact", "--config", str(config), *COMPACT_ARGS],
        env=_env(),
        capture_output=True,
        check=False,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    after_files, after_live = _files(root), _live(root)
    after = _committed(root)
    figures = {
        "batches": batches,
        "compaction_runs": runs,
        "compaction_runs_while_landing": concurrent,
        "files_the_daemon_wrote": dict(written),
        "compactor_kills_in_steps": dict(fired),
        "compactor_kills_at_random": random_kills,
        "daemon_kills": daemon_kills,
        "records": len(read_records(LocalStore(root))),
        "files_in_directories_before_last_run": before_files,
        "live_files_before_last_run": before_live,
        "files_in_directories_after": after_files,
        "live_files_after": after_live,
        "seconds": round(time.monotonic() - started, 1),
    }
    print("compaction figures:", json.dumps(figures, sort_keys=True))
    (tmp_path / "figures.json").write_text(json.dumps(figures))
    assert batches >= 900
    assert daemon_kills == 2 and concurrent >= 5
    assert set(+fired) == set(STEPS), fired
    assert after == before
    for table in ("orders", "items", "notes"):
        assert _changes(after[table], table) == expected[table], table
    for table in TABLES:
        assert _state(after[table], table) == source[table], table
    seqs = [int(str(r["_seq"])) for rows in after.values() for r in rows]
    assert len(seqs) == len(set(seqs))
    # a few files: orders and items one or two each (1MB target), notes one per schema
    assert after_files["orders"] <= 3 and after_files["items"] <= 3
    assert after_files["notes"] <= 8
    assert after_live == after_files  # retention 0s: every superseded file is gone
    assert sum(before_live.values()) + 0 >= sum(after_live.values())
    # an incremental read from where a reader stood halfway returns the rest exactly once
    assert midway is not None
    last, seen = midway
    rest = _committed(root, after=last)
    for table in ("orders", "items", "notes"):
        old = seen.get(table, [])
        new = rest.get(table, [])
        assert old + new == after[table], table
    assert not list(root.glob("shop/*/.*"))
    assert not list(root.glob("_compactions/*.intent.json"))  # every killed run cleaned up


@pytest.mark.parametrize("where", ["directory", "s3"])
def test_the_daemon_compacts_on_its_timer(
    tmp_path: Path, where: str, request: pytest.FixtureRequest
) -> None:
    """``sink.compaction.every``: the daemon compacts beside the stream it lands (into a
    directory, or an object store: the compaction lease)."""
    extra: dict[str, str] = {}
    landing = tmp_path / "landing"
    zone: Path | Store = landing
    root: Path | str = landing
    if where == "s3":
        s3: S3Server = request.getfixturevalue("s3_server")
        url = f"s3://{s3.bucket('timer-landing')}/zone"
        zone = open_store(
            url,
            ObjectStoreOptions(
                endpoint=s3.endpoint, region=REGION, access_key=ACCESS_KEY, secret_key=SECRET_KEY
            ),
        )
        root, extra = s3.sink_yaml(url), s3.env()
    with MariaDBServer() as server:
        server.execute("CREATE DATABASE shop")
        for name, columns in (*TABLES.items(), ("notes", NOTES)):
            server.execute(f"CREATE TABLE shop.{name} ({columns})")
        status = server.binlog_status()
        config = _config(tmp_path / "replicator.yaml", server, root, status.gtid_binlog_pos)
        config.write_text(
            config.read_text().replace(
                "  batch_max_seconds: 0.05\n",
                "  batch_max_seconds: 0.05\n  compaction:\n    every: 1\n    older_than: 0\n"
                "    retention: 0\n",
            )
        )
        log = tmp_path / "run.log"
        daemon = _daemon(config, log, extra=extra)
        try:
            conn = server.connect("shop")
            with conn.cursor() as cur:
                for n in range(200):
                    cur.execute("INSERT INTO orders VALUES (%s, 1, '1.00', 'x')", (n,))
                    cur.execute("COMMIT")
                    time.sleep(0.01)
            conn.close()
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                found = _found(zone)
                rows = sum(f.rows for f in found.get("shop.orders", []))
                if rows == 200 and len({f.path for f in found["shop.orders"]}) <= 2:
                    break
                time.sleep(0.5)
        finally:
            daemon.send_signal(signal.SIGTERM)
            assert daemon.wait(timeout=60) == 0, log.read_text(errors="replace")[-3000:]
    manifests = read_manifests(zone).manifests
    written = sum(len(m.files) for m in manifests)
    files = committed_files(zone)["shop.orders"]
    assert written >= 60  # batches of a few rows each
    assert len({f.path for f in files}) <= 2
    assert read_records(zone if isinstance(zone, Store) else LocalStore(zone))
    ids = read_arrow(files, ["id"]).column("id").to_pylist()
    assert sorted(ids) == list(range(200))
    assert '"compacted"' in log.read_text()


def _found(zone: Path | Store) -> dict[str, list[CommittedFile]]:
    """The committed files, once the daemon committed a first batch."""
    if isinstance(zone, Store):
        return committed_files(zone) if zone.list("_manifests") else {}
    return committed_files(zone) if (zone / "_manifests").is_dir() else {}


S3_STEPS = (*STEPS, "compact-retain-mid")
S3_TRANSACTIONS = 200


def _s3_files(store: Store) -> dict[str, int]:
    """Parquet objects under each table's prefix (what a plain bucket listing sees)."""
    out: Counter[str] = Counter()
    for key in store.list("shop"):
        if key.endswith(".parquet"):
            out[key.split("/")[1]] += 1
    return dict(out)


def test_compaction_on_s3_under_concurrent_landing_and_sigkill(
    tmp_path: Path, s3_server: S3Server
) -> None:
    """The same on an object store (moto's S3 API server): no renames, outputs written at
    their final keys, the compaction lease. The daemon lands a few hundred small batches into
    ``s3://`` while ``replicator compact`` is killed in each of its steps and at random
    instants, the daemon once; then the last compaction. The committed readers return the
    same before and after it, equal to the source; a listing of the bucket then shows only
    live files (retention 0s), no leftover output."""
    started = time.monotonic()
    url = f"s3://{s3_server.bucket('compact-landing')}/zone"
    store = open_store(
        url,
        ObjectStoreOptions(
            endpoint=s3_server.endpoint, region=REGION, access_key=ACCESS_KEY, secret_key=SECRET_KEY
        ),
    )
    extra = s3_server.env()
    with MariaDBServer(["--binlog-row-metadata=FULL"]) as server:
        server.execute("CREATE DATABASE shop")
        for name, columns in (*TABLES.items(), ("notes", NOTES)):
            server.execute(f"CREATE TABLE shop.{name} ({columns})")
        status = server.binlog_status()
        timings = {"server_up": round(time.monotonic() - started, 1)}
        sink = s3_server.sink_yaml(url)
        config = _config(tmp_path / "replicator.yaml", server, sink, status.gtid_binlog_pos)
        server.execute("INSERT INTO shop.notes (id, v) VALUES (-1, 'before')")
        log, compact_log = tmp_path / "run.log", tmp_path / "compact.log"
        first = _daemon(config, log, stop_at_end=True, extra=extra)  # the history knows notes
        assert first.wait(timeout=120) == 0, log.read_text(errors="replace")[-3000:]
        daemon = _daemon(config, log, extra=extra)
        done, landing_for = threading.Event(), threading.Event()
        counted: list[int] = []
        writer = threading.Thread(  # its last transaction waits for the daemon's kill
            target=_workload,
            args=(server, done, counted, S3_TRANSACTIONS, 0.08),
            kwargs={"hold": landing_for},
        )
        writer.start()
        rng = random.Random(11)
        fired: Counter[str] = Counter()
        runs = random_kills = daemon_kills = concurrent = extra_rows = 0
        try:
            while not done.is_set() or set(+fired) != set(S3_STEPS):  # +: those that fired
                assert runs < 30, f"faults never fired: {fired}"
                kind = runs % (len(S3_STEPS) + 1)
                landed = len(store.list("_manifests"))
                if kind < len(S3_STEPS):  # killed by itself inside a step
                    step = S3_STEPS[kind]
                    if done.is_set() and not fired[step]:
                        # the workload is over: land a few small batches more, so that the
                        # step has something to merge (how soon the workload ends, and so
                        # how many runs saw it landing, depends on the machine's load)
                        _burst(server, store, extra_rows)
                        extra_rows += 1
                    fired[step] += _killed_by_fault(config, compact_log, step, extra)
                else:  # killed at a random instant
                    seconds = rng.uniform(0.5, 1.5)
                    random_kills += _killed_after(config, compact_log, seconds, extra)
                runs += 1
                if done.is_set():
                    timings.setdefault("workload_done", round(time.monotonic() - started, 1))
                concurrent += len(store.list("_manifests")) > landed  # the daemon landed meanwhile
                if runs == 1 and not done.is_set():  # the daemon dies too
                    daemon.send_signal(signal.SIGKILL)
                    daemon.wait()
                    daemon_kills += 1
                    daemon = _daemon(config, log, extra=extra)
                if runs >= 1:
                    landing_for.set()
        finally:
            landing_for.set()
            writer.join()
            daemon.send_signal(signal.SIGKILL)
            daemon.wait()
        timings["loop_done"] = round(time.monotonic() - started, 1)
        final = _daemon(config, log, stop_at_end=True, extra=extra)
        assert final.wait(timeout=120) == 0, log.read_text(errors="replace")[-3000:]
        expected = _expected(server, (status.file, status.position))
        source = {name: set(server.query(f"SELECT * FROM shop.{name}")) for name in TABLES}
    manifests = read_manifests(store).manifests
    batches = manifests[-1].batch
    written = Counter(f.table.split(".")[1] for m in manifests for f in m.files)
    before_files, before_live = _s3_files(store), _live(store)
    before = _committed(store)
    timings["read_before"] = round(time.monotonic() - started, 1)
    result = subprocess.run(
        [sys.executable, "-m", "replicator.cli", "compact", "--config", str(config), *COMPACT_ARGS],
        env=_env(extra=extra),
        capture_output=True,
        check=False,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    timings["last_compaction"] = round(time.monotonic() - started, 1)
    after_files, after_live = _s3_files(store), _live(store)
    after = _committed(store)
    figures = {
        "batches": batches,
        "compaction_runs": runs,
        "compaction_runs_while_landing": concurrent,
        "files_the_daemon_wrote": dict(written),
        "compactor_kills_in_steps": dict(fired),
        "compactor_kills_at_random": random_kills,
        "daemon_kills": daemon_kills,
        "records": len(read_records(store)),
        "objects_listed_before_last_run": before_files,
        "live_files_before_last_run": before_live,
        "objects_listed_after": after_files,
        "live_files_after": after_live,
        "seconds": round(time.monotonic() - started, 1),
        **timings,
    }
    print("compaction on s3 figures:", json.dumps(figures, sort_keys=True))
    (tmp_path / "figures.json").write_text(json.dumps(figures))
    assert batches >= 100
    assert daemon_kills == 1 and concurrent >= 3
    assert set(+fired) == set(S3_STEPS), fired
    assert after == before
    for table in ("orders", "items", "notes"):
        assert _changes(after[table], table) == expected[table], table
    for table in TABLES:
        assert _state(after[table], table) == source[table], table
    seqs = [int(str(r["_seq"])) for rows in after.values() for r in rows]
    assert len(seqs) == len(set(seqs))
    assert after_files["orders"] <= 3 and after_files["items"] <= 3
    assert after_files["notes"] <= 4
    # retention 0s and no leftover: a listing of the bucket shows exactly the live files
    assert after_live == after_files
    assert sum(after_live.values()) < sum(written.values())
    assert not [key for key in store.list() if key.endswith((".tmp", ".intent.json"))]
