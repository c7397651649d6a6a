"""Self-test of the fault proxy (tests/harness/proxy.py) that the fault tests stand on.

Through the proxy to the session MariaDB with pymysql: queries pass, a reset fails the next
query while new connections work, a cut lands mid-result after exactly n bytes, a flipped byte
corrupts a result, a blackhole times a query out, refusal fails connect. Byte-exact behaviour
(cut position, flip position, blackhole loses nothing) is checked against a raw socket source
sending a known payload. Every test checks that no thread or socket outlives the proxy.
"""

from __future__ import annotations

import contextlib
import gc
import os
import random
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any

import pymysql
import pytest

from tests.harness import free_tcp_port
from tests.harness.mariadb import MariaDBServer
from tests.harness.proxy import FaultProxy

pytestmark = pytest.mark.live

HOST = "127.0.0.1"
ER_CONN_HOST_ERROR = 2003  # pymysql: "Can't connect to MySQL server"
PAYLOAD = random.Random(20240611).randbytes(1 << 20)


# ---------------------------------------------------------------------- helpers


def _socket_fds() -> set[str]:
    """The sockets this process holds now, as 'socket:[inode]' links from /proc/self/fd."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the fd listing the directory itself is gone
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith("socket:"):
                found.add(target)
    return found


def _assert_nothing_left(threads_before: set[threading.Thread], fds_before: set[str]) -> None:
    gc.collect()
    new_threads = [t.name for t in threading.enumerate() if t not in threads_before]
    assert new_threads == []
    assert _socket_fds() - fds_before == set()


@pytest.fixture
def no_leaks() -> Iterator[None]:
    """Fail the test if it leaves a thread or a socket behind."""
    threads_before = set(threading.enumerate())
    fds_before = _socket_fds()
    yield
    _assert_nothing_left(threads_before, fds_before)


@pytest.fixture
def proxy(mariadb: MariaDBServer, no_leaks: None) -> Iterator[FaultProxy]:
    with FaultProxy(mariadb.host, mariadb.port) as p:
        yield p
    assert not p.is_running


def _connect(server: MariaDBServer, proxy: FaultProxy, **kwargs: Any) -> pymysql.Connection:
    return server.connect(host=proxy.host, port=proxy.port, connect_timeout=3, **kwargs)


@contextlib.contextmanager
def _connection(
    server: MariaDBServer, proxy: FaultProxy, **kwargs: Any
) -> Iterator[pymysql.Connection]:
    """A connection through the proxy, closed at the end unless pymysql already dropped it."""
    conn = _connect(server, proxy, **kwargs)
    try:
        yield conn
    finally:
        if conn.open:
            conn.close()


def _scalar(conn: pymysql.Connection, sql: str) -> Any:
    with conn.cursor() as cur:
        cur.execute(sql)
        row = cur.fetchone()
    assert row is not None
    return row[0]


class _Source:
    """A one-connection TCP server that sends ``payload`` and then waits for the peer to leave.

    With ``pause_at``, it sends that many bytes, waits for ``resume`` to be set, sends the rest
    (``pause_at=0``: nothing until the client is surely connected).
    """

    def __init__(self, payload: bytes, pause_at: int | None = None) -> None:
        self._payload = payload
        self._pause_at = len(payload) if pause_at is None else pause_at
        self.resume = threading.Event()
        self._listener = socket.create_server((HOST, 0))
        self._listener.settimeout(10)
        self.port: int = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, name="test-source", daemon=True)

    def _serve(self) -> None:
        with contextlib.suppress(OSError):  # a reset from the proxy is the point of some tests
            conn, _ = self._listener.accept()
            with conn:
                conn.settimeout(10)
                conn.sendall(self._payload[: self._pause_at])
                if self._pause_at < len(self._payload):
                    self.resume.wait(10)
                    conn.sendall(self._payload[self._pause_at :])
                while conn.recv(65536):
                    pass

    def __enter__(self) -> _Source:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._thread.join(15)
        self._listener.close()
        assert not self._thread.is_alive()


def _read_until_closed(sock: socket.socket) -> tuple[bytes, str]:
    """Everything ``sock`` receives, and whether it ended by 'eof' or 'reset'."""
    chunks: list[bytes] = []
    try:
        while data := sock.recv(65536):
            chunks.append(data)
    except ConnectionResetError:
        return b"".join(chunks), "reset"
    return b"".join(chunks), "eof"


def _connect_and_read(proxy: FaultProxy) -> tuple[bytes, str]:
    """Like ``_read_until_closed``; a reset that beats connect() back to the client counts."""
    try:
        client = socket.create_connection((proxy.host, proxy.port), timeout=10)
    except ConnectionResetError:
        return b"", "reset"
    with client:
        return _read_until_closed(client)


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    chunks: list[bytes] = []
    got = 0
    while got < n:
        data = sock.recv(min(65536, n - got))
        assert data, f"connection closed after {got} of {n} bytes"
        chunks.append(data)
        got += len(data)
    return b"".join(chunks)


# ---------------------------------------------------------------------- through to MariaDB


def test_queries_pass_through(mariadb: MariaDBServer, proxy: FaultProxy) -> None:
    with _connection(mariadb, proxy) as conn:
        assert _scalar(conn, "SELECT 1 + 1") == 2
        assert _scalar(conn, "SELECT REPEAT('x', 100000)") == "x" * 100_000
        assert _scalar(conn, "SELECT @@port") == mariadb.port
        assert proxy.stats().connections_active == 1

    stats = proxy.stats()
    assert stats.connections_accepted == 1
    assert stats.bytes_server_to_client > 100_000
    assert stats.bytes_client_to_server > len("SELECT REPEAT('x', 100000)")
    assert (stats.cuts, stats.flips, stats.upstream_failures) == (0, 0, 0)


def test_cut_all_fails_the_next_query_and_new_connections_work(
    mariadb: MariaDBServer, proxy: FaultProxy
) -> None:
    with _connection(mariadb, proxy) as first, _connection(mariadb, proxy) as second:
        assert _scalar(first, "SELECT 1") == 1
        assert proxy.cut_all() == 2
        with pytest.raises(pymysql.err.OperationalError):
            _scalar(first, "SELECT 1")
        with pytest.raises(pymysql.err.OperationalError):
            _scalar(second, "SELECT 1")
        assert proxy.stats().connections_active == 0

        with _connection(mariadb, proxy) as fresh:
            assert _scalar(fresh, "SELECT 42") == 42

    stats = proxy.stats()
    assert stats.cuts == 2
    assert stats.connections_accepted == 3


def test_cut_after_cuts_a_large_result_after_exactly_n_bytes(
    mariadb: MariaDBServer, proxy: FaultProxy
) -> None:
    n = random.randrange(1_000, 4_000_000)
    with _connection(mariadb, proxy) as conn:
        assert _scalar(conn, "SELECT 1") == 1  # handshake and a reply before the cut is armed
        before = proxy.stats()
        proxy.cut_after(n)
        with pytest.raises(pymysql.err.OperationalError):
            _scalar(conn, "SELECT REPEAT('x', 5000000)")

    after = proxy.stats()
    assert after.cuts - before.cuts == 1, f"n={n}"
    assert after.bytes_server_to_client - before.bytes_server_to_client == n
    assert after.connections_active == 0
    with _connection(mariadb, proxy) as fresh:
        assert len(_scalar(fresh, "SELECT REPEAT('x', 5000000)")) == 5_000_000


def test_flip_byte_corrupts_a_result_value(mariadb: MariaDBServer, proxy: FaultProxy) -> None:
    expected = "x" * 100_000
    with _connection(mariadb, proxy) as conn:
        assert _scalar(conn, "SELECT 1") == 1
        proxy.flip_byte(50_000, xor=0x01)  # deep inside the row: 'x' ^ 1 == 'y'
        value = _scalar(conn, "SELECT REPEAT('x', 100000)")
        assert _scalar(conn, "SELECT REPEAT('x', 100000)") == expected  # one-shot

    assert value != expected
    assert len(value) == len(expected)
    assert value.count("y") == 1
    assert proxy.stats().flips == 1


def test_flip_byte_in_a_packet_header_makes_pymysql_raise(
    mariadb: MariaDBServer, proxy: FaultProxy
) -> None:
    with _connection(mariadb, proxy) as conn:
        assert _scalar(conn, "SELECT 1") == 1
        proxy.flip_byte(3)  # the sequence id of the first reply packet: 1 -> 0xFE
        with pytest.raises(pymysql.err.InternalError, match="sequence number"):
            _scalar(conn, "SELECT 1")
    assert proxy.stats().flips == 1


def test_blackhole_times_out_a_query_and_lifts(mariadb: MariaDBServer, proxy: FaultProxy) -> None:
    with _connection(mariadb, proxy, read_timeout=1) as conn:
        assert _scalar(conn, "SELECT 1") == 1
        proxy.set_blackhole(True)
        started = time.monotonic()
        with pytest.raises(pymysql.err.OperationalError, match="timed out"):
            _scalar(conn, "SELECT 2")
        elapsed = time.monotonic() - started
        assert proxy.stats().connections_active == 1  # held open, not cut

    assert 0.9 <= elapsed < 5
    proxy.set_blackhole(False)
    with _connection(mariadb, proxy) as fresh:
        assert _scalar(fresh, "SELECT 3") == 3
    assert proxy.stats().cuts == 0


def test_refuse_fails_connect_but_keeps_live_connections(
    mariadb: MariaDBServer, proxy: FaultProxy
) -> None:
    port = proxy.port
    with _connection(mariadb, proxy) as kept:
        proxy.refuse(True)
        with pytest.raises(pymysql.err.OperationalError) as failed:
            _connect(mariadb, proxy)
        assert failed.value.args[0] == ER_CONN_HOST_ERROR
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((proxy.host, proxy.port), timeout=2)
        assert _scalar(kept, "SELECT 1") == 1

        proxy.refuse(False)
        assert proxy.port == port
        with _connection(mariadb, proxy) as fresh:
            assert _scalar(fresh, "SELECT 2") == 2

    assert proxy.stats().connections_accepted == 2


def test_concurrent_clients_and_control_calls(mariadb: MariaDBServer, proxy: FaultProxy) -> None:
    def client(i: int) -> list[int]:
        with _connection(mariadb, proxy) as conn:
            return [_scalar(conn, f"SELECT {i * 100 + j}") for j in range(25)]

    with ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(client, i) for i in range(4)]
        while not all(f.done() for f in futures):
            proxy.set_blackhole(False)
            proxy.refuse(False)
            proxy.stats()
        results = [f.result() for f in futures]

    assert results == [[i * 100 + j for j in range(25)] for i in range(4)]
    assert proxy.stats().connections_accepted == 4


def test_stop_closes_every_socket_and_the_thread(mariadb: MariaDBServer) -> None:
    threads_before = set(threading.enumerate())
    fds_before = _socket_fds()
    proxy = FaultProxy(mariadb.host, mariadb.port).start()
    port = proxy.port
    conns = [_connect(mariadb, proxy) for _ in range(3)]
    assert [_scalar(c, "SELECT 1") for c in conns] == [1, 1, 1]
    assert any(t.name == f"FaultProxy-{port}" for t in threading.enumerate())

    proxy.stop()
    assert not proxy.is_running
    for conn in conns:
        with pytest.raises(pymysql.err.OperationalError):
            _scalar(conn, "SELECT 1")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((HOST, port), timeout=2)
    with pytest.raises(RuntimeError, match="not running"):
        proxy.cut_all()
    proxy.stop()  # idempotent
    assert proxy.stats().connections_active == 0
    _assert_nothing_left(threads_before, fds_before)


# ---------------------------------------------------------------------- byte-exact, raw sockets


@pytest.mark.parametrize("n", [1, 65_535, 65_536, 65_537, None])
def test_cut_after_delivers_exactly_n_bytes_then_resets(n: int | None, no_leaks: None) -> None:
    n = random.randrange(2, len(PAYLOAD) - 1) if n is None else n
    with _Source(PAYLOAD, pause_at=0) as source, FaultProxy(HOST, source.port) as proxy:
        proxy.cut_after(n)
        with socket.create_connection((proxy.host, proxy.port), timeout=10) as client:
            source.resume.set()  # else a tiny cut can reset the client inside connect()
            received, how = _read_until_closed(client)
        stats = proxy.stats()

    assert (len(received), how) == (n, "reset")
    assert received == PAYLOAD[:n]
    assert (stats.cuts, stats.bytes_server_to_client) == (1, n)


def test_flip_byte_changes_exactly_the_chosen_bytes(no_leaks: None) -> None:
    flips = {0: 0xFF, 1_000: 0x01, 65_535: 0x80, 65_536: 0x5A, len(PAYLOAD) - 1: 0x0F}
    expected = bytearray(PAYLOAD)
    for at, xor in flips.items():
        expected[at] ^= xor
    with _Source(PAYLOAD) as source, FaultProxy(HOST, source.port) as proxy:
        for at, xor in flips.items():
            proxy.flip_byte(at, xor)
        proxy.flip_byte(len(PAYLOAD) + 10)  # beyond the stream: never fires
        with socket.create_connection((proxy.host, proxy.port), timeout=10) as client:
            received = _read_exactly(client, len(PAYLOAD))
        assert proxy.stats().flips == len(flips)

    assert received != PAYLOAD
    assert received == bytes(expected)


def test_flip_offsets_count_from_the_call(no_leaks: None) -> None:
    with _Source(PAYLOAD, pause_at=10_000) as source, FaultProxy(HOST, source.port) as proxy:
        with socket.create_connection((proxy.host, proxy.port), timeout=10) as client:
            head = _read_exactly(client, 10_000)
            # The source has sent nothing more, so "now" is stream offset 10 000 exactly.
            proxy.flip_byte(5)
            source.resume.set()
            rest = _read_exactly(client, len(PAYLOAD) - 10_000)
        stats = proxy.stats()

    received = head + rest
    diffs = [i for i in range(len(PAYLOAD)) if received[i] != PAYLOAD[i]]
    assert diffs == [10_005]
    assert stats.flips == 1


def test_blackhole_stalls_without_losing_data(no_leaks: None) -> None:
    payload = PAYLOAD[: 256 * 1024]
    with _Source(payload) as source, FaultProxy(HOST, source.port) as proxy:
        proxy.set_blackhole(True)
        with socket.create_connection((proxy.host, proxy.port), timeout=0.3) as client:
            with pytest.raises(TimeoutError):
                client.recv(1)
            assert proxy.stats().bytes_server_to_client == 0
            assert proxy.stats().connections_accepted == 1

            proxy.set_blackhole(False)
            client.settimeout(10)
            received = _read_exactly(client, len(payload))

    assert received == payload


def test_unreachable_target_resets_the_client(no_leaks: None) -> None:
    with FaultProxy(HOST, free_tcp_port()) as proxy:
        received, how = _connect_and_read(proxy)
        stats = proxy.stats()

    assert (received, how) == (b"", "reset")
    assert (stats.connections_accepted, stats.upstream_failures) == (1, 1)
    assert stats.connections_active == 0


def test_bad_arguments_and_calls_before_start_are_rejected() -> None:
    proxy = FaultProxy(HOST, 1)
    with pytest.raises(ValueError):
        proxy.cut_after(-1)
    with pytest.raises(ValueError):
        proxy.flip_byte(-1)
    with pytest.raises(ValueError):
        proxy.flip_byte(0, xor=0)
    with pytest.raises(ValueError):
        proxy.flip_byte(0, xor=0x100)
    with pytest.raises(RuntimeError, match="not running"):
        proxy.cut_all()
    with pytest.raises(RuntimeError, match="not been started"):
        _ = proxy.port
