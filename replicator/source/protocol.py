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
from dataclasses import dataclass, replace

from ..binlog.gtid import MariadbGtid, MariadbGtidPosition, MysqlGtid, MysqlGtidSet
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


@dataclass(frozen=True, slots=True)
class StreamPosition:
    """Where a replica stands: after the last transaction it has fully received.

    File/position always; a GTID state when the server has one (MariaDB always, MySQL with
    gtid_mode=ON). Resuming prefers the GTID state, which survives failover and purged files.
    """

    file: str = ""
    position: int = 4
    mariadb_gtid: MariadbGtidPosition | None = None
    mysql_gtid: MysqlGtidSet | None = None

    @property
    def has_gtid(self) -> bool:
        return self.mariadb_gtid is not None or self.mysql_gtid is not None

    def after(self, gtid: str | None, end_file: str, end_position: int) -> StreamPosition:
        """The position after a transaction with this GTID ending at ``end_file:end_position``."""
        mariadb, mysql = self.mariadb_gtid, self.mysql_gtid
        if gtid is not None and mariadb is not None and "-" in gtid and ":" not in gtid:
            mariadb = mariadb.advance(MariadbGtid.parse(gtid))
        elif gtid is not None and mysql is not None and ":" in gtid:
            mysql = mysql.add(MysqlGtid.parse(gtid))
        return replace(
            self,
            file=end_file or self.file,
            position=end_position,
            mariadb_gtid=mariadb,
            mysql_gtid=mysql,
        )

    def describe(self) -> str:
        where = f"{self.file}:{self.position}" if self.file else ""
        gtid = ""
        if self.mariadb_gtid is not None:
            gtid = f"gtid {self.mariadb_gtid or 'empty'}"
        elif self.mysql_gtid is not None:
            gtid = f"gtid set {self.mysql_gtid or 'empty'}"
        if where and gtid:
            return f"{where} ({gtid})"
        return where or gtid or f"position {self.position}"


def binlog_index(name: str) -> tuple[str, int]:
    """Split ``mysql-bin.000123`` into its base and number, to order file names."""
    base, _, number = name.rpartition(".")
    return (base, int(number)) if number.isdigit() else (name, 0)


def position_reached(file: str, position: int, end_file: str, end_position: int) -> bool:
    """True when ``file:position`` is at or past ``end_file:end_position``."""
    here, there = binlog_index(file), binlog_index(end_file)
    if here[1] != there[1]:
        return here[1] > there[1]
    return position >= end_position


def covers(start: StreamPosition, file: str, position: int, gtid: str | None) -> bool:
    """True when a stream starting at ``start`` has already had the event at ``file:position``
    (of transaction ``gtid``): by GTID when both have one, else by binlog position."""
    if gtid is not None and start.mariadb_gtid is not None and ":" not in gtid:
        return start.mariadb_gtid.contains(MariadbGtid.parse(gtid))
    if gtid is not None and start.mysql_gtid is not None and ":" in gtid:
        return start.mysql_gtid.contains(MysqlGtid.parse(gtid))
    if not start.file:
        return False
    return not position_reached(file, position, start.file, start.position)


def is_past(here: StreamPosition, mark: StreamPosition) -> bool:
    """True when a stream at ``here`` has had everything up to ``mark`` (by GTID state when
    both have one, else by binlog position)."""
    if here.mariadb_gtid is not None and mark.mariadb_gtid is not None:
        return all(here.mariadb_gtid.contains(g) for g in mark.mariadb_gtid)
    if here.mysql_gtid is not None and mark.mysql_gtid is not None:
        return here.mysql_gtid.issuperset(mark.mysql_gtid)
    if not (here.file and mark.file):
        return False
    return position_reached(here.file, here.position, mark.file, mark.position)


def start_position(gtid: str | None, file: str | None, position: int = 4) -> StreamPosition | None:
    """A start from user input: a GTID (MariaDB ``D-S-N,...`` or MySQL ``uuid:1-5,...``: the
    transactions already had, streaming begins after them), a binlog file and position, or
    None for "now". A position is a u64 byte offset (COM_BINLOG_DUMP_GTID), at least 4: the
    first event follows the 4-byte magic number."""
    if gtid is not None and file is not None:
        raise ConfigError(
            "give either a start GTID or a start file/position, not both",
            hint="drop --start-gtid or --start-file",
        )
    if position < 4:
        raise ConfigError(
            f"start position {position} is before the first event",
            hint="binlog positions start at 4",
        )
    if position > 2**64 - 1:
        raise ConfigError(
            f"start position {position} is past the largest binlog position",
            hint="binlog positions are 64-bit: at most 18446744073709551615",
        )
    if gtid is not None:
        text = gtid.strip()
        if ":" in text:
            return StreamPosition(mysql_gtid=MysqlGtidSet.parse(text))
        return StreamPosition(mariadb_gtid=MariadbGtidPosition.parse(text))
    if file is not None:
        return StreamPosition(file=file, position=position)
    return None
