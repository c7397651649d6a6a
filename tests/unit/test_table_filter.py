"""The pipeline's table filter: one landed version per table shape, found again for every
transaction's TABLE_MAP of the same table without hashing its columns each time."""

from __future__ import annotations

from replicator.binlog import events as ev
from replicator.binlog.constants import ColumnType
from replicator.binlog.schema import ColumnDef
from replicator.config import FilterConfig
from replicator.pipeline.pipeline import TableFilter

COLUMNS = (
    ColumnDef(index=0, type=ColumnType.LONG, meta=0, name="id"),
    ColumnDef(index=1, type=ColumnType.VARCHAR, meta=40, name="secret", charset="utf-8"),
)
HEADER = ev.EventHeader(1_700_000_000, 19, 1, 50, 150, 0)


def table_map(
    table: str = "t",
    columns: tuple[ColumnDef, ...] = COLUMNS,
    primary_key: tuple[int, ...] = (0,),
    schema: str = "db",
) -> ev.TableMapEvent:
    """A new TABLE_MAP event object each time, as each transaction brings one."""
    return ev.TableMapEvent(
        HEADER, "b.1", 100, 150, 7, 0, schema, table, columns, primary_key, True
    )


def test_the_same_table_shape_gets_the_same_version_from_each_table_map() -> None:
    kept = TableFilter(FilterConfig())
    first, keep = kept.version(table_map())
    assert keep is None
    assert (first.schema, first.name, first.columns) == ("db", "db.t", COLUMNS)
    assert kept.version(table_map())[0] is first  # a later transaction's TABLE_MAP
    # an equal columns tuple that is another object (decoded again) finds it too
    assert kept.version(table_map(columns=tuple(list(COLUMNS))))[0] is first


def test_a_table_map_sharing_the_columns_object_of_another_table_is_not_taken_for_it() -> None:
    kept = TableFilter(FilterConfig())
    first, _ = kept.version(table_map())
    # the same decoded columns object, but another table, database or key
    other_table, _ = kept.version(table_map(table="u"))
    other_schema, _ = kept.version(table_map(schema="db2"))
    other_key, _ = kept.version(table_map(primary_key=(1,)))
    assert [v.name for v in (first, other_table, other_schema, other_key)] == [
        "db.t", "db.u", "db2.t", "db.t",
    ]  # fmt: skip
    assert other_key.primary_key == (1,)
    assert kept.version(table_map())[0] is first


def test_excluded_columns_come_with_every_table_map_of_the_table() -> None:
    kept = TableFilter(FilterConfig(exclude_columns=("db.t.secret",)))
    version, keep = kept.version(table_map())
    assert (keep, [c.name for c in version.columns]) == ((0,), ["id"])
    assert kept.version(table_map()) == (version, (0,))
