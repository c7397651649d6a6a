"""A looked-up (current) schema is used for a TABLE_MAP only when it still lines up with it.

Under binlog_row_metadata=MINIMAL the names come from information_schema, which shows the table
as it is now. Columns added at the end and types modified within their family keep every name
in place; a dropped, moved or retyped column must stop the stream, never shift names.
"""

from __future__ import annotations

import pytest

from replicator.binlog.constants import ColumnType as T
from replicator.binlog.errors import DecodeError
from replicator.binlog.schema import ColumnSchema, TableSchema
from replicator.binlog.tablemap import _check_alignment


def table(*columns: tuple[str, str]) -> TableSchema:
    return TableSchema("db", "t", tuple(ColumnSchema(n, data_type) for n, data_type in columns))


NOW = table(("id", "bigint"), ("name", "varchar"), ("at", "datetime"), ("added", "int"))


@pytest.mark.parametrize(
    "types",
    [
        [T.LONGLONG, T.VARCHAR, T.DATETIME2, T.LONG],  # as it is now
        [T.LONGLONG, T.VARCHAR, T.DATETIME2],  # before ADD COLUMN added
        [T.LONG, T.VARCHAR, T.DATETIME2],  # before MODIFY id INT -> BIGINT
        [T.LONGLONG, T.BLOB, T.TIMESTAMP2, T.TINY],  # within-family changes
    ],
)
def test_prefix_and_same_family_line_up(types: list[int]) -> None:
    _check_alignment("db", "t", types, NOW)


@pytest.mark.parametrize(
    ("types", "message"),
    [
        (
            [T.LONGLONG, T.VARCHAR, T.DATETIME2, T.LONG, T.LONG],
            "has 5 columns but the table now has 4",
        ),
        # a column was dropped since: an old int column would now be called `name`
        ([T.LONGLONG, T.LONG, T.DATETIME2], "column 2 is logged as integer but 'name'"),
        ([T.VARCHAR, T.VARCHAR], "column 1 is logged as other but 'id' is now bigint"),
    ],
)
def test_misaligned_schema_is_refused(types: list[int], message: str) -> None:
    with pytest.raises(DecodeError, match="refusing to misalign") as caught:
        _check_alignment("db", "t", types, NOW)
    assert message in str(caught.value)
    assert "binlog_row_metadata=FULL" in str(caught.value)


def test_geometry_subtypes_match_a_geometry_column() -> None:
    _check_alignment("db", "t", [T.GEOMETRY], table(("g", "point")))
