"""One row change as it lands: the table's values plus the metadata columns of DESIGN.md.

``_op`` (c/u/d), ``_seq`` (strictly increasing over the whole stream), ``_gtid``, ``_ts`` (the
transaction's commit time, UTC), ``_server_id``, ``_binlog_file``, ``_binlog_pos`` (the
position of the rows event that carried the change).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..binlog.schema import ColumnDef


class RowChange(NamedTuple):
    """A tuple, not a dataclass: a million are built per million row images, and a tuple is
    built at C speed and transposed into columns with one ``zip(*changes)``. The field order
    is part of the held-XA file format (``sink.landing.HELD_XA_FORMAT``)."""

    op: str  # "c" insert, "u" update, "d" delete, "r" snapshot read
    seq: int
    gtid: str | None
    ts: dt.datetime  # commit time, tz-aware UTC
    server_id: int
    binlog_file: str
    binlog_pos: int
    values: tuple[object, ...]  # after image; the before image for deletes
    before: tuple[object, ...] | None = None  # updates: the before image (its key always lands)


class ChunkRun:
    """The row changes of one ``ColumnarRowsEvent`` (the columnar lane, ``sink.lane``): all
    of one op, numbered ``seq`` to ``seq + count - 1``, with the event's metadata once. It
    stands where ``count`` RowChanges would, and ``changes()`` makes them when needed."""

    __slots__ = ("count", "event", "gtid", "op", "seq", "server_id", "ts")

    def __init__(
        self, op: str, seq: int, gtid: str | None, ts: dt.datetime, server_id: int, event: Any
    ) -> None:
        self.op = op
        self.seq = seq
        self.gtid = gtid
        self.ts = ts
        self.server_id = server_id
        self.event = event  # a ColumnarRowsEvent
        self.count: int = event.row_count

    @property
    def last_seq(self) -> int:
        return self.seq + self.count - 1

    def changes(self) -> list[RowChange]:
        """The same changes as RowChanges (from the event's row tuples)."""
        event = self.event
        return [
            RowChange(self.op, n, self.gtid, self.ts, self.server_id, event.file,
                      event.position, row)
            for n, row in enumerate(event.rows, self.seq)
        ]  # fmt: skip


Change = RowChange | ChunkRun


def rows_in(changes: Sequence[Change]) -> int:
    """Row changes in a list of RowChanges and ChunkRuns."""
    n = len(changes)
    for change in changes:
        if type(change) is ChunkRun:
            n += change.count - 1
    return n


def last_seq(change: Change) -> int:
    return change.last_seq if type(change) is ChunkRun else change.seq


@dataclass(frozen=True, slots=True)
class TableVersion:
    """A table as one TABLE_MAP describes it: changing columns start a new version (and new
    files), so every file has one schema."""

    schema: str
    table: str
    columns: tuple[ColumnDef, ...]
    primary_key: tuple[int, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.schema}.{self.table}"


@dataclass(slots=True)
class HeldXa:
    """The row changes of an XA transaction prepared but not yet decided (DESIGN.md: XA is
    held until XA COMMIT, dropped at XA ROLLBACK). Its changes get their ``_seq``, ``_gtid``
    and ``_ts`` when the commit lands them; until then ``seq`` is 0. Once a batch commits
    while it is held, the landing zone keeps it on disk (``_state/xa/``) so a restart past
    the PREPARE still has its rows."""

    key: str  # XaId.key: what the XA COMMIT / ROLLBACK names
    xid: str  # as the server prints it, for messages
    groups: list[tuple[TableVersion, list[RowChange]]]
    file: str  # where the prepared part starts
    position: int
    stored: bool = False  # already written under _state/xa/

    @property
    def name(self) -> str:
        """Its file name under ``_state/xa/``: one per PREPARE, so an XA id used again later
        never overwrites the rows of an earlier transaction a checkpoint still names."""
        return f"{self.key}.{self.file}.{self.position}"
