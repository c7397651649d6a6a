"""Replays: after ``checkpoint set`` moved the stream back, the daemon lands the re-read
transactions again, with higher ``_seq``, in batches that say ``replay``. Every output table
must come out as before the replay — keyed and keyless (a multiset, where a second copy would
show), with GTIDs or identified by binlog position only, also when the replayed range holds a
truncate and a rename (the re-landed rows before them must not come back) — and an
incremental run must equal a full refresh."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from replicator.spark.materialize import materialize
from tests.spark.test_lifecycle import check, outputs
from tests.spark.zone import Ddl, Zone, int_col, table, text_col

pytestmark = pytest.mark.spark

ITEMS = table("shop.items", int_col(0, "id"), text_col(1, "name"), key=[0])
LOG = table("shop.log", int_col(0, "a"), text_col(1, "b"))  # no primary key
OLD = table("shop.old", int_col(0, "a"), text_col(1, "b"))
NEW = table("shop.new", int_col(0, "a"), text_col(1, "b"))


@pytest.mark.parametrize("gtids", [True, False], ids=["gtid", "position"])
def test_a_replayed_range_changes_nothing(spark: SparkSession, tmp_path: Path, gtids: bool) -> None:
    zone = Zone(tmp_path / "landing", gtids=gtids)
    out = tmp_path / "out"
    zone.commit([(ITEMS, "c", (i, f"n{i}")) for i in (1, 2, 3)] + [(LOG, "c", (1, "x"))] * 2)
    zone.commit(
        [
            (ITEMS, "u", (2, "two"), (2, "n2")),
            (ITEMS, "d", (3, "n3")),
            (LOG, "c", (2, "y")),
            (LOG, "d", (1, "x")),
            (OLD, "c", (5, "o")),
        ]
    )
    zone.commit(
        [
            (ITEMS, "c", (4, "before the truncate")),
            Ddl("truncate", "shop.items"),
            (ITEMS, "c", (5, "after")),
            (LOG, "c", (3, "z")),
            (OLD, "c", (6, "p")),
            Ddl("rename", "shop.old", "shop.new"),
            (NEW, "c", (7, "q")),
        ]
    )
    check(spark, zone, out)
    before = outputs(spark, out)
    assert before["shop.items"] == [{"id": 5, "name": "after"}]
    assert sorted(before) == ["shop.items", "shop.log", "shop.new"]

    replays = zone.replay([2, 3])  # `checkpoint set` back to batch 2's start
    assert [m["replay"] for m in replays] == [True, True]
    results = check(spark, zone, out)
    assert outputs(spark, out) == before
    assert {t: r.action for t, r in results.items()} == {
        "shop.items": "built",
        "shop.log": "built",
        "shop.new": "built",
        "shop.old": "removed",
    }
    assert results["shop.log"].detail == "rebuilt: batch 4 replays transactions"

    zone.commit([(LOG, "c", (1, "x")), (ITEMS, "c", (6, "six"))])  # the stream goes on
    results = check(spark, zone, out)
    assert (results["shop.items"].action, results["shop.log"].action) == ("merged", "merged")
    assert outputs(spark, out)["shop.log"] == [
        {"a": 1, "b": "x"},
        {"a": 1, "b": "x"},
        {"a": 2, "b": "y"},
        {"a": 3, "b": "z"},
    ]


def test_a_replay_read_in_one_run(spark: SparkSession, tmp_path: Path) -> None:
    zone = Zone(tmp_path / "landing")
    zone.commit([(LOG, "c", (1, "x")), (ITEMS, "c", (1, "a"))])
    zone.commit([(LOG, "c", (1, "x")), (ITEMS, "u", (1, "b"), (1, "a"))])
    zone.replay([1, 2])
    zone.replay([2])  # replayed twice
    out = tmp_path / "out"
    materialize(spark, zone.root, out)
    assert outputs(spark, out) == {
        "shop.items": [{"id": 1, "name": "b"}],
        "shop.log": [{"a": 1, "b": "x"}, {"a": 1, "b": "x"}],
    }


def test_snapshot_chunks_read_at_one_point_count_once(spark: SparkSession, tmp_path: Path) -> None:
    """Chunks of one snapshot share the read point's binlog position (no GTID): a later chunk
    is no copy of an earlier one, also in a batch that re-reads (after `checkpoint set`, the
    source idle): a replay re-reads the binlog, never a snapshot."""
    zone = Zone(tmp_path / "landing", gtids=False)
    out = tmp_path / "out"
    zone.snapshot(LOG, [(1, "x"), (2, "y")], at=4711)
    zone.snapshot(LOG, [(3, "z")], at=4711)
    zone.snapshot(ITEMS, [(1, "a")], at=4711)
    zone.snapshot(LOG, [(4, "w")], at=4711, replay=True)
    check(spark, zone, out)
    assert outputs(spark, out)["shop.log"] == [
        {"a": 1, "b": "x"},
        {"a": 2, "b": "y"},
        {"a": 3, "b": "z"},
        {"a": 4, "b": "w"},
    ]
