"""Replication commands a replica sends, and where it asks the server to start.

Wire formats (mysql-server ``sql/rpl_source.cc`` register_replica / com_binlog_dump /
com_binlog_dump_gtid; MariaDB ``sql/sql_repl.cc``):

* COM_REGISTER_SLAVE (0x15): server_id u32, hostname/user/password as 1-byte-length strings,
  port u16, replication rank u32 (unused), source id u32 (0).
* COM_BINLOG_DUMP (0x12): position u32, flags u16, server_id u32, file name (rest). MariaDB
  starts from ``@slave_connect_state`` instead when that is set (GTID mode) and ignores the
  file; flag 2 (BINLOG_SEND_ANNOTATE_ROWS_EVENT) asks for ANNOTATE_ROWS.
* COM_BINLOG_DUMP_GTID (0x1e, MySQL): flags u16, server_id u32, file name length u32 and name,
  position u64, then the encoded GTID set of transactions the replica already has, preceded
  by its length u32 (flag BINLOG_THROUGH_GTID = 4).
"""

from __future__ import annotations

import struct

from ..binlog.gtid import MysqlGtidSet
from ..errors import ConfigError

COM_BINLOG_DUMP = 0x12
COM_REGISTER_SLAVE = 0x15
COM_BINLOG_DUMP_GTID = 0x1E
BINLOG_SEND_ANNOTATE_ROWS_EVENT = 0x02
BINLOG_THROUGH_GTID = 0x04
# @mariadb_slave_capability: MARIA_SLAVE_CAPABILITY_MINE (sql/log_event.h) = GTID-aware,
# so the server sends MariaDB's own events (GTID, ANNOTATE_ROWS, ...) instead of stand-ins.
MARIADB_SLAVE_CAPABILITY_MINE = 4


def _short_string(value: str) -> bytes:
    raw = value.encode("utf-8")[:255]
    return bytes((len(raw),)) + raw


def register_replica_payload(
    server_id: int, *, host: str = "", user: str = "", port: int = 0
) -> bytes:
    """COM_REGISTER_SLAVE body after the command byte. No password is ever sent."""
    return (
        struct.pack("<I", server_id)
        + _short_string(host)
        + _short_string(user)
        + _short_string("")
        + struct.pack("<HII", port, 0, 0)
    )


def dump_payload(server_id: int, file: str, position: int, *, flags: int = 0) -> bytes:
    """COM_BINLOG_DUMP body. Its position field has 4 bytes: a position past 4 GiB cannot be
    asked for (never wrapped silently); start by GTID there."""
    if not 0 <= position <= 0xFFFFFFFF:
        raise ConfigError(
            f"binlog position {position} is past 4 GiB, which a file/position dump cannot ask for",
            hint="start from a GTID position instead (start.gtid or --start-gtid)",
        )
    return struct.pack("<IHI", position, flags, server_id) + file.encode("utf-8")


def dump_gtid_payload(
    server_id: int, gtid_set: MysqlGtidSet, *, file: str = "", position: int = 4, flags: int = 0
) -> bytes:
    """COM_BINLOG_DUMP_GTID body (MySQL)."""
    name = file.encode("utf-8")
    data = gtid_set.encode()
    return (
        struct.pack("<HII", flags | BINLOG_THROUGH_GTID, server_id, len(name))
        + name
        + struct.pack("<QI", position, len(data))
        + data
    )
