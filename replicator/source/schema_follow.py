"""The decoder's idea of each table kept in step with the stream's DDL.

With a schema tracker (``schema.tracker``), each DDL statement is applied as it is decoded,
before the next event is; a group the assembler drops unfinished takes the DDL it applied out
again (``feed``). Without one, the schema lookup's cache is forgotten after any DDL that may
have changed a table's columns (``forget_schemas``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..binlog import events as ev
from ..binlog.tablemap import SchemaLookup
from ..binlog.transaction import Transaction, TransactionAssembler, TransactionPart

if TYPE_CHECKING:
    from ..schema.tracker import SchemaTracker

__all__ = ["feed", "forget_schemas", "may_change_columns"]


def feed(
    assembler: TransactionAssembler, tracker: SchemaTracker | None, event: ev.Event
) -> list[Transaction | TransactionPart | ev.Event]:
    """One decoded event through the schema tracker (its DDL applied before the next event is
    decoded) and the assembler; an incomplete group the assembler drops takes the DDL it
    applied out of the tracker again."""
    if tracker is None:
        return assembler.feed(event)
    event = tracker.on_event(event)
    dropped = assembler.discarded_incomplete
    items = assembler.feed(event)
    if assembler.discarded_incomplete != dropped:
        tracker.discard_open(event)
    return items


def forget_schemas(lookup: SchemaLookup | None) -> None:
    """A DDL statement went by: any schema looked up before it may be stale now.

    Which table it changed is not known: ``QueryEvent.schema`` is the session's default
    database (``USE a; ALTER TABLE b.t ...`` logs ``a``), and parsing every DDL dialect is
    fragile. So the whole cache is forgotten; each table is looked up once more."""
    forget = getattr(lookup, "forget", None)
    if forget is not None:
        forget()


# DDL that cannot change a table's columns: no reason to look every table up again after it
# (schedulers and maintenance jobs can issue these often)
_NO_COLUMN_CHANGE = (
    "GRANT ", "REVOKE ", "TRUNCATE ", "ANALYZE ", "OPTIMIZE ", "FLUSH ", "CREATE USER ",
    "DROP USER ", "ALTER USER ", "RENAME USER ", "SET PASSWORD", "CREATE ROLE ", "DROP ROLE ",
    "CREATE DATABASE ", "CREATE SCHEMA ", "CREATE EVENT ", "ALTER EVENT ", "DROP EVENT ",
    "CREATE PROCEDURE ", "DROP PROCEDURE ", "CREATE FUNCTION ", "DROP FUNCTION ",
    "CREATE DEFINER", "CREATE TRIGGER ", "DROP TRIGGER ",
)  # fmt: skip


def may_change_columns(transaction: Transaction) -> bool:
    """False only for DDL known not to touch columns; anything else (and anything unknown)
    may have changed a table we cached."""
    for event in transaction.events:
        if isinstance(event, ev.QueryEvent):
            statement = " ".join(event.query.split()).upper()
            if not statement.startswith(_NO_COLUMN_CHANGE):
                return True
    return False
