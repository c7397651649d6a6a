"""Where a replica stands in a source's binlog, and how two such places compare.

A ``StreamPosition`` is what a checkpoint stores and what a dump starts from: the binlog file
and position after the last whole transaction, and the GTID state there when the server has
one (MariaDB always, MySQL with gtid_mode=ON). Comparisons go by GTID state when both sides
have one (it survives failover and renamed files), else by file and position.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import replace

from ..errors import ConfigError
from .framing import GnoRun, Gtid3
from .gtid import MariadbGtid, MariadbGtidPosition, MysqlGtid, MysqlGtidSet
from .records import record

Gtid = MariadbGtid | MysqlGtid


@record
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

    def after(self, gtid: Gtid | None, end_file: str, end_position: int) -> StreamPosition:
        """The position after a transaction with this GTID ending at ``end_file:end_position``."""
        mariadb, mysql = self.mariadb_gtid, self.mysql_gtid
        if isinstance(gtid, MariadbGtid) and mariadb is not None:
            mariadb = mariadb.advance(gtid)
        elif isinstance(gtid, MysqlGtid) and mysql is not None:
            mysql = mysql.add(gtid)
        return StreamPosition(end_file or self.file, end_position, mariadb, mysql)

    def after_many(
        self,
        mariadb: Sequence[Gtid3],
        mysql: Sequence[GnoRun],
        end_file: str,
        end_position: int,
    ) -> StreamPosition:
        """The position after transactions taken natively, one after another, that end at
        ``end_file:end_position``: ``mariadb`` holds the last GTID of each domain among them
        (domain, server_id, seq_no) in the order of those last ones, ``mysql`` their MySQL
        GTIDs as runs (uuid bytes, first gno, last gno)."""
        position = self
        for domain_id, server_id, seq_no in mariadb:
            position = position.after(MariadbGtid(domain_id, server_id, seq_no), end_file, 0)
        if mysql and position.mysql_gtid is not None:
            position = replace(position, mysql_gtid=position.mysql_gtid.with_runs(mysql))
        return position.after(None, end_file, end_position)

    def with_gtid_of(self, other: StreamPosition | None) -> StreamPosition:
        """This position with ``other``'s GTID state when it has none and both stand at the
        same file and position (a start given as file/position whose GTID state was learnt
        later); else unchanged."""
        if (
            other is None
            or self.has_gtid
            or not other.has_gtid
            or (self.file, self.position) != (other.file, other.position)
        ):
            return self
        return replace(self, mariadb_gtid=other.mariadb_gtid, mysql_gtid=other.mysql_gtid)

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


@functools.lru_cache(maxsize=64)  # a stream compares the same few names once per transaction
def binlog_index(name: str) -> tuple[str, int]:
    """Split ``mysql-bin.000123`` into its base and number, to order file names."""
    base, _, number = name.rpartition(".")
    return (base, int(number)) if number.isdigit() else (name, 0)


def position_reached(file: str, position: int, end_file: str, end_position: int) -> bool:
    """True when ``file:position`` is at or past ``end_file:end_position``."""
    if file == end_file:  # the common case (once per transaction): no names to parse
        return position >= end_position
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
