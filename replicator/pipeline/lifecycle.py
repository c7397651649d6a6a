"""Table lifecycle records: what a DDL statement did to a replicated table, as the landing
zone tells Spark.

Row changes say nothing about TRUNCATE, DROP, RENAME or a table created again under an old
name, yet each changes the table's current state. Every such effect of a DDL statement on a
replicated table becomes one record in the manifest of the batch that holds the statement
(``schema_changes``), numbered in the same ``_seq`` order as the row changes around it:

* ``create``: the table (re)starts empty with the columns of its new schema;
* ``truncate``: the table's state is empty at this ``_seq``;
* ``drop``: the table is gone (``DROP TABLE``, ``DROP DATABASE``);
* ``rename``: the table's state moves to ``to`` (``RENAME TABLE``, ``ALTER TABLE ...
  RENAME``); a rename into a name that is not replicated is a ``drop`` of the old one;
* ``alter``: its columns changed (the files after it have the new schema; column ids carry
  renamed columns' values, ``fill`` gives added columns' values in older rows).

Each record carries where it came from (``gtid``, ``file``, ``position``), the transaction's
commit time ``ts`` and the statement. A rename from a table that is not replicated into one
that is cannot land: the rows the table holds never did.

A ``create`` or ``alter`` record also carries ``schema``: the schema the table's files have
from then on (``landed_schema``: the Arrow schema, IPC-serialized, base64), so that Spark shows
a table without rows yet with its columns. Row files say nothing of a table that has none.
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..binlog.schema import ColumnDef
from ..errors import IntegrityError, ReplicatorError
from ..schema import ddl
from ..schema.history import Point, SchemaChange
from ..schema.model import Table
from ..sink.changes import TableVersion

if TYPE_CHECKING:  # the schemas come from the landing zone's writer, which imports pyarrow
    import pyarrow as pa

Replicated = Callable[[str, str], bool]
# the landed version of a table: (database, table, columns, key ordinals) -> (version, kept)
Project = Callable[
    [str, str, tuple[ColumnDef, ...], tuple[int, ...]], tuple[TableVersion, tuple[int, ...] | None]
]
Landed = Callable[[Table], str | None]
Columns = Callable[[Table], tuple[ColumnDef, ...]]  # a history table's columns as they land
STATEMENT_LIMIT = 4000  # characters of the statement kept in a record
SCHEMA_KEY = "schema"  # a create or alter record's landed file schema


def schema_text(schema: pa.Schema) -> str:
    """A file schema as a record carries it: Arrow IPC, base64."""
    return base64.b64encode(schema.serialize().to_pybytes()).decode("ascii")


def landed_schema(
    table: Table,
    columns: Columns,
    project: Project,
    file_schema: Callable[[TableVersion], pa.Schema],
) -> str | None:
    """The schema ``table``'s files will have (``schema_text``): its columns as the snapshot
    reads them (``columns``: ``snapshot.columns.column_defs``), with the column filters
    (``project``) and the landing zone's writer settings (``file_schema``); None when it
    cannot be told (a type without a snapshot reading, names the writer refuses): Spark then
    shows no columns until rows land, as for a landing zone written before records carried
    schemas."""
    where = {c.name.casefold(): i for i, c in enumerate(table.columns)}
    if any(name.casefold() not in where for name in table.primary_key):
        return None
    key = tuple(where[name.casefold()] for name in table.primary_key)
    try:
        version, _ = project(table.schema, table.name, columns(table), key)
        return schema_text(file_schema(version))
    except ReplicatorError:
        return None


def schema_records(
    change: SchemaChange,
    ts: dt.datetime,
    seq: int,
    replicated: Replicated,
    landed: Landed | None = None,
) -> list[dict[str, Any]]:
    """The lifecycle records of one change, numbered from ``seq``; ``landed`` gives a create
    or alter record its ``schema``."""
    point = change.point
    base = {
        "gtid": point.gtid,
        "file": point.file,
        "position": point.position,
        "ts": ts.isoformat().replace("+00:00", "Z"),
        "statement": change.statement[:STATEMENT_LIMIT],
    }
    out: list[dict[str, Any]] = []

    def add(op: str, table: Table, **extra: str) -> None:
        out.append({"seq": seq + len(out), "op": op, "table": table.qualified, **extra, **base})

    def shaped(op: str, table: Table) -> None:
        schema = None if landed is None else landed(table)
        add(op, table, **({} if schema is None else {SCHEMA_KEY: schema}))

    for effect in change.effects:
        if isinstance(effect, ddl.TableCreated) and _wants(replicated, effect.table, point):
            shaped("create", effect.table)
        elif isinstance(effect, ddl.TableAltered) and _wants(replicated, effect.after, point):
            shaped("alter", effect.after)
        elif isinstance(effect, ddl.TableTruncated) and _wants(replicated, effect.table, point):
            add("truncate", effect.table)
        elif isinstance(effect, ddl.TableDropped) and _wants(replicated, effect.table, point):
            add("drop", effect.table)
        elif isinstance(effect, ddl.DatabaseDropped):
            for table in effect.tables:
                if _wants(replicated, table, point):
                    add("drop", table)
        elif isinstance(effect, ddl.TableRenamed):
            source, target = effect.before, effect.after
            if _wants(replicated, target, point) and not _wants(replicated, source, point):
                raise IntegrityError(
                    f"{source.qualified} is renamed to {target.qualified} at "
                    f"{point.describe()}, but {source.qualified} is not replicated: the rows "
                    f"{target.qualified} starts with never landed",
                    hint="include both names in filters.include (and re-read the table), or "
                    "exclude the new name too",
                )
            if _wants(replicated, target, point):
                add("rename", source, to=target.qualified)
            elif _wants(replicated, source, point):
                add("drop", source)
    return out


def _wants(replicated: Replicated, table: Table, point: Point) -> bool:
    wanted = replicated(table.schema, table.name)
    if wanted:
        check_name(table.schema, table.name, point.describe())
    return wanted


def check_name(database: str, table: str, at: str) -> None:
    """Refuse a replicated table whose database name holds a ``.``: the landing zone names a
    table ``<database>.<table>`` and every reader splits that at its first ``.``, so its rows
    would read back as another table's (``my.db``.``t`` as ``my``.``db.t``). A ``.`` in a
    table's own name is read back whole. ``at``: the position, for the error."""
    if "." in database:
        raise IntegrityError(
            f"table `{database}`.`{table}` at {at} cannot land: its database name holds a "
            f"'.', and the landing zone's table names (database.table) are read back at the "
            f"first '.', as table `{database.partition('.')[0]}`."
            f"`{database.partition('.')[2]}.{table}`",
            hint="leave the database out, e.g. with filters.exclude: "
            f"['{database.replace('.', '?')}.*'] (a '?' matches its '.'), or rename it",
        )
