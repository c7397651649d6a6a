"""The DDL parser against the server itself: each statement runs on a live MariaDB and is
applied to the parser's catalog; after every statement the catalog must describe the tables
as information_schema does (names and order, types with their column_type text, unsigned,
lengths, precision, fractional seconds, charset, ENUM/SET labels, nullability, generated and
invisible columns, auto_increment, primary key, constant defaults).
"""

from __future__ import annotations

import contextlib

import pytest

from replicator.schema import ddl
from replicator.schema.model import Catalog, Column, Table
from replicator.source.catalog import read_catalog, read_traits
from tests.harness.mariadb import MariaDBServer

pytestmark = pytest.mark.live

DB = "ddlcmp"
STATEMENTS = [
    f"CREATE DATABASE {DB} CHARACTER SET latin1",
    "CREATE TABLE items (id INT UNSIGNED NOT NULL AUTO_INCREMENT, name VARCHAR(40) NOT NULL "
    "DEFAULT 'x', price DECIMAL(10,2), kind ENUM('a','it''s') NOT NULL DEFAULT 'a', "
    "tags SET('p','q'), made DATETIME(3), flag BOOL, b BIT(5), y YEAR, t TIME(2), "
    "PRIMARY KEY (id), KEY k (name)) ENGINE=InnoDB",
    "CREATE TABLE log (a INT, b TEXT CHARACTER SET utf8mb4, c BLOB, d CHAR(3) BINARY, "
    "e MEDIUMINT ZEROFILL, f DOUBLE, g FLOAT(7,3), h JSON, u UUID, i6 INET6)",
    "CREATE TABLE k2 (a INT NOT NULL, b VARCHAR(10) NOT NULL, c INT AS (a + 1) VIRTUAL, "
    "d INT INVISIBLE, PRIMARY KEY (b, a)) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
    "ALTER TABLE items CHANGE name full_name VARCHAR(80) NOT NULL AFTER price",
    "ALTER TABLE items ADD COLUMN c INT DEFAULT 5 FIRST, ADD INDEX (c), ALGORITHM=INPLACE",
    "ALTER TABLE items RENAME COLUMN c TO cc, MODIFY price DECIMAL(12,2)",
    "ALTER TABLE items ADD (u2 UUID, j JSON, n NATIONAL VARCHAR(4))",
    "ALTER TABLE items DROP COLUMN cc, ENGINE=InnoDB ROW_FORMAT=DYNAMIC",
    "ALTER TABLE items MODIFY kind ENUM('a','it''s','c') NOT NULL DEFAULT 'c'",
    "ALTER TABLE items ALTER full_name SET DEFAULT 'y', ALTER price DROP DEFAULT",
    "ALTER TABLE log CONVERT TO CHARACTER SET utf8mb4",
    "ALTER TABLE log ADD PRIMARY KEY (a), MODIFY a BIGINT NOT NULL",
    "ALTER TABLE k2 DROP PRIMARY KEY, ADD PRIMARY KEY (a)",
    "ALTER TABLE k2 DEFAULT CHARACTER SET latin1, ADD e VARCHAR(5)",
    "RENAME TABLE items TO items_old, log TO items",
    "CREATE TABLE copy LIKE items_old",
    "CREATE TABLE IF NOT EXISTS copy (z INT)",
    "TRUNCATE TABLE copy",
    "DROP TABLE IF EXISTS items, nope",
    "CREATE TABLE items (id SERIAL, v TEXT(300), w LONG VARCHAR, x CHAR(2) CHARACTER SET binary)",
    "CREATE OR REPLACE TABLE copy (a INT /* comment's */ DEFAULT -1, b VARCHAR(3) COLLATE "
    "latin1_bin) /*!50100 COMMENT 'x' */",
    "ALTER TABLE k2 RENAME TO other_name",
    "ALTER TABLE other_name RENAME TO k2",
    # DROP, CHANGE, MODIFY and RENAME COLUMN name the columns as they were and keep their
    # places; ADD and FIRST/AFTER then place columns in statement order, AFTER naming the
    # columns as they are by then
    "CREATE TABLE f10 (a INT, b INT, c INT)",
    "ALTER TABLE f10 ADD x INT AFTER a, DROP a, CHANGE b a INT",
    "ALTER TABLE f10 ADD y INT AFTER a, RENAME COLUMN a TO old_a, RENAME COLUMN x TO a",
    "ALTER TABLE f10 MODIFY c INT AFTER old_a, CHANGE old_a z INT, CHANGE a old_a BIGINT",
    "ALTER TABLE f10 RENAME COLUMN z TO y, RENAME COLUMN y TO z",
    "ALTER TABLE f10 CHANGE z y INT, CHANGE y z INT",
    "ALTER TABLE f10 ADD w INT AFTER q, CHANGE c q INT FIRST",
    "ALTER TABLE f10 ADD d INT, MODIFY d BIGINT FIRST, DROP q, ADD q INT AFTER d",
    # the table's character set, wherever it stands in the statement, for every column that
    # names none; CONVERT TO for every text column, new ones too
    "CREATE TABLE f1 (id INT)",
    "ALTER TABLE f1 ADD b VARCHAR(5), DEFAULT CHARSET=utf8mb4",
    "ALTER TABLE f1 MODIFY b VARCHAR(6), ADD c TEXT, CHARACTER SET latin1",
    "ALTER TABLE f1 CONVERT TO CHARACTER SET utf8mb4, ADD e VARCHAR(5) CHARACTER SET latin1",
    # labels lose their trailing spaces
    "CREATE TABLE f3 (id INT, e ENUM('a ','b  '), s SET('x ',' y'))",
    # the primary key dropped by its index name
    "CREATE TABLE f6 (id INT NOT NULL, v INT, PRIMARY KEY (id))",
    "ALTER TABLE f6 DROP INDEX `PRIMARY`",
    "ALTER TABLE f6 ADD PRIMARY KEY (id)",
    "DROP INDEX `PRIMARY` ON f6",
    "ALTER TABLE f6 ADD PRIMARY KEY (v)",
    "ALTER TABLE f6 DROP CONSTRAINT `PRIMARY`",
    "RENAME TABLE IF EXISTS nope TO nope2, f6 TO f7",
]
# MariaDB 10.10+: collations of no character set, which apply to the table's or database's
UCA1400 = [
    f"ALTER DATABASE {DB} CHARACTER SET utf8mb4",
    "CREATE TABLE f5 (id INT, b VARCHAR(5)) COLLATE uca1400_ai_ci",
    "ALTER TABLE f5 ADD c VARCHAR(3), COLLATE uca1400_as_cs",
    "ALTER TABLE f5 CHARACTER SET latin1, ADD d VARCHAR(3)",
]


def _facts(column: Column) -> tuple[object, ...]:
    default = column.default
    # MariaDB shows DEFAULT NULL and "no default" of a nullable column alike
    if default.kind in ("none", "null"):
        shown: object = "none/null"
    elif default.kind == "value":
        shown = default.text
    else:
        shown = "expression"
    return (
        column.name,
        column.data_type,
        column.column_type,
        column.unsigned,
        column.length,
        column.precision,
        column.scale,
        column.fsp,
        column.charset,
        column.labels,
        column.nullable,
        column.generated is not None,
        column.invisible,
        column.auto_increment,
        shown if column.generated is None else None,
    )


def _describe(table: Table | None) -> object:
    if table is None:
        return None
    return (table.primary_key, table.charset, [_facts(c) for c in table.columns])


def test_the_parser_describes_tables_as_the_server_does() -> None:
    with MariaDBServer() as server, contextlib.closing(server.connect()) as conn:
        traits = read_traits(conn)
        with conn.cursor() as cur:
            cur.execute("SELECT @@character_set_server, @@sql_mode")
            (server_charset, sql_mode) = cur.fetchone()
        context = ddl.Context(
            default_db=DB, server_charset=str(server_charset), strict="STRICT" in str(sql_mode)
        )
        ours = read_catalog(conn, traits)
        differences: list[str] = []
        compared = 0
        statements = STATEMENTS + (UCA1400 if traits.version >= (10, 10) else [])
        for statement in statements:
            with conn.cursor() as cur:
                if statement.startswith("CREATE DATABASE"):
                    cur.execute(statement)
                    cur.execute(f"USE {DB}")
                else:
                    cur.execute(statement)
            ours, _ = ddl.apply_ddl(ours, statement, context)
            theirs = read_catalog(conn, traits)
            names = sorted({k for k in (*ours.tables, *theirs.tables) if k[0] == DB})
            compared += len(names)
            for key in names:
                mine, real = _describe(ours.tables.get(key)), _describe(theirs.tables.get(key))
                if mine != real:
                    differences.append(f"after {statement!r}: {key}: ours {mine} != {real}")
        assert differences == []
        assert compared >= 60  # every table after every statement
        assert Catalog.from_json(ours.to_json()) == ours
