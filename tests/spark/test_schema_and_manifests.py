"""Pure pieces without a SparkSession: type widening across schema versions (``schema.widen``,
``unify``) and reading manifests (``committed``): order, gaps, unpublished batches, the
primary key the footers record."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import types as T

from replicator.errors import ConfigError, IntegrityError
from replicator.landed.committed import read_manifests, table_identity
from replicator.spark.schema import unify, widen
from tests.spark.zone import Zone, int_col, table, text_col

pytestmark = pytest.mark.spark

ITEMS = table("shop.items", int_col(0, "id"), text_col(1, "name"), key=[0])


@pytest.mark.parametrize(
    ("a", "b", "wider"),
    [
        (T.IntegerType(), T.LongType(), T.LongType()),
        (T.ByteType(), T.ShortType(), T.ShortType()),
        (T.LongType(), T.DecimalType(20, 0), T.DecimalType(20, 0)),  # BIGINT -> UNSIGNED
        (T.IntegerType(), T.DecimalType(10, 2), T.DecimalType(12, 2)),
        (T.DecimalType(10, 2), T.DecimalType(12, 4), T.DecimalType(12, 4)),
        (T.DecimalType(38, 0), T.DecimalType(10, 5), T.StringType()),  # past 38 digits: text
        (T.FloatType(), T.DoubleType(), T.DoubleType()),
        (T.IntegerType(), T.DoubleType(), T.DoubleType()),
        (T.StringType(), T.BinaryType(), T.BinaryType()),
        (T.NullType(), T.DateType(), T.DateType()),
        (T.DateType(), T.TimestampNTZType(), T.StringType()),
        (T.ArrayType(T.FloatType()), T.ArrayType(T.DoubleType()), T.ArrayType(T.DoubleType())),
    ],
)
def test_widen(a: T.DataType, b: T.DataType, wider: T.DataType) -> None:
    assert widen(a, b) == wider
    assert widen(b, a) == wider


def test_unify_keeps_the_newest_columns() -> None:
    old = T.StructType(
        [T.StructField("id", T.IntegerType()), T.StructField("gone", T.StringType())]
    )
    new = T.StructType([T.StructField("ID", T.LongType()), T.StructField("added", T.DateType())])
    assert unify([old, new]) == T.StructType(
        [T.StructField("ID", T.LongType()), T.StructField("added", T.DateType())]
    )


def test_manifests_in_order_until_one_is_not_published(tmp_path: Path) -> None:
    zone = Zone(tmp_path)
    for i in range(3):
        zone.commit([(ITEMS, "c", (i, "x"))])
    third = json.loads((tmp_path / "_manifests" / f"{3:020d}.json").read_text())
    published = tmp_path / third["files"][0]["path"]
    os.replace(published, published.with_name(f".{published.name}.tmp"))
    found = read_manifests(tmp_path)
    assert ([m.batch for m in found.manifests], found.waiting) == ([1, 2], 3)
    assert [m.batch for m in read_manifests(tmp_path, after=1).manifests] == [2]
    assert [m.batch for m in read_manifests(tmp_path, unpublished=True).manifests] == [1, 2, 3]

    (tmp_path / "_manifests" / f"{2:020d}.json").unlink()
    with pytest.raises(IntegrityError, match="committed batch 2 is missing"):
        read_manifests(tmp_path)


def test_identity_from_footers() -> None:
    def schema(key: list[str] | None) -> pa.Schema:
        meta = {} if key is None else {b"replicator.primary_key": json.dumps(key).encode()}
        return pa.schema([pa.field("id", pa.int32())], metadata=meta)

    here = Path("f")
    assert table_identity("d.t", [(here, schema(["id"])), (here, schema(["id"]))]) == ("id",)
    assert table_identity("d.t", [(here, schema([]))]) == ()
    with pytest.raises(ConfigError, match="primary key changed"):
        table_identity("d.t", [(here, schema(["id"])), (here, schema([]))])
    with pytest.raises(ConfigError, match="does not record the primary key"):
        table_identity("d.t", [(here, schema(None))])
    assert table_identity("d.t", [(here, schema(None))], override=["id"]) == ("id",)
