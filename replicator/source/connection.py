"""Open a SQL connection to the source: the one place that turns a SourceConfig into pymysql.

Everything that talks to the server (preflight, schema lookups, the binlog dump) connects
through ``open_connection``, so transport, TLS and authentication behave the same everywhere:

* TCP ``host:port`` or a unix socket; ``connect_timeout`` bounds connect and handshake.
* TLS only when ``cfg.tls.enabled``, then always required (never a silent fallback to
  plaintext): an ``ssl.SSLContext`` that verifies the server certificate against ``ca_file``
  (the system CAs when none is given) and the host name, with an optional client certificate.
  With TLS off we pass ``ssl_disabled`` so pymysql does not try an unverified opportunistic
  handshake either: the transport is exactly what the config says.
* Authentication is pymysql's: ``mysql_native_password``; MySQL's ``caching_sha2_password``
  (fast path from the server cache; full authentication sends the password RSA-encrypted with
  the server's public key when not on TLS or a unix socket, which needs the ``cryptography``
  package: https://dev.mysql.com/doc/dev/mysql-server/latest/page_caching_sha2_authentication_exchanges.html);
  MariaDB's ``ed25519`` (client plugin ``client_ed25519``, signs the scramble with a key derived
  from the password, needs ``pynacl``: https://mariadb.com/kb/en/authentication-plugin-ed25519/).
  Tested live: native and ed25519 on MariaDB; caching_sha2 only against MySQL in Docker (the
  RSA step itself is unit-tested with a key pair made in the test).
  Without TLS or a unix socket nothing proves who answers at the address, so, as the stock
  clients do, the password is never sent in clear text (``mysql_clear_password``, PAM
  ``dialog``) and caching_sha2 full authentication uses ``server_public_key_file``, or the key
  the server sends only with ``get_server_public_key`` (``wire.plain_tcp_auth``).
  The password is sent as UTF-8 bytes (pymysql would encode a str as latin-1 and fail on
  anything else); it is read from the ``Secret`` only here.
* autocommit, ``utf8mb4``, no ``LOAD DATA LOCAL`` (a malicious server could otherwise ask for
  any local file), no option files read.

Errors come out as the program's own (``source.errors.translate_error``): refused logins,
privileges and TLS trust as ``ServerRefusedError`` (exit 3), an unreachable server as
``SourceUnavailableError`` (exit 1, retryable). What the server is and how its binlog is set up
is ``source.server_info``; it is re-exported here.
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
from typing import Any

import pymysql

from ..config import SourceConfig, TlsConfig
from ..errors import ConfigError, ReplicatorError, ServerRefusedError
from . import wire
from .errors import ER_ACCESS_DENIED, error_code, translate_error
from .server_info import BinlogFile, BinlogPosition, ServerInfo, server_info

__all__ = [
    "BinlogFile",
    "BinlogPosition",
    "ServerInfo",
    "describe_source",
    "open_connection",
    "server_info",
    "tls_context",
]

PROGRAM_NAME = "replicator"
QUERY_TIMEOUT = 60.0
"""Seconds any read or write of a control connection may take (queries, handshake replies)."""


def describe_source(cfg: SourceConfig) -> str:
    """Where the source is, for messages: ``host:port`` or the socket path (never secrets)."""
    return cfg.unix_socket if cfg.unix_socket else f"{cfg.host}:{cfg.port}"


def tls_context(tls: TlsConfig) -> ssl.SSLContext:
    """The client TLS context for ``tls``: CA verification and host name check as configured.

    Made once and shared by every connection while the files it was made from stay as they
    are: loading a CA store costs tens of milliseconds (the system's bundle ~50 ms), and a
    daemon opens several connections at start and one per progress reading. A file changed
    on disk (a renewed certificate, an updated system bundle) makes a new context for the
    next connection; a context that cannot be made is not kept, so its error comes again."""
    stamps = tuple(_stamp(path) for path in _tls_files(tls))
    with _TLS_LOCK:
        kept = _TLS_CONTEXTS.get(tls)
    if kept is not None and kept[0] == stamps:
        return kept[1]
    ctx = _new_tls_context(tls)
    with _TLS_LOCK:
        if len(_TLS_CONTEXTS) >= _TLS_KEPT:  # (a process has one or two: the source, MQTT)
            _TLS_CONTEXTS.clear()
        _TLS_CONTEXTS[tls] = (stamps, ctx)
    return ctx


_TLS_LOCK = threading.Lock()
_TLS_KEPT = 8
_TLS_CONTEXTS: dict[TlsConfig, tuple[tuple[object, ...], ssl.SSLContext]] = {}


def _tls_files(tls: TlsConfig) -> tuple[str | None, ...]:
    """The files a context for ``tls`` is made from (the system's CA file and directory when
    it verifies against them)."""
    if tls.ca_file is None and tls.verify_server_cert:
        system = ssl.get_default_verify_paths()  # (honours SSL_CERT_FILE / SSL_CERT_DIR)
        return (system.cafile, system.capath, tls.cert_file, tls.key_file)
    return (tls.ca_file, tls.cert_file, tls.key_file)


def _stamp(path: str | None) -> tuple[int, int, int] | None:
    """What changes when a file is replaced or rewritten (None: no such file)."""
    if path is None:
        return None
    try:
        found = os.stat(path)
    except OSError:
        return None
    return (found.st_ino, found.st_size, found.st_mtime_ns)


def _new_tls_context(tls: TlsConfig) -> ssl.SSLContext:
    try:
        if tls.ca_file is None and not tls.verify_server_cert:
            # nothing to verify against: the system's CA bundle is not loaded for nothing
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        else:
            ctx = ssl.create_default_context(cafile=tls.ca_file)
    except FileNotFoundError:
        raise ConfigError(
            f"tls ca_file {tls.ca_file} does not exist", hint="check the path of the CA file"
        ) from None
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(
            f"tls ca_file {tls.ca_file} is not a PEM CA certificate: {exc}",
            hint="give the PEM file of the CA that signed the server certificate",
        ) from None
    # Self-made CAs often lack the extensions X509_STRICT (Python 3.13 default) insists on.
    ctx.verify_flags &= ~getattr(ssl, "VERIFY_X509_STRICT", 0)
    if tls.verify_server_cert:
        ctx.check_hostname = tls.verify_hostname
        ctx.verify_mode = ssl.CERT_REQUIRED
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if tls.cert_file or tls.key_file:
        if not tls.cert_file:
            raise ConfigError("tls key_file needs cert_file", hint="set tls cert_file too")
        try:
            ctx.load_cert_chain(tls.cert_file, keyfile=tls.key_file)
        except (ssl.SSLError, OSError) as exc:
            raise ConfigError(
                f"cannot load the client certificate {tls.cert_file} "
                f"(key {tls.key_file or 'in the same file'}): {exc}",
                hint="give PEM files of a certificate and its unencrypted private key",
            ) from None
    return ctx


def _anonymous_account(params: dict[str, Any]) -> str | None:
    """The anonymous account (``''@'host'``) the server takes this client for, if any.

    The server matches a login against its accounts most specific host first, and an
    anonymous account matches any user name: on a fresh ``mariadb-install-db`` server
    ``''@'localhost'`` is chosen for ``repl`` connecting from localhost before ``'repl'@'%'``
    is looked at, and the login fails with "Access denied for user 'repl'@'localhost'"
    (https://mariadb.com/kb/en/create-user/#fixing-a-legacy-default-anonymous-account).
    A login as the same user without a password shows it: the server takes it for the
    anonymous account (whose password is empty) only when that account is matched before any
    account of the user, and ``CURRENT_USER()`` then names it (``@localhost``). An anonymous
    account that does not shadow the user (``'repl'@'localhost'`` exists too) refuses it."""
    probe = {**params, "password": b""}
    try:
        conn = pymysql.connections.Connection(**probe)
        conn.connect()
    except (pymysql.err.MySQLError, OSError, RuntimeError):
        return None
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT CURRENT_USER()")
            row = cur.fetchone()
    except pymysql.err.MySQLError:
        return None
    finally:
        conn.close()
    account = str(row[0]) if row else ""
    return account if account.startswith("@") else None


def _shadowed(refused: ReplicatorError, user: str, anonymous: str) -> ServerRefusedError:
    _, _, host = anonymous.rpartition("@")
    account = f"''@'{host}'"
    return ServerRefusedError(
        f"{refused.args[0]}; the server has an anonymous account {account}, which it matches "
        f"for this client before any account {user!r}@'%' (accounts of a more specific host "
        "are tried first, and an anonymous account takes every user name)",
        hint=f"remove the anonymous account: DROP USER {account}; (mariadb-secure-installation "
        f"removes it too), or create the account for that host as well: CREATE USER "
        f"'{user}'@'{host}' IDENTIFIED BY '...'; with the same GRANTs",
    )


def _public_key(path: str | None) -> bytes | None:
    if path is None:
        return None
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise ConfigError(
            f"cannot read source.server_public_key_file {path}: {exc.strerror}",
            hint="the server's key: SHOW STATUS LIKE 'Caching_sha2_password_rsa_public_key'",
        ) from None


def open_connection(
    cfg: SourceConfig,
    *,
    database: str | None = None,
    read_timeout: float = QUERY_TIMEOUT,
) -> pymysql.connections.Connection:
    """A new autocommit connection to the source, authenticated and (if configured) on TLS.

    The connect and the handshake (greeting, authentication, TLS) are bounded by
    ``cfg.connect_timeout``; after that ``read_timeout`` bounds each read and write: a server
    or network that stalls (a black-holed link, a hung server) fails after that long instead
    of blocking its caller forever. The binlog stream sets its own timeout on the socket once the
    dump starts (twice the heartbeat period). Raises ``ServerRefusedError``,
    ``SourceUnavailableError`` or ``ConfigError``; never a pymysql error.
    """
    params: dict[str, Any] = {
        "user": cfg.user,
        "password": cfg.password.reveal().encode("utf-8"),
        "database": database,
        "connect_timeout": cfg.connect_timeout,
        # pymysql applies these to the handshake too: bound it like the connect, then widen
        "read_timeout": cfg.connect_timeout,
        "write_timeout": cfg.connect_timeout,
        "defer_connect": True,
        "charset": "utf8mb4",
        "autocommit": True,
        "local_infile": False,
        "program_name": PROGRAM_NAME,
    }
    if cfg.unix_socket:
        params["unix_socket"] = cfg.unix_socket
    else:
        params["host"] = cfg.host
        params["port"] = cfg.port
    seen: set[str] = set()  # the plugins plain_tcp_auth handled
    if cfg.tls.enabled:
        params["ssl"] = tls_context(cfg.tls)
    else:
        params["ssl_disabled"] = True
        if not cfg.unix_socket:  # nothing proves who answers: keep the password from it
            params["auth_plugin_map"] = wire.plain_tcp_auth(
                _public_key(cfg.server_public_key_file), cfg.get_server_public_key, seen
            )
    try:
        conn = pymysql.connections.Connection(**params)
        conn.connect()
    except (pymysql.err.MySQLError, OSError, RuntimeError) as exc:
        refused = translate_error(exc, where=describe_source(cfg), account=cfg.user)
        if error_code(exc) == ER_ACCESS_DENIED and cfg.user:
            shadow = _anonymous_account(params)
            if shadow is not None:
                raise _shadowed(refused, cfg.user, shadow) from None
        raise refused from None
    if "caching_sha2_password" in seen and cfg.server_public_key_file is None:
        _warn_full_authentication(cfg)
    wire.set_timeouts(conn, read_timeout)
    return conn


_warned: set[tuple[str, int, str]] = set()


def _warn_full_authentication(cfg: SourceConfig) -> None:
    """A caching_sha2_password login over plain TCP the server answered from its cache: the
    first one after a restart of the server (or FLUSH PRIVILEGES) needs full authentication,
    which is refused without TLS or a key (``wire.plain_tcp_auth``). Said once a process."""
    key = (cfg.host, cfg.port, cfg.user)
    if cfg.get_server_public_key or key in _warned:
        return
    _warned.add(key)
    logging.getLogger("replicator.source").warning(
        "the source's caching_sha2_password login works from the server's cache only: the "
        "first login after a server restart or FLUSH PRIVILEGES needs full authentication, "
        "refused without TLS (%s); turn on source.tls, or give source.server_public_key_file",
        describe_source(cfg),
    )
