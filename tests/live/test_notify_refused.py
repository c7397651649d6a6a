"""A notification the broker refuses (``replicator.notify``): dropped, not retried forever.

Over MQTT 3.1.1 a broker refuses a message by closing the connection: Mosquitto does so with
a packet above its ``max_packet_size``. The notifier sends that message again after each
reconnect, up to ``MAX_ATTEMPTS`` connections, then drops it (logged once, counted) and the
ones after it go on; connections that die right after their CONNACK back off as failed
connects do, instead of reconnecting at the initial delay each time.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

import pytest

from replicator import notify
from replicator.notify import MAX_ATTEMPTS, Notifier, encode_payload
from tests.harness.mosquitto import MosquittoBroker
from tests.live.test_notify import _commit, _config, _listen, _prefix, _wait_until
from tests.logs import captured_log

pytestmark = pytest.mark.mqtt

MAX_PACKET = 4096


def _limited_broker() -> MosquittoBroker:
    """A broker of its own that closes the connection of a client sending a larger packet."""
    return MosquittoBroker(extra_config=[f"max_packet_size {MAX_PACKET}"])


def _big_commit(batch: int) -> dict[str, Any]:
    """A batch over 100 tables: one entry and file each, some 9 KB of JSON."""
    body = _commit(batch)
    body["tables"] = {
        f"shop.table_{n:04d}": {
            "rows": 1,
            "files": [f"shop/table_{n:04d}/part-{batch:020d}.parquet"],
        }
        for n in range(100)
    }
    return body


async def test_a_notification_the_broker_refuses_is_dropped_and_the_rest_arrive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    prefix = _prefix()
    events = captured_log(monkeypatch, notify).entries
    with _limited_broker() as broker:
        cfg = _config(broker.host, broker.port, prefix, queue_size=100)
        async with (
            _listen(broker.host, broker.port, prefix) as inbox,
            Notifier(cfg) as notifier,
        ):
            await inbox.wait_until(lambda: inbox.states() == ["online"], 5, "online")
            notifier.notify(_commit(1))
            notifier.notify(_big_commit(2))
            for batch in (3, 4, 5):
                notifier.notify(_commit(batch))
            await inbox.wait_until(lambda: 5 in inbox.batches(), 10, "the batches after 2")
            # the subscriber may have batch 5 before the notifier has its PUBACK
            await _wait_until(lambda: notifier.stats.published == 4, 5, "the last PUBACK")
            stats = notifier.stats
            counts = (stats.published, stats.dropped, stats.connects, stats.failures)
            pending = notifier.pending
            states = inbox.states()

    dropped = [e for e in events if e["event"].startswith("mqtt notification dropped")]
    assert len(encode_payload(_big_commit(2))) > MAX_PACKET
    assert inbox.batches() == [1, 3, 4, 5]
    assert counts == (4, 1, 1 + MAX_ATTEMPTS, MAX_ATTEMPTS)
    assert pending == 0
    # one online per connection, one will per connection the broker closed: no flapping
    assert states == ["online", "offline"] * MAX_ATTEMPTS + ["online"]
    assert len(dropped) == 1
    assert dropped[0]["batch"] == 2
    assert dropped[0]["attempts"] == MAX_ATTEMPTS
    assert dropped[0]["bytes"] > MAX_PACKET
    assert dropped[0]["log_level"] == "warning"
    assert "shop.table_" not in repr(events)  # the payload is not logged


async def test_connections_lost_at_once_do_not_reset_the_backoff() -> None:
    """Each connection dies as soon as the big message goes out: the pauses between the
    connects grow as for failed connects (delay, 2 x delay, 4 x delay, each jittered down to
    half at most), instead of starting again at the initial delay after every CONNACK."""
    delay = 0.3
    prefix = _prefix()
    with _limited_broker() as broker:
        cfg = _config(
            broker.host,
            broker.port,
            prefix,
            reconnect_initial_delay=delay,
            reconnect_max_delay=10.0,
        )
        async with Notifier(cfg) as notifier:
            await _wait_until(lambda: notifier.connected, 5, "the notifier to connect")
            notifier.notify(_big_commit(1))
            notifier.notify(_commit(2))
            connected_at = [time.monotonic()]  # of the connects so far (one)
            deadline = time.monotonic() + 15
            while len(connected_at) <= MAX_ATTEMPTS and time.monotonic() < deadline:
                await asyncio.sleep(0.005)
                if notifier.stats.connects > len(connected_at):
                    connected_at.append(time.monotonic())
            await _wait_until(lambda: notifier.stats.published == 1, 5, "batch 2")
            stats = notifier.stats
            counts = (stats.published, stats.dropped, stats.connects)

    gaps = [later - earlier for earlier, later in itertools.pairwise(connected_at)]
    assert counts == (1, 1, 1 + MAX_ATTEMPTS)
    assert len(gaps) == MAX_ATTEMPTS
    # the pause before the last reconnect is at least 2 x delay with a growing backoff; a
    # backoff reset by every CONNACK keeps it at delay at most
    assert gaps[-1] >= 1.5 * delay, gaps


class _GoneBeforeSending:
    """A client whose connection paho has already seen go: publish is aiomqtt's early out
    (paho's MQTT_ERR_NO_CONN), and nothing is written."""

    async def publish(self, *args: object, **kwargs: object) -> None:
        import aiomqtt
        import paho.mqtt.client as paho

        raise aiomqtt.MqttCodeError(paho.MQTT_ERR_NO_CONN, "Could not publish message")


async def test_a_message_paho_never_sent_is_no_try() -> None:
    """Only a connection lost while the broker could have had the message counts against it:
    one paho refused to send (the socket already gone) is kept however often that happens."""
    notifier = Notifier(_config("127.0.0.1", 1, _prefix()))
    notifier.notify(_commit(1))
    for _ in range(MAX_ATTEMPTS + 1):  # sessions, each lost at its first publish
        with pytest.raises(Exception, match="not currently connected"):
            # (with the message dropped, a drain would wait for the next one: bounded)
            await asyncio.wait_for(notifier._drain(_GoneBeforeSending()), 5)  # type: ignore[arg-type]
        notifier._lost_in_flight("connection lost")
    assert (notifier.pending, notifier.stats.dropped) == (1, 0)
