"""Typed binlog events: slotted value classes, read-only by type (``records.record``), one per
event kind.

Every event carries its ``EventHeader`` (the v4 common header, ``binlog_event.h``
``Log_event_header``) and where it was read: ``file`` and ``position`` (offset of its first
byte) and ``next_position`` (where the following event starts). Positions come from the byte
offsets when reading a file, and from the header's ``log_pos`` over the network, falling back to
event sizes where servers write 0 (MariaDB 11.4+ inside transactions, events of a
TRANSACTION_PAYLOAD, artificial events).
"""

from __future__ import annotations

import enum
from dataclasses import field
from typing import TYPE_CHECKING

from .block import Block, rows_of
from .constants import LOG_EVENT_ARTIFICIAL_F
from .records import record
from .schema import ColumnDef

if TYPE_CHECKING:
    from collections.abc import Callable

    from .gtid import MariadbGtid, MysqlGtidSet
    from .rows import RowImage


@record
class EventHeader:
    timestamp: int
    type_code: int
    server_id: int
    event_size: int
    log_pos: int
    flags: int

    @property
    def artificial(self) -> bool:
        return bool(self.flags & LOG_EVENT_ARTIFICIAL_F)


@record
class Event:
    header: EventHeader
    file: str
    position: int
    next_position: int


# -- control events -------------------------------------------------------------------------


@record
class FormatDescriptionEvent(Event):
    binlog_version: int
    server_version: str
    create_timestamp: int
    header_length: int
    post_header_lengths: bytes
    checksum_alg: int

    def post_header_length(self, type_code: int) -> int:
        """Post-header length the server declared for an event type (0 when not listed)."""
        index = type_code - 1
        if 0 <= index < len(self.post_header_lengths):
            return self.post_header_lengths[index]
        return 0


@record
class RotateEvent(Event):
    next_file: str
    next_file_position: int

    @property
    def artificial(self) -> bool:
        """Sent by the server at dump start or on a fake rotate; not a binlog position."""
        return self.header.artificial or self.header.timestamp == 0


@record
class StopEvent(Event):
    pass


@record
class HeartbeatEvent(Event):
    """HEARTBEAT (v1) and HEARTBEAT_V2: the server is alive and at ``log_file``/``log_position``.

    Timestamp is 0: never use it for lag."""

    log_file: str
    log_position: int


@record
class IncidentEvent(Event):
    """Something happened on the source that may have lost changes (``Incident_event``)."""

    incident: int
    message: str


# -- statement-level events -------------------------------------------------------------------


@record
class QueryEvent(Event):
    thread_id: int
    exec_time: int
    error_code: int
    schema: str
    query: str
    status_vars: bytes
    charset_client: int | None
    ddl_xid: int | None  # MySQL 8 atomic DDL logged with an XID (Q_DDL_LOGGED_WITH_XID)


@record
class XidEvent(Event):
    xid: int


@record
class XaPrepareEvent(Event):
    one_phase: bool
    format_id: int
    gtrid: bytes
    bqual: bytes


@record
class IntvarEvent(Event):
    kind: int  # 1 LAST_INSERT_ID, 2 INSERT_ID
    value: int


@record
class RandEvent(Event):
    seed1: int
    seed2: int


@record
class UserVarEvent(Event):
    name: str
    is_null: bool
    value_type: int | None
    charset: int | None
    value: bytes | None
    flags: int | None


@record
class RowsQueryEvent(Event):
    """The statement that produced the following rows (MySQL ROWS_QUERY)."""

    query: str


@record
class AnnotateRowsEvent(Event):
    """The statement that produced the following rows (MariaDB ANNOTATE_ROWS)."""

    query: str


# -- GTID events --------------------------------------------------------------------------------


@record
class MysqlGtidEvent(Event):
    """GTID, ANONYMOUS_GTID and GTID_TAGGED (``Gtid_event``): starts a transaction.

    ``gtid`` is ``uuid[:tag]:gno`` text, None for an anonymous transaction."""

    commit_flag: bool
    uuid: str
    tag: str
    gno: int
    last_committed: int | None
    sequence_number: int | None
    immediate_commit_timestamp: int | None  # microseconds since the epoch
    original_commit_timestamp: int | None
    transaction_length: int | None
    immediate_server_version: int | None
    original_server_version: int | None

    @property
    def anonymous(self) -> bool:
        return self.header.type_code == 34

    @property
    def gtid(self) -> str | None:
        if self.anonymous:
            return None
        if self.tag:
            return f"{self.uuid}:{self.tag}:{self.gno}"
        return f"{self.uuid}:{self.gno}"


@record
class PreviousGtidsEvent(Event):
    gtid_set: MysqlGtidSet


class MariadbGtidFlags(enum.IntFlag):
    """``Gtid_log_event`` flags2 (MariaDB sql/log_event.h)."""

    STANDALONE = 1
    GROUP_COMMIT_ID = 2
    TRANSACTIONAL = 4
    ALLOW_PARALLEL = 8
    WAITED = 16
    DDL = 32
    PREPARED_XA = 64
    COMPLETED_XA = 128


@record
class MariadbGtidEvent(Event):
    """MariaDB GTID: starts an event group. ``standalone`` groups have no BEGIN/COMMIT."""

    gtid: MariadbGtid
    flags: MariadbGtidFlags
    commit_id: int | None
    xid: bytes | None  # XA transaction id (format_id, gtrid, bqual) for XA groups

    @property
    def standalone(self) -> bool:
        return bool(self.flags.value & 1)  # MariadbGtidFlags.STANDALONE, without an enum op


@record
class MariadbGtidListEvent(Event):
    gtids: tuple[MariadbGtid, ...]
    flags: int


@record
class BinlogCheckpointEvent(Event):
    binlog_file: str


# -- row events ---------------------------------------------------------------------------------


@record
class TableMapEvent(Event):
    table_id: int
    flags: int
    schema: str
    table: str
    columns: tuple[ColumnDef, ...]
    primary_key: tuple[int, ...]  # column indexes; empty when not logged/known
    has_metadata: bool  # optional metadata (binlog_row_metadata) was present

    @property
    def column_names(self) -> tuple[str | None, ...]:
        return tuple(c.name for c in self.columns)


class RowsKind(enum.Enum):
    INSERT = "c"
    UPDATE = "u"
    DELETE = "d"


@record
class RowsEvent(Event):
    """WRITE/UPDATE/DELETE_ROWS v1/v2, MariaDB compressed rows, PARTIAL_UPDATE_ROWS.

    ``block`` holds the row images column by column (``block.py``): inserts their new rows,
    deletes their old rows, updates their before images and, in ``block.after``, their after
    images. ``rows`` and ``after`` give the same images as tuples (a column missing from a
    partial image, binlog_row_image=MINIMAL/NOBLOB, holds ``values.ABSENT``), decoding the
    event again with every column as values when the block holds buffers (``redecode``)."""

    table_id: int
    flags: int
    table: TableMapEvent
    kind: RowsKind
    block: Block
    redecode: Callable[[], Block] | None = field(default=None, compare=False, repr=False)

    @property
    def end_of_statement(self) -> bool:
        return bool(self.flags & 0x0001)

    @property
    def row_count(self) -> int:
        """Rows changed (update pairs count once)."""
        return self.block.count

    def _values(self) -> Block:
        block = self.block
        if self.redecode is not None and block.has_buffers():
            return self.redecode()
        return block

    @property
    def rows(self) -> tuple[RowImage, ...]:
        block = self._values()
        return tuple(rows_of(block.columns, block.count))

    @property
    def after(self) -> tuple[RowImage, ...]:
        """Updates only; empty otherwise."""
        block = self._values()
        if block.after is None:
            return ()
        return tuple(rows_of(block.after, block.count))


@record
class TransactionPayloadEvent(Event):
    """MySQL TRANSACTION_PAYLOAD: a compressed run of events, decoded in order."""

    compression_type: int
    payload_size: int
    uncompressed_size: int
    events: tuple[Event, ...]


# -- others -------------------------------------------------------------------------------------


@record
class OpaqueEvent(Event):
    """A known event kind we pass on without decoding its body: statement-based LOAD DATA
    events, group replication bookkeeping (TRANSACTION_CONTEXT, VIEW_CHANGE), IGNORABLE."""

    body: bytes


@record
class IgnoredEvent(Event):
    """An unknown event type the server flagged LOG_EVENT_IGNORABLE_F: skipped and counted."""

    body: bytes
