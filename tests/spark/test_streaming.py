"""The Structured Streaming example: a writer thread commits batches (with an ALTER TABLE ADD
COLUMN half way) through the real commit protocol while the query merges micro-batches; at
the end the state equals the Python replay and a from-scratch ``materialize``."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from replicator.spark.committed import file_schema, table_dirs
from replicator.spark.materialize import materialize
from replicator.spark.state import STATE_FILE
from replicator.spark.streaming import CurrentStateStream, start_current_state_stream
from tests.spark.zone import Zone, expected_keyed, int_col, table, text_col

pytestmark = pytest.mark.spark

V1 = table("shop.items", int_col(0, "id"), text_col(1, "name"), key=[0])
V2 = table("shop.items", int_col(0, "id"), text_col(1, "name"), text_col(2, "note"), key=[0])


def rows(spark: SparkSession, path: Path) -> list[dict[str, Any]]:
    return sorted((r.asDict() for r in spark.read.parquet(str(path)).collect()), key=repr)


def test_stream_merges_batches_committed_while_it_runs(spark: SparkSession, tmp_path: Path) -> None:
    zone = Zone(tmp_path / "landing")
    zone.commit([(V1, "c", (i, f"n{i}")) for i in range(20)])
    out, checkpoint = tmp_path / "current", tmp_path / "checkpoint"
    query = start_current_state_stream(
        spark, zone.root, "shop.items", out, checkpoint, trigger_seconds=0.5
    )

    def writer() -> None:
        for step in range(1, 7):
            version, note = (V1, ()) if step < 4 else (V2, (f"note{step}",))
            old = () if version is V1 else (None,)
            changes = [
                (version, "u", (step, f"s{step}", *note), (step, f"n{step}", *old)),
                (version, "d", (19 - step, f"n{19 - step}", *old)),
                (version, "c", (100 + step, "new", *note)),
            ]
            if step > 1:  # the row the previous step created changes its primary key
                moved = (200 + step, "moved", *note)
                changes.append((version, "u", moved, (100 + step - 1, "new", *old)))
            zone.commit(changes)
            time.sleep(0.4)

    thread = threading.Thread(target=writer, name="landing-writer")
    thread.start()
    thread.join(timeout=120)
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert query.exception() is None

    state = json.loads((out / "shop" / "items" / STATE_FILE).read_text())
    assert state["last_batch"] == 7
    assert state["stream_batch"] >= 1  # merged in more than one micro-batch
    got = {r["id"]: r for r in rows(spark, out / "shop" / "items")}
    expected = {
        key[0]: {"id": key[0], "name": row["name"], "note": row.get("note")}
        for key, row in expected_keyed(zone.history, "shop.items").items()
    }
    assert got == expected
    assert sorted(got) == [*range(13), 19, 106, 202, 203, 204, 205, 206]
    assert (got[5]["name"], got[5]["note"], got[2]["note"]) == ("s5", "note5", None)
    scratch = tmp_path / "scratch"
    materialize(spark, zone.root, scratch)
    assert rows(spark, scratch / "shop" / "items") == rows(spark, out / "shop" / "items")


def test_a_replayed_micro_batch_is_skipped(spark: SparkSession, tmp_path: Path) -> None:
    zone = Zone(tmp_path / "landing")
    zone.commit([(V1, "c", (1, "a"))])
    out = tmp_path / "current"
    query = start_current_state_stream(
        spark, zone.root, "shop.items", out, tmp_path / "checkpoint", trigger_seconds=0.2
    )
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    link = out / "shop" / "items"
    version = link.resolve()
    zone.commit([(V1, "c", (2, "b"))])
    directory = zone.root / "shop" / "items"
    found = next(t for t in table_dirs(zone.root) if t.name == "shop.items")
    newest = sorted(directory.glob("part-*.parquet"))[-1]
    merge = CurrentStateStream(
        spark, zone.root.resolve(), found, out.resolve(), file_schema(newest)
    )

    merge(spark.read.parquet(str(directory)), 0)  # Spark re-runs micro-batch 0 after a crash
    assert link.resolve() == version
    assert rows(spark, link) == [{"id": 1, "name": "a"}]
    merge(spark.read.parquet(str(directory)), 1)  # the next one applies batch 2 only
    assert rows(spark, link) == [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]
    state = json.loads((link / STATE_FILE).read_text())
    assert (state["stream_batch"], state["last_batch"], state["mode"]) == (1, 2, "stream")
