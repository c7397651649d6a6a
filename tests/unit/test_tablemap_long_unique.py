"""MariaDB long UNIQUE hash fields (``DB_ROW_HASH_<n>``, LONGLONG, after the table's columns):
recognized by their logged name against the schema history (exact) and information_schema
(today's table), decoded and marked, never taken for a column; anything else stays refused."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from replicator.binlog.constants import ColumnType as T
from replicator.binlog.errors import SchemaMismatchError
from replicator.binlog.schema import ColumnSchema, TableSchema
from replicator.binlog.tablemap import TableMapBody, decode_table_map
from replicator.errors import IntegrityError
from replicator.schema.learned import learned_table
from replicator.schema.model import Column, Table


def _lenenc(data: bytes) -> bytes:
    return bytes([len(data)]) + data


Columns = Sequence[tuple[str, int]]


def _body(columns: Columns, *, names: bool, signedness: bool = True) -> bytes:
    """TABLE_MAP of ``db.t`` with INT/BIGINT/BLOB columns; ``names``: binlog_row_metadata=FULL."""
    types = bytes(t for _, t in columns)
    meta = b"".join(b"\x02" if t == T.BLOB else b"" for _, t in columns)
    numeric = sum(1 for _, t in columns if t != T.BLOB)
    body = (
        (7).to_bytes(6, "little") + b"\x01\x00" + b"\x02db\x00" + b"\x01t\x00"
        + bytes([len(columns)]) + types + _lenenc(meta) + b"\xff" * ((len(columns) + 7) // 8)
        + b"\x02" + _lenenc(bytes([63]))  # charsets: binary
    )  # fmt: skip
    if signedness:  # else the types are looked up (information_schema under FULL too)
        body += b"\x01" + _lenenc(b"\x00" * ((numeric + 7) // 8))  # signedness: all signed
    if names:
        body += b"\x04" + _lenenc(b"".join(_lenenc(n.encode()) for n, _ in columns))
    return body


OWN = [("id", T.LONG), ("b", T.BLOB)]
HASHES = [("DB_ROW_HASH_1", T.LONGLONG), ("DB_ROW_HASH_2", T.LONGLONG)]


def _schema(*columns: tuple[str, str], exact: bool) -> TableSchema:
    return TableSchema("db", "t", tuple(ColumnSchema(n, d) for n, d in columns), exact=exact)


HISTORY = _schema(("id", "int"), ("b", "blob"), exact=True)


def _decode(
    columns: Columns,
    known: TableSchema | None,
    *,
    names: bool = True,
    mariadb: bool = True,
    exact: bool = True,
) -> TableMapBody:
    return decode_table_map(
        _body(columns, names=names, signedness=exact),
        8,
        lambda s, t: known,
        mariadb=mariadb,
        exact=exact,
    )


@pytest.mark.parametrize("hashes", [HASHES[:1], HASHES])
def test_trailing_hash_fields_the_history_lacks_are_decoded_and_marked(hashes: Columns) -> None:
    decoded = _decode([*OWN, *hashes], HISTORY)
    assert [c.name for c in decoded.columns] == ["id", "b"] + [n for n, _ in hashes]
    assert [c.long_unique_hash for c in decoded.columns] == [False, False] + [True] * len(hashes)
    assert decoded.columns[-1].type == T.LONGLONG


def test_a_column_of_that_name_the_history_has_is_the_tables() -> None:
    known = _schema(("id", "int"), ("b", "blob"), ("DB_ROW_HASH_1", "bigint"), exact=True)
    decoded = _decode([*OWN, *HASHES], known)
    assert [c.long_unique_hash for c in decoded.columns] == [False, False, False, True]


@pytest.mark.parametrize(
    "extra",
    [
        [("w", T.LONGLONG)],  # a column the history missed
        [("DB_ROW_HASH_1", T.LONG)],  # not a hash field's type
        [("DB_ROW_HASH_0", T.LONGLONG)],
        [("DB_ROW_HASH_1", T.LONGLONG), ("w", T.LONG)],  # not last
        [("w", T.LONG), ("DB_ROW_HASH_1", T.LONGLONG)],
    ],
)
def test_any_other_extra_column_is_refused(extra: Columns) -> None:
    with pytest.raises(SchemaMismatchError, match="refusing to misalign"):
        _decode([*OWN, *extra], HISTORY)


def test_mysql_has_no_hash_fields() -> None:
    with pytest.raises(SchemaMismatchError, match="has 3 columns but the schema history has 2"):
        _decode([*OWN, *HASHES[:1]], HISTORY, mariadb=False)


def test_without_names_the_stop_names_long_unique_keys() -> None:
    with pytest.raises(SchemaMismatchError) as caught:
        _decode([*OWN, *HASHES[:1]], HISTORY, names=False)
    assert "has 3 columns but the schema history has 2" in str(caught.value)
    hint = (
        "a MariaDB long UNIQUE key (on BLOB/TEXT) adds hidden hash columns; set "
        "binlog_row_metadata=FULL so they can be recognized by name"
    )
    assert hint in str(caught.value)
    with pytest.raises(SchemaMismatchError, match="long UNIQUE key"):  # information_schema
        today = _schema(("id", "int"), ("b", "blob"), exact=False)
        _decode([*OWN, *HASHES[:1]], today, names=False, exact=False)


def test_information_schema_with_a_column_added_since() -> None:
    today = _schema(("id", "int"), ("b", "blob"), ("w", "bigint"), exact=False)
    decoded = _decode([*OWN, *HASHES], today, exact=False)
    assert [c.long_unique_hash for c in decoded.columns] == [False, False, True, True]
    assert decoded.columns[2].name == "DB_ROW_HASH_1"


def _catalog(*names: str) -> Table:
    """``db.t`` as the catalog read at the seed shows it (hash fields it never shows)."""
    kinds = {"id": "int", "b": "blob"}
    return Table(
        "db",
        "t",
        tuple(Column(n, kinds.get(n, "bigint"), kinds.get(n, "bigint")) for n in names),
        primary_key=("id",),
    )


def test_a_table_the_history_learns_leaves_them_out() -> None:
    decoded = _decode([*OWN, *HASHES], None)
    assert [c.long_unique_hash for c in decoded.columns] == [False, False, True, True]
    seen = _catalog("id", "b")
    table = learned_table("db", "t", decoded.columns, (0,), first_id=1, seen_later=seen, at="x")
    assert [c.name for c in table.columns] == ["id", "b"]


def test_a_learned_column_of_that_name_the_catalog_has_is_the_tables() -> None:
    """MariaDB takes DB_ROW_HASH_1 as a column name; its hash field is then DB_ROW_HASH_2."""
    decoded = _decode([*OWN, *HASHES], None)
    seen = _catalog("id", "b", "DB_ROW_HASH_1")
    table = learned_table("db", "t", decoded.columns, (0,), first_id=1, seen_later=seen, at="x")
    assert [c.name for c in table.columns] == ["id", "b", "DB_ROW_HASH_1"]


def test_a_learned_table_the_catalog_lacks_cannot_tell_them() -> None:
    decoded = _decode([*OWN, *HASHES[:1]], None)
    with pytest.raises(IntegrityError, match="cannot be told from a column of the table"):
        learned_table("db", "t", decoded.columns, (0,), first_id=1, seen_later=None, at="x")


def test_a_lookup_under_full_metadata_marks_them_too() -> None:
    """``replicator dump`` of a live server: names and signedness logged need no lookup,
    but trailing columns named as hash fields do (only a schema tells them)."""
    today = _schema(("id", "int"), ("b", "blob"), exact=False)
    decoded = decode_table_map(
        _body([*OWN, *HASHES[:1]], names=True), 8, lambda s, t: today, mariadb=True
    )
    assert [c.long_unique_hash for c in decoded.columns] == [False, False, True]
