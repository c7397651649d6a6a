"""materialize across a compaction (``replicator compact``): the same tables before and after,
from scratch and incrementally, when the compacted files hold batches the output applied
already, when the first copies of replayed transactions sit in a compacted file, and across a
truncate and a rename (lifecycle records compaction never merges across).

Retention is 0 here: the superseded files are gone, so every read goes through the
compaction outputs.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from replicator.landed.committed import committed_files
from replicator.sink import compaction as cp
from replicator.spark.materialize import MaterializeOptions, current_state, materialize
from replicator.storage import LocalStore
from tests.spark.zone import Ddl, Zone, expected_keyed, expected_multiset, int_col, table, text_col

pytestmark = pytest.mark.spark

ITEMS = table("shop.items", int_col(0, "id"), text_col(1, "name"), int_col(2, "qty"), key=[0])
LOG = table("shop.log", int_col(0, "a"), text_col(1, "b"))  # no primary key: a multiset
OLD = table("shop.old", int_col(0, "id"), text_col(1, "v"), key=[0])
NEW = table("shop.new", int_col(0, "id"), text_col(1, "v"), key=[0])
SETTINGS = cp.Settings(older_than=0.0, target_bytes=1 << 30, retention=0.0)


def rows(spark: SparkSession, path: Path) -> list[dict[str, Any]]:
    return sorted((r.asDict() for r in spark.read.parquet(str(path)).collect()), key=repr)


def outputs(spark: SparkSession, out: Path) -> dict[str, list[dict[str, Any]]]:
    return {
        f"shop.{link.name}": rows(spark, link)
        for link in sorted((out / "shop").iterdir())
        if not link.name.startswith(".")
    }


def batch(zone: Zone, n: int) -> None:
    zone.commit(
        [
            (ITEMS, "c", (n, f"n{n}", n)),
            (ITEMS, "u", (n // 2, f"u{n}", n), (n // 2, f"n{n // 2}", n // 2)),
            (LOG, "c", (n % 3, "x")),
            (OLD, "c", (n, "o")),
        ]
    )


def test_materialize_before_and_after_compaction(spark: SparkSession, tmp_path: Path) -> None:
    zone = Zone(tmp_path / "landing")
    options = MaterializeOptions(keep_metadata=True)
    for n in range(1, 7):
        batch(zone, n)
    zone.commit([(LOG, "c", (9, "before")), Ddl("truncate", "shop.log"), (LOG, "c", (9, "after"))])
    zone.replay([3, 4])  # batches 8, 9: the first copies are in files about to be compacted
    for n in range(7, 12):
        batch(zone, n)
    incremental = tmp_path / "incremental"
    first = materialize(spark, zone.root, incremental, options=options)
    assert {r.last_batch for r in first} == {14}
    applied = zone.checkpoint.next_seq - 1
    for n in range(12, 18):
        batch(zone, n)
    zone.commit([(OLD, "c", (99, "last")), Ddl("rename", "shop.old", "shop.new")])
    zone.commit([(NEW, "c", (100, "new")), (ITEMS, "d", (1, "n1", 1))])
    uncompacted = tmp_path / "uncompacted"
    shutil.copytree(zone.root, uncompacted)
    before = tmp_path / "before"
    materialize(spark, uncompacted, before, options=options)

    result = cp.run_compaction(LocalStore(zone.root), SETTINGS)
    assert result.record == 1
    # a file per run of batches; the replays stay alone, and so does batch 7's file of log (it
    # holds rows from before and after the truncate)
    live = {t: len({f.path for f in fs}) for t, fs in committed_files(zone.root).items()}
    files = {t: len(list((zone.root / "shop" / t.split(".")[1]).iterdir())) for t in live}
    assert live == files  # retention 0: only live files are left
    assert live["shop.items"] == 4  # batches 1..6, 8 and 9 (replays), 10..22
    assert live["shop.log"] == 5  # 1..6, 7 (the truncate), 8, 9, 10..20
    assert live["shop.old"] == 4  # 1..6, 8, 9, 10..21 (the rename ends it)
    assert result.files_before == sum(len(fs) for fs in _entries(zone.root).values())
    assert result.files_after == sum(live.values())

    after = tmp_path / "after"
    materialize(spark, zone.root, after, options=options)
    expected = outputs(spark, before)
    assert outputs(spark, after) == expected
    assert sorted(expected) == ["shop.items", "shop.log", "shop.new"]

    # an output that applied batches 1..14 already: merged from the compacted file of batches
    # 10..22, whose rows up to batch 14 it must not apply again
    second = {r.table: r for r in materialize(spark, zone.root, incremental, options=options)}
    assert second["shop.items"].action == "merged"
    new = [c for v, c in zone.history if v.name == "shop.items" and c.seq > applied]
    assert second["shop.items"].changes == len(new) == 13
    assert outputs(spark, incremental) == expected

    # the plain-Python model of the changes agrees, and so does current_state
    items = {r["id"]: r["name"] for r in expected["shop.items"]}
    model = expected_keyed(zone.history, "shop.items")
    assert items == {k[0]: v["name"] for k, v in model.items()}
    log = sorted((r["a"], r["b"]) for r in expected["shop.log"])
    truncated = next(seq for seq, record in zone.records if record.op == "truncate")
    since = [(v, c) for v, c in zone.history if c.seq > truncated]
    assert log == sorted(expected_multiset(since, "shop.log").elements())
    state = current_state(spark, zone.root, "shop.log").collect()
    assert sorted((r["a"], r["b"]) for r in state) == log


def _entries(root: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for manifest in sorted((root / "_manifests").glob("*.json")):
        for item in json.loads(manifest.read_text())["files"]:
            out.setdefault(item["table"], []).append(item["path"])
    return out
