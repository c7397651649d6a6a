"""``--key`` with ``--format delta``: the identity columns of a table whose files record no
primary key, or columns of the key they record; a key column that is NULL in a row stops."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from replicator.delta.materialize import materialize_delta
from replicator.errors import ConfigError, IntegrityError
from replicator.landed.options import MaterializeOptions
from tests.delta.test_lifecycle import outputs
from tests.spark.zone import Zone, expected_tables, int_col, table, text_col

pytestmark = pytest.mark.delta

WIDE = table("shop.wide", int_col(0, "id"), text_col(1, "a"), int_col(2, "b"), key=[0])
PAIR = table("shop.pair", int_col(0, "id"), text_col(1, "a"), int_col(2, "b"), key=[0, 1])
LOGN = table("shop.logn", int_col(0, "a"), text_col(1, "b"))  # no primary key


def test_a_key_other_than_the_recorded_one_is_refused(tmp_path: Path) -> None:
    """An update's ``_before_key`` holds the recorded key's columns only: under another
    --key the row it changes could not be found (the old row would stay)."""
    zone = Zone(tmp_path / "landing")
    zone.commit([(WIDE, "c", (1, "x", 10)), (PAIR, "c", (1, "x", 10)), (PAIR, "c", (2, "x", 10))])
    zone.commit([(WIDE, "u", (1, "y", 10), (1, "x", 10)), (PAIR, "u", (1, "x", 11), (1, "x", 10))])
    out = tmp_path / "out"
    with pytest.raises(ConfigError, match=r"--key shop\.wide=a names columns outside the primary"):
        materialize_delta(zone.root, out, options=MaterializeOptions(keys={"shop.wide": ("a",)}))
    assert not (out / "shop" / "wide").exists()
    with pytest.raises(ConfigError, match=r"key its files record \(id, a, in "):
        materialize_delta(
            zone.root, tmp_path / "other", options=MaterializeOptions(keys={"shop.pair": ("b",)})
        )
    # the recorded key, or some of its columns, identify the rows as well
    keys = {"shop.wide": ("ID",), "shop.pair": ("id",)}
    options = MaterializeOptions(keys=keys, deletion_vectors=False)
    materialize_delta(zone.root, out, options=replace(options, full_refresh=True))
    assert outputs(out) == expected_tables(zone)
    zone.commit([(PAIR, "u", (1, "q", 12), (1, "x", 11)), (PAIR, "d", (2, "x", 10))])
    materialize_delta(zone.root, out, options=options)
    assert outputs(out)["shop.pair"] == [{"id": 1, "a": "q", "b": 12}]


def test_a_null_key_value_stops_naming_its_batch(tmp_path: Path) -> None:
    """--key on a nullable column: NULL identifies no row (a MERGE never matches it, and a
    batch of NULL keys alone once crashed the read of the output's rows)."""
    zone = Zone(tmp_path / "landing")
    options = MaterializeOptions(keys={"shop.logn": ("b",)}, deletion_vectors=False)
    zone.commit([(LOGN, "c", (1, "k")), (LOGN, "c", (2, "m"))])
    out = tmp_path / "out"
    materialize_delta(zone.root, out, options=options)
    zone.commit([(LOGN, "u", (3, "k"), (1, "k")), (LOGN, "c", (5, "n"))])
    materialize_delta(zone.root, out, options=options)
    assert outputs(out)["shop.logn"] == [
        {"a": 2, "b": "m"},
        {"a": 3, "b": "k"},
        {"a": 5, "b": "n"},
    ]
    zone.commit([(LOGN, "c", (4, None))])  # batch 3: its only key is NULL
    stop = r"table shop\.logn: key column b is NULL in the row change at _seq 5 \(batch 3, "
    with pytest.raises(IntegrityError, match=stop):
        materialize_delta(zone.root, out, options=options)
    with pytest.raises(IntegrityError, match=stop):
        materialize_delta(zone.root, out, options=replace(options, full_refresh=True))
    # an update's before image with a NULL key (a row from before the landing zone)
    other = Zone(tmp_path / "other")
    other.commit([(LOGN, "u", (1, "k"), (1, None))])
    with pytest.raises(IntegrityError, match=r"key column b is NULL .* \(batch 1, "):
        materialize_delta(other.root, tmp_path / "other-out", options=options)
    # whole rows take NULLs as values
    whole = replace(options, keys={}, full_refresh=True)
    materialize_delta(zone.root, out, options=whole)
    assert outputs(out) == expected_tables(zone)
