"""Metrics and the health/metrics HTTP server: a real server on an ephemeral port, real requests.

Scrapes are parsed with prometheus_client's own parser, so the tests check what Prometheus
would read, not our formatting. Requests go through urllib (in a thread, proxies off) for the
well-formed cases and through raw asyncio streams for malformed, slow and idle clients.
"""

from __future__ import annotations

import asyncio
import math
import socket
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from replicator import metrics as metrics_module
from replicator.config import Config, ServiceConfig, SinkConfig
from replicator.errors import ConfigError
from replicator.metrics import Metrics, MetricsServer, Status
from replicator.service import RunOptions, Service
from replicator.sink.landing import FAIL_ENV
from tests.logs import captured_log

from .test_pipeline_writer_thread import _Feed

pytestmark = pytest.mark.timeout(60)

T0 = 1_700_000_000.0
IDLE = 0.5  # the served fixture's idle timeout


class FakeClock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes


@dataclass
class Served:
    metrics: Metrics
    clock: FakeClock
    server: MetricsServer

    @property
    def port(self) -> int:
        return self.server.port


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _fetch_blocking(url: str, method: str, headers: dict[str, str]) -> Response:
    request = urllib.request.Request(url, method=method, headers=headers)
    try:
        with _OPENER.open(request, timeout=10) as reply:
            return Response(reply.status, dict(reply.headers.items()), reply.read())
    except urllib.error.HTTPError as error:
        with error:
            return Response(error.code, dict(error.headers.items()), error.read())


async def fetch(
    port: int,
    path: str,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    host: str = "127.0.0.1",
) -> Response:
    url = f"http://{host}:{port}{path}"
    return await asyncio.to_thread(_fetch_blocking, url, method, headers or {})


async def raw(port: int, data: bytes, *, wait: float = 10.0) -> bytes:
    """Send ``data`` as is and return everything the server sends until it closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), wait)
    finally:
        writer.close()


def status_of(reply: bytes) -> int:
    return int(reply.split(b"\r\n", 1)[0].split(b" ")[1])


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(text: str, name: str, **labels: str) -> float:
    return samples(text)[(name, frozenset(labels.items()))]


async def scrape(port: int) -> str:
    reply = await fetch(port, "/metrics")
    assert reply.status == 200
    return reply.body.decode("utf-8")


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    clock = FakeClock()
    metrics = Metrics(clock=clock)
    server = MetricsServer(metrics, host="127.0.0.1", port=0, idle_timeout=IDLE)
    await server.start()
    try:
        yield Served(metrics, clock, server)
    finally:
        await server.close()


# -- the exposition ------------------------------------------------------------------------


async def test_scrape_reports_every_metric(served: Served) -> None:
    m, clock = served.metrics, served.clock
    m.events.inc("WRITE_ROWS_EVENT", amount=3)
    m.events.inc("GTID_EVENT")
    m.binlog_bytes.inc(amount=4096)
    m.reconnects.inc()
    m.crc_errors.inc()
    m.zero_dates.inc(amount=2)
    m.notifications_dropped.inc(amount=5)
    m.xa_transactions.sync_many({("prepared",): 2, ("committed",): 1})
    m.set_connected(True)
    clock.now = T0 + 10
    m.observe_event_time(int(T0 + 7))
    m.batch_committed(
        batch=17,
        rows=6,
        bytes_written=2048,
        rows_by_table_op={("shop.orders", "c"): 4, ("shop.orders", "d"): 2},
        transactions=3,
        seconds=0.25,
    )
    clock.now = T0 + 40

    reply = await fetch(served.port, "/metrics")

    assert reply.status == 200
    assert reply.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    assert reply.headers["Cache-Control"] == "no-store"
    assert int(reply.headers["Content-Length"]) == len(reply.body)
    text = reply.body.decode("utf-8")
    assert value(text, "replicator_binlog_events_total", type="WRITE_ROWS_EVENT") == 3
    assert value(text, "replicator_binlog_events_total", type="GTID_EVENT") == 1
    assert value(text, "replicator_row_changes_total", table="shop.orders", op="c") == 4
    assert value(text, "replicator_row_changes_total", table="shop.orders", op="d") == 2
    assert value(text, "replicator_binlog_read_bytes_total") == 4096
    assert value(text, "replicator_batches_committed_total") == 1
    assert value(text, "replicator_rows_committed_total") == 6
    assert value(text, "replicator_parquet_written_bytes_total") == 2048
    assert value(text, "replicator_source_reconnects_total") == 1
    assert value(text, "replicator_crc_errors_total") == 1
    assert value(text, "replicator_zero_dates_nulled_total") == 2
    assert value(text, "replicator_notifications_dropped_total") == 5
    assert value(text, "replicator_xa_transactions_total", outcome="prepared") == 2
    assert value(text, "replicator_xa_transactions_total", outcome="committed") == 1
    assert value(text, "replicator_commit_failures_total") == 0
    assert value(text, "replicator_replication_lag_seconds") == 3
    assert value(text, "replicator_source_silence_seconds") == 30
    assert value(text, "replicator_checkpoint_age_seconds") == 30
    assert value(text, "replicator_stream_connected") == 1
    assert value(text, "replicator_last_batch_number") == 17
    assert value(text, "replicator_last_batch_rows") == 6
    assert value(text, "replicator_last_batch_bytes") == 2048
    assert value(text, "replicator_last_batch_transactions") == 3
    assert value(text, "replicator_last_batch_duration_seconds") == 0.25
    assert value(text, "replicator_last_batch_timestamp_seconds") == T0 + 10


async def test_every_metric_is_prefixed_and_labels_are_types_tables_ops(served: Served) -> None:
    m = served.metrics
    m.events.inc("QUERY_EVENT")
    m.row_changes.inc("db.t", "u")
    m.commit_failed("Access denied for user 'repl'@'%' (password: s3cret-pw)")
    m.fatal("cannot reach mysql://repl:s3cret-pw@db1")

    text = await scrape(served.port)

    families = list(text_string_to_metric_families(text))
    assert families
    assert all(f.name.startswith("replicator_") for f in families)
    label_names = {name for f in families for s in f.samples for name in s.labels}
    assert label_names == {"type", "table", "op"}
    assert "s3cret" not in text


async def test_openmetrics_when_the_scraper_asks(served: Served) -> None:
    reply = await fetch(
        served.port, "/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"}
    )

    assert reply.status == 200
    assert reply.headers["Content-Type"].startswith("application/openmetrics-text")
    assert reply.body.endswith(b"# EOF\n")


async def test_own_registry_so_two_instances_do_not_collide() -> None:
    first, second = Metrics(), Metrics()
    first.batches.inc()

    text = second.render()[0].decode()

    assert value(text, "replicator_batches_committed_total") == 0
    assert first.batches.value() == 1


# -- lag, silence, checkpoint age ----------------------------------------------------------


def test_lag_from_event_time_and_zero_after_heartbeat() -> None:
    clock = FakeClock()
    m = Metrics(clock=clock)
    assert m.lag_seconds == 0

    clock.now = T0 + 100
    m.observe_event_time(int(T0 + 40))
    assert m.lag_seconds == 60

    m.observe_heartbeat()
    assert m.lag_seconds == 0

    clock.now = T0 + 500  # idle: heartbeats keep the lag at 0, the old event time is not used
    m.observe_heartbeat()
    assert m.lag_seconds == 0
    assert value(m.render()[0].decode(), "replicator_replication_lag_seconds") == 0


def test_zero_timestamps_are_never_used_for_lag() -> None:
    clock = FakeClock()
    m = Metrics(clock=clock)
    clock.now = T0 + 10
    m.observe_event_time(int(T0 + 8))
    assert m.lag_seconds == 2

    clock.now = T0 + 50
    m.observe_event_time(0)  # heartbeat or artificial ROTATE: timestamp 0
    m.observe_event_time(-1)

    assert m.lag_seconds == 2  # not 50 s, and not now - 0 (decades)
    text = m.render()[0].decode()
    assert value(text, "replicator_replication_lag_seconds") == 2
    assert value(text, "replicator_source_silence_seconds") == 40  # zero-time events ignored


def test_event_from_the_future_is_no_lag() -> None:
    clock = FakeClock()
    m = Metrics(clock=clock)
    m.observe_event_time(int(T0 + 30))  # source clock ahead of ours
    assert m.lag_seconds == 0


def test_silence_and_checkpoint_age_grow_at_scrape_time() -> None:
    clock = FakeClock()
    m = Metrics(clock=clock)

    clock.now = T0 + 12
    text = m.render()[0].decode()
    assert value(text, "replicator_source_silence_seconds") == 12  # since start
    assert value(text, "replicator_checkpoint_age_seconds") == 12  # since start

    m.checkpoint_saved(at=T0 - 100)  # recovered at start-up: an older checkpoint
    m.observe_heartbeat()
    clock.now = T0 + 20
    text = m.render()[0].decode()
    assert value(text, "replicator_checkpoint_age_seconds") == 120
    assert value(text, "replicator_source_silence_seconds") == 8

    m.batch_committed(batch=1, rows=1, bytes_written=10)
    clock.now = T0 + 21
    assert value(m.render()[0].decode(), "replicator_checkpoint_age_seconds") == 1

    m.checkpoint_saved()
    assert value(m.render()[0].decode(), "replicator_checkpoint_age_seconds") == 0


def test_the_recovered_checkpoint_is_the_last_batch_until_a_commit() -> None:
    clock = FakeClock()
    m = Metrics(clock=clock)
    m.checkpoint_saved(at=T0 - 100, batch=7)
    text = m.render()[0].decode()
    assert value(text, "replicator_last_batch_number") == 7
    assert value(text, "replicator_last_batch_timestamp_seconds") == T0 - 100

    m.batch_committed(batch=8, rows=1, bytes_written=10)
    text = m.render()[0].decode()
    assert value(text, "replicator_last_batch_number") == 8
    assert value(text, "replicator_last_batch_timestamp_seconds") == T0

    fresh = Metrics(clock=clock)
    fresh.checkpoint_saved(at=None, batch=0)  # a new landing zone: no batch yet
    assert value(fresh.render()[0].decode(), "replicator_last_batch_number") == 0


# -- counters: inc and cumulative sync -----------------------------------------------------


def test_sync_adds_only_growth() -> None:
    m = Metrics()
    m.reconnects.sync(total=5)
    m.reconnects.sync(total=5)
    m.reconnects.sync(total=8)
    assert m.reconnects.value() == 8

    m.reconnects.sync(total=3)  # the source started again from 0: all 3 are new
    assert m.reconnects.value() == 11

    m.reconnects.sync(total=4)
    assert m.reconnects.value() == 12
    assert value(m.render()[0].decode(), "replicator_source_reconnects_total") == 12


def test_source_replaced_counts_the_next_total_from_zero() -> None:
    m = Metrics()
    m.binlog_bytes.sync(total=100)
    m.binlog_bytes.source_replaced()
    m.binlog_bytes.sync(total=150)  # a new stream object already at 150: not a growth of 50
    assert m.binlog_bytes.value() == 250


def test_sync_is_per_label_values_and_sync_many() -> None:
    m = Metrics()
    pipeline_totals = {("db.a", "c"): 3, ("db.a", "u"): 1}
    m.row_changes.sync_many(pipeline_totals)
    pipeline_totals[("db.a", "c")] = 10
    pipeline_totals[("db.b", "d")] = 2
    m.row_changes.sync_many(pipeline_totals)

    text = m.render()[0].decode()
    assert value(text, "replicator_row_changes_total", table="db.a", op="c") == 10
    assert value(text, "replicator_row_changes_total", table="db.a", op="u") == 1
    assert value(text, "replicator_row_changes_total", table="db.b", op="d") == 2


def test_inc_does_not_move_the_sync_baseline() -> None:
    m = Metrics()
    m.crc_errors.inc()
    m.crc_errors.sync(total=2)
    assert m.crc_errors.value() == 3


def test_counters_refuse_to_go_down_or_take_wrong_labels() -> None:
    m = Metrics()
    with pytest.raises(ValueError, match="only goes up"):
        m.rows.inc(amount=-1)
    with pytest.raises(ValueError, match="negative"):
        m.rows.sync(total=-1)
    with pytest.raises(ValueError, match="label values"):
        m.row_changes.inc("db.t")
    with pytest.raises(ValueError, match="label values"):
        m.rows.inc("db.t")
    assert m.rows.value() == 0


@dataclass
class FakeStreamStats:
    reconnects: int = 0
    bytes_received: int = 0
    checksum_errors: int = 0
    streaming: bool = False
    by_type: dict[tuple[str], int] = field(default_factory=dict)


async def test_scrape_hooks_sync_cumulative_stats(served: Served) -> None:
    m = served.metrics
    stats = FakeStreamStats()

    def sync_stream() -> None:
        m.reconnects.sync(total=stats.reconnects)
        m.binlog_bytes.sync(total=stats.bytes_received)
        m.crc_errors.sync(total=stats.checksum_errors)
        m.events.sync_many(stats.by_type)
        m.set_connected(stats.streaming)

    def broken() -> None:
        raise RuntimeError("a bug in a hook")

    m.on_scrape(broken)
    m.on_scrape(sync_stream)
    stats.reconnects, stats.bytes_received, stats.streaming = 2, 1000, True
    stats.by_type[("XID_EVENT",)] = 7

    text = await scrape(served.port)
    assert value(text, "replicator_source_reconnects_total") == 2
    assert value(text, "replicator_binlog_read_bytes_total") == 1000
    assert value(text, "replicator_binlog_events_total", type="XID_EVENT") == 7
    assert value(text, "replicator_stream_connected") == 1

    stats.bytes_received, stats.checksum_errors, stats.streaming = 1500, 1, False
    text = await scrape(served.port)
    assert value(text, "replicator_binlog_read_bytes_total") == 1500
    assert value(text, "replicator_crc_errors_total") == 1
    assert value(text, "replicator_source_reconnects_total") == 2
    assert value(text, "replicator_stream_connected") == 0


# -- health and readiness ------------------------------------------------------------------


async def test_readiness_follows_stream_and_commits(served: Served) -> None:
    m, port = served.metrics, served.port

    reply = await fetch(port, "/readyz")
    assert (reply.status, reply.body) == (503, b"not streaming from the source\n")
    assert (await fetch(port, "/healthz")).status == 200

    m.set_connected(True)
    reply = await fetch(port, "/readyz")
    assert (reply.status, reply.body) == (200, b"ready\n")

    m.commit_failed("SinkError: disk full\n  while writing shop/orders")
    reply = await fetch(port, "/readyz")
    assert reply.status == 503
    assert reply.body == b"last commit failed: SinkError: disk full while writing shop/orders\n"
    assert value(await scrape(port), "replicator_commit_failures_total") == 1

    m.batch_committed(batch=2, rows=1, bytes_written=1)
    assert (await fetch(port, "/readyz")).status == 200

    m.set_connected(False)
    assert (await fetch(port, "/readyz")).status == 503


async def test_fatal_state_fails_health_and_readiness(served: Served) -> None:
    m, port = served.metrics, served.port
    m.set_connected(True)
    reply = await fetch(port, "/healthz")
    assert (reply.status, reply.body) == (200, b"ok\n")

    m.fatal("IntegrityError: CRC mismatch persists at mysql-bin.000003:4711")

    reply = await fetch(port, "/healthz")
    assert reply.status == 503
    assert reply.body.startswith(b"fatal: IntegrityError: CRC mismatch")
    assert (await fetch(port, "/readyz")).status == 503


async def test_checks_passed_in_are_used_and_a_raising_check_fails() -> None:
    state = {"ready": Status(False, "catching up"), "healthy": True}

    def health() -> Status:
        if not state["healthy"]:
            raise RuntimeError("internal detail")
        return Status(True)

    def ready() -> Status:
        ready_status = state["ready"]
        assert isinstance(ready_status, Status)
        return ready_status

    async with MetricsServer(
        Metrics(), host="127.0.0.1", port=0, health=health, ready=ready
    ) as server:
        reply = await fetch(server.port, "/readyz")
        assert (reply.status, reply.body) == (503, b"catching up\n")
        state["ready"] = Status(True)
        reply = await fetch(server.port, "/readyz")
        assert (reply.status, reply.body) == (200, b"ok\n")

        state["healthy"] = False
        reply = await fetch(server.port, "/healthz")
        assert (reply.status, reply.body) == (503, b"health check raised RuntimeError\n")


# -- a failing commit, through the service's own wiring -------------------------------------


async def test_a_failing_commit_reaches_readyz_and_the_counter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The service's pipeline, metrics and server on a real landing zone whose first commit
    fails as a full disk would (injected as the crash tests inject theirs): /readyz names the
    failed commit and replicator_commit_failures_total moves, both over HTTP."""
    monkeypatch.setenv(FAIL_ENV, "data:1")
    config = Config(
        service=ServiceConfig(http_port=0),
        sink=SinkConfig(root=str(tmp_path), batch_max_rows=5, batch_max_seconds=999),
    )
    service = Service(config, RunOptions())
    await service._start_http()
    assert service.http is not None
    port = service.http.port
    pipeline = service._new_pipeline(service.zone.recover(), None)
    try:
        service.metrics.set_connected(True)  # as the stream would say (no source here)
        assert (await fetch(port, "/readyz")).status == 200

        feed = _Feed(tmp_path, pipeline=pipeline)
        await feed.transaction([(n, "x") for n in range(1, 6)])  # due: handed over
        with pytest.raises(OSError, match="No space left on device"):
            await pipeline.commit()

        reply = await fetch(port, "/readyz")
        assert reply.status == 503
        assert reply.body.startswith(b"last commit failed: [Errno 28] No space left on device")
        assert value(await scrape(port), "replicator_commit_failures_total") == 1
        assert (await fetch(port, "/healthz")).status == 200  # not fatal until the run stops
    finally:
        await pipeline.close()
        await service.http.close()
    assert service.zone.recover().batch == 0  # nothing landed


# -- HTTP behaviour ------------------------------------------------------------------------


async def test_unknown_path_is_404_and_other_methods_405(served: Served) -> None:
    reply = await fetch(served.port, "/nope")
    assert reply.status == 404
    assert reply.body == b"not found: try /metrics, /healthz or /readyz\n"

    reply = await fetch(served.port, "/metrics", method="POST")
    assert reply.status == 405
    assert reply.headers["Allow"] == "GET, HEAD"

    reply = await fetch(served.port, "/healthz", method="DELETE")
    assert reply.status == 405


async def test_head_sends_headers_only(served: Served) -> None:
    get = await fetch(served.port, "/healthz")
    head_reply = await raw(
        served.port, b"HEAD /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )

    head, _, body = head_reply.partition(b"\r\n\r\n")
    assert status_of(head_reply) == 200
    assert body == b""
    assert f"Content-Length: {len(get.body)}".encode() in head


async def test_query_string_and_absolute_form_are_accepted(served: Served) -> None:
    assert (await fetch(served.port, "/healthz?verbose=1")).status == 200
    reply = await raw(
        served.port,
        b"GET http://replicator:9100/healthz HTTP/1.1\r\nHost: replicator\r\n"
        b"Connection: close\r\n\r\n",
    )
    assert status_of(reply) == 200


async def test_http10_request_and_leading_empty_line(served: Served) -> None:
    reply = await raw(served.port, b"\r\nGET /healthz HTTP/1.0\r\n\r\n")
    assert reply.startswith(b"HTTP/1.0 200 OK\r\n")
    assert reply.endswith(b"\r\n\r\nok\n")


async def test_keep_alive_answers_several_requests_on_one_connection(served: Served) -> None:
    reply = await raw(
        served.port,
        b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
        b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    first, _, second = reply.partition(b"ok\n")
    assert status_of(first) == 200
    assert status_of(second) == 503
    assert second.endswith(b"not streaming from the source\n")


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GARBAGE\r\n\r\n",
        b"GET metrics HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /metrics HTTP/1.1\r\n\r\n",  # HTTP/1.1 without Host (RFC 9112 3.2)
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n",
        b"GET /metrics HTTP/1.1\r\nHost: x\r\n folded: header\r\n\r\n",
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Long: " + b"a" * 10_000 + b"\r\n\r\n",
        b"GET /" + b"a" * 10_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + b"X: y\r\n" * 150 + b"\r\n",
        b"\xff\xfe /metrics HTTP/1.1\r\n\r\n",
    ],
)
async def test_malformed_requests_get_400(served: Served, request_bytes: bytes) -> None:
    reply = await raw(served.port, request_bytes)
    assert status_of(reply) == 400


async def test_malformed_requests_are_no_errors_in_the_log(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    capture = captured_log(monkeypatch, metrics_module)

    await raw(served.port, b"GARBAGE\r\n\r\n")
    await raw(served.port, b"GET /metrics HTTP/1.1\r\n" + b"X: y\r\n" * 150 + b"\r\n")

    assert [(entry["log_level"], entry["event"]) for entry in capture.entries] == [
        ("debug", "malformed http request")
    ] * 2


async def test_server_survives_bad_clients(served: Served) -> None:
    await raw(served.port, b"GARBAGE\r\n\r\n")
    await raw(served.port, b"")  # connect and leave at once
    await raw(served.port, b"GET /metrics HTTP/1.1\r\nHost")  # leave in the middle
    assert (await fetch(served.port, "/healthz")).status == 200


@pytest.mark.parametrize("partial", [b"", b"GET /metr", b"GET /metrics HTTP/1.1\r\nHost: x\r\n"])
async def test_idle_or_slow_client_is_dropped_after_the_idle_timeout(
    served: Served, partial: bytes
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    try:
        writer.write(partial)
        await writer.drain()
        started = time.monotonic()
        reply = await asyncio.wait_for(reader.read(), 10)
        elapsed = time.monotonic() - started
    finally:
        writer.close()

    assert reply == b""  # closed without an answer
    assert elapsed < IDLE + 2
    assert (await fetch(served.port, "/healthz")).status == 200


async def test_a_client_dripping_its_request_is_dropped_all_the_same(served: Served) -> None:
    """Bytes that never make a whole request do not keep a connection open."""
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Drip: ")
    started = time.monotonic()
    closed = False
    try:
        while not closed and time.monotonic() - started < 10:
            try:
                writer.write(b"a")
                await writer.drain()
                closed = await asyncio.wait_for(reader.read(1), 0.05) == b""
            except TimeoutError:
                continue
            except ConnectionError:
                closed = True
    finally:
        writer.close()
    assert closed
    assert time.monotonic() - started < IDLE + 2


async def test_idle_connections_do_not_lock_out_probes(served: Served) -> None:
    idle = [await asyncio.open_connection("127.0.0.1", served.port) for _ in range(64)]
    try:
        assert (await fetch(served.port, "/healthz")).status == 200
        for reader, _ in idle:  # and each is dropped once idle for too long
            assert await asyncio.wait_for(reader.read(), IDLE + 5) == b""
    finally:
        for _, writer in idle:
            writer.close()


async def test_request_body_is_tolerated(served: Served) -> None:
    reply = await raw(
        served.port,
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
    )
    assert status_of(reply) == 200


async def test_close_drops_idle_clients_promptly() -> None:
    server = MetricsServer(Metrics(), host="127.0.0.1", port=0, idle_timeout=30)
    await server.start()
    port = server.port
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /metr")
    await writer.drain()
    await asyncio.sleep(0.1)

    started = time.monotonic()
    await server.close()
    elapsed = time.monotonic() - started

    assert elapsed < 2
    closed = b"unset"
    try:
        closed = await asyncio.wait_for(reader.read(), 5)
    except ConnectionError:
        closed = b""
    writer.close()
    assert closed == b""
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", port)
    await server.close()  # twice is fine


async def test_ephemeral_port_and_lifecycle_errors() -> None:
    server = MetricsServer(Metrics(), host="127.0.0.1", port=0)
    with pytest.raises(RuntimeError, match="not started"):
        _ = server.port
    await server.start()
    try:
        assert server.port > 0
        assert server.addresses == (("127.0.0.1", server.port),)
        with pytest.raises(RuntimeError, match="already started"):
            await server.start()
        taken = MetricsServer(Metrics(), host="127.0.0.1", port=server.port)
        with pytest.raises(ConfigError, match="cannot listen for metrics"):
            await taken.start()
    finally:
        await server.close()


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback here")
async def test_ipv6_host() -> None:
    async with MetricsServer(Metrics(), host="::1", port=0) as server:
        assert server.addresses == (("::1", server.port),)
        assert (await fetch(server.port, "/healthz", host="[::1]")).status == 200


def test_a_stream_with_no_progress_is_not_ready_though_connected() -> None:
    clock = FakeClock()
    m = Metrics(clock=clock, stall_seconds=30)
    m.set_connected(True)
    m.observe_heartbeat()
    assert m.readiness().ok

    clock.now = T0 + 29  # within the bound: still ready
    assert m.readiness().ok
    clock.now = T0 + 31  # connected, but nothing came through for longer than the bound
    status = m.readiness()
    assert not status.ok
    assert status.reason == "stalled: nothing from the source stream for 31 s"
    assert m.connected  # the gauge alone would still say all is well

    m.observe_progress()  # a part of a large transaction moves the stream on
    assert m.readiness().ok


def test_a_pipeline_that_takes_nothing_is_not_a_silent_source() -> None:
    """The source keeps sending (heartbeats reach the reader thread) while the pipeline takes
    nothing, its commit hanging on the landing zone: the silence is not the source's, and
    readiness says what stalls (the silence once grew and blamed the source)."""
    clock = FakeClock()
    heard = [T0]
    m = Metrics(clock=clock, stall_seconds=30)
    m.hears(lambda: heard[0])
    m.set_connected(True)
    m.observe_heartbeat()  # the last item the pipeline took

    clock.now = heard[0] = T0 + 40  # the source's heartbeats still come
    assert value(m.render()[0].decode(), "replicator_source_silence_seconds") == 0
    status = m.readiness()
    assert not status.ok
    assert status.reason.startswith("stalled: nothing taken from the source stream for 40 s")

    clock.now = T0 + 75  # and now the source is silent too: that comes first
    assert value(m.render()[0].decode(), "replicator_source_silence_seconds") == 35
    assert m.readiness().reason == "stalled: nothing from the source stream for 35 s"


def test_snapshot_progress_gauges() -> None:
    from replicator.snapshot.runner import SnapshotProgress

    m = Metrics()
    m.snapshot_progress(SnapshotProgress("shop.big", 50, 200, 10.0, 2))
    text = m.render()[0].decode()
    assert value(text, "replicator_snapshot_tables_pending") == 2
    assert value(text, "replicator_snapshot_table_rows") == 50
    assert value(text, "replicator_snapshot_table_rows_estimate") == 200
    assert value(text, "replicator_snapshot_table_eta_seconds") == 15
    m.snapshot_progress(SnapshotProgress("shop.t", 0, None, None, 1))
    text = m.render()[0].decode()
    assert math.isnan(value(text, "replicator_snapshot_table_eta_seconds"))  # not known


def test_sources_replaced_counts_new_totals_on_top() -> None:
    m = Metrics()
    m.row_changes.sync("db.t", "c", total=40)
    m.reconnects.sync(total=3)
    m.sources_replaced()  # a new stream and pipeline: their totals start again at 0
    m.row_changes.sync("db.t", "c", total=50)
    m.reconnects.sync(total=1)
    text = m.render()[0].decode()
    assert value(text, "replicator_row_changes_total", table="db.t", op="c") == 90
    assert value(text, "replicator_source_reconnects_total") == 4


async def test_listening_on_all_ipv6_addresses_answers_ipv4_probes_too() -> None:
    """``service.http_host: "::"``: the image's healthcheck and ``status`` ask 127.0.0.1."""
    server = MetricsServer(Metrics(), host="::", port=0, health=lambda: Status(True))
    await server.start()
    try:
        answers = [
            (await fetch(server.port, "/healthz", host=host)).status
            for host in ("127.0.0.1", "[::1]")
        ]
    finally:
        await server.close()
    assert answers == [200, 200]
