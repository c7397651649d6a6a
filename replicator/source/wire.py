"""The one place that reaches below pymysql's public API: raw commands, packets and the socket.

pymysql does the connect, the handshake, authentication, TLS and SQL. Five things it has no
public call for, and we need: refusing to hand the password over where anyone who answers at
the source's address could read it (``plain_tcp_auth``); sending a replication command
(COM_REGISTER_SLAVE, COM_BINLOG_DUMP, COM_BINLOG_DUMP_GTID) and reading its reply packet;
taking the socket over once the binlog dump streams (the stream reads it raw into the sans-I/O
decoder); running a SELECT as a server-side prepared statement, whose rows come in the binary
protocol; and reading a result set's row packets straight from the buffered socket file
(``snapshot.fastread``).
Each function below names the pymysql internal it relies on. They are private to pymysql and
may change in any release, so ``pyproject.toml`` pins ``pymysql<2`` for them; a new pymysql
major is adopted by checking this module against it (and nothing else: no other module of the
package touches a private attribute of a connection, which ``tests/unit/test_wire_seam.py``
checks from the source).

Packet framing (mysql-server ``sql-common/net_serv.cc``; the MySQL client/server protocol,
https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_basic_packets.html): each
packet is ``payload_length:3 sequence_id:1`` then the payload; a command resets the sequence,
which pymysql tracks for us in ``_execute_command`` and ``_read_packet``.
"""

from __future__ import annotations

import functools
import socket
import struct
from typing import Any

import pymysql
from pymysql import _auth
from pymysql.constants import COMMAND, FLAG
from pymysql.protocol import FieldDescriptorPacket, MysqlPacket

from ..errors import ServerRefusedError

__all__ = [
    "plain_tcp_auth",
    "close_statement",
    "drop_result",
    "execute_statement",
    "prepare",
    "raw_socket",
    "read_ok",
    "read_packet",
    "result_columns",
    "result_file",
    "send_command",
    "set_timeouts",
    "unbuffered_result",
]


def send_command(conn: pymysql.connections.Connection, command: int, payload: bytes) -> None:
    """Send one command packet (``command`` byte, then ``payload``) with a fresh sequence.

    pymysql: ``Connection._execute_command(command, sql)``, which finishes an unbuffered
    result left open, splits payloads of 16 MiB and more, and raises ``InterfaceError`` on a
    closed connection."""
    conn._execute_command(command, payload)


def read_packet(conn: pymysql.connections.Connection) -> bytes:
    """The payload of the next packet (a multi-packet payload joined); an ERR packet raises
    the server's error as pymysql's ``MySQLError``.

    pymysql: ``Connection._read_packet()`` and ``MysqlPacket.get_all_data()``."""
    data: bytes = conn._read_packet().get_all_data()
    return data


def read_ok(conn: pymysql.connections.Connection) -> None:
    """Read the reply to a command that answers OK (COM_REGISTER_SLAVE): an ERR raises the
    server's error, anything else ``OperationalError`` (commands out of sync).

    pymysql: ``Connection._read_ok_packet()``."""
    conn._read_ok_packet()


def raw_socket(conn: pymysql.connections.Connection) -> socket.socket | None:
    """The connection's socket (the TLS socket when TLS is on), None once it is closed. The
    binlog dump is read from it directly once requested; pymysql must not read it after that.

    pymysql: ``Connection._sock``."""
    sock: socket.socket | None = conn._sock
    return sock


def set_timeouts(conn: pymysql.connections.Connection, seconds: float | None) -> None:
    """Bound each later read and write on ``conn`` by ``seconds`` (None: no bound). pymysql
    takes its ``read_timeout``/``write_timeout`` only when the connection is made, and applies
    them to the handshake too; this widens them afterwards.

    pymysql: ``Connection._read_timeout`` and ``._write_timeout``, which it re-applies to the
    socket before each read and write."""
    conn._read_timeout = conn._write_timeout = seconds


def unbuffered_result(conn: pymysql.connections.Connection) -> Any:
    """The result of ``conn.query(sql, unbuffered=True)``: its column definitions read
    (``field_count``, ``fields``), its rows not yet.

    pymysql: ``Connection._result`` (a ``MySQLResult``)."""
    return conn._result


def result_file(conn: pymysql.connections.Connection) -> Any:
    """The buffered binary file over the connection's socket that pymysql reads packets from
    (``read1`` returns what is buffered or one read's worth); the row packets of an
    unbuffered result follow in it.

    pymysql: ``Connection._rfile`` (``socket.makefile("rb")``)."""
    return conn._rfile


def drop_result(conn: pymysql.connections.Connection, result: Any) -> None:
    """Forget an unbuffered ``result`` whose rows were read (or abandoned) past pymysql, so
    the next command does not try to finish it.

    pymysql: ``MySQLResult.unbuffered_active`` and ``Connection._result``."""
    result.unbuffered_active = False
    conn._result = None


# A binary result set's column as the row reader needs it: (type, decimals, unsigned).
WireColumn = tuple[int, int, bool]


def prepare(conn: pymysql.connections.Connection, sql: str) -> tuple[int, tuple[WireColumn, ...]]:
    """Prepare ``sql`` (no parameters) on the server: its statement id, and the type,
    decimals and signedness of each column it returns (COM_STMT_PREPARE; MySQL protocol
    "COM_STMT_PREPARE Response": OK, id:4, columns:2, params:2, then the parameter and the
    column definitions, each list ended by an EOF packet). An ERR raises the server's error.

    pymysql: ``Connection._execute_command`` and ``._read_packet(FieldDescriptorPacket)``."""
    conn._execute_command(COMMAND.COM_STMT_PREPARE, sql)
    head: bytes = conn._read_packet().get_all_data()
    statement, columns, params = struct.unpack_from("<IHH", head, 1)
    for _ in range(params + (1 if params else 0)):
        conn._read_packet()
    fields = [conn._read_packet(FieldDescriptorPacket) for _ in range(columns)]
    if columns:
        conn._read_packet()
    return statement, _wire_columns(fields)


def result_columns(result: Any) -> tuple[WireColumn, ...]:
    """The columns of a result set (``execute_statement``'s) as its rows are sent: type,
    decimals and signedness of each column definition."""
    return _wire_columns(result.fields)


def _wire_columns(fields: list[Any]) -> tuple[WireColumn, ...]:
    """pymysql's ``FieldDescriptorPacket``s (``type_code``, ``scale``, ``flags``) as
    ``WireColumn``s."""
    return tuple((f.type_code, f.scale, bool(f.flags & FLAG.UNSIGNED)) for f in fields)


def execute_statement(conn: pymysql.connections.Connection, statement: int) -> Any:
    """Execute a prepared statement without parameters and without a cursor: its result
    set's column definitions read (``field_count``, ``fields``), its binary row packets not
    yet (as ``unbuffered_result``); an ERR raises the server's error.

    pymysql: ``Connection._execute_command`` and ``._read_query_result(unbuffered=True)``,
    which read a binary result set's header as a text one's (they are framed alike)."""
    conn._execute_command(COMMAND.COM_STMT_EXECUTE, struct.pack("<IBI", statement, 0, 1))
    conn._read_query_result(unbuffered=True)
    return conn._result


def close_statement(conn: pymysql.connections.Connection, statement: int) -> None:
    """Free a prepared statement on the server (COM_STMT_CLOSE has no reply).

    pymysql: ``Connection._execute_command``."""
    conn._execute_command(COMMAND.COM_STMT_CLOSE, struct.pack("<I", statement))


# -- authentication over plain TCP ------------------------------------------------------------


def plain_tcp_auth(
    public_key: bytes | None, fetch_key: bool, seen: set[str] | None = None
) -> dict[str, Any]:
    """pymysql's ``auth_plugin_map`` for a connection on neither TLS nor a unix socket, where
    whoever answers at the source's address (a spoofed name, a hijacked route) is the server
    as far as the client can tell. As the stock clients do, it refuses what would give such an
    impostor the password: the plugins that send it as it is (``mysql_clear_password``,
    MariaDB's PAM ``dialog``), and RSA encryption with a key the server itself sends
    (``caching_sha2_password`` full authentication, ``sha256_password``) unless ``fetch_key``
    (``mysql --get-server-public-key``); ``public_key`` (PEM, ``--server-public-key-path``)
    is used for ``caching_sha2_password`` instead of asking for one.

    pymysql: a map entry's class is made with the connection and its ``authenticate(packet)``
    takes the plugin's packets (an auth switch, positioned after the plugin name, or extra
    auth data); ``_auth.caching_sha2_password_auth``, ``_auth.sha256_password_auth``,
    ``_auth._roundtrip`` and ``_auth.scramble_caching_sha2`` do the exchange; the connection's
    ``salt``, ``password`` and ``server_public_key`` are what they read. ``seen`` gathers the
    names of the plugins the server had these handle (``caching_sha2_password`` answered from
    the server's cache, say)."""
    return {
        "mysql_clear_password": _ClearText,
        "dialog": _ClearText,
        "caching_sha2_password": functools.partial(
            _CachingSha2, public_key=public_key, fetch_key=fetch_key, seen=seen
        ),
        "sha256_password": functools.partial(_Sha256, fetch_key=fetch_key),
    }


def _refused(what: str) -> ServerRefusedError:
    return ServerRefusedError(
        f"the server asked for {what} on a connection without TLS, which would give the "
        "password to anyone answering at the source's address: refused",
        hint="turn on source.tls (MySQL 8 serves TLS by default), connect through "
        "source.unix_socket, or for caching_sha2_password give the server's RSA public key "
        "as source.server_public_key_file; source.get_server_public_key: true takes the key "
        "the server sends (on a network you trust)",
    )


class _ClearText:
    def __init__(self, conn: pymysql.connections.Connection) -> None:
        self.conn = conn

    def authenticate(self, packet: MysqlPacket) -> MysqlPacket:
        raise _refused("the password in clear text")


class _CachingSha2:
    """caching_sha2_password: the fast path (a scramble) as pymysql does it; full
    authentication only with the given key, or one the server sends if ``fetch_key``."""

    def __init__(
        self,
        conn: pymysql.connections.Connection,
        *,
        public_key: bytes | None,
        fetch_key: bool,
        seen: set[str] | None,
    ) -> None:
        self.conn, self.public_key, self.fetch_key, self.seen = conn, public_key, fetch_key, seen

    def authenticate(self, packet: MysqlPacket) -> MysqlPacket:
        conn = self.conn
        if self.seen is not None:
            self.seen.add("caching_sha2_password")
        if conn.password and packet.is_auth_switch_request():
            salt = packet.read_all()
            conn.salt = salt[:-1] if salt.endswith(b"\0") else salt
            packet = _auth._roundtrip(conn, _auth.scramble_caching_sha2(conn.password, conn.salt))
        # 0x01 0x04: "perform full authentication" (0x01 0x03: the fast path succeeded)
        if conn.password and packet.is_extra_auth_data() and packet._data[1:2] == b"\x04":
            if self.public_key is not None:
                conn.server_public_key = self.public_key
            elif not self.fetch_key:
                raise _refused("caching_sha2_password full authentication with its own RSA key")
        return _auth.caching_sha2_password_auth(conn, packet)


class _Sha256:
    """sha256_password: without TLS it encrypts with a key the server sends."""

    def __init__(self, conn: pymysql.connections.Connection, *, fetch_key: bool) -> None:
        self.conn, self.fetch_key = conn, fetch_key

    def authenticate(self, packet: MysqlPacket) -> MysqlPacket:
        if self.conn.password and not self.fetch_key:
            raise _refused("sha256_password with its own RSA key")
        return _auth.sha256_password_auth(self.conn, packet)
