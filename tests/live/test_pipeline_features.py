"""Pipeline features through the real ``replicator run`` process and a throwaway MariaDB.

* filters: include/exclude globs over ``db.table`` and ``exclude_columns`` over
  ``db.table.column`` decide which directories exist and which columns land;
* ``sink.batch_max_bytes`` alone cuts the stream into several batches of whole transactions;
* a transaction over ``sink.large_transaction_rows`` streams in parts and lands as one batch of
  its own, with contiguous ``_seq``;
* with ``binlog_row_metadata=MINIMAL`` (names from information_schema), DDL on a table from a
  session whose default database is another one still refreshes that table's schema.

All tests share the session's MINIMAL server and each uses its own databases.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.harness.mariadb import MariaDBServer
from tests.live.daemon import ROOT, Daemon, daemon_config, new_http_port

pytestmark = pytest.mark.live


def _config(
    path: Path, server: MariaDBServer, root: Path, start_gtid: str, *, sink: str = "",
    source: str = "", filters: str = "",
) -> Path:  # fmt: skip
    """A config file; ``sink``, ``source`` and ``filters`` are extra indented YAML lines."""
    path.write_text(
        f"source:\n  host: {server.host}\n  port: {server.port}\n  user: repl\n"
        "  password: replpass\n  server_id: 5151\n  heartbeat_seconds: 1\n"
        f"{source}start:\n  gtid: '{start_gtid}'\n"
        "service:\n  http_enabled: false\n"
        f"sink:\n  root: {root}\n{sink}" + (f"filters:\n{filters}" if filters else "")
    )
    return path


def _run_to_end(config: Path) -> None:
    """``replicator run --stop-at-end`` as a child process; it must exit 0."""
    command = [sys.executable, "-m", "replicator.cli", "run", "--config", str(config)]
    done = subprocess.run(
        [*command, "--stop-at-end"], cwd=ROOT, capture_output=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]


def _manifests(root: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted((root / "_manifests").glob("*.json"))]


def _rows(root: Path, manifest: dict[str, Any], table: str) -> list[dict[str, Any]]:
    """The rows of ``table`` in one committed batch, from the files its manifest names."""
    rows: list[dict[str, Any]] = []
    for entry in manifest["files"]:
        if entry["table"] == table:
            rows.extend(pq.read_table(root / entry["path"]).to_pylist())
    return rows


def _all_rows(root: Path, table: str) -> list[dict[str, Any]]:
    return [row for m in _manifests(root) for row in _rows(root, m, table)]


def _data(row: dict[str, Any]) -> dict[str, Any]:
    """A landed row without its metadata columns."""
    return {k: v for k, v in row.items() if not k.startswith("_")}


def test_filters_pick_tables_and_drop_columns(tmp_path: Path, mariadb: MariaDBServer) -> None:
    tables = {
        "pf_shop.orders": "id INT PRIMARY KEY, amount DECIMAL(8,2), note VARCHAR(20)",
        "pf_shop.customers": "id INT PRIMARY KEY, name VARCHAR(20), email VARCHAR(40), "
        "secret VARCHAR(20)",
        "pf_shop.audit_log": "id INT PRIMARY KEY, what VARCHAR(20)",
        "pf_crm.accounts": "id INT PRIMARY KEY, secret VARCHAR(20), owner VARCHAR(20)",
        "pf_crm.tmp_x": "id INT PRIMARY KEY",
    }
    for database in ("pf_shop", "pf_crm"):
        mariadb.execute(f"CREATE DATABASE {database}")
    for name, columns in tables.items():
        mariadb.execute(f"CREATE TABLE {name} ({columns})")
    start = mariadb.binlog_status().gtid_binlog_pos
    with contextlib.closing(mariadb.connect()) as conn, conn.cursor() as cur:
        cur.execute("INSERT INTO pf_shop.orders VALUES (1, 9.50, 'one'), (2, 20.00, 'two')")
        cur.execute("UPDATE pf_shop.orders SET note = 'uno' WHERE id = 1")
        cur.execute("INSERT INTO pf_shop.customers VALUES (1, 'ann', 'ann@x.org', 's1')")
        cur.execute("INSERT INTO pf_shop.audit_log VALUES (1, 'login')")
        cur.execute("INSERT INTO pf_crm.accounts VALUES (7, 's2', 'bob')")
        cur.execute("INSERT INTO pf_crm.tmp_x VALUES (1)")
        cur.execute("DELETE FROM pf_crm.accounts WHERE id = 7")
    root = tmp_path / "landing"
    filters = (
        "  include: ['pf_shop.*', 'pf_crm.acc*']\n  exclude: ['pf_shop.audit_*']\n"
        "  exclude_columns: ['pf_shop.customers.email', '*.*.secret']\n"
    )
    _run_to_end(_config(tmp_path / "c.yaml", mariadb, root, start, filters=filters))

    landed = {p.parent.relative_to(root).as_posix() for p in root.glob("pf_*/*/*.parquet")}
    assert landed == {"pf_shop/orders", "pf_shop/customers", "pf_crm/accounts"}
    assert sorted(p.name for p in (root / "pf_shop").iterdir()) == ["customers", "orders"]
    assert sorted(p.name for p in (root / "pf_crm").iterdir()) == ["accounts"]
    named = {entry["table"] for m in _manifests(root) for entry in m["files"]}
    assert named == {"pf_shop.orders", "pf_shop.customers", "pf_crm.accounts"}

    orders = _all_rows(root, "pf_shop.orders")
    customers = _all_rows(root, "pf_shop.customers")
    accounts = _all_rows(root, "pf_crm.accounts")
    assert [list(_data(r)) for r in (orders[0], customers[0], accounts[0])] == [
        ["id", "amount", "note"],
        ["id", "name"],
        ["id", "owner"],
    ]
    assert all(set(pq.read_schema(p).names) & {"email", "secret"} == set()
               for p in root.glob("pf_*/*/*.parquet"))  # fmt: skip
    assert [(r["_op"], _data(r)) for r in orders] == [
        ("c", {"id": 1, "amount": Decimal("9.50"), "note": "one"}),
        ("c", {"id": 2, "amount": Decimal("20.00"), "note": "two"}),
        ("u", {"id": 1, "amount": Decimal("9.50"), "note": "uno"}),
    ]
    assert [(r["_op"], _data(r)) for r in customers] == [("c", {"id": 1, "name": "ann"})]
    assert [(r["_op"], _data(r)) for r in accounts] == [
        ("c", {"id": 7, "owner": "bob"}),
        ("d", {"id": 7, "owner": "bob"}),
    ]


def test_awkward_table_names_land_in_directories_of_their_own(
    tmp_path: Path, mariadb: MariaDBServer
) -> None:
    # before, a table named like "a\\b" stopped the daemon with a bare ValueError, and one
    # starting with "_" landed where every reader passes over it as hidden
    tables = {
        "pf_names._audit": "pf_names/~5Faudit",
        "pf_names.a\\b": "pf_names/a~5Cb",
        "pf_names.a%2Fb": "pf_names/a~252Fb",
        "_pf_private.t": "~5Fpf_private/t",
    }
    for database in ("pf_names", "_pf_private"):
        mariadb.execute(f"CREATE DATABASE `{database}`")
    quoted = {name: ".".join(f"`{part}`" for part in name.split(".", 1)) for name in tables}
    for sql in quoted.values():
        mariadb.execute(f"CREATE TABLE {sql} (id INT PRIMARY KEY, what VARCHAR(20))")
    start = mariadb.binlog_status().gtid_binlog_pos
    with contextlib.closing(mariadb.connect()) as conn, conn.cursor() as cur:
        for name, sql in quoted.items():
            table = sql.replace("%", "%%")  # pymysql formats the statement with %
            cur.execute(f"INSERT INTO {table} VALUES (1, %s), (2, 'two')", (name,))
    root = tmp_path / "landing"
    filters = "  include: ['pf_names.*', '_pf_private.*']\n"
    _run_to_end(_config(tmp_path / "c.yaml", mariadb, root, start, filters=filters))

    landed = {p.parent.relative_to(root).as_posix() for p in root.glob("*/*/*.parquet")}
    assert landed == set(tables.values())
    for name in tables:
        assert [_data(r) for r in _all_rows(root, name)] == [
            {"id": 1, "what": name},
            {"id": 2, "what": "two"},
        ]


def _run_refused(config: Path, *args: str) -> str:
    """``replicator run --stop-at-end`` (and ``args``), which must stop as an integrity
    stop (exit 4); returns its stderr."""
    command = [sys.executable, "-m", "replicator.cli", "run", "--config", str(config)]
    done = subprocess.run(
        [*command, "--stop-at-end", *args], cwd=ROOT, capture_output=True, timeout=120,
        check=False,
    )  # fmt: skip
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 4, stderr[-3000:]
    return stderr


@pytest.fixture
def dropped_after(mariadb: MariaDBServer) -> Iterator[list[str]]:
    """Databases a test creates that must not outlive it: the server is the session's, and a
    database whose name holds a "." stops every run (and check) that replicates it."""
    databases: list[str] = []
    yield databases
    for database in databases:
        mariadb.execute(f"DROP DATABASE IF EXISTS `{database}`")


@pytest.mark.parametrize("created", ["before the start", "in the stream"])
def test_a_database_name_with_a_dot_stops_before_it_lands(
    tmp_path: Path, mariadb: MariaDBServer, created: str, dropped_after: list[str]
) -> None:
    # a landed table is named "<db>.<table>", read back at the first dot: before, the rows of
    # `pf_dots.d`.`t` landed as table `pf_dots`.`d.t`, in its directory and under its name
    suffix = "pre" if created == "before the start" else "ddl"
    dotted, plain = f"pf_dots_{suffix}.d", f"pf_dots_{suffix}"
    dropped_after.extend([dotted, plain])
    create = [
        f"CREATE DATABASE `{plain}`",
        f"CREATE DATABASE `{dotted}`",
        f"CREATE TABLE `{plain}`.`x.y` (id INT PRIMARY KEY)",
        f"CREATE TABLE `{dotted}`.`t` (id INT PRIMARY KEY)",
    ]
    if created == "before the start":
        for sql in create:
            mariadb.execute(sql)
    start = mariadb.binlog_status().gtid_binlog_pos
    if created == "in the stream":
        for sql in create:
            mariadb.execute(sql)
    mariadb.execute(f"INSERT INTO `{plain}`.`x.y` VALUES (1)")
    mariadb.execute(f"INSERT INTO `{dotted}`.`t` VALUES (2)")
    root = tmp_path / "landing"
    config = _config(
        tmp_path / "c.yaml", mariadb, root, start, filters=f"  include: ['{plain}*.*']\n"
    )

    stderr = _run_refused(config)
    assert f"table `{dotted}`.`t` at " in stderr and "cannot land" in stderr
    assert f"as table `{plain}`.`d.t`" in stderr
    assert list(root.glob("*/*/*.parquet")) == []

    # left out, the rest lands; a dot in a table's name is read back whole
    hint = f"filters.exclude: ['{plain}?d.*'] (a '?' matches its '.')"
    assert hint in stderr
    filters = f"  include: ['{plain}*.*']\n  exclude: ['{plain}?d.*']\n"
    _run_to_end(_config(tmp_path / "d.yaml", mariadb, root, start, filters=filters))
    landed = {p.parent.relative_to(root).as_posix() for p in root.glob("*/*/*.parquet")}
    assert landed == {f"{plain}/x.y"}
    assert [_data(r) for r in _all_rows(root, f"{plain}.x.y")] == [{"id": 1}]


def test_a_snapshot_of_a_database_name_with_a_dot_stops_before_it_reads(
    tmp_path: Path, mariadb: MariaDBServer, dropped_after: list[str]
) -> None:
    dropped_after.append("pf_dots_snap.d")
    mariadb.execute("CREATE DATABASE `pf_dots_snap.d`")
    mariadb.execute("CREATE TABLE `pf_dots_snap.d`.`t` (id INT PRIMARY KEY)")
    mariadb.execute("INSERT INTO `pf_dots_snap.d`.`t` VALUES (1)")
    root = tmp_path / "landing"
    config = tmp_path / "c.yaml"
    config.write_text(
        f"source:\n  host: {mariadb.host}\n  port: {mariadb.port}\n  user: repl\n"
        "  password: replpass\n  server_id: 5152\n"
        f"service:\n  http_enabled: false\nsink:\n  root: {root}\n"
        "snapshot:\n  mode: initial\nfilters:\n  include: ['pf_dots_snap*.*']\n"
    )

    stderr = _run_refused(config)
    assert "table `pf_dots_snap.d`.`t` at the snapshot cannot land" in stderr
    assert list(root.glob("*/*/*.parquet")) == []


def test_batch_max_bytes_cuts_batches_of_whole_transactions(
    tmp_path: Path, mariadb: MariaDBServer
) -> None:
    transactions, per_transaction = 20, 3
    mariadb.execute("CREATE DATABASE pf_bytes")
    mariadb.execute("CREATE TABLE pf_bytes.t (id INT PRIMARY KEY, txn INT, pad VARCHAR(200))")
    start = mariadb.binlog_status().gtid_binlog_pos
    with contextlib.closing(mariadb.connect("pf_bytes")) as conn, conn.cursor() as cur:
        for txn in range(transactions):
            cur.execute("BEGIN")
            for i in range(per_transaction):
                cur.execute(
                    "INSERT INTO t VALUES (%s, %s, %s)",
                    (txn * per_transaction + i, txn, "p" * 150),
                )
            cur.execute("COMMIT")
    root = tmp_path / "landing"
    sink = "  batch_max_rows: 1000000\n  batch_max_seconds: 3600\n  batch_max_bytes: 2000\n"
    _run_to_end(_config(tmp_path / "c.yaml", mariadb, root, start, sink=sink))

    manifests = _manifests(root)
    # only the byte limit can cut: several batches, yet not one per transaction
    assert 1 < len(manifests) < transactions
    batch_of: dict[int, set[int]] = {}
    ids: list[int] = []
    for manifest in manifests:
        rows = _rows(root, manifest, "pf_bytes.t")
        assert manifest["rows"] == len(rows) == per_transaction * manifest["transactions"]
        for txn, count in Counter(r["txn"] for r in rows).items():
            assert count == per_transaction, (manifest["batch"], txn)
            batch_of.setdefault(txn, set()).add(manifest["batch"])
        ids.extend(r["id"] for r in rows)
    assert all(len(batches) == 1 for batches in batch_of.values())
    assert sorted(batch_of) == list(range(transactions))
    assert sorted(ids) == list(range(transactions * per_transaction))


def test_large_transaction_lands_as_one_batch_of_its_own(
    tmp_path: Path, mariadb: MariaDBServer
) -> None:
    big = 5000
    mariadb.execute("CREATE DATABASE pf_large")
    mariadb.execute("CREATE TABLE pf_large.t (id INT PRIMARY KEY, tag VARCHAR(10), v INT)")
    start = mariadb.binlog_status().gtid_binlog_pos
    with contextlib.closing(mariadb.connect("pf_large")) as conn, conn.cursor() as cur:
        for i in range(3):
            cur.execute("INSERT INTO t VALUES (%s, 'before', 0), (%s, 'before', 1)",
                        (-2 * i - 1, -2 * i - 2))  # fmt: skip
        cur.execute("BEGIN")
        cur.executemany("INSERT INTO t VALUES (%s, 'big', %s)", [(i, i) for i in range(big)])
        cur.execute("COMMIT")
        for i in range(3):
            cur.execute("INSERT INTO t VALUES (%s, 'after', 0), (%s, 'after', 1)",
                        (big + 2 * i, big + 2 * i + 1))  # fmt: skip
    root = tmp_path / "landing"
    sink = "  batch_max_rows: 50\n  batch_max_seconds: 3600\n  large_transaction_rows: 500\n"
    source = "  buffer_rows: 1000\n"
    _run_to_end(_config(tmp_path / "c.yaml", mariadb, root, start, sink=sink, source=source))

    batches = [(m, _rows(root, m, "pf_large.t")) for m in _manifests(root)]
    holding_big = [i for i, (_, rows) in enumerate(batches) if any(r["tag"] == "big" for r in rows)]
    assert len(holding_big) == 1
    index = holding_big[0]
    manifest, rows = batches[index]
    assert manifest["transactions"] == 1
    assert manifest["rows"] == len(rows) == big
    assert {r["tag"] for r in rows} == {"big"}
    seqs = sorted(r["_seq"] for r in rows)
    assert seqs == list(range(manifest["first_seq"], manifest["last_seq"] + 1))
    assert len(seqs) == big
    assert sorted((r["id"], r["v"]) for r in rows) == [(i, i) for i in range(big)]
    before = [r for _, rs in batches[:index] for r in rs]
    after = [r for _, rs in batches[index + 1 :] for r in rs]
    assert sorted(r["id"] for r in before) == list(range(-6, 0))
    assert {r["tag"] for r in before} == {"before"}
    assert sorted(r["id"] for r in after) == list(range(big, big + 6))
    assert {r["tag"] for r in after} == {"after"}
    assert max(r["_seq"] for r in before) < seqs[0] < seqs[-1] < min(r["_seq"] for r in after)


def test_ddl_from_another_default_database_refreshes_the_schema(
    tmp_path: Path, mariadb: MariaDBServer
) -> None:
    # the fixture runs binlog_row_metadata=MINIMAL: column names come from information_schema
    assert mariadb.query("SELECT @@binlog_row_metadata") == [("MINIMAL",)]
    mariadb.execute("CREATE DATABASE pf_ddl_a")
    mariadb.execute("CREATE DATABASE pf_ddl_b")
    mariadb.execute("CREATE TABLE pf_ddl_b.t (id INT PRIMARY KEY, v VARCHAR(10))")
    start = mariadb.binlog_status().gtid_binlog_pos
    root = tmp_path / "landing"
    port = new_http_port()
    config = daemon_config(tmp_path / "c.yaml", mariadb, root, start_gtid=start, http_port=port)
    daemon = Daemon(config, tmp_path / "run.log", port).start()
    try:
        mariadb.execute("INSERT INTO pf_ddl_b.t VALUES (1, 'x')")
        # landed, so the daemon has looked up (and cached) the two-column schema
        daemon.wait_for("row 1", lambda: len(_all_rows(root, "pf_ddl_b.t")) == 1)
        with contextlib.closing(mariadb.connect("pf_ddl_a")) as conn, conn.cursor() as cur:
            cur.execute("ALTER TABLE pf_ddl_b.t ADD COLUMN z INT")
            cur.execute("INSERT INTO pf_ddl_b.t VALUES (2, 'y', 7)")
            cur.execute("UPDATE pf_ddl_b.t SET z = 8 WHERE id = 1")
        daemon.wait_for("rows after the ALTER", lambda: len(_all_rows(root, "pf_ddl_b.t")) == 3)
        daemon.signal(signal.SIGTERM)
        code = daemon.wait(30)
    finally:
        daemon.kill()
    assert code == 0, daemon.log_tail()
    landed = [(r["_op"], _data(r)) for r in _all_rows(root, "pf_ddl_b.t")]
    assert landed == [
        ("c", {"id": 1, "v": "x"}),
        ("c", {"id": 2, "v": "y", "z": 7}),
        ("u", {"id": 1, "v": "x", "z": 8}),
    ]
