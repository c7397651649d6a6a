"""``source.handoff``: the reader thread hands items to the loop in order, never more than the
room allows, waits while the loop is behind and is woken as soon as the loop takes one."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import cast

import pytest

from replicator.source.handoff import End, HandOff
from replicator.source.items import StreamItem

ROOM = 3
ITEMS = 300


@pytest.mark.parametrize("batched", [False, True], ids=["one-by-one", "batched"])
async def test_the_loop_gets_every_item_in_order_within_the_room(batched: bool) -> None:
    stopping = threading.Event()
    handoff = HandOff(stopping, queue_size=ROOM, row_budget=1000)
    handoff.open()
    assert handoff.queue is not None
    items = [cast(StreamItem, object()) for _ in range(ITEMS)]
    refused: list[int] = []

    def reader() -> None:
        for n, item in enumerate(items):
            if not handoff.deliver(item, now=not batched):
                refused.append(n)
            if batched and n % 7 == 6:  # as the stream flushes once per read from the socket
                handoff.flush()
        handoff.deliver(End())

    thread = threading.Thread(target=reader)
    started = time.monotonic()
    thread.start()
    got: list[StreamItem] = []
    most = 0
    try:
        while True:
            await asyncio.sleep(0.002)  # the consumer is slower than the reader
            most = max(most, handoff.queue.qsize())
            got.append(await handoff.get())
    except StopAsyncIteration:
        pass
    took = time.monotonic() - started
    await asyncio.to_thread(thread.join, 10)  # the reader's last flush needs the loop
    assert not thread.is_alive()
    assert refused == []
    assert got == items
    assert most <= ROOM
    # a reader that waits for room is woken when the loop takes an item, not by its wait's
    # half-second timeout (which would make this take a minute)
    assert took < 10, took


async def test_stop_wakes_a_reader_waiting_for_room() -> None:
    stopping = threading.Event()
    handoff = HandOff(stopping, queue_size=1, row_budget=1000)
    handoff.open()
    answers: list[bool] = []

    def reader() -> None:
        for _ in range(3):  # the second waits for room: the loop takes nothing
            answers.append(handoff.deliver(cast(StreamItem, object())))

    thread = threading.Thread(target=reader)
    thread.start()
    await asyncio.sleep(0.3)
    stopping.set()
    handoff.stop()
    await asyncio.to_thread(thread.join, 10)
    assert not thread.is_alive()
    assert answers == [True, False, False]
