"""Changes the source logged as SQL text: they cannot land, so they stop the stream.

With ``binlog_format=STATEMENT`` or ``MIXED`` (globally, or set by one session), a server logs
an INSERT/UPDATE/DELETE/REPLACE/LOAD DATA as the statement itself (a QUERY event, or for
LOAD DATA the EXECUTE_LOAD_QUERY event and its file blocks) instead of row events. Its rows
are nowhere in the binlog; only re-running the SQL against the same data could produce them,
which a replica of the binlog cannot do exactly. Such a statement on a replicated table stops
the stream before any batch containing it commits, so the checkpoint never passes it
(``IntegrityError``, exit 4), naming the statement, its position and the fix.
"""

from __future__ import annotations

from collections.abc import Callable

from ..binlog import events as ev
from ..binlog.constants import EventType
from ..errors import IntegrityError
from ..schema.ddl import dml_tables
from ..schema.history import Point
from ..schema.tracker import context_of, shown

# statement-based LOAD DATA and its file blocks (MySQL 4.x-8.x, MariaDB): rows never logged
LOAD_DATA_EVENTS = frozenset(
    {
        EventType.LOAD,
        EventType.CREATE_FILE,
        EventType.APPEND_BLOCK,
        EventType.EXEC_LOAD,
        EventType.DELETE_FILE,
        EventType.NEW_LOAD,
        EventType.BEGIN_LOAD_QUERY,
        EventType.EXECUTE_LOAD_QUERY,
    }
)


class StatementLoggedError(IntegrityError):
    """A change logged as SQL text for a replicated table: it cannot land."""


_FIX = (
    "the source logged this change as SQL (binlog_format STATEMENT or MIXED, globally or for "
    "the session that ran it), so its rows are not in the binlog: set binlog_format=ROW on the "
    "source (SET GLOBAL binlog_format='ROW' and in my.cnf) and reconnect the applications; "
    "the rows it changed are missing from the landing zone: move the checkpoint past this "
    "statement with `replicator checkpoint set`, then read the table again with "
    "`replicator snapshot --tables 'db.table'`"
)


def _where(event: ev.Event, gtid: str | None) -> str:
    return Point(event.file, event.position, gtid).describe()


def check_statement(
    event: ev.Event, gtid: str | None, replicated: Callable[[str, str], bool]
) -> None:
    """Raise ``IntegrityError`` when ``event`` is statement-logged DML that writes a table
    ``replicated`` accepts (or whose tables cannot be told)."""
    if isinstance(event, ev.QueryEvent):
        tables = dml_tables(event.query, context_of(event))
        if tables is not None and not any(replicated(db, t) for db, t in tables):
            return
        named = (
            "tables it writes cannot be told"
            if tables is None
            else ", ".join(f"{db}.{t}" for db, t in tables)
        )
        raise StatementLoggedError(
            f"statement-logged change at {_where(event, gtid)} to {named}: '{shown(event.query)}'",
            hint=_FIX,
        )
    if event.header.type_code in LOAD_DATA_EVENTS:
        raise StatementLoggedError(
            f"statement-logged LOAD DATA at {_where(event, gtid)} "
            f"({EventType(event.header.type_code).name} event)",
            hint=_FIX,
        )
