"""The GTID state of a start given as a binlog file and position.

Such a start carries no GTID state, yet a checkpoint should (it survives failover and purged
files). The stream learns it: on MariaDB at connect (``BINLOG_GTID_POS``, MariaDB
``sql/sql_repl.cc`` gtid_state_from_binlog_pos), on MySQL with GTIDs on from the
PREVIOUS_GTIDS event that opens each binlog file (mysql-server ``control_events.h``,
``Previous_gtids_event``: every GTID of the files before it; exact while no transaction of the
file has been taken). ``source.stream`` hands what it learns over in
order with the transactions.
"""

from __future__ import annotations

from dataclasses import replace

import pymysql

from ..binlog import events as ev
from ..binlog.position import StreamPosition
from ..config import SourceConfig
from .connection import describe_source
from .errors import translate_error
from .facts import ServerFacts
from .server_info import mariadb_gtid_at

__all__ = ["mariadb_start_state", "previous_gtids_state"]


def mariadb_start_state(
    conn: pymysql.connections.Connection, cfg: SourceConfig, start: StreamPosition
) -> StreamPosition | None:
    """``start`` with its GTID state (``BINLOG_GTID_POS``); None when the server does not
    know it there."""
    try:
        found = mariadb_gtid_at(conn, start.file, start.position)
    except pymysql.err.Error as exc:
        raise translate_error(exc, where=describe_source(cfg), account=cfg.user) from exc
    if found is None:
        return None
    return replace(start, mariadb_gtid=found)


def previous_gtids_state(
    position: StreamPosition, event: ev.PreviousGtidsEvent, facts: ServerFacts
) -> StreamPosition | None:
    """MySQL opens each binlog file with PREVIOUS_GTIDS: every GTID of the files before it.
    A ``position`` without a GTID set that no transaction of that file has passed yet (the
    start of the file, or the end of an earlier one) has exactly that set. None when the
    event tells nothing: GTIDs off (the set is empty then, and meaningless), a position that
    has a state already, or one inside the file (a start past its first transactions)."""
    if facts.end.mysql_gtid is None or position.has_gtid or event.header.artificial:
        return None
    if position.file == event.file and position.position > event.position:
        return None
    return replace(position, mysql_gtid=event.gtid_set)
