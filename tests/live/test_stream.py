"""The live replica stream against a throwaway MariaDB, directly and through a fault proxy.

The oracle is the server's own binlog file read from its datadir: the transactions the stream
delivers must equal, in count, GTIDs, order and rows, the transactions in the file.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from replicator.binlog import events as ev
from replicator.binlog.gtid import MariadbGtid, MariadbGtidPosition
from replicator.binlog.position import StreamPosition, start_position
from replicator.binlog.transaction import Transaction, TransactionAssembler
from replicator.config import Secret, SourceConfig
from replicator.errors import IntegrityError, ServerRefusedError
from replicator.source.binlog_file import read_binlog_file
from replicator.source.seeding import scan_ddl
from replicator.source.stream import ReplicaStream
from tests.harness.mariadb import MariaDBServer
from tests.harness.proxy import FaultProxy

pytestmark = pytest.mark.live


def source_config(host: str, port: int, **overrides: object) -> SourceConfig:
    base: dict[str, object] = {
        "host": host,
        "port": port,
        "user": "repl",
        "password": Secret("replpass"),
        "server_id": 4242,
        "heartbeat_seconds": 1.0,
        "reconnect_initial_delay": 0.05,
        "reconnect_max_delay": 0.5,
        "connect_timeout": 5.0,
    }
    base.update(overrides)
    return SourceConfig(**base)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def server() -> Iterator[MariaDBServer]:
    server = MariaDBServer(["--binlog-row-metadata=FULL"]).start()
    server.execute("CREATE DATABASE shop")
    server.execute("CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(200), n BIGINT UNSIGNED)")
    yield server
    server.stop()


def workload(server: MariaDBServer, transactions: int, *, seed: int, rows: int = 5) -> None:
    rng = random.Random(seed)
    conn = server.connect("shop")
    try:
        with conn.cursor() as cur:
            for _ in range(transactions):
                cur.execute("BEGIN")
                for _ in range(rows):
                    key = rng.randrange(1_000_000)
                    cur.execute(
                        "INSERT INTO t VALUES (%s, %s, %s) ON DUPLICATE KEY UPDATE v = VALUES(v)",
                        (key, "x" * rng.randrange(200), rng.randrange(2**64)),
                    )
                if rng.random() < 0.2:
                    cur.execute("DELETE FROM t WHERE id < %s LIMIT 3", (rng.randrange(1_000_000),))
                cur.execute("COMMIT")
    finally:
        conn.close()


def file_transactions(server: MariaDBServer, after: StreamPosition) -> list[Transaction]:
    """Transactions in the server's binlog files after ``after`` (the oracle)."""
    server.flush_binlogs()
    out: list[Transaction] = []
    for name in server.binlog_files():
        assembler = TransactionAssembler()
        for event in read_binlog_file(server.binlog_path(name)):
            for item in assembler.feed(event):
                if isinstance(item, Transaction) and (
                    (name, item.position) >= (after.file, after.position)
                ):
                    out.append(item)
    return out


def summary(transactions: list[Transaction]) -> list[tuple[object, ...]]:
    return [
        (
            t.gtid,
            t.ending,
            tuple((r.kind, r.rows, r.after) for r in t.rows),
        )
        for t in transactions
    ]


def here(server: MariaDBServer) -> StreamPosition:
    status = server.binlog_status()
    return StreamPosition(
        status.file,
        status.position,
        mariadb_gtid=MariadbGtidPosition.parse(status.gtid_binlog_pos),
    )


async def collect(stream: ReplicaStream, *, timeout: float = 60) -> list[Transaction]:
    out: list[Transaction] = []

    async def run() -> None:
        async with stream:
            async for item in stream:
                if isinstance(item, Transaction):
                    out.append(item)

    await asyncio.wait_for(run(), timeout)
    return out


@pytest.mark.parametrize("mode", ["gtid", "file"])
async def test_stream_equals_binlog_file(server: MariaDBServer, mode: str) -> None:
    start = here(server)
    if mode == "file":
        start = StreamPosition(start.file, start.position)
    workload(server, 40, seed=1 if mode == "gtid" else 101)  # new keys: every row changes
    stream = ReplicaStream(source_config(server.host, server.port), start, stop_at_end=True)
    got = await collect(stream)
    expected = file_transactions(server, start)
    assert len(expected) == 40
    assert summary(got) == summary(expected)
    assert stream.stats.reconnects == 0


async def test_resume_from_saved_positions_gives_exactly_what_follows(
    server: MariaDBServer,
) -> None:
    start = here(server)
    workload(server, 30, seed=2)
    expected = file_transactions(server, start)
    middle = expected[11]
    saved = StreamPosition(
        middle.end_file,
        middle.end_position,
        mariadb_gtid=start.mariadb_gtid.advance(  # type: ignore[union-attr]
            middle.mariadb_gtid.gtid  # type: ignore[union-attr]
        ),
    )
    by_gtid = await collect(
        ReplicaStream(source_config(server.host, server.port), saved, stop_at_end=True)
    )
    by_file = await collect(
        ReplicaStream(
            source_config(server.host, server.port),
            StreamPosition(saved.file, saved.position),
            stop_at_end=True,
        )
    )
    assert summary(by_gtid) == summary(expected[12:])
    assert summary(by_file) == summary(expected[12:])


async def test_stop_at_end_with_nothing_new_ends_at_once(server: MariaDBServer) -> None:
    got = await collect(
        ReplicaStream(source_config(server.host, server.port), here(server), stop_at_end=True),
        timeout=20,
    )
    assert got == []


async def test_a_read_of_statements_delivers_the_transactions_holding_one(
    server: MariaDBServer,
) -> None:
    """A DDL scan's read (``statements_only=True``) delivers the DDL and nothing of the row
    transactions around it, yet moves its position over all of them; the scan finds the
    statements in order with their GTIDs."""
    start = here(server)
    statements = [
        "CREATE TABLE shop.scan_a (id INT PRIMARY KEY)",
        "ALTER TABLE shop.scan_a ADD COLUMN v INT",
        "DROP TABLE shop.scan_a",
    ]
    for n, statement in enumerate(statements):
        workload(server, 5, seed=300 + n)
        server.execute(statement)
    workload(server, 5, seed=310)
    end = here(server)
    expected = [
        (t.gtid, e.query)
        for t in file_transactions(server, start)
        for e in t.events
        if isinstance(e, ev.QueryEvent)
    ]
    assert [query for _, query in expected] == [
        *statements[:2],
        "DROP TABLE `shop`.`scan_a` /* generated by server */",  # as MariaDB logs it
    ]

    cfg = source_config(server.host, server.port)
    stream = ReplicaStream(cfg, start, stop_at_end=True, statements_only=True, name="ddl-scan")
    got = await collect(stream)
    assert [(t.gtid, e.query) for t in got for e in t.events] == expected  # type: ignore[attr-defined]
    assert stream.stats.transactions == 5 * (len(statements) + 1) + len(statements)
    # most transactions of rows were passed over natively, whole (not the last, which reaches
    # the end, nor one that a read from the socket ends inside: 19 of 20 when measured)
    assert 10 <= stream.stats.transactions_passed_over < 5 * (len(statements) + 1)
    assert stream.position == end
    found = await scan_ddl(cfg, start, end)
    assert [(point.gtid, event.query) for point, event in found] == expected


def _keep_writing(
    server: MariaDBServer, enough: threading.Event, *, transactions: int, seed: int, rows: int
) -> threading.Thread:
    """A thread that writes batches of transactions (fresh keys each) until ``enough``."""

    def write() -> None:
        batch = 0
        while not enough.is_set():
            workload(server, transactions, seed=seed + batch, rows=rows)
            batch += 1

    writer = threading.Thread(target=write)
    writer.start()
    return writer


async def _drain_until(
    stream: ReplicaStream, server: MariaDBServer, got: list[Transaction]
) -> None:
    """Consume until we hold everything the server has now.

    Judged by what was consumed (``got``), not by ``stream.position``: that one moves when the
    reader thread queues a transaction, so it can cover the end while the queue still holds
    transactions nobody has taken yet."""
    final = here(server).mariadb_gtid
    origin = stream.origin
    assert final is not None and origin is not None and origin.mariadb_gtid is not None
    had = origin.mariadb_gtid

    def covered() -> bool:
        newest: dict[int, int] = {}
        for transaction in got:
            assert transaction.gtid is not None
            gtid = MariadbGtid.parse(transaction.gtid)
            newest[gtid.domain_id] = max(newest.get(gtid.domain_id, 0), gtid.seq_no)
        return all(had.contains(g) or newest.get(g.domain_id, -1) >= g.seq_no for g in final)

    if covered():
        return
    async for item in stream:
        if isinstance(item, Transaction):
            got.append(item)
            if covered():
                return


async def test_cuts_at_random_points_lose_and_repeat_nothing(server: MariaDBServer) -> None:
    start = here(server)
    rng = random.Random(7)
    with FaultProxy(server.host, server.port) as proxy:
        stream = ReplicaStream(source_config(proxy.host, proxy.port), start)
        got: list[Transaction] = []
        enough = threading.Event()

        async with stream:
            writer = _keep_writing(server, enough, transactions=5, seed=1000, rows=8)
            try:
                async for item in stream:
                    if isinstance(item, Transaction):
                        got.append(item)
                    if proxy.stats().cuts >= 25:
                        break
                    if rng.random() < 0.05:
                        proxy.cut_after(rng.randrange(1, 4_000))
            finally:
                enough.set()
                await asyncio.get_running_loop().run_in_executor(None, writer.join)
            await asyncio.wait_for(_drain_until(stream, server, got), 120)
        assert proxy.stats().cuts >= 20
    expected = file_transactions(server, start)
    assert len(expected) >= 25
    assert summary(got) == summary(expected)
    # every cut ends a session, which is tried again; a cut that comes before the new session
    # has received anything is part of the same outage (``reconnects`` counts outages)
    assert stream.stats.reconnect_attempts >= proxy.stats().cuts >= 20
    assert stream.stats.reconnects >= 1


async def test_flipped_bytes_are_detected_and_never_delivered(server: MariaDBServer) -> None:
    start = here(server)
    rng = random.Random(11)
    with FaultProxy(server.host, server.port) as proxy:
        stream = ReplicaStream(
            source_config(proxy.host, proxy.port, max_checksum_retries=1000), start
        )
        got: list[Transaction] = []
        enough = threading.Event()
        requested = 0

        async with stream:
            writer = _keep_writing(server, enough, transactions=3, seed=5000, rows=6)
            try:
                async for item in stream:
                    if isinstance(item, Transaction):
                        got.append(item)
                    landed = proxy.stats().flips
                    if landed >= 20:
                        break
                    # aim at the binlog stream itself: arm the next flip once the previous
                    # one was caught (a reconnect) and the stream is reading events again
                    if (
                        landed == requested
                        and stream.stats.reconnects >= landed
                        and stream.stats.streaming
                    ):
                        proxy.flip_byte(rng.randrange(0, 3_000), xor=rng.randrange(1, 256))
                        requested += 1
            finally:
                enough.set()
                await asyncio.get_running_loop().run_in_executor(None, writer.join)
            await asyncio.wait_for(_drain_until(stream, server, got), 120)
        landed = proxy.stats().flips
    expected = file_transactions(server, start)
    assert landed >= 20
    # nothing corrupted got through: exactly the server's transactions, in order
    assert summary(got) == summary(expected)
    # and each corruption was noticed: the connection was dropped and re-read every time
    assert stream.stats.reconnects >= landed


async def test_persistent_checksum_error_stops_with_integrity_error() -> None:
    """A binlog file corrupted on the server's disk: the same event fails its CRC on every
    re-read, so after ``max_checksum_retries`` attempts the stream stops (exit 4), naming the
    file and position, and nothing of that transaction or after it is delivered."""
    with MariaDBServer(["--binlog-row-metadata=FULL"]) as server:
        server.execute("CREATE DATABASE shop")
        server.execute(
            "CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(200), n BIGINT UNSIGNED)"
        )
        await _stream_corrupted_file(server)


async def _stream_corrupted_file(server: MariaDBServer) -> None:
    server.flush_binlogs()
    start = here(server)
    workload(server, 6, seed=9)
    server.flush_binlogs()  # the file is closed: the server serves it from disk
    path = server.binlog_path(start.file)
    data = bytearray(path.read_bytes())
    rows = [e for e in read_binlog_file(path) if isinstance(e, ev.RowsEvent)]
    victim = rows[3]
    data[victim.position + 30] ^= 0x5A
    path.write_bytes(bytes(data))
    stream = ReplicaStream(
        source_config(server.host, server.port, max_checksum_retries=3),
        StreamPosition(start.file, start.position),
        stop_at_end=True,
    )
    got: list[Transaction] = []
    with pytest.raises(IntegrityError) as info:
        async with stream:
            async for item in stream:
                if isinstance(item, Transaction):
                    got.append(item)
    assert info.value.exit_code == 4
    assert f"{start.file}:{victim.position}" in str(info.value)
    assert "3 times" in str(info.value)
    assert all(t.end_position <= victim.position for t in got)
    assert stream.stats.checksum_errors == 3


async def test_server_restart_mid_stream_resumes(tmp_path: Path) -> None:
    server = MariaDBServer(["--binlog-row-metadata=FULL"]).start()
    try:
        server.execute("CREATE DATABASE shop")
        server.execute(
            "CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(200), n BIGINT UNSIGNED)"
        )
        start = here(server)
        stream = ReplicaStream(source_config(server.host, server.port), start)
        got: list[Transaction] = []
        async with stream:
            workload(server, 20, seed=6)

            async def take(n: int) -> None:
                async for item in stream:
                    if isinstance(item, Transaction):
                        got.append(item)
                        if len(got) >= n:
                            return

            await asyncio.wait_for(take(20), 60)
            await asyncio.get_running_loop().run_in_executor(None, server.restart)
            workload(server, 20, seed=7)
            await asyncio.wait_for(take(40), 90)
        expected = file_transactions(server, start)
        assert summary(got) == summary(expected)
        assert stream.stats.reconnects >= 1
    finally:
        server.stop()


async def test_purged_binlog_is_refused_with_exit_3(server: MariaDBServer) -> None:
    server.flush_binlogs()
    gone = StreamPosition("mysql-bin.000000", 4)
    with pytest.raises(ServerRefusedError) as info:
        await collect(
            ReplicaStream(source_config(server.host, server.port), gone, stop_at_end=True),
            timeout=30,
        )
    assert info.value.exit_code == 3
    assert "mysql-bin.000000" in str(info.value)
    assert "purged" in str(info.value)


async def test_a_start_inside_a_gap_of_the_gtid_sequence_is_refused(
    server: MariaDBServer,
) -> None:
    """The server refuses such a start (ERR 1236) after the dump's preamble events: still the
    start, final (exit 3), not a network fault to reconnect after for ever."""
    workload(server, 1, seed=11)
    before = MariadbGtidPosition.parse(server.binlog_status().gtid_binlog_pos)
    (last,) = [g for g in before.gtids if g.domain_id == 0]
    conn = server.connect("shop")
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION gtid_seq_no = %s", (last.seq_no + 100,))
            cur.execute("INSERT INTO t VALUES (-1, 'past the gap', 0)")
        conn.commit()
    finally:
        conn.close()
    inside = start_position(f"0-{last.server_id}-{last.seq_no + 50}", None)
    assert inside is not None
    stream = ReplicaStream(source_config(server.host, server.port), inside, stop_at_end=True)

    with pytest.raises(ServerRefusedError) as info:
        await collect(stream, timeout=30)

    assert info.value.exit_code == 3
    assert f"0-{last.server_id}-{last.seq_no + 50}" in str(info.value)
    assert stream.stats.reconnect_attempts == 0


async def test_slow_consumer_keeps_memory_bounded(server: MariaDBServer) -> None:
    start = here(server)
    workload(server, 200, seed=8)
    stream = ReplicaStream(
        source_config(server.host, server.port), start, stop_at_end=True, queue_size=4
    )
    seen = 0
    async with stream:
        async for item in stream:
            assert stream._queue is not None
            assert stream._queue.qsize() <= 4
            if isinstance(item, Transaction):
                seen += 1
                if seen < 20:
                    await asyncio.sleep(0.01)
    assert seen == 200
    assert stream.position is not None
    assert isinstance(stream.position.mariadb_gtid, MariadbGtidPosition)


async def test_missing_replication_privilege_is_refused(server: MariaDBServer) -> None:
    server.execute("CREATE USER IF NOT EXISTS 'noslave'@'%' IDENTIFIED BY 'pw-noslave'")
    server.execute("GRANT SELECT, REPLICATION CLIENT ON *.* TO 'noslave'@'%'")
    cfg = source_config(server.host, server.port, user="noslave", password=Secret("pw-noslave"))
    with pytest.raises(ServerRefusedError) as info:
        await collect(ReplicaStream(cfg, here(server), stop_at_end=False), timeout=30)
    assert info.value.exit_code == 3
    assert "REPLICATION SLAVE" in str(info.value)
    # the one privilege the dump needs; the account's REPLICATION CLIENT is not the fix
    assert "GRANT REPLICATION SLAVE ON *.* TO 'noslave'" in (info.value.hint or "")
    assert "CLIENT" not in (info.value.hint or "")
    assert "pw-noslave" not in str(info.value)
