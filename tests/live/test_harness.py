"""The live-test harness itself: real servers start with the settings the replicator needs.

Every later live test builds on these fixtures, so this checks what they promise: a MariaDB
with ROW/CRC32/GTID binlogs written to a datadir we can read, a narrow replication account,
restarts that keep data, a Mosquitto broker that can be taken down and brought back, and clear
skips when Docker is missing.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from pathlib import Path

import aiomqtt
import pymysql
import pytest

from tests.harness import HarnessError
from tests.harness.certificates import ca_store_loads
from tests.harness.containers import DockerServer
from tests.harness.mariadb import MariaDBServer
from tests.harness.mosquitto import MosquittoBroker

pytestmark = pytest.mark.live

BINLOG_MAGIC = b"\xfebin"
MARIADB_GTID = re.compile(r"^\d+-\d+-\d+(,\d+-\d+-\d+)*$")


def _reset_database(server: MariaDBServer, name: str) -> None:
    server.execute(f"DROP DATABASE IF EXISTS {name}")
    server.execute(f"CREATE DATABASE {name}")


def test_writes_advance_the_binlog_on_disk(mariadb: MariaDBServer) -> None:
    _reset_database(mariadb, "harness_binlog")
    before = mariadb.binlog_status()
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))", database="harness_binlog")
    inserted = mariadb.execute(
        "INSERT INTO t VALUES (%s, %s), (%s, %s)", (1, "a", 2, "b"), database="harness_binlog"
    )
    after = mariadb.binlog_status()

    assert inserted == 2
    assert mariadb.query("SELECT id, v FROM harness_binlog.t ORDER BY id") == [(1, "a"), (2, "b")]
    assert (after.file, after.position) > (before.file, before.position)
    path = mariadb.binlog_path(after.file)
    assert path.parent == mariadb.datadir
    assert path.is_file()
    with path.open("rb") as f:
        assert f.read(4) == BINLOG_MAGIC
    assert path.stat().st_size >= after.position
    assert MARIADB_GTID.match(after.gtid_binlog_pos), after.gtid_binlog_pos
    assert after.gtid_binlog_pos != before.gtid_binlog_pos
    assert after.gtid_current_pos == after.gtid_binlog_pos


def test_server_runs_with_the_required_binlog_settings(mariadb: MariaDBServer) -> None:
    rows = mariadb.query(
        "SELECT @@binlog_format, @@binlog_checksum, @@log_bin, @@binlog_row_image, "
        "@@server_id, @@gtid_domain_id, @@max_allowed_packet, @@binlog_row_metadata, "
        "@@port, @@socket"
    )

    assert rows == [
        ("ROW", "CRC32", 1, "FULL", 1, 0, 1 << 30, "MINIMAL", mariadb.port, str(mariadb.socket))
    ]
    assert "MariaDB" in mariadb.version


def test_full_metadata_server_logs_full_row_metadata(
    mariadb_full_metadata: MariaDBServer, mariadb: MariaDBServer
) -> None:
    assert mariadb_full_metadata.query("SELECT @@binlog_row_metadata") == [("FULL",)]
    assert mariadb_full_metadata.port != mariadb.port
    assert mariadb_full_metadata.datadir != mariadb.datadir


def test_a_connection_to_the_server_loads_no_certificates(
    mariadb: MariaDBServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The throwaway server offers no TLS: a connection asks for none. (Left to pymysql's
    default it tries TLS, and builds a context from the system's CA bundle each time: some
    50 ms a connection, and the harness opens one per statement.)"""
    loads = ca_store_loads(monkeypatch)
    rows = mariadb.query("SELECT 1")
    conn = mariadb.connect()
    with conn, conn.cursor() as cur:
        cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        cipher = cur.fetchone()

    assert rows == [(1,)]
    assert cipher == ("Ssl_cipher", "")
    assert loads == []


def test_replication_account_has_replication_privileges_only(mariadb: MariaDBServer) -> None:
    conn = mariadb.connect(user=mariadb.user, password=mariadb.password)
    with conn, conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        status = cur.fetchone()
        cur.execute("SHOW BINARY LOGS")
        logs = cur.fetchall()
        cur.execute("SHOW GRANTS")
        grants = " ".join(row[0] for row in cur.fetchall())
        with pytest.raises(pymysql.err.OperationalError) as denied:
            cur.execute("CREATE DATABASE harness_should_be_denied")

    assert status is not None
    assert status[0] == mariadb.binlog_status().file
    assert len(logs) >= 1
    assert "REPLICATION SLAVE" in grants
    assert "BINLOG MONITOR" in grants
    assert "SELECT" in grants
    assert denied.value.args[0] == 1044  # ER_DBACCESS_DENIED_ERROR


def test_flush_binlogs_starts_the_next_file(mariadb: MariaDBServer) -> None:
    before = mariadb.binlog_status()
    mariadb.flush_binlogs()
    after = mariadb.binlog_status()

    assert after.file > before.file
    assert mariadb.binlog_files()[-2:] == [before.file, after.file]
    assert mariadb.binlog_path(before.file).is_file()
    assert mariadb.binlog_path(after.file).read_bytes()[:4] == BINLOG_MAGIC


def test_binlog_path_rejects_paths(mariadb: MariaDBServer) -> None:
    with pytest.raises(HarnessError):
        mariadb.binlog_path("../etc/passwd")


def test_restart_keeps_data_port_and_old_binlogs() -> None:
    with MariaDBServer() as server:
        _reset_database(server, "harness_restart")
        server.execute("CREATE TABLE t (id INT PRIMARY KEY)", database="harness_restart")
        server.execute("INSERT INTO t VALUES (1)", database="harness_restart")
        port, datadir, pid = server.port, server.datadir, server.pid
        first = server.binlog_status()

        server.restart()
        server.execute("INSERT INTO harness_restart.t VALUES (2)")
        clean = server.binlog_status()
        clean_pid = server.pid

        server.restart(hard=True)  # SIGKILL: committed rows survive crash recovery
        crashed = server.binlog_status()
        rows = server.query("SELECT id FROM harness_restart.t ORDER BY id")
        files = server.binlog_files()

        assert rows == [(1,), (2,)]
        assert (server.port, server.datadir) == (port, datadir)
        assert len({pid, clean_pid, server.pid}) == 3
        assert first.file < clean.file < crashed.file
        assert files[:1] == [first.file]
        assert files[-1] == crashed.file
        assert server.binlog_path(first.file).is_file()
        assert crashed.gtid_binlog_pos == clean.gtid_binlog_pos


def test_stop_kills_the_server_and_removes_its_files() -> None:
    server = MariaDBServer().start()
    base_dir, port = server.base_dir, server.port
    server.stop()
    server.stop()  # idempotent

    assert not base_dir.exists()
    assert not server.is_running
    with pytest.raises(pymysql.err.OperationalError):
        pymysql.connect(host="127.0.0.1", port=port, user="root", connect_timeout=2)
    with pytest.raises(HarnessError):
        _ = server.datadir


def test_startup_failure_reports_the_error_log_and_cleans_up() -> None:
    server = MariaDBServer(["--no-such-option-for-harness=1"], startup_timeout=20)
    with pytest.raises(HarnessError, match=r"unknown variable 'no-such-option-for-harness=1'"):
        server.start()

    assert not server.is_running
    with pytest.raises(HarnessError):
        _ = server.base_dir


def _topic() -> str:
    return f"harness/{uuid.uuid4().hex}"


@pytest.mark.mqtt
async def test_mosquitto_publish_subscribe_round_trip(mosquitto: MosquittoBroker) -> None:
    topic = _topic()
    async with aiomqtt.Client(mosquitto.host, port=mosquitto.port, timeout=5) as client:
        await client.subscribe(topic, qos=1)
        await client.publish(topic, b"hello replicator", qos=1)
        async with asyncio.timeout(5):
            message = await anext(aiter(client.messages))

    assert message.topic.value == topic
    assert message.payload == b"hello replicator"
    assert mosquitto.port != 1883


@pytest.mark.mqtt
async def test_mosquitto_outage_refuses_connections_until_restarted() -> None:
    with MosquittoBroker() as broker:
        port = broker.port
        broker.stop()
        with pytest.raises(aiomqtt.MqttError):
            async with aiomqtt.Client(broker.host, port=port, timeout=2):
                pass

        broker.start()
        topic = _topic()
        async with aiomqtt.Client(broker.host, port=broker.port, timeout=5) as client:
            await client.subscribe(topic, qos=1)
            await client.publish(topic, b"back", qos=1)
            async with asyncio.timeout(5):
                message = await anext(aiter(client.messages))

        assert broker.port == port
        assert message.payload == b"back"


def test_corpus_dir_points_at_the_shared_corpus(corpus_dir: Path) -> None:
    assert corpus_dir.name == "binlog-corpus"
    assert corpus_dir.parent.name == "shared"
    assert corpus_dir.is_dir()


@pytest.mark.docker
def test_docker_mysql84_has_gtid_row_binlogs(docker_mysql84: DockerServer) -> None:
    rows = docker_mysql84.query(
        "SELECT @@gtid_mode, @@enforce_gtid_consistency, @@binlog_format, "
        "@@binlog_checksum, @@log_bin"
    )
    conn = docker_mysql84.connect(user=docker_mysql84.user, password=docker_mysql84.password)
    with conn, conn.cursor() as cur:
        cur.execute("SHOW BINARY LOG STATUS")
        status = cur.fetchone()

    assert rows == [("ON", "ON", "ROW", "CRC32", 1)]
    assert docker_mysql84.version.startswith("8.4")
    assert status is not None


@pytest.mark.docker
def test_docker_mariadb_has_row_binlogs(docker_mariadb: DockerServer) -> None:
    rows = docker_mariadb.query("SELECT @@binlog_format, @@binlog_checksum, @@log_bin")
    conn = docker_mariadb.connect(user=docker_mariadb.user, password=docker_mariadb.password)
    with conn, conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        status = cur.fetchone()

    assert rows == [("ROW", "CRC32", 1)]
    assert "MariaDB" in docker_mariadb.version
    assert status is not None
