"""Column definitions read from sqlglot's syntax tree (``schema.ddl_tree``).

Each definition is applied as ``CREATE TABLE t (<definition>)`` and as ``ALTER TABLE t0 ADD
<definition>``; the facts expected are what MariaDB 10.11's information_schema shows for it
(checked against a live server), or, for words both servers accept that sqlglot reads
otherwise (INT8, REAL, LONG, NATIONAL, ...), what the servers' grammar says.
"""

from __future__ import annotations

import pytest

from replicator.schema import ddl
from replicator.schema.ddl_tree import UnreadableColumn, read_column
from replicator.schema.model import Catalog, Column, ColumnDefault, ServerTraits

MARIADB = ServerTraits("mariadb", (10, 11, 6), 0)
CTX = ddl.Context(default_db="d", server_charset="utf8mb4", strict=True)
ANSI = ddl.Context(default_db="d", server_charset="utf8mb4", strict=True, ansi_quotes=True)


def _catalog(context: ddl.Context = CTX) -> Catalog:
    current = Catalog(MARIADB)
    for statement in ("CREATE DATABASE d CHARACTER SET latin1", "CREATE TABLE t0 (id INT, x INT)"):
        current, _ = ddl.apply_ddl(current, statement, context)
    return current


def _created(definition: str, context: ddl.Context = CTX) -> Column:
    after, _ = ddl.apply_ddl(_catalog(context), f"CREATE TABLE t ({definition})", context)
    table = after.table("d", "t")
    assert table is not None
    return table.columns[0]


def _added(definition: str, context: ddl.Context = CTX) -> Column:
    after, _ = ddl.apply_ddl(_catalog(context), f"ALTER TABLE t0 ADD {definition}", context)
    table = after.table("d", "t0")
    assert table is not None
    return max(table.columns, key=lambda column: column.id)  # the one added


NONE = ColumnDefault()
# definition -> (COLUMN_TYPE, charset, nullable, default)
FACTS: dict[str, tuple[str, str | None, bool, ColumnDefault]] = {
    "a INT8": ("bigint(20)", None, True, NONE),
    "a REAL": ("double", None, True, NONE),
    "a LONG": ("mediumtext", "latin1", True, NONE),
    "a LONG VARCHAR BINARY": ("mediumtext", "latin1", True, NONE),
    "a LONG VARBINARY": ("mediumblob", "binary", True, NONE),
    "a MIDDLEINT UNSIGNED": ("mediumint(8) unsigned", None, True, NONE),
    "a INT3": ("mediumint(9)", None, True, NONE),
    "a FLOAT4": ("float", None, True, NONE),
    "a FLOAT8": ("double", None, True, NONE),
    "a FLOAT UNSIGNED": ("float unsigned", None, True, NONE),
    "a FLOAT(30) UNSIGNED": ("double unsigned", None, True, NONE),
    "a FLOAT(7,3) UNSIGNED ZEROFILL": ("float(7,3) unsigned zerofill", None, True, NONE),
    "a INT ZEROFILL UNSIGNED": ("int(10) unsigned zerofill", None, True, NONE),
    "a NATIONAL VARCHAR(4)": ("varchar(4)", "utf8mb3", True, NONE),
    "a NCHAR VARCHAR(3)": ("varchar(3)", "utf8mb3", True, NONE),
    "a NATIONAL CHAR(2)": ("char(2)", "utf8mb3", True, NONE),
    "a CHAR(3) BYTE": ("binary(3)", "binary", True, NONE),
    "a CHAR(2) UNICODE BINARY": ("char(2)", "ucs2", True, NONE),
    "a INET6": ("inet6", None, True, NONE),
    "a POINT NOT NULL": ("point", None, False, NONE),
    "a GEOMETRYCOLLECTION": ("geometrycollection", None, True, NONE),
    "a INT SERIAL DEFAULT VALUE": ("int(11)", None, False, NONE),
    "a TEXT(300) CHARACTER SET utf8mb4": ("text", "utf8mb4", True, NONE),
    "a TEXT(20000) CHARACTER SET latin1": ("text", "latin1", True, NONE),
    "a VARCHAR(3) DEFAULT 'x' COLLATE latin1_bin": (
        "varchar(3)", "latin1", True, ColumnDefault("value", "x")
    ),
    "a TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)": (
        "timestamp(6)", None, False, ColumnDefault("expression", "current_timestamp(6)")
    ),
    "a INT DEFAULT -5 COMMENT 'it''s' NOT NULL": (
        "int(11)", None, False, ColumnDefault("value", "-5")
    ),
    "a BIT(3) DEFAULT b'101'": ("bit(3)", None, True, ColumnDefault("value", "05", hex=True)),
}  # fmt: skip


@pytest.mark.parametrize("definition", list(FACTS))
def test_definitions_read_as_the_server_reads_them(definition: str) -> None:
    column_type, charset, nullable, default = FACTS[definition]
    for column in (_created(definition), _added(definition)):
        assert (column.column_type, column.charset, column.nullable) == (
            column_type,
            charset,
            nullable,
        )
        assert column.default == default


def test_escapes_in_labels_and_defaults_are_the_servers() -> None:
    labels = r"ENUM('a\nb', 'c\\d', 'e\'f', 'g\%h', 'i\_j', 'k\Zl', 'm\0n', 'o\tp')"
    column = _created(f"a {labels} DEFAULT 'o\\tp'")
    assert column.labels == ("a\nb", "c\\d", "e'f", "g\\%h", "i\\_j", "k\x1al", "m\x00n", "o\tp")
    assert column.default == ColumnDefault("value", "o\tp")
    assert _added(r"b VARCHAR(3) DEFAULT '\0'").default == ColumnDefault("value", "\x00")


GENERATED = {
    "a INT AS (x+1) VIRTUAL": "x+1",
    "a VARCHAR(9) GENERATED ALWAYS AS (concat(x, 'y')) STORED": "concat(x, 'y')",
    "a INT AS ((x)) PERSISTENT INVISIBLE": "(x)",
}
DEFAULTS = {
    "a INT DEFAULT (x+1)": "(x+1)",
    "a DATETIME DEFAULT CURRENT_TIMESTAMP": "current_timestamp",
    "a DATETIME(3) DEFAULT NOW(3) ON UPDATE NOW(3)": "now(3)",
    "a CHAR(36) DEFAULT uuid()": "uuid()",
}


@pytest.mark.parametrize("definition", list(GENERATED))
def test_generation_expressions_are_kept_as_written(definition: str) -> None:
    column = _added(definition)
    assert (column.generated, column.default) == (GENERATED[definition], NONE)


@pytest.mark.parametrize("definition", list(DEFAULTS))
def test_default_expressions_are_kept_as_written(definition: str) -> None:
    column = _added(definition)
    assert column.default == ColumnDefault("expression", DEFAULTS[definition])
    assert column.generated is None


def test_positions_and_the_primary_key_come_from_the_tree() -> None:
    spec = read_column("c", "INT NOT NULL AFTER `x`", in_alter=True)
    assert spec.position == ("after", "x") and spec.nullable is False
    assert read_column("c", "BIGINT FIRST", in_alter=True).position == ("first", None)
    assert read_column("c", "INT KEY", in_alter=False).primary
    assert read_column("c", 'INT AFTER "x"', in_alter=True, ansi_quotes=True).position == (
        "after",
        "x",
    )


REFUSED = [
    "a INT FIRST",  # a position in CREATE TABLE
    "a NOTATYPE",
    "a INT FROBNICATE",
    "a BOOL(3)",
    "a VARCHAR",
    "a TIMESTAMP(6) GENERATED ALWAYS AS ROW START",
    "a INT WITH SYSTEM VERSIONING",
    "a INT ENCODE zstd",  # another dialect's attribute
]


@pytest.mark.parametrize("definition", REFUSED)
def test_definitions_not_read_exactly_stop_naming_the_table(definition: str) -> None:
    with pytest.raises(ddl.DdlError) as caught:
        ddl.apply_ddl(_catalog(), f"CREATE TABLE t ({definition})", CTX)
    assert caught.value.tables == (("d", "t"),)
    with pytest.raises(UnreadableColumn):
        read_column("a", definition.split(" ", 1)[1], in_alter=False)


def test_ansi_quotes_make_double_quotes_names() -> None:
    column = _added('"my col" INT DEFAULT 3 AFTER "id"', ANSI)
    assert (column.name, column.default) == ("my col", ColumnDefault("value", "3"))
    with pytest.raises(ddl.DdlError):
        _created('a VARCHAR(3) DEFAULT "x"', ANSI)  # an identifier, not a string
    assert _created('a VARCHAR(3) DEFAULT "x"').default == ColumnDefault("value", "x")


def test_set_default_is_read_as_a_definition_reads_it() -> None:
    statement = "ALTER TABLE t0 ALTER x SET DEFAULT -7, ALTER id SET DEFAULT (x + 1)"
    after, _ = ddl.apply_ddl(_catalog(), statement, CTX)
    table = after.table("d", "t0")
    assert table is not None
    got = {column.name: column.default for column in table.columns}
    assert got == {"id": ColumnDefault("expression", "(x + 1)"), "x": ColumnDefault("value", "-7")}
    with pytest.raises(ddl.DdlError):
        ddl.apply_ddl(_catalog(), "ALTER TABLE t0 ALTER x SET DEFAULT", CTX)


# a constant the server converts by the kind of literal it is (checked against MariaDB 10.11:
# tests/live/test_fills_against_server.py): kept as an expression, so its fill is unknown
CONVERTED_DEFAULTS = {
    "a ENUM('2','1') DEFAULT 1": "1",  # an index: '2'
    "a SET('a','b') DEFAULT 1": "1",  # a bit mask
    "a ENUM('0','1') DEFAULT TRUE": "1",
    "a BIT(8) DEFAULT '5'": "5",  # its bytes: 53
    "a BIT(8) DEFAULT _latin1 '5'": "5",
    "a VARCHAR(5) DEFAULT 1e2": "1e2",  # '100'
    "a VARCHAR(5) DEFAULT -0": "-0",  # '0'
    "a TEXT DEFAULT 1.50": "1.50",
    "a BINARY(3) DEFAULT 007": "007",  # '7'
}


@pytest.mark.parametrize("definition", list(CONVERTED_DEFAULTS))
def test_constants_the_server_converts_by_their_kind_are_expressions(definition: str) -> None:
    expected = ColumnDefault("expression", CONVERTED_DEFAULTS[definition])
    assert (_created(definition).default, _added(definition).default) == (expected, expected)


KEPT_DEFAULTS = {
    "a VARCHAR(5) DEFAULT 5": ColumnDefault("value", "5"),
    "a VARCHAR(5) DEFAULT -7": ColumnDefault("value", "-7"),
    "a VARCHAR(5) DEFAULT TRUE": ColumnDefault("value", "1"),
    "a ENUM('a','b') DEFAULT 'b'": ColumnDefault("value", "b"),
    "a ENUM('a','b') DEFAULT x'62'": ColumnDefault("value", "62", hex=True),
    "a BIT(8) DEFAULT 5": ColumnDefault("value", "5"),
    "a BIT(8) DEFAULT b'101'": ColumnDefault("value", "05", hex=True),
    "a INT DEFAULT '7'": ColumnDefault("value", "7"),
    "a TIMESTAMP NULL": ColumnDefault("null"),  # whatever explicit_defaults_for_timestamp is
    "a TIMESTAMP NULL DEFAULT '2020-01-01 00:00:00'": ColumnDefault("value", "2020-01-01 00:00:00"),
    "a TIMESTAMP": NONE,  # explicit_defaults_for_timestamp decides (history.fill_of)
    "a TIMESTAMP NOT NULL": NONE,
    "a TIMESTAMP NULL NOT NULL": NONE,
    "a DATETIME NULL": NONE,
}


@pytest.mark.parametrize("definition", list(KEPT_DEFAULTS))
def test_other_constants_are_kept_as_written(definition: str) -> None:
    expected = KEPT_DEFAULTS[definition]
    assert (_created(definition).default, _added(definition).default) == (expected, expected)
