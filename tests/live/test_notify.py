"""MQTT commit notifications against a real Mosquitto (``replicator.notify``).

What is promised: notifications arrive in order at QoS 1 on ``<prefix>/commits``; the retained
``<prefix>/status`` says online/offline/stopped truthfully (the offline one is the broker's
last will: checked with a notifier in a subprocess that is frozen, then SIGKILLed); a broker
that goes away never makes ``notify()`` wait, the queue drops its oldest entries and counts
them, and everything flows again once the broker is back; secrets stay out of logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiomqtt
import pytest

from replicator import notify
from replicator.config import MqttConfig, Secret, TlsConfig
from replicator.errors import ConfigError
from replicator.notify import Notifier, encode_payload
from tests.harness import kill_process
from tests.harness.mosquitto import MosquittoBroker
from tests.harness.proxy import FaultProxy
from tests.logs import captured_log

pytestmark = pytest.mark.mqtt

ROOT = Path(__file__).resolve().parents[2]
SECRET = "mqtt-Pa55-never-in-logs"


def _prefix() -> str:
    return f"test-notify/{uuid.uuid4().hex[:10]}"


def _config(host: str, port: int, prefix: str, **overrides: Any) -> MqttConfig:
    settings: dict[str, Any] = {
        "enabled": True,
        "host": host,
        "port": port,
        "topic_prefix": prefix,
        "client_id": f"notify-test-{uuid.uuid4().hex[:10]}",
        "keepalive": 5,
        "timeout": 5.0,
        "reconnect_initial_delay": 0.05,
        "reconnect_max_delay": 0.3,
    }
    settings.update(overrides)
    return MqttConfig(**settings)


def _commit(batch: int) -> dict[str, Any]:
    return {
        "batch": batch,
        "committed_at": "2024-05-01T12:00:00.123Z",
        "tables": {"shop.orders": {"rows": 2, "files": [f"shop/orders/part-{batch:08d}.parquet"]}},
        "rows": 2,
        "end": {"file": "mysql-bin.000001", "position": 1000 + batch, "gtid": f"0-1-{batch}"},
    }


def _json(message: aiomqtt.Message) -> dict[str, Any]:
    assert isinstance(message.payload, bytes)
    body = json.loads(message.payload)
    assert isinstance(body, dict)
    return body


async def _wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.02)


class Inbox:
    """Everything one subscriber received on ``<prefix>/#``, in arrival order."""

    def __init__(self, client: aiomqtt.Client, prefix: str) -> None:
        self.client = client
        self.prefix = prefix
        self.messages: list[aiomqtt.Message] = []
        self._changed = asyncio.Event()

    async def collect(self) -> None:
        with contextlib.suppress(aiomqtt.MqttError):
            async for message in self.client.messages:
                self.messages.append(message)
                self._changed.set()

    def on(self, leaf: str) -> list[aiomqtt.Message]:
        return [m for m in self.messages if m.topic.value == f"{self.prefix}/{leaf}"]

    def batches(self) -> list[int]:
        return [_json(m)["batch"] for m in self.on("commits")]

    def states(self) -> list[str]:
        return [_json(m)["state"] for m in self.on("status")]

    async def wait_until(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        try:
            async with asyncio.timeout(timeout):
                while not predicate():
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            raise AssertionError(
                f"timed out after {timeout} s waiting for {what}; got {self.summary()}"
            ) from None

    def summary(self) -> list[tuple[str, object]]:
        return [(m.topic.value, m.payload) for m in self.messages]


@contextlib.asynccontextmanager
async def _listen(host: str, port: int, prefix: str) -> AsyncIterator[Inbox]:
    async with aiomqtt.Client(host, port=port, timeout=5) as client:
        await client.subscribe(f"{prefix}/#", qos=1)
        inbox = Inbox(client, prefix)
        task = asyncio.create_task(inbox.collect())
        try:
            yield inbox
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def test_commits_arrive_in_order_at_qos1_and_status_is_online(
    mosquitto: MosquittoBroker,
) -> None:
    prefix = _prefix()
    cfg = _config(mosquitto.host, mosquitto.port, prefix)
    async with Notifier(cfg) as notifier:
        await _wait_until(lambda: notifier.connected, 5, "the notifier to connect")
        # subscribed after the connect: the status must come to us as a retained message
        async with _listen(mosquitto.host, mosquitto.port, prefix) as inbox:
            await inbox.wait_until(lambda: len(inbox.on("status")) == 1, 5, "retained status")
            status = inbox.on("status")[0]
            for batch in range(20):
                notifier.notify(_commit(batch))
            await inbox.wait_until(lambda: len(inbox.on("commits")) == 20, 5, "20 commits")

    body = _json(status)
    assert status.retain is True
    assert body["state"] == "online"
    assert body["client_id"] == cfg.client_id
    assert body["version"]
    assert body["since"].endswith("Z")
    commits = inbox.on("commits")
    assert inbox.batches() == list(range(20))
    assert [m.qos for m in commits] == [1] * 20
    assert not any(m.retain for m in commits)
    assert [m.payload for m in commits] == [encode_payload(_commit(b)) for b in range(20)]
    assert commits[0].payload == (
        b'{"batch":0,"committed_at":"2024-05-01T12:00:00.123Z",'
        b'"end":{"file":"mysql-bin.000001","gtid":"0-1-0","position":1000},"rows":2,'
        b'"tables":{"shop.orders":{"files":["shop/orders/part-00000000.parquet"],"rows":2}}}'
    )
    assert (notifier.stats.published, notifier.stats.dropped) == (20, 0)
    assert (notifier.stats.connects, notifier.stats.failures) == (1, 0)


async def test_close_publishes_stopped_and_disconnects(mosquitto: MosquittoBroker) -> None:
    prefix = _prefix()
    notifier = Notifier(_config(mosquitto.host, mosquitto.port, prefix))
    async with _listen(mosquitto.host, mosquitto.port, prefix) as inbox, asyncio.TaskGroup() as tg:
        tg.create_task(notifier.run(), name="notifier")
        await inbox.wait_until(lambda: inbox.states() == ["online"], 5, "online")
        for batch in range(3):
            notifier.notify(_commit(batch))
        # close() right away: what is queued is flushed before "stopped"
        started = time.monotonic()
        await notifier.close(timeout=5)
        took = time.monotonic() - started
        await inbox.wait_until(lambda: "stopped" in inbox.states(), 5, "stopped")

    async with _listen(mosquitto.host, mosquitto.port, prefix) as late:
        await late.wait_until(lambda: len(late.on("status")) == 1, 5, "retained status")
    stopped = _json(late.on("status")[0])
    assert inbox.states() == ["online", "stopped"]
    assert inbox.batches() == [0, 1, 2]
    assert stopped["state"] == "stopped"
    assert (stopped["published"], stopped["dropped"]) == (3, 0)
    assert late.on("status")[0].retain is True
    assert took < 2
    assert not notifier.connected
    notifier.notify(_commit(99))  # after close: counted, never raises
    assert notifier.stats.dropped == 1


async def test_broker_outage_notify_never_waits_drops_oldest_and_recovers() -> None:
    prefix = _prefix()
    with MosquittoBroker() as broker:
        cfg = _config(broker.host, broker.port, prefix, queue_size=5)
        async with Notifier(cfg) as notifier:
            await _wait_until(lambda: notifier.connected, 5, "the first connect")
            notifier.notify(_commit(0))
            await _wait_until(lambda: notifier.stats.published == 1, 5, "batch 0")

            await asyncio.to_thread(broker.stop)
            await _wait_until(lambda: not notifier.connected, 5, "the loss to be noticed")
            slowest = 0.0
            for batch in range(1, 51):
                started = time.perf_counter()
                notifier.notify(_commit(batch))
                slowest = max(slowest, time.perf_counter() - started)
            dropped_while_down = notifier.stats.dropped
            pending_while_down = notifier.pending
            failures_at_stop = notifier.stats.failures
            await asyncio.sleep(0.5)  # reconnect attempts keep failing meanwhile
            failures_later = notifier.stats.failures

            await asyncio.to_thread(broker.start)
            await _wait_until(lambda: notifier.stats.published == 6, 10, "the queue to drain")
            async with _listen(broker.host, broker.port, prefix) as inbox:
                await inbox.wait_until(lambda: "online" in inbox.states(), 5, "online again")
                for batch in (51, 52, 53):
                    notifier.notify(_commit(batch))
                await inbox.wait_until(lambda: inbox.batches()[-3:] == [51, 52, 53], 5, "new")

    assert slowest < 0.05  # encoding and a deque append: microseconds
    assert (dropped_while_down, pending_while_down) == (45, 5)
    assert failures_at_stop >= 1
    assert failures_later > failures_at_stop
    assert notifier.stats.connects == 2
    assert notifier.stats.published == 9
    assert inbox.states() == ["online"]  # retained: published before we subscribed
    assert inbox.batches() == [51, 52, 53]


async def test_the_oldest_are_dropped_and_the_rest_arrive_in_order(
    mosquitto: MosquittoBroker,
) -> None:
    """The notifier reaches the broker through a proxy we cut; the subscriber stays connected,
    so it sees the broker's will, every surviving notification, and the return."""
    prefix = _prefix()
    with FaultProxy(mosquitto.host, mosquitto.port) as proxy:
        cfg = _config(proxy.host, proxy.port, prefix, queue_size=4)
        async with (
            _listen(mosquitto.host, mosquitto.port, prefix) as inbox,
            Notifier(cfg) as notifier,
        ):
            await inbox.wait_until(lambda: inbox.states() == ["online"], 5, "online")
            proxy.refuse(True)
            proxy.cut_all()
            await inbox.wait_until(lambda: inbox.states() == ["online", "offline"], 5, "will")
            await _wait_until(lambda: not notifier.connected, 5, "the loss to be noticed")
            for batch in range(10):
                notifier.notify(_commit(batch))
            assert notifier.stats.dropped == 6
            # at least one reconnect is refused while the notifications wait
            await _wait_until(lambda: notifier.stats.failures >= 2, 5, "a refused reconnect")
            proxy.refuse(False)
            await inbox.wait_until(lambda: len(inbox.batches()) == 4, 5, "the survivors")
            states_before_close = inbox.states()

    assert states_before_close == ["online", "offline", "online"]
    assert inbox.batches() == [6, 7, 8, 9]
    assert notifier.stats.published == 4
    assert notifier.stats.connects == 2
    assert notifier.stats.failures >= 2  # the cut, and at least one refused reconnect


async def test_a_cancelled_notifier_leaves_status_offline(mosquitto: MosquittoBroker) -> None:
    prefix = _prefix()
    notifier = Notifier(_config(mosquitto.host, mosquitto.port, prefix))
    async with _listen(mosquitto.host, mosquitto.port, prefix) as inbox:
        task = asyncio.create_task(notifier.run())
        await inbox.wait_until(lambda: inbox.states() == ["online"], 5, "online")
        task.cancel()  # as a failing TaskGroup does to its other tasks
        done, _ = await asyncio.wait({task}, timeout=3)
        await inbox.wait_until(lambda: inbox.states() == ["online", "offline"], 5, "offline")
    async with _listen(mosquitto.host, mosquitto.port, prefix) as late:
        await late.wait_until(lambda: len(late.on("status")) == 1, 5, "retained status")

    assert done == {task}
    assert task.cancelled()
    assert not notifier.connected
    assert late.on("status")[0].retain is True
    assert late.states() == ["offline"]


_CHILD = """
import asyncio, sys
from replicator.config import MqttConfig
from replicator.notify import Notifier
host, port, prefix, client_id = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
cfg = MqttConfig(enabled=True, host=host, port=port, topic_prefix=prefix, client_id=client_id,
                 keepalive=2, timeout=5, reconnect_initial_delay=0.05, reconnect_max_delay=0.2)
asyncio.run(Notifier(cfg).run())
"""


async def test_last_will_says_offline_when_the_process_hangs_or_dies(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    prefix = _prefix()
    client_id = f"notify-child-{uuid.uuid4().hex[:8]}"
    keepalive = 2
    stderr = tmp_path / "child.stderr"
    with stderr.open("wb") as err:
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, mosquitto.host, str(mosquitto.port), prefix, client_id],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        async with _listen(mosquitto.host, mosquitto.port, prefix) as inbox:
            await inbox.wait_until(lambda: inbox.states() == ["online"], 10, "child online")
            # Frozen: the socket stays open, so only the keepalive can expose it.
            os.kill(child.pid, signal.SIGSTOP)
            frozen_at = time.monotonic()
            # the broker gives up after 1.5 x keepalive; its check runs on a timer of its own
            await inbox.wait_until(lambda: len(inbox.states()) == 2, 6 * keepalive, "will")
            will_after = time.monotonic() - frozen_at
            # Thawed, it finds its connection gone and comes back.
            os.kill(child.pid, signal.SIGCONT)
            await inbox.wait_until(lambda: len(inbox.states()) == 3, 5, "online again")
            # Killed: the kernel closes the socket and the broker sends the will at once.
            kill_process(child)
            killed_at = time.monotonic()
            await inbox.wait_until(lambda: len(inbox.states()) == 4, keepalive, "will on kill")
            kill_will_after = time.monotonic() - killed_at
        async with _listen(mosquitto.host, mosquitto.port, prefix) as late:
            await late.wait_until(lambda: len(late.on("status")) == 1, 5, "retained status")
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGCONT)
        kill_process(child)

    assert inbox.states() == ["online", "offline", "online", "offline"], stderr.read_text()
    assert will_after >= keepalive  # it took the keepalive (1.5 x 2 s) to notice
    assert kill_will_after < 1.5 * keepalive
    retained = late.on("status")[0]
    assert retained.retain is True
    assert _json(retained) == {
        "client_id": client_id,
        "state": "offline",
        "version": _json(inbox.on("status")[0])["version"],
    }


async def test_secrets_stay_out_of_logs_errors_and_payloads(
    mosquitto: MosquittoBroker, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix = _prefix()
    caplog.set_level(logging.DEBUG, logger="mqtt")  # paho's own log, via aiomqtt
    events = captured_log(monkeypatch, notify).entries
    with FaultProxy(mosquitto.host, mosquitto.port) as proxy:
        proxy.refuse(True)
        cfg = _config(
            proxy.host, proxy.port, prefix, username="replicator", password=Secret(SECRET)
        )
        async with (
            _listen(mosquitto.host, mosquitto.port, prefix) as inbox,
            Notifier(cfg) as notifier,
        ):
            await _wait_until(lambda: notifier.stats.failures >= 1, 5, "a refused connect")
            error = notifier.stats.last_error
            proxy.refuse(False)
            notifier.notify(_commit(1))
            await inbox.wait_until(lambda: inbox.batches() == [1], 5, "the commit")
            text_while_running = f"{notifier!r} {notifier.stats!r} {cfg!r}"

    logged = f"{events!r} {caplog.text}"
    received = b"".join(m.payload for m in inbox.messages if isinstance(m.payload, bytes))
    assert {e["event"] for e in events} >= {
        "mqtt password sent without TLS",  # said once, at the start
        "mqtt connect failed",
        "mqtt connected",
    }
    assert "CONNECT" in caplog.text  # paho did log the handshake
    assert error
    for text in (logged, error, text_while_running):
        assert SECRET not in text
    assert SECRET.encode() not in received


_RESET_CHILD = """
import asyncio, logging, sys
from replicator.config import MqttConfig, Secret
from replicator.logs import configure
from replicator.notify import Notifier
from tests.harness.proxy import FaultProxy
from tests.logs import captured_log

async def main(host: str, port: int, prefix: str, password: str) -> None:
    configure(json_output=True, level=logging.DEBUG)
    with FaultProxy(host, port) as proxy:
        cfg = MqttConfig(enabled=True, host=proxy.host, port=proxy.port, topic_prefix=prefix,
                         username="replicator", password=Secret(password), keepalive=5,
                         timeout=2.0, reconnect_initial_delay=0.05, reconnect_max_delay=0.2)
        async with Notifier(cfg) as notifier:
            for _ in range(3):
                while not notifier.connected:
                    await asyncio.sleep(0.02)
                await asyncio.to_thread(proxy.cut_all)  # RST: paho logs the failed receive
                while notifier.connected:
                    await asyncio.sleep(0.02)
            notifier.notify({"batch": 1})
            while notifier.stats.published == 0:
                await asyncio.sleep(0.02)

asyncio.run(asyncio.wait_for(main(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]), 30))
"""


def test_library_log_lines_are_json_too_and_hold_no_secret(mosquitto: MosquittoBroker) -> None:
    """paho-mqtt logs a reset connection through the standard logging (logger "mqtt"): with
    replicator's logging configured, that is a JSON line like ours, not logging's plain text."""
    args = [mosquitto.host, str(mosquitto.port), _prefix(), SECRET]
    done = subprocess.run(
        [sys.executable, "-c", _RESET_CHILD, *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
        check=False,
    )
    stderr = done.stderr.decode()
    lines = [line for line in stderr.splitlines() if line.strip()]
    not_json = []
    parsed = []
    for line in lines:
        try:
            parsed.append(json.loads(line))
        except ValueError:
            not_json.append(line)
    from_paho = [e for e in parsed if e.get("logger") == "mqtt"]

    assert done.returncode == 0, stderr
    assert not_json == [], stderr
    assert len(from_paho) >= 3, stderr  # a failed receive for each of the three resets
    assert all(e["event"] and e["timestamp"] for e in from_paho)
    assert {e["level"] for e in from_paho} <= {"warning", "error", "critical"}  # no debug
    assert SECRET not in stderr


def test_payload_encoding_is_compact_sorted_and_iso() -> None:
    import datetime as dt
    from decimal import Decimal

    when = dt.datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=dt.UTC)
    data = encode_payload({"rows": 2, "batch": 1, "committed_at": when, "x": Decimal("1.50")})
    assert data == b'{"batch":1,"committed_at":"2024-05-01T12:00:00.123Z","rows":2,"x":"1.50"}'


def test_notify_never_raises_on_a_bad_payload_and_disabled_is_a_no_op() -> None:
    notifier = Notifier(_config("127.0.0.1", 1, _prefix(), queue_size=2))
    notifier.notify({"batch": object()})
    notifier.notify({"batch": float("nan")})
    assert (notifier.stats.dropped, notifier.pending) == (2, 0)
    with pytest.raises(ConfigError, match="ca_file"):
        Notifier(_config("127.0.0.1", 1, _prefix(), tls=TlsConfig(enabled=True, ca_file="/nx")))
    off = Notifier(MqttConfig())
    off.notify(_commit(1))
    assert (off.stats.dropped, off.pending) == (0, 0)


def test_mqtt_settings_load_from_yaml_and_env(tmp_path: Path) -> None:
    from replicator.config import load_config

    # the environment is passed explicitly: load_config reads nothing else
    env = {"NOTIFY_TEST_PW": SECRET}
    path = tmp_path / "c.yaml"
    path.write_text(
        "mqtt:\n  enabled: true\n  host: broker\n  username: rep\n"
        "  password_env: NOTIFY_TEST_PW\n  topic_prefix: replicator/prod\n"
    )
    mqtt = load_config(path, environ={**env, "REPLICATOR_MQTT__QUEUE_SIZE": "7"}).mqtt
    assert (mqtt.host, mqtt.port, mqtt.qos, mqtt.keepalive) == ("broker", 1883, 1, 30)
    assert (mqtt.queue_size, mqtt.topic_prefix) == (7, "replicator/prod")
    assert mqtt.password.reveal() == SECRET
    assert SECRET not in repr(mqtt)
    with pytest.raises(ConfigError, match="wildcard"):
        load_config(path, environ={**env, "REPLICATOR_MQTT__TOPIC_PREFIX": "a/+"})
    with pytest.raises(ConfigError, match="qos"):
        load_config(path, environ={**env, "REPLICATOR_MQTT__QOS": "3"})


async def test_a_renewed_ca_file_is_read_at_the_next_connection(tmp_path: Path) -> None:
    """The broker's certificate is renewed under another CA and the CA file with it: the
    running notifier reconnects with the file as it is now (it once kept the context it
    made at its start, and failed verification until a restart)."""
    from tests.live.test_preflight import Pki, _make_pki

    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    old, new = _make_pki(tmp_path / "old"), _make_pki(tmp_path / "new")
    cert, key, ca_file = (tmp_path / n for n in ("cert.pem", "key.pem", "ca.pem"))

    def serve(pki: Pki) -> None:
        cert.write_bytes(pki.server_cert.read_bytes())
        key.write_bytes(pki.server_key.read_bytes())
        ca_file.write_bytes(pki.ca.read_bytes())

    serve(old)
    broker = MosquittoBroker(extra_config=[f"certfile {cert}", f"keyfile {key}"]).start()
    tls = TlsConfig(enabled=True, ca_file=str(ca_file))
    try:
        async with Notifier(_config(broker.host, broker.port, _prefix(), tls=tls)) as notifier:
            notifier.notify(_commit(1))
            await _wait_until(lambda: notifier.stats.published == 1, 10, "published over TLS")
            await asyncio.to_thread(broker.stop)
            serve(new)
            await asyncio.to_thread(broker.start)
            notifier.notify(_commit(2))
            await _wait_until(lambda: notifier.stats.published == 2, 15, "after the renewal")
    finally:
        broker.close()
