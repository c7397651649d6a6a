"""Type fidelity through ``materialize --format delta``: every column type the landing zone
writes (tests/unit/test_parquet_writer.py's CASES) lands in the Delta table with the type
the Parquet output shows in Spark (``type_map``), and DuckDB's delta reader reads back the
documented values."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from replicator.binlog.constants import ColumnType as CT
from replicator.binlog.schema import ColumnDef
from replicator.delta.materialize import materialize_delta
from replicator.errors import IntegrityError
from replicator.landed.options import MaterializeOptions
from replicator.sink.changes import TableVersion
from tests.harness.duckdb_delta import read_delta
from tests.spark.test_types import collected, expected_columns
from tests.spark.zone import Ddl, Zone
from tests.unit.test_parquet_writer import ALL_TYPES, CASES

pytestmark = pytest.mark.delta

# Delta's names of the primitive types, as Spark's simpleString spells them
SPARK_NAMES = {"long": "bigint", "integer": "int", "short": "smallint", "byte": "tinyint"}


def spark_name(delta_type: object) -> str:
    if isinstance(delta_type, str):
        return SPARK_NAMES.get(delta_type, delta_type)
    assert isinstance(delta_type, dict), delta_type
    if delta_type["type"] == "array":
        return f"array<{spark_name(delta_type['elementType'])}>"
    raise AssertionError(f"unexpected Delta type {delta_type}")


def duckdb_value(value: object) -> object:
    """DuckDB gives TIMESTAMP WITH TIME ZONE as an aware datetime: compare it in UTC, as the
    Spark values (read with TZ=UTC) are."""
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    return collected(value)


@pytest.mark.parametrize("vectors", [False, True], ids=["merge", "vectors"])
def test_every_type_lands_in_delta_as_in_spark(tmp_path: Path, vectors: bool) -> None:
    pk = ColumnDef(index=len(CASES), type=CT.LONG, meta=0, name="pk")
    version = TableVersion("shop", "types", (*ALL_TYPES.columns, pk), (len(CASES),))
    rows = list(zip(*(case[2] for case in CASES), strict=True))
    zone = Zone(tmp_path / "landing")
    zone.commit([(version, "c", (*row, i)) for i, row in enumerate(rows)])
    out = tmp_path / "out"
    materialize_delta(zone.root, out)

    path = out / "shop" / "types"
    schema = json.loads(DeltaTable(str(path)).schema().to_json())
    types = {f["name"]: spark_name(f["type"]) for f in schema["fields"]}
    names, got = read_delta(path, order_by="pk")
    for name, (spark_type, values) in expected_columns().items():
        assert types[name] == spark_type, name
        at = names.index(name)
        assert [duckdb_value(r[at]) for r in got] == values, name
    assert names[-1] == "pk"
    assert types["pk"] == "int"
    assert "_ts" not in types
    assert pa.schema(DeltaTable(str(path)).schema().to_arrow()).field("pk").type == pa.int32()

    # the table's schema read back from Delta is the one the next run computes: a later
    # batch merges (a difference would rebuild the table at every run)
    zone.commit([(version, "u", (*rows[1], 1), (*rows[1], 1))])
    options = MaterializeOptions(deletion_vectors=vectors)
    (result,) = materialize_delta(zone.root, out, options=options)
    assert (result.action, result.detail) == ("merged", None)
    # the row written again (by a MERGE, or to a new file beside a deletion vector) reads
    # back as it was
    names, got = read_delta(path, order_by="pk")
    for name, (_, values) in expected_columns().items():
        at = names.index(name)
        assert [duckdb_value(r[at]) for r in got] == values, name
    assert bool(pa.table(DeltaTable(str(path)).deletion_vectors().read_all()).num_rows) == vectors


def test_every_type_as_a_keyless_row_survives_merges(tmp_path: Path) -> None:
    """A table without key of every type: a MERGE matches whole rows by every column (null
    included), so each type's equality in delta-rs must agree with the fold's."""
    rows = list(zip(*(case[2] for case in CASES), strict=True))
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    zone.commit([(ALL_TYPES, "c", row) for row in rows + rows])
    materialize_delta(zone.root, out)
    # one copy of row 0 goes, row 1 becomes row 2's values, row 3 gets a third copy
    zone.commit(
        [(ALL_TYPES, "d", rows[0]), (ALL_TYPES, "u", rows[2], rows[1]), (ALL_TYPES, "c", rows[3])]
    )
    (result,) = materialize_delta(zone.root, out)
    assert result.action == "merged"
    names, got = read_delta(out / "shop" / "orders")
    copies = [0, 1, 2, 2, 2, 3, 3, 3]  # of rows[i]
    shown = expected_columns()
    want = sorted((tuple(shown[n][1][i] for n in names) for i in copies), key=repr)
    assert sorted((tuple(duckdb_value(v) for v in r) for r in got), key=repr) == want


def _decimal_id(precision: int, scale: int) -> ColumnDef:
    return ColumnDef(
        index=0, type=CT.NEWDECIMAL, meta=precision << 8 | scale, name="id", column_id=1
    )


def _dk(precision: int, scale: int) -> TableVersion:
    value = ColumnDef(index=1, type=CT.LONG, meta=0, name="v", column_id=2)
    return TableVersion("shop", "dk", (_decimal_id(precision, scale), value), (0,))


@pytest.mark.parametrize("vectors", [False, True], ids=["merge", "vectors"])
def test_a_decimal_key_widened_past_38_digits_stays_one_key(tmp_path: Path, vectors: bool) -> None:
    """A DECIMAL key widened past 38 digits becomes text, every version's values at the
    scale of the newest (the ALTER rewrote the stored values: what SELECT shows), so a key
    is one key across the ALTER: an update after it replaces the row, a delete removes it
    (each version at its own scale made '1.50' and '1.5000' two rows)."""
    v1, v2, v3 = _dk(30, 2), _dk(40, 4), _dk(45, 6)
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    options = MaterializeOptions(deletion_vectors=vectors)
    zone.commit([(v1, "c", (Decimal(k), 1)) for k in ("1.50", "2.00", "3.00")])
    materialize_delta(zone.root, out, options=options)
    path = out / "shop" / "dk"
    assert read_delta(path, order_by="id")[1] == [
        (Decimal("1.50"), 1),
        (Decimal("2.00"), 1),
        (Decimal("3.00"), 1),
    ]

    zone.commit(
        [
            Ddl("alter", "shop.dk", statement="ALTER TABLE dk MODIFY id DECIMAL(40,4)"),
            (v2, "u", (Decimal("1.5000"), 2), (Decimal("1.5000"), 1)),
            (v2, "d", (Decimal("2.0000"), 1)),
        ]
    )
    materialize_delta(zone.root, out, options=options)
    assert read_delta(path, order_by="id") == (["id", "v"], [("1.5000", 2), ("3.0000", 1)])

    # text to text: DECIMAL(40,4) to (45,6) lands as text both ways; zeros are appended
    zone.commit(
        [
            Ddl("alter", "shop.dk", statement="ALTER TABLE dk MODIFY id DECIMAL(45,6)"),
            (v3, "u", (Decimal("3.000000"), 3), (Decimal("3.000000"), 1)),
            (v3, "c", (Decimal("4.000000"), 4)),
        ]
    )
    materialize_delta(zone.root, out, options=options)
    want = [("1.500000", 2), ("3.000000", 3), ("4.000000", 4)]
    assert read_delta(path, order_by="id") == (["id", "v"], want)
    zone.commit(
        [
            (v3, "d", (Decimal("1.500000"), 2)),
            (v3, "u", (Decimal("4.000000"), 5), (Decimal("4.000000"), 4)),
        ]
    )
    (result,) = materialize_delta(zone.root, out, options=options)
    assert result.action == "merged"
    want = [("3.000000", 3), ("4.000000", 5)]
    assert read_delta(path, order_by="id") == (["id", "v"], want)
    full = tmp_path / "full"
    materialize_delta(zone.root, full, options=replace(options, full_refresh=True))
    assert read_delta(full / "shop" / "dk", order_by="id") == (["id", "v"], want)


def test_a_decimal_whose_newest_scale_is_smaller_stops(tmp_path: Path) -> None:
    """An ALTER that lowers a DECIMAL's scale rounds the stored values unlogged (the daemon
    stops at it): the text of the older values at the newer scale is unknown, so the run
    stops naming the column rather than show them at another scale."""
    zone = Zone(tmp_path / "landing")
    zone.commit([(_dk(40, 4), "c", (Decimal("1.2345"), 1))])
    zone.commit([Ddl("alter", "shop.dk"), (_dk(45, 2), "c", (Decimal("2.00"), 1))])
    stop = r"table shop\.dk, column id: its newest version has 2 decimals, an older one 4"
    with pytest.raises(IntegrityError, match=stop):
        materialize_delta(zone.root, tmp_path / "out")


def test_text_of_another_form_stops_rather_than_be_padded(tmp_path: Path) -> None:
    """The landing zone's text of a DECIMAL(40,4) has exactly four decimals: other text (a
    file not written by replicator) stops naming the column once it would be padded to the
    newest version's scale, never padded to a wrong value (as the Spark output)."""
    zone = Zone(tmp_path / "landing")
    zone.commit([(_dk(40, 4), "c", (Decimal("1.5000"), 1)), (_dk(40, 4), "c", ("1.5", 2))])
    zone.commit([Ddl("alter", "shop.dk"), (_dk(45, 6), "c", (Decimal("2.000000"), 1))])
    stop = r"table shop\.dk, column id: '1\.5' is not the text of a DECIMAL with 4 decimals"
    with pytest.raises(IntegrityError, match=stop):
        materialize_delta(zone.root, tmp_path / "out")
