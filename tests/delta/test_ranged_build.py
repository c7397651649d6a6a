"""A lineage too large to fold at once is built range by range (``delta.build``): with a
tiny range size, a workload whose updates move rows between keys (and a keyless table whose
updates change the first column) gives exactly what the plain reference gives, in key
order."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from replicator.binlog.values import ABSENT
from replicator.delta import build as build_module
from replicator.delta import files as files_module
from replicator.delta.materialize import materialize_delta
from replicator.landed.options import MaterializeOptions
from tests.delta.test_lifecycle import ITEMS, LOG, outputs
from tests.spark.zone import Ddl, Zone, expected_tables, int_col, table, text_col

pytestmark = pytest.mark.delta


def workload(zone: Zone, seed: int) -> None:
    rng = random.Random(seed)
    rows: dict[int, str] = {}
    copies: list[tuple[int, str]] = []
    for _ in range(6):
        items: list[tuple[Any, ...]] = []
        for _ in range(60):
            key = rng.randrange(200)
            if key not in rows:
                rows[key] = f"v{rng.randrange(5)}"
                items.append((ITEMS, "c", (key, rows[key])))
            elif rng.random() < 0.3:
                items.append((ITEMS, "d", (key, rows.pop(key))))
            else:
                target = rng.randrange(200)  # a primary-key change, often far away
                if target in rows and target != key:
                    target = key
                value = rows.pop(key)
                rows[target] = value + "'"
                items.append((ITEMS, "u", (target, rows[target]), (key, value)))
            row = (rng.randrange(50), f"x{rng.randrange(3)}")
            if copies and rng.random() < 0.4:
                old = copies.pop(rng.randrange(len(copies)))
                items.append((LOG, "u", row, old))
            else:
                items.append((LOG, "c", row))
            copies.append(row)
        zone.commit(items)


def test_ranges_give_the_rows_the_whole_fold_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    zone = Zone(tmp_path / "landing")
    workload(zone, 11)
    monkeypatch.setattr(build_module, "IN_MEMORY_ROWS", 1)
    results = {r.table: r for r in materialize_delta(zone.root, tmp_path / "ranged")}
    assert outputs(tmp_path / "ranged") == expected_tables(zone)
    assert results["shop.items"].rows == len(expected_tables(zone)["shop.items"])
    # in key order across the ranges: each file sorted, the files' ranges apart
    uris = DeltaTable(str(tmp_path / "ranged" / "shop" / "items")).file_uris()
    keys: list[list[int]] = [
        pq.read_table(u.removeprefix("file://"), columns=["id"])["id"].to_pylist() for u in uris
    ]
    keys.sort(key=lambda k: k[0])
    assert all(k == sorted(k) for k in keys)
    flat = [k for part in keys for k in part]
    assert flat == sorted(flat) == sorted(r["id"] for r in expected_tables(zone)["shop.items"])  # type: ignore[type-var]

    zone.commit([Ddl("truncate", "shop.log")])
    workload(zone, 12)
    materialize_delta(zone.root, tmp_path / "ranged")
    assert outputs(tmp_path / "ranged") == expected_tables(zone)


WIDE = table("shop.wide", int_col(0, "id"), text_col(1, "a"), int_col(2, "b"), key=[0])


def test_ranges_take_each_change_where_the_fold_finds_its_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """binlog_row_image=MINIMAL: an update's row image leaves the key out, its before image
    holds it; and a keyless update whose before image is NULL in the first column (a value:
    range 0, where the row with the NULL is)."""
    zone = Zone(tmp_path / "landing")
    zone.commit(
        [(WIDE, "c", (i, f"n{i}", i)) for i in range(40)]
        + [(LOG, "c", (i, f"x{i}")) for i in range(40)]
        + [(LOG, "c", (None, "n")), (LOG, "c", (None, "m"))]
    )
    zone.commit(
        [(WIDE, "u", (ABSENT, "X", ABSENT), (i, ABSENT, ABSENT)) for i in range(30, 40)]
        + [(WIDE, "u", (ABSENT, ABSENT, 99), (3, ABSENT, ABSENT))]
        + [(LOG, "u", (35, "n"), (None, "n")), (LOG, "u", (None, "y"), (12, "x12"))]
    )
    monkeypatch.setattr(build_module, "IN_MEMORY_ROWS", 10)
    results = {r.table: r for r in materialize_delta(zone.root, tmp_path / "ranged")}
    assert results["shop.wide"].rows == 40
    assert outputs(tmp_path / "ranged") == expected_tables(zone)


COPY = MaterializeOptions(deletion_vectors=False)


def test_a_merge_of_few_keys_rewrites_only_their_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The build's files carry their key ranges: a MERGE (no deletion vectors) skips every
    file but the one that holds the changed key."""
    monkeypatch.setattr(files_module, "FILE_ROWS", 10)
    zone = Zone(tmp_path / "landing")
    zone.commit([(ITEMS, "c", (i, f"n{i}")) for i in range(100)])
    out = tmp_path / "out"
    materialize_delta(zone.root, out, options=COPY)
    path = str(out / "shop" / "items")
    assert len(DeltaTable(path).file_uris()) == 10
    zone.commit([(ITEMS, "u", (95, "changed"), (95, "n95"))])
    (result,) = materialize_delta(zone.root, out, options=COPY)
    assert result.action == "merged"
    (commit,) = DeltaTable(path).history(1)
    metrics = commit["operationMetrics"]
    assert (metrics["num_target_files_removed"], metrics["num_target_files_added"]) == (1, 1)
    assert metrics["num_target_rows_copied"] == 9
    # and reads only that file: the MERGE's predicate carries the touched keys' range
    assert (
        metrics["num_target_files_scanned"],
        metrics["num_target_files_skipped_during_scan"],
    ) == (1, 9)
    assert outputs(out) == expected_tables(zone)
