"""Errors of talking to the source server, and which of them a retry can cure.

pymysql raises one exception family for everything (``pymysql.err.MySQLError``, with the
server's or the client library's error number in ``args[0]``); ``translate_error`` sorts those
by whose fault they are into the program's error tree (``replicator.errors``):

* the server is not there right now (refused TCP connection, timeout, too many connections,
  server shutting down, lost connection): ``SourceUnavailableError``, exit 1, retryable;
* the server says no (bad credentials, missing privilege, host not allowed, account locked,
  TLS certificate not trusted): ``ServerRefusedError``, exit 3, a human has to act;
* anything else the server reports: a plain ``ReplicatorError``, exit 1.

Error numbers: server errors from the MySQL "Server Error Message Reference"
(https://dev.mysql.com/doc/mysql-errors/8.4/en/server-error-reference.html) and MariaDB's
(https://mariadb.com/kb/en/mariadb-error-code-reference/); client errors (2xxx) from
``include/errmsg.h`` / pymysql ``constants/CR.py``. No message built here contains a password:
the server's own messages never do (they say "using password: YES"), and ours name only the
account, the host and the setting to change.
"""

from __future__ import annotations

import ssl
from typing import Final

import pymysql

from ..errors import ConfigError, ReplicatorError, ServerRefusedError

__all__ = [
    "SourceUnavailableError",
    "is_retryable",
    "translate_error",
]


class SourceUnavailableError(ReplicatorError):
    """The source cannot be reached right now (down, restarting, network): retry with backoff."""

    exit_code = 1


# Server errors (ER_*).
ER_DBACCESS_DENIED = 1044
ER_ACCESS_DENIED = 1045
ER_ACCESS_DENIED_NO_PASSWORD = 1698  # e.g. a unix_socket/auth_socket account over TCP
ER_BAD_DB = 1049
ER_SERVER_SHUTDOWN = 1053
ER_CON_COUNT = 1040
ER_HOST_IS_BLOCKED = 1129
ER_HOST_NOT_PRIVILEGED = 1130
ER_TABLEACCESS_DENIED = 1142
ER_COLUMNACCESS_DENIED = 1143
ER_TOO_MANY_USER_CONNECTIONS = 1203
ER_USER_LIMIT_REACHED = 1226
ER_SPECIFIC_ACCESS_DENIED = 1227
ER_NOT_SUPPORTED_AUTH_MODE = 1251
ER_QUERY_INTERRUPTED = 1317
ER_MUST_CHANGE_PASSWORD = 1820
ER_MUST_CHANGE_PASSWORD_LOGIN = 1862
ER_CONNECTION_KILLED = 1927  # MariaDB
ER_ACCOUNT_HAS_BEEN_LOCKED_MYSQL = 3118
ER_ACCOUNT_HAS_BEEN_LOCKED_MARIADB = 4151
# Client errors (CR_*), raised by pymysql itself.
CR_CONNECTION_ERROR = 2002
CR_CONN_HOST_ERROR = 2003
CR_UNKNOWN_HOST = 2005
CR_SERVER_GONE_ERROR = 2006
CR_SERVER_LOST = 2013
CR_SSL_CONNECTION_ERROR = 2026
CR_AUTH_PLUGIN_CANNOT_LOAD = 2059
CR_SERVER_LOST_EXTENDED = 2055

_UNAVAILABLE: Final = frozenset(
    {
        ER_CON_COUNT,
        ER_SERVER_SHUTDOWN,
        ER_TOO_MANY_USER_CONNECTIONS,
        ER_USER_LIMIT_REACHED,
        ER_QUERY_INTERRUPTED,
        ER_CONNECTION_KILLED,
        CR_CONNECTION_ERROR,
        CR_CONN_HOST_ERROR,
        CR_UNKNOWN_HOST,
        CR_SERVER_GONE_ERROR,
        CR_SERVER_LOST,
        CR_SERVER_LOST_EXTENDED,
    }
)
_PRIVILEGE_DENIED: Final = frozenset(
    {ER_DBACCESS_DENIED, ER_TABLEACCESS_DENIED, ER_COLUMNACCESS_DENIED, ER_SPECIFIC_ACCESS_DENIED}
)


def error_code(exc: BaseException) -> int | None:
    """The MySQL error number of a pymysql error, else None."""
    if isinstance(exc, pymysql.err.MySQLError) and exc.args and isinstance(exc.args[0], int):
        return int(exc.args[0])
    return None


def _server_message(exc: BaseException) -> str:
    if isinstance(exc, pymysql.err.MySQLError) and len(exc.args) >= 2:
        return str(exc.args[1])
    return str(exc)


def _tls_failure(exc: BaseException) -> ssl.SSLError | None:
    """The ssl error under a pymysql connect error (pymysql wraps OSErrors in 2003)."""
    for candidate in (exc, getattr(exc, "original_exception", None), exc.__cause__):
        if isinstance(candidate, ssl.SSLError):
            return candidate
    return None


def translate_error(exc: BaseException, *, where: str, account: str) -> ReplicatorError:
    """The program's error for ``exc``, raised while talking to ``where`` as ``account``.

    ``where`` is ``host:port`` or the socket path; ``account`` the user name. Neither is secret.
    Errors that are already ours pass through unchanged.
    """
    if isinstance(exc, ReplicatorError):
        return exc
    tls = _tls_failure(exc)
    if isinstance(tls, ssl.SSLCertVerificationError):
        return ServerRefusedError(
            f"TLS verification failed for {where}: {tls.verify_message}",
            hint=(
                "the server certificate must be signed by the CA given as tls ca_file "
                "(--tls-ca) and name the host you connect to; fix the CA file or the server "
                "certificate (verify_hostname: false only if the host name cannot match)"
            ),
        )
    if tls is not None:
        return ServerRefusedError(
            f"TLS handshake with {where} failed: {tls.reason or tls}",
            hint="check that the server has TLS enabled (ssl_cert, ssl_key) and a TLS version "
            "and cipher in common with this client",
        )
    code = error_code(exc)
    message = _server_message(exc)
    if code in (ER_ACCESS_DENIED, ER_ACCESS_DENIED_NO_PASSWORD):
        return ServerRefusedError(
            f"{where} refused the login of {account!r}: {message}",
            hint=(
                f"check the user name and the password source (--password-env/--password-file, "
                f"password_env/password_file in the config), that an account "
                f"{account!r}@<this host> exists and authenticates by password (not "
                f"unix_socket), and whether it requires TLS (REQUIRE SSL/X509: then set "
                f"tls.enabled: true, or --tls-ca): "
                f"SELECT user, host, plugin FROM mysql.user WHERE user = '{account}'; "
                f"SHOW GRANTS FOR '{account}'@'<host>';"
            ),
        )
    if code in (ER_HOST_NOT_PRIVILEGED, ER_HOST_IS_BLOCKED):
        fix = (
            "FLUSH HOSTS; on the server (and raise max_connect_errors)"
            if code == ER_HOST_IS_BLOCKED
            else f"create the account for this client's address, e.g. CREATE USER "
            f"'{account}'@'10.%' ...; or connect from an allowed host"
        )
        return ServerRefusedError(f"{where} refused this client host: {message}", hint=fix)
    if code in (ER_ACCOUNT_HAS_BEEN_LOCKED_MYSQL, ER_ACCOUNT_HAS_BEEN_LOCKED_MARIADB):
        return ServerRefusedError(
            f"{where}: account {account!r} is locked: {message}",
            hint=f"ALTER USER '{account}'@'%' ACCOUNT UNLOCK; (use the account's real host)",
        )
    if code in (ER_MUST_CHANGE_PASSWORD, ER_MUST_CHANGE_PASSWORD_LOGIN):
        return ServerRefusedError(
            f"{where}: the password of {account!r} has expired: {message}",
            hint="set a new password with ALTER USER ... IDENTIFIED BY ...; and update the "
            "password file or variable replicator reads",
        )
    if code in _PRIVILEGE_DENIED:
        return ServerRefusedError(
            f"{where}: {account!r} lacks a privilege: {message}",
            hint="run `replicator check` for the exact GRANT statements",
        )
    if code in (ER_NOT_SUPPORTED_AUTH_MODE, CR_AUTH_PLUGIN_CANNOT_LOAD):
        return ServerRefusedError(
            f"{where}: authentication method not supported: {message}",
            hint="use mysql_native_password, caching_sha2_password or ed25519 for the account",
        )
    if code == CR_SSL_CONNECTION_ERROR:
        return ServerRefusedError(
            f"{where}: {message}",
            hint="enable TLS on the server (ssl_cert, ssl_key in [mysqld]) or turn tls off",
        )
    if code == ER_BAD_DB:
        return ConfigError(f"{where}: {message}", hint="check the database name")
    if code in _UNAVAILABLE or (code is None and isinstance(exc, OSError)):
        return SourceUnavailableError(
            f"cannot reach {where}: {message}",
            # (the daemon says that it retries in its own log line; check and status ask once)
            hint="check that the server is running and reachable (host, port, firewall)",
        )
    if isinstance(exc, RuntimeError) and "package is required" in str(exc):
        # pymysql without cryptography (caching_sha2_password) or pynacl (ed25519).
        return ReplicatorError(f"{where}: {exc}", hint="reinstall replicator with its dependencies")
    return ReplicatorError(
        f"{where}: {message}" if code is None else f"{where}: error {code}: {message}"
    )


def is_retryable(exc: BaseException) -> bool:
    """True when waiting and trying again can succeed with no one changing anything."""
    if isinstance(exc, SourceUnavailableError):
        return True
    if isinstance(exc, ReplicatorError):
        return False
    code = error_code(exc)
    if code is not None:
        return code in _UNAVAILABLE and _tls_failure(exc) is None
    return isinstance(exc, (ConnectionError, TimeoutError))
