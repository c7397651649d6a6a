"""Where a bounded stream ends: ``--stop-at-end`` (the binlog's end at the first connect) or
an end position given by the caller, as GTIDs, as a file and position, or both.

The end is reached by whole transactions only: a GTID state that covers the end's, or a
transaction that ends at or past its file and position. Between transactions, heartbeats
and control events with real positions reach a file/position end too, so a binlog that ends
with a rotate is done at once instead of a heartbeat period later.
"""

from __future__ import annotations

from ..binlog import events as ev
from ..binlog.position import StreamPosition, binlog_index, position_reached
from ..binlog.runs import TransactionRun
from ..binlog.transaction import Transaction
from .items import StreamItem

__all__ = ["end_reached", "gtid_covers", "skip_bounds", "start_reached"]


def gtid_covers(start: StreamPosition, end: StreamPosition) -> bool:
    """True when ``start`` already includes every transaction up to ``end``."""
    if start.mariadb_gtid is not None and end.mariadb_gtid is not None:
        return all(start.mariadb_gtid.contains(g) for g in end.mariadb_gtid)
    if start.mysql_gtid is not None and end.mysql_gtid is not None:
        return start.mysql_gtid.issuperset(end.mysql_gtid)
    return False


def start_reached(start: StreamPosition, end: StreamPosition) -> bool:
    """Nothing to read: ``start`` is at or past ``end`` already."""
    return gtid_covers(start, end) or bool(
        not start.has_gtid
        and start.file
        and position_reached(start.file, start.position, end.file, end.position)
    )


def end_reached(
    item: StreamItem, *, in_transaction: bool, position: StreamPosition, end: StreamPosition
) -> bool:
    """Whether handing ``item`` over reached ``end``; ``position`` is the stream's position
    after it, ``in_transaction`` whether a transaction is still open."""
    if in_transaction:
        return False
    if isinstance(item, TransactionRun):  # none before its last reaches the end (take_run)
        if item.last is None:
            return False
        item = item.last
    if isinstance(item, Transaction):
        return gtid_covers(position, end) or bool(
            end.file and position_reached(item.end_file, item.end_position, end.file, end.position)
        )
    if not end.file:  # an end given as GTIDs only: reached by transactions alone
        return False
    if isinstance(item, ev.HeartbeatEvent) and item.log_file:
        return position_reached(item.log_file, item.log_position, end.file, end.position)
    if isinstance(item, ev.Event) and item.header.log_pos and not item.header.artificial:
        # Control events between transactions carry real positions too: when the binlog
        # ends with a rotate (FORMAT_DESCRIPTION, GTID list, checkpoint of the new file),
        # the end is reached here instead of a heartbeat period later.
        return position_reached(item.file, item.next_position, end.file, end.position)
    return False


def skip_bounds(
    end: StreamPosition | None, file: str, position: StreamPosition
) -> tuple[int, tuple[tuple[int, int], ...], int]:
    """What transactions passed over unseen from ``position`` in ``file``
    (``DumpStreamDecoder.skip_row_transactions``) must stop before, so that ``end_reached``
    sees the one that reaches ``end``: (a position in ``file`` that none of them may end at or
    past, 0 for none; the (domain, seq_no) of the end's MariaDB GTIDs, which a GTID passed
    over must stay below in its domain; how many MySQL GTIDs may be passed over, -1 for any).

    A transaction within all three cannot reach the end: not by its position, and not by
    making the GTID state cover the end's. A MariaDB state comes to cover it only when some
    domain comes up to its end; a MySQL set only once it holds every GTID of the end's that it
    lacks, one transaction adding one, so fewer than that many cannot."""
    if end is None:
        return 0, (), -1
    if gtid_covers(position, end):  # the next transaction reaches the end, whatever it is
        return 1, (), 0
    gtids = end.mariadb_gtid
    watch = () if gtids is None else tuple((g.domain_id, g.seq_no) for g in gtids)
    budget = -1
    if end.mysql_gtid is not None and position.mysql_gtid is not None:
        budget = max(end.mysql_gtid.missing_from(position.mysql_gtid) - 1, 0)
    if not end.file:
        return 0, watch, budget
    if file != end.file:
        here, there = binlog_index(file)[1], binlog_index(end.file)[1]
        if here < there:
            return 0, watch, budget  # the end is in a later file: a rotate comes first
        if here > there:
            return 1, watch, budget  # past the end's file: pass nothing over
    return max(end.position, 1), watch, budget
