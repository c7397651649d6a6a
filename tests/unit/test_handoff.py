"""``source.handoff``: the reader thread hands items to the loop in order, never more than the
room allows (in items and in row images), waits while the loop is behind and is woken when
the loop has taken half the room, not by its wait's timeout; ``stop`` ends a reader waiting
for room."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import cast

import pytest

from replicator.binlog.transaction import TransactionPart
from replicator.source.handoff import End, HandOff
from replicator.source.items import StreamItem

ROOM = 3
BYTES = 1 << 40  # no bound in bytes, where the test is of another
ITEMS = 300


async def _take_all(
    handoff: HandOff, stopping: threading.Event, reader: Callable[[], None]
) -> tuple[list[StreamItem], list[int]]:
    """Run ``reader`` on a thread and take every item as a consumer slower than it: the items,
    and how many stood in the queue before each take. A stalled hand-over fails here within
    seconds (the reader is stopped), rather than hanging the test."""
    assert handoff.queue is not None
    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    got: list[StreamItem] = []
    queued: list[int] = []
    try:
        while True:
            await asyncio.sleep(0.002)
            queued.append(handoff.queue.qsize())
            got.append(await asyncio.wait_for(handoff.get(), 10))
    except StopAsyncIteration:
        pass
    finally:
        stopping.set()
        handoff.stop()
        await asyncio.to_thread(thread.join, 10)  # the reader's last flush needs the loop
    assert not thread.is_alive()
    return got, queued


@pytest.mark.parametrize("batched", [False, True], ids=["one-by-one", "batched"])
async def test_the_loop_gets_every_item_in_order_within_the_room(batched: bool) -> None:
    stopping = threading.Event()
    handoff = HandOff(stopping, queue_size=ROOM, row_budget=1000, byte_budget=BYTES)
    handoff.open()
    items = [cast(StreamItem, object()) for _ in range(ITEMS)]
    refused: list[int] = []

    def reader() -> None:
        for n, item in enumerate(items):
            if not handoff.deliver(item, now=not batched):
                refused.append(n)
            if batched and n % 7 == 6:  # as the stream flushes once per read from the socket
                handoff.flush()
        handoff.deliver(End())

    started = time.monotonic()
    got, queued = await _take_all(handoff, stopping, reader)
    took = time.monotonic() - started
    assert refused == []
    assert got == items
    assert max(queued) <= ROOM
    # a reader that waits for room is woken when the loop has taken half of it, not by its
    # wait's half-second timeout (which would make this take a minute)
    assert took < 10, took


class _Sized(TransactionPart):
    """A part of a large transaction that counts ``index`` row images of ``position`` binlog
    bytes (only the counts matter to the hand-over)."""

    __slots__ = ()

    @property
    def row_count(self) -> int:
        return self.index

    @property
    def row_bytes(self) -> int:
        return self.position


async def test_row_images_are_bounded_and_one_item_always_gets_through() -> None:
    budget = 100
    stopping = threading.Event()
    handoff = HandOff(stopping, queue_size=1000, row_budget=budget, byte_budget=BYTES)
    handoff.open()
    sizes = [40, 30, 20, 500, 10, 60, 45, 99, 1, 250, 5] * 5
    items = [_Sized(None, rows, (), "f", 0, 0) for rows in sizes]
    # the parts of 250 and 500 rows, over the budget, go through (alone)
    await _within_budget(handoff, stopping, items, sizes, budget)


async def test_wide_rows_are_bounded_by_their_bytes() -> None:
    """A few rows of 32 KiB each: the row budget alone would let all of them wait."""
    budget = 1 << 20
    stopping = threading.Event()
    handoff = HandOff(stopping, queue_size=1000, row_budget=100_000, byte_budget=budget)
    handoff.open()
    sizes = [32 << 10, 32 << 10, 600 << 10, 3 << 20, 32 << 10, 900 << 10, 100 << 10] * 4
    items = [_Sized(None, 1, (), "f", size, 0) for size in sizes]
    await _within_budget(handoff, stopping, items, sizes, budget)


async def _within_budget(
    handoff: HandOff,
    stopping: threading.Event,
    items: list[_Sized],
    sizes: list[int],
    budget: int,
) -> None:
    """Every item comes through in order, and what stood in the queue before each take was
    within the ``budget`` (of ``sizes``), or one item alone; and the queue filled up."""

    def reader() -> None:
        for item in items:
            handoff.deliver(item)
        handoff.deliver(End())

    got, queued = await _take_all(handoff, stopping, reader)
    assert got == items
    standing = [sizes[taken : taken + count] for taken, count in enumerate(queued)]
    assert [size for size in standing if sum(size) > budget and len(size) > 1] == []
    assert max(sum(size) for size in standing if len(size) > 1) > budget // 2


async def test_stop_ends_a_reader_waiting_for_room() -> None:
    stopping = threading.Event()
    handoff = HandOff(stopping, queue_size=1, row_budget=1000, byte_budget=BYTES)
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


async def test_a_reader_waiting_for_room_says_it_is_backed_up() -> None:
    """While the reader holds an item the loop has no room for, it reads nothing from the
    source: ``backed_up`` says so (the metrics do not take that silence for the source's)."""
    stopping = threading.Event()
    handoff = HandOff(stopping, queue_size=1, row_budget=1000, byte_budget=BYTES)
    handoff.open()
    first, second = (cast(StreamItem, object()) for _ in range(2))
    loop = asyncio.get_running_loop()  # (deliver runs on the reader's thread, never the loop's)
    assert await loop.run_in_executor(None, handoff.deliver, first)  # the room taken
    assert not handoff.backed_up
    delivered = loop.run_in_executor(None, handoff.deliver, second)
    for _ in range(200):
        if handoff.backed_up:
            break
        await asyncio.sleep(0.01)
    assert handoff.backed_up and not delivered.done()
    assert await handoff.get() is first  # room again
    assert await asyncio.wait_for(delivered, 5) is True
    assert not handoff.backed_up
    assert await handoff.get() is second
