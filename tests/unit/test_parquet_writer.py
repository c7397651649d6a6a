"""Landing-zone files: every column type written by ParquetTableWriter and read back with
pyarrow.parquet and pyarrow.dataset (no options) equals what the decoder produced, after the
documented conversions (arrow_types, parquet_writer); metadata columns, ``_before``,
``_absent``, invalid dates, refused values, durability and disk errors."""

from __future__ import annotations

import gc
import hashlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replicator.binlog import temporal
from replicator.binlog.constants import ColumnType as T
from replicator.binlog.json_diff import JsonDiff, JsonDiffOperation, UnappliedJsonDiffs
from replicator.binlog.schema import ColumnDef
from replicator.binlog.values import ABSENT, Geometry, InvalidTemporal
from replicator.errors import ConfigError, IntegrityError, InternalError, SinkError
from replicator.sink import digest, parquet_writer
from replicator.sink.arrow_types import (
    SCHEMA_TABLE_KEY,
    SCHEMA_VERSION_KEY,
    SPARK_VERSION_KEY,
    arrow_field,
    arrow_schema,
    schema_version,
)
from replicator.sink.changes import Run, TableVersion
from replicator.sink.parquet_writer import ParquetTableWriter, WrittenFile
from tests.blocks import row_change
from tests.hypothesis_budget import examples

ROOT = Path(__file__).resolve().parents[2]
TS = datetime(2026, 11, 22, 10, 0, 0, 123456, tzinfo=UTC)
TIME_MIN = -timedelta(hours=838, minutes=59, seconds=59)
TIME_MAX = timedelta(hours=838, minutes=59, seconds=59)
DEC65_MAX = Decimal("9" * 35 + "." + "9" * 30)
DEC65_MIN = Decimal("-" + "9" * 35 + "." + "9" * 30)  # unary minus would round to 28 digits
DEC38_MAX = Decimal("9" * 28 + "." + "9" * 10)
DEC38_MIN = Decimal("-" + "9" * 28 + "." + "9" * 10)
BLOB_1MIB = bytes(range(256)) * 4096
FLOAT32_MAX = 3.4028234663852886e38
WKB_POINT = bytes.fromhex("0101000000000000000000f03f0000000000000040")

METADATA_NAMES = ["_op", "_seq", "_gtid", "_ts", "_server_id", "_binlog_file", "_binlog_pos"]


def col(index: int, type_: int, meta: int = 0, **kw: Any) -> ColumnDef:
    kw.setdefault("name", f"c{index}")
    return ColumnDef(index=index, type=type_, meta=meta, **kw)


def change(
    seq: int,
    values: Sequence[object],
    *,
    op: str = "c",
    before: Sequence[object] | None = None,
    gtid: str | None = "0-1-7",
) -> Run:
    return row_change(
        op=op,
        seq=seq,
        gtid=gtid,
        ts=TS,
        server_id=1,
        binlog_file="mysql-bin.000003",
        binlog_pos=1000 + seq,
        values=tuple(values),
        before=None if before is None else tuple(before),
    )


def version_of(*columns: ColumnDef) -> TableVersion:
    return TableVersion("shop", "orders", tuple(columns))


def write(
    path: Path,
    version: TableVersion,
    changes: Sequence[Run],
    **kw: Any,
) -> WrittenFile:
    kw.setdefault("with_before", False)
    writer = ParquetTableWriter(path, version, **kw)
    writer.write(changes)
    return writer.close()


def read_both(path: Path) -> tuple[pa.Table, pa.Table]:
    """The file as pyarrow.parquet and pyarrow.dataset read it, with no options."""
    return pq.read_table(path), ds.dataset(path).to_table()


# One column per type: (ColumnDef, Arrow type, four values, what reads back; None = same).
BAD, N = InvalidTemporal("0000-00-00"), None
CASES: list[tuple[ColumnDef, pa.DataType, tuple[object, ...], tuple[object, ...] | None]] = [
    (col(0, T.TINY), pa.int8(), (-128, N, 127, 0), None),
    (col(1, T.TINY, unsigned=True), pa.uint8(), (0, N, 255, 1), None),
    (col(2, T.SHORT), pa.int16(), (-32768, N, 32767, 0), None),
    (col(3, T.SHORT, unsigned=True), pa.uint16(), (0, N, 65535, 1), None),
    (col(4, T.INT24), pa.int32(), (-(2**23), N, 2**23 - 1, 0), None),
    (col(5, T.INT24, unsigned=True), pa.uint32(), (0, N, 2**24 - 1, 1), None),
    (col(6, T.LONG), pa.int32(), (-(2**31), N, 2**31 - 1, 0), None),
    (col(7, T.LONG, unsigned=True), pa.uint32(), (0, N, 2**32 - 1, 1), None),
    (col(8, T.LONGLONG), pa.int64(), (-(2**63), N, 2**63 - 1, 0), None),
    (col(9, T.LONGLONG, unsigned=True), pa.uint64(), (0, N, 2**64 - 1, 1), None),
    (col(10, T.YEAR), pa.int16(), (1901, N, 2155, 0), None),
    (col(11, T.FLOAT, 4), pa.float32(), (1.5, N, FLOAT32_MAX, -0.0), None),
    (col(12, T.DOUBLE, 8), pa.float64(), (-1.7976931348623157e308, N, 5e-324, 0.1), None),
    (
        col(13, T.NEWDECIMAL, 65 << 8 | 30),
        pa.string(),
        (DEC65_MAX, N, DEC65_MIN, Decimal("0E-30")),
        (str(DEC65_MAX), N, str(DEC65_MIN), "0." + "0" * 30),
    ),
    (
        col(14, T.NEWDECIMAL, 38 << 8 | 10),
        pa.decimal128(38, 10),
        (DEC38_MAX, N, DEC38_MIN, Decimal("0E-10")),
        None,
    ),
    (
        col(15, T.NEWDECIMAL, 10 << 8 | 2),
        pa.decimal128(10, 2),
        (Decimal("-12.34"), N, Decimal("99999999.99"), Decimal("0.00")),
        None,
    ),
    (
        col(16, T.DATE),
        pa.date32(),
        (date(1000, 1, 1), N, date(9999, 12, 31), BAD),
        (date(1000, 1, 1), N, date(9999, 12, 31), N),
    ),
    (
        col(17, T.DATETIME2, 6),
        pa.timestamp("us"),
        (datetime(1000, 1, 1), N, datetime(9999, 12, 31, 23, 59, 59, 999999), BAD),
        (datetime(1000, 1, 1), N, datetime(9999, 12, 31, 23, 59, 59, 999999), N),
    ),
    (
        col(18, T.TIMESTAMP2, 6),
        pa.timestamp("us", tz="UTC"),
        (
            datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC),
            N,
            datetime(2038, 1, 19, 3, 14, 7, 999999, tzinfo=UTC),
            BAD,
        ),
        (
            datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC),
            N,
            datetime(2038, 1, 19, 3, 14, 7, 999999, tzinfo=UTC),
            N,
        ),
    ),
    (
        col(19, T.TIME2, 6),
        pa.duration("us"),
        (TIME_MIN, N, TIME_MAX, timedelta(microseconds=-1)),
        None,
    ),
    (col(20, T.TIME), pa.duration("us"), (timedelta(hours=25), N, TIME_MIN, timedelta()), None),
    (
        col(21, T.DATETIME),
        pa.timestamp("us"),
        (datetime(2000, 2, 29), N, BAD, N),
        (datetime(2000, 2, 29), N, N, N),
    ),
    (col(22, T.TIMESTAMP), pa.timestamp("us", tz="UTC"), (TS, N, TS, TS), None),
    (
        col(23, T.VARCHAR, 1020, charset="utf-8"),
        pa.string(),
        ("emoji 😀🎉 ü", N, "", "x" * 255),
        None,
    ),
    (col(24, T.VARCHAR, 255), pa.binary(), (b"\x00\xff\x00", N, b"", b"a"), None),
    (
        col(25, T.STRING, T.STRING << 8 | 8, charset="binary"),
        pa.binary(),
        (b"\x00\x00ab\x00\x00\x00\x00", N, b"\x00" * 8, b"\xff" * 8),
        None,
    ),
    (col(26, T.BLOB, 4, charset="binary"), pa.binary(), (BLOB_1MIB, N, b"", b"\x00"), None),
    (col(27, T.BLOB, 2, charset="utf-8"), pa.string(), ("текст", N, "", "😀" * 1000), None),
    (
        col(28, T.ENUM, T.ENUM << 8 | 1, enum_values=("a", "b")),
        pa.string(),
        ("a", N, "", "b"),
        None,
    ),
    (
        col(29, T.STRING, T.ENUM << 8 | 2, enum_values=("x",)),
        pa.string(),
        ("x", N, "", "x"),
        None,
    ),
    (col(30, T.ENUM, T.ENUM << 8 | 2), pa.int64(), (1, N, 65535, 0), None),
    (
        col(31, T.SET, T.SET << 8 | 1, set_values=("a", "b", "c")),
        pa.string(),
        ("a,c", N, "", "a,b,c"),
        None,
    ),
    (col(32, T.SET, T.SET << 8 | 8), pa.uint64(), (2**64 - 1, N, 0, 5), None),
    (col(33, T.SET, T.SET << 8 | 4), pa.int64(), (2**32 - 1, N, 0, 5), None),
    (col(34, T.BIT, 0 << 8 | 1), pa.int64(), (1, N, 0, 1), None),
    (col(35, T.BIT, 7 << 8 | 7), pa.int64(), (2**63 - 1, N, 0, 1), None),
    (col(36, T.BIT, 8 << 8 | 0), pa.uint64(), (2**64 - 1, N, 0, 1), None),
    (
        col(37, T.JSON, 4),
        pa.string(),
        ('{"a":18446744073709551615,"d":1.5}', N, "null", "[]"),
        None,
    ),
    (col(38, T.GEOMETRY, 4), pa.binary(), (WKB_POINT, N, WKB_POINT, WKB_POINT), None),
    (
        col(39, T.VECTOR, 4),
        pa.list_(pa.float32()),
        ([1.0, -2.5, 3.25], N, [], [FLOAT32_MAX]),
        None,
    ),
    (col(40, T.NULL), pa.null(), (N, N, N, N), None),
    (col(41, 141, 100, charset="utf-8"), pa.string(), ("zipped", N, "", "z"), None),
    (col(42, T.LONG, name=None), pa.int32(), (1, N, 2, 3), None),
    (col(43, T.NEWDATE), pa.date32(), (date(2020, 1, 1), N, BAD, BAD), (date(2020, 1, 1), N, N, N)),
]
ALL_TYPES = version_of(*(case[0] for case in CASES))


def all_types_changes() -> list[Run]:
    rows = list(zip(*(case[2] for case in CASES), strict=True))
    ops = ["c", "u", "d", "r"]
    return [change(seq, row, op=ops[seq]) for seq, row in enumerate(rows)]


def test_every_column_type_round_trips_through_both_readers(tmp_path: Path) -> None:
    path = tmp_path / "all.parquet"
    written = write(path, ALL_TYPES, all_types_changes())
    invalid_in_input = sum(
        type(v) is InvalidTemporal for case in CASES for v in case[2] if v is not None
    )
    assert written.invalid_temporals == invalid_in_input == 6
    assert written.rows == 4
    for table in read_both(path):
        for column, arrow_type, values, expected in CASES:
            name = column.name if column.name is not None else f"col_{column.index + 1}"
            assert table.schema.field(name).type == arrow_type, name
            assert table.column(name).to_pylist() == list(expected or values), name


def test_mapping_widths_and_names() -> None:
    for column, arrow_type, _, _ in CASES:
        field = arrow_field(column)
        assert field.type == arrow_type
        assert field.nullable
    assert arrow_field(col(41, T.LONG, name=None)).name == "col_42"
    assert arrow_field(col(0, T.NEWDECIMAL, 65 << 8 | 30)).metadata == {
        b"replicator.mysql_type": b"DECIMAL(65,30)"
    }
    assert arrow_field(col(0, T.LONGLONG, unsigned=True)).metadata == {
        b"replicator.mysql_type": b"BIGINT UNSIGNED"
    }


def test_unsupported_type_is_refused() -> None:
    with pytest.raises(IntegrityError, match="no landing-zone mapping"):
        arrow_field(col(0, T.DECIMAL))


@pytest.mark.parametrize("python_up_to", [0, 64], ids=["arrow", "python"])
def test_metadata_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, python_up_to: int
) -> None:
    """(The metadata columns spread by Arrow's kernels, and in Python for a few rows.)"""
    monkeypatch.setattr(parquet_writer, "_SPREAD_IN_PYTHON", python_up_to)
    version = version_of(col(0, T.LONG))
    changes = [
        change(10, (1,), op="c"),
        change(11, (2,), op="u", gtid=None),
        change(15, (3,), op="d"),
        change(16, (4,), op="r"),
    ]
    path = tmp_path / "meta.parquet"
    written = write(path, version, changes)
    assert (written.first_seq, written.last_seq) == (10, 16)
    for table in read_both(path):
        assert table.column_names == ["c0", *METADATA_NAMES]
        rows = table.to_pylist()
        assert [r["_op"] for r in rows] == ["c", "u", "d", "r"]
        assert [r["_seq"] for r in rows] == [10, 11, 15, 16]
        assert [r["_gtid"] for r in rows] == ["0-1-7", None, "0-1-7", "0-1-7"]
        assert {r["_ts"] for r in rows} == {TS}
        assert {r["_server_id"] for r in rows} == {1}
        assert {r["_binlog_file"] for r in rows} == {"mysql-bin.000003"}
        assert [r["_binlog_pos"] for r in rows] == [1010, 1011, 1015, 1016]
    schema = pq.read_schema(path)
    assert [schema.field(n).nullable for n in METADATA_NAMES] == [
        False,
        False,
        True,
        False,
        False,
        False,
        False,
    ]
    assert schema.field("_ts").type == pa.timestamp("us", tz="UTC")
    assert schema.metadata[SCHEMA_TABLE_KEY] == b"shop.orders"
    assert schema.metadata[SCHEMA_VERSION_KEY] == schema_version(version).encode()
    # Spark >= 3.0 calendar: dates before 1582 read without READ_ANCIENT_DATETIME errors
    assert schema.metadata[SPARK_VERSION_KEY] == b"3.0.0"


def test_schema_version_hash_follows_column_definitions() -> None:
    a = version_of(col(0, T.LONG), col(1, T.VARCHAR, 100, charset="utf-8"))
    same = version_of(col(0, T.LONG), col(1, T.VARCHAR, 100, charset="utf-8"))
    wider = version_of(col(0, T.LONGLONG), col(1, T.VARCHAR, 100, charset="utf-8"))
    renamed = version_of(col(0, T.LONG, name="id"), col(1, T.VARCHAR, 100, charset="utf-8"))
    assert schema_version(a) == schema_version(same)
    assert len(schema_version(a)) == 12
    assert len({schema_version(a), schema_version(wider), schema_version(renamed)}) == 3


def test_optional_fields_order() -> None:
    version = version_of(col(0, T.LONG), col(1, T.DATE))
    schema = arrow_schema(version, with_before=True, with_absent=True)
    assert schema.names == ["c0", "c1", *METADATA_NAMES, "_before", "_absent"]
    assert schema.field("_before").type == pa.struct(
        [pa.field("c0", pa.int32()), pa.field("c1", pa.date32())]
    )
    assert schema.field("_absent").type == pa.list_(pa.string())
    assert arrow_schema(version, with_before=False, with_absent=False).names == [
        "c0",
        "c1",
        *METADATA_NAMES,
    ]


@pytest.mark.parametrize("name", ["_seq", "_OP", "_before", "_absent"])
def test_column_named_like_metadata_is_refused(name: str) -> None:
    version = version_of(col(0, T.LONG, name=name))
    with pytest.raises(SinkError, match=f"`{name}`"):
        arrow_schema(version, with_before=True, with_absent=True)


def test_columns_differing_only_in_case_are_refused() -> None:
    version = version_of(col(0, T.LONG, name="Id"), col(1, T.LONG, name="id"))
    with pytest.raises(SinkError, match="two columns"):
        arrow_schema(version, with_before=False, with_absent=False)


def test_before_struct_for_updates(tmp_path: Path) -> None:
    version = version_of(
        col(0, T.LONG, name="id"),
        col(1, T.NEWDECIMAL, 65 << 8 | 2, name="big"),
        col(2, T.DATE, name="d"),
    )
    changes = [
        change(1, (1, Decimal("1.00"), date(2020, 1, 1)), op="c"),
        change(
            2,
            (1, Decimal("2.50"), date(2021, 1, 1)),
            op="u",
            before=(1, Decimal("1.00"), InvalidTemporal("2020-00-01")),
        ),
        change(3, (1, Decimal("2.50"), None), op="d"),
    ]
    path = tmp_path / "before.parquet"
    written = write(path, version, changes, with_before=True)
    assert written.invalid_temporals == 1
    for table in read_both(path):
        assert table.column("_before").to_pylist() == [
            None,
            {"id": 1, "big": "1.00", "d": None},
            None,
        ]
        assert table.column("big").to_pylist() == ["1.00", "2.50", "2.50"]


def test_before_column_is_all_null_without_updates(tmp_path: Path) -> None:
    path = tmp_path / "b.parquet"
    write(path, version_of(col(0, T.LONG)), [change(1, (5,))], with_before=True)
    assert pq.read_table(path).column("_before").to_pylist() == [None]


def test_absent_columns_are_listed(tmp_path: Path) -> None:
    version = version_of(
        col(0, T.LONG, name="id"), col(1, T.BLOB, 2, charset="utf-8", name="body"), col(2, T.DATE)
    )
    changes = [
        change(1, (1, "full", date(2020, 1, 1))),
        change(2, (1, ABSENT, ABSENT), op="u", before=(1, ABSENT, ABSENT)),
        change(3, (1, None, ABSENT), op="u", before=(1, ABSENT, ABSENT)),
    ]
    path = tmp_path / "absent.parquet"
    write(path, version, changes, with_before=True, with_absent=True)
    for table in read_both(path):
        assert table.column("_absent").to_pylist() == [[], ["body", "c2"], ["c2"]]
        assert table.column("body").to_pylist() == ["full", None, None]
        assert table.column("_before").to_pylist() == [
            None,
            {"id": 1, "body": None, "c2": None},
            {"id": 1, "body": None, "c2": None},
        ]


def test_absent_list_is_empty_for_full_images(tmp_path: Path) -> None:
    path = tmp_path / "full.parquet"
    write(path, version_of(col(0, T.LONG)), [change(1, (1,)), change(2, (2,))], with_absent=True)
    assert pq.read_table(path).column("_absent").to_pylist() == [[], []]


def test_absent_without_absent_column_is_refused(tmp_path: Path) -> None:
    writer = ParquetTableWriter(
        tmp_path / "a.parquet", version_of(col(0, T.LONG)), with_before=False
    )
    with pytest.raises(IntegrityError, match="missing from the row image") as info:
        writer.write([change(1, (ABSENT,))])
    assert "binlog_row_image=FULL" in str(info.value)
    writer.abort()


def test_unapplied_json_diffs_stop_with_exit_4(tmp_path: Path) -> None:
    version = version_of(col(0, T.LONG), col(1, T.JSON, 4, name="doc"))
    diffs = UnappliedJsonDiffs((JsonDiff(JsonDiffOperation.REPLACE, "$.a", 1),))
    path = tmp_path / "json.parquet"
    with (
        pytest.raises(IntegrityError) as info,
        ParquetTableWriter(path, version, with_before=False) as writer,
    ):
        writer.write([change(1, (1, "{}")), change(2, (1, diffs), op="u")])
    assert info.value.exit_code == 4
    assert "`doc`" in str(info.value)
    assert "mysql-bin.000003:1002" in str(info.value)
    assert "binlog_row_image=FULL or binlog_row_value_options=''" in info.value.hint
    assert not path.exists()


@pytest.mark.parametrize(
    ("column", "value"),
    [
        (col(0, T.TINY), 128),
        (col(0, T.TINY, unsigned=True), -1),
        (col(0, T.LONG, unsigned=True), 2**32),
        (col(0, T.LONGLONG), 2**63),
        (col(0, T.LONGLONG, unsigned=True), 2**64),
        (col(0, T.BIT, 8 << 8), 2**64),
        (col(0, T.NEWDECIMAL, 10 << 8 | 2), Decimal("123456789.00")),
        (col(0, T.NEWDECIMAL, 10 << 8 | 2), Decimal("1.005")),
        (col(0, T.VARCHAR, 10, charset="utf-8"), 5),
    ],
)
def test_value_that_does_not_fit_is_refused(
    tmp_path: Path, column: ColumnDef, value: object
) -> None:
    path = tmp_path / "misfit.parquet"
    writer = ParquetTableWriter(path, version_of(column), with_before=False)
    writer.write([change(1, (1 if column.type != T.VARCHAR else "ok",))])
    with pytest.raises(IntegrityError, match="does not fit") as info:
        writer.write([change(2, (None,)), change(3, (value,))])
    assert "`c0`" in str(info.value)
    assert "_seq 3" in str(info.value)
    # the failed write left the file as it was
    written = writer.close()
    assert written.rows == 1
    assert pq.read_table(path).num_rows == 1


def test_rows_are_grouped_into_row_groups(tmp_path: Path) -> None:
    path = tmp_path / "groups.parquet"
    writer = ParquetTableWriter(
        path, version_of(col(0, T.LONG)), with_before=False, row_group_rows=10
    )
    for start in range(0, 25, 3):
        writer.write([change(s, (s,)) for s in range(start, min(start + 3, 25))])
    written = writer.close()
    meta = pq.ParquetFile(path).metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [10, 10, 5]
    assert written.rows == 25
    assert pq.read_table(path).column("c0").to_pylist() == list(range(25))


def test_large_values_make_smaller_row_groups(tmp_path: Path) -> None:
    path = tmp_path / "blobs.parquet"
    version = version_of(col(0, T.LONG_BLOB, 4, charset="binary"))
    writer = ParquetTableWriter(path, version, with_before=False, row_group_bytes=3 << 20)
    for seq in range(5):
        writer.write([change(seq, (BLOB_1MIB,))])
    writer.close()
    meta = pq.ParquetFile(path).metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [3, 2]
    assert pq.read_table(path).column("c0").to_pylist() == [BLOB_1MIB] * 5


def test_seq_must_increase(tmp_path: Path) -> None:
    writer = ParquetTableWriter(
        tmp_path / "s.parquet", version_of(col(0, T.LONG)), with_before=False
    )
    writer.write([change(5, (1,))])
    with pytest.raises(InternalError, match="_seq"):
        writer.write([change(5, (1,))])
    with pytest.raises(InternalError, match="_seq"):
        writer.write([change(7, (1,)), change(6, (1,))])
    writer.abort()


def test_row_image_of_wrong_width_is_a_bug(tmp_path: Path) -> None:
    version = version_of(col(0, T.LONG), col(1, T.LONG))
    writer = ParquetTableWriter(tmp_path / "w.parquet", version, with_before=False)
    with pytest.raises(InternalError, match="1 values for 2 columns"):
        writer.write([change(1, (1, 2)), change(2, (1,))])
    with pytest.raises(InternalError, match="3 values for 2 columns"):
        writer.write([change(1, (1, 2, 3))])
    writer.abort()


def test_close_fsyncs_a_complete_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "durable.parquet"
    synced: list[int] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:  # records, then really syncs
        synced.append(os.fstat(fd).st_ino)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    written = write(path, version_of(col(0, T.LONG)), [change(1, (7,))])
    assert synced == [path.stat().st_ino]
    # the hash of the bytes as written is the stored file's (nothing read back)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert written == WrittenFile(path, 1, path.stat().st_size, 1, 1, 0, digest)
    assert pq.read_table(path).column("c0").to_pylist() == [7]


def test_a_file_reaches_python_in_few_large_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Arrow gathers a file's pages in its own buffer before they reach the hashing stream
    (``digest.WRITE_BUFFER_BYTES``): each call into Python waits for the GIL, up to a switch
    interval while another thread decodes. The bytes hashed are the file's all the same."""
    writes: list[int] = []

    class Counting(digest.HashingStream):
        def write(self, data: Any) -> int:
            writes.append(memoryview(data).nbytes)
            return super().write(data)

    monkeypatch.setattr(parquet_writer, "HashingStream", Counting)
    path = tmp_path / "many-pages.parquet"
    version = version_of(col(0, T.LONGLONG), col(1, T.VARCHAR, 400, charset="utf-8"))
    text = [hashlib.sha256(b"%d" % n).hexdigest() for n in range(60_000)]  # distinct values
    rows = [change(n + 1, (n * 7919, text[n])) for n in range(60_000)]
    written = write(path, version, rows, row_group_rows=20_000, compression="none")
    size = path.stat().st_size
    assert size > 2 * digest.WRITE_BUFFER_BYTES  # several buffers' worth
    # a page larger than the buffer's room passes straight through: two writes a buffer at
    # most (unbuffered, this file took one write per page and page header: 142)
    assert len(writes) <= 2 * (size // digest.WRITE_BUFFER_BYTES) + 2
    assert sum(writes) == size == written.bytes
    assert written.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert pq.read_table(path).num_rows == 60_000


def test_closing_a_hashing_stream_leaves_what_it_writes_to_open(tmp_path: Path) -> None:
    """Whoever made the inner stream closes it (fsync, upload) or aborts it: a buffer Arrow
    closes when it is collected must not complete the upload of a file thrown away."""
    with (tmp_path / "inner").open("wb") as inner:
        stream = digest.HashingStream(inner)
        sink = stream.arrow_sink()
        sink.write(b"abc")
        assert stream.size == 0  # still in Arrow's buffer
        sink.close()
        assert (stream.size, stream.closed, inner.closed) == (3, True, False)
        with pytest.raises(ValueError, match="closed"):
            stream.write(b"d")
    assert (tmp_path / "inner").read_bytes() == b"abc"


def test_an_aborted_file_stays_gone_once_its_buffer_is_collected(tmp_path: Path) -> None:
    path = tmp_path / "gone.parquet"
    writer = ParquetTableWriter(path, version_of(col(0, T.LONG)), with_before=False)
    writer.write([change(s, (s,)) for s in range(1, 1001)])
    writer.abort()
    del writer
    gc.collect()
    assert not path.exists()


def test_file_without_rows_is_valid(tmp_path: Path) -> None:
    path = tmp_path / "empty.parquet"
    writer = ParquetTableWriter(path, version_of(col(0, T.LONG)), with_before=True)
    writer.write([])
    written = writer.close()
    assert (written.rows, written.first_seq, written.last_seq) == (0, None, None)
    assert pq.read_table(path).num_rows == 0
    with pytest.raises(InternalError, match="already closed"):
        writer.write([change(1, (1,))])


def test_abort_removes_the_file(tmp_path: Path) -> None:
    path = tmp_path / "gone.parquet"
    writer = ParquetTableWriter(
        path, version_of(col(0, T.LONG)), with_before=False, row_group_rows=1
    )
    writer.write([change(1, (1,)), change(2, (2,))])
    assert path.exists()
    writer.abort()
    writer.abort()
    assert not path.exists()


def test_exception_inside_with_block_removes_the_file(tmp_path: Path) -> None:
    path = tmp_path / "gone.parquet"
    with (
        pytest.raises(RuntimeError),
        ParquetTableWriter(path, version_of(col(0, T.LONG)), with_before=False) as writer,
    ):
        writer.write([change(1, (1,))])
        raise RuntimeError("stop")
    assert not path.exists()


def test_unknown_compression_leaves_no_file(tmp_path: Path) -> None:
    path = tmp_path / "c.parquet"
    with pytest.raises(ConfigError, match="'nope'"):
        ParquetTableWriter(path, version_of(col(0, T.LONG)), with_before=False, compression="nope")
    assert not path.exists()
    write(path, version_of(col(0, T.LONG)), [change(1, (1,))], compression="none")
    assert pq.ParquetFile(path).metadata.row_group(0).column(0).compression == "UNCOMPRESSED"


def test_path_under_a_file_is_a_sink_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_bytes(b"")
    path = blocker / "t.parquet"
    with pytest.raises(SinkError) as info:
        ParquetTableWriter(path, version_of(col(0, T.LONG)), with_before=False)
    assert str(path) in str(info.value)
    assert "exists and is a directory" in info.value.hint
    assert info.value.exit_code == 1


def test_path_that_is_a_directory_is_a_sink_error(tmp_path: Path) -> None:
    path = tmp_path / "dir.parquet"
    path.mkdir()
    with pytest.raises(SinkError, match=r"dir\.parquet"):
        ParquetTableWriter(path, version_of(col(0, T.LONG)), with_before=False)
    assert path.is_dir()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux /dev/full")
def test_full_disk_is_a_sink_error_and_removes_the_file(tmp_path: Path) -> None:
    # A symlink to /dev/full: every write fails with ENOSPC; removing the partial file
    # removes the link, never the device.
    path = tmp_path / "full.parquet"
    path.symlink_to("/dev/full")
    version = version_of(col(0, T.BLOB, 4, charset="binary"))
    with pytest.raises(SinkError) as info:
        writer = ParquetTableWriter(path, version, with_before=False, row_group_rows=2)
        writer.write([change(s, (BLOB_1MIB,)) for s in range(4)])
        writer.close()
    assert str(path) in str(info.value)
    assert "No space left" in str(info.value)
    assert "free space" in info.value.hint
    assert not os.path.lexists(path)
    assert Path("/dev/full").exists()


# --------------------------------------------------------------------------- property

HYPOTHESIS_VERSION = version_of(
    col(0, T.LONGLONG),
    col(1, T.LONGLONG, unsigned=True),
    col(2, T.NEWDECIMAL, 20 << 8 | 4),
    col(3, T.NEWDECIMAL, 50 << 8 | 10),
    col(4, T.VARCHAR, 400, charset="utf-8"),
    col(5, T.BLOB, 2, charset="binary"),
    col(6, T.DATETIME2, 6),
    col(7, T.TIME2, 6),
    col(8, T.DOUBLE, 8),
)


def _decimal(precision: int, scale: int) -> st.SearchStrategy[Decimal]:
    limit = 10**precision - 1
    return st.integers(-limit, limit).map(lambda n: Decimal(n).scaleb(-scale))


ROW = st.tuples(
    st.none() | st.integers(-(2**63), 2**63 - 1),
    st.none() | st.integers(0, 2**64 - 1),
    st.none() | _decimal(20, 4),
    st.none() | _decimal(50, 10),
    st.none() | st.text(max_size=20),
    st.none() | st.binary(max_size=20),
    st.none() | st.datetimes(datetime(1000, 1, 1), datetime(9999, 12, 31, 23, 59, 59, 999999)),
    st.none() | st.timedeltas(TIME_MIN, TIME_MAX),
    st.none() | st.floats(allow_nan=False),
)


@settings(max_examples=examples(60), deadline=None)
@given(rows=st.lists(ROW, max_size=30), group=st.integers(1, 8))
def test_random_rows_round_trip_exactly(rows: list[tuple[object, ...]], group: int) -> None:
    changes = [change(seq, row) for seq, row in enumerate(rows)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "h.parquet"
        writer = ParquetTableWriter(
            path, HYPOTHESIS_VERSION, with_before=False, row_group_rows=group
        )
        for start in range(0, len(changes), 7):
            writer.write(changes[start : start + 7])
        written = writer.close()
        assert written.rows == len(rows)
        expected = [
            tuple(format(v, "f") if i == 3 and v is not None else v for i, v in enumerate(row))
            for row in rows
        ]
        for table in read_both(path):
            got = list(zip(*(table.column(f"c{i}").to_pylist() for i in range(9)), strict=True))
            assert got == expected
            assert table.column("_seq").to_pylist() == list(range(len(rows)))


def test_year_zero_dates_land_exactly_and_zero_dates_stay_null(tmp_path: Path) -> None:
    """'0000-01-21' is a real date to MySQL (and SELECT shows it); Python's date cannot hold
    it, date32/timestamp can: it lands exactly. '0000-00-00' and '2020-00-15' stay null."""
    date_of = temporal.date_converter()
    datetime_of = temporal.datetime2_converter(6)

    def packed_date(y: int, m: int, d: int) -> bytes:
        return (y << 9 | m << 5 | d).to_bytes(3, "little")

    def packed_datetime(y: int, mo: int, d: int, h: int, mi: int, s: int, us: int) -> bytes:
        ymd = ((y * 13 + mo) << 5) | d
        whole = ((ymd << 17 | h << 12 | mi << 6 | s) + (1 << 39)) << 24 | us
        return whole.to_bytes(8, "big")

    dates = [
        packed_date(0, 1, 21),
        packed_date(0, 2, 29),
        packed_date(0, 0, 0),
        packed_date(2020, 0, 15),
    ]
    datetimes = [
        packed_datetime(0, 1, 21, 10, 11, 12, 5),
        packed_datetime(0, 12, 31, 23, 59, 59, 999999),
        packed_datetime(0, 0, 0, 0, 0, 0, 0),
        packed_datetime(2024, 5, 6, 7, 8, 9, 10),
    ]
    rows = [(date_of(d), datetime_of(t)) for d, t in zip(dates, datetimes, strict=True)]
    assert isinstance(rows[0][0], InvalidTemporal) and rows[0][0].epoch is not None
    assert rows[2][0] == InvalidTemporal("0000-00-00")  # no calendar holds it
    version = version_of(col(0, T.DATE), col(1, T.DATETIME2, 6))
    path = tmp_path / "zero.parquet"
    written = write(path, version, [change(i, row) for i, row in enumerate(rows)])
    assert written.invalid_temporals == 3  # 0000-00-00, 2020-00-15, 0000-00-00 00:00:00
    for table in read_both(path):
        assert table.column("c0").cast(pa.string()).to_pylist() == [
            "0000-01-21", "0000-02-29", None, None,
        ]  # fmt: skip
        assert table.column("c1").cast(pa.string()).to_pylist() == [
            "0000-01-21 10:11:12.000005",
            "0000-12-31 23:59:59.999999",
            None,
            "2024-05-06 07:08:09.000010",
        ]


def test_geometry_lands_with_its_srid_when_asked(tmp_path: Path) -> None:
    version = version_of(col(0, T.GEOMETRY, 4))
    rows = [(Geometry(WKB_POINT, 4326),), (None,), (Geometry(WKB_POINT, 0),)]
    changes = [change(i, row) for i, row in enumerate(rows)]
    plain = write(tmp_path / "plain.parquet", version, changes)
    kept = write(tmp_path / "srid.parquet", version, changes, geometry_srid=True)
    assert plain.rows == kept.rows == 3
    assert pq.read_table(tmp_path / "plain.parquet").column("c0").to_pylist() == [
        WKB_POINT, None, WKB_POINT,
    ]  # fmt: skip
    for table in read_both(tmp_path / "srid.parquet"):
        assert table.schema.field("c0").type == pa.struct(
            [pa.field("wkb", pa.binary()), pa.field("srid", pa.uint32())]
        )
        assert table.column("c0").to_pylist() == [
            {"wkb": WKB_POINT, "srid": 4326}, None, {"wkb": WKB_POINT, "srid": 0},
        ]  # fmt: skip


def test_geometry_values_equal_their_wkb_and_keep_the_srid_through_pickle() -> None:
    import pickle

    value = Geometry(WKB_POINT, 3857)
    assert value == WKB_POINT and hash(value) == hash(WKB_POINT)
    again = pickle.loads(pickle.dumps(value))
    assert (type(again), bytes(again), again.srid) == (Geometry, WKB_POINT, 3857)


def test_dictionaries_give_up_at_64_kib(tmp_path: Path) -> None:
    """A column of few distinct values keeps its dictionary; one of distinct values drops it
    once the dictionary passes 64 KiB (Arrow's default would keep 1 MiB of it)."""
    version = version_of(col(0, T.LONGLONG), col(1, T.VARCHAR, 40, charset="utf8mb4"))
    rows = 30_000  # 240 KB of distinct 8-byte ids
    changes = [change(i + 1, (i * 7919, f"state-{i % 5}")) for i in range(rows)]
    path = tmp_path / "dict.parquet"
    write(path, version, changes, compression="none")  # page sizes as encoded
    meta = pq.ParquetFile(path).metadata.row_group(0)

    def dictionary_bytes(index: int) -> int:
        chunk = meta.column(index)
        assert chunk.has_dictionary_page
        return int(chunk.data_page_offset - chunk.dictionary_page_offset)

    ids, states = dictionary_bytes(0), dictionary_bytes(1)
    assert 32 * 1024 < ids <= 64 * 1024 + 4096  # it grew to the limit and stopped there
    assert states < 1024  # five strings
    assert "PLAIN" in meta.column(0).encodings  # the ids went on plain after the limit
    assert pq.read_table(path).column("c0").to_pylist() == [i * 7919 for i in range(rows)]


_REPEATED_TYPES = {
    "int64": (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    # up to 9999-12-31 23:59:59.999999, the last instant a datetime (and MySQL) holds
    "timestamp": (pa.timestamp("us", tz="UTC"), st.integers(0, 253_402_300_799_999_999)),
    "bool": (pa.bool_(), st.booleans()),
    "string": (pa.string(), st.text(max_size=8)),
}


@given(
    st.sampled_from(sorted(_REPEATED_TYPES)),
    st.data(),
)
def test_values_repeated_as_arrow_decodes_runs(name: str, data: st.DataObject) -> None:
    """The metadata columns' run-end decode (``_repeated``, numpy) gives what repeating each
    value in Python gives, nulls and sliced arrays included."""
    from replicator.sink.parquet_writer import _repeated

    type_, values = _REPEATED_TYPES[name]
    items = data.draw(st.lists(st.none() | values, min_size=1, max_size=20))
    skip = data.draw(st.integers(0, len(items) - 1))
    counts = data.draw(st.lists(st.integers(0, 4), min_size=len(items), max_size=len(items)))
    array = pa.array(items, type_).slice(skip)
    kept = counts[skip:]
    got = _repeated(array, np.array(kept, np.int64))
    got.validate(full=True)
    expected = [v for v, n in zip(items[skip:], kept, strict=True) for _ in range(n)]
    assert got.to_pylist() == pa.array(expected, type_).to_pylist()


# updates whose before images hold the key or leave it out (MINIMAL), an insert and a delete
BEFORE_KEYS = """
import datetime as dt
from replicator.binlog.constants import ColumnType as T
from replicator.binlog.schema import ColumnDef
from replicator.binlog.values import ABSENT
from replicator.sink.changes import TableVersion
from replicator.sink.parquet_writer import ParquetTableWriter
from tests.blocks import row_change

def change(seq, values, op, before=None):
    at = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    return row_change(op, seq, "0-1-7", at, 1, "b.000001", 4, tuple(values), before)

columns = (ColumnDef(0, T.LONG, 0, name="id"), ColumnDef(1, T.LONG, 0, name="v"))
changes = [
    change(1, (1, 10), "c"),
    change(2, (2, 20), "u", (1, 10)),
    change(3, (2, 21), "u", (ABSENT, 20)),
    change(4, (2, 21), "d"),
    change(5, (3, 30), "u", (2, ABSENT)),
]
writer = ParquetTableWriter(
    PATH, TableVersion("shop", "orders", columns, (0,)), with_before=False, with_absent=True,
    with_before_key=True,
)
writer.write(changes)
writer.close()
"""


def test_before_key_is_null_where_the_before_image_lacks_the_key(tmp_path: Path) -> None:
    path = tmp_path / "before_key.parquet"
    exec(BEFORE_KEYS, {"PATH": path})
    for table in read_both(path):
        assert table.column("_before_key").to_pylist() == [None, {"id": 1}, None, None, {"id": 2}]


def test_landing_updates_does_not_import_pyarrow_compute(tmp_path: Path) -> None:
    """Its import costs the daemon tens of milliseconds of a run, holding the GIL."""
    path = tmp_path / "f.parquet"
    told = "import sys\nprint('pyarrow.compute' in sys.modules)\n"
    code = f"from pathlib import Path\nPATH = Path({str(path)!r})\n{BEFORE_KEYS}\n{told}"
    found = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert found.stdout.split() == ["False"]
    assert pq.read_table(path).num_rows == 5
