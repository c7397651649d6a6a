"""``source.catalog``: information_schema rows into the model, for MariaDB and MySQL.

The rows are written as the servers print them (MariaDB 10.11 captured from a live server;
MySQL from its documentation); the live test reads a real server.
"""

from __future__ import annotations

from typing import Any

import pymysql
import pytest

from replicator.errors import ServerRefusedError
from replicator.schema.model import NO_DEFAULT, ColumnDefault, ServerTraits
from replicator.source.catalog import (
    COLUMN_FIELDS,
    catalog_from_rows,
    column_default,
    parse_labels,
    read_catalog,
    read_traits,
    unquote,
)
from replicator.source.errors import SourceUnavailableError

MARIADB = ServerTraits("mariadb", (10, 11, 6), 0)
MYSQL = ServerTraits("mysql", (8, 0, 36), 0)
MARIADB_OLD = ServerTraits("mariadb", (10, 1, 48), 0)


def col(
    name: str, data_type: str, column_type: str | bytes | None = None, **fields: Any
) -> dict[str, Any]:
    """A COLUMNS row as a dict (table db.t unless given)."""
    return {
        "TABLE_SCHEMA": "db",
        "TABLE_NAME": "t",
        "COLUMN_NAME": name,
        "DATA_TYPE": data_type,
        "COLUMN_TYPE": column_type or data_type,
        "IS_NULLABLE": "YES",
        "EXTRA": "",
        **fields,
    }


def rows(*columns: dict[str, Any]) -> list[tuple[object, ...]]:
    out = []
    for i, c in enumerate(columns, start=1):
        row = {"ORDINAL_POSITION": i, **c}
        out.append(tuple(row.get(f) for f in COLUMN_FIELDS))
    return out


def one_table(traits: ServerTraits, *columns: dict[str, Any], primary: Any = ()) -> Any:
    catalog = catalog_from_rows(
        traits,
        [("db", "utf8mb4", "utf8mb4_general_ci")],
        [("db", "t", "latin1_swedish_ci", "latin1")],
        rows(*columns),
        primary,
    )
    return catalog.tables[("db", "t")]


# --------------------------------------------------------------------------- defaults


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, NO_DEFAULT),
        ("NULL", ColumnDefault("null")),
        ("'NULL'", ColumnDefault("value", "NULL")),
        ("'x'", ColumnDefault("value", "x")),
        ("''", ColumnDefault("value", "")),
        ("'it''s'", ColumnDefault("value", "it's")),
        ("'a\\\\nb'", ColumnDefault("value", "a\\nb")),
        ("'a\\nb\\0'", ColumnDefault("value", "a\nb\0")),
        ("'it\\'s'", ColumnDefault("value", "it's")),
        ("'2020-01-01 00:00:00'", ColumnDefault("value", "2020-01-01 00:00:00")),
        ("5", ColumnDefault("value", "5")),
        ("-1.50", ColumnDefault("value", "-1.50")),
        ("1.0e3", ColumnDefault("value", "1.0e3")),
        ("b'101'", ColumnDefault("value", "05", hex=True)),
        ("b'0'", ColumnDefault("value", "00", hex=True)),
        ("b'100000000'", ColumnDefault("value", "0100", hex=True)),
        ("current_timestamp()", ColumnDefault("expression", "current_timestamp()")),
        ("current_timestamp(3)", ColumnDefault("expression", "current_timestamp(3)")),
        ("uuid()", ColumnDefault("expression", "uuid()")),
        ("(1 + 2)", ColumnDefault("expression", "(1 + 2)")),
        ("'a' + 1", ColumnDefault("expression", "'a' + 1")),
    ],
)
def test_mariadb_default(text: str | None, expected: ColumnDefault) -> None:
    for nullable in (True, False):
        got = column_default(MARIADB, text, data_type="varchar", nullable=nullable)
        assert got == expected


@pytest.mark.parametrize(
    ("text", "data_type", "nullable", "extra", "expected"),
    [
        (None, "int", True, "", ColumnDefault("null")),
        (None, "int", False, "", NO_DEFAULT),
        ("x", "varchar", True, "", ColumnDefault("value", "x")),
        ("it's", "varchar", True, "", ColumnDefault("value", "it's")),
        ("NULL", "varchar", True, "", ColumnDefault("value", "NULL")),
        ("-1.50", "decimal", True, "", ColumnDefault("value", "-1.50")),
        ("", "varchar", False, "", ColumnDefault("value", "")),
        (
            "CURRENT_TIMESTAMP",
            "timestamp",
            False,
            "DEFAULT_GENERATED on update CURRENT_TIMESTAMP",
            ColumnDefault("expression", "CURRENT_TIMESTAMP"),
        ),
        ("uuid()", "varchar", True, "DEFAULT_GENERATED", ColumnDefault("expression", "uuid()")),
        (  # 5.7: no DEFAULT_GENERATED
            "CURRENT_TIMESTAMP(3)",
            "datetime",
            True,
            "",
            ColumnDefault("expression", "CURRENT_TIMESTAMP(3)"),
        ),
        ("CURRENT_TIMESTAMP", "varchar", True, "", ColumnDefault("value", "CURRENT_TIMESTAMP")),
        ("b'101'", "bit", True, "", ColumnDefault("value", "05", hex=True)),
        ("b'101'", "varchar", True, "", ColumnDefault("value", "b'101'")),
        ("0x6162FF", "varbinary", True, "", ColumnDefault("value", "6162ff", hex=True)),
        ("0x6162", "varchar", True, "", ColumnDefault("value", "0x6162")),
    ],
)
def test_mysql_default(
    text: str | None, data_type: str, nullable: bool, extra: str, expected: ColumnDefault
) -> None:
    got = column_default(MYSQL, text, data_type=data_type, nullable=nullable, extra=extra)
    assert got == expected


def test_old_mariadb_defaults_are_raw_values() -> None:
    assert column_default(MARIADB_OLD, "x", data_type="varchar", nullable=True) == ColumnDefault(
        "value", "x"
    )
    assert column_default(MARIADB_OLD, None, data_type="int", nullable=True) == ColumnDefault(
        "null"
    )
    assert column_default(
        MARIADB_OLD, "CURRENT_TIMESTAMP", data_type="timestamp", nullable=False
    ) == ColumnDefault("expression", "CURRENT_TIMESTAMP")
    # 0x... is MySQL 8's form for binary strings; 5.x/old MariaDB print the value.
    assert column_default(
        MARIADB_OLD, "0x41", data_type="varbinary", nullable=True
    ) == ColumnDefault("value", "0x41")


# --------------------------------------------------------------------------- labels


def test_labels_with_quotes_and_escapes() -> None:
    assert parse_labels("enum('a','it''s','b\\\\s','q\"',',','')") == (
        "a",
        "it's",
        "b\\s",
        'q"',
        ",",
        "",
    )
    assert parse_labels("set('x','y z')") == ("x", "y z")
    assert unquote("a''b\\'c\\Z\\r\\t\\%") == "a'b'c\x1a\r\t%"


# --------------------------------------------------------------------------- columns


def test_column_fields_mariadb() -> None:
    table = one_table(
        MARIADB,
        col("id", "int", "int(10) unsigned", IS_NULLABLE="NO", EXTRA="auto_increment"),
        col(
            "name",
            "varchar",
            "varchar(40)",
            CHARACTER_MAXIMUM_LENGTH=40,
            CHARACTER_SET_NAME="utf8mb4",
            COLLATION_NAME="utf8mb4_general_ci",
            COLUMN_DEFAULT="'it''s'",
        ),
        col(
            "kind",
            "enum",
            "enum('a','it''s')",
            CHARACTER_MAXIMUM_LENGTH=4,
            CHARACTER_SET_NAME="latin1",
            COLLATION_NAME="latin1_swedish_ci",
            COLUMN_DEFAULT="'a'",
        ),
        col("price", "decimal", "decimal(10,2) unsigned", NUMERIC_PRECISION=10, NUMERIC_SCALE=2),
        col("at", "datetime", "datetime(3)", DATETIME_PRECISION=3, COLUMN_DEFAULT="NULL"),
        col("n", "int", "int(11)", NUMERIC_PRECISION=10, NUMERIC_SCALE=0),
        col("flags", "bit", "bit(5)", NUMERIC_PRECISION=5, COLUMN_DEFAULT="b'101'"),
        col("raw", "varbinary", "varbinary(8)", CHARACTER_MAXIMUM_LENGTH=8),
        col("blob", "blob", "blob", CHARACTER_MAXIMUM_LENGTH=65535),
        col("u", "uuid", "uuid", COLUMN_DEFAULT="uuid()"),
        col(
            "g",
            "int",
            "int(11)",
            COLUMN_DEFAULT="NULL",
            EXTRA="STORED GENERATED",
            GENERATION_EXPRESSION="`n` * 2",
        ),
        col("p", "int", "int(11)", EXTRA="PERSISTENT", GENERATION_EXPRESSION="`n` + 1"),
        col("hidden", "int", "int(11)", COLUMN_DEFAULT="7", EXTRA="INVISIBLE"),
    )
    c = {column.name: column for column in table.columns}
    assert c["id"].unsigned and c["id"].auto_increment and not c["id"].nullable
    assert c["id"].default == NO_DEFAULT
    assert c["id"].length is None and c["id"].charset is None
    assert (c["name"].length, c["name"].charset, c["name"].collation) == (
        40,
        "utf8mb4",
        "utf8mb4_general_ci",
    )
    assert c["name"].default == ColumnDefault("value", "it's")
    assert c["kind"].labels == ("a", "it's")
    assert not c["kind"].unsigned
    assert (c["kind"].length, c["kind"].charset) == (None, "latin1")
    assert (c["price"].precision, c["price"].scale, c["price"].unsigned) == (10, 2, True)
    assert (c["n"].precision, c["n"].scale) == (None, None)
    assert (c["at"].fsp, c["at"].default) == (3, ColumnDefault("null"))
    assert c["n"].fsp is None
    assert (c["flags"].length, c["flags"].precision) == (5, None)
    assert c["flags"].default == ColumnDefault("value", "05", hex=True)
    assert (c["raw"].charset, c["raw"].collation, c["raw"].length) == ("binary", None, 8)
    assert (c["blob"].charset, c["blob"].length) == ("binary", None)
    assert c["u"].default == ColumnDefault("expression", "uuid()")
    assert (c["g"].generated, c["g"].default) == ("`n` * 2", NO_DEFAULT)
    assert c["p"].generated == "`n` + 1"
    assert c["hidden"].invisible and c["hidden"].default == ColumnDefault("value", "7")
    assert not c["n"].invisible and c["n"].generated is None
    assert c["n"].labels is None


def test_column_fields_mysql() -> None:
    table = one_table(
        MYSQL,
        col(
            "raw",
            "binary",
            "binary(4)",
            CHARACTER_MAXIMUM_LENGTH=4,
            CHARACTER_SET_NAME="binary",
            COLLATION_NAME="binary",
            COLUMN_DEFAULT="0x61",
        ),
        col(
            "at",
            "timestamp",
            "timestamp(6)",
            DATETIME_PRECISION=6,
            IS_NULLABLE="NO",
            COLUMN_DEFAULT="CURRENT_TIMESTAMP(6)",
            EXTRA="DEFAULT_GENERATED on update CURRENT_TIMESTAMP(6)",
        ),
        col("d", "int", "int", EXTRA="DEFAULT_GENERATED", COLUMN_DEFAULT="(`n` + 1)"),
        col(
            "v",
            "int",
            "int",
            EXTRA="VIRTUAL GENERATED INVISIBLE",
            GENERATION_EXPRESSION="(`d` * 2)",
        ),
        col("j", "json", "json", COLUMN_DEFAULT=None),
        col("b", "bit", "bit(10)", NUMERIC_PRECISION=10, COLUMN_DEFAULT="b'100'"),
        col("bytes", "varchar", b"varchar(3)", CHARACTER_MAXIMUM_LENGTH=3, COLUMN_DEFAULT=b"x"),
    )
    c = {column.name: column for column in table.columns}
    assert (c["raw"].charset, c["raw"].collation) == ("binary", None)
    assert c["raw"].default == ColumnDefault("value", "61", hex=True)
    assert (c["at"].fsp, c["at"].default) == (
        6,
        ColumnDefault("expression", "CURRENT_TIMESTAMP(6)"),
    )
    assert c["d"].default == ColumnDefault("expression", "(`n` + 1)")
    assert c["d"].generated is None
    assert (c["v"].generated, c["v"].invisible, c["v"].default) == ("(`d` * 2)", True, NO_DEFAULT)
    assert (c["j"].charset, c["j"].default) == (None, ColumnDefault("null"))
    assert (c["b"].length, c["b"].default) == (10, ColumnDefault("value", "04", hex=True))
    assert (c["bytes"].column_type, c["bytes"].default) == (
        "varchar(3)",
        ColumnDefault("value", "x"),
    )


# --------------------------------------------------------------------------- tables


def test_ids_order_and_primary_key() -> None:
    columns = rows(col("a", "int"), col("b", "int"), col("c", "int"))
    columns.reverse()  # sorted by ORDINAL_POSITION, not row order
    catalog = catalog_from_rows(
        MARIADB,
        [("db", "latin1", "latin1_swedish_ci")],
        [("db", "t", "latin1_swedish_ci", "latin1")],
        columns,
        [("db", "t", "a", 2), ("db", "t", "c", 1)],
    )
    table = catalog.tables[("db", "t")]
    assert [(c.name, c.id) for c in table.columns] == [("a", 1), ("b", 2), ("c", 3)]
    assert all(c.fill is None for c in table.columns)
    assert catalog.next_column_id == 4
    assert table.primary_key == ("c", "a")
    assert (table.charset, table.collation) == ("latin1", "latin1_swedish_ci")


def test_catalog_skips_system_schemas_and_other_tables() -> None:
    catalog = catalog_from_rows(
        MARIADB,
        [
            ("Shop", "utf8mb4", "utf8mb4_uca1400_ai_ci"),
            ("mysql", "latin1", "latin1_swedish_ci"),
            (b"sys", "utf8mb3", "utf8mb3_general_ci"),
        ],
        [
            ("Shop", "Orders", "utf8mb4_uca1400_ai_ci", None),  # not in the join: from the name
            ("Shop", "orders", "utf8mb4_bin", "utf8mb4"),
            ("Shop", "empty", None, None),
            ("mysql", "user", "utf8mb3_bin", "utf8mb3"),
        ],
        rows(
            col("x", "int", TABLE_SCHEMA="Shop", TABLE_NAME="Orders"),
            col("y", "int", TABLE_SCHEMA="Shop", TABLE_NAME="orders"),
            col("v", "int", TABLE_SCHEMA="Shop", TABLE_NAME="a_view"),
            col("Host", "char", TABLE_SCHEMA="mysql", TABLE_NAME="user"),
        ),
        [("Shop", "a_view", "v", 1), ("Shop", "orders", "y", 1)],
    )
    assert list(catalog.databases) == ["Shop"]
    assert catalog.databases["Shop"].collation == "utf8mb4_uca1400_ai_ci"
    assert sorted(catalog.tables) == [("Shop", "Orders"), ("Shop", "empty"), ("Shop", "orders")]
    upper, lower = catalog.tables[("Shop", "Orders")], catalog.tables[("Shop", "orders")]
    assert (upper.charset, [c.name for c in upper.columns], upper.primary_key) == (
        "utf8mb4",
        ["x"],
        (),
    )
    assert (lower.charset, [c.name for c in lower.columns], lower.primary_key) == (
        "utf8mb4",
        ["y"],
        ("y",),
    )
    empty = catalog.tables[("Shop", "empty")]
    assert (empty.columns, empty.charset) == ((), None)
    assert catalog.traits == MARIADB


# --------------------------------------------------------------------------- reading


class FakeConnection:
    """Answers each query with the next of ``answers`` (rows, or an exception to raise)."""

    unix_socket = None
    host = "db.example"
    port = 3306
    user = b"repl"

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.sql: list[str] = []

    def cursor(self) -> FakeConnection:
        return self

    def __enter__(self) -> FakeConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def execute(self, sql: str) -> None:
        self.sql.append(sql)
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        self.rows = answer

    def fetchall(self) -> Any:
        return self.rows


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("10.11.6-MariaDB-0+deb12u1", ServerTraits("mariadb", (10, 11, 6), 1)),
        ("8.0.36", ServerTraits("mysql", (8, 0, 36), 1)),
        ("8.4.0-commercial", ServerTraits("mysql", (8, 4, 0), 1)),
    ],
)
def test_read_traits(version: str, expected: ServerTraits) -> None:
    assert read_traits(FakeConnection([(version, 1)])) == expected


def test_read_catalog_runs_four_queries() -> None:
    conn = FakeConnection(
        [("db", "utf8mb4", "utf8mb4_general_ci")],
        [("db", "t", "utf8mb4_general_ci", "utf8mb4")],
        rows(col("a", "int", IS_NULLABLE="NO")),
        [("db", "t", "a", 1)],
    )
    catalog = read_catalog(conn, MARIADB)
    assert catalog.tables[("db", "t")].primary_key == ("a",)
    assert len(conn.sql) == 4
    assert "GENERATION_EXPRESSION" in conn.sql[2]
    assert "INDEX_NAME = 'PRIMARY'" in conn.sql[3]


def test_errors_are_sorted_by_cause() -> None:
    denied = pymysql.err.OperationalError(1142, "SELECT command denied to user 'repl'")
    with pytest.raises(ServerRefusedError, match=r"may not read information_schema\.SCHEMATA") as e:
        read_catalog(FakeConnection(denied), MARIADB)
    assert "SELECT on the replicated tables" in e.value.hint
    lost = pymysql.err.OperationalError(2013, "Lost connection to MySQL server during query")
    with pytest.raises(SourceUnavailableError, match=r"cannot read information_schema\.TABLES"):
        read_catalog(FakeConnection([], lost), MARIADB)
    with pytest.raises(SourceUnavailableError, match=r"db\.example:3306: cannot read"):
        read_traits(FakeConnection(pymysql.err.InterfaceError(0, "")))


def test_columns_are_numbered_across_tables_in_key_order() -> None:
    """The ids a seed's catalog gives its columns: 1..n over the tables sorted by key, each
    table's columns in ordinal order, whatever order the server lists them in."""
    second = [{**c, "TABLE_NAME": "b"} for c in (col("x", "int"), col("y", "int"))]
    first = [{**c, "TABLE_NAME": "a"} for c in (col("p", "int"), col("q", "int"))]
    listed = rows(*second) + rows(*first)
    listed[0], listed[1] = listed[1], listed[0]  # b's columns out of ordinal order
    catalog = catalog_from_rows(
        MARIADB,
        [("db", "utf8mb4", "utf8mb4_general_ci")],
        [("db", "b", "latin1_swedish_ci", "latin1"), ("db", "a", "latin1_swedish_ci", "latin1")],
        listed,
        [],
    )
    assert list(catalog.tables) == [("db", "a"), ("db", "b")]
    found = [(t.name, c.name, c.id) for t in catalog.tables.values() for c in t.columns]
    assert found == [("a", "p", 1), ("a", "q", 2), ("b", "x", 3), ("b", "y", 4)]
    assert catalog.next_column_id == 5
    assert catalog.numbered() == catalog
