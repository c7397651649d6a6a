"""What the writer records for materialize (``sink.parquet_writer``): the primary key in the
footer (``replicator.primary_key``) and each update's before-image key (``_before_key``).
Read back with pyarrow; no Spark needed."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from replicator.binlog.values import ABSENT
from replicator.errors import SinkError
from replicator.sink.changes import Run, TableVersion
from replicator.sink.parquet_writer import ParquetTableWriter
from tests.blocks import row_change
from tests.spark.zone import TS, int_col, table, text_col

pytestmark = pytest.mark.spark


def change(
    seq: int, op: str, values: tuple[object, ...], before: tuple[object, ...] | None = None
) -> Run:
    return row_change(op, seq, None, TS, 1, "mysql-bin.000001", 4, values, before)


def written(path: Path, version: TableVersion, changes: list[Run]) -> pa.Table:
    writer = ParquetTableWriter(
        path, version, with_before=False, with_absent=True, with_before_key=True
    )
    writer.write(changes)
    writer.close()
    return pq.read_table(path)


def test_keyed_table(tmp_path: Path) -> None:
    version = table("d.t", int_col(0, "a"), int_col(1, "id"), text_col(2, "s"), key=[1, 0])
    got = written(
        tmp_path / "f.parquet",
        version,
        [
            change(1, "c", (1, 2, "x")),
            change(2, "u", (1, 3, "x"), (1, 2, "x")),  # key (2, 1) -> (3, 1)
            change(3, "u", (ABSENT, ABSENT, "y"), (1, 3, ABSENT)),  # MINIMAL image
            change(4, "u", (1, 3, "z"), None),  # before image not handed over
            change(5, "u", (1, 3, "z"), (ABSENT, 3, "y")),  # a key column missing
            change(6, "d", (1, 3, "z")),
        ],
    )
    assert json.loads(got.schema.metadata[b"replicator.primary_key"]) == ["id", "a"]
    assert got.schema.field("_before_key").type == pa.struct(
        [pa.field("id", pa.int32()), pa.field("a", pa.int32())]
    )
    assert got.column("_before_key").to_pylist() == [
        None,
        {"id": 2, "a": 1},
        {"id": 3, "a": 1},
        None,
        None,
        None,
    ]
    assert got.column_names[-1] == "_before_key"


def test_keyless_table_keeps_the_whole_before_image(tmp_path: Path) -> None:
    version = table("d.t", int_col(0, "a"), text_col(1, "s"))
    got = written(tmp_path / "f.parquet", version, [change(1, "u", (2, "y"), (1, None))])
    assert json.loads(got.schema.metadata[b"replicator.primary_key"]) == []
    assert got.column("_before_key").to_pylist() == [{"a": 1, "s": None}]


def test_filtered_key_column_means_whole_rows(tmp_path: Path) -> None:
    # the pipeline keeps the TABLE_MAP's key ordinals; column 0 (the key) was filtered out
    version = TableVersion("d", "t", (int_col(1, "b"), text_col(2, "s")), (0,))
    got = written(tmp_path / "f.parquet", version, [change(1, "u", (2, "y"), (1, "x"))])
    assert json.loads(got.schema.metadata[b"replicator.primary_key"]) == []
    assert got.column("_before_key").to_pylist() == [{"b": 1, "s": "x"}]


def test_column_named_before_key_is_refused(tmp_path: Path) -> None:
    version = table("d.t", int_col(0, "_Before_Key"))
    with pytest.raises(SinkError, match="name of a landing-zone metadata column"):
        ParquetTableWriter(tmp_path / "f", version, with_before=False, with_before_key=True)
    ParquetTableWriter(tmp_path / "g", version, with_before=False).abort()  # fine without
