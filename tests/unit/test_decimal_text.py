"""``landed.decimal_text`` (the scale a DECIMAL shown as text is written at, for both outputs)
and ``landed.versions.file_versions`` grouping files by their columns' source types: the
DECIMAL(40,4) and DECIMAL(45,6) files of one column are both plain text, yet two versions."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from replicator.binlog.constants import ColumnType as CT
from replicator.errors import IntegrityError
from replicator.landed.columns import version_key
from replicator.landed.committed import committed_files, file_schema
from replicator.landed.contract import FIELD_TYPE_KEY
from replicator.landed.decimal_text import (
    decimal_scale,
    not_decimal_text,
    rescaled,
    text_pattern,
    text_scales,
    zeros,
)
from replicator.landed.versions import file_versions
from tests.spark.zone import Ddl, Zone, col, int_col, table


def _field(kind: pa.DataType, label: str | None = None) -> pa.Field:
    return pa.field("x", kind, metadata=None if label is None else {FIELD_TYPE_KEY: label})


def _dk(precision: int, scale: int) -> object:
    key = col(0, CT.NEWDECIMAL, "id", precision << 8 | scale, column_id=1)
    return table("shop.dk", key, int_col(1, "v", column_id=2), key=[0])


def test_files_of_two_decimals_shown_as_text_are_two_versions(tmp_path: Path) -> None:
    zone = Zone(tmp_path / "landing")
    zone.commit([(_dk(40, 4), "c", (Decimal("1.5000"), 1))])
    zone.commit([Ddl("alter", "shop.dk"), (_dk(45, 6), "c", (Decimal("2.000000"), 1))])
    zone.commit([(_dk(45, 6), "c", (Decimal("3.000000"), 1))])
    files = committed_files(zone.root)["shop.dk"]
    older, newer = (file_schema(f) for f in files[:2])
    assert older.field("id").type == newer.field("id").type == pa.string()
    assert version_key(older) != version_key(newer)
    versions = file_versions(files)
    assert [len(v.files) for v in versions] == [1, 2]
    assert [v.schema.field("id").metadata[FIELD_TYPE_KEY] for v in versions] == [
        b"DECIMAL(40,4)",
        b"DECIMAL(45,6)",
    ]


@pytest.mark.parametrize(
    ("field", "scale"),
    [
        (_field(pa.decimal128(30, 10), "DECIMAL(30,10)"), 10),
        (_field(pa.decimal128(12, 2)), 2),  # files of older writers: the type says
        (_field(pa.string(), "DECIMAL(40,4)"), 4),
        (_field(pa.string(), "DECIMAL(65,0)"), 0),
        (_field(pa.uint64(), "BIGINT UNSIGNED"), 0),  # shown as decimal(20,0)
        (_field(pa.string(), "VARCHAR"), None),
        (_field(pa.string()), None),
        (_field(pa.int64(), "BIGINT"), None),
    ],
)
def test_the_scale_of_a_decimal(field: pa.Field, scale: int | None) -> None:
    assert decimal_scale(field) == scale


def test_text_scales_are_those_of_newest_decimals() -> None:
    newest = pa.schema(
        [
            _field(pa.string(), "DECIMAL(45,6)").with_name("wide"),
            _field(pa.decimal128(30, 25), "DECIMAL(30,25)").with_name("met"),
            _field(pa.string(), "VARCHAR").with_name("was_decimal"),
            _field(pa.string()).with_name("unsaid"),
        ]
    )
    names = ["WIDE", "met", "was_decimal", "unsaid", "gone"]
    assert text_scales(names, newest) == (("WIDE", 6), ("met", 25), ("unsaid", None))


def test_what_is_rescaled_and_what_stops() -> None:
    def at(field: pa.Field, scale: int | None) -> int | None:
        return rescaled("d.t", "x", field, scale)

    assert at(_field(pa.decimal128(10, 2), "DECIMAL(10,2)"), 4) == 2
    assert at(_field(pa.string(), "DECIMAL(40,4)"), 6) == 4
    assert at(_field(pa.int32(), "INT"), 4) == 0  # an integer: scale 0
    assert at(_field(pa.uint64(), "BIGINT UNSIGNED"), 4) == 0
    assert at(_field(pa.string(), "DECIMAL(40,4)"), 4) is None  # at the scale already
    assert at(_field(pa.string(), "VARCHAR"), 4) is None  # text of another type: as it is
    assert at(_field(pa.int32(), "INT"), None) is None
    with pytest.raises(IntegrityError, match=r"table d\.t, column x: its newest version has 2"):
        at(_field(pa.string(), "DECIMAL(40,4)"), 2)
    with pytest.raises(IntegrityError, match="do not say its source type"):
        at(_field(pa.decimal128(10, 2)), None)


def test_the_text_pattern_and_its_padding() -> None:
    texts = ["1.5000", "-12.0000", "1.5", "1.50000", "1e3", " 1.5000", "1.5000\n", "-.5000"]
    found = pc.match_substring_regex(pa.array(texts), pattern=text_pattern(4))
    assert found.to_pylist() == [True, True, False, False, False, False, False, False]
    whole = pc.match_substring_regex(pa.array(["12", "-3", "1.0", "7\n"]), pattern=text_pattern(0))
    assert whole.to_pylist() == [True, True, False, False]
    assert "1.50" + zeros(2, 4) == "1.5000"
    assert "7" + zeros(0, 3) == "7.000"
    error = not_decimal_text("d.t", "x", "1.5", 4)
    assert (
        error.args[0] == "table d.t, column x: '1.5' is not the text of a DECIMAL with 4 decimals"
    )
