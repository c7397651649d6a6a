"""The Structured Streaming helper: a writer thread commits batches (with an ALTER TABLE ADD
COLUMN half way, and its lifecycle record) through the real commit protocol while the query
merges micro-batches; at the end the state equals the Python replay and a from-scratch
``materialize``. Lifecycle records — truncate, drop, create again, renames away and into the
name, a replay — are applied exactly, micro-batch by micro-batch and in a running query."""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from replicator.errors import ConfigError, IntegrityError
from replicator.landed.committed import TableDir
from replicator.landed.outputs import lock
from replicator.spark.materialize import materialize
from replicator.spark.state import STATE_FILE
from replicator.spark.streaming import (
    RECORD_FILE,
    CurrentStateStream,
    default_query_name,
    start_current_state_stream,
)
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


def run_query(spark: SparkSession, landing: Path, out: Path, checkpoint: Path) -> None:
    """Start the query of shop.items, apply what the landing zone holds, stop it."""
    query = start_current_state_stream(
        spark, landing, "shop.items", out, checkpoint, trigger_seconds=0.2
    )
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert query.exception() is None


def test_a_restart_on_a_landing_zone_made_again_is_refused(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The landing zone removed and made again at the same path (a new id, batches from 1
    again): the checkpoint has read manifests of those names, so the query would never read
    the new ones and the output would keep the old rows. The start stops with materialize's
    error; with the output removed, the checkpoint's record stops it; so does a micro-batch;
    with both removed, the query builds the output from the new landing zone."""
    landing = tmp_path / "landing"
    zone = Zone(landing)
    for i in range(3):
        zone.commit([(V1, "c", (i, f"old{i}"))])
    out, checkpoint = tmp_path / "current", tmp_path / "checkpoint"
    run_query(spark, landing, out, checkpoint)
    link = out / "shop" / "items"

    shutil.rmtree(landing)
    zone = Zone(landing)
    zone.commit([(V1, "c", (100, "new"))])
    with pytest.raises(IntegrityError, match="holds rows of another landing zone") as caught:
        start_current_state_stream(spark, landing, "shop.items", out, checkpoint)
    assert str(checkpoint) in caught.value.hint
    assert [r["id"] for r in rows(spark, link)] == [0, 1, 2]  # nothing was changed
    record = json.loads((checkpoint / RECORD_FILE).read_text())
    assert (record["last_batch"], record["held"]) == (3, 3)
    old_id = record["landing_id"]

    shutil.rmtree(out)  # the output alone: the checkpoint still knows the old landing zone
    with pytest.raises(IntegrityError, match=rf"checkpoint .* landing zone {old_id}") as caught:
        start_current_state_stream(spark, landing, "shop.items", out, checkpoint)
    assert "together with the query's checkpoint" in caught.value.hint
    assert not link.exists()
    merge = CurrentStateStream(  # a micro-batch of the running query stops too
        spark, landing.resolve(), TableDir.named("shop.items"), out.resolve(), checkpoint=checkpoint
    )
    with pytest.raises(IntegrityError, match="seen batches of another landing zone"):
        merge(manifests(spark, 1), 3)
    assert not link.exists()

    shutil.rmtree(checkpoint)
    zone.commit([(V1, "c", (101, "new"))])
    run_query(spark, landing, out, checkpoint)
    assert [r["id"] for r in rows(spark, link)] == [100, 101]


def test_a_restart_on_a_landing_zone_restored_from_an_older_backup_is_refused(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The landing zone restored from a backup of batches 1..2 (the same id) after the
    query applied 1..4: before new batches it ends before the output's; after the daemon
    lands 3 and 4 again with other transactions, its batch 4 is another commit (its mark).
    The query would take them for the ones it read: the start stops with materialize's
    errors either way, and with the checkpoint's record when the output was removed."""
    landing, backup = tmp_path / "landing", tmp_path / "backup"
    zone = Zone(landing)
    zone.commit([(V1, "c", (1, "a"))])
    zone.commit([(V1, "c", (2, "b"))])
    shutil.copytree(landing, backup)
    zone.commit([(V1, "c", (3, "lost"))])
    zone.commit([(V1, "c", (4, "lost"))])
    out, checkpoint = tmp_path / "current", tmp_path / "checkpoint"
    run_query(spark, landing, out, checkpoint)
    link = out / "shop" / "items"

    shutil.rmtree(landing)
    shutil.copytree(backup, landing)
    with pytest.raises(IntegrityError, match="holds batches up to 4, but the landing zone"):
        start_current_state_stream(spark, landing, "shop.items", out, checkpoint)
    zone = Zone(landing)  # other transactions: other _seq ranges (the batches' marks)
    zone.commit([(V1, "c", (30, "new")), (V1, "c", (31, "new"))])
    zone.commit([(V1, "c", (40, "new"))])
    with pytest.raises(IntegrityError, match="holds another batch 4") as caught:
        start_current_state_stream(spark, landing, "shop.items", out, checkpoint)
    assert "full-refresh" not in caught.value.hint
    assert str(checkpoint) in caught.value.hint
    shutil.rmtree(out)  # the checkpoint's record knows the batch it read
    with pytest.raises(IntegrityError, match="seen batch 4, and the landing zone"):
        start_current_state_stream(spark, landing, "shop.items", out, checkpoint)
    assert not link.exists()

    shutil.rmtree(checkpoint)
    run_query(spark, landing, out, checkpoint)
    assert [r["id"] for r in rows(spark, link)] == [1, 2, 30, 31, 40]


def test_a_checkpoint_that_has_seen_batches_the_output_does_not_hold_is_refused(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The output removed (or restored from a backup) with the checkpoint kept: Spark reads
    no manifest it has read again, so the query would build nothing (or leave batches out)
    until a new batch lands. The start says to remove the checkpoint with the output; a new
    checkpoint location builds the output."""
    zone = Zone(tmp_path / "landing")
    zone.commit([(V1, "c", (1, "a"))])
    out, checkpoint = tmp_path / "current", tmp_path / "checkpoint"
    run_query(spark, zone.root, out, checkpoint)
    link = out / "shop" / "items"
    older = tmp_path / "older"
    shutil.copytree(out, older, symlinks=True)
    zone.commit([(V1, "c", (2, "b"))])
    run_query(spark, zone.root, out, checkpoint)

    shutil.rmtree(out)
    with pytest.raises(ConfigError, match=r"up to 2, but the output .* does not exist") as caught:
        start_current_state_stream(spark, zone.root, "shop.items", out, checkpoint)
    assert "together with the output directory" in caught.value.hint
    shutil.copytree(older, out, symlinks=True)
    with pytest.raises(ConfigError, match="holds batches up to 1 only"):
        start_current_state_stream(spark, zone.root, "shop.items", out, checkpoint)
    with pytest.raises(ConfigError, match="is the checkpoint of the query of"):
        start_current_state_stream(spark, zone.root, "shop.items", tmp_path / "other", checkpoint)

    run_query(spark, zone.root, out, tmp_path / "new-checkpoint")
    assert [r["id"] for r in rows(spark, link)] == [1, 2]


def test_queries_of_tables_and_outputs_run_side_by_side(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Each query's name is its table's and output's: a_b.c and a.b_c, and one table to two
    outputs, stream in one session; ``query_name`` names a query."""
    first = table("a_b.c", int_col(0, "id"), text_col(1, "name"), key=[0])
    second = table("a.b_c", int_col(0, "id"), text_col(1, "name"), key=[0])
    zone = Zone(tmp_path / "landing")
    zone.commit([(first, "c", (1, "one")), (second, "c", (2, "two"))])
    runs = [
        ("a_b.c", tmp_path / "out1", None),
        ("a.b_c", tmp_path / "out2", None),
        ("a.b_c", tmp_path / "out3", "mine"),
    ]
    queries: list[Any] = []
    try:
        for name, out, query_name in runs:
            queries.append(
                start_current_state_stream(
                    spark,
                    zone.root,
                    name,
                    out,
                    tmp_path / f"{out.name}-checkpoint",
                    trigger_seconds=0.2,
                    query_name=query_name,
                )
            )
        for query in queries:
            query.processAllAvailable()
    finally:
        for query in queries:
            query.stop()
    assert [query.exception() for query in queries] == [None, None, None]
    names = [query.name for query in queries]
    assert names[0].startswith("current_state_a_b.c_")
    assert names[1].startswith("current_state_a.b_c_")
    assert names[2] == "mine"
    assert names[1] != default_query_name(TableDir.named("a.b_c"), (tmp_path / "out3").resolve())
    assert rows(spark, tmp_path / "out1" / "a_b" / "c") == [{"id": 1, "name": "one"}]
    assert rows(spark, tmp_path / "out2" / "a" / "b_c") == [{"id": 2, "name": "two"}]
    assert rows(spark, tmp_path / "out3" / "a" / "b_c") == [{"id": 2, "name": "two"}]
