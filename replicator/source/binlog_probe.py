"""Ask the server when a binlog file begins: the time of its first event, read over the wire.

SQL shows binlog file names and sizes but no times, and preflight needs one: whether the oldest
binlog the server still has reaches back to a checkpoint. We send ``COM_BINLOG_DUMP`` for the
file at position 4 and read until its FORMAT_DESCRIPTION event, whose header timestamp is when
the server started writing the file; then we hang up. This is a probe, not the stream:

* server_id 0 with ``BINLOG_DUMP_NON_BLOCK`` is what ``mysqlbinlog --read-from-remote-server``
  sends: we do not register as a replica, and no running replica's dump thread is killed as a
  "zombie" of ours (MariaDB ``sql/sql_parse.cc`` COM_BINLOG_DUMP kills by server id only when
  it is non-zero; MySQL ``sql/rpl_source.cc`` ``kill_zombie_dump_threads`` matches by the
  ``@slave_uuid`` we never set). The server does not wait at the end of the binlog either.
* An empty file name asks for the first binlog the server still has (``mysql_binlog_send``
  looks it up in the index), so the probe needs no SHOW BINARY LOGS and cannot race a purge.
* ``@master_binlog_checksum`` is set to the server's value first, or servers with checksums
  refuse a client that does not announce it; MariaDB also gets ``@mariadb_slave_capability``.

Wire format: COM_BINLOG_DUMP = 0x12, payload ``pos:4 flags:2 server_id:4 filename``, built by
``source.protocol`` (https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_com_binlog_dump.html,
https://mariadb.com/kb/en/com_binlog_dump/); each reply packet is 0x00 then one event whose
19-byte v4 header starts with ``timestamp:4 type:1`` (mysql-server ``binlog_event.h``). The first
reply is an artificial ROTATE (timestamp 0; body ``position:8`` then the file name, then the
CRC32 when checksums are on) naming the file, the FORMAT_DESCRIPTION follows. The command and
its replies go through ``source.wire``, as the stream's do.

The same exchange needs REPLICATION SLAVE, so a refusal here is a functional privilege check.
"""

from __future__ import annotations

import contextlib
import struct
from dataclasses import dataclass
from typing import Final

import pymysql

from ..binlog.constants import CHECKSUM_SIZE, EVENT_HEADER_SIZE, EventType
from ..config import SourceConfig
from . import wire
from .connection import describe_source, open_connection
from .errors import ER_SPECIFIC_ACCESS_DENIED, error_code, translate_error
from .protocol import COM_BINLOG_DUMP, MARIADB_SLAVE_CAPABILITY_MINE, dump_payload

__all__ = ["ProbeResult", "first_event_time"]

BINLOG_DUMP_NON_BLOCK: Final = 0x01
PROBE_SERVER_ID: Final = 0
FIRST_POSITION: Final = 4
MAX_PACKETS: Final = 8  # ROTATE, FORMAT_DESCRIPTION, and slack for anything servers add first
ER_MASTER_FATAL_ERROR_READING_BINLOG: Final = 1236


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """Outcome of the probe: ``timestamp`` (Unix seconds, server clock) or why there is none."""

    file: str  # the file probed ("" when unknown)
    timestamp: int | None
    denied: bool = False  # the account lacks REPLICATION SLAVE
    problem: str = ""  # any other reason the time is unknown


def first_event_time(cfg: SourceConfig, file: str = "") -> ProbeResult:
    """When the server began writing binlog ``file`` ("": the oldest file it still has)."""
    conn = open_connection(cfg, read_timeout=max(cfg.connect_timeout, 5.0))
    name = file
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT @@global.binlog_checksum")
            row = cur.fetchone()
            checksum = str(row[0]).upper() if row and row[0] is not None else "NONE"
            cur.execute("SET @master_binlog_checksum = @@global.binlog_checksum")
            cur.execute(f"SET @mariadb_slave_capability = {MARIADB_SLAVE_CAPABILITY_MINE}")
        crc_size = 0 if checksum == "NONE" else CHECKSUM_SIZE
        payload = dump_payload(PROBE_SERVER_ID, file, FIRST_POSITION, flags=BINLOG_DUMP_NON_BLOCK)
        wire.send_command(conn, COM_BINLOG_DUMP, payload)
        for _ in range(MAX_PACKETS):
            data = wire.read_packet(conn)
            if len(data) < 1 + EVENT_HEADER_SIZE or data[0] != 0x00:
                return ProbeResult(name, None, problem="the server ended the dump early")
            timestamp, event_type = struct.unpack_from("<IB", data, 1)
            if event_type == EventType.ROTATE:
                body = data[1 + EVENT_HEADER_SIZE + 8 : len(data) - crc_size]
                name = body.decode("utf-8", "replace")
            elif event_type == EventType.FORMAT_DESCRIPTION:
                return ProbeResult(name, int(timestamp))
        return ProbeResult(name, None, problem="no FORMAT_DESCRIPTION event at the start")
    except pymysql.err.MySQLError as exc:
        code = error_code(exc)
        if code == ER_SPECIFIC_ACCESS_DENIED:
            return ProbeResult(name, None, denied=True, problem=str(exc.args[-1]))
        if code == ER_MASTER_FATAL_ERROR_READING_BINLOG:
            return ProbeResult(name, None, problem=str(exc.args[-1]))
        raise translate_error(exc, where=describe_source(cfg), account=cfg.user) from None
    finally:
        with contextlib.suppress(Exception):
            conn.close()
