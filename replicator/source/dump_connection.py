"""The replication connection up to the first byte of the dump: connect, read the server's
facts, set the session up, register as a replica, ask for the binlog, take the socket over.

pymysql connects (handshake, authentication, TLS) and runs the session's SET statements; the
replication commands go through ``source.wire``, and once the dump is asked for, the socket is
the stream's to read raw (``DumpSocket``): pymysql reads nothing more on that connection.

Session variables the server's dump thread reads (MariaDB ``sql/sql_repl.cc``, mysql-server
``sql/rpl_binlog_sender.cc``): ``@master_binlog_checksum`` (MySQL 8.0.26+ also
``@source_binlog_checksum``) announces that the replica understands checksums, or a server with
them refuses it; ``@master_heartbeat_period`` in nanoseconds; MariaDB's
``@mariadb_slave_capability`` and, for a GTID start, ``@slave_connect_state`` with strict mode.
The command formats are ``source.protocol``'s.
"""

from __future__ import annotations

import contextlib
import socket
import threading

import pymysql

from ..binlog.position import StreamPosition
from ..config import SourceConfig
from ..errors import ReplicatorError
from . import wire
from .connection import describe_source, open_connection
from .dump_failures import REFUSED_AT_START, refused
from .errors import SourceUnavailableError, error_code, translate_error
from .facts import ServerFacts, server_facts
from .protocol import (
    BINLOG_SEND_ANNOTATE_ROWS_EVENT,
    COM_BINLOG_DUMP,
    COM_BINLOG_DUMP_GTID,
    COM_REGISTER_SLAVE,
    MARIADB_SLAVE_CAPABILITY_MINE,
    dump_gtid_payload,
    dump_payload,
    register_replica_payload,
)
from .server_info import server_info

__all__ = ["DumpSocket", "connect", "read_facts", "request_dump"]


def connect(cfg: SourceConfig) -> pymysql.connections.Connection:
    """A connection for the dump; anything but the program's own errors is worth a retry."""
    try:
        return open_connection(cfg)
    except ReplicatorError:
        raise
    except Exception as exc:
        # a reply mangled on the way (or a server dying mid-handshake): try again
        raise SourceUnavailableError(f"connecting failed: {type(exc).__name__}: {exc}") from exc


def read_facts(conn: pymysql.connections.Connection) -> ServerFacts:
    """The server's facts (``source.facts``) as it is now."""
    try:
        return server_facts(server_info(conn))
    except ReplicatorError:
        raise
    except Exception as exc:
        raise SourceUnavailableError(
            f"reading the server's state failed: {type(exc).__name__}: {exc}"
        ) from exc


def request_dump(
    conn: pymysql.connections.Connection,
    cfg: SourceConfig,
    facts: ServerFacts,
    start: StreamPosition,
    *,
    report_host: str | None,
) -> None:
    """Set the session up, register as a replica with ``report_host`` (None: do not
    register, a short read), and ask for the binlog from ``start``. A refusal of the
    account is final (``ServerRefusedError``); a dropped link is the program's own error."""
    try:
        _prepare_session(conn, cfg, facts, start)
        if report_host is not None:  # None: a reader that does not register
            _register(conn, cfg, report_host)
        _send_dump(conn, cfg, facts, start)
    except pymysql.err.Error as exc:
        # privileges (REPLICATION SLAVE) are refusals; a dropped link is retried
        if error_code(exc) in REFUSED_AT_START:
            raise refused(cfg.user, str(exc.args[-1]) if exc.args else str(exc)) from exc
        raise translate_error(exc, where=describe_source(cfg), account=cfg.user) from exc


def _prepare_session(
    conn: pymysql.connections.Connection,
    cfg: SourceConfig,
    facts: ServerFacts,
    start: StreamPosition,
) -> None:
    period_ns = int(cfg.heartbeat_seconds * 1_000_000_000)
    statements = [
        f"SET @master_binlog_checksum = '{facts.checksum}'",
        f"SET @master_heartbeat_period = {period_ns}",
    ]
    if facts.flavor == "mysql" and facts.version >= (8, 0, 26):
        statements.append(f"SET @source_binlog_checksum = '{facts.checksum}'")
    if facts.flavor == "mariadb":
        statements.append(f"SET @mariadb_slave_capability = {MARIADB_SLAVE_CAPABILITY_MINE}")
        if start.mariadb_gtid is not None:
            statements += [
                f"SET @slave_connect_state = '{start.mariadb_gtid}'",
                "SET @slave_gtid_strict_mode = 1",
                "SET @slave_gtid_ignore_duplicates = 0",
            ]
    with conn.cursor() as cur:
        for sql in statements:
            cur.execute(sql)


def _register(conn: pymysql.connections.Connection, cfg: SourceConfig, host: str) -> None:
    payload = register_replica_payload(cfg.server_id, host=host, user="")
    wire.send_command(conn, COM_REGISTER_SLAVE, payload)
    wire.read_ok(conn)


def _send_dump(
    conn: pymysql.connections.Connection,
    cfg: SourceConfig,
    facts: ServerFacts,
    start: StreamPosition,
) -> None:
    flags = BINLOG_SEND_ANNOTATE_ROWS_EVENT if cfg.annotate_rows else 0
    if facts.flavor == "mysql" and start.mysql_gtid is not None:
        payload = dump_gtid_payload(cfg.server_id, start.mysql_gtid, flags=flags)
        wire.send_command(conn, COM_BINLOG_DUMP_GTID, payload)
        return
    if facts.flavor == "mariadb" and start.mariadb_gtid is not None:
        # the server starts from @slave_connect_state; the file name must be empty
        payload = dump_payload(cfg.server_id, "", 4, flags=flags)
    else:
        payload = dump_payload(cfg.server_id, start.file, start.position, flags=flags)
    wire.send_command(conn, COM_BINLOG_DUMP, payload)


class DumpSocket:
    """The socket of the dump under way, if any: the reader thread takes it over once the
    dump is asked for, and ``close`` (from any thread) shuts it so that a blocked read wakes
    at once (closing the socket alone would not wake it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._socket: socket.socket | None = None

    def take(self, conn: pymysql.connections.Connection, timeout: float) -> socket.socket:
        """``conn``'s socket, read raw from here on, with ``timeout`` on each read."""
        sock = wire.raw_socket(conn)  # the dump stream is read raw from here on
        assert sock is not None
        sock.settimeout(timeout)
        with self._lock:
            self._socket = sock
        return sock

    def close(self) -> None:
        with self._lock:
            sock, self._socket = self._socket, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()
