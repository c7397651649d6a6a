"""MQTT notifications: one message per committed batch, best-effort, never in landing's way.

``Notifier.run()`` is a long-running task (put it in the service's TaskGroup). It connects with
aiomqtt and keeps a *last will* with the broker, so consumers can tell a live replicator from
a dead one by one retained topic. Then it drains a bounded in-memory queue of notifications,
in order, to ``<prefix>/commits``. On a lost broker it reconnects forever with exponential
backoff and jitter, keeping the queue; a connection lost within a few seconds (``_SETTLED``) of
its CONNACK does not reset the backoff, so a broker that accepts us and drops us at once is not
hammered. ``notify()`` only encodes and enqueues: it never waits and never raises, so a slow or
absent broker cannot hold up a commit. When the queue is full the oldest notification is
dropped and counted (``stats.dropped``). ``close()`` flushes what it can within its time
limit, publishes "stopped" and disconnects cleanly.

Topics (``<prefix>`` is ``mqtt.topic_prefix``, default ``replicator``):

``<prefix>/status`` (retained, QoS 1). JSON objects with compact separators and sorted keys:

* on every connect: ``{"client_id": "replicator-db1", "since": "2024-05-01T12:00:00.123Z",
  "state": "online", "version": "0.1.0"}``
* the last will, published by the broker when we vanish without a DISCONNECT (a crash or
  SIGKILL closes the socket: at once; a hung process or a dead network: after 1.5 x keepalive,
  MQTT 3.1.1 section 3.1.2.10): ``{"client_id": ..., "state": "offline", "version": ...}``
* on ``close()``: ``{"client_id": ..., "dropped": 0, "published": 42, "since": ...,
  "state": "stopped", "version": ...}``; when ``run()`` is cancelled instead (a hard stop, or
  ``close()`` out of time) we publish the "offline" payload ourselves, since the clean
  DISCONNECT that follows tells the broker to discard the will.

``<prefix>/commits`` (not retained, ``mqtt.qos``, default 1): exactly what ``notify()`` was
given, JSON-encoded the same way (UTF-8, sorted keys, no spaces; datetimes as ISO 8601,
Decimals and paths as strings). For a committed batch the pipeline sends::

    {"batch": 17,                                  # batch number, increasing
     "committed_at": "2024-05-01T12:00:00.123Z",   # ISO 8601 UTC (utc_now_iso())
     "end": {"file": "mysql-bin.000042", "gtid": "0-1-1234", "position": 91234},
     "rows": 1500,                                 # sum over the tables
     "tables": {"shop.orders": {"files": ["shop/orders/part-....parquet"], "rows": 1500}}}

Delivery is at least once per connection and in order: one message is in flight at a time and
it leaves the queue only when the broker acknowledges it (PUBACK at QoS 1), so a message whose
acknowledgement was lost with the connection is sent again after the reconnect. Consumers
dedupe by ``batch``. A message is tried on at most ``MAX_ATTEMPTS`` connections: one that was
in flight each time a connection was lost is dropped, logged once (its batch number and size,
not its payload) and counted in ``stats.dropped``, and the queue moves on. That is the fate of
a message the broker refuses: over MQTT 3.1.1 a broker can only close the connection, as
Mosquitto does with a packet above its ``max_packet_size``. Notifications are not durable: a
restart loses what was queued, and the manifests under the landing zone stay the source of
truth.

Call ``notify()`` and ``close()`` from the event loop's thread. Passwords go to the broker
only: they are ``Secret`` in the config and never appear in logs, errors or payloads.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import random
import socket
import ssl
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import PurePath
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Self

import structlog

from . import __version__
from .config import MqttConfig
from .errors import InternalError, ReplicatorError

if TYPE_CHECKING:
    import aiomqtt  # imported where a broker is talked to: a daemon without MQTT never loads it
from .source.connection import tls_context

__all__ = ["Notifier", "NotifierStats", "encode_payload", "utc_now_iso"]

log = structlog.get_logger("replicator.notify")

STATUS_QOS: Final = 1
# Connections a commit notification may be in flight on when they are lost before it is
# dropped (a broker that refuses a message closes the connection each time it is sent).
MAX_ATTEMPTS: Final = 3
# Seconds a connection must last for its loss to reset the reconnect backoff.
_SETTLED: Final = 5.0
# Of close()'s time limit, the share spent flushing queued notifications; the rest is kept
# for the "stopped" status and the DISCONNECT.
_FLUSH_SHARE: Final = 0.5
_CANCEL_GRACE: Final = 1.0


@dataclass(slots=True)
class NotifierStats:
    """Counters for metrics and tests (written and read on the event loop)."""

    published: int = 0  # commit notifications the broker acknowledged (sent, at QoS 0)
    # pushed out of a full queue, unencodable, in flight on MAX_ATTEMPTS lost connections,
    # or left over at close
    dropped: int = 0
    connects: int = 0  # successful connections (CONNACK accepted)
    failures: int = 0  # failed connection attempts plus lost connections
    connected: bool = False
    last_error: str = ""


@dataclass(slots=True, eq=False)
class _Message:
    """One queued notification: its wire form, its batch number (for logs), its tries."""

    data: bytes
    batch: object
    attempts: int = 0  # connections lost while it was in flight


def _not_sent(exc: BaseException) -> bool:
    """aiomqtt's early out: paho did not take the message (no connection, its queue full), so
    nothing of it reached the broker."""
    import aiomqtt  # noqa: PLC0415 - loaded already: a client raised this
    import paho.mqtt.client as paho  # noqa: PLC0415

    refused = (paho.MQTT_ERR_NO_CONN, paho.MQTT_ERR_QUEUE_SIZE)
    return isinstance(exc, aiomqtt.MqttCodeError) and exc.rc in refused


def utc_now_iso() -> str:
    """Now as ISO 8601 UTC with milliseconds and a ``Z``: ``2024-05-01T12:00:00.123Z``."""
    return _iso(dt.datetime.now(dt.UTC))


def _iso(value: dt.datetime) -> str:
    if value.tzinfo is not None and value.utcoffset() == dt.timedelta(0):
        return value.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return value.isoformat()


def _json_default(value: object) -> object:
    if isinstance(value, dt.datetime):
        return _iso(value)
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (Decimal, PurePath)):
        return str(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"a {type(value).__name__} cannot go into a notification")


def encode_payload(payload: Mapping[str, Any]) -> bytes:
    """The wire form of a notification: compact JSON, keys sorted, UTF-8."""
    return json.dumps(
        payload,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
        default=_json_default,
    ).encode("utf-8")


class Notifier:
    """Publishes commit notifications to MQTT; see the module docstring for the contract.

    Use ``run()`` as a task and ``close()`` at shutdown, or ``async with Notifier(cfg) as n``,
    which does both. With ``cfg.enabled`` false, ``notify()`` does nothing and ``run()`` just
    waits for ``close()``.
    """

    def __init__(self, cfg: MqttConfig) -> None:
        self.cfg = cfg
        self.stats = NotifierStats()
        self.client_id = cfg.client_id or f"replicator-{socket.gethostname()}"
        self.status_topic = f"{cfg.topic_prefix}/status"
        self.commits_topic = f"{cfg.topic_prefix}/commits"
        # Built now so a bad CA or key file is a ConfigError at start-up, not a retry loop;
        # each connection asks again (a renewed file is read then: ``tls_context``).
        self._tls: ssl.SSLContext | None = (
            tls_context(cfg.tls) if cfg.enabled and cfg.tls.enabled else None
        )
        self._queue: deque[_Message] = deque()
        self._in_flight: _Message | None = None  # published, not yet acknowledged
        self._wakeup = asyncio.Event()
        self._closing = asyncio.Event()
        self._close_started = 0.0
        self._close_timeout = 0.0
        self._task: asyncio.Task[None] | None = None
        self._running = False
        self._finished = False
        self._dropping = False  # a drop was logged; quiet until a publish succeeds again
        self._session_connected = False  # the current/last session got its CONNACK
        self._connected_at = 0.0  # loop time of that CONNACK

    def __repr__(self) -> str:
        return (
            f"<Notifier {self.client_id} -> {self.cfg.host}:{self.cfg.port} "
            f"{self.cfg.topic_prefix}/ connected={self.stats.connected}>"
        )

    @property
    def pending(self) -> int:
        """Notifications waiting to be sent (not counting the one in flight)."""
        return len(self._queue)

    @property
    def connected(self) -> bool:
        return self.stats.connected

    # -- producer side ------------------------------------------------------------------------

    def notify(self, payload: Mapping[str, Any]) -> None:
        """Queue one notification for ``<prefix>/commits``. Never blocks, never raises."""
        if not self.cfg.enabled:
            return
        if self._finished:
            self.stats.dropped += 1
            return
        try:
            data = encode_payload(payload)
            batch = payload.get("batch")
        except Exception as exc:
            self.stats.dropped += 1
            log.error("notification dropped: not encodable as JSON", error=str(exc))
            return
        if len(self._queue) >= self.cfg.queue_size:
            self._queue.popleft()
            self.stats.dropped += 1
            if not self._dropping:
                self._dropping = True
                log.warning(
                    "mqtt notification queue full: dropping the oldest",
                    queue_size=self.cfg.queue_size,
                    connected=self.stats.connected,
                )
        self._queue.append(_Message(data, batch))
        self._wakeup.set()

    def _requeue(self, message: _Message) -> None:
        """Put the message that was in flight back at the head, unless it must be dropped."""
        if len(self._queue) >= self.cfg.queue_size:
            self.stats.dropped += 1  # it is the oldest of them all
        else:
            self._queue.appendleft(message)

    def _lost_in_flight(self, error: str) -> None:
        """The connection was lost: count a try of the message in flight, if there was one,
        and drop it (it is back at the head of the queue) after MAX_ATTEMPTS."""
        message, self._in_flight = self._in_flight, None
        if message is None:
            return
        message.attempts += 1
        if message.attempts < MAX_ATTEMPTS or not self._queue or self._queue[0] is not message:
            return  # to be sent again, or already pushed out of a full queue (and counted)
        self._queue.popleft()
        self.stats.dropped += 1
        log.warning(
            "mqtt notification dropped: the connection was lost each time it was sent",
            batch=message.batch,
            bytes=len(message.data),
            attempts=message.attempts,
            error=error,
            hint="a broker closes the connection on a message it refuses, e.g. one larger "
            "than its maximum packet size; the notifications after it go on",
        )

    # -- the connection task ------------------------------------------------------------------

    async def run(self) -> None:
        """Connect, publish, reconnect with backoff; return after ``close()``."""
        if self._running:
            raise InternalError("Notifier.run() is already running")
        self._running = True
        if self._task is None:
            self._task = asyncio.current_task()
        try:
            if not self.cfg.enabled:
                await self._closing.wait()
                return
            if self.cfg.password and self._tls is None:
                log.warning(
                    "mqtt password sent without TLS",
                    broker=f"{self.cfg.host}:{self.cfg.port}",
                    hint="MQTT's CONNECT carries the password as it is: set mqtt.tls.enabled "
                    "unless the network to the broker is trusted",
                )
            await self._connect_forever()
        finally:
            self.stats.connected = False
            self._finished = True
            if self._queue:
                self.stats.dropped += len(self._queue)
                log.warning("mqtt notifications not sent at shutdown", dropped=len(self._queue))
                self._queue.clear()

    async def _connect_forever(self) -> None:
        import aiomqtt  # noqa: PLC0415 - only with a broker (module's TYPE_CHECKING import)

        cfg = self.cfg
        loop = asyncio.get_running_loop()
        delay = cfg.reconnect_initial_delay
        streak = 0  # failures since the last successful connect
        while not self._closing.is_set():
            try:
                await self._session()
                return
            except (aiomqtt.MqttError, OSError, ReplicatorError) as exc:  # (a renewed TLS file)
                error = _describe(exc)
                self.stats.connected = False
                self.stats.failures += 1
                self.stats.last_error = error
                self._lost_in_flight(error)
            if self._closing.is_set():
                return
            if self._session_connected:
                streak = 0  # a lost connection is news: logged as a warning
                if loop.time() - self._connected_at >= _SETTLED:
                    delay = cfg.reconnect_initial_delay  # it held: back off afresh
            streak += 1
            if streak == 1:
                log.warning(
                    "mqtt connection lost" if self._session_connected else "mqtt connect failed",
                    broker=f"{cfg.host}:{cfg.port}",
                    error=error,
                    hint="notifications queue up (oldest dropped when full); retrying",
                )
            else:
                log.debug("mqtt connect failed", error=error, attempt=streak)
            pause = delay / 2 + random.uniform(0, delay / 2)  # jitter, not cryptography
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), timeout=pause)
            delay = min(delay * 2, cfg.reconnect_max_delay)

    async def _session(self) -> None:
        """One connection: online, drain until closing, stopped. Raises MqttError when lost."""
        import aiomqtt  # noqa: PLC0415 - only with a broker

        cfg = self.cfg
        self._session_connected = False
        self._in_flight = None
        tls = None if self._tls is None else tls_context(cfg.tls)  # files renewed: read again
        client = aiomqtt.Client(
            cfg.host,
            cfg.port,
            identifier=self.client_id,
            username=cfg.username,
            password=cfg.password.reveal() if cfg.username and cfg.password else None,
            will=aiomqtt.Will(
                self.status_topic, self._status("offline"), qos=STATUS_QOS, retain=True
            ),
            clean_session=True,
            keepalive=cfg.keepalive,
            timeout=cfg.timeout,
            tls_context=tls,
        )
        async with client:
            self._session_connected = True
            self._connected_at = asyncio.get_running_loop().time()
            self.stats.connected = True
            self.stats.connects += 1
            try:
                await client.publish(
                    self.status_topic,
                    self._status("online", since=utc_now_iso()),
                    qos=STATUS_QOS,
                    retain=True,
                )
                log.info(
                    "mqtt connected",
                    broker=f"{cfg.host}:{cfg.port}",
                    client_id=self.client_id,
                    pending=len(self._queue),
                )
                await self._drain_until_closing(client)
            except asyncio.CancelledError:
                # Cancelled (the service is going down hard, or close() ran out of time):
                # leaving `async with client` sends a clean DISCONNECT, which cancels the will,
                # so say "offline" ourselves, briefly, before it does.
                with contextlib.suppress(aiomqtt.MqttError):
                    await client.publish(
                        self.status_topic,
                        self._status("offline"),
                        qos=STATUS_QOS,
                        retain=True,
                        timeout=min(self.cfg.timeout, _CANCEL_GRACE),
                    )
                raise
            await client.publish(
                self.status_topic,
                self._status(
                    "stopped",
                    since=utc_now_iso(),
                    published=self.stats.published,
                    dropped=self.stats.dropped + len(self._queue),
                ),
                qos=STATUS_QOS,
                retain=True,
                timeout=self._close_time_left(self._close_timeout),
            )
        self.stats.connected = False

    async def _drain_until_closing(self, client: aiomqtt.Client) -> None:
        """Publish from the queue while watching the connection; raise MqttError if it drops."""
        watch = asyncio.create_task(_watch(client), name="mqtt-watch")
        drain = asyncio.create_task(self._drain(client), name="mqtt-drain")
        try:
            done, _ = await asyncio.wait((watch, drain), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (watch, drain):
                task.cancel()
            await asyncio.gather(watch, drain, return_exceptions=True)
        if drain in done:
            drain.result()  # returns when closing and flushed; raises MqttError when lost
        else:
            watch.result()  # raises MqttError: the connection is gone

    async def _drain(self, client: aiomqtt.Client) -> None:
        while True:
            if not self._queue:
                if self._closing.is_set():
                    return
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            timeout: float | None = None
            if self._closing.is_set():
                budget = self._close_timeout * _FLUSH_SHARE
                timeout = self._close_time_left(budget)
                if timeout <= 0:
                    self.stats.dropped += len(self._queue)
                    log.warning("mqtt close: no time left to flush", dropped=len(self._queue))
                    self._queue.clear()
                    return
            message = self._queue.popleft()
            self._in_flight = message
            try:
                await client.publish(
                    self.commits_topic, message.data, qos=self.cfg.qos, timeout=timeout
                )
            except BaseException as exc:
                if _not_sent(exc):  # paho refused it before writing: no try of the broker's
                    self._in_flight = None
                self._requeue(message)  # _lost_in_flight() counts the try if the session is lost
                raise
            self._in_flight = None
            self.stats.published += 1
            self._dropping = False

    def _close_time_left(self, budget: float) -> float:
        """Seconds left of ``budget`` counted from close(); cfg.timeout before close()."""
        if not self._closing.is_set():
            return self.cfg.timeout
        elapsed = asyncio.get_running_loop().time() - self._close_started
        return min(self.cfg.timeout, budget - elapsed)

    def _status(self, state: str, **extra: object) -> bytes:
        body: dict[str, object] = {
            "client_id": self.client_id,
            "state": state,
            "version": __version__,
        }
        body.update(extra)
        return encode_payload(body)

    # -- shutdown -----------------------------------------------------------------------------

    async def close(self, *, timeout: float) -> None:
        """Flush (up to half of ``timeout``), publish "stopped", disconnect; return in time.

        When ``run()`` has not finished within ``timeout`` it is cancelled.
        """
        if not self._closing.is_set():
            self._close_started = asyncio.get_running_loop().time()
            self._close_timeout = max(timeout, 0.0)
            self._closing.set()
        self._wakeup.set()
        task = self._task
        if task is None or task.done() or task is asyncio.current_task():
            self._finished = True
            return
        done, _ = await asyncio.wait({task}, timeout=max(timeout, 0.0))
        if not done:
            log.warning("mqtt close timed out: cancelling the notifier", timeout=timeout)
            task.cancel()
            await asyncio.wait({task}, timeout=_CANCEL_GRACE)

    async def __aenter__(self) -> Self:
        if self._task is None:
            self._task = asyncio.create_task(self.run(), name="mqtt-notifier")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close(timeout=self.cfg.timeout)


def _describe(exc: BaseException) -> str:
    """The error and its cause in one line (aiomqtt wraps the socket error it saw)."""
    text = str(exc) or type(exc).__name__
    cause = exc.__cause__
    if cause is not None and str(cause) and str(cause) not in text:
        text = f"{text}: {cause}"
    return text


async def _watch(client: aiomqtt.Client) -> None:
    """Return never; raise MqttError once the connection is gone (we subscribe to nothing)."""
    import aiomqtt  # noqa: PLC0415 - only with a broker

    async for _ in client.messages:
        pass
    raise aiomqtt.MqttError("the message stream ended")
