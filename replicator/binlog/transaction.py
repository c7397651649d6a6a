"""Group a stream of events into whole transactions.

Boundaries (mysql-server ``sql/binlog.cc`` MYSQL_BIN_LOG::write_transaction, MariaDB
``sql/log_event.h`` Gtid_log_event):

* MySQL: a GTID / ANONYMOUS_GTID / GTID_TAGGED event, then ``BEGIN`` ... ``XID`` (or a
  ``COMMIT``/``ROLLBACK`` QUERY for non-transactional engines), or a single DDL QUERY, or
  (8.0.21+) ``CREATE TABLE ... START TRANSACTION``, its rows and an ``XID``.
  TRANSACTION_PAYLOAD carries the BEGIN..XID part compressed: its inner events are fed here in
  order. XA: ``XA START`` ... an XA_PREPARE event ends the prepared part; the outcome comes
  later as its own transaction (a QUERY ``XA COMMIT``/``XA ROLLBACK``).
* MariaDB: a GTID event opens the group (it replaces BEGIN); STANDALONE groups are one
  statement (DDL); others end at XID or a ``COMMIT``/``ROLLBACK`` QUERY; XA groups end at
  XA_PREPARE.
* Servers without GTIDs: ``BEGIN`` opens, the same events close.

A group still open when a new one starts, or when a FORMAT_DESCRIPTION arrives (the server
restarted), was never committed: it is dropped and counted, never delivered in part.
Everything outside transactions (ROTATE, FORMAT_DESCRIPTION, heartbeats, GTID lists, ...)
passes through as is, so the consumer can follow positions.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from uuid import UUID

from . import events as ev
from .gtid import MariadbGtid, MysqlGtid
from .records import record
from .versions import is_mariadb, version_tuple


class Ending(enum.StrEnum):
    """How a transaction ended (its value is the name logs and tests print)."""

    XID = "xid"  # a transactional engine's commit
    COMMIT = "commit"  # a COMMIT query (non-transactional engines)
    ROLLBACK = "rollback"  # a ROLLBACK query: changes to non-transactional tables stay
    DDL = "ddl"  # a statement that is its own transaction
    XA_PREPARE = "xa_prepare"  # the prepared part of an XA transaction; the outcome follows
    XA_COMMIT = "xa_commit"
    XA_ROLLBACK = "xa_rollback"
    STATEMENT = "statement"  # MySQL < 5.5 bare autocommit row changes

    @property
    def is_xa(self) -> bool:
        return self in (Ending.XA_PREPARE, Ending.XA_COMMIT, Ending.XA_ROLLBACK)


@record
class TransactionPart:
    """The first events of a transaction too large to hold in memory; the rest follow in
    further parts and the final ``Transaction`` (whose ``parts`` counts them). A consumer
    must keep parts uncommitted until that final ``Transaction`` arrives."""

    gtid: str | None
    index: int
    events: tuple[ev.Event, ...]
    file: str
    position: int
    # the transaction's commit time as far as its start tells: the header time of its GTID
    # event, which MariaDB and MySQL write at the commit with the COMMIT's time, as they do
    # the XID event; without a GTID event, that of its first event
    timestamp: int
    mysql_gtid: ev.MysqlGtidEvent | None = None  # its commit timestamp, where MySQL logs one

    @property
    def row_count(self) -> int:
        return sum(e.row_count for e in self.events if isinstance(e, ev.RowsEvent))

    @property
    def row_bytes(self) -> int:
        return row_bytes(self.events)


@record
class Transaction:
    """One committed (or XA-prepared) transaction, with every event in it."""

    gtid: str | None  # "D-S-N" (MariaDB), "uuid[:tag]:N" (MySQL), None without GTIDs
    mariadb_gtid: ev.MariadbGtidEvent | None
    mysql_gtid: ev.MysqlGtidEvent | None
    events: tuple[ev.Event, ...]  # everything after the GTID event, payloads flattened
    file: str  # where the transaction starts (its GTID or BEGIN event)
    position: int
    end_file: str  # where the next transaction starts
    end_position: int
    timestamp: int  # commit time, seconds since the epoch (header of the last event)
    xid: int | None
    parts: int  # how many TransactionParts of this transaction came before it
    ending: Ending

    @property
    def typed_gtid(self) -> MariadbGtid | MysqlGtid | None:
        """The GTID as a value (None for an anonymous transaction or a server without)."""
        if self.mariadb_gtid is not None:
            return self.mariadb_gtid.gtid
        event = self.mysql_gtid
        if event is None or event.anonymous:
            return None
        return MysqlGtid(UUID(event.uuid), event.gno, event.tag)

    @property
    def rows(self) -> tuple[ev.RowsEvent, ...]:
        return tuple(e for e in self.events if isinstance(e, ev.RowsEvent))

    @property
    def rolled_back(self) -> bool:
        return self.ending is Ending.ROLLBACK

    @property
    def row_count(self) -> int:
        return sum(e.row_count for e in self.events if isinstance(e, ev.RowsEvent))

    @property
    def row_bytes(self) -> int:
        return row_bytes(self.events)


def row_bytes(events: Iterable[ev.Event]) -> int:
    """The binlog bytes of the rows events among ``events``: what their row images take,
    near enough, wherever they are held."""
    return sum(e.header.event_size for e in events if isinstance(e, ev.RowsEvent))


_PASSTHROUGH = (
    ev.FormatDescriptionEvent,
    ev.RotateEvent,
    ev.HeartbeatEvent,
    ev.PreviousGtidsEvent,
    ev.MariadbGtidListEvent,
    ev.BinlogCheckpointEvent,
    ev.StopEvent,
    ev.IncidentEvent,
    ev.IgnoredEvent,
)


def _statement(event: ev.QueryEvent) -> str:
    return event.query.strip().rstrip(";").strip().upper()


def _atomic_create_select(statement: str) -> bool:
    """MySQL 8.0.21+ logs ``CREATE TABLE ... SELECT`` (ROW format, atomic DDL engines) as one
    transaction: the CREATE TABLE statement with ``START TRANSACTION`` appended opens it, the
    rows follow, an XID ends it (WL#13355; refman "Replication of CREATE TABLE ... SELECT")."""
    return statement.startswith("CREATE") and statement.endswith("START TRANSACTION")


@dataclass(slots=True)
class TransactionAssembler:
    """Feed events in stream order; get back finished transactions and control events.

    With ``part_rows`` (or ``part_bytes``) set, a transaction whose row images pass that
    many (or whose rows events pass that many binlog bytes: wide rows) is handed out in
    ``TransactionPart``s as it goes, so memory stays bounded for huge transactions."""

    part_rows: int | None = None
    part_bytes: int | None = None
    discarded_incomplete: int = 0
    _open: list[ev.Event] = field(default_factory=list)
    _gtid_event: ev.Event | None = None
    _standalone: bool = False
    _started: bool = False  # BEGIN seen (or implied by a MariaDB GTID)
    _orphan: bool = False  # inside a group whose start we never saw (stream began mid-group)
    # MySQL before 5.5 logged autocommit changes to non-transactional tables as bare
    # TABLE_MAP + ROWS events ending with STMT_END_F, without BEGIN/COMMIT.
    _bare_statements: bool = False
    _open_rows: int = 0
    _open_bytes: int = 0
    _parts: int = 0
    _first_file: str = ""
    _first_position: int = 0
    _first_timestamp: int = 0

    @property
    def in_transaction(self) -> bool:
        return self._gtid_event is not None or self._started or bool(self._open)

    def feed(self, event: ev.Event) -> list[Transaction | TransactionPart | ev.Event]:
        kind = type(event)
        if (kind is ev.RowsEvent or kind is ev.TableMapEvent) and self._started:
            # the common case, inside a group begun by BEGIN or a MariaDB GTID (never an
            # orphan: _in_group sets _started only outside one): what _in_group does for
            # it, without the checks that cannot apply
            self._open.append(event)
            if isinstance(event, ev.RowsEvent) and self._part_full(event):
                return [self._part()]
            return []
        if isinstance(event, ev.TransactionPayloadEvent):
            out: list[Transaction | TransactionPart | ev.Event] = []
            for inner in event.events:
                out.extend(self.feed(inner))
            return out
        if isinstance(event, ev.FormatDescriptionEvent):
            self._drop_open()
            version = event.server_version
            self._bare_statements = not is_mariadb(version) and version_tuple(version) < (5, 5, 0)
            return [event]
        if isinstance(event, (ev.MysqlGtidEvent, ev.MariadbGtidEvent)):
            self._drop_open()
            self._gtid_event = event
            self._standalone = isinstance(event, ev.MariadbGtidEvent) and event.standalone
            self._started = isinstance(event, ev.MariadbGtidEvent) and not self._standalone
            return []
        if isinstance(event, _PASSTHROUGH):
            return [event]
        return self._in_group(event)

    def _in_group(self, event: ev.Event) -> list[Transaction | TransactionPart | ev.Event]:
        ends = isinstance(event, (ev.XidEvent, ev.XaPrepareEvent))
        statement = _statement(event) if isinstance(event, ev.QueryEvent) else ""
        if statement in ("COMMIT", "ROLLBACK"):
            ends = True
        if (
            self._bare_statements
            and not self._started
            and self._gtid_event is None
            and not self._orphan
            and isinstance(event, (ev.TableMapEvent, ev.RowsEvent))
        ):
            self._open.append(event)
            if isinstance(event, ev.RowsEvent) and event.end_of_statement:
                return [self._finish(event, Ending.STATEMENT)]
            return []
        stray = not isinstance(event, ev.QueryEvent) or statement in ("COMMIT", "ROLLBACK")
        if self._orphan or (not self.in_transaction and stray):
            # The stream started inside a group (a position between its first and last
            # event): its start is unknown, so the whole group is dropped, never delivered.
            self._orphan = not ends
            if ends:
                self.discarded_incomplete += 1
            return []
        if (
            statement == "BEGIN"
            or statement.startswith("XA START")
            or (not self._started and _atomic_create_select(statement))
        ):
            if self._started and self._open:
                self._drop_open()
            self._started = True
            if statement != "BEGIN":
                self._open.append(event)
            return []
        self._open.append(event)
        if isinstance(event, ev.RowsEvent) and self._part_full(event):
            return [self._part()]
        if isinstance(event, ev.XidEvent):
            return [self._finish(event, Ending.XID)]
        if isinstance(event, ev.XaPrepareEvent):
            return [self._finish(event, Ending.XA_PREPARE)]
        if isinstance(event, ev.QueryEvent):
            if self._started and statement in ("COMMIT", "ROLLBACK"):
                self._open.pop()  # the COMMIT/ROLLBACK statement itself carries nothing
                return [
                    self._finish(event, Ending.COMMIT if statement == "COMMIT" else Ending.ROLLBACK)
                ]
            if not self._started:
                # a statement on its own: DDL (MySQL without BEGIN, MariaDB STANDALONE), or
                # the outcome of a prepared XA transaction
                if statement.startswith("XA COMMIT"):
                    return [self._finish(event, Ending.XA_COMMIT)]
                if statement.startswith("XA ROLLBACK"):
                    return [self._finish(event, Ending.XA_ROLLBACK)]
                return [self._finish(event, Ending.DDL)]
        return []

    def _part_full(self, event: ev.RowsEvent) -> bool:
        """Count ``event`` (just held); True when what is held makes a part."""
        full = False
        if self.part_rows is not None:
            self._open_rows += event.row_count
            full = self._open_rows >= self.part_rows
        if self.part_bytes is not None:
            self._open_bytes += event.header.event_size
            full = full or self._open_bytes >= self.part_bytes
        return full

    def _part(self) -> TransactionPart:
        first = self._gtid_event or self._open[0]
        if self._parts == 0:
            self._first_file, self._first_position = first.file, first.position
            self._first_timestamp = first.header.timestamp
        part = TransactionPart(
            gtid=self._gtid_text(),
            index=self._parts,
            events=tuple(self._open),
            file=self._first_file,
            position=self._first_position,
            timestamp=self._first_timestamp,
            mysql_gtid=first if isinstance(first, ev.MysqlGtidEvent) else None,
        )
        self._parts += 1
        self._open = []
        self._open_rows = self._open_bytes = 0
        return part

    def _gtid_text(self) -> str | None:
        gtid_event = self._gtid_event
        if isinstance(gtid_event, ev.MariadbGtidEvent):
            return str(gtid_event.gtid)
        if isinstance(gtid_event, ev.MysqlGtidEvent):
            return gtid_event.gtid
        return None

    def _finish(self, last: ev.Event, ending: Ending) -> Transaction:
        first = self._gtid_event or (self._open[0] if self._open else last)
        gtid_event = self._gtid_event
        xid = last.xid if isinstance(last, ev.XidEvent) else None
        gtid: str | None = None
        mariadb = mysql = None
        if isinstance(gtid_event, ev.MariadbGtidEvent):
            gtid, mariadb = str(gtid_event.gtid), gtid_event
        elif isinstance(gtid_event, ev.MysqlGtidEvent):
            gtid, mysql = gtid_event.gtid, gtid_event
        transaction = Transaction(
            gtid=gtid,
            mariadb_gtid=mariadb,
            mysql_gtid=mysql,
            events=tuple(self._open),
            file=self._first_file if self._parts else first.file,
            position=self._first_position if self._parts else first.position,
            end_file=last.file,
            end_position=last.next_position,
            timestamp=last.header.timestamp,
            xid=xid,
            parts=self._parts,
            ending=ending,
        )
        self._reset()
        return transaction

    def _drop_open(self) -> None:
        if self._open or self._gtid_event is not None or self._parts:
            self.discarded_incomplete += 1
        self._reset()

    def _reset(self) -> None:
        self._open = []
        self._gtid_event = None
        self._standalone = False
        self._started = False
        self._orphan = False
        self._open_rows = self._open_bytes = 0
        self._parts = 0
