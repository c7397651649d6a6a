"""The Structured Streaming helper: a writer thread commits batches (with an ALTER TABLE ADD
COLUMN half way, and its lifecycle record) through the real commit protocol while the query
merges micro-batches; at the end the state equals the Python replay and a from-scratch
``materialize``. Lifecycle records — truncate, drop, create again, renames away and into the
name, a replay — are applied exactly, micro-batch by micro-batch and in a running query."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from replicator.landed.committed import TableDir
from replicator.landed.outputs import lock
from replicator.spark.materialize import materialize
from replicator.spark.state import STATE_FILE
from replicator.spark.streaming import CurrentStateStream, start_current_state_stream
from tests.spark.test_lifecycle import outputs
from tests.spark.zone import (
    Ddl,
    Item,
    Zone,
    expected_keyed,
    expected_tables,
    int_col,
    table,
    text_col,
)

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
            changes: list[Item] = [
                (version, "u", (step, f"s{step}", *note), (step, f"n{step}", *old)),
                (version, "d", (19 - step, f"n{19 - step}", *old)),
                (version, "c", (100 + step, "new", *note)),
            ]
            if step > 1:  # the row the previous step created changes its primary key
                moved = (200 + step, "moved", *note)
                changes.append((version, "u", moved, (100 + step - 1, "new", *old)))
            if step == 4:
                changes.insert(0, Ddl("alter", "shop.items", statement="ALTER TABLE ADD note"))
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


def manifests(spark: SparkSession, *batches: int) -> Any:
    """A micro-batch of the stream's source: the rows of the manifests of ``batches``."""
    return spark.createDataFrame([(b,) for b in batches], "batch long")


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
    merge = CurrentStateStream(  # the same query (its checkpoint) after a crash
        spark,
        zone.root.resolve(),
        TableDir.named("shop.items"),
        out.resolve(),
        checkpoint=(tmp_path / "checkpoint").resolve(),
    )

    merge(manifests(spark, 1, 2), 0)  # Spark re-runs micro-batch 0 after a crash
    assert link.resolve() == version
    assert rows(spark, link) == [{"id": 1, "name": "a"}]
    merge(manifests(spark, 2), 1)  # the next one applies batch 2 only
    assert rows(spark, link) == [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]
    state = json.loads((link / STATE_FILE).read_text())
    assert (state["stream_batch"], state["last_batch"], state["mode"]) == (1, 2, "stream")


def test_a_query_with_a_new_checkpoint_applies_its_first_micro_batches(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A checkpoint made anew (lost, or removed to start over): the new query counts its
    micro-batches from 0 again, below the state's ``stream_batch``; they are no re-runs of
    the old query's, and the batches landed meanwhile are applied."""
    zone = Zone(tmp_path / "landing")
    zone.commit([(V1, "c", (1, "a"))])
    out = tmp_path / "current"
    link = out / "shop" / "items"

    def run(checkpoint: Path, *commits: list[Any]) -> None:
        query = start_current_state_stream(
            spark, zone.root, "shop.items", out, checkpoint, trigger_seconds=0.2
        )
        try:
            query.processAllAvailable()
            for items in commits:
                zone.commit(items)
                query.processAllAvailable()
        finally:
            query.stop()
        assert query.exception() is None

    run(tmp_path / "first", [(V1, "c", (2, "b"))], [(V1, "c", (3, "c"))])
    state = json.loads((link / STATE_FILE).read_text())
    assert state["stream_batch"] >= 1 and state["last_batch"] == 3
    zone.commit([(V1, "c", (4, "d"))])
    run(tmp_path / "second")
    state = json.loads((link / STATE_FILE).read_text())
    assert state["last_batch"] == 4
    assert [r["id"] for r in rows(spark, link)] == [1, 2, 3, 4]


def test_micro_batches_apply_lifecycle_records(spark: SparkSession, tmp_path: Path) -> None:
    zone = Zone(tmp_path / "landing")
    out, scratch = (tmp_path / "current").resolve(), tmp_path / "scratch"
    merge = CurrentStateStream(spark, zone.root.resolve(), TableDir.named("shop.items"), out)
    link = out / "shop" / "items"
    other = table("shop.other", int_col(0, "id"), text_col(1, "name"), key=[0])
    steps: list[list[Any]] = [
        [(V1, "c", (1, "a")), (V1, "c", (2, "b"))],
        [(V1, "u", (1, "A"), (1, "a")), Ddl("truncate", "shop.items"), (V1, "c", (3, "c"))],
        [(other, "c", (9, "unrelated"))],  # a batch without the table: no rewrite
        [Ddl("drop", "shop.items")],  # no file of the table: only the manifest tells
        [Ddl("create", "shop.items"), (V2, "c", (4, "d", "x"))],
        [Ddl("rename", "shop.items", "shop.moved")],
        [Ddl("rename", "shop.other", "shop.items"), (V1, "c", (10, "late"))],
        [],  # a replay of the last two batches
    ]
    absent = []  # the batches after which there is no table shop.items: no link either
    for number, step in enumerate(steps, start=1):
        if step:
            zone.commit(step)
        else:
            zone.replay([number - 2, number - 1])
        merge(manifests(spark, *range(1, zone.checkpoint.batch + 1)), number)
        expected = expected_tables(zone).get("shop.items")
        assert link.exists() == (expected is not None), number
        if expected is None:
            absent.append(number)
            continue
        assert rows(spark, link) == expected
        materialize(spark, zone.root, scratch)
        assert outputs(spark, scratch)["shop.items"] == expected
    assert absent == [4, 6]  # dropped; renamed away
    assert rows(spark, link) == [{"id": 10, "name": "late"}, {"id": 9, "name": "unrelated"}]
    state = json.loads((link / STATE_FILE).read_text())
    assert (state["stream_batch"], state["last_batch"]) == (8, 9)


def test_a_running_query_applies_truncate_drop_and_rename(
    spark: SparkSession, tmp_path: Path
) -> None:
    zone = Zone(tmp_path / "landing")
    zone.commit([(V1, "c", (i, f"n{i}")) for i in range(5)])
    out = tmp_path / "current"
    query = start_current_state_stream(
        spark, zone.root, "shop.items", out, tmp_path / "checkpoint", trigger_seconds=0.3
    )
    moved = table("shop.gone", int_col(0, "id"), text_col(1, "name"), key=[0])
    try:
        query.processAllAvailable()
        zone.commit([(V1, "d", (0, "n0")), Ddl("truncate", "shop.items"), (V1, "c", (7, "s"))])
        query.processAllAvailable()
        assert rows(spark, out / "shop" / "items") == [{"id": 7, "name": "s"}]
        zone.commit([Ddl("rename", "shop.items", "shop.gone"), (moved, "c", (8, "t"))])
        time.sleep(1)
        query.processAllAvailable()
        assert not (out / "shop" / "items").exists()
        zone.commit([Ddl("rename", "shop.gone", "shop.items"), (V1, "c", (9, "u"))])
        time.sleep(1)
        query.processAllAvailable()
    finally:
        query.stop()
    assert query.exception() is None
    assert rows(spark, out / "shop" / "items") == expected_tables(zone)["shop.items"]
    assert [r["id"] for r in rows(spark, out / "shop" / "items")] == [7, 8, 9]


def test_a_micro_batch_waits_for_another_writer_of_its_output(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A ``materialize`` run holds the output directory's lock: a micro-batch that wrote
    meanwhile would have its unfinished version removed by that run's clean-up (or remove
    the run's). It waits, and applies its batches once the lock is free."""
    zone = Zone(tmp_path / "landing")
    zone.commit([(V1, "c", (1, "a"))])
    out = (tmp_path / "current").resolve()
    merge = CurrentStateStream(spark, zone.root.resolve(), TableDir.named("shop.items"), out)
    link = out / "shop" / "items"
    merge(manifests(spark, 1), 0)  # the first one alone: Spark is warm for the second
    version = link.resolve()
    zone.commit([(V1, "c", (2, "b"))])
    batch = manifests(spark, 2)
    with lock(out):
        applying = threading.Thread(target=merge, args=(batch, 1))
        applying.start()
        applying.join(10.0)  # the first micro-batch took a few seconds at most
        waited = applying.is_alive()
        during = link.resolve()
    applying.join(120.0)
    assert waited, "the micro-batch wrote while another writer held the output"
    assert during == version
    assert not applying.is_alive()
    assert rows(spark, link) == [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]
