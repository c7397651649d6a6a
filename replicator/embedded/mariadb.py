"""A MariaDB server that replicator starts itself: the embedded demo source and the live tests.

Each ``MariaDBServer`` gets a datadir from ``mariadb-install-db`` and runs ``mariadbd`` as a
child process on a free 127.0.0.1 port and a private unix socket. It never reads a config file
(``--no-defaults`` everywhere), so it cannot collide with, or be configured by, a system server
on 3306. The binlog settings are the ones the replicator requires (ROW format, FULL row image,
CRC32 checksums, GTID domain 0); callers add their own server options
(``--binlog-row-metadata=FULL``, ...) and those come last, so they win.

Where it lives: by default a fresh temp dir, deleted by ``stop()``. With ``base_dir=`` the
server keeps everything in that directory instead (``data/`` is the datadir, next to the error
log, pid file and socket) and ``stop()`` leaves it in place, so the next start, even from
another process, continues the same datadir and binary log (the demo uses this so a landing
zone and its source stay consistent across runs). A marker file says the datadir was made
here; a directory holding a ``data/`` we did not make is refused, never overwritten. Only one
server at a time may use a directory.

Besides root (empty password, reachable from 127.0.0.1 only) the server has a replication
account, ``repl``/``replpass``, with exactly the privileges the replicator documents.
``restart()`` keeps the datadir and port (binlog continuity across a server restart).
Servers still running at interpreter exit are stopped by the exit hook in ``process``, and a
server started from the main thread is killed by the kernel if its parent dies without it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .process import (
    EmbeddedServerError,
    child_preexec,
    find_executable,
    free_tcp_port,
    kill_process,
    log_tail,
    register_for_exit,
    terminate_process,
    unregister_for_exit,
)

if TYPE_CHECKING:  # pymysql is imported where a connection is opened (see ``demo``)
    import pymysql

__all__ = [
    "BASE_SERVER_ARGS",
    "DATADIR_MARKER",
    "DEBIAN_PACKAGES",
    "REPL_PASSWORD",
    "REPL_USER",
    "BinlogStatus",
    "MariaDBServer",
    "made_here",
    "mariadb_available",
    "mariadbd_version",
    "replication_privileges",
    "running_server_pid",
]

REPL_USER = "repl"
REPL_PASSWORD = "replpass"
ROOT_USER = "root"
ROOT_PASSWORD = ""
LOG_BASENAME = "mysql"

# Server options every server gets, before the caller's extra arguments.
BASE_SERVER_ARGS: tuple[str, ...] = (
    "--binlog-format=ROW",
    "--binlog-checksum=CRC32",
    "--server-id=1",
    "--max-allowed-packet=1G",
    "--gtid-domain-id=0",
    "--binlog-row-image=FULL",
    # No DNS in a sandbox: never resolve client addresses (grants use '%' and IPs).
    "--skip-name-resolve",
    # Commits reach the OS on every commit (survives a killed server), fsync once a second.
    "--innodb-flush-log-at-trx-commit=2",
)

DEBIAN_PACKAGES = "mariadb-server-core mariadb-client-core"
_INSTALL_HINT = f"install the MariaDB server (Debian/Ubuntu: apt-get install {DEBIAN_PACKAGES})"
_REQUIRED_BINARIES = ("mariadbd", "mariadb-install-db", "my_print_defaults")
_BIND_FAILURE = re.compile(r"Bind on TCP/IP port|Address already in use|Do you already have")
_MAX_PORT_ATTEMPTS = 3
# Unix socket paths are limited to 108 bytes (sun_path): keep the temp root short, and put the
# socket of a server in a deep directory into a short temp dir instead.
_MAX_TEMP_BASE_LEN = 60
_MAX_SOCKET_PATH_LEN = 100
# Written into a base_dir once mariadb-install-db has finished there.
DATADIR_MARKER = ".replicator-datadir"


@dataclass(frozen=True, slots=True)
class BinlogStatus:
    """Where the server's binary log ends now (SHOW MASTER STATUS plus the GTID positions)."""

    file: str
    position: int
    gtid_current_pos: str
    gtid_binlog_pos: str


def mariadb_available() -> tuple[bool, str]:
    """(True, "") when the MariaDB server binaries are installed, else (False, reason)."""
    missing = [name for name in _REQUIRED_BINARIES if find_executable(name) is None]
    if missing:
        return False, (
            f"MariaDB server binaries not found: {', '.join(missing)} "
            f"(Debian: apt-get install {DEBIAN_PACKAGES})"
        )
    return True, ""


@functools.cache
def mariadbd_version() -> tuple[int, int]:
    """(major, minor) of the installed ``mariadbd``, from ``mariadbd --version``."""
    mariadbd = find_executable("mariadbd")
    if mariadbd is None:
        raise EmbeddedServerError(mariadb_available()[1], hint=_INSTALL_HINT)
    try:
        out = subprocess.run(
            [mariadbd, "--version"], capture_output=True, text=True, timeout=30, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise EmbeddedServerError(
            f"`{mariadbd} --version` failed: {exc}", hint=_INSTALL_HINT
        ) from exc
    match = re.search(r"Ver (\d+\.\d+)", out)
    if match is None:
        raise EmbeddedServerError(
            f"cannot read the version from `mariadbd --version`: {out!r}", hint=_INSTALL_HINT
        )
    return _parse_version(match.group(1))


def made_here(base_dir: Path) -> bool:
    """True when ``base_dir`` holds a server directory a ``MariaDBServer`` set up."""
    return (base_dir / DATADIR_MARKER).is_file()


def running_server_pid(base_dir: Path) -> int | None:
    """The pid of a live mariadbd on ``base_dir``'s datadir (its pid file); None: none."""
    try:
        pid = int((base_dir / "mariadbd.pid").read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    if b"mariadbd" in cmdline and str(base_dir / "data").encode() in cmdline:
        return pid
    return None


def _clean_env() -> dict[str, str]:
    """The environment minus variables the MariaDB tools read as defaults (MYSQL_TCP_PORT...)."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("MYSQL_", "MARIADB_"))}


def _running_as_root() -> bool:
    return os.geteuid() == 0


def _parse_version(version: str) -> tuple[int, int]:
    match = re.match(r"(\d+)\.(\d+)", version)
    if match is None:
        raise EmbeddedServerError(f"cannot parse server version {version!r}")
    return int(match.group(1)), int(match.group(2))


def replication_privileges(version: str) -> str:
    """The privilege list for the replication account on a MariaDB server of ``version``.

    MariaDB 10.5 split the old REPLICATION CLIENT into BINLOG MONITOR (SHOW BINLOG STATUS,
    SHOW BINARY LOGS) and added REPLICATION MASTER ADMIN (SHOW SLAVE HOSTS); REPLICATION
    SLAVE still guards COM_BINLOG_DUMP. https://mariadb.com/kb/en/grant/#global-privileges
    """
    privileges = ["REPLICATION SLAVE", "REPLICATION CLIENT", "SELECT"]
    if _parse_version(version) >= (10, 5):
        privileges += ["BINLOG MONITOR", "REPLICATION MASTER ADMIN"]
    return ", ".join(privileges)


def _not_started() -> EmbeddedServerError:
    return EmbeddedServerError("the server has not been started", hint="call start() first")


class MariaDBServer:
    """One MariaDB server of our own. ``start()`` it (or use ``with``), ``stop()`` it.

    ``base_dir``: keep the server's files there (created if missing, kept by ``stop()``);
    None (default) means a fresh temp dir that ``stop()`` deletes.
    """

    def __init__(
        self,
        extra_args: Sequence[str] = (),
        *,
        base_dir: Path | None = None,
        startup_timeout: float = 30.0,
        shutdown_timeout: float = 30.0,
    ) -> None:
        self._extra_args = tuple(extra_args)
        self._keep_dir = None if base_dir is None else Path(base_dir).absolute()
        self._startup_timeout = startup_timeout
        self._shutdown_timeout = shutdown_timeout
        self._root: Path | None = None
        self._socket_dir: Path | None = None  # a short temp dir when base_dir is too deep
        self._port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._version: str | None = None
        self._created_datadir = False

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> MariaDBServer:
        """Create a datadir (unless base_dir has one), launch mariadbd and wait until ready."""
        if self.is_running:
            raise EmbeddedServerError(
                f"{self!r} is already running", hint="stop() it before starting it again"
            )
        if self._root is not None:  # stopped by restart(): same datadir and port
            self._launch_and_wait()
            return self
        ok, reason = mariadb_available()
        if not ok:
            raise EmbeddedServerError(reason, hint=_INSTALL_HINT)
        register_for_exit(self, self.stop)
        try:
            self._root = self._make_root()
            self._check_not_in_use()
            self._created_datadir = self._install_datadir()
            for attempt in range(_MAX_PORT_ATTEMPTS):
                self._port = free_tcp_port()
                try:
                    self._launch_and_wait()
                    break
                except EmbeddedServerError:
                    # Someone took the port between our probe and the server's bind: retry.
                    lost_port = _BIND_FAILURE.search(log_tail(self.error_log, 20))
                    if lost_port is None or attempt == _MAX_PORT_ATTEMPTS - 1:
                        raise
                    # a temp server's log holds only this failure; a kept one keeps history
                    if self._keep_dir is None:
                        self.error_log.unlink(missing_ok=True)
            self._create_accounts()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Shut the server down (SIGTERM, then SIGKILL); delete its temp dir. Idempotent.

        A server in a caller's ``base_dir`` keeps its files there for the next start.
        """
        try:
            self._stop_process(hard=False)
        finally:
            if self._root is not None and self._keep_dir is None:
                shutil.rmtree(self._root, ignore_errors=True)
            if self._socket_dir is not None:
                shutil.rmtree(self._socket_dir, ignore_errors=True)
            self._root = None
            self._socket_dir = None
            self._port = None
            unregister_for_exit(self)

    def restart(self, *, hard: bool = False) -> None:
        """Stop the server and start it again on the same datadir and port.

        ``hard=True`` SIGKILLs it first (a crash: InnoDB recovers, the binlog is truncated to
        its last complete transaction); otherwise it shuts down cleanly. The server starts a new
        binlog file either way.
        """
        if self._root is None:
            raise EmbeddedServerError("restart() needs a started server", hint="start() it")
        self._stop_process(hard=hard)
        self._launch_and_wait()

    @property
    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def created_datadir(self) -> bool:
        """True when the last ``start()`` made a new datadir (always, without ``base_dir``)."""
        return self._created_datadir

    @property
    def has_datadir(self) -> bool:
        """True when ``base_dir`` already holds a datadir an earlier start made (so ``start()``
        continues it); always False for a temp-dir server."""
        return self._keep_dir is not None and (self._keep_dir / DATADIR_MARKER).is_file()

    def __enter__(self) -> MariaDBServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = f"127.0.0.1:{self._port}" if self._port is not None else "not started"
        return f"MariaDBServer({where}, extra_args={list(self._extra_args)!r})"

    # ------------------------------------------------------------------ where things are

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def port(self) -> int:
        if self._port is None:
            raise _not_started()
        return self._port

    @property
    def base_dir(self) -> Path:
        """The directory holding everything this server writes."""
        if self._root is None:
            raise _not_started()
        return self._root

    @property
    def datadir(self) -> Path:
        return self.base_dir / "data"

    @property
    def socket(self) -> Path:
        if self._socket_dir is not None:
            return self._socket_dir / "mysql.sock"
        return self.base_dir / "mysql.sock"

    @property
    def error_log(self) -> Path:
        return self.base_dir / "error.log"

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise EmbeddedServerError("the server is not running", hint="start() it")
        return self._proc.pid

    @property
    def user(self) -> str:
        """The replication account (REPLICATION SLAVE, BINLOG MONITOR, ...)."""
        return REPL_USER

    @property
    def password(self) -> str:
        return REPL_PASSWORD

    @property
    def root_user(self) -> str:
        return ROOT_USER

    @property
    def root_password(self) -> str:
        return ROOT_PASSWORD

    @property
    def version(self) -> str:
        """SELECT VERSION(), e.g. '10.11.6-MariaDB-0+deb12u1-log'."""
        if self._version is None:
            raise _not_started()
        return self._version

    @property
    def extra_args(self) -> tuple[str, ...]:
        return self._extra_args

    # ------------------------------------------------------------------ SQL helpers

    def connect(self, database: str | None = None, **kwargs: Any) -> pymysql.Connection:
        """A new autocommit pymysql connection over TCP, as root unless ``user=`` says else."""
        import pymysql  # noqa: PLC0415 - see the imports

        params: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "user": ROOT_USER,
            "password": ROOT_PASSWORD,
            "database": database,
            "autocommit": True,
            "charset": "utf8mb4",
            "connect_timeout": 10,
            # the server offers no TLS; asked for nothing, pymysql would still try (its
            # default), loading the system's CA bundle for each connection (~50 ms)
            "ssl_disabled": not any(key.startswith("ssl") for key in kwargs),
        }
        params.update(kwargs)
        return pymysql.connect(**params)

    def execute(self, sql: str, params: Any = None, *, database: str | None = None) -> int:
        """Run one statement as root on a fresh connection; return the affected row count."""
        with contextlib.closing(self.connect(database)) as conn, conn.cursor() as cur:
            affected: int = cur.execute(sql, params)
            return affected

    def query(
        self, sql: str, params: Any = None, *, database: str | None = None
    ) -> list[tuple[Any, ...]]:
        """Run one statement as root on a fresh connection; return all rows."""
        with contextlib.closing(self.connect(database)) as conn, conn.cursor() as cur:
            cur.execute(sql, params)
            return [tuple(row) for row in cur.fetchall()]

    def binlog_status(self) -> BinlogStatus:
        """The current end of the binary log and the server's GTID positions."""
        with contextlib.closing(self.connect()) as conn, conn.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            row = cur.fetchone()
            if row is None:
                raise EmbeddedServerError(
                    "SHOW MASTER STATUS returned nothing: binary log is off",
                    hint="do not pass --skip-log-bin to the server",
                )
            cur.execute("SELECT @@GLOBAL.gtid_current_pos, @@GLOBAL.gtid_binlog_pos")
            gtid_row = cur.fetchone()
        assert gtid_row is not None
        return BinlogStatus(
            file=str(row[0]),
            position=int(row[1]),
            gtid_current_pos=str(gtid_row[0]),
            gtid_binlog_pos=str(gtid_row[1]),
        )

    def binlog_files(self) -> list[str]:
        """File names from SHOW BINARY LOGS, oldest first."""
        return [str(row[0]) for row in self.query("SHOW BINARY LOGS")]

    def binlog_path(self, file_name: str) -> Path:
        """The on-disk path of binlog ``file_name`` (as SHOW MASTER STATUS names it)."""
        if "/" in file_name or file_name in ("", ".", ".."):
            raise EmbeddedServerError(
                f"not a binlog file name: {file_name!r}",
                hint="pass a name from SHOW BINARY LOGS, e.g. mysql-bin.000001",
            )
        return self.datadir / file_name

    def flush_binlogs(self) -> None:
        """FLUSH BINARY LOGS: close the current binlog file and start the next one."""
        self.execute("FLUSH BINARY LOGS")

    # ------------------------------------------------------------------ internals

    def _make_root(self) -> Path:
        if self._keep_dir is not None:
            root = self._keep_dir
            try:
                (root / "tmp").mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise EmbeddedServerError(
                    f"cannot create the server directory {root}: {exc.strerror}",
                    hint="choose a writable directory for the server",
                ) from exc
            if len(str(root / "mysql.sock")) > _MAX_SOCKET_PATH_LEN:
                self._socket_dir = Path(tempfile.mkdtemp(prefix="replicator-sock-", dir="/tmp"))
            return root
        base = tempfile.gettempdir()
        if len(base) > _MAX_TEMP_BASE_LEN:
            base = "/tmp"
        root = Path(tempfile.mkdtemp(prefix="replicator-mariadb-", dir=base))
        (root / "tmp").mkdir()
        return root

    def _check_not_in_use(self) -> None:
        """Refuse a kept directory whose pid file names a live mariadbd on this datadir."""
        pid = running_server_pid(self.base_dir)
        if pid is not None:
            raise EmbeddedServerError(
                f"another MariaDB server (pid {pid}) already runs on {self.datadir}",
                hint="stop that process (e.g. the other `replicator run`) or use another "
                "server directory",
            )

    def _install_datadir(self) -> bool:
        """Run mariadb-install-db unless base_dir already holds our datadir; True if it ran."""
        marker = self.base_dir / DATADIR_MARKER
        if marker.is_file():
            return False
        if self.datadir.exists() and any(self.datadir.iterdir()):
            raise EmbeddedServerError(
                f"{self.datadir} exists but was not set up by replicator "
                f"(no {DATADIR_MARKER} next to it)",
                hint=f"remove {self.datadir} (a half-finished setup) or use another directory",
            )
        install_db = find_executable("mariadb-install-db")
        assert install_db is not None
        cmd = [
            install_db,
            "--no-defaults",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            "--skip-name-resolve",
            f"--datadir={self.datadir}",
            f"--tmpdir={self.base_dir / 'tmp'}",
        ]
        if _running_as_root():
            cmd.append("--user=root")
        log = self.base_dir / "install.log"
        with log.open("wb") as out:
            result = subprocess.run(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=_clean_env(),
                timeout=self._startup_timeout * 2,
                check=False,
            )
        if result.returncode != 0:
            # the datadir was absent or empty: what is there now is this failed attempt's
            shutil.rmtree(self.datadir, ignore_errors=True)
            raise EmbeddedServerError(
                f"mariadb-install-db exited with {result.returncode}:\n{log_tail(log)}",
                hint=f"the log above says why; check free disk space and that {self.base_dir} "
                "is writable",
            )
        marker.write_text("made by replicator's embedded MariaDB (mariadb-install-db)\n")
        return True

    def _server_command(self) -> list[str]:
        mariadbd = find_executable("mariadbd")
        assert mariadbd is not None
        # --no-defaults must come first; --log-basename before the options it would otherwise
        # override (it sets the default log-error, log-bin and relay-log names).
        cmd = [mariadbd, "--no-defaults", f"--log-basename={LOG_BASENAME}"]
        if _running_as_root():
            cmd.append("--user=root")
        cmd += [
            f"--datadir={self.datadir}",
            f"--port={self.port}",
            f"--bind-address={self.host}",
            f"--socket={self.socket}",
            f"--pid-file={self.base_dir / 'mariadbd.pid'}",
            f"--tmpdir={self.base_dir / 'tmp'}",
            f"--log-error={self.error_log}",
            f"--log-bin={self.datadir / 'mysql-bin'}",
            *BASE_SERVER_ARGS,
            *self._extra_args,
        ]
        return cmd

    def _launch_and_wait(self) -> None:
        output = self.base_dir / "mariadbd.out"
        with output.open("ab") as out:
            self._proc = subprocess.Popen(
                self._server_command(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=_clean_env(),
                start_new_session=True,  # a ^C in the terminal goes to us, not the server
                preexec_fn=child_preexec(),  # noqa: PLW1509 - sets only the parent-death signal
            )
        self._wait_until_ready()

    def _wait_until_ready(self) -> None:
        import pymysql  # noqa: PLC0415 - see the imports

        assert self._proc is not None
        deadline = time.monotonic() + self._startup_timeout
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise EmbeddedServerError(
                    f"mariadbd exited with {self._proc.returncode} during startup; "
                    f"error log tail:\n{self._logs_tail()}",
                    hint=self._startup_hint(),
                )
            # The private unix socket proves it is our server (a TCP port could have been
            # taken by someone else); mariadbd binds TCP before it creates the socket. Knock
            # first: pymysql leaves its socket open (to the garbage collector) when the
            # connect to a unix socket itself fails, as it does until the server listens.
            refused = _knock(self.socket)
            if refused is not None:
                last_error = refused
                time.sleep(0.05)
                continue
            # (should the server die between the knock and the connect, pymysql's socket is
            # left to the collector once: rare, and closed then)
            try:
                conn = pymysql.connect(
                    unix_socket=str(self.socket),
                    user=ROOT_USER,
                    password=ROOT_PASSWORD,
                    connect_timeout=2,
                    ssl_disabled=True,  # (see ``connect``)
                )
            except pymysql.err.MySQLError as exc:
                last_error = exc
                time.sleep(0.05)
                continue
            with contextlib.closing(conn), conn.cursor() as cur:
                cur.execute("SELECT VERSION()")
                row = cur.fetchone()
            assert row is not None
            self._version = str(row[0])
            return
        self._stop_process(hard=True)
        raise EmbeddedServerError(
            f"mariadbd did not accept connections within {self._startup_timeout:.0f} s "
            f"(last error: {last_error}); error log tail:\n{self._logs_tail()}",
            hint="the machine may be overloaded: retry, or allow a longer startup_timeout",
        )

    def _startup_hint(self) -> str:
        if self._keep_dir is not None:
            return (
                "the error log above says why; if the datadir is damaged, remove "
                f"{self.base_dir} to start over with a new one"
            )
        return "the error log above says why (an unknown server option, a full disk, ...)"

    def _logs_tail(self) -> str:
        return "\n".join((log_tail(self.error_log), log_tail(self.base_dir / "mariadbd.out", 10)))

    def _create_accounts(self) -> None:
        """The replication account; idempotent, so a kept datadir can be started again."""
        privileges = replication_privileges(self.version)
        with contextlib.closing(self.connect()) as conn, conn.cursor() as cur:
            # Keep our own setup out of the binlog: readers see only their events.
            cur.execute("SET SESSION sql_log_bin = 0")
            # Anonymous accounts would shadow 'repl'@'%' for local clients; drop any.
            cur.execute("SELECT User, Host FROM mysql.user WHERE User = ''")
            for user, host in cur.fetchall():
                cur.execute("DROP USER %s@%s", (user, host))
            cur.execute(
                "CREATE USER IF NOT EXISTS %s@'%%' IDENTIFIED BY %s", (REPL_USER, REPL_PASSWORD)
            )
            cur.execute(f"GRANT {privileges} ON *.* TO %s@'%%'", (REPL_USER,))

    def _stop_process(self, *, hard: bool) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if hard:
            kill_process(proc)
        else:
            terminate_process(proc, timeout=self._shutdown_timeout)


def _knock(path: Path) -> OSError | None:
    """None when a server accepts connections on the unix socket ``path``, else why not."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as knock:
        knock.settimeout(2)
        try:
            knock.connect(str(path))
        except OSError as exc:
            return exc
    return None
