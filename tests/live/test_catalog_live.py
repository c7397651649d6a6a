"""``source.catalog`` against a live MariaDB: the catalog read field by field."""

from __future__ import annotations

import contextlib
from dataclasses import replace

import pytest

from replicator.schema.model import NO_DEFAULT, Column, ColumnDefault, Table
from replicator.source.catalog import read_catalog, read_traits
from tests.harness.mariadb import MariaDBServer, mariadbd_version

pytestmark = pytest.mark.live

DB = "catalog_live"
SETUP = [
    f"DROP DATABASE IF EXISTS {DB}",
    f"CREATE DATABASE {DB} CHARACTER SET latin1 COLLATE latin1_swedish_ci",
    f"""CREATE TABLE {DB}.orders (
        region CHAR(2) NOT NULL,
        id INT UNSIGNED NOT NULL AUTO_INCREMENT,
        PRIMARY KEY (id, region)
    ) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin""",
    f"CREATE TABLE {DB}.keyless (code VARCHAR(8) NOT NULL UNIQUE, note TEXT)",
    rf"""CREATE TABLE {DB}.kinds (
        e ENUM('a','it''s','b\\s') NOT NULL DEFAULT 'it''s',
        s SET('x','y') DEFAULT 'x,y',
        d DECIMAL(10,2) DEFAULT -1.50,
        at DATETIME(3) DEFAULT CURRENT_TIMESTAMP(3),
        flags BIT(5) DEFAULT b'101',
        u UUID DEFAULT uuid(),
        ip INET6 DEFAULT '::1',
        n INT,
        g INT AS (n * 2) STORED,
        hid INT INVISIBLE DEFAULT 7,
        nn INT NOT NULL,
        str VARCHAR(10) DEFAULT 'it''s',
        vb VARBINARY(4) DEFAULT 'ab',
        expr INT DEFAULT (1 + 2),
        nul VARCHAR(4) DEFAULT NULL,
        word VARCHAR(4) DEFAULT 'NULL'
    )""",
    f"CREATE VIEW {DB}.a_view AS SELECT n FROM {DB}.kinds",
    f"CREATE SEQUENCE {DB}.a_sequence",
]


@pytest.fixture
def server(mariadb: MariaDBServer) -> MariaDBServer:
    if mariadbd_version() < (10, 7):
        pytest.skip("UUID columns need MariaDB 10.7+")
    for sql in SETUP:
        mariadb.execute(sql)
    return mariadb


def _local(table: Table) -> Table:
    """The table with its column ids counted from 1 (the catalog numbers them across all
    tables of the server, which other tests share)."""
    base = table.columns[0].id - 1 if table.columns else 0
    return replace(table, columns=tuple(replace(c, id=c.id - base) for c in table.columns))


def test_catalog_from_live_server(server: MariaDBServer) -> None:
    with contextlib.closing(server.connect()) as conn:
        traits = read_traits(conn)
        catalog = read_catalog(conn, traits)
    ids = [c.id for t in catalog.tables.values() for c in t.columns]
    assert sorted(ids) == list(range(1, len(ids) + 1))  # unique across the catalog
    assert catalog.next_column_id == len(ids) + 1

    assert traits.flavor == "mariadb"
    assert traits.version[:2] == mariadbd_version()
    assert traits.lower_case_table_names == 0
    assert catalog.traits == traits
    db = catalog.databases[DB]
    assert (db.charset, db.collation) == ("latin1", "latin1_swedish_ci")
    assert not {"mysql", "information_schema", "performance_schema", "sys"} & set(catalog.databases)
    assert sorted(k for k in catalog.tables if k[0] == DB) == [
        (DB, "keyless"),
        (DB, "kinds"),
        (DB, "orders"),
    ]

    orders = _local(catalog.tables[(DB, "orders")])
    assert orders.primary_key == ("id", "region")
    assert (orders.charset, orders.collation) == ("utf8mb4", "utf8mb4_bin")
    assert orders.columns == (
        Column(
            "region",
            "char",
            "char(2)",
            length=2,
            charset="utf8mb4",
            collation="utf8mb4_bin",
            nullable=False,
            id=1,
        ),
        Column(
            "id",
            "int",
            "int(10) unsigned",
            unsigned=True,
            nullable=False,
            auto_increment=True,
            id=2,
        ),
    )

    keyless = _local(catalog.tables[(DB, "keyless")])
    assert keyless.primary_key == ()
    assert (keyless.charset, keyless.collation) == ("latin1", "latin1_swedish_ci")
    code, note = keyless.columns
    assert (code.name, code.nullable, code.default, code.length) == ("code", False, NO_DEFAULT, 8)
    assert (note.data_type, note.length, note.charset) == ("text", None, "latin1")
    assert note.default == ColumnDefault("null")

    kinds = _local(catalog.tables[(DB, "kinds")])
    assert kinds.primary_key == ()
    c = {column.name: column for column in kinds.columns}
    assert [column.id for column in kinds.columns] == list(range(1, 17))
    assert c["e"] == Column(
        "e",
        "enum",
        "enum('a','it''s','b\\\\s')",
        charset="latin1",
        collation="latin1_swedish_ci",
        labels=("a", "it's", "b\\s"),
        nullable=False,
        default=ColumnDefault("value", "it's"),
        id=1,
    )
    assert (c["s"].labels, c["s"].default) == (("x", "y"), ColumnDefault("value", "x,y"))
    assert (c["d"].precision, c["d"].scale, c["d"].default) == (
        10,
        2,
        ColumnDefault("value", "-1.50"),
    )
    assert (c["at"].fsp, c["at"].default) == (
        3,
        ColumnDefault("expression", "current_timestamp(3)"),
    )
    assert (c["flags"].length, c["flags"].default) == (5, ColumnDefault("value", "05", hex=True))
    assert (c["u"].data_type, c["u"].charset, c["u"].default) == (
        "uuid",
        None,
        ColumnDefault("expression", "uuid()"),
    )
    assert (c["ip"].data_type, c["ip"].default) == ("inet6", ColumnDefault("value", "::1"))
    assert c["n"].default == ColumnDefault("null")
    assert (c["g"].generated, c["g"].default) == ("`n` * 2", NO_DEFAULT)
    assert c["n"].generated is None
    assert (c["hid"].invisible, c["hid"].default) == (True, ColumnDefault("value", "7"))
    assert (c["nn"].nullable, c["nn"].default) == (False, NO_DEFAULT)
    assert c["str"].default == ColumnDefault("value", "it's")
    assert (c["vb"].charset, c["vb"].collation, c["vb"].length) == ("binary", None, 4)
    assert c["vb"].default == ColumnDefault("value", "ab")
    assert c["expr"].default == ColumnDefault("expression", "(1 + 2)")
    assert c["nul"].default == ColumnDefault("null")
    assert c["word"].default == ColumnDefault("value", "NULL")
    assert not any(col.auto_increment or col.unsigned for col in kinds.columns)
