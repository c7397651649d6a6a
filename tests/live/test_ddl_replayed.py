"""DDL as the daemon follows it: statements run on a live MariaDB (``binlog_row_metadata`` at
its default, NO_LOG, so rows are decoded with the names, character sets, ENUM labels and key
of the schema history), then the binlog is read back through ``SchemaTracker`` as the daemon
reads it. The decoded rows must be the stored ones, and the history's table the server's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pytest
from pymysql.connections import Connection

from replicator.binlog import events as ev
from replicator.embedded.mariadb import BinlogStatus
from replicator.errors import IntegrityError
from replicator.schema.history import Point, SchemaHistory
from replicator.schema.model import Catalog, Table
from replicator.schema.tracker import SchemaTracker
from replicator.source.binlog_file import read_binlog_file
from replicator.source.catalog import read_catalog, read_traits
from tests.harness.mariadb import MariaDBServer, mariadbd_version

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def server() -> Iterator[MariaDBServer]:
    with MariaDBServer() as running:
        yield running


@dataclass
class Replayed:
    ours: Catalog  # the history after the statements
    theirs: Catalog  # information_schema after them
    rows: list[tuple[object, ...]]  # rows of db.t, decoded
    keys: list[tuple[int, ...]]  # the primary key each rows event of db.t was decoded with
    stop: Exception | None


def seeded(
    server: MariaDBServer,
    conn: Connection,
    db: str,
    *,
    charset: str = "utf8mb4",
    setup: Sequence[str] = (),
) -> tuple[SchemaTracker, BinlogStatus]:
    """Make database ``db`` anew and run ``setup`` in it, start a new binlog file and seed a
    tracker's history from the server there; returns the tracker and where its binlog starts."""
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {db}")
        cur.execute(f"CREATE DATABASE {db} CHARACTER SET {charset}")
        cur.execute(f"USE {db}")
        for statement in setup:
            cur.execute(statement)
    server.flush_binlogs()
    start = server.binlog_status()
    seed = read_catalog(conn, read_traits(conn)).numbered()
    history = SchemaHistory(seed, Point(start.file, start.position))
    return SchemaTracker(history, lambda s, t: True), start


def replay(
    server: MariaDBServer, db: str, statements: list[str], charset: str = "utf8mb4"
) -> Replayed:
    """Run ``statements`` in database ``db`` (made anew), then read their binlog back."""
    with contextlib.closing(server.connect()) as conn:
        traits = read_traits(conn)
        tracker, start = seeded(server, conn, db, charset=charset)
        with conn.cursor() as cur:
            cur.execute(f"USE {db}")
            for statement in statements:
                cur.execute(statement)
        server.flush_binlogs()
        rows: list[tuple[object, ...]] = []
        keys: list[tuple[int, ...]] = []
        stop: Exception | None = None
        try:
            for read in read_binlog_file(server.binlog_path(start.file), schema_lookup=tracker):
                event = tracker.on_event(read)
                if isinstance(event, ev.RowsEvent) and event.table.table == "t":
                    rows.extend(tuple(r) for r in event.rows)
                    keys.append(tuple(event.table.primary_key))
        except IntegrityError as exc:
            stop = exc
        return Replayed(tracker.history.catalog, read_catalog(conn, traits), rows, keys, stop)


def _facts(table: Table | None) -> object:
    if table is None:
        return None
    columns = [(c.name, c.data_type, c.unsigned, c.charset, c.labels) for c in table.columns]
    return table.primary_key, columns


def _same(found: Replayed, db: str, name: str = "t") -> None:
    assert _facts(found.ours.table(db, name)) == _facts(found.theirs.table(db, name))


def test_alter_clauses_name_the_columns_as_the_server_does(server: MariaDBServer) -> None:
    """DROP and CHANGE name the columns as they were; AFTER names them as they are: two
    INT columns must not land under each other's names."""
    found = replay(server, "ddl_r1", [
        "CREATE TABLE t (a INT, b INT, c INT)",
        "ALTER TABLE t ADD x INT AFTER a, DROP a, CHANGE b a INT",
        "INSERT INTO t (a, x, c) VALUES (1, 2, 3)",
    ])  # fmt: skip
    assert found.stop is None
    assert found.rows == [(1, 2, 3)]
    _same(found, "ddl_r1")


def test_the_table_charset_applies_to_columns_before_it_in_the_statement(
    server: MariaDBServer,
) -> None:
    found = replay(server, "ddl_r2", [
        "CREATE TABLE t (id INT, a VARCHAR(5))",
        "ALTER TABLE t ADD b VARCHAR(5), MODIFY a VARCHAR(5), DEFAULT CHARSET=utf8mb4",
        "ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4, ADD c VARCHAR(5) CHARACTER SET latin1",
        "INSERT INTO t VALUES (1, 'é', 'ü', 'ß')",
    ], charset="latin1")  # fmt: skip
    assert found.stop is None
    assert found.rows == [(1, "é", "ü", "ß")]
    _same(found, "ddl_r2")


def test_labels_without_trailing_spaces(server: MariaDBServer) -> None:
    found = replay(server, "ddl_r3", [
        "CREATE TABLE t (id INT, e ENUM('a ','b'), s SET('x ','y'))",
        "INSERT INTO t VALUES (1, 'a', 'x,y')",
    ])  # fmt: skip
    assert found.stop is None
    assert found.rows == [(1, "a", "x,y")]
    _same(found, "ddl_r3")


def test_a_collation_of_no_charset_takes_the_databases(server: MariaDBServer) -> None:
    if mariadbd_version() < (10, 10):
        pytest.skip("uca1400 collations need MariaDB 10.10+")
    found = replay(server, "ddl_r4", [
        "CREATE TABLE t (id INT, b VARCHAR(5)) COLLATE uca1400_ai_ci",
        "INSERT INTO t VALUES (1, 'é')",
    ])  # fmt: skip
    assert found.stop is None
    assert found.rows == [(1, "é")]
    _same(found, "ddl_r4")


@pytest.mark.parametrize(
    "drop",
    [
        "ALTER TABLE t DROP INDEX `PRIMARY`",
        "DROP INDEX `PRIMARY` ON t",
        "ALTER TABLE t DROP CONSTRAINT `PRIMARY`",
    ],
)
def test_the_primary_key_dropped_by_its_index_name(server: MariaDBServer, drop: str) -> None:
    found = replay(server, "ddl_r5", [
        "CREATE TABLE t (id INT NOT NULL, v INT, PRIMARY KEY (id))",
        drop,
        "INSERT INTO t VALUES (1, 1), (1, 2)",  # no key any more: two rows of id 1
    ])  # fmt: skip
    assert found.stop is None
    assert found.keys == [()]
    _same(found, "ddl_r5")


def test_the_sessions_collation_database_is_not_the_tables(server: MariaDBServer) -> None:
    """The server logs the session's ``collation_database`` where it differs from the
    database's, and creates the table in the database's character set."""
    found = replay(server, "ddl_r6", [
        "SET SESSION character_set_database = cp1251",
        "CREATE TABLE t (id INT, b VARCHAR(5))",
        "INSERT INTO t VALUES (1, 'é')",
    ])  # fmt: skip
    assert found.stop is None
    assert found.rows == [(1, "é")]
    _same(found, "ddl_r6")


def test_a_backslash_under_no_backslash_escapes_stops_at_its_statement(
    server: MariaDBServer,
) -> None:
    found = replay(server, "ddl_r7", [
        "SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')",
        r"CREATE TABLE t (id INT, e ENUM('x\y','z'))",
        r"INSERT INTO t VALUES (1, 'x\y')",
    ])  # fmt: skip
    assert found.rows == []
    assert found.stop is not None
    assert "NO_BACKSLASH_ESCAPES" in str(found.stop)
    assert "CREATE TABLE t" in str(found.stop)


def test_a_rename_if_exists_of_no_table_changes_nothing(server: MariaDBServer) -> None:
    found = replay(server, "ddl_r8", [
        "CREATE TABLE t (id INT)",
        "RENAME TABLE IF EXISTS nope TO nope2",
        "INSERT INTO t VALUES (1)",
    ])  # fmt: skip
    assert found.stop is None
    assert found.rows == [(1,)]
