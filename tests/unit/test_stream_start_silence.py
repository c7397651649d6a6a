"""The replica stream's silence rule at the start of a dump, over a real socket pair fed with
captured events: the server sends a new file's preamble, then reads its binlog up to the start
position without sending anything (no heartbeats either) for as long as that takes. That
silence is not a dead server; the heartbeat rule (2x the period) applies from the first event
past the start."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time

import pytest

from replicator.binlog.constants import CHECKSUM_CRC32, EventType
from replicator.binlog.position import StreamPosition
from replicator.config import Secret, SourceConfig
from replicator.source import stream as stream_module
from replicator.source.errors import SourceUnavailableError
from replicator.source.stream import ReplicaStream

from .test_stream import SAMPLE, _artificial_rotate, _packets, _raw_events

START = StreamPosition("mariadb-full-metadata.000001", 4)


def _serve(peer: socket.socket, gap: float) -> None:
    """The preamble, ``gap`` seconds of nothing, then the first transaction's events; then
    the server closes the connection."""
    events = [event for _, event in _raw_events(SAMPLE.read_bytes())]
    preamble = [e for e in events if e[4] in stream_module._PREAMBLE]
    rest = [e for e in events if e[4] not in stream_module._PREAMBLE][:3]
    assert rest[0][4] == EventType.MARIADB_GTID  # the start position's first transaction
    sequence = 1
    out = bytearray()
    for event in [_artificial_rotate(START.file.encode(), 4), *preamble]:
        framed, sequence = _packets(b"\x00" + event, sequence)
        out += framed
    peer.sendall(out)
    time.sleep(gap)
    out = bytearray()
    for event in rest:
        framed, sequence = _packets(b"\x00" + event, sequence)
        out += framed
    with contextlib.suppress(OSError):  # the reader may have given up already
        peer.sendall(out)
        time.sleep(0.2)
    peer.close()


async def _read(gap: float) -> BaseException:
    cfg = SourceConfig(user="repl", password=Secret("x"), heartbeat_seconds=0.25)  # 1 s floor
    reader = ReplicaStream(cfg, START, stop_at_end=False)
    reader._loop = asyncio.get_running_loop()
    reader._queue = asyncio.Queue()
    ours, peer = socket.socketpair()
    ours.settimeout(max(1.0, 2 * cfg.heartbeat_seconds))  # as the connect leaves it
    server = threading.Thread(target=_serve, args=(peer, gap), daemon=True)
    server.start()
    try:
        with pytest.raises(SourceUnavailableError) as ended:
            await asyncio.to_thread(reader._read, ours, START, CHECKSUM_CRC32, None)
    finally:
        ours.close()
        server.join(10)
    return ended.value


async def test_a_long_scan_to_the_start_is_not_a_silent_server() -> None:
    ended = await _read(gap=2.0)  # twice the heartbeat rule's 1 s
    assert "closed the replication connection" in str(ended)


async def test_a_scan_that_never_ends_is_still_noticed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream_module, "START_SCAN_SECONDS", 1.5)
    ended = await _read(gap=4.0)
    assert "no event past the start position for 1.5 s" in str(ended)
