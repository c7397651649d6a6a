"""Row changes as they land: the table's values plus the metadata columns of the landing
zone contract, one ``Run`` per rows event or snapshot chunk.

``_op`` (c/u/d/r), ``_seq`` (strictly increasing over the whole stream), ``_gtid``, ``_ts`` (the
transaction's commit time, UTC), ``_server_id``, ``_binlog_file``, ``_binlog_pos`` (the
position of the rows event that carried the change).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from ..binlog.block import Block
from ..binlog.runs import RowOrigins
from ..binlog.schema import ColumnDef


class Run(NamedTuple):
    """The row changes of one rows event (or snapshot chunk) as they land: all of one op,
    numbered ``seq`` to ``seq + count - 1``, with the metadata once and the rows column by
    column (``binlog.block``). The field order is part of the held-XA file format
    (``sink.landing.HELD_XA_FORMAT``).

    A run of the rows events of several transactions (a segment of a ``TransactionRun``,
    ``binlog.runs``) has its ``origins``: each event's GTID, commit time, server id and
    position, which its rows land with; the values here are then its first event's."""

    op: str  # "c" insert, "u" update, "d" delete, "r" snapshot read
    seq: int
    gtid: str | None
    ts: dt.datetime  # commit time, tz-aware UTC
    server_id: int
    binlog_file: str
    binlog_pos: int  # the rows event (a snapshot chunk: the binlog point it was read at)
    block: Block
    origins: RowOrigins | None = None  # never held (XA transactions are not taken in runs)

    @property
    def rows(self) -> int:
        return self.block.count

    @property
    def last_seq(self) -> int:
        return self.seq + self.block.count - 1


def rows_in(runs: Sequence[Run]) -> int:
    """Row changes in a list of runs."""
    return sum(run.block.count for run in runs)


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
    """The row changes of an XA transaction prepared but not yet decided (docs/landing-zone.md,
    XA transactions: held until XA COMMIT, dropped at XA ROLLBACK). Its changes get their
    ``_seq``, ``_gtid`` and ``_ts`` when the commit lands them; until then ``seq`` is 0. Once a
    batch commits while it is held, the landing zone keeps it on disk (``_state/xa/``) so a
    restart past the PREPARE still has its rows."""

    key: str  # XaId.key: what the XA COMMIT / ROLLBACK names
    xid: str  # as the server prints it, for messages
    groups: list[tuple[TableVersion, list[Run]]]
    file: str  # where the prepared part starts
    position: int
    stored: bool = False  # already written under _state/xa/

    @property
    def name(self) -> str:
        """Its file name under ``_state/xa/``: one per PREPARE, so an XA id used again later
        never overwrites the rows of an earlier transaction a checkpoint still names."""
        return f"{self.key}.{self.file}.{self.position}"
