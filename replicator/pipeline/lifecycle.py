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
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from ..errors import IntegrityError
from ..schema import ddl
from ..schema.history import SchemaChange
from ..schema.model import Table

Replicated = Callable[[str, str], bool]
STATEMENT_LIMIT = 4000  # characters of the statement kept in a record


def schema_records(
    change: SchemaChange, ts: dt.datetime, seq: int, replicated: Replicated
) -> list[dict[str, Any]]:
    """The lifecycle records of one change, numbered from ``seq``."""
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

    for effect in change.effects:
        if isinstance(effect, ddl.TableCreated) and _wants(replicated, effect.table):
            add("create", effect.table)
        elif isinstance(effect, ddl.TableAltered) and _wants(replicated, effect.after):
            add("alter", effect.after)
        elif isinstance(effect, ddl.TableTruncated) and _wants(replicated, effect.table):
            add("truncate", effect.table)
        elif isinstance(effect, ddl.TableDropped) and _wants(replicated, effect.table):
            add("drop", effect.table)
        elif isinstance(effect, ddl.DatabaseDropped):
            for table in effect.tables:
                if _wants(replicated, table):
                    add("drop", table)
        elif isinstance(effect, ddl.TableRenamed):
            source, target = effect.before, effect.after
            if _wants(replicated, target) and not _wants(replicated, source):
                raise IntegrityError(
                    f"{source.qualified} is renamed to {target.qualified} at "
                    f"{point.describe()}, but {source.qualified} is not replicated: the rows "
                    f"{target.qualified} starts with never landed",
                    hint="include both names in filters.include (and re-read the table), or "
                    "exclude the new name too",
                )
            if _wants(replicated, target):
                add("rename", source, to=target.qualified)
            elif _wants(replicated, source):
                add("drop", source)
    return out


def _wants(replicated: Replicated, table: Table) -> bool:
    return replicated(table.schema, table.name)
