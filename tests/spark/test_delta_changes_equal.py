"""The Arrow reader of ``--format delta`` reads what the Spark reader reads: on the same landing
zones, ``delta.changes.read_lineage`` and ``spark.changes.read_lineage`` give the same model
(columns, types as Spark shows them, key) and the same change rows, row for row in ``_seq``
order, value for value.

Two zones of ``tests/unit/test_delta_changes.py``: schema versions (columns added with a
constant, NULL and expression default, dropped, renamed, widened; a truncate; before images
across renames), and a compaction holding the first copies of a replay. A DECIMAL widened past
38 digits is text in both, the same digits: every version's values at the newest version's
scale, in the row images and in the before images of a DECIMAL key (``DECIMAL_KEY_BATCHES``).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from replicator.delta.changes import read_lineage as arrow_read_lineage
from replicator.landed.options import MaterializeOptions
from replicator.spark.changes import read_lineage as spark_read_lineage
from replicator.spark.type_map import spark_type_name
from tests.spark.test_types import DECIMAL_KEY_BATCHES
from tests.spark.zone import Ddl, Zone
from tests.unit.test_delta_changes import E1, P2, compact, compacted_zone, lineage_of, schema_zone

pytestmark = pytest.mark.spark


def _plain(value: Any) -> Any:
    """A collected value as ``to_pylist`` shows it: instants in UTC, bytes, dicts."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)  # collect() shows naive UTC
    return value


def same_reads(spark: SparkSession, root: Path, name: str) -> list[dict[str, Any]]:
    """Both readers on table ``name``; returns the change rows they agree on."""
    lineage, files, rereading = lineage_of(root, name)
    options = MaterializeOptions(allow_unknown=True)
    arrow = arrow_read_lineage(lineage, files, rereading, options)
    spark_read = spark_read_lineage(spark, lineage, files, rereading, options)
    assert arrow is not None and spark_read is not None
    assert arrow[1] == spark_read[1]  # the files the changes come from
    model, frame = spark_read[0].model, spark_read[0].changes
    assert [f"{f.name}:{spark_type_name(f.type)}" for f in arrow[0].model.schema] == [
        f"{f.name}:{f.dataType.simpleString()}" for f in model.columns.fields
    ]
    assert arrow[0].model.key == model.key
    assert arrow[0].changes.column_names == frame.columns
    expected = [_plain(r.asDict(recursive=True)) for r in frame.orderBy("_seq").collect()]
    got = [_plain(r) for r in arrow[0].changes.to_pylist()]
    assert got == expected
    return got


def test_schema_versions_read_alike(spark: SparkSession, tmp_path: Path) -> None:
    zone = schema_zone(tmp_path / "landing", wide=False)
    zone.commit([Ddl("alter", "d.p"), (P2, "c", (40, "d", 1, 2, 3, 8))])
    assert len(same_reads(spark, zone.root, "d.p")) == 6
    assert len(same_reads(spark, zone.root, "d.l")) == 1
    zone.commit([Ddl("create", "d.e", version=E1)])
    assert same_reads(spark, zone.root, "d.e") == []  # no row yet: the record's columns


def test_a_compaction_with_replayed_copies_reads_alike(spark: SparkSession, tmp_path: Path) -> None:
    zone = compacted_zone(tmp_path / "landing")
    compact(zone)
    assert len(same_reads(spark, zone.root, "shop.items")) == 5
    assert len(same_reads(spark, zone.root, "shop.log")) == 2


def test_a_decimal_widened_past_38_digits_reads_alike(spark: SparkSession, tmp_path: Path) -> None:
    """Every version's values at the scale of the newest (DECIMAL(30,10) and (30,25) meet in
    text: 25 decimals), as SELECT shows them after the ALTER."""
    zone = schema_zone(tmp_path / "landing")
    got = same_reads(spark, zone.root, "d.p")
    assert [(r["_op"], r["id"], r["amount"]) for r in got] == [
        ("c", 1, "12345678901234567890.0123456789000000000000000"),
        ("c", 2, "0.0000000000000000000000000"),
        ("u", 2, "-1.5000000000000000000000000"),
        ("c", 3, "1.0000000000000000000000000"),
        ("u", 30, "0.5000000000000000000000000"),
    ]


def test_a_decimal_key_widened_past_38_digits_reads_alike(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A DECIMAL key widened past 38 digits (decimal to text, then text to text): the row
    images and the before images of every version at the newest version's scale."""
    zone = Zone(tmp_path / "landing")
    for batch, _ in DECIMAL_KEY_BATCHES:
        zone.commit(batch)
    got = same_reads(spark, zone.root, "shop.dk")
    before = [None if r["_before_key"] is None else r["_before_key"]["id"] for r in got]
    assert [(r["_op"], r["id"], b) for r, b in zip(got, before, strict=True)] == [
        ("c", "1.500000", None),
        ("c", "2.000000", None),
        ("c", "3.000000", None),
        ("u", "1.500000", "1.500000"),
        ("d", "2.000000", None),
        ("u", "3.000000", "3.000000"),
        ("c", "4.000000", None),
        ("d", "1.500000", None),
        ("u", "4.000000", "4.000000"),
    ]
