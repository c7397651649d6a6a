"""Statements whose effect on stored rows the binlog does not show, on a live MariaDB: an
``ALTER TABLE`` the server answers by rewriting stored values (which it does not log), and a
``RENAME TABLE`` of a temporary table (which MariaDB logs like any other, though it logs no
``CREATE TEMPORARY TABLE``). Each is run, its binlog read back through ``SchemaTracker`` as the
daemon reads it, and the stream must stop at the statement: its rows landed before it no
longer say what the server holds, or the history no longer says which table a name is.
Statements that keep every value must not stop.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from replicator.binlog import events as ev
from replicator.errors import IntegrityError
from replicator.source.binlog_file import read_binlog_file
from tests.harness.mariadb import MariaDBServer
from tests.live.test_ddl_replayed import seeded

pytestmark = pytest.mark.live


@dataclass
class Replayed:
    rows: list[tuple[object, ...]]  # rows of db.t, decoded from the binlog
    now: list[tuple[object, ...]]  # SELECT * FROM db.t after the statements
    stop: IntegrityError | None


def replay(
    server: MariaDBServer,
    db: str,
    statements: Sequence[str],
    *,
    setup: Sequence[str] = (),
) -> Replayed:
    """Make database ``db`` anew and run ``setup`` in it, seed the history from the server,
    run ``statements``, then read their binlog back through the tracker."""
    with contextlib.closing(server.connect()) as conn:
        tracker, start = seeded(server, conn, db, setup=setup)
        with conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)
            cur.execute(f"SELECT * FROM {db}.t ORDER BY 1")
            now = [tuple(r) for r in cur.fetchall()]
        server.flush_binlogs()
    rows: list[tuple[object, ...]] = []
    stop: IntegrityError | None = None
    try:
        for name in server.binlog_files():
            if name < start.file:
                continue
            for read in read_binlog_file(server.binlog_path(name), schema_lookup=tracker):
                event = tracker.on_event(read)
                if isinstance(event, ev.RowsEvent) and (event.table.schema, event.table.table) == (
                    db,
                    "t",
                ):
                    rows.extend(tuple(r) for r in event.rows)
    except IntegrityError as exc:
        stop = exc
    return Replayed(rows, now, stop)


# (column, value stored, the ALTER, sql_mode): each makes the server change the stored value
REWRITES = [
    # CHAR drops trailing spaces, in any sql_mode
    ("v VARCHAR(5)", "'a  '", "MODIFY v CHAR(5)", "STRICT_TRANS_TABLES"),
    ("v VARCHAR(5)", "'a  '", "MODIFY v CHAR(5)", ""),
    ("v TEXT", "'a  '", "MODIFY v CHAR(5)", "STRICT_TRANS_TABLES"),
    # a stored ENUM/SET value takes the new label equal to its own under the collation
    ("v ENUM('a','b')", "'a'", "MODIFY v ENUM('A','b')", "STRICT_TRANS_TABLES"),
    ("v SET('a','b')", "'a,b'", "MODIFY v SET('A','b')", "STRICT_TRANS_TABLES"),
    # FLOAT(M,D) rounds to D decimals
    ("v FLOAT(7,4)", "1.23456", "MODIFY v FLOAT(7,2)", "STRICT_TRANS_TABLES"),
    ("v FLOAT", "1.23456", "MODIFY v FLOAT(7,2)", ""),
    ("v DOUBLE", "1.23456789", "MODIFY v DOUBLE(10,2), ALGORITHM=COPY", "STRICT_TRANS_TABLES"),
    # ... and bounds values to M-D digits before the point outside strict mode
    ("v FLOAT(7,2)", "12345.67", "MODIFY v FLOAT(5,2), ALGORITHM=COPY", ""),
    # UNSIGNED outside strict mode makes negative numbers 0
    ("v FLOAT", "-1.5", "MODIFY v FLOAT UNSIGNED", ""),
    ("v DECIMAL(5,2)", "-1.5", "MODIFY v DECIMAL(5,2) UNSIGNED", ""),
    # NOT NULL outside strict mode makes NULL the type's default, the type changed or not
    ("v INT", "NULL", "MODIFY v BIGINT NOT NULL", ""),
    # ALTER IGNORE changes what does not fit, as outside strict mode
    ("v ENUM('a','b','c')", "'c'", "IGNORE TABLE t MODIFY v ENUM('a','b')", "STRICT_ALL_TABLES"),
    ("v VARCHAR(5)", "'abcde'", "IGNORE TABLE t MODIFY v VARCHAR(2)", "STRICT_ALL_TABLES"),
]


@pytest.mark.parametrize(("column", "value", "alter", "mode"), REWRITES)
def test_an_alter_that_rewrites_stored_values_stops_at_its_statement(
    mariadb: MariaDBServer, column: str, value: str, alter: str, mode: str
) -> None:
    clause = alter if alter.startswith("IGNORE") else f"TABLE t {alter}"
    found = replay(mariadb, "ddl_rw", [
        f"SET SESSION sql_mode = '{mode}'",
        f"CREATE TABLE t (id INT, {column})",
        f"INSERT INTO t VALUES (1, {value})",
        f"ALTER {clause}",
    ])  # fmt: skip
    assert found.rows != found.now  # the server shows another value than the binlog did
    assert found.stop is not None
    assert f"ALTER {clause}" in str(found.stop)


def test_alter_ignore_adding_a_unique_key_stops_at_its_statement(mariadb: MariaDBServer) -> None:
    """MariaDB's ALTER IGNORE deletes the rows whose key is a duplicate, logging nothing."""
    found = replay(mariadb, "ddl_ignore", [
        "CREATE TABLE t (id INT, v INT)",
        "INSERT INTO t VALUES (1, 5), (2, 5)",
        "ALTER IGNORE TABLE t ADD UNIQUE (v)",
    ])  # fmt: skip
    assert found.rows == [(1, 5), (2, 5)]
    assert found.now == [(1, 5)]
    assert found.stop is not None
    assert "ALTER IGNORE TABLE t ADD UNIQUE (v)" in str(found.stop)


# (column, value, the ALTER, sql_mode): the server keeps every stored value
KEPT = [
    ("v CHAR(5)", "'a'", "MODIFY v VARCHAR(5)", ""),
    ("v ENUM('a','b')", "'a'", "MODIFY v ENUM('a','b','A')", ""),
    ("v ENUM('a','b','c') COLLATE utf8mb4_bin", "'a'",
     "MODIFY v ENUM('a','b') COLLATE utf8mb4_bin", "STRICT_TRANS_TABLES"),
    ("v FLOAT(7,2)", "12345.67", "MODIFY v FLOAT(9,4), ALGORITHM=COPY", "STRICT_TRANS_TABLES"),
    ("v FLOAT(7,2)", "12345.67", "MODIFY v DOUBLE(7,2), ALGORITHM=COPY", ""),
    ("v FLOAT(7,2)", "12345.67", "MODIFY v FLOAT, ALGORITHM=COPY", ""),
    ("v DECIMAL(5,2) UNSIGNED", "1.5", "MODIFY v DECIMAL(5,2)", ""),
    # strict: a row holding the removed label would fail the statement; none does
    ("v ENUM('new','paid','legacy')", "'paid'", "MODIFY v ENUM('new','paid')",
     "STRICT_TRANS_TABLES"),
    ("v SET('a','b','c')", "'a,b'", "MODIFY v SET('b','a')", "STRICT_TRANS_TABLES"),
]  # fmt: skip


@pytest.mark.parametrize(("column", "value", "alter", "mode"), KEPT)
def test_an_alter_that_keeps_stored_values_goes_on(
    mariadb: MariaDBServer, column: str, value: str, alter: str, mode: str
) -> None:
    found = replay(mariadb, "ddl_kept", [
        f"SET SESSION sql_mode = '{mode}'",
        f"CREATE TABLE t (id INT, {column})",
        f"INSERT INTO t VALUES (1, {value})",
        f"ALTER TABLE t {alter}",
        f"INSERT INTO t VALUES (2, {value})",
    ])  # fmt: skip
    assert found.stop is None
    assert [row[0] for row in found.rows] == [1, 2]


def test_a_float_m_d_table_seeded_from_the_server_is_not_taken_for_rewritten(
    mariadb: MariaDBServer,
) -> None:
    """The seed reads FLOAT(M,D) as the statements write it: a table the seed found, altered
    in ways that keep its values, goes on."""
    found = replay(
        mariadb,
        "ddl_seeded",
        [
            "ALTER TABLE t MODIFY v FLOAT(7,4), MODIFY w DOUBLE(10,2) UNSIGNED, ADD x INT",
            "INSERT INTO t VALUES (2, 2.5, 3.25, 0, 1)",
        ],
        setup=["CREATE TABLE t (id INT, v FLOAT(7,4), w DOUBLE(10,2) UNSIGNED, u FLOAT)"],
    )
    assert found.stop is None
    assert found.rows == [(2, 2.5, 3.25, 0.0, 1)]


def test_a_temporary_tables_rename_onto_a_table_stops_at_its_statement(
    mariadb: MariaDBServer,
) -> None:
    """MariaDB logs the RENAME of a temporary ``a`` (not its CREATE): the history must not move
    the table ``a`` over ``t``, whose rows would then be read with ``a``'s columns."""
    found = replay(mariadb, "ddl_tmp", [
        "CREATE TABLE a (id INT, v VARCHAR(5) CHARACTER SET latin1)",
        "CREATE TABLE t (id INT UNSIGNED, v VARCHAR(5) CHARACTER SET utf8mb4)",
        "CREATE TEMPORARY TABLE a (id INT, v VARCHAR(5))",
        "RENAME TABLE a TO t",  # renames the temporary a
        "DROP TEMPORARY TABLE t",  # not logged
        "INSERT INTO t VALUES (4294967295, 'é')",
    ])  # fmt: skip
    assert found.now == [(4294967295, "é")]
    assert found.rows == []
    assert found.stop is not None
    assert "RENAME TABLE a TO t" in str(found.stop)
    assert "temporary" in str(found.stop)


def test_a_temporary_tables_rename_to_a_free_name_leaves_no_table_misread(
    mariadb: MariaDBServer,
) -> None:
    """The rename of a temporary table that hides ``t`` to a free name moves ``t`` in the
    history (the binlog does not tell the two apart): the next rows of ``t`` are of a table
    the history does not have, read with what their TABLE_MAP logs, never with the columns of
    another table."""
    found = replay(mariadb, "ddl_tmp2", [
        "CREATE TABLE t (id INT UNSIGNED, v VARCHAR(5) CHARACTER SET utf8mb4)",
        "CREATE TEMPORARY TABLE t (id INT, v VARCHAR(5) CHARACTER SET latin1)",
        "RENAME TABLE t TO elsewhere",  # renames the temporary t
        "INSERT INTO t VALUES (4294967295, 'é')",
    ])  # fmt: skip
    assert found.now == [(4294967295, "é")]
    assert found.stop is None
    assert found.rows == [(4294967295, "é")]  # with the columns its TABLE_MAP logs
