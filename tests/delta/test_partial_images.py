"""Partial row images (binlog_row_image=MINIMAL/NOBLOB) through the Delta output: an update
changes only the columns it carries, across runs (the earlier run's row supplies the rest);
a column no image carried stops the run naming the row, or with --allow-unknown is null and
listed in _absent until an image carries it."""

from __future__ import annotations

from pathlib import Path

import pytest

from replicator.binlog.values import ABSENT
from replicator.delta.materialize import materialize_delta
from replicator.errors import IntegrityError
from replicator.landed.options import MaterializeOptions
from tests.delta.test_lifecycle import LOG
from tests.harness.duckdb_delta import read_delta
from tests.spark.zone import Zone, int_col, table, text_col

pytestmark = pytest.mark.delta

WIDE = table("shop.wide", int_col(0, "id"), text_col(1, "a"), int_col(2, "b"), key=[0])


def test_updates_carry_only_their_columns_across_runs(tmp_path: Path) -> None:
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    zone.commit([(WIDE, "c", (1, "x", 10)), (WIDE, "c", (2, "y", 20))])
    materialize_delta(zone.root, out)
    # MINIMAL: the key in the before image, the changed column in the after image
    zone.commit(
        [
            (WIDE, "u", (ABSENT, "X", ABSENT), (1, ABSENT, ABSENT)),
            (WIDE, "u", (ABSENT, ABSENT, 21), (2, ABSENT, ABSENT)),
        ]
    )
    (result,) = materialize_delta(zone.root, out)
    assert result.action == "merged"
    assert read_delta(out / "shop" / "wide", order_by="id")[1] == [(1, "X", 10), (2, "y", 21)]


def test_a_column_no_image_carried(tmp_path: Path) -> None:
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    zone.commit([(WIDE, "c", (1, "x", 10))])
    materialize_delta(zone.root, out)
    zone.commit([(WIDE, "u", (ABSENT, "seen", ABSENT), (7, ABSENT, ABSENT))])  # row 7 unseen
    with pytest.raises(IntegrityError, match=r'the row with key \{"id": 7\} has columns no row'):
        materialize_delta(zone.root, out)
    assert read_delta(out / "shop" / "wide")[1] == [(1, "x", 10)]  # nothing applied

    lenient = tmp_path / "lenient"
    options = MaterializeOptions(allow_unknown=True)
    materialize_delta(zone.root, lenient, options=options)
    assert read_delta(lenient / "shop" / "wide", order_by="id") == (
        ["id", "a", "b", "_absent"],
        [(1, "x", 10, []), (7, "seen", None, ["b"])],
    )
    zone.commit([(WIDE, "u", (ABSENT, ABSENT, 70), (7, ABSENT, ABSENT))])
    materialize_delta(zone.root, lenient, options=options)
    assert read_delta(lenient / "shop" / "wide", order_by="id")[1] == [
        (1, "x", 10, []),
        (7, "seen", 70, []),
    ]


def test_a_partial_image_of_a_keyless_row_stops(tmp_path: Path) -> None:
    zone = Zone(tmp_path / "landing")
    zone.commit([(LOG, "c", (1, ABSENT))])
    with pytest.raises(IntegrityError, match="a partial row image of a table without primary"):
        materialize_delta(zone.root, tmp_path / "out")
