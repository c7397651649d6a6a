"""What the source server is and how its binary log is set up, read once over SQL.

``server_info(conn)`` gathers the facts preflight, ``status`` and the stream need: flavour and
version, server id/uuid, the binlog settings, GTID state, where the binlog ends, which binlog
files exist and how long they are kept. Everything is read robustly across flavours and
versions: variables come from one ``SHOW GLOBAL VARIABLES WHERE Variable_name IN (...)`` (no
privilege needed; a variable the server does not have is simply absent and comes out as None),
and statements that need a privilege the account lacks are recorded in ``denied`` instead of
failing, so preflight can still report everything else.

Statement names by version:
* end of the binlog: MySQL 8.2+ ``SHOW BINARY LOG STATUS`` (``SHOW MASTER STATUS`` removed in
  8.4: https://dev.mysql.com/doc/refman/8.4/en/show-binary-log-status.html), MariaDB 10.5.2+
  ``SHOW BINLOG STATUS`` (https://mariadb.com/kb/en/show-binlog-status/), else
  ``SHOW MASTER STATUS``; a parse error (1064) falls back to the other spelling.
* files: ``SHOW BINARY LOGS`` (Log_name, File_size[, Encrypted]); error 1381 means the binlog
  is off. Both need REPLICATION CLIENT (MySQL) / BINLOG MONITOR (MariaDB 10.5+).
* the GTID state at a binlog file and position: MariaDB ``BINLOG_GTID_POS(file, pos)``
  (https://mariadb.com/kb/en/binlog_gtid_pos/), NULL when the position is not the start of an
  event group the server knows; MySQL has no such function (the stream reads it from the
  PREVIOUS_GTIDS event that opens each file: ``source.stream``).
* retention: MySQL 8.0+ ``binlog_expire_logs_seconds`` wins over the deprecated
  ``expire_logs_days`` when non-zero, and ``binlog_expire_logs_auto_purge=OFF`` (8.0.29+) turns
  purging off (https://dev.mysql.com/doc/refman/8.4/en/replication-options-binary-log.html);
  MariaDB 10.6+ keeps the two in sync, older MariaDB has only ``expire_logs_days``
  (https://mariadb.com/kb/en/replication-and-binary-log-system-variables/).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final, Literal

import pymysql

from ..binlog.gtid import MariadbGtidPosition
from .errors import ER_SPECIFIC_ACCESS_DENIED, error_code, translate_error

__all__ = [
    "BinlogFile",
    "BinlogPosition",
    "Flavor",
    "ServerInfo",
    "connection_account",
    "connection_where",
    "parse_version",
    "server_info",
]

Flavor = Literal["mariadb", "mysql"]

ER_PARSE_ERROR: Final = 1064
ER_NO_BINARY_LOGGING: Final = 1381

VARIABLES: Final = (
    "version",
    "version_comment",
    "server_id",
    "server_uuid",
    "log_bin",
    "log_bin_basename",
    "binlog_format",
    "binlog_row_image",
    "binlog_row_metadata",
    "binlog_row_value_options",
    "binlog_checksum",
    "gtid_mode",
    "enforce_gtid_consistency",
    "gtid_strict_mode",
    "gtid_domain_id",
    "gtid_binlog_pos",
    "gtid_current_pos",
    "gtid_executed",
    "gtid_purged",
    "binlog_expire_logs_seconds",
    "expire_logs_days",
    "binlog_expire_logs_auto_purge",
)


@dataclass(frozen=True, slots=True)
class BinlogFile:
    """One row of SHOW BINARY LOGS."""

    name: str
    size: int


@dataclass(frozen=True, slots=True)
class BinlogPosition:
    """A binlog coordinate: file name and byte offset."""

    file: str
    position: int

    def __str__(self) -> str:
        return f"{self.file}:{self.position}"


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """The source server's identity and binlog configuration. None: the server lacks it."""

    flavor: Flavor
    version: tuple[int, int, int]
    version_string: str
    server_id: int
    server_uuid: str | None  # MySQL
    log_bin: bool
    binlog_format: str | None
    binlog_row_image: str | None
    binlog_row_metadata: str | None  # MySQL 8.0.1+, MariaDB 10.5+
    binlog_row_value_options: str | None  # MySQL 8.0.3+
    binlog_checksum: str | None
    gtid_mode: str | None  # MySQL
    enforce_gtid_consistency: str | None  # MySQL
    gtid_strict_mode: bool | None  # MariaDB
    gtid_domain_id: int | None  # MariaDB
    gtid_binlog_pos: str | None  # MariaDB
    gtid_current_pos: str | None  # MariaDB
    gtid_executed: str | None  # MySQL
    gtid_purged: str | None  # MySQL
    binlog_end: BinlogPosition | None  # None: binlog off, or not allowed to ask
    binlog_do_db: str
    binlog_ignore_db: str
    binlog_files: tuple[BinlogFile, ...] | None  # oldest first; None: not allowed to ask
    binlog_expire_logs_seconds: int | None
    expire_logs_days: float | None
    binlog_expire_logs_auto_purge: bool | None  # MySQL 8.0.29+
    denied: tuple[str, ...]  # statements refused for lack of a privilege

    @property
    def is_mariadb(self) -> bool:
        return self.flavor == "mariadb"

    @property
    def binlog_expire_seconds(self) -> float | None:
        """After how long the server purges binlog files on its own; None: never."""
        if self.binlog_expire_logs_auto_purge is False:
            return None
        if self.binlog_expire_logs_seconds:
            return float(self.binlog_expire_logs_seconds)
        if self.expire_logs_days:
            return self.expire_logs_days * 86400.0
        return None

    @property
    def label(self) -> str:
        """``MariaDB 10.11.19`` / ``MySQL 8.4.3``."""
        name = "MariaDB" if self.is_mariadb else "MySQL"
        return f"{name} {'.'.join(str(part) for part in self.version)}"


def parse_version(text: str) -> tuple[int, int, int]:
    """(major, minor, patch) from a VERSION() string; MariaDB's old '5.5.5-' prefix dropped."""
    if text.startswith("5.5.5-") and "mariadb" in text.lower():
        text = text[len("5.5.5-") :]
    match = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if match is None:
        return (0, 0, 0)
    return (int(match.group(1)), int(match.group(2)), int(match.group(3) or 0))


def connection_where(conn: pymysql.connections.Connection) -> str:
    """``host:port`` or the socket path of an open connection, for messages."""
    if conn.unix_socket:
        return str(conn.unix_socket)
    return f"{conn.host}:{conn.port}"


def connection_account(conn: pymysql.connections.Connection) -> str:
    user = conn.user
    return user.decode("utf-8", "replace") if isinstance(user, bytes) else str(user)


def server_info(conn: pymysql.connections.Connection) -> ServerInfo:
    """Read the server's identity and binlog setup (see the module docstring)."""
    try:
        return _read(conn)
    except pymysql.err.MySQLError as exc:
        raise translate_error(
            exc, where=connection_where(conn), account=connection_account(conn)
        ) from None


def mariadb_gtid_at(
    conn: pymysql.connections.Connection, file: str, position: int
) -> MariadbGtidPosition | None:
    """The GTID state at ``file:position`` of a MariaDB binlog (``BINLOG_GTID_POS``); None
    when the server does not know it there."""
    with conn.cursor() as cur:
        cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (file, position))
        row = cur.fetchone()
    text = row[0] if row else None
    if text is None:
        return None
    return MariadbGtidPosition.parse(_text(text))


def _read(conn: pymysql.connections.Connection) -> ServerInfo:
    denied: list[str] = []
    with conn.cursor() as cur:
        placeholders = ", ".join(["%s"] * len(VARIABLES))
        cur.execute(f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({placeholders})", VARIABLES)
        variables = {str(name).lower(): _text(value) for name, value in cur.fetchall()}
        version_string = variables.get("version") or str(conn.get_server_info())
        comment = variables.get("version_comment") or ""
        is_mariadb = "mariadb" in f"{version_string} {comment}".lower()
        flavor: Flavor = "mariadb" if is_mariadb else "mysql"
        version = parse_version(version_string)
        log_bin = _bool(variables.get("log_bin")) is True
        status = _binlog_status(cur, flavor, version, denied) if log_bin else None
        files = _binlog_files(cur, denied) if log_bin else ()
    return ServerInfo(
        flavor=flavor,
        version=version,
        version_string=version_string,
        server_id=_int(variables.get("server_id")) or 0,
        server_uuid=variables.get("server_uuid") or None,
        log_bin=log_bin,
        binlog_format=_upper(variables.get("binlog_format")),
        binlog_row_image=_upper(variables.get("binlog_row_image")),
        binlog_row_metadata=_upper(variables.get("binlog_row_metadata")),
        binlog_row_value_options=_upper(variables.get("binlog_row_value_options")),
        binlog_checksum=_upper(variables.get("binlog_checksum")),
        gtid_mode=_upper(variables.get("gtid_mode")),
        enforce_gtid_consistency=_upper(variables.get("enforce_gtid_consistency")),
        gtid_strict_mode=_bool(variables.get("gtid_strict_mode")),
        gtid_domain_id=_int(variables.get("gtid_domain_id")),
        gtid_binlog_pos=variables.get("gtid_binlog_pos"),
        gtid_current_pos=variables.get("gtid_current_pos"),
        gtid_executed=_gtid_set(variables.get("gtid_executed")),
        gtid_purged=_gtid_set(variables.get("gtid_purged")),
        binlog_end=status[0] if status else None,
        binlog_do_db=status[1] if status else "",
        binlog_ignore_db=status[2] if status else "",
        binlog_files=files,
        binlog_expire_logs_seconds=_int(variables.get("binlog_expire_logs_seconds")),
        expire_logs_days=_float(variables.get("expire_logs_days")),
        binlog_expire_logs_auto_purge=_bool(variables.get("binlog_expire_logs_auto_purge")),
        denied=tuple(denied),
    )


def _binlog_status_statements(flavor: Flavor, version: tuple[int, int, int]) -> tuple[str, ...]:
    if flavor == "mysql":
        if version >= (8, 2, 0):
            return ("SHOW BINARY LOG STATUS", "SHOW MASTER STATUS")
        return ("SHOW MASTER STATUS", "SHOW BINARY LOG STATUS")
    if version >= (10, 5, 2):
        return ("SHOW BINLOG STATUS", "SHOW MASTER STATUS")
    return ("SHOW MASTER STATUS",)


def _binlog_status(
    cur: Any, flavor: Flavor, version: tuple[int, int, int], denied: list[str]
) -> tuple[BinlogPosition, str, str] | None:
    """(end of binlog, Binlog_Do_DB, Binlog_Ignore_DB), or None when off or not allowed."""
    statements = _binlog_status_statements(flavor, version)
    for statement in statements:
        try:
            cur.execute(statement)
        except pymysql.err.MySQLError as exc:
            code = error_code(exc)
            if code == ER_PARSE_ERROR and statement != statements[-1]:
                continue
            if code == ER_SPECIFIC_ACCESS_DENIED:
                denied.append(statement)
                return None
            raise
        row = cur.fetchone()
        if row is None:
            return None
        do_db = _text(row[2]) if len(row) > 2 else ""
        ignore_db = _text(row[3]) if len(row) > 3 else ""
        return BinlogPosition(_text(row[0]), int(row[1])), do_db, ignore_db
    return None


def _binlog_files(cur: Any, denied: list[str]) -> tuple[BinlogFile, ...] | None:
    try:
        cur.execute("SHOW BINARY LOGS")
    except pymysql.err.MySQLError as exc:
        code = error_code(exc)
        if code == ER_NO_BINARY_LOGGING:
            return ()
        if code == ER_SPECIFIC_ACCESS_DENIED:
            denied.append("SHOW BINARY LOGS")
            return None
        raise
    return tuple(BinlogFile(_text(row[0]), int(row[1])) for row in cur.fetchall())


def _text(value: object) -> str:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    return "" if value is None else str(value)


def _upper(value: str | None) -> str | None:
    """Upper-cased; an empty value stays "" (binlog_row_value_options is '' by default)."""
    return value.upper() if value is not None else None


def _bool(value: str | None) -> bool | None:
    if value is None:
        return None
    return value.strip().upper() in ("ON", "1", "YES", "TRUE")


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _gtid_set(value: str | None) -> str | None:
    """MySQL prints long GTID sets over several lines; join them."""
    return None if value is None else "".join(value.split())
