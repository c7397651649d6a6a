"""The DDL parser: each statement of both servers' syntax and what it does to the history.

Each case starts from one catalog (``shop.items``, ``shop.log`` without a key) and states the
effects and the resulting columns. Statements the parser cannot follow raise ``DdlError``
naming the tables they touch; the tracker turns that into a stop naming the statement and its
binlog position.
"""

from __future__ import annotations

import pytest

from replicator.binlog import events as ev
from replicator.errors import IntegrityError
from replicator.schema import ddl
from replicator.schema.history import SchemaHistory
from replicator.schema.model import Catalog, ColumnDefault, ServerTraits, Table
from replicator.schema.tracker import SchemaTracker

MARIADB = ServerTraits("mariadb", (10, 11, 6), 0)
MYSQL8 = ServerTraits("mysql", (8, 4, 0), 0)
CTX = ddl.Context(default_db="shop", server_charset="utf8mb4", strict=True)
BASE = [
    "CREATE DATABASE shop CHARACTER SET utf8mb4",
    "CREATE TABLE items (id INT UNSIGNED NOT NULL AUTO_INCREMENT, name VARCHAR(40) NOT NULL "
    "DEFAULT 'x', price DECIMAL(10,2), kind ENUM('a','b'), PRIMARY KEY (id), KEY k (name)) "
    "ENGINE=InnoDB",
    "CREATE TABLE log (a INT, b TEXT CHARACTER SET latin1)",
]


def catalog(traits: ServerTraits = MARIADB, statements: list[str] = BASE) -> Catalog:
    current = Catalog(traits)
    for statement in statements:
        current, _ = ddl.apply_ddl(current, statement, CTX)
    return current


def apply(statement: str, traits: ServerTraits = MARIADB, context: ddl.Context = CTX):  # type: ignore[no-untyped-def]
    return ddl.apply_ddl(catalog(traits), statement, context)


def names(table: Table | None) -> list[tuple[int, str]]:
    assert table is not None
    return [(c.id, c.name) for c in table.columns]


# statement -> (effect kinds, shop.items columns (id, name) after, primary key after)
ITEMS_CASES = {
    "ALTER TABLE items ADD COLUMN c INT DEFAULT 5 FIRST": (
        ["TableAltered"],
        [(7, "c"), (1, "id"), (2, "name"), (3, "price"), (4, "kind")],
        ("id",),
    ),
    "ALTER TABLE items ADD c INT AFTER id, ADD d INT": (
        ["TableAltered"],
        [(1, "id"), (7, "c"), (2, "name"), (3, "price"), (4, "kind"), (8, "d")],
        ("id",),
    ),
    "ALTER TABLE items ADD (c INT, d DATE)": (
        ["TableAltered"],
        [(1, "id"), (2, "name"), (3, "price"), (4, "kind"), (7, "c"), (8, "d")],
        ("id",),
    ),
    "ALTER TABLE items ADD COLUMN IF NOT EXISTS name INT": (
        [],
        [(1, "id"), (2, "name"), (3, "price"), (4, "kind")],
        ("id",),
    ),
    "ALTER TABLE items CHANGE name full_name VARCHAR(80) NOT NULL AFTER price": (
        ["TableAltered"],
        [(1, "id"), (3, "price"), (2, "full_name"), (4, "kind")],
        ("id",),
    ),
    "ALTER TABLE items CHANGE COLUMN `id` item_id INT UNSIGNED NOT NULL AUTO_INCREMENT": (
        ["TableAltered"],
        [(1, "item_id"), (2, "name"), (3, "price"), (4, "kind")],
        ("item_id",),
    ),
    "ALTER TABLE items RENAME COLUMN name TO title": (
        ["TableAltered"],
        [(1, "id"), (2, "title"), (3, "price"), (4, "kind")],
        ("id",),
    ),
    "ALTER TABLE items MODIFY price DECIMAL(12,2) FIRST": (
        ["TableAltered"],
        [(3, "price"), (1, "id"), (2, "name"), (4, "kind")],
        ("id",),
    ),
    "ALTER TABLE items MODIFY kind ENUM('a','b','c') NOT NULL": (
        ["TableAltered"],
        [(1, "id"), (2, "name"), (3, "price"), (4, "kind")],
        ("id",),
    ),
    "ALTER TABLE items DROP COLUMN price, DROP name": (
        ["TableAltered"],
        [(1, "id"), (4, "kind")],
        ("id",),
    ),
    "ALTER TABLE items DROP COLUMN name, ADD COLUMN name INT": (
        ["TableAltered"],
        [(1, "id"), (3, "price"), (4, "kind"), (7, "name")],
        ("id",),
    ),
    "ALTER TABLE items DROP PRIMARY KEY, ADD PRIMARY KEY (name, id)": (
        ["TableAltered"],
        [(1, "id"), (2, "name"), (3, "price"), (4, "kind")],
        ("name", "id"),
    ),
    "ALTER TABLE items ADD INDEX i (price), ALGORITHM=INPLACE, LOCK=NONE": (
        [],
        [(1, "id"), (2, "name"), (3, "price"), (4, "kind")],
        ("id",),
    ),
    "ALTER TABLE items ENGINE=InnoDB ROW_FORMAT=DYNAMIC COMMENT='x'": (
        [],
        [(1, "id"), (2, "name"), (3, "price"), (4, "kind")],
        ("id",),
    ),
    "ALTER TABLE items ALTER COLUMN name SET DEFAULT 'y', ALTER price DROP DEFAULT": (
        ["TableAltered"],
        [(1, "id"), (2, "name"), (3, "price"), (4, "kind")],
        ("id",),
    ),
    "ALTER TABLE items RENAME INDEX k TO k2, DROP INDEX k2, ADD UNIQUE KEY (name)": (
        [],
        [(1, "id"), (2, "name"), (3, "price"), (4, "kind")],
        ("id",),
    ),
    "ALTER TABLE items CONVERT TO CHARACTER SET latin1": (
        ["TableAltered"],
        [(1, "id"), (2, "name"), (3, "price"), (4, "kind")],
        ("id",),
    ),
    "ALTER TABLE items /*!50100 PARTITION BY HASH (id) PARTITIONS 4 */": (
        [],
        [(1, "id"), (2, "name"), (3, "price"), (4, "kind")],
        ("id",),
    ),
    "/* a comment */ ALTER ONLINE TABLE items ADD COLUMN `key` INT": (
        ["TableAltered"],
        [(1, "id"), (2, "name"), (3, "price"), (4, "kind"), (7, "key")],
        ("id",),
    ),
}


@pytest.mark.parametrize("statement", list(ITEMS_CASES))
def test_alter_items(statement: str) -> None:
    kinds, columns, key = ITEMS_CASES[statement]
    after, effects = apply(statement)
    assert [type(e).__name__ for e in effects] == kinds
    table = after.table("shop", "items")
    assert names(table) == columns
    assert table is not None and table.primary_key == key


def test_added_column_facts_and_defaults() -> None:
    after, _ = apply(
        "ALTER TABLE items ADD c VARCHAR(10) DEFAULT 'it''s', ADD d BIT(3) DEFAULT b'101', "
        "ADD e DATETIME(6) DEFAULT CURRENT_TIMESTAMP(6), ADD f INT NOT NULL, "
        "ADD g DECIMAL(5,2) DEFAULT -1.5, ADD h BINARY(2) DEFAULT 0xff00, ADD i JSON, "
        "ADD j INT AS (id + 1) VIRTUAL, ADD k SET('x','y') DEFAULT 'x,y' INVISIBLE"
    )
    table = after.table("shop", "items")
    assert table is not None
    got = {c.name: c for c in table.columns}
    assert got["c"].default == ColumnDefault("value", "it's")
    assert got["c"].charset == "utf8mb4" and got["c"].column_type == "varchar(10)"
    assert got["d"].default == ColumnDefault("value", "05", hex=True)
    assert got["d"].length == 3
    assert got["e"].default.kind == "expression" and got["e"].fsp == 6
    assert got["f"].nullable is False and got["f"].default.kind == "none"
    assert got["g"].default == ColumnDefault("value", "-1.5")
    assert (got["g"].precision, got["g"].scale) == (5, 2)
    assert got["h"].default == ColumnDefault("value", "ff00", hex=True)
    assert got["h"].charset == "binary"
    # MariaDB's JSON is LONGTEXT in utf8mb4_bin
    assert (got["i"].data_type, got["i"].charset) == ("longtext", "utf8mb4")
    assert got["j"].generated == "id + 1"
    assert got["k"].invisible and got["k"].labels == ("x", "y")


def test_column_types_as_information_schema_prints_them() -> None:
    statement = (
        "CREATE TABLE t (a INT, b INT UNSIGNED ZEROFILL, c TINYINT(1), d YEAR, "
        "e FLOAT(30), f DOUBLE PRECISION, g NUMERIC(7), h BOOL, i SERIAL, j NCHAR(3), "
        "k CHAR(2) CHARACTER SET binary, l TEXT(300) CHARACTER SET utf8mb4, m LONG VARBINARY, "
        "n INET6, o VARCHAR(3) COLLATE latin1_bin, p CHAR(1) BINARY)"
    )
    expected = {
        MARIADB: ["int(11)", "int(10) unsigned zerofill", "tinyint(1)", "year(4)", "double",
                  "double", "decimal(7,0)", "tinyint(1)", "bigint(20) unsigned", "char(3)",
                  "binary(2)", "text", "mediumblob", "inet6", "varchar(3)", "char(1)"],
        MYSQL8: ["int", "int(10) unsigned zerofill", "tinyint(1)", "year", "double", "double",
                 "decimal(7,0)", "tinyint(1)", "bigint unsigned", "char(3)", "binary(2)",
                 "text", "mediumblob", "inet6", "varchar(3)", "char(1)"],
    }  # fmt: skip
    for traits, types in expected.items():
        after, _ = ddl.apply_ddl(catalog(traits), statement, CTX)
        table = after.table("shop", "t")
        assert table is not None
        assert [c.column_type for c in table.columns] == types
        charsets = {c.name: c.charset for c in table.columns}
        assert charsets["j"] == "utf8mb3" and charsets["k"] == "binary"
        assert charsets["o"] == "latin1" and charsets["a"] is None
        assert table.column("o").collation == "latin1_bin"  # type: ignore[union-attr]
        assert table.column("i").auto_increment  # type: ignore[union-attr]


def test_table_lifecycle_statements() -> None:
    cases = {
        "RENAME TABLE items TO items_old, log TO items": (
            ["TableRenamed", "TableRenamed"],
            {"items_old", "items"},
        ),
        "RENAME TABLE items TO tmp, log TO items, tmp TO log": (
            ["TableRenamed"] * 3,
            {"items", "log"},
        ),
        "ALTER TABLE items RENAME TO other.items2": (["TableRenamed"], {"log"}),
        "TRUNCATE TABLE items": (["TableTruncated"], {"items", "log"}),
        "TRUNCATE log": (["TableTruncated"], {"items", "log"}),
        "DROP TABLE IF EXISTS `log`, nope /* generated by server */": (
            ["TableDropped", "TableDropped"],
            {"items"},
        ),
        "DROP TEMPORARY TABLE IF EXISTS tmp": ([], {"items", "log"}),
        "CREATE TEMPORARY TABLE tmp (a INT)": ([], {"items", "log"}),
        "CREATE TABLE copy LIKE items": (["TableCreated"], {"items", "log", "copy"}),
        "CREATE TABLE IF NOT EXISTS items (z INT)": ([], {"items", "log"}),
        "CREATE OR REPLACE TABLE items (z INT)": (["TableCreated"], {"items", "log"}),
        "CREATE TABLE t (a INT) START TRANSACTION": (["TableCreated"], {"items", "log", "t"}),
        "DROP DATABASE shop": (["DatabaseDropped"], set()),
        "DROP SCHEMA IF EXISTS other": (["DatabaseDropped"], {"items", "log"}),
        "CREATE DATABASE IF NOT EXISTS shop": ([], {"items", "log"}),
        "CREATE SCHEMA other DEFAULT CHARACTER SET latin1": (["DatabaseCreated"], {"items", "log"}),
        "ALTER DATABASE shop CHARACTER SET latin1": (["DatabaseAltered"], {"items", "log"}),
        "CREATE INDEX i ON items (price)": ([], {"items", "log"}),
        "CREATE DEFINER=`root`@`%` VIEW v AS SELECT 1": ([], {"items", "log"}),
        "DROP VIEW IF EXISTS v": ([], {"items", "log"}),
        "GRANT SELECT ON shop.* TO 'u'@'%'": ([], {"items", "log"}),
        "ANALYZE TABLE items": ([], {"items", "log"}),
        "# Dummy event replacing event type 160": ([], {"items", "log"}),
    }
    for statement, (kinds, tables) in cases.items():
        after, effects = apply(statement)
        assert [type(e).__name__ for e in effects] == kinds, statement
        assert {n for (db, n) in after.tables if db == "shop"} == tables, statement


def test_column_ids_are_never_reused_across_tables() -> None:
    """A table created again, a copy, or a column added later: new ids from one counter, so
    files of unrelated tables that end up under one name never share an id."""
    current = catalog()
    assert current.next_column_id == 7  # items 1-4, log 5-6
    for statement in (
        "DROP TABLE items",
        "CREATE TABLE items (id INT PRIMARY KEY, w INT)",
        "CREATE TABLE copy LIKE items",
        "ALTER TABLE log ADD c INT",
        "RENAME TABLE log TO items2",
    ):
        current, _ = ddl.apply_ddl(current, statement, CTX)
    assert names(current.table("shop", "items")) == [(7, "id"), (8, "w")]
    assert names(current.table("shop", "copy")) == [(9, "id"), (10, "w")]
    assert names(current.table("shop", "items2")) == [(5, "a"), (6, "b"), (11, "c")]
    assert current.next_column_id == 12
    assert Catalog.from_json(current.to_json()) == current


def test_rename_keeps_columns_and_ids() -> None:
    after, effects = apply("RENAME TABLE items TO other.renamed")
    (effect,) = effects
    assert isinstance(effect, ddl.TableRenamed)
    assert names(after.table("other", "renamed")) == names(effect.before)
    assert after.table("shop", "items") is None


def test_drop_database_lists_its_tables() -> None:
    _, effects = apply("DROP DATABASE shop")
    (effect,) = effects
    assert isinstance(effect, ddl.DatabaseDropped)
    assert sorted(t.name for t in effect.tables) == ["items", "log"]


UNREPRESENTABLE = {
    "ALTER TABLE items MODIFY price INT": "type changed",
    "ALTER TABLE items MODIFY price DECIMAL(10,1)": "scale reduced",
    "ALTER TABLE items TRUNCATE PARTITION p0": "TRUNCATE PARTITION",
    "ALTER TABLE items DROP PARTITION p0": "DROP PARTITION",
    "ALTER TABLE items IMPORT TABLESPACE": "IMPORT TABLESPACE",
    "ALTER TABLE items MODIFY name VARBINARY(40)": "type changed",
}


@pytest.mark.parametrize("statement", list(UNREPRESENTABLE))
def test_statements_that_rewrite_rows_unlogged(statement: str) -> None:
    _, effects = apply(statement)
    reasons = [e.reason for e in effects if isinstance(e, ddl.Unrepresentable)]
    assert len(reasons) == 1
    assert UNREPRESENTABLE[statement] in reasons[0]


def test_strict_mode_decides_narrowing() -> None:
    loose = ddl.Context(default_db="shop", server_charset="utf8mb4", strict=False)
    statement = "ALTER TABLE items MODIFY name VARCHAR(10) NOT NULL"
    _, strict_effects = apply(statement)
    _, loose_effects = apply(statement, context=loose)
    assert not any(isinstance(e, ddl.Unrepresentable) for e in strict_effects)
    assert [type(e).__name__ for e in loose_effects] == ["Unrepresentable", "TableAltered"]
    # widening never rewrites, strict or not
    _, widened = apply("ALTER TABLE items MODIFY price DECIMAL(14,4)", context=loose)
    assert [type(e).__name__ for e in widened] == ["TableAltered"]


# a table with a column of each kind whose stored values an ALTER may rewrite
VALUES = [
    *BASE,
    "CREATE TABLE v (f FLOAT(7,4), g FLOAT, d DOUBLE(10,2), e ENUM('a','b'), s SET('a','b'), "
    "b ENUM('a','b','c') COLLATE utf8mb4_bin, c CHAR(5), vc VARCHAR(5), tx TEXT, "
    "n DECIMAL(5,2), i INT)",
]
LOOSE = ddl.Context(default_db="shop", server_charset="utf8mb4", strict=False)

# (statement, sql_mode strict, words of the reason)
REWRITES = [
    # CHAR drops trailing spaces of stored values, in any sql_mode
    ("ALTER TABLE v MODIFY vc CHAR(5)", True, "became CHAR"),
    ("ALTER TABLE v MODIFY vc CHAR(5)", False, "became CHAR"),
    ("ALTER TABLE v MODIFY tx CHAR(5)", True, "became CHAR"),
    # a stored ENUM/SET value takes the new label equal under the collation ('a' -> 'A')
    ("ALTER TABLE v MODIFY e ENUM('A','b')", True, "'a' not kept as spelled"),
    ("ALTER TABLE v MODIFY s SET('A','b')", True, "'a' not kept as spelled"),
    ("ALTER TABLE v MODIFY e ENUM('b','A ')", True, "'a' not kept as spelled"),
    ("ALTER TABLE v MODIFY e ENUM('b','á')", True, "'a' not kept as spelled"),  # maybe equal
    ("ALTER TABLE v MODIFY b ENUM('a','b') COLLATE utf8mb4_general_ci", True, "not kept"),
    # FLOAT/DOUBLE(M,D) round to D decimals, and bound to M-D digits outside strict mode
    ("ALTER TABLE v MODIFY f FLOAT(7,2)", True, "rounded to 2 decimals"),
    ("ALTER TABLE v MODIFY g FLOAT(7,2)", False, "rounded to 2 decimals"),
    ("ALTER TABLE v MODIFY g DOUBLE(10,2)", True, "rounded to 2 decimals"),
    ("ALTER TABLE v MODIFY f FLOAT(5,4)", False, "range narrowed"),
    # UNSIGNED, NOT NULL outside strict mode
    ("ALTER TABLE v MODIFY g FLOAT UNSIGNED", False, "made UNSIGNED"),
    ("ALTER TABLE v MODIFY n DECIMAL(5,2) UNSIGNED", False, "made UNSIGNED"),
    ("ALTER TABLE v MODIFY i BIGINT NOT NULL", False, "made NOT NULL"),
    # ALTER IGNORE changes what does not fit, strict or not
    ("ALTER IGNORE TABLE v MODIFY e ENUM('a')", True, "labels removed"),
    ("ALTER IGNORE TABLE v MODIFY vc VARCHAR(2)", True, "length reduced"),
    ("ALTER IGNORE TABLE v ADD UNIQUE (i)", True, "duplicate key are deleted"),
    ("ALTER IGNORE TABLE v MODIFY i INT PRIMARY KEY", True, "duplicate key are deleted"),
]


@pytest.mark.parametrize(("statement", "strict", "reason"), REWRITES)
def test_alters_that_rewrite_stored_values(statement: str, strict: bool, reason: str) -> None:
    _, effects = ddl.apply_ddl(catalog(statements=VALUES), statement, CTX if strict else LOOSE)
    reasons = [e.reason for e in effects if isinstance(e, ddl.Unrepresentable)]
    assert len(reasons) == 1
    assert reason in reasons[0]


# (statement, sql_mode strict): every stored value stays as it was
KEEPS = [
    ("ALTER TABLE v MODIFY c VARCHAR(5)", False),
    ("ALTER TABLE v MODIFY f FLOAT(9,4)", False),
    ("ALTER TABLE v MODIFY f FLOAT(5,4)", True),  # a value that does not fit fails it
    ("ALTER TABLE v MODIFY f FLOAT", False),
    ("ALTER TABLE v MODIFY f DOUBLE(7,4)", False),
    ("ALTER TABLE v MODIFY f FLOAT(7,4), MODIFY d DOUBLE(10,2), MODIFY g FLOAT", False),
    ("ALTER TABLE v ADD x INT, MODIFY n DECIMAL(6,2)", False),
    ("ALTER TABLE v MODIFY e ENUM('a','b','A'), MODIFY s SET('b','a','c')", False),
    ("ALTER TABLE v MODIFY b ENUM('a','b') COLLATE utf8mb4_bin", True),  # binary: 'c' fails
    # strict: a row holding a removed label fails the statement, so a logged one changed none
    ("ALTER TABLE v MODIFY e ENUM('b')", True),
    ("ALTER TABLE v MODIFY e ENUM('b','c'), MODIFY s SET('b','a')", True),
    ("ALTER TABLE v MODIFY i BIGINT NOT NULL", True),
    ("ALTER TABLE v MODIFY g FLOAT UNSIGNED", True),
    ("ALTER IGNORE TABLE v ADD KEY (i), DROP PRIMARY KEY", True),
    ("ALTER TABLE v ADD UNIQUE (i)", False),  # a duplicate fails it
]


@pytest.mark.parametrize(("statement", "strict"), KEEPS)
def test_alters_that_keep_stored_values(statement: str, strict: bool) -> None:
    _, effects = ddl.apply_ddl(catalog(statements=VALUES), statement, CTX if strict else LOOSE)
    assert [e for e in effects if isinstance(e, ddl.Unrepresentable)] == []


NOT_UNDERSTOOD = {
    "CREATE TABLE t3 SELECT * FROM items": [("shop", "t3")],
    "CREATE TABLE t4 (a INT) AS SELECT 1": [("shop", "t4")],
    "ALTER TABLE unknown ADD c INT": [("shop", "unknown")],
    "RENAME TABLE unknown TO items2": [("shop", "unknown"), ("shop", "items2")],
    # a name in use: only a temporary table (whose CREATE is not logged) is renamed so
    "RENAME TABLE items TO log": [("shop", "items"), ("shop", "log")],
    "RENAME TABLE log TO log2, items TO log2": [
        ("shop", "log"),
        ("shop", "log2"),
        ("shop", "items"),
    ],
    "ALTER TABLE items RENAME TO log": [("shop", "items"), ("shop", "log")],
    "CREATE TABLE t5 LIKE unknown": [("shop", "t5"), ("shop", "unknown")],
    "ALTER TABLE items ADD SYSTEM VERSIONING": [("shop", "items")],
    "ALTER TABLE items FROBNICATE": [("shop", "items")],
    "CREATE TABLE t6 (a INT FROBNICATE)": [("shop", "t6")],
    "CREATE TABLE t7 (a NOTATYPE)": [("shop", "t7")],
    "ALTER TABLE items DROP COLUMN nope": [("shop", "items")],
    "IMPORT TABLE FROM '/tmp/t.sdi'": None,
    "CREATE TABLE nodb (a INT": [("shop", "nodb")],
}


@pytest.mark.parametrize("statement", list(NOT_UNDERSTOOD))
def test_statements_not_understood_name_their_tables(statement: str) -> None:
    with pytest.raises(ddl.DdlError) as caught:
        apply(statement)
    tables = NOT_UNDERSTOOD[statement]
    assert caught.value.tables == (None if tables is None else tuple(tables))


def test_unqualified_name_without_database() -> None:
    with pytest.raises(ddl.DdlError) as caught:
        ddl.apply_ddl(catalog(), "ALTER TABLE items ADD c INT", ddl.Context())
    assert caught.value.tables is None


def test_versioned_comments_follow_the_server() -> None:
    statement = "ALTER TABLE items /*!90000 ADD c INT, */ /*M!100100 ADD d INT, */ ADD e INT"
    # MariaDB 10.11 is "version 101106" to /*!NNNNN: it runs /*!90000 too, as the server does
    for traits, added in ((MARIADB, ["c", "d", "e"]), (MYSQL8, ["e"])):
        after, _ = ddl.apply_ddl(catalog(traits), statement, CTX)
        table = after.table("shop", "items")
        assert table is not None
        assert [c.name for c in table.columns[4:]] == added


def test_ansi_quotes() -> None:
    ansi = ddl.Context(default_db="shop", ansi_quotes=True)
    after, _ = ddl.apply_ddl(catalog(), 'ALTER TABLE "items" ADD "my col" INT', ansi)
    assert after.table("shop", "items").column("my col") is not None  # type: ignore[union-attr]


def test_lower_case_table_names() -> None:
    traits = ServerTraits("mysql", (8, 0, 36), 1)
    current = catalog(traits, ["CREATE DATABASE Shop", "CREATE TABLE Shop.Items (a INT)"])
    assert current.table("shop", "items") is not None
    after, effects = ddl.apply_ddl(current, "DROP TABLE SHOP.ITEMS", CTX)
    assert [type(e).__name__ for e in effects] == ["TableDropped"]
    assert after.tables == {}


DML = {
    "INSERT INTO t VALUES (1)": [("shop", "t")],
    "insert ignore into other.t (a) select * from x": [("other", "t")],
    "REPLACE LOW_PRIORITY INTO d.r SET a=1": [("d", "r")],
    "UPDATE a JOIN b ON a.x = b.y SET a.z = 1": [("shop", "a"), ("shop", "b")],
    "UPDATE IGNORE items SET name = 'x' WHERE id = 1": [("shop", "items")],
    "DELETE FROM x WHERE 1": [("shop", "x")],
    "DELETE a FROM a JOIN db2.b ON a.i = b.i": [("shop", "a"), ("shop", "a"), ("db2", "b")],
    "LOAD DATA INFILE 'f' INTO TABLE q": [("shop", "q")],
    "WITH c AS (SELECT 1) UPDATE items SET a = 1": [("shop", "items")],
    "UPDATE (SELECT 1) AS d SET a = 1": None,
    "CALL refill()": None,
    "SELECT f_that_writes()": None,
    "CREATE TABLE z (a INT)": [],
    "BEGIN": [],
    "SET @a = 1": [],
}


@pytest.mark.parametrize("statement", list(DML))
def test_dml_tables(statement: str) -> None:
    assert ddl.dml_tables(statement, CTX) == DML[statement]


def _query(statement: str, position: int = 1234) -> ev.QueryEvent:
    header = ev.EventHeader(0, 2, 1, 100, position + 100, 0)
    return ev.QueryEvent(
        header, "bin.000007", position, position + 100, 1, 0, 0, "shop", statement, b"", None, None
    )


def test_tracker_stops_on_statement_it_cannot_follow_for_replicated_table() -> None:
    history = SchemaHistory(catalog(), None)
    tracker = SchemaTracker(history, lambda db, t: db == "shop")
    with pytest.raises(IntegrityError) as caught:
        tracker.on_event(_query("ALTER TABLE items FROBNICATE"))
    assert "bin.000007:1234" in str(caught.value)
    assert "FROBNICATE" in str(caught.value)
    with pytest.raises(IntegrityError) as unlogged:
        tracker.on_event(_query("ALTER TABLE items MODIFY price INT", 2000))
    assert "bin.000007:2000" in str(unlogged.value) and "price" in str(unlogged.value)
    assert history.changes == []  # nothing recorded for statements that stopped


def test_tracker_forgets_unreplicated_tables_it_cannot_follow() -> None:
    history = SchemaHistory(catalog(), None)
    tracker = SchemaTracker(history, lambda db, t: t != "log")
    out = tracker.on_event(_query("ALTER TABLE log FROBNICATE"))
    assert history.catalog.table("shop", "log") is None
    assert history.catalog.table("shop", "items") is not None
    assert len(history.changes) == 1 and out is not None
    # a later rows event for the forgotten table finds no schema rather than a wrong one
    assert tracker("shop", "log") is None


def test_a_quote_in_a_line_comment_does_not_hide_what_follows() -> None:
    statement = "ALTER TABLE items ADD b INT -- don't\n, ADD c INT /*!50100 NOT NULL */ # it's\n"
    after, _ = apply(statement)
    table = after.table("shop", "items")
    assert table is not None
    assert table.column("c").nullable is False
    assert [c.name for c in table.columns[4:]] == ["b", "c"]


def test_charsets_named_as_the_server_names_them() -> None:
    statement = (
        "CREATE TABLE t (a TEXT(100), b NCHAR(3), c CHAR(3) CHARACTER SET utf8, "
        "d VARCHAR(3) COLLATE utf8_bin, e VARCHAR(3) COLLATE uca1400_ai_ci, "
        "f VARCHAR(3) NOT NULL CHAR SET latin1) DEFAULT CHARSET=utf8mb4"
    )
    old = ServerTraits("mysql", (5, 7, 44), 0)
    for traits, utf8 in ((MYSQL8, "utf8mb3"), (old, "utf8"), (MARIADB, "utf8mb3")):
        after, _ = ddl.apply_ddl(catalog(traits), statement, CTX)
        table = after.table("shop", "t")
        assert table is not None
        got = {c.name: c for c in table.columns}
        assert got["a"].data_type == "text"  # 100 characters of utf8mb4 need 400 bytes
        assert (got["b"].charset, got["c"].charset, got["d"].charset) == (utf8, utf8, utf8)
        assert got["d"].collation == f"{utf8}_bin"
        assert got["e"].charset == "utf8mb4"  # a uca1400 collation takes the table's charset
        assert got["f"].charset == "latin1"


def test_mariadb_wait_clauses() -> None:
    after, effects = apply("ALTER TABLE items WAIT 5 ADD z INT")
    assert [type(e).__name__ for e in effects] == ["TableAltered"]
    assert after.table("shop", "items").column("z") is not None
    with pytest.raises(ddl.DdlError):
        apply("CREATE TABLE t2 (a INT) DEFAULT")
