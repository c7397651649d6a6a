"""The bounded hand-off of stream items from the reader thread to the event loop.

The reader thread decodes; the consumer runs on the loop. Room is counted in items, in row
images and in the binlog bytes of their rows events (``deliver``; wide rows, a few thousand of
them a hundred megabytes, are bounded by the bytes): when the consumer is slow the reader
blocks here, until half the room is free again, and stops reading its socket, so memory stays
bounded and TCP pushes back on the server. Items are handed over in batches (``flush``), once
per chunk read from the socket, and the reader waits until the loop has queued them: a round
trip per item would cost as much as decoding a small transaction, and the wait is when the
loop thread gets the GIL without contention.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading

from ..binlog.runs import TransactionRun
from ..binlog.transaction import Transaction, TransactionPart
from .items import StreamItem

__all__ = ["End", "Entry", "HandOff"]


class End:
    """Queue sentinel: the stream is over (``--stop-at-end`` reached or closed)."""


# an item, or the error or end that finishes the stream, with its row images and their bytes
Entry = tuple[StreamItem | BaseException | End, int, int]


class HandOff:
    """Reader thread -> loop, bounded by ``queue_size`` items, ``row_budget`` row images and
    ``byte_budget`` binlog bytes of rows events.

    ``stopping`` is the stream's: once set, ``deliver`` and ``flush`` give up (False) and a
    reader waiting for room is woken by ``stop``."""

    def __init__(
        self, stopping: threading.Event, *, queue_size: int, row_budget: int, byte_budget: int
    ) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        # bounded by deliver (items and row images), so putting never waits on the loop
        self.queue: asyncio.Queue[Entry] | None = None
        self.finished = False
        self._stopping = stopping
        self._queue_size = queue_size
        self._row_budget = row_budget
        self._byte_budget = byte_budget
        # What is queued is what the reader sent less what the loop took. Each counter has one
        # writer, so neither thread takes a lock to count: a reader that sees a count the loop
        # is about to raise sees less room than there is, never more. The lock is for a reader
        # waiting for room, and for the loop waking it. (This leans on the GIL: each counter
        # and the flag read whole and in program order; a free-threaded build needs a look.)
        self._sent_items = self._sent_rows = self._sent_bytes = 0  # the reader's
        self._taken_items = self._taken_rows = self._taken_bytes = 0  # the loop's
        self._reader_waits = False
        # the reader holds an item it has no room for: it reads nothing from the source until
        # the consumer takes some (metrics: the silence then is the consumer's, not the source's)
        self.backed_up = False
        self._room = threading.Condition()
        self._batch: list[Entry] = []  # see deliver

    def open(self) -> None:
        """Bind to the running loop (before the reader thread starts)."""
        self.loop = asyncio.get_running_loop()
        self.queue = asyncio.Queue()

    # -- loop side -------------------------------------------------------------------------

    async def get(self) -> StreamItem:
        """The next item; raises ``StopAsyncIteration`` at the end, or the stream's error."""
        if self.queue is None:
            raise RuntimeError("ReplicaStream.start() was not called")
        if self.finished:
            raise StopAsyncIteration
        return self._took(await self.queue.get())

    def next_ready(self) -> StreamItem | None:
        """The next item if the reader has handed it over already, else None."""
        queue = self.queue
        if queue is None or self.finished or queue.empty():
            return None
        return self._took(queue.get_nowait())

    def _took(self, entry: Entry) -> StreamItem:
        item, rows, size = entry
        self._taken_items += 1
        self._taken_rows += rows
        self._taken_bytes += size
        # read after counting: a reader that waits sees the count
        if self._reader_waits and self._half_free():
            with self._room:
                self._room.notify()
        if isinstance(item, End):
            self.finished = True
            raise StopAsyncIteration
        if isinstance(item, BaseException):
            self.finished = True
            raise item
        return item

    def stop(self) -> None:
        """Wake a reader waiting for room and drop what the consumer has not taken (after
        ``stopping`` is set)."""
        with self._room:  # unblock a reader waiting for room in the queue
            self._room.notify_all()
        if self.queue is not None:
            while not self.queue.empty():
                self.queue.get_nowait()

    # -- reader thread ---------------------------------------------------------------------

    def deliver(self, item: StreamItem | BaseException | End, *, now: bool = True) -> bool:
        """Hand an item to the loop, waiting for room. False when the stream is stopping.

        Room is counted here, in items, row images and their bytes. With ``now=False`` the
        item joins a batch that ``flush`` hands over in one go, once per chunk read from the
        socket: a round trip to the loop per transaction costs as much as decoding a small
        one."""
        rows = size = 0
        if isinstance(item, (Transaction, TransactionRun, TransactionPart)):
            rows, size = item.row_count, item.row_bytes
        if not self._has_room(rows, size) and not self._wait_for_room(rows, size):
            return False
        if self._stopping.is_set():
            return False
        self._sent_items += 1
        self._sent_rows += rows
        self._sent_bytes += size
        self._batch.append((item, rows, size))
        return self.flush() if now else True

    def _wait_for_room(self, rows: int, size: int) -> bool:
        """Wait until an item of ``rows`` row images of ``size`` bytes has room (``deliver``);
        False when the stream is stopping."""
        self.backed_up = True
        try:
            while not self._has_room(rows, size):
                if self._stopping.is_set():
                    return False
                if self._batch:
                    # full, partly with our own batch: the consumer can only make room from
                    # what it has, so send the batch (never while holding the lock it takes)
                    if not self.flush():
                        return False
                    continue
                with self._room:
                    self._reader_waits = True  # before looking again: see _took
                    try:
                        if not self._stopping.is_set() and not (
                            self._has_room(rows, size) and self._half_free()
                        ):
                            self._room.wait(0.5)
                    finally:
                        self._reader_waits = False
            return True
        finally:
            self.backed_up = False

    def _half_free(self) -> bool:
        """Half the room free again, in items, row images and bytes: what a reader that waited
        for room waits for. Woken as soon as one item is taken, it would hand over one item
        per round trip between the threads, each costing more than a small transaction's
        decoding."""
        return (
            (self._sent_items - self._taken_items) * 2 <= self._queue_size
            and (self._sent_rows - self._taken_rows) * 2 <= self._row_budget
            and (self._sent_bytes - self._taken_bytes) * 2 <= self._byte_budget
        )

    def _has_room(self, rows: int, size: int) -> bool:
        """Room for an item of ``rows`` row images of ``size`` bytes. One item always gets
        through, however large, so the stream cannot stall."""
        queued_rows = self._sent_rows - self._taken_rows
        queued_bytes = self._sent_bytes - self._taken_bytes
        return self._sent_items - self._taken_items < self._queue_size and (
            not queued_rows
            or (queued_rows + rows <= self._row_budget and queued_bytes + size <= self._byte_budget)
        )

    def flush(self) -> bool:
        """Hand the batched items to the loop and wait until they are queued (reader thread
        only). False when the stream is stopping or the loop is gone.

        The wait matters as much as the hand-off: it is when the loop thread gets the GIL
        without contention. A reader that never waits makes every GIL acquisition of the loop
        thread (each wake-up, each socket call) wait out the interpreter's switch interval,
        and the event loop falls behind by tens of milliseconds."""
        batch = self._batch
        if not batch:
            return True
        self._batch = []
        assert self.loop is not None
        try:
            future = asyncio.run_coroutine_threadsafe(self._put_all(batch), self.loop)
        except RuntimeError:  # loop closed
            return False
        while not self._stopping.is_set():
            try:
                future.result(timeout=0.5)
                return True
            except TimeoutError:
                continue
            except (RuntimeError, concurrent.futures.CancelledError):  # loop closed
                return False
        future.cancel()
        return False

    async def _put_all(self, batch: list[Entry]) -> None:
        assert self.queue is not None
        for entry in batch:
            self.queue.put_nowait(entry)
