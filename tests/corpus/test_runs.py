"""Runs of small transactions (``binlog.runs``) over every corpus file the native core can
take runs of: served as a dump stream, each file is read one event at a time and with runs,
and both reads are landed by a real pipeline; every landed file (every column, every metadata
column, row by row) and the checkpoint must be the same. The servers that wrote them differ
in what the core reads itself: MariaDB's v1 rows events and GTIDs, MySQL 5.6-9.x v2 rows
events with their extra data, GTID and ANONYMOUS_GTID with BEGIN, commit timestamps of
microseconds, and tables whose columns land as buffers or as values."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from replicator.binlog.position import StreamPosition
from replicator.checkpoint import position_to_json
from replicator.config import FilterConfig, SinkConfig
from replicator.errors import ReplicatorError
from replicator.pipeline.pipeline import Pipeline
from replicator.sink.landing import LandingZone
from replicator.source.items import StreamItem
from tests.unit.test_native import require_native
from tests.unit.test_runs import manifest, read

from .test_statements_only import served_with_crc32
from .test_walk import _binlog_paths

# corpus files with runs, at least (so that the comparisons compare runs)
_RUNS_IN = 5


async def _land(
    root: Path, items: list[StreamItem], rows: int, start: StreamPosition
) -> tuple[dict[str, Any], str | None]:
    cfg = SinkConfig(root=str(root), batch_max_seconds=999, batch_max_rows=rows)
    zone = LandingZone(cfg)
    pipeline = Pipeline(cfg, FilterConfig(), zone, zone.recover())
    pipeline.seed(start)
    error = None
    try:
        for item in items:
            await pipeline.handle(item)
        await pipeline.commit()
    except ReplicatorError as exc:  # what stops the stream (a statement logged as SQL...)
        error = f"{type(exc).__name__}: {exc}"
    await pipeline.close()
    checkpoint = pipeline.checkpoint
    where = None if checkpoint.position is None else position_to_json(checkpoint.position)
    return {"position": where, "next_seq": checkpoint.next_seq}, error


def landed(root: Path, items: list[StreamItem], rows: int, start: StreamPosition) -> dict[str, Any]:
    """What a pipeline lands of ``items`` in batches of ``rows`` row changes: every data
    file's rows, the manifests, the checkpoint (its position and next ``_seq``) and the error
    that stopped it, if any."""
    checkpoint, error = asyncio.run(_land(root, items, rows, start))
    files = {
        str(path.relative_to(root)): pq.read_table(path).to_pylist()
        for path in sorted(root.rglob("*.parquet"))
        if not any(part.startswith("_") for part in path.relative_to(root).parts)
    }
    manifests = [
        manifest(json.loads(path.read_text())) for path in sorted(root.glob("_manifests/*.json"))
    ]
    return {"files": files, "manifests": manifests, "checkpoint": checkpoint, "error": error}


@pytest.mark.parametrize("rel", _binlog_paths())
def test_runs_land_what_one_event_at_a_time_lands(
    corpus_dir: Path, rel: str, tmp_path: Path
) -> None:
    """In one batch, and in batches of 2 row changes (runs split after the transaction that
    makes a batch due, the batch's proof that transaction's)."""
    require_native()
    name, stream, start = served_with_crc32(corpus_dir, rel)
    plain = read(stream, 1 << 20, runs=False, name=name)
    taken = read(stream, 1 << 20, runs=True, name=name)
    assert (taken.position, repr(taken.error)) == (plain.position, repr(plain.error))
    for rows in (10**9, 2):
        runs = landed(tmp_path / f"runs-{rows}", taken.items, rows, start)
        assert runs == landed(tmp_path / f"plain-{rows}", plain.items, rows, start)


def test_runs_are_taken_in_the_corpus(corpus_dir: Path) -> None:
    """The comparisons above compare runs, not only reads without any: several files of
    both flavours have runs."""
    require_native()
    taken: dict[str, int] = {}
    for rel in _binlog_paths():
        try:
            name, stream, _ = served_with_crc32(corpus_dir, rel)
        except pytest.skip.Exception:
            continue
        got = read(stream, 1 << 20, runs=True, name=name)
        taken[rel] = sum(run.taken.transactions for run in got.runs)
    with_runs = sorted(rel for rel, n in taken.items() if n)
    assert len(with_runs) >= _RUNS_IN, taken
