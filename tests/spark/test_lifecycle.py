"""materialize follows tables through their lifecycle records: truncate, drop, create again
(with other columns), renames (chains, a swap in one statement, away and back), DROP
DATABASE; snapshot rows; rows under a name after it ended without a CREATE stop the run.

Every step is checked three ways: the incremental output (one ``out`` carried along), a full
refresh, and the plain-Python reference (``zone.expected_tables``) all hold the same tables
with the same rows.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from replicator.errors import ConfigError, IntegrityError
from replicator.spark.materialize import (
    MaterializeOptions,
    TableResult,
    current_state,
    lineage_changes,
    materialize,
    read_changes,
)
from replicator.spark.state import STATE_FILE
from tests.spark.zone import (
    AWKWARD_NAMES,
    Ddl,
    Zone,
    awkward_zone,
    expected_tables,
    int_col,
    table,
    text_col,
)

pytestmark = pytest.mark.spark

Rows = list[dict[str, Any]]


def outputs(spark: SparkSession, out: Path) -> dict[str, Rows]:
    """Every table under ``out`` (the links; hidden versions and tombstones skipped)."""
    found: dict[str, Rows] = {}
    for db in sorted(p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for link in sorted(p for p in db.iterdir() if not p.name.startswith((".", "_"))):
            rows = [r.asDict() for r in spark.read.parquet(str(link)).collect()]
            found[f"{db.name}.{link.name}"] = sorted(rows, key=repr)
    return found


def check(
    spark: SparkSession,
    zone: Zone,
    out: Path,
    *,
    without_columns: tuple[str, ...] = (),
    reference: bool = True,
    **options: Any,
) -> dict[str, TableResult]:
    """Materialize incrementally into ``out`` (tables at once, by default) and from scratch
    next to it, one table after another; both must equal the reference (``without_columns``:
    existing tables no file gives columns to yet; ``reference=False``: the reference cannot
    follow column renames, the caller checks)."""
    chosen = MaterializeOptions(**options)
    results = {r.table: r for r in materialize(spark, zone.root, out, options=chosen)}
    full = out.with_name(out.name + "-full")
    one_by_one = replace(chosen, full_refresh=True, parallel=1)
    materialize(spark, zone.root, full, options=one_by_one)
    got = outputs(spark, out)
    assert got == outputs(spark, full)
    if not reference:
        return results
    expected = expected_tables(zone)
    assert got == {n: rows for n, rows in expected.items() if n not in without_columns}
    assert set(without_columns) <= set(expected)
    return results


ITEMS = table("shop.items", int_col(0, "id"), text_col(1, "name"), key=[0])
LOG = table("shop.log", int_col(0, "a"), text_col(1, "b"))  # no primary key


def test_truncate_then_new_rows_and_snapshot_rows(spark: SparkSession, tmp_path: Path) -> None:
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    zone.commit([(ITEMS, "c", (i, f"n{i}")) for i in (1, 2, 3)] + [(LOG, "c", (1, "x"))] * 2)
    check(spark, zone, out)

    zone.commit(  # rows before and after each truncate land in the same files
        [
            (ITEMS, "u", (2, "two"), (2, "n2")),
            Ddl("truncate", "shop.items", statement="TRUNCATE TABLE shop.items"),
            (ITEMS, "c", (4, "four")),
            (ITEMS, "u", (4, "FOUR"), (4, "four")),
            (LOG, "c", (2, "y")),
            Ddl("truncate", "shop.log"),
            (LOG, "c", (1, "x")),
        ]
    )
    results = check(spark, zone, out)
    assert outputs(spark, out) == {
        "shop.items": [{"id": 4, "name": "FOUR"}],
        "shop.log": [{"a": 1, "b": "x"}],
    }
    items = results["shop.items"]
    assert (items.action, items.rows) == ("built", 1)
    assert items.detail is not None
    assert items.detail.startswith("rebuilt for the truncate of shop.items at _seq 7 (batch 2")
    assert "TRUNCATE TABLE shop.items" in items.detail

    # snapshot reads (_op r) replace a keyed row / add a copy, as inserts do
    zone.commit([(ITEMS, "r", (4, "snapshot")), (ITEMS, "r", (5, "new")), (LOG, "r", (1, "x"))])
    results = check(spark, zone, out)
    assert {t: r.action for t, r in results.items()} == {
        "shop.items": "merged",
        "shop.log": "merged",
    }
    assert outputs(spark, out)["shop.items"] == [
        {"id": 4, "name": "snapshot"},
        {"id": 5, "name": "new"},
    ]

    zone.commit([Ddl("truncate", "shop.items")])  # empty, with its columns
    results = check(spark, zone, out)
    assert (results["shop.items"].action, results["shop.log"].action) == ("built", "unchanged")
    assert spark.read.parquet(str(out / "shop" / "items")).columns == ["id", "name"]
    assert outputs(spark, out)["shop.items"] == []


def test_drop_for_good_and_drop_database(spark: SparkSession, tmp_path: Path) -> None:
    keep = table("other.keep", int_col(0, "id"), key=[0])
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    zone.commit([(ITEMS, "c", (1, "a")), (LOG, "c", (1, "x")), (keep, "c", (1,))])
    check(spark, zone, out)

    zone.commit([(ITEMS, "c", (2, "b")), Ddl("drop", "shop.items", statement="DROP TABLE items")])
    results = check(spark, zone, out)
    assert (results["shop.items"].action, results["shop.items"].detail) == (
        "removed",
        "dropped at _seq 5 (batch 2, mysql-bin.000001:1005: DROP TABLE items)",
    )
    assert not os.path.lexists(out / "shop" / "items")
    assert sorted(p.name for p in (out / "shop").iterdir()) == [
        ".items.gone.json",  # the tombstone: how far the table is known to be gone
        ".log.v-" + (out / "shop" / "log").resolve().name.split(".v-")[1],
        "log",
    ]

    zone.commit([(keep, "c", (2,))])
    results = check(spark, zone, out)
    assert (results["shop.items"].action, results["shop.items"].last_batch) == ("removed", 3)

    # DROP DATABASE shop: one drop record per replicated table, one statement
    zone.commit(
        [
            (LOG, "c", (2, "y")),
            Ddl("drop", "shop.log", statement="DROP DATABASE shop"),
            Ddl("drop", "shop.items", statement="DROP DATABASE shop", joined=True),
        ]
    )
    results = check(spark, zone, out)
    assert {t: r.action for t, r in results.items()} == {
        "other.keep": "unchanged",
        "shop.items": "removed",
        "shop.log": "removed",
    }
    assert sorted(outputs(spark, out)) == ["other.keep"]


def test_drop_then_create_with_other_columns(spark: SparkSession, tmp_path: Path) -> None:
    v1 = table("shop.t", int_col(0, "id", column_id=1), text_col(1, "name", column_id=2), key=[0])
    v2 = table("shop.t", int_col(0, "id", column_id=3), int_col(1, "qty", column_id=4), key=[0])
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    zone.commit([(v1, "c", (1, "a")), (v1, "c", (2, "b"))])
    check(spark, zone, out)

    zone.commit(
        [
            (v1, "u", (1, "A"), (1, "a")),
            Ddl("drop", "shop.t"),
            Ddl("create", "shop.t", statement="CREATE TABLE t (id INT PRIMARY KEY, qty INT)"),
            (v2, "c", (1, 10)),
        ]
    )
    check(spark, zone, out)
    assert outputs(spark, out) == {"shop.t": [{"id": 1, "qty": 10}]}

    # created again with the first columns, no rows yet: no columns to show, output removed
    zone.commit([Ddl("drop", "shop.t"), Ddl("create", "shop.t")])
    results = check(spark, zone, out, without_columns=("shop.t",))
    assert results["shop.t"].action == "empty"
    assert results["shop.t"].detail is not None
    assert results["shop.t"].detail.startswith("no rows since the create of shop.t")
    assert not os.path.lexists(out / "shop" / "t")

    # rows before and after a drop + create of the same columns share one file
    zone.commit(
        [(v1, "c", (5, "e")), Ddl("drop", "shop.t"), Ddl("create", "shop.t"), (v1, "c", (6, "f"))]
    )
    results = check(spark, zone, out)
    assert outputs(spark, out) == {"shop.t": [{"id": 6, "name": "f"}]}
    assert results["shop.t"].action == "built"


def test_renames_chain_swap_and_back(spark: SparkSession, tmp_path: Path) -> None:
    def keyed(name: str) -> Any:
        return table(name, int_col(0, "id"), text_col(1, "name"), key=[0])

    def keyless(name: str) -> Any:
        return table(name, int_col(0, "a"), text_col(1, "b"))

    a, b, c = keyed("shop.a"), keyed("shop.b"), keyed("shop.c")
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    zone.commit([(a, "c", (1, "one")), (a, "c", (2, "two"))])
    check(spark, zone, out)

    zone.commit(
        [
            (a, "u", (1, "ONE"), (1, "one")),
            Ddl("rename", "shop.a", "shop.b"),
            (b, "c", (3, "three")),
        ]
    )
    results = check(spark, zone, out)
    assert (results["shop.a"].action, results["shop.a"].detail) == (
        "removed",
        "renamed to shop.b at _seq 4 (batch 2, mysql-bin.000001:1004: RENAME shop.a)",
    )
    assert outputs(spark, out) == {
        "shop.b": [{"id": 1, "name": "ONE"}, {"id": 2, "name": "two"}, {"id": 3, "name": "three"}]
    }

    zone.commit([(b, "d", (2, "two")), Ddl("rename", "shop.b", "shop.c"), (c, "c", (4, "four"))])
    check(spark, zone, out)
    assert sorted(r["id"] for r in outputs(spark, out)["shop.c"]) == [1, 3, 4]

    # a swap in one statement: RENAME TABLE x TO tmp, y TO x, tmp TO y (x keyed, y keyless)
    x, y = keyed("shop.x"), keyless("shop.y")
    zone.commit([(x, "c", (1, "x1")), (y, "c", (7, "y7")), (y, "c", (7, "y7"))])
    check(spark, zone, out)
    swap = "RENAME TABLE x TO tmp, y TO x, tmp TO y"
    zone.commit(
        [
            Ddl("rename", "shop.x", "shop.tmp", statement=swap),
            Ddl("rename", "shop.y", "shop.x", statement=swap, joined=True),
            Ddl("rename", "shop.tmp", "shop.y", statement=swap, joined=True),
            (keyless("shop.x"), "c", (8, "now x")),
            (keyed("shop.y"), "u", (1, "now y"), (1, "x1")),
        ]
    )
    check(spark, zone, out)
    got = outputs(spark, out)
    assert got["shop.x"] == [{"a": 7, "b": "y7"}, {"a": 7, "b": "y7"}, {"a": 8, "b": "now x"}]
    assert got["shop.y"] == [{"id": 1, "name": "now y"}]
    assert "shop.tmp" not in got

    # renamed away and back keeps its state
    p, q = keyed("shop.p"), keyed("shop.q")
    zone.commit([(p, "c", (1, "p1"))])
    zone.commit(
        [
            Ddl("rename", "shop.p", "shop.q"),
            (q, "c", (2, "in q")),
            Ddl("rename", "shop.q", "shop.p"),
            (p, "c", (3, "back")),
        ]
    )
    results = check(spark, zone, out)
    assert sorted(r["id"] for r in outputs(spark, out)["shop.p"]) == [1, 2, 3]
    assert results["shop.q"].action == "removed"


def test_api_follows_the_lineage(spark: SparkSession, tmp_path: Path) -> None:
    a, b = (table(n, int_col(0, "id"), text_col(1, "name"), key=[0]) for n in ("d.a", "d.b"))
    zone = Zone(tmp_path / "landing")
    zone.commit([(a, "c", (1, "x")), (a, "c", (2, "y"))])
    zone.commit([Ddl("rename", "d.a", "d.b"), (b, "c", (3, "z")), Ddl("truncate", "d.b")])
    zone.commit([(b, "c", (4, "w"))])

    assert [r["id"] for r in current_state(spark, zone.root, "d.b").collect()] == [4]
    assert sorted(r["id"] for r in read_changes(spark, zone.root, "d.a").collect()) == [1, 2]
    assert sorted(r["id"] for r in read_changes(spark, zone.root, "d.b").collect()) == [3, 4]
    assert [r["id"] for r in lineage_changes(spark, zone.root, "d.b").collect()] == [4]
    with pytest.raises(ConfigError, match=r"renamed to d\.b at _seq"):
        current_state(spark, zone.root, "d.a")


def test_rows_after_a_drop_without_create_stop(spark: SparkSession, tmp_path: Path) -> None:
    zone = Zone(tmp_path / "landing")
    zone.commit([(ITEMS, "c", (1, "a"))])
    zone.commit([Ddl("drop", "shop.items")])
    zone.commit([(ITEMS, "c", (2, "b"))])  # no CREATE landed: the zone is inconsistent
    with pytest.raises(IntegrityError, match=r"after the drop of shop\.items at _seq 2"):
        materialize(spark, zone.root, tmp_path / "out")


def test_a_state_of_an_older_materialize_is_rebuilt(spark: SparkSession, tmp_path: Path) -> None:
    zone = Zone(tmp_path / "landing")
    zone.commit([(ITEMS, "c", (1, "a"))])
    zone.commit([Ddl("truncate", "shop.items"), (ITEMS, "c", (2, "b"))])
    out = tmp_path / "out"
    materialize(spark, zone.root, out)
    state_file = out / "shop" / "items" / STATE_FILE
    old = json.loads(state_file.read_text())
    old.pop("lineage")  # as written before lifecycle records existed
    state_file.write_text(json.dumps(old))

    result = materialize(spark, zone.root, out)[0]
    assert (result.action, result.last_batch) == ("built", 2)
    assert result.detail is not None
    assert result.detail.startswith("rebuilt for the truncate of shop.items at _seq 2")
    assert json.loads(state_file.read_text())["lineage"] is True
    assert materialize(spark, zone.root, out)[0].action == "unchanged"


def test_every_table_name_gets_a_directory_of_its_own(spark: SparkSession, tmp_path: Path) -> None:
    # a leading "_" was passed over as hidden, "a%2Fb" read back as "a/b" (and found no
    # rows), and "a\\b" stopped the writer
    zone = awkward_zone(tmp_path / "landing")
    out = tmp_path / "out"
    results = materialize(spark, zone.root, out)
    where = {r.table: Path(r.path).relative_to(out).as_posix() for r in results}
    assert where == AWKWARD_NAMES
    got = {}
    for result in results:
        rows = [r.asDict() for r in spark.read.parquet(str(result.path)).collect()]
        got[result.table] = sorted(rows, key=repr)
    assert got == expected_tables(zone)
    assert all(len(rows) == 3 for rows in got.values())


def test_a_table_left_where_an_older_escaping_put_it_stops_the_run(
    spark: SparkSession, tmp_path: Path
) -> None:
    # an output table at a directory an earlier escaping gave its name (here: before ":" was
    # escaped) would stay as it was, beside the one built anew under the new name
    v = table("shop.a:b", int_col(0, "id"), text_col(1, "name"), key=[0])
    zone = Zone(tmp_path / "landing")
    zone.commit([(v, "c", (1, "one"))])
    out = tmp_path / "out"
    materialize(spark, zone.root, out)
    (out / "shop" / "a~3Ab").rename(out / "shop" / "a:b")  # the link; its version stays
    zone.commit([(v, "c", (2, "two"))])

    with pytest.raises(IntegrityError) as stopped:
        materialize(spark, zone.root, out)
    assert "the output of shop.a:b is at shop/a:b, but its directory is shop/a~3Ab now" in str(
        stopped.value
    )
    assert "remove shop/a:b and the .a:b.v-* beside it" in str(stopped.value)
    assert sorted(p.name for p in (out / "shop").iterdir() if not p.name.startswith(".")) == [
        "a:b"
    ]  # nothing built

    (out / "shop" / "a:b").unlink()
    assert [r.action for r in materialize(spark, zone.root, out)] == ["built"]
    rows = spark.read.parquet(str(out / "shop" / "a~3Ab")).orderBy("id").collect()
    assert [r.asDict() for r in rows] == [{"id": 1, "name": "one"}, {"id": 2, "name": "two"}]
