"""What the replica stream needs to know of the server at each connect: flavor, version,
binlog checksum and format, and the end of the binlog (file, position, GTID state).

``server_facts`` reads them off ``source.server_info`` and refuses a server the stream cannot
read at all (binary log off, an account that may not see its end); ``refuse_statement_format``
refuses one that logs changes as SQL. Both are plain functions of what the server said, so
the seeding of a new landing zone and the continuity check use them without a stream.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..binlog.gtid import MariadbGtidPosition, MysqlGtidSet
from ..binlog.position import StreamPosition
from ..errors import ServerRefusedError
from .server_info import ServerInfo

__all__ = ["ServerFacts", "refuse_statement_format", "server_facts"]


@dataclass(frozen=True, slots=True)
class ServerFacts:
    flavor: str  # "mariadb" or "mysql"
    version: tuple[int, int, int]
    checksum: str  # "CRC32" or "NONE"
    binlog_format: str  # "ROW", "MIXED", "STATEMENT" ("" when the server does not say)
    end: StreamPosition  # end of the binlog when we connected, with the GTID state there


def server_facts(info: ServerInfo) -> ServerFacts:
    """What the stream needs from ``server_info``: flavor, checksum, and the end of the
    binlog (file, position, GTID state) when we connected."""
    if not info.log_bin:
        raise ServerRefusedError(
            "the server's binary log is off (log_bin = OFF)",
            hint="turn it on in the server's my.cnf (log_bin, binlog_format = ROW, server_id; "
            "docs/source-setup.md) and restart the server; `replicator check` lists every "
            "setting",
        )
    if info.binlog_end is None:
        monitor = (
            "BINLOG MONITOR"
            if info.is_mariadb and info.version >= (10, 5, 2)
            else "REPLICATION CLIENT"
        )
        raise ServerRefusedError(
            "the account may not read the end of the binary log"
            + (f" ({', '.join(info.denied)} refused)" if info.denied else ""),
            hint=f"GRANT {monitor} ON *.* TO <the replication account>; (see `replicator check`)",
        )
    mariadb_gtid = mysql_gtid = None
    if info.is_mariadb:
        mariadb_gtid = MariadbGtidPosition.parse(info.gtid_binlog_pos or "")
    elif (info.gtid_mode or "").upper() == "ON":
        mysql_gtid = MysqlGtidSet.parse(info.gtid_executed or "")
    return ServerFacts(
        flavor=info.flavor,
        version=info.version,
        checksum=(info.binlog_checksum or "NONE").upper(),
        binlog_format=(info.binlog_format or "").upper(),
        end=StreamPosition(
            info.binlog_end.file, info.binlog_end.position, mariadb_gtid, mysql_gtid
        ),
    )


def refuse_statement_format(facts: ServerFacts) -> None:
    """At the first connect: a server that logs changes as SQL (STATEMENT, or MIXED, which
    picks statements whenever it deems them safe) cannot be streamed exactly. Later changes of
    the setting, and sessions that set their own, are caught per statement by the pipeline."""
    if facts.binlog_format in ("", "ROW"):
        return
    raise ServerRefusedError(
        f"the source logs changes as SQL statements (binlog_format={facts.binlog_format}), "
        "which cannot be turned into row changes exactly",
        hint="SET GLOBAL binlog_format = 'ROW'; and binlog_format = ROW in the server's "
        "my.cnf, then reconnect (or restart) the applications so their sessions log rows; "
        "see `replicator check`",
    )
