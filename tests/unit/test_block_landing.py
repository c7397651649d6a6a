"""Blocks landed by ``ParquetTableWriter``: native buffers against values, file by file.

The same row images are decoded three ways (the native core into buffers where it can, the
core into values only, the reference decoders) and landed; the Parquet files must hold the
same table, for inserts, update pairs (``_before``, ``_before_key``) and partial images
(``_absent``). With any bytes in fixed-width columns (zero dates, bad DECIMAL digit
groups...) a column whose buffers cannot hold a value becomes values for that event and lands
what the reference lands (null, counted), never something else.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replicator.binlog.block import Block
from replicator.binlog.errors import DecodeError
from replicator.binlog.rows import TableDecoder
from replicator.binlog.schema import ColumnDef
from replicator.errors import IntegrityError, InternalError
from replicator.sink.changes import Run, TableVersion
from replicator.sink.parquet_writer import ParquetTableWriter
from tests.blocks import block_rows
from tests.encoders import encode_date, encode_decimal
from tests.hypothesis_budget import examples

from .test_block_decoding import KINDS, RAW_KINDS, _columns, images
from .test_native import require_native

TS = dt.datetime(2024, 5, 6, 7, 8, 9, tzinfo=dt.UTC)
FORMS = ("buffers", "objects", "reference")
EVERY = sorted(set(KINDS) | set(RAW_KINDS))


@pytest.fixture(autouse=True)
def _native_core() -> None:
    require_native()


def _blocks(
    columns: tuple[ColumnDef, ...], parts: list[bytes], bits: int, after_bits: int | None, form: str
) -> list[Block]:
    decoder = TableDecoder.build(columns, decoders="reference" if form == "reference" else "native")
    layout = decoder.layout(bits)
    after = None if after_bits is None else decoder.layout(after_bits)
    return [decoder.decode(p, 0, layout, after, objects=form == "objects") for p in parts]


def _land(path: Path, version: TableVersion, runs: list[Run], *, before: bool) -> pa.Table:
    with ParquetTableWriter(
        path, version, with_before=before, with_absent=True, with_before_key=True
    ) as writer:
        writer.write(runs)
        writer.close()
    return pq.read_table(path)


def _runs(blocks: list[Block], op: str) -> list[Run]:
    runs, seq = [], 1
    for n, block in enumerate(blocks):
        runs.append(Run(op, seq, f"0-1-{n + 5}", TS, 1, "b.1", 100 + n, block))
        seq += block.count
    return runs


def _land_all(
    tmp: Path,
    columns: tuple[ColumnDef, ...],
    images_: list[bytes],
    bits: int,
    after_bits: int | None = None,
    *,
    before: bool = False,
) -> dict[str, pa.Table | str]:
    """Each form's table, or the error that stopped it; two events where there are two
    images or more, so that the writer joins consecutive buffers."""
    version = TableVersion("db", "t", columns, (0,))
    cut = len(images_) // 2
    parts = [b"".join(p) for p in (images_[:cut], images_[cut:]) if p]
    out: dict[str, pa.Table | str] = {}
    for form in FORMS:
        try:
            blocks = _blocks(columns, parts, bits, after_bits, form)
            op = "u" if after_bits is not None else "c"
            out[form] = _land(tmp / f"{form}.parquet", version, _runs(blocks, op), before=before)
        except (DecodeError, IntegrityError) as exc:
            out[form] = type(exc).__name__
    return out


def _shape(found: pa.Table | str) -> pa.Schema | str:
    """A table's schema, or the name of the error that stopped the form."""
    return found if isinstance(found, str) else found.schema


def _alike(found: dict[str, pa.Table | str]) -> None:
    """Every form stopped with the reference's error, or gave its table (schema and rows)."""
    reference = found["reference"]
    assert {form: _shape(found[form]) for form in FORMS} == dict.fromkeys(FORMS, _shape(reference))
    # tables differ unless Table.equals; an error's name differs from any table
    assert [form for form in FORMS if found[form] != reference] == []


@settings(
    max_examples=examples(200),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.data(), st.booleans())
def test_buffers_land_what_values_land(tmp_path: Path, data: st.DataObject, before: bool) -> None:
    kinds = data.draw(st.lists(st.sampled_from(EVERY), min_size=1, max_size=10))
    columns = _columns(kinds)
    full = tuple(range(len(columns)))
    bits = (1 << len(columns)) - 1
    update = data.draw(st.booleans())
    if update:
        present = tuple(sorted(data.draw(st.lists(st.sampled_from(full), min_size=1, unique=True))))
        pairs = data.draw(
            st.lists(st.tuples(images(kinds, present), images(kinds, full)), min_size=1, max_size=5)
        )
        found = _land_all(
            tmp_path, columns, [b + a for b, a in pairs], sum(1 << i for i in present), bits,
            before=before,
        )  # fmt: skip
    else:
        rows = data.draw(st.lists(images(kinds, full), min_size=1, max_size=6))
        found = _land_all(tmp_path, columns, rows, bits, before=before)
    _alike(found)


def test_a_value_the_buffers_cannot_hold_turns_its_column_into_values(tmp_path: Path) -> None:
    columns = _columns(["date_raw", "long"])
    good = b"\x00" + encode_date(dt.date(2024, 1, 15)) + (5).to_bytes(4, "little")
    zero = b"\x00" + bytes(3) + (6).to_bytes(4, "little")
    (block,) = _blocks(columns, [good + zero], 0b11, None, "buffers")
    dates, longs = block.columns
    assert type(dates) is list and type(longs) is tuple  # only the date column left buffers
    found = _land_all(tmp_path, columns, [good, zero], 0b11)
    _alike(found)
    table = found["buffers"]
    assert isinstance(table, pa.Table)
    assert table.column("col_1").to_pylist() == [dt.date(2024, 1, 15), None]


def test_bad_text_stops_every_form_alike(tmp_path: Path) -> None:
    columns = _columns(["varchar_utf8"])
    found = _land_all(tmp_path, columns, [b"\x00\x02\xc3\x28"], 0b1)
    assert found == dict.fromkeys(FORMS, "DecodeError")


def test_runs_of_buffers_and_values_mix_in_one_write(tmp_path: Path) -> None:
    columns = _columns(["long", "varchar_utf8"])
    version = TableVersion("db", "t", columns, ())
    image = b"\x00" + (3).to_bytes(4, "little") + b"\x01c"
    buffers = _blocks(columns, [image], 0b11, None, "buffers")[0]
    values = _blocks(columns, [image], 0b11, None, "objects")[0]
    assert buffers.has_buffers() and not values.has_buffers()
    runs = [
        Run("c", 1, "0-1-5", TS, 1, "b.1", 100, values),
        Run("c", 2, "0-1-6", TS, 1, "b.1", 200, buffers),
        Run("d", 3, "0-1-7", TS, 1, "b.1", 300, values),
    ]
    table = _land(tmp_path / "mixed.parquet", version, runs, before=True)
    assert table.column("col_1").to_pylist() == [3, 3, 3]
    assert table.column("_seq").to_pylist() == [1, 2, 3]
    assert table.column("_op").to_pylist() == ["c", "c", "d"]
    assert table.column("_gtid").to_pylist() == ["0-1-5", "0-1-6", "0-1-7"]
    assert table.column("_binlog_pos").to_pylist() == [100, 200, 300]


def test_each_run_s_metadata_spreads_over_its_rows_alone(tmp_path: Path) -> None:
    """Runs of 2, 0, 3 and 1 rows with gaps in ``_seq``: every row carries its own run's
    metadata and number, in one write and one run per write."""
    columns = _columns(["long", "varchar_utf8"])
    version = TableVersion("db", "t", columns, ())
    image = b"\x00" + (3).to_bytes(4, "little") + b"\x01c"
    blocks = [_blocks(columns, [image * n], 0b11, None, "buffers")[0] for n in (2, 0, 3, 1)]
    other = dt.datetime(2025, 1, 2, tzinfo=dt.UTC)
    runs = [
        Run("c", 10, "0-1-5", TS, 7, "b.1", 100, blocks[0]),
        Run("u", 12, "0-1-6", other, 8, "b.2", 200, blocks[1]),  # no rows
        Run("d", 40, None, other, 9, "b.3", 300, blocks[2]),
        Run("c", 99, "0-1-9", TS, 7, "b.3", 400, blocks[3]),
    ]
    expected = [
        (r.op, r.seq + i, r.gtid, r.ts, r.server_id, r.binlog_file, r.binlog_pos)
        for r in runs
        for i in range(r.block.count)
    ]
    names = ["_op", "_seq", "_gtid", "_ts", "_server_id", "_binlog_file", "_binlog_pos"]
    together = _land(tmp_path / "together.parquet", version, runs, before=False)
    assert list(zip(*(together.column(n).to_pylist() for n in names), strict=True)) == expected
    apart = [
        _land(tmp_path / f"{k}.parquet", version, [run], before=False) for k, run in enumerate(runs)
    ]
    rows = [
        row
        for table in apart
        for row in zip(*(table.column(n).to_pylist() for n in names), strict=True)
    ]
    assert rows == expected
    assert [len(table) for table in apart] == [2, 0, 3, 1]


def test_seq_going_back_across_runs_in_one_write_is_refused(tmp_path: Path) -> None:
    columns = _columns(["long", "varchar_utf8"])
    version = TableVersion("db", "t", columns, ())
    image = b"\x00" + (3).to_bytes(4, "little") + b"\x01c"
    block = _blocks(columns, [image + image], 0b11, None, "buffers")[0]
    backwards = [
        Run("c", 5, None, TS, 1, "b.1", 100, block),
        Run("c", 1, None, TS, 1, "b.1", 100, block),  # _seq 1 after 6
    ]
    with ParquetTableWriter(
        tmp_path / "t.parquet", version, with_before=False, with_absent=True
    ) as writer:
        with pytest.raises(InternalError, match="not strictly increasing"):
            writer.write(backwards)
        assert writer.rows == 0  # the failed write left the file as it was
        writer.write(backwards[:1])
        assert writer.close().rows == 2


def test_a_block_is_halved_by_rows_exactly() -> None:
    columns = _columns(["long", "varchar_utf8", "decimal"])
    images_ = [
        b"\x00" + n.to_bytes(4, "little") + bytes([n % 5]) + b"x" * (n % 5)
        + encode_decimal(Decimal(n) / 4, 12, 2)
        for n in range(9)
    ]  # fmt: skip
    (block,) = _blocks(columns, [b"".join(images_)], 0b111, None, "buffers")
    assert all(type(v) is tuple for v in block.columns)
    whole = block_rows(block)[0]
    halves = block_rows(block.slice(0, 4))[0] + block_rows(block.slice(4, 9))[0]
    assert halves == whole and len(whole) == 9
