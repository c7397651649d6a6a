"""``replicator run``: source -> pipeline -> landing zone, as named tasks of one TaskGroup.

Start-up finishes or rolls back any half-done commit (``LandingZone.recover``), then resumes
from the checkpoint (or the configured start). The first SIGTERM/SIGINT stops reading, commits
what is complete and exits 0; a second one exits at once (safe by the commit protocol: the
next start recovers).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from dataclasses import dataclass
from typing import Any

import structlog

from .config import Config
from .notify import Notifier
from .pipeline.pipeline import Pipeline, PipelineStats
from .sink.landing import FaultInjector, LandingZone
from .source.protocol import start_position
from .source.schema import InformationSchemaLookup
from .source.stream import ReplicaStream

log = structlog.get_logger("replicator")


@dataclass(slots=True)
class RunOptions:
    stop_at_end: bool = False
    shutdown_timeout: float = 30.0


class Service:
    def __init__(self, config: Config, options: RunOptions) -> None:
        self.config = config
        self.options = options
        self.zone = LandingZone(config.sink, fault=FaultInjector.from_env())
        self._stop = asyncio.Event()
        self._signals = 0
        self.pipeline: Pipeline | None = None
        self.stream: ReplicaStream | None = None
        self.notifier = Notifier(config.mqtt)

    def _on_signal(self) -> None:
        self._signals += 1
        if self._signals == 1:
            log.info("stopping", reason="signal", hint="a second signal exits at once")
            self._stop.set()
        else:
            log.warning("exiting at once", reason="second signal")
            os._exit(1)

    def _committed(self, manifest: dict[str, Any], stats: PipelineStats) -> None:
        files: list[dict[str, Any]] = manifest.get("files", [])
        tables = sorted({str(f["table"]) for f in files})
        log.info(
            "batch committed",
            batch=manifest["batch"],
            rows=manifest["rows"],
            transactions=manifest["transactions"],
            tables=tables,
            bytes=sum(int(f["bytes"]) for f in files),
            end=manifest["end"],
            seconds=round(stats.last_batch_seconds, 3),
        )
        by_table: dict[str, dict[str, Any]] = {}
        for f in files:
            entry = by_table.setdefault(str(f["table"]), {"rows": 0, "files": []})
            entry["rows"] += int(f["rows"])
            entry["files"].append(f["path"])
        # best effort: never waits on the broker, drops are counted
        self.notifier.notify(
            {
                "batch": manifest["batch"],
                "committed_at": manifest["committed_at"],
                "rows": manifest["rows"],
                "tables": by_table,
                "end": manifest["end"],
            }
        )

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._on_signal)
        checkpoint = await loop.run_in_executor(None, self.zone.recover)
        start = checkpoint.position or start_position(
            self.config.start.gtid, self.config.start.file, self.config.start.position
        )
        log.info(
            "starting",
            landing=str(self.zone.root),
            resume=None if start is None else start.describe(),
            batch=checkpoint.batch,
            next_seq=checkpoint.next_seq,
        )
        lookup = InformationSchemaLookup(self.config.source)
        pipeline = Pipeline(
            self.config.sink,
            self.config.filters,
            self.zone,
            checkpoint,
            on_commit=self._committed,
        )
        self.pipeline = pipeline
        stream = ReplicaStream(
            self.config.source,
            start,
            stop_at_end=self.options.stop_at_end,
            schema_lookup=lookup,
            part_rows=self.config.sink.large_transaction_rows,
        )
        self.stream = stream
        try:
            async with stream, asyncio.TaskGroup() as group:
                notifier = group.create_task(self.notifier.run(), name="notify")
                try:
                    await self._replicate(stream, pipeline)
                finally:
                    await self.notifier.close(timeout=5.0)
                    with contextlib.suppress(asyncio.CancelledError):
                        await notifier
        except BaseExceptionGroup as group:
            raise _first_error(group) from None
        finally:
            await pipeline.close()
            lookup.close()
        log.info(
            "stopped",
            batches=pipeline.stats.batches,
            rows=pipeline.stats.row_changes,
            position=None if pipeline.position is None else pipeline.position.describe(),
        )
        return 0

    async def _replicate(self, stream: ReplicaStream, pipeline: Pipeline) -> None:
        iterator = stream.__aiter__()
        stop = asyncio.create_task(self._stop.wait(), name="stop-signal")
        try:
            while not self._stop.is_set():
                wait = pipeline.seconds_until_due()
                item_task = asyncio.ensure_future(iterator.__anext__())
                done, _ = await asyncio.wait(
                    {item_task, stop}, timeout=wait, return_when=asyncio.FIRST_COMPLETED
                )
                if item_task not in done:
                    item_task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                        await item_task
                    if self._stop.is_set():
                        break
                    await pipeline.commit()  # the batch is old enough
                    continue
                try:
                    item = item_task.result()
                except StopAsyncIteration:
                    break
                await pipeline.handle(item)
            await asyncio.wait_for(pipeline.commit(), self.options.shutdown_timeout)
        finally:
            stop.cancel()


def _first_error(group: BaseExceptionGroup) -> BaseException:
    """The first leaf of a TaskGroup's exception group: the cause the user needs to see."""
    first = group.exceptions[0]
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    return first
