"""The pipeline's hand-over to the writer thread, on a real landing zone: row changes go in
chunks, a due commit runs while the loop goes on, and an error in the writer thread stops
everything after it, so no commit ever follows rows that were not written."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from replicator.binlog.block import Block
from replicator.binlog.position import StreamPosition
from replicator.binlog.transaction import TransactionAssembler
from replicator.binlog.xa import XaId
from replicator.config import FilterConfig, SinkConfig
from replicator.errors import IntegrityError
from replicator.pipeline import pipeline as pipeline_module
from replicator.pipeline.pipeline import Pipeline, PipelineInterrupted
from replicator.sink.changes import TableVersion
from replicator.sink.landing import FaultInjector, LandingZone
from replicator.snapshot_progress import SnapshotState
from tests.logs import captured_log

from .synthetic_events import COLUMNS, Events


class _Feed:
    def __init__(self, root: Path, *, pipeline: Pipeline | None = None, **sink: Any) -> None:
        self.cfg = SinkConfig(root=str(root), batch_max_seconds=999, **sink)
        if pipeline is None:
            self.zone = LandingZone(self.cfg)
            pipeline = Pipeline(self.cfg, FilterConfig(), self.zone, self.zone.recover())
        self.zone = pipeline.zone
        self.pipeline = pipeline
        self.events = Events()
        self.assembler = TransactionAssembler()
        self.gno = 0

    async def transaction(self, rows: Sequence[tuple[object, ...]]) -> None:
        self.gno += 1
        e = self.events
        events = [e.gtid(self.gno), e.query("BEGIN"), *e.inserts(rows), e.xid(self.gno)]
        for event in events:
            for item in self.assembler.feed(event):
                await self.pipeline.handle(item)


def _landed(root: Path) -> list[int]:
    files = sorted((root / "db" / "t").glob("*.parquet"))
    return sorted(i for f in files for i in pq.read_table(f).column("id").to_pylist())


async def test_due_commits_overlap_and_land_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pipeline_module, "STAGE_ROWS", 7)  # several chunks per batch
    feed = _Feed(tmp_path, batch_max_rows=20)
    ids = iter(range(1, 1001))
    for _ in range(100):
        await feed.transaction([(next(ids), "x") for _ in range(10)])
    await feed.pipeline.commit()  # waits for every commit handed over
    stats = feed.pipeline.stats
    assert stats.batches == 50  # one per 20 rows, each applied once it was done
    assert stats.row_changes == 1000
    assert feed.pipeline.checkpoint.batch == 50
    assert feed.pipeline.checkpoint.next_seq == 1001
    assert _landed(tmp_path) == list(range(1, 1001))
    await feed.pipeline.close()


async def test_no_commit_follows_rows_that_were_not_written(tmp_path: Path) -> None:
    feed = _Feed(tmp_path, batch_max_rows=20)
    await feed.transaction([(n, "x") for n in range(1, 21)])  # batch 1: due, committed
    await feed.pipeline.commit()
    # batch 2: a value INT cannot hold fails in the writer thread; the commit handed over
    # behind it in the same call must not run
    with pytest.raises(IntegrityError):
        await feed.transaction([(n, "x") for n in range(21, 40)] + [(2**40, "x")])
        await feed.pipeline.commit()
    with pytest.raises(IntegrityError):  # and the pipeline stays stopped
        await feed.transaction([(50, "x")])
    await feed.pipeline.close()
    assert feed.zone.recover().batch == 1
    manifests = sorted((tmp_path / "_manifests").glob("*.json"))
    assert [json.loads(m.read_text())["batch"] for m in manifests] == [1]
    assert _landed(tmp_path) == list(range(1, 21))


class _FailAt(FaultInjector):
    def at(self, step: str) -> None:
        if step == "data":  # before the manifest, the commit point
            raise OSError(28, "No space left on device")


async def test_a_commit_failing_on_an_idle_stream_is_reported(tmp_path: Path) -> None:
    feed = _Feed(tmp_path, batch_max_rows=5)
    feed.zone.fault = _FailAt()
    await feed.transaction([(n, "x") for n in range(1, 6)])  # due: handed over, not awaited
    # nothing else arrives; the service asks when to look again and then commits
    wait = feed.pipeline.seconds_until_due()
    assert wait is not None and wait <= 0.5
    with pytest.raises(OSError, match="No space left"):
        await feed.pipeline.commit()
    assert feed.pipeline.seconds_until_due() == 0.0
    await feed.pipeline.close()
    assert feed.zone.recover().batch == 0
    assert _landed(tmp_path) == []


async def _snapshot_until_it_waits(
    feed: _Feed, nbytes: int, *, blocks: int
) -> tuple[int, asyncio.Task[None]]:
    """Snapshot blocks of one row each, ``nbytes`` read for each, while the writer thread is
    held: how many went without waiting, and the one that waits."""
    version = TableVersion("db", "t", COLUMNS)
    at, ts = StreamPosition("b.1", 4), dt.datetime.now(dt.UTC)
    for n in range(blocks):
        block = Block.from_rows([(n + 1, "s")], len(COLUMNS))
        task = asyncio.ensure_future(
            feed.pipeline.snapshot_rows(version, None, block, at, ts, 1, nbytes=nbytes)
        )
        done, _ = await asyncio.wait([task], timeout=0.2)
        if not done:
            return n, task
        task.result()
    raise AssertionError(f"all {blocks} blocks went without waiting")


async def test_snapshot_blocks_go_on_while_the_writer_works_up_to_the_byte_bound(
    tmp_path: Path,
) -> None:
    """Small snapshot blocks pile up for the writer thread until they hold the bytes bound,
    so that the reader goes on while a row group is encoded; the block past it waits for
    the writer thread and then lands with the others."""
    feed = _Feed(tmp_path)
    feed.pipeline.seed(StreamPosition("b.1", 4))
    gate = threading.Event()
    feed.pipeline._executor.submit(gate.wait)  # the writer thread busy with something else
    small = pipeline_module.SNAPSHOT_INFLIGHT_BYTES // 10
    went, waiting = await _snapshot_until_it_waits(feed, small, blocks=40)
    assert went == 10  # ten blocks of a tenth of the bound each; the eleventh is past it
    gate.set()
    await asyncio.wait_for(waiting, 10)
    await feed.pipeline.snapshot_chunk_done(SnapshotState())
    await feed.pipeline.commit()
    await feed.pipeline.close()
    assert _landed(tmp_path) == list(range(1, 12))


async def test_a_large_snapshot_block_waits_for_the_one_ahead(tmp_path: Path) -> None:
    """Blocks as large as the bound: one is with the writer thread, the next waits."""
    feed = _Feed(tmp_path)
    feed.pipeline.seed(StreamPosition("b.1", 4))
    gate = threading.Event()
    feed.pipeline._executor.submit(gate.wait)
    went, waiting = await _snapshot_until_it_waits(
        feed, pipeline_module.SNAPSHOT_INFLIGHT_BYTES, blocks=5
    )
    assert went == 1
    gate.set()
    await asyncio.wait_for(waiting, 10)
    await feed.pipeline.snapshot_chunk_done(SnapshotState())
    await feed.pipeline.close()


async def test_snapshot_blocks_of_unknown_size_are_bounded_in_number(tmp_path: Path) -> None:
    feed = _Feed(tmp_path)
    feed.pipeline.seed(StreamPosition("b.1", 4))
    gate = threading.Event()
    feed.pipeline._executor.submit(gate.wait)
    went, waiting = await _snapshot_until_it_waits(feed, 0, blocks=40)
    assert went == pipeline_module.SNAPSHOT_INFLIGHT
    gate.set()
    await asyncio.wait_for(waiting, 10)
    await feed.pipeline.snapshot_chunk_done(SnapshotState())
    await feed.pipeline.close()


class _HeldCommit(FaultInjector):
    """Holds a commit at its first step until released, and says when one got there."""

    def __init__(self) -> None:
        super().__init__()
        self.reached = threading.Event()
        self.release = threading.Event()

    def at(self, step: str) -> None:
        if step == "data":
            self.reached.set()
            if not self.release.wait(10):
                raise TimeoutError("the held commit was never released")


async def test_the_next_batch_is_written_while_a_commit_runs(tmp_path: Path) -> None:
    """A batch's commit runs in the commit thread: the writer thread converts and writes the
    next batch's rows meanwhile, and that batch commits after it, in order."""
    feed = _Feed(tmp_path, batch_max_rows=5)
    held = feed.zone.fault = _HeldCommit()
    await feed.transaction([(n, "x") for n in range(1, 6)])  # batch 1 due: handed over
    assert await asyncio.to_thread(held.reached.wait, 10)
    written = threading.Event()
    await feed.transaction([(n, "x") for n in range(6, 9)])  # batch 2's rows
    await feed.pipeline._hand_over(feed.pipeline._open())
    feed.pipeline._executor.submit(written.set)  # after those rows, in the writer thread
    assert await asyncio.to_thread(written.wait, 10)  # written while batch 1 still commits
    assert not list((tmp_path / "_manifests").glob("*.json"))
    held.release.set()
    await feed.pipeline.commit()
    await feed.pipeline.close()
    manifests = sorted((tmp_path / "_manifests").glob("*.json"))
    assert [json.loads(m.read_text())["batch"] for m in manifests] == [1, 2]
    assert _landed(tmp_path) == list(range(1, 9))


async def test_rows_failing_after_a_commit_do_not_stop_that_commit(tmp_path: Path) -> None:
    """The next batch's rows fail in the writer thread before the commit handed over before
    them starts: that commit still lands (it came first), the error stops what follows."""
    feed = _Feed(tmp_path, batch_max_rows=5)
    gate = threading.Event()
    feed.pipeline._committer.submit(gate.wait)  # the commit thread busy with something else
    await feed.transaction([(n, "x") for n in range(1, 6)])  # batch 1 due: handed over
    await feed.transaction([(6, "x"), (2**40, "x")])  # INT cannot hold it
    failed = threading.Event()
    await feed.pipeline._hand_over(feed.pipeline._open())
    feed.pipeline._executor.submit(failed.set)
    assert await asyncio.to_thread(failed.wait, 10)  # batch 2's rows failed, batch 1 waits
    gate.set()
    with pytest.raises(IntegrityError):
        await feed.pipeline.commit()
    await feed.pipeline.close()
    assert feed.zone.recover().batch == 1
    assert _landed(tmp_path) == list(range(1, 6))


_STOPPED_OUT_OF_TIME = """
import asyncio, sys, threading
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from tests.unit.test_pipeline_writer_thread import _Feed

async def main() -> None:
    feed = _Feed(Path(sys.argv[2]), batch_max_rows=5)
    gate = threading.Event()
    feed.pipeline._executor.submit(gate.wait)  # the writer thread busy with earlier rows
    await feed.transaction([(n, "x") for n in range(1, 6)])  # due: rows queued, then the commit
    await asyncio.sleep(0.2)  # the commit waits for those rows
    feed.pipeline.interrupt()
    feed.pipeline.abandon()
    print("close", await feed.pipeline.close(0.2), flush=True)
    gate.set()

asyncio.run(main())
"""


def test_a_stop_out_of_time_leaves_no_commit_waiting(tmp_path: Path) -> None:
    """A stop out of time (interrupt, abandon, ``close`` with a time limit) while a commit
    waits for rows still queued for the writer thread: the queued rows are dropped, the commit
    with them, and the process exits (the commit thread used to wait for those rows forever,
    and the interpreter's exit for it). Nothing of the batch lands."""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", _STOPPED_OUT_OF_TIME, str(root), str(tmp_path / "zone")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-1] == "close False"
    assert not list((tmp_path / "zone" / "_manifests").glob("*.json"))


async def test_a_replay_ends_with_the_batch_that_reaches_its_end(tmp_path: Path) -> None:
    """After `checkpoint set` moved the stream back, batches up to the old end say
    ``replay``; the one after the batch that reaches it does not, though its commit runs
    before the loop has applied the earlier one (the commit thread used to read the loop's
    replay bound, still the old one then)."""
    cfg = SinkConfig(root=str(tmp_path), batch_max_seconds=999, batch_max_rows=5)
    zone = LandingZone(cfg)
    moved = dataclasses.replace(zone.recover(), replay_until=StreamPosition("b.1", 60))
    feed = _Feed(tmp_path, pipeline=Pipeline(cfg, FilterConfig(), zone, moved))
    feed.pipeline.seed(StreamPosition("b.1", 4))
    await feed.transaction([(n, "x") for n in range(1, 6)])  # batch 1 ends past b.1:60
    await feed.transaction([(n, "x") for n in range(6, 11)])  # batch 2
    manifests = tmp_path / "_manifests"
    deadline = time.monotonic() + 30
    while len(list(manifests.glob("*.json"))) < 2:  # both commit before the loop looks
        assert time.monotonic() < deadline
        time.sleep(0.001)
    await feed.pipeline.commit()
    await feed.pipeline.close()
    flags = [json.loads(m.read_text())["replay"] for m in sorted(manifests.glob("*.json"))]
    assert flags == [True, False]


class _HeldThenFull(_HeldCommit):
    """The commit's data step waits to be let go, then fails as a full disk would."""

    def at(self, step: str) -> None:
        super().at(step)
        if step == "data":
            raise OSError(28, "No space left on device")


async def test_a_commit_failing_while_a_stop_runs_out_of_time_is_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit under way when the stop runs out of time, which then fails: nothing raises it
    (the stop goes on), so ``close`` logs it, once, with the error."""
    capture = captured_log(monkeypatch, pipeline_module)
    feed = _Feed(tmp_path, batch_max_rows=5)
    held = feed.zone.fault = _HeldThenFull()
    await feed.transaction([(n, "x") for n in range(1, 6)])  # due: handed over
    assert await asyncio.to_thread(held.reached.wait, 10)
    feed.pipeline.interrupt()  # the stop is out of time
    held.release.set()
    await asyncio.sleep(0.2)
    with pytest.raises(PipelineInterrupted):
        await feed.pipeline.commit()
    feed.pipeline.abandon()
    assert await feed.pipeline.close(5)
    failed = [e for e in capture.entries if e["event"] == "a batch failed to land while stopping"]
    assert [e["error"] for e in failed] == ["[Errno 28] No space left on device"]
    assert not list((tmp_path / "_manifests").glob("*.json"))


async def test_a_failed_commit_raised_is_not_logged_again_at_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed commit raised to the caller (who reports it) is not logged again by ``close``."""
    capture = captured_log(monkeypatch, pipeline_module)
    feed = _Feed(tmp_path, batch_max_rows=5)
    held = feed.zone.fault = _HeldThenFull()
    held.release.set()
    await feed.transaction([(n, "x") for n in range(1, 6)])
    with pytest.raises(OSError, match="No space left"):
        await feed.pipeline.commit()
    assert await feed.pipeline.close(5)
    assert [
        e for e in capture.entries if e["event"] == "a batch failed to land while stopping"
    ] == []


def _open_staging_files() -> list[str]:
    found = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            found.append(os.readlink(f"/proc/self/fd/{fd}"))
    return [path for path in found if path.endswith(".tmp")]


async def test_close_after_a_failed_commit_drops_the_batches_written_after_it(
    tmp_path: Path,
) -> None:
    """Batch 1's commit fails after the writer thread wrote batch 2's rows beside it: ``close``
    drops batch 2 too (its staging file was left open before)."""
    feed = _Feed(tmp_path, batch_max_rows=5)
    held = feed.zone.fault = _HeldThenFull()
    await feed.transaction([(n, "x") for n in range(1, 6)])  # batch 1 due: its commit waits
    assert await asyncio.to_thread(held.reached.wait, 10)
    await feed.transaction([(n, "x") for n in range(6, 9)])  # batch 2's rows
    await feed.pipeline._hand_over(feed.pipeline._open())
    written = threading.Event()
    feed.pipeline._executor.submit(written.set)
    assert await asyncio.to_thread(written.wait, 10)  # batch 2's rows are in its file
    assert _open_staging_files() != []
    held.release.set()
    await feed.transaction([(n, "x") for n in range(9, 11)])  # batch 2 due: refused
    with pytest.raises(OSError, match="No space left"):
        await feed.pipeline.commit()
    assert await feed.pipeline.close() is True
    assert _open_staging_files() == []
    assert not list((tmp_path / "_manifests").glob("*.json"))


async def test_a_tables_new_folder_is_synced_up_to_the_root_before_the_manifest(
    tmp_path: Path,
) -> None:
    """A batch that makes a table's folder syncs the folders above it too, before the
    manifest that names its files is written: the new folders' entries are as durable as
    the manifest (a power cut cannot leave a manifest naming files whose folder is gone)."""
    feed = _Feed(tmp_path, batch_max_rows=5)
    store = feed.zone.store
    synced: list[tuple[set[str], bool]] = []
    real_sync = store.sync

    def sync(folders: set[str]) -> None:
        synced.append((set(folders), any((tmp_path / "_manifests").glob("*.json"))))
        real_sync(folders)

    store.sync = sync  # type: ignore[method-assign]
    await feed.transaction([(n, "x") for n in range(1, 6)])
    await feed.pipeline.commit()
    await feed.pipeline.close()
    before_manifest = set().union(*(folders for folders, after in synced if not after))
    assert {"", "db", "db/t"} <= before_manifest
    assert _landed(tmp_path) == [1, 2, 3, 4, 5]


async def test_wide_rows_are_handed_over_by_their_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One row per transaction, each rows event 50 bytes: the row bound alone would hold
    them all; 120 bytes staged make a hand-over."""
    monkeypatch.setattr(pipeline_module, "STAGE_BYTES", 120)
    feed = _Feed(tmp_path, batch_max_rows=1000)
    handed = []
    for n in range(1, 8):
        await feed.transaction([(n, "x")])
        handed.append(feed.pipeline._handed)
    assert handed == [0, 0, 1, 1, 1, 2, 2]  # at 150 bytes, then 150 again
    await feed.pipeline.commit()
    assert _landed(tmp_path) == list(range(1, 8))
    await feed.pipeline.close()


async def test_an_xa_transactions_rows_count_when_they_are_staged(tmp_path: Path) -> None:
    """Held at PREPARE (nothing staged, no bytes), handed over at XA COMMIT."""
    feed = _Feed(tmp_path)
    e, xa = feed.events, "X'616263',X'',1"
    pipeline = feed.pipeline
    for event in [e.gtid(1), e.query(f"XA START {xa}"), *e.inserts([(1, "x"), (2, "y")]),
                  e.query(f"XA END {xa}"), e.prepare(XaId(1, b"abc", b""))]:  # fmt: skip
        for item in feed.assembler.feed(event):
            await pipeline.handle(item)
    assert (pipeline._staged_rows, pipeline._staged_bytes, pipeline._handed) == (0, 0, 0)
    for event in [e.gtid(2), e.query(f"XA COMMIT {xa}")]:
        for item in feed.assembler.feed(event):
            await pipeline.handle(item)
    assert (pipeline._staged_rows, pipeline._staged_bytes, pipeline._handed) == (0, 0, 1)
    await pipeline.commit()
    assert _landed(tmp_path) == [1, 2]
    await pipeline.close()
