"""materialize: current state from real landing zones (written by LandingZone), checked against
a plain-Python replay of the same changes and against literal expectations.

Primary-key updates (also swaps and chains inside one batch), deletes and re-inserts, schema
versions (ADD/DROP COLUMN, MODIFY widening up to BIGINT UNSIGNED), tables without a key,
partial row images, incremental runs (only new manifests read; same result as from scratch),
and files that must never be read (in flight, uncommitted, committed but unpublished).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from replicator.binlog.constants import ColumnType as CT
from replicator.binlog.values import ABSENT
from replicator.errors import ConfigError, IntegrityError
from replicator.sink.parquet_writer import ParquetTableWriter
from replicator.spark.materialize import (
    MaterializeOptions,
    TableResult,
    _at_once,
    materialize,
)
from replicator.spark.output import WRITE_CONF, write_settings
from replicator.spark.state import STATE_FILE
from tests.spark.zone import (
    TS,
    Zone,
    col,
    expected_keyed,
    expected_multiset,
    int_col,
    table,
    text_col,
)

pytestmark = pytest.mark.spark

ITEMS = table("shop.items", int_col(0, "id"), text_col(1, "name"), int_col(2, "qty"), key=[0])
LOG = table("shop.log", int_col(0, "a"), text_col(1, "b"))  # no primary key


def state_rows(spark: SparkSession, path: Path) -> list[dict[str, Any]]:
    frame = spark.read.parquet(str(path))
    return sorted((r.asDict() for r in frame.collect()), key=repr)


def keyed(spark: SparkSession, path: Path, key: str = "id") -> dict[Any, dict[str, Any]]:
    return {r[key]: r for r in state_rows(spark, path)}


def by_table(results: list[TableResult]) -> dict[str, TableResult]:
    return {r.table: r for r in results}


def test_primary_key_updates_deletes_and_reinserts(spark: SparkSession, tmp_path: Path) -> None:
    zone = Zone(tmp_path / "landing")
    zone.commit([(ITEMS, "c", (i, f"n{i}", i)) for i in (1, 2, 3, 4)])
    zone.commit(
        [
            (ITEMS, "u", (2, "two", 2), (2, "n2", 2)),
            (ITEMS, "d", (3, "n3", 3)),
            (ITEMS, "u", (10, "n1", 1), (1, "n1", 1)),  # primary key 1 -> 10
        ]
    )
    zone.commit(
        [
            (ITEMS, "c", (3, "again", 33)),  # re-insert after delete
            (ITEMS, "c", (1, "new one", 11)),  # the old key of a moved row, reused
            (ITEMS, "u", (5, "n4", 4), (4, "n4", 4)),  # a chain: 4 -> 5 -> 6
            (ITEMS, "u", (6, "n4", 44), (5, "n4", 4)),
            (ITEMS, "d", (10, "n1", 1)),
        ]
    )
    zone.commit(  # swap keys 2 and 6 inside one transaction, through 7
        [
            (ITEMS, "u", (7, "two", 2), (2, "two", 2)),
            (ITEMS, "u", (2, "n4", 44), (6, "n4", 44)),
            (ITEMS, "u", (6, "two", 2), (7, "two", 2)),
        ]
    )
    out = tmp_path / "out"
    result = by_table(materialize(spark, zone.root, out))["shop.items"]

    expected = {
        1: {"id": 1, "name": "new one", "qty": 11},
        2: {"id": 2, "name": "n4", "qty": 44},
        3: {"id": 3, "name": "again", "qty": 33},
        6: {"id": 6, "name": "two", "qty": 2},
    }
    assert keyed(spark, out / "shop" / "items") == expected
    reference = expected_keyed(zone.history, "shop.items")
    assert {k[0]: v for k, v in reference.items()} == expected
    assert (result.action, result.batches, result.changes, result.rows) == ("built", 4, 15, 4)
    assert (result.last_batch, result.waiting, result.unmatched) == (4, None, 0)
    assert (out / "shop" / "items").is_symlink()


def test_schema_versions_add_drop_and_widen_columns(spark: SparkSession, tmp_path: Path) -> None:
    v1 = table("shop.t", int_col(0, "id"), int_col(1, "qty"), text_col(2, "name"), key=[0])
    v2 = table(  # MODIFY qty BIGINT, ADD note
        "shop.t",
        int_col(0, "id"),
        col(1, CT.LONGLONG, "qty"),
        text_col(2, "name"),
        text_col(3, "note"),
        key=[0],
    )
    v3 = table(  # MODIFY qty BIGINT UNSIGNED, DROP name
        "shop.t",
        int_col(0, "id"),
        col(1, CT.LONGLONG, "qty", unsigned=True),
        text_col(2, "note"),
        key=[0],
    )
    zone = Zone(tmp_path / "landing")
    zone.commit([(v1, "c", (i, i * 10, f"n{i}")) for i in (1, 2, 3)])
    zone.commit(
        [
            (v2, "c", (4, 2**40, "n4", "added")),
            (v2, "u", (1, 2**41, "n1", "note1"), (1, 10, "n1", None)),
        ]
    )
    zone.commit(
        [
            (v3, "u", (2, 2**64 - 1, "max"), (2, 20, None)),
            (v3, "d", (3, 30, None)),
        ]
    )
    out = tmp_path / "out"
    materialize(spark, zone.root, out)

    frame = spark.read.parquet(str(out / "shop" / "t"))
    assert [(f.name, f.dataType.simpleString()) for f in frame.schema.fields] == [
        ("id", "int"),
        ("qty", "decimal(20,0)"),
        ("note", "string"),
    ]
    assert keyed(spark, out / "shop" / "t") == {
        1: {"id": 1, "qty": Decimal(2**41), "note": "note1"},
        2: {"id": 2, "qty": Decimal(2**64 - 1), "note": "max"},
        4: {"id": 4, "qty": Decimal(2**40), "note": "added"},
    }


def test_table_without_primary_key_is_a_multiset(spark: SparkSession, tmp_path: Path) -> None:
    zone = Zone(tmp_path / "landing")
    zone.commit([(LOG, "c", (1, "x")), (LOG, "c", (1, "x")), (LOG, "c", (1, "x"))])
    zone.commit(
        [
            (LOG, "c", (2, "y")),
            (LOG, "d", (1, "x")),  # one copy of three goes
            (LOG, "u", (3, "z"), (1, "x")),  # another becomes (3, z)
            (LOG, "d", (9, "q")),  # never inserted: ignored, counted
        ]
    )
    zone.commit([(LOG, "c", (9, "q")), (LOG, "u", (2, "y2"), (2, "y"))])
    out = tmp_path / "out"
    result = by_table(materialize(spark, zone.root, out))["shop.log"]

    got = sorted((r["a"], r["b"]) for r in state_rows(spark, out / "shop" / "log"))
    assert got == [(1, "x"), (2, "y2"), (3, "z"), (9, "q")]
    assert sorted(expected_multiset(zone.history, "shop.log").elements()) == got
    assert (result.rows, result.unmatched) == (4, 1)


def test_partial_row_images(spark: SparkSession, tmp_path: Path) -> None:
    zone = Zone(tmp_path / "landing")
    zone.commit([(ITEMS, "c", (1, "a", 5)), (ITEMS, "c", (2, ABSENT, 7))])
    # MINIMAL: the before image names the key, the after image has the changed column only
    zone.commit([(ITEMS, "u", (ABSENT, "b", ABSENT), (1, ABSENT, ABSENT))])

    strict = tmp_path / "strict"
    with pytest.raises(
        IntegrityError, match=r'key \{"id":2\} has columns no row image carried: name'
    ):
        materialize(spark, zone.root, strict)
    assert not os.path.lexists(strict / "shop" / "items")
    assert list((strict / "shop").iterdir()) == []  # the failed version was removed

    lenient = tmp_path / "lenient"
    materialize(spark, zone.root, lenient, options=MaterializeOptions(allow_unknown=True))
    assert keyed(spark, lenient / "shop" / "items") == {
        1: {"id": 1, "name": "b", "qty": 5, "_absent": []},
        2: {"id": 2, "name": None, "qty": 7, "_absent": ["name"]},
    }


def test_partial_image_of_a_keyless_table_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    zone = Zone(tmp_path / "landing")
    zone.commit([(LOG, "c", (1, ABSENT))])
    with pytest.raises(IntegrityError, match="partial row image of a table without primary key"):
        materialize(spark, zone.root, tmp_path / "out")


def test_incremental_run_reads_only_new_manifests_and_equals_a_full_run(
    spark: SparkSession, tmp_path: Path
) -> None:
    zone = Zone(tmp_path / "landing")
    zone.commit([(ITEMS, "c", (i, f"n{i}", i)) for i in range(1, 6)] + [(LOG, "c", (1, "x"))])
    zone.commit([(ITEMS, "u", (20, "n2", 2), (2, "n2", 2)), (LOG, "c", (1, "x"))])
    out = tmp_path / "out"
    options = MaterializeOptions(keep_metadata=True)
    first = by_table(materialize(spark, zone.root, out, options=options))
    assert {t: r.action for t, r in first.items()} == {"shop.items": "built", "shop.log": "built"}

    zone.commit([(ITEMS, "d", (3, "n3", 3)), (ITEMS, "c", (2, "back", 22)), (LOG, "d", (1, "x"))])
    zone.commit([(ITEMS, "u", (1, "one", 100), (1, "n1", 1))])
    whole = tmp_path / "whole-landing"
    shutil.copytree(zone.root, whole)
    processed = [
        zone.root / item["path"]
        for manifest in sorted((zone.root / "_manifests").glob("*.json"))[:2]
        for item in json.loads(manifest.read_text())["files"]
    ]
    assert len(processed) == 4
    for data in processed:  # what the first run applied: a second run must not read it
        data.write_bytes(b"not parquet")

    second = by_table(materialize(spark, zone.root, out, options=options))
    assert (second["shop.items"].action, second["shop.items"].batches) == ("merged", 2)
    assert (second["shop.log"].action, second["shop.log"].batches) == ("merged", 1)
    assert (second["shop.items"].changes, second["shop.log"].changes) == (3, 1)

    scratch = tmp_path / "scratch"
    materialize(spark, whole, scratch, options=options)
    for name in ("items", "log"):
        assert state_rows(spark, out / "shop" / name) == state_rows(spark, scratch / "shop" / name)
    items = keyed(spark, out / "shop" / "items")
    assert sorted(items) == [1, 2, 4, 5, 20]
    assert {k: (v["name"], v["_op"]) for k, v in items.items()} == {
        1: ("one", "u"),
        2: ("back", "c"),
        4: ("n4", "c"),
        5: ("n5", "c"),
        20: ("n2", "u"),
    }
    assert items[1]["_seq"] == max(c.seq for _, c in zone.history)
    assert items[1]["_ts"] == TS.replace(tzinfo=None)  # the driver runs with TZ=UTC
    assert items[1]["_binlog_file"] == "mysql-bin.000001"
    expected = expected_keyed(zone.history, "shop.items")
    assert {k[0]: v["name"] for k, v in expected.items()} == {
        k: v["name"] for k, v in items.items()
    }
    # one version per table is left; a third run has nothing to do
    assert sorted(p.name.split(".v-")[0] for p in (out / "shop").glob(".*.v-*")) == [
        ".items",
        ".log",
    ]
    third = by_table(materialize(spark, zone.root, out, options=options))
    assert {t: (r.action, r.last_batch) for t, r in third.items()} == {
        "shop.items": ("unchanged", 4),
        "shop.log": ("unchanged", 4),
    }
    with pytest.raises(ConfigError, match="keep_metadata=True"):
        materialize(spark, zone.root, out)  # the options must match the existing state


def test_uncommitted_and_in_flight_files_are_never_read(
    spark: SparkSession, tmp_path: Path
) -> None:
    zone = Zone(tmp_path / "landing")
    zone.commit([(ITEMS, "c", (1, "committed", 1))])
    directory = zone.root / "shop" / "items"
    rogue = [(ITEMS, "c", (666, "must not appear", 0))]
    for name in (".part-00000000000000000500.parquet.tmp", "part-00000000000000000600.parquet"):
        writer = ParquetTableWriter(directory / name, ITEMS, with_before=False, with_absent=True)
        writer.write([_change(seq, item) for seq, item in enumerate(rogue, start=500)])
        writer.close()
    (zone.root / "_manifests" / ".00000000000000000009.json.tmp").write_text("{}")
    manifest = zone.commit([(ITEMS, "c", (2, "second", 2))])
    published = zone.root / manifest["files"][0]["path"]
    in_flight = published.with_name(f".{published.name}.tmp")
    os.replace(published, in_flight)  # committed, not yet renamed into place

    out = tmp_path / "out"
    result = by_table(materialize(spark, zone.root, out))["shop.items"]
    assert keyed(spark, out / "shop" / "items") == {1: {"id": 1, "name": "committed", "qty": 1}}
    assert (result.last_batch, result.waiting) == (1, 2)

    os.replace(in_flight, published)
    result = by_table(materialize(spark, zone.root, out))["shop.items"]
    assert sorted(keyed(spark, out / "shop" / "items")) == [1, 2]
    assert (result.action, result.last_batch, result.waiting) == ("merged", 2, None)
    assert (out / "shop" / "items" / STATE_FILE).is_file()


def _change(seq: int, item: tuple[Any, ...]) -> Any:
    from tests.blocks import row_change

    return row_change(item[1], seq, None, TS, 1, "f", 4, tuple(item[2]))


def test_update_without_before_key_needs_stable_keys(spark: SparkSession, tmp_path: Path) -> None:
    zone = Zone(tmp_path / "landing")
    zone.commit([(ITEMS, "c", (1, "a", 1))])
    zone.commit([(ITEMS, "u", (1, "b", 2), None)])  # no before image handed over
    with pytest.raises(IntegrityError, match="update without its before-image key"):
        materialize(spark, zone.root, tmp_path / "strict")
    out = tmp_path / "stable"
    materialize(spark, zone.root, out, options=MaterializeOptions(assume_stable_keys=True))
    assert keyed(spark, out / "shop" / "items") == {1: {"id": 1, "name": "b", "qty": 2}}


def test_write_settings_stay_until_the_last_writer_is_done(spark: SparkSession) -> None:
    # tables written at once, and the streaming queries of several tables, share a session
    key = "spark.sql.parquet.outputTimestampType"
    spark.conf.set(key, "INT96")
    try:
        with contextlib.ExitStack() as first:
            first.enter_context(write_settings(spark))
            with write_settings(spark):
                first.close()  # the first writer is done while the second still writes
                assert spark.conf.get(key) == WRITE_CONF[key]
            assert spark.conf.get(key) == "INT96"  # the last one put the value back
    finally:
        spark.conf.unset(key)
    with write_settings(spark):
        assert spark.conf.get(key) == WRITE_CONF[key]
    assert spark.conf.get(key, None) is None  # unset before: unset again


def test_tables_at_once_keep_their_own_spark_properties(spark: SparkSession) -> None:
    # Spark puts a query's SQL settings into its thread's properties while it runs and takes
    # them out after: threads sharing one set of properties lose them under each other
    sc = spark.sparkContext
    sc.setLocalProperty("replicator.test.caller", "here")
    together = threading.Barrier(3, timeout=60)

    def run(item: str) -> tuple[str | None, str | None]:
        sc.setLocalProperty("replicator.test.item", item)
        together.wait()  # every thread has set its own before any reads it back
        return sc.getLocalProperty("replicator.test.item"), sc.getLocalProperty(
            "replicator.test.caller"
        )

    try:
        seen = _at_once(run, ["a", "b", "c"], 3)
    finally:
        sc.setLocalProperty("replicator.test.caller", None)  # type: ignore[arg-type]
    assert seen == [("a", "here"), ("b", "here"), ("c", "here")]
    assert sc.getLocalProperty("replicator.test.item") is None  # the caller's are its own


def test_parallel_must_be_positive(spark: SparkSession, tmp_path: Path) -> None:
    zone = Zone(tmp_path / "landing")
    zone.commit([(ITEMS, "c", (1, "a", 1))])
    with pytest.raises(ConfigError, match="parallel is 0"):
        materialize(spark, zone.root, tmp_path / "out", options=MaterializeOptions(parallel=0))
    assert not (tmp_path / "out").exists()


def test_keys_other_than_the_recorded_one_or_null_are_refused(
    spark: SparkSession, tmp_path: Path
) -> None:
    """--key on a table whose files record a primary key names that key's columns only (an
    update's _before_key holds those alone); a --key column NULL in a row change stops the
    run naming it: NULL identifies no row."""
    zone = Zone(tmp_path / "landing")
    zone.commit([(ITEMS, "c", (1, "x", 5)), (LOG, "c", (1, "k")), (LOG, "c", (2, "m"))])
    out = tmp_path / "out"
    other = tmp_path / "other"
    with pytest.raises(ConfigError, match=r"--key shop\.items=name names columns outside"):
        materialize(
            spark, zone.root, other, options=MaterializeOptions(keys={"shop.items": ("name",)})
        )
    assert not (other / "shop" / "items").exists()
    by_b = MaterializeOptions(keys={"shop.log": ("b",)})
    materialize(spark, zone.root, out, options=by_b)
    zone.commit([(LOG, "u", (3, "k"), (1, "k"))])
    materialize(spark, zone.root, out, options=by_b)
    assert keyed(spark, out / "shop" / "log", "b") == {
        "k": {"a": 3, "b": "k"},
        "m": {"a": 2, "b": "m"},
    }
    zone.commit([(LOG, "c", (4, None))])
    with pytest.raises(IntegrityError, match=r"shop\.log: key column b is NULL in a row change at"):
        materialize(spark, zone.root, out, options=by_b)
    assert keyed(spark, out / "shop" / "log", "b")["k"] == {"a": 3, "b": "k"}  # left as it was
