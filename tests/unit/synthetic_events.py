"""Binlog events built by hand, in the shapes MySQL writes, for transactions no captured
binlog here holds (XA, atomic CREATE TABLE ... SELECT)."""

from __future__ import annotations

from collections.abc import Sequence

from replicator.binlog import events as ev
from replicator.binlog.block import Block
from replicator.binlog.constants import ColumnType
from replicator.binlog.schema import ColumnDef
from replicator.binlog.xa import XaId

UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
# db.t of ``Events.inserts``
COLUMNS = (
    ColumnDef(index=0, type=ColumnType.LONG, meta=0, name="id"),
    ColumnDef(index=1, type=ColumnType.VARCHAR, meta=40, name="v", charset="utf-8"),
)


class Events:
    def __init__(self) -> None:
        self.position = 4

    def _at(self, type_code: int) -> tuple[ev.EventHeader, str, int, int]:
        start = self.position
        self.position += 50
        header = ev.EventHeader(1_700_000_000, type_code, 1, 50, self.position, 0)
        return header, "b.1", start, self.position

    def gtid(self, gno: int) -> ev.MysqlGtidEvent:
        return ev.MysqlGtidEvent(
            *self._at(33), True, UUID, "", gno, None, None, None, None, None, None, None
        )

    def query(self, text: str) -> ev.QueryEvent:
        return ev.QueryEvent(*self._at(2), 9, 0, 0, "db", text, b"", None, None)

    def prepare(self, xa: XaId, *, one_phase: bool = False) -> ev.XaPrepareEvent:
        return ev.XaPrepareEvent(*self._at(38), one_phase, xa.format_id, xa.gtrid, xa.bqual)

    def table_map(self) -> ev.Event:
        """Stands in for TABLE_MAP/ROWS: any event inside a transaction."""
        return ev.IntvarEvent(*self._at(5), 2, 1)

    def xid(self, xid: int) -> ev.XidEvent:
        return ev.XidEvent(*self._at(16), xid)

    def inserts(self, rows: Sequence[tuple[object, ...]]) -> list[ev.Event]:
        """A TABLE_MAP of ``db.t`` (``COLUMNS``, key ``id``) and a rows event inserting
        ``rows``."""
        header = ev.EventHeader(1_700_000_000, 19, 1, 50, self.position + 50, 0)
        table = ev.TableMapEvent(header, "b.1", self.position, self.position + 50, 7, 0, "db",
                                 "t", COLUMNS, (0,), True)  # fmt: skip
        self.position += 50
        header = ev.EventHeader(1_700_000_000, 30, 1, 50, self.position + 50, 1)
        block = Block.from_rows(rows, len(COLUMNS))
        rows_event = ev.RowsEvent(header, "b.1", self.position, self.position + 50, 7, 1, table,
                                  ev.RowsKind.INSERT, block)  # fmt: skip
        self.position += 50
        return [table, rows_event]
