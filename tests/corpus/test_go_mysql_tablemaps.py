"""go-mysql's TABLE_MAP bodies (MySQL 5.7/8.0, MariaDB 10.4/10.5) with its expectations.

The expected names, signedness, collations, labels, geometry types, primary keys and
nullability are the ones go-mysql's ``replication/row_event_test.go`` asserts for these bytes
(test functions named below). Note MariaDB counts GEOMETRY columns among the character
columns of the charset metadata; MySQL does not.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replicator.binlog.tablemap import TableMapBody, decode_table_map

from .util import corpus_file


def _vectors(corpus_dir: Path, test: str) -> dict[str, bytes]:
    data = json.loads(corpus_file(corpus_dir, "go-mysql/test-vectors.json").read_text())
    out = {}
    for v in data["vectors"]:
        if v["test"] == test:
            label = (v.get("prev_line") or "").strip().lstrip("/").strip()
            out[label] = bytes.fromhex(v["hex"])
    assert out, f"no vectors for {test}"
    return out


def _decode(body: bytes, *, mariadb: bool) -> TableMapBody:
    return decode_table_map(body, 8, None, mariadb=mariadb)


NAMES = [
    "b_bit",
    "n_boolean",
    "n_tinyint",
    "n_smallint",
    "n_mediumint",
    "n_int",
    "n_bigint",
    "n_decimal",
    "n_float",
    "n_double",
    "nu_tinyint",
    "nu_smallint",
    "nu_mediumint",
    "nu_int",
    "nu_bigint",
    "nu_decimal",
    "nu_float",
    "nu_double",
    "t_year",
    "t_date",
    "t_time",
    "t_ftime",
    "t_datetime",
    "t_fdatetime",
    "t_timestamp",
    "t_ftimestamp",
    "c_char",
    "c_varchar",
    "c_binary",
    "c_varbinary",
    "c_tinyblob",
    "c_blob",
    "c_mediumblob",
    "c_longblob",
    "c_tinytext",
    "c_text",
    "c_mediumtext",
    "c_longtext",
    "e_enum",
    "s_set",
    "g_geometry",
    "j_json",
]


def test_optional_metadata_names(corpus_dir: Path) -> None:
    vectors = _vectors(corpus_dir, "TestTableMapOptMetaNames")
    assert set(vectors) == {"mysql 5.7", "mysql 8.0", "mariadb 10.4", "mariadb 10.5"}
    with_metadata = (NAMES, ("a", "b"), ("1", "2"), True)
    without = ([None] * 42, None, None, False)
    expected = {
        "mysql 5.7": without,
        "mysql 8.0": with_metadata,
        "mariadb 10.4": without,
        "mariadb 10.5": with_metadata,
    }
    got = {}
    for label, body in vectors.items():
        table = _decode(body, mariadb=label.startswith("mariadb"))
        assert (table.schema, table.table, len(table.columns)) == ("test", "_types", 42)
        got[label] = (
            [c.name for c in table.columns],
            table.columns[38].enum_values,
            table.columns[39].set_values,
            table.has_metadata,
        )
    assert got == expected


def test_helper_maps(corpus_dir: Path) -> None:
    vectors = _vectors(corpus_dir, "TestTableMapHelperMaps")
    unsigned = {i: i >= 10 for i in range(1, 18)}
    mysql_collations = {26: 28, 27: 224, 28: 63, 29: 63, 30: 63, 31: 63, 32: 63, 33: 63}
    mysql_collations |= {34: 224, 35: 224, 36: 224, 37: 224}
    mariadb_collations = mysql_collations | {40: 63, 41: 46} | dict.fromkeys(range(44, 51), 63)
    enum_set_collations = {38: 224, 39: 224, 42: 28, 43: 28}
    geometry = {40: 0, 44: 7, 45: 6, 46: 5, 47: 4, 48: 3, 49: 2, 50: 1}
    by_flavor = {}
    for label, body in vectors.items():
        mariadb = "mariadb" in label
        version = "8.0" if "8.0" in label else "10.5" if "10.5" in label else "old"
        by_flavor[(mariadb, version)] = _decode(body, mariadb=mariadb)
    assert len(by_flavor) == 4
    old = {flavor: table for flavor, table in by_flavor.items() if flavor[1] == "old"}
    assert sorted(old) == [(False, "old"), (True, "old")]
    assert {
        flavor: (len(table.columns), [(c.collation_id, c.unsigned) for c in table.columns])
        for flavor, table in old.items()
    } == dict.fromkeys(old, (51, [(None, False)] * 51))
    new = {flavor: table for flavor, table in by_flavor.items() if flavor not in old}
    for (mariadb, _), table in new.items():
        assert len(table.columns) == 51
        assert {i: table.columns[i].unsigned for i in range(1, 18)} == unsigned
        expected = (mariadb_collations if mariadb else mysql_collations) | enum_set_collations
        got = {c.index: c.collation_id for c in table.columns if c.collation_id is not None}
        assert got == expected
        assert {i: table.columns[i].enum_values for i in (38, 43)} == {
            38: ("a", "b"),
            43: ("c", "d"),
        }
        assert {i: table.columns[i].set_values for i in (39, 42)} == {
            39: ("1", "2"),
            42: ("3", "4"),
        }
        got_geometry = {
            c.index: c.geometry_type for c in table.columns if c.geometry_type is not None
        }
        assert got_geometry == geometry
        assert table.columns[26].charset == "gbk"


@pytest.mark.parametrize("case", ["case1", "case2"])
def test_primary_keys(corpus_dir: Path, case: str) -> None:
    vectors = _vectors(corpus_dir, "TestTableMapOptMetaPrimaryKey")
    expected = {"case1": (2, 0), "case2": (1, 3)}[case]
    for label, body in vectors.items():
        if not label.endswith(case):
            continue
        table = _decode(body, mariadb="mariadb" in label)
        with_metadata = "8.0" in label or "10.5" in label
        assert table.primary_key == (expected if with_metadata else ())


def test_nullable_bitmap(corpus_dir: Path) -> None:
    vectors = _vectors(corpus_dir, "TestTableMapNullable")
    assert len(vectors) == 4
    for label, body in vectors.items():
        table = _decode(body, mariadb="mariadb" in label)
        # CREATE TABLE _null (c1 int null, c2 int not null default '2',
        #                     c3 timestamp default now(), c4 text)
        assert [c.nullable for c in table.columns] == [True, False, False, True]
        with_metadata = "8.0" in label or "10.5" in label
        names = ["c1", "c2", "c3", "c4"] if with_metadata else [None] * 4
        assert [c.name for c in table.columns] == names
