"""Numbers defined by the servers: event types, column types, flags.

Sources: mysql-server ``libbinlogevents/include/binlog_event.h`` (``Log_event_type``),
``include/field_types.h`` (``enum_field_types``) and MariaDB ``sql/log_event.h``.
"""

from __future__ import annotations

from enum import IntEnum

BINLOG_MAGIC = b"\xfebin"
EVENT_HEADER_SIZE = 19
CHECKSUM_SIZE = 4

# Event header flags (binlog_event.h)
LOG_EVENT_BINLOG_IN_USE_F = 0x0001
LOG_EVENT_ARTIFICIAL_F = 0x0020
LOG_EVENT_IGNORABLE_F = 0x0080

# FORMAT_DESCRIPTION checksum algorithm byte
CHECKSUM_OFF = 0
CHECKSUM_CRC32 = 1
CHECKSUM_UNDEFINED = 255


class EventType(IntEnum):
    UNKNOWN = 0
    START_V3 = 1
    QUERY = 2
    STOP = 3
    ROTATE = 4
    INTVAR = 5
    LOAD = 6
    SLAVE = 7
    CREATE_FILE = 8
    APPEND_BLOCK = 9
    EXEC_LOAD = 10
    DELETE_FILE = 11
    NEW_LOAD = 12
    RAND = 13
    USER_VAR = 14
    FORMAT_DESCRIPTION = 15
    XID = 16
    BEGIN_LOAD_QUERY = 17
    EXECUTE_LOAD_QUERY = 18
    TABLE_MAP = 19
    PRE_GA_WRITE_ROWS = 20
    PRE_GA_UPDATE_ROWS = 21
    PRE_GA_DELETE_ROWS = 22
    WRITE_ROWS_V1 = 23
    UPDATE_ROWS_V1 = 24
    DELETE_ROWS_V1 = 25
    INCIDENT = 26
    HEARTBEAT = 27
    IGNORABLE = 28
    ROWS_QUERY = 29
    WRITE_ROWS = 30
    UPDATE_ROWS = 31
    DELETE_ROWS = 32
    GTID = 33
    ANONYMOUS_GTID = 34
    PREVIOUS_GTIDS = 35
    TRANSACTION_CONTEXT = 36
    VIEW_CHANGE = 37
    XA_PREPARE = 38
    PARTIAL_UPDATE_ROWS = 39
    TRANSACTION_PAYLOAD = 40
    HEARTBEAT_V2 = 41
    GTID_TAGGED = 42
    # MariaDB (sql/log_event.h)
    MARIADB_ANNOTATE_ROWS = 160
    MARIADB_BINLOG_CHECKPOINT = 161
    MARIADB_GTID = 162
    MARIADB_GTID_LIST = 163
    MARIADB_START_ENCRYPTION = 164
    MARIADB_QUERY_COMPRESSED = 165
    MARIADB_WRITE_ROWS_COMPRESSED_V1 = 166
    MARIADB_UPDATE_ROWS_COMPRESSED_V1 = 167
    MARIADB_DELETE_ROWS_COMPRESSED_V1 = 168
    MARIADB_WRITE_ROWS_COMPRESSED = 169
    MARIADB_UPDATE_ROWS_COMPRESSED = 170
    MARIADB_DELETE_ROWS_COMPRESSED = 171


class ColumnType(IntEnum):
    """``enum_field_types`` (include/field_types.h)."""

    DECIMAL = 0
    TINY = 1
    SHORT = 2
    LONG = 3
    FLOAT = 4
    DOUBLE = 5
    NULL = 6
    TIMESTAMP = 7
    LONGLONG = 8
    INT24 = 9
    DATE = 10
    TIME = 11
    DATETIME = 12
    YEAR = 13
    NEWDATE = 14
    VARCHAR = 15
    BIT = 16
    TIMESTAMP2 = 17
    DATETIME2 = 18
    TIME2 = 19
    TYPED_ARRAY = 20
    VECTOR = 242
    INVALID = 243
    BOOL = 244
    JSON = 245
    NEWDECIMAL = 246
    ENUM = 247
    SET = 248
    TINY_BLOB = 249
    MEDIUM_BLOB = 250
    LONG_BLOB = 251
    BLOB = 252
    VAR_STRING = 253
    STRING = 254
    GEOMETRY = 255
