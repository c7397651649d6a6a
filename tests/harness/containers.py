"""MySQL 8.4 and MariaDB 11.4 servers in Docker containers, for live tests beyond this machine.

The local harness covers the MariaDB the machine has; MySQL (its GTID sets, binary JSON,
caching_sha2_password) and newer MariaDB releases need their official images, which
testcontainers starts and removes. The servers get the replicator's required binlog settings and
the same replication account as the local harness (``repl``/``replpass``). Everything here is
optional: ``docker_available()`` says why not when there is no reachable engine, and the fixtures
skip with that reason. testcontainers and docker are imported only when a container is wanted,
so a unit-test session pays nothing for this module.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pymysql

from tests.harness import HarnessError, register_for_exit, unregister_for_exit
from tests.harness.mariadb import REPL_PASSWORD, REPL_USER, replication_privileges

__all__ = [
    "MARIADB114_ARGS",
    "MARIADB114_IMAGE",
    "MYSQL84_ARGS",
    "MYSQL84_IMAGE",
    "DockerServer",
    "docker_available",
    "start_mariadb",
    "start_mysql84",
]

MYSQL84_IMAGE = "mysql:8.4"
MARIADB114_IMAGE = "mariadb:11.4"
_ROOT_PASSWORD = "rootpass"
_SERVER_PORT = 3306

MYSQL84_ARGS: tuple[str, ...] = (
    "--gtid-mode=ON",
    "--enforce-gtid-consistency=ON",
    "--binlog-format=ROW",
    "--binlog-checksum=CRC32",
    "--binlog-row-image=FULL",
    "--server-id=1",
    "--log-bin=mysql-bin",
    "--max-allowed-packet=1G",
    "--skip-name-resolve",
)

MARIADB114_ARGS: tuple[str, ...] = (
    "--log-bin=mysql-bin",
    "--binlog-format=ROW",
    "--binlog-checksum=CRC32",
    "--binlog-row-image=FULL",
    "--server-id=1",
    "--gtid-domain-id=0",
    "--max-allowed-packet=1G",
    "--skip-name-resolve",
)

# MySQL 8.x: REPLICATION SLAVE for COM_BINLOG_DUMP(_GTID), REPLICATION CLIENT for
# SHOW BINARY LOG STATUS / SHOW BINARY LOGS, SELECT for schema lookups.
# https://dev.mysql.com/doc/refman/8.4/en/privileges-provided.html
_MYSQL_PRIVILEGES = "REPLICATION SLAVE, REPLICATION CLIENT, SELECT"


@functools.cache
def docker_available() -> tuple[bool, str]:
    """(True, "") when a Docker engine answers a ping, else (False, reason). Cached."""
    try:
        import docker
    except ImportError as exc:
        return False, f"the docker Python package is not installed ({exc})"
    try:
        # mypy takes ./docker (the compose stack's files) for the package
        client = docker.from_env(timeout=5)  # type: ignore[attr-defined]
        try:
            client.ping()
        finally:
            client.close()
    except Exception as exc:  # any failure means "no usable engine"; say which
        first_line = (str(exc).splitlines() or [""])[0][:200]
        return False, (
            f"no reachable Docker engine ({type(exc).__name__}: {first_line}); "
            "set DOCKER_HOST or start dockerd to run the container tests"
        )
    return True, ""


@dataclass(frozen=True, slots=True)
class DockerServer:
    """A running containerized server: where it is, its accounts, and how to stop it."""

    flavor: str  # "mysql" or "mariadb"
    image: str
    version: str
    host: str
    port: int
    user: str  # the replication account
    password: str
    root_user: str
    root_password: str
    container: Any = field(repr=False, compare=False)

    def connect(self, database: str | None = None, **kwargs: Any) -> pymysql.Connection:
        """A new autocommit pymysql connection, as root unless ``user=`` says else."""
        return _connect(
            self.host,
            self.port,
            self.root_user,
            self.root_password,
            database=database,
            overrides=kwargs,
        )

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

    def stop(self) -> None:
        """Stop and remove the container."""
        try:
            self.container.stop()
        finally:
            unregister_for_exit(self.container)


def start_mysql84(
    image: str = MYSQL84_IMAGE,
    extra_args: Sequence[str] = (),
    *,
    startup_timeout: float = 180.0,
) -> DockerServer:
    """Start a MySQL 8.4 container with GTIDs on and the replicator's binlog settings."""
    return _start("mysql", image, (*MYSQL84_ARGS, *extra_args), startup_timeout)


def start_mariadb(
    image: str = MARIADB114_IMAGE,
    extra_args: Sequence[str] = (),
    *,
    startup_timeout: float = 180.0,
) -> DockerServer:
    """Start a MariaDB (default 11.4) container with the replicator's binlog settings."""
    return _start("mariadb", image, (*MARIADB114_ARGS, *extra_args), startup_timeout)


def _connect(
    host: str,
    port: int,
    user: str,
    password: str,
    *,
    database: str | None = None,
    overrides: dict[str, Any] | None = None,
) -> pymysql.Connection:
    params: dict[str, Any] = {
        "host": host,
        "port": port,
        "user": user,
        "password": password,
        "database": database,
        "autocommit": True,
        "charset": "utf8mb4",
        "connect_timeout": 10,
    }
    params.update(overrides or {})
    return pymysql.connect(**params)


def _start(flavor: str, image: str, args: Sequence[str], startup_timeout: float) -> DockerServer:
    ok, reason = docker_available()
    if not ok:
        raise HarnessError(reason)
    from testcontainers.community.mysql import MySqlContainer

    # The mysql and mariadb images both honour MYSQL_ROOT_PASSWORD and log "ready for
    # connections" twice (init server, then the real one), which MySqlContainer waits for.
    container = MySqlContainer(image, root_password=_ROOT_PASSWORD, port=_SERVER_PORT)
    container.with_command(list(args))
    container.start()
    register_for_exit(container, container.stop)
    try:
        host = container.get_container_host_ip()
        port = int(container.get_exposed_port(_SERVER_PORT))
        version = _wait_for_sql(host, port, startup_timeout)
        _create_replication_account(host, port, flavor, version)
    except BaseException:
        with contextlib.suppress(Exception):
            container.stop()
        unregister_for_exit(container)
        raise
    return DockerServer(
        flavor=flavor,
        image=image,
        version=version,
        host=host,
        port=port,
        user=REPL_USER,
        password=REPL_PASSWORD,
        root_user="root",
        root_password=_ROOT_PASSWORD,
        container=container,
    )


def _wait_for_sql(host: str, port: int, timeout: float) -> str:
    """Poll until root can log in (the port opens before the server is ready); return VERSION()."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            conn = _connect(host, port, "root", _ROOT_PASSWORD, overrides={"connect_timeout": 3})
        except pymysql.err.MySQLError as exc:
            last_error = exc
            time.sleep(0.5)
            continue
        with contextlib.closing(conn), conn.cursor() as cur:
            cur.execute("SELECT VERSION()")
            row = cur.fetchone()
        assert row is not None
        return str(row[0])
    raise HarnessError(
        f"containerized server at {host}:{port} did not accept root logins within "
        f"{timeout:.0f} s (last error: {last_error})"
    )


def _create_replication_account(host: str, port: int, flavor: str, version: str) -> None:
    privileges = _MYSQL_PRIVILEGES if flavor == "mysql" else replication_privileges(version)
    conn = _connect(host, port, "root", _ROOT_PASSWORD)
    with contextlib.closing(conn), conn.cursor() as cur:
        cur.execute("SET SESSION sql_log_bin = 0")
        cur.execute("CREATE USER %s@'%%' IDENTIFIED BY %s", (REPL_USER, REPL_PASSWORD))
        cur.execute(f"GRANT {privileges} ON *.* TO %s@'%%'", (REPL_USER,))
