"""The columnar lane (``sink.lane``) against the usual path, file by file.

The same row images are landed twice by ``ParquetTableWriter``: decoded into tuples and
``RowChange``s, and through the lane (``ColumnSpec`` buffers in a ``ColumnarRowsEvent``,
handed over as a ``ChunkRun``). The Parquet files must hold the same table. Valid values of
every kind the lane takes must go through it; with any bytes in fixed-width columns (zero
dates, bad DECIMAL digit groups...) the lane may only give up, never land something else.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replicator.binlog import events as ev
from replicator.binlog.errors import DecodeError
from replicator.binlog.rows import TableDecoder, decode_images
from replicator.binlog.schema import ColumnDef
from replicator.errors import IntegrityError, InternalError
from replicator.sink.changes import ChunkRun, RowChange, TableVersion
from replicator.sink.lane import column_spec
from replicator.sink.parquet_writer import ParquetTableWriter

from .test_native import require_native
from .test_rowcode import KINDS, RAW_KINDS, _columns, images

# what the lane cannot take: the table goes the usual way
NOT_IN_LANE = {"set", "bit", "varchar_sjis", "decimal_65"}
# MySQL latin1 text: the lane takes ASCII only, and gives other text up
LATIN1 = {"varchar_latin1", "longtext"}
LANE_KINDS = sorted(set(KINDS) - NOT_IN_LANE - LATIN1)
TS = dt.datetime(2024, 5, 6, 7, 8, 9, tzinfo=dt.UTC)


@pytest.fixture(autouse=True)
def _native_core() -> None:
    require_native()


def _event(columns: tuple[ColumnDef, ...], blob: bytes, chunk: Any) -> ev.ColumnarRowsEvent:
    header = ev.EventHeader(1_700_000_000, 30, 1, len(blob), 1000, 0)
    table = ev.TableMapEvent(header, "b.1", 4, 100, 7, 0, "db", "t", columns, (), True)
    layout = TableDecoder.build(columns).layout((1 << len(columns)) - 1)
    return ev.ColumnarRowsEvent(
        header, "b.1", 100, 1000, 7, 0, table, ev.RowsKind.INSERT, chunk,
        lambda: decode_images(blob, 0, layout, None)[0],
    )  # fmt: skip


def _land(path: Path, version: TableVersion, changes: list[Any], *, before: bool) -> pa.Table:
    with ParquetTableWriter(
        path, version, with_before=before, with_absent=True, with_before_key=True
    ) as writer:
        writer.write(changes)
        writer.close()
    return pq.read_table(path)


def _both(
    tmp: Path, columns: tuple[ColumnDef, ...], rows: list[bytes], *, before: bool
) -> tuple[pa.Table | None, pa.Table | None]:
    """(usual, lane): each table, or None where that path does not land these rows."""
    version = TableVersion("db", "t", columns, ())
    blob = b"".join(rows)
    layout = TableDecoder.build(columns).layout((1 << len(columns)) - 1)
    usual: pa.Table | None
    try:
        decoded = decode_images(blob, 0, layout, None)[0]
        changes = [
            RowChange("c", n, "0-1-5", TS, 1, "b.1", 100, r) for n, r in enumerate(decoded, 1)
        ]
        usual = _land(tmp / "usual.parquet", version, changes, before=before)
    except (DecodeError, IntegrityError):
        usual = None
    spec = column_spec(columns, TableDecoder.build(columns).plans or ())
    assert spec is not None  # every column here is one the lane takes
    # two events where there are two rows or more: the writer joins consecutive buffers
    cut = len(rows) // 2
    runs = []
    seq = 1
    for part in (rows[:cut], rows[cut:]):
        if not part:
            continue
        piece = b"".join(part)
        chunk = spec(piece, 0, len(piece))
        if chunk is None:
            return usual, None
        runs.append(ChunkRun("c", seq, "0-1-5", TS, 1, _event(columns, piece, chunk)))
        seq += chunk[0]
    lane = _land(tmp / "lane.parquet", version, runs, before=before)
    return usual, lane


@settings(
    max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data(), st.booleans())
def test_lane_lands_what_the_usual_path_lands(
    tmp_path: Path, data: st.DataObject, before: bool
) -> None:
    kinds = data.draw(st.lists(st.sampled_from(LANE_KINDS), min_size=1, max_size=12))
    columns = _columns(kinds)
    present = tuple(range(len(columns)))
    rows = data.draw(st.lists(images(kinds, present), min_size=1, max_size=6))
    usual, lane = _both(tmp_path, columns, rows, before=before)
    assert usual is not None and lane is not None
    assert lane.schema == usual.schema
    assert lane.equals(usual)


@settings(
    max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_lane_gives_up_rather_than_land_something_else(tmp_path: Path, data: st.DataObject) -> None:
    pool = sorted(set(LANE_KINDS) | LATIN1 | set(RAW_KINDS))
    kinds = data.draw(st.lists(st.sampled_from(pool), min_size=1, max_size=8))
    columns = _columns(kinds)
    rows = data.draw(st.lists(images(kinds, tuple(range(len(columns)))), min_size=1, max_size=6))
    usual, lane = _both(tmp_path, columns, rows, before=False)
    assert lane is None or (usual is not None and lane.equals(usual))


def test_zero_dates_and_bad_text_leave_the_lane(tmp_path: Path) -> None:
    columns = _columns(["date_raw", "varchar_utf8"])
    zero_date = b"\x00" + bytes(3) + b"\x02ok"
    bad_text = b"\x00" + b"\x21\x0f\x0f" + b"\x02\xc3\x28"
    usual, lane = _both(tmp_path, columns, [zero_date], before=False)
    assert lane is None and usual is not None  # the usual path writes null, counted
    usual, lane = _both(tmp_path, columns, [bad_text], before=False)
    assert lane is None and usual is None  # the usual path reports the bad text


def test_tables_with_other_columns_stay_out_of_the_lane() -> None:
    for kind in sorted(NOT_IN_LANE):
        columns = _columns(["long", kind])
        assert column_spec(columns, TableDecoder.build(columns).plans or ()) is None, kind


def test_columnar_event_rows_come_from_its_bytes() -> None:
    columns = _columns(["long", "varchar_utf8"])
    blob = b"\x00" + (5).to_bytes(4, "little") + b"\x02hi" + b"\x02" + (6).to_bytes(4, "little")
    spec = column_spec(columns, TableDecoder.build(columns).plans or ())
    chunk = spec(blob, 0, len(blob))
    event = _event(columns, blob, chunk)
    assert event.row_count == 2 and chunk[0] == 2
    assert event.rows == ((5, "hi"), (6, None))
    assert event.after == ()
    run = ChunkRun("d", 10, None, TS, 1, event)
    assert (run.count, run.last_seq) == (2, 11)
    assert run.changes() == [
        RowChange("d", 10, None, TS, 1, "b.1", 100, (5, "hi")),
        RowChange("d", 11, None, TS, 1, "b.1", 100, (6, None)),
    ]


def test_row_changes_and_chunk_runs_mix_in_one_write(tmp_path: Path) -> None:
    columns = _columns(["long", "varchar_utf8"])
    version = TableVersion("db", "t", columns, ())
    spec = column_spec(columns, TableDecoder.build(columns).plans or ())
    blob = (
        b"\x00"
        + (3).to_bytes(4, "little")
        + b"\x01c"
        + b"\x00"
        + (4).to_bytes(4, "little")
        + b"\x01d"
    )
    run = ChunkRun("c", 3, "0-1-6", TS, 1, _event(columns, blob, spec(blob, 0, len(blob))))
    mixed = [
        RowChange("c", 1, "0-1-5", TS, 1, "b.1", 100, (1, "a")),
        RowChange("c", 2, "0-1-5", TS, 1, "b.1", 100, (2, "b")),
        run,
        RowChange("d", 5, "0-1-7", TS, 1, "b.1", 100, (1, "a")),
    ]
    table = _land(tmp_path / "mixed.parquet", version, mixed, before=True)
    assert table.column("col_1").to_pylist() == [1, 2, 3, 4, 1]
    assert table.column("_seq").to_pylist() == [1, 2, 3, 4, 5]
    assert table.column("_op").to_pylist() == ["c", "c", "c", "c", "d"]
    assert table.column("_gtid").to_pylist() == ["0-1-5", "0-1-5", "0-1-6", "0-1-6", "0-1-7"]
    flat = [run.changes()[0], run.changes()[1]]
    usual = _land(tmp_path / "usual.parquet", version, [*mixed[:2], *flat, mixed[3]], before=True)
    assert table.equals(usual)


def test_seq_going_back_across_runs_in_one_write_is_refused(tmp_path: Path) -> None:
    columns = _columns(["long", "varchar_utf8"])
    version = TableVersion("db", "t", columns, ())
    spec = column_spec(columns, TableDecoder.build(columns).plans or ())
    blob = b"\x00" + (3).to_bytes(4, "little") + b"\x01c"
    run = ChunkRun("c", 1, None, TS, 1, _event(columns, blob, spec(blob, 0, len(blob))))
    backwards = [
        RowChange("c", 5, None, TS, 1, "b.1", 100, (1, "a")),
        RowChange("c", 6, None, TS, 1, "b.1", 100, (2, "b")),
        run,  # _seq 1 after 6
    ]
    with ParquetTableWriter(
        tmp_path / "t.parquet", version, with_before=False, with_absent=True
    ) as writer:
        with pytest.raises(InternalError, match="not strictly increasing"):
            writer.write(backwards)
        assert writer.rows == 0  # the failed write left the file as it was
        writer.write(backwards[:2])
        assert writer.close().rows == 2
