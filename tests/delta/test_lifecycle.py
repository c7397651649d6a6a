"""``materialize --format delta`` follows tables through their lifecycle, as the Parquet
output does: every step is checked three ways, read back by DuckDB's delta extension (not
by the writer): the incremental output carried along, a full refresh beside it, and the
plain-Python reference (``zone.expected_tables``)."""

from __future__ import annotations

import datetime as dt
import shutil
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from replicator.binlog.constants import ColumnType as T
from replicator.delta.materialize import materialize_delta
from replicator.errors import IntegrityError
from replicator.landed.options import MaterializeOptions, TableResult
from replicator.storage import LocalStore
from tests.harness.duckdb_delta import read_delta
from tests.spark.zone import (
    AWKWARD_NAMES,
    Ddl,
    Zone,
    awkward_zone,
    col,
    expected_tables,
    int_col,
    table,
    text_col,
)

pytestmark = pytest.mark.delta

Rows = list[dict[str, Any]]


def outputs(out: Path) -> dict[str, Rows]:
    """Every Delta table under ``out``, as DuckDB reads it."""
    found: dict[str, Rows] = {}
    for db in sorted(p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for path in sorted(p for p in db.iterdir() if p.is_dir()):
            names, rows = read_delta(path)
            found[f"{db.name}.{path.name}"] = sorted(
                (dict(zip(names, r, strict=True)) for r in rows), key=repr
            )
    return found


_VECTORS: dict[str, bool | None] = {"on": None}  # tests run twice: by MERGE, by vectors


@pytest.fixture(autouse=True, params=[False, True], ids=["merge", "vectors"])
def _vectors(request: pytest.FixtureRequest) -> Iterator[None]:
    _VECTORS["on"] = request.param
    yield
    _VECTORS["on"] = None


def check(zone: Zone, out: Path, **options: Any) -> dict[str, TableResult]:
    chosen = MaterializeOptions(**{"deletion_vectors": _VECTORS["on"], **options})
    results = {r.table: r for r in materialize_delta(zone.root, out, options=chosen)}
    full = out.with_name(out.name + "-full")
    materialize_delta(zone.root, full, options=replace(chosen, full_refresh=True))
    got = outputs(out)
    assert got == outputs(full)
    assert got == expected_tables(zone)
    return results


ITEMS = table("shop.items", int_col(0, "id"), text_col(1, "name"), key=[0])
LOG = table("shop.log", int_col(0, "a"), text_col(1, "b"))  # no primary key


def test_merges_then_truncate_and_snapshot_rows(tmp_path: Path) -> None:
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    zone.commit([(ITEMS, "c", (i, f"n{i}")) for i in (1, 2, 3)] + [(LOG, "c", (1, "x"))] * 2)
    results = check(zone, out)
    assert {t: r.action for t, r in results.items()} == {"shop.items": "built", "shop.log": "built"}

    zone.commit(
        [
            (ITEMS, "u", (2, "two"), (2, "n2")),
            (ITEMS, "d", (3, "n3")),
            (ITEMS, "u", (9, "n1"), (1, "n1")),  # a primary-key change
            (LOG, "u", (1, "z"), (1, "x")),  # one of two copies
            (LOG, "d", (5, "never")),  # a row the stream never saw
        ]
    )
    results = check(zone, out)
    assert {t: r.action for t, r in results.items()} == {
        "shop.items": "merged",
        "shop.log": "merged",
    }
    assert results["shop.log"].unmatched == 1
    assert outputs(out)["shop.items"] == [{"id": 2, "name": "two"}, {"id": 9, "name": "n1"}]

    zone.commit(
        [
            (ITEMS, "u", (2, "2"), (2, "two")),
            Ddl("truncate", "shop.items", statement="TRUNCATE TABLE shop.items"),
            (ITEMS, "c", (4, "four")),
            (LOG, "c", (2, "y")),
        ]
    )
    results = check(zone, out)
    assert (results["shop.items"].action, results["shop.log"].action) == ("built", "merged")
    assert outputs(out)["shop.items"] == [{"id": 4, "name": "four"}]

    zone.commit([(ITEMS, "r", (4, "snapshot")), (ITEMS, "r", (5, "new")), (LOG, "r", (1, "x"))])
    results = check(zone, out)
    assert outputs(out)["shop.items"] == [{"id": 4, "name": "snapshot"}, {"id": 5, "name": "new"}]

    zone.commit([Ddl("truncate", "shop.items")])  # empty, with its columns
    results = check(zone, out)
    assert (results["shop.items"].action, results["shop.log"].action) == ("built", "unchanged")
    names, rows = read_delta(out / "shop" / "items")
    assert (names, rows) == (["id", "name"], [])


def test_drop_drop_database_and_create_with_other_columns(tmp_path: Path) -> None:
    keep = table("other.keep", int_col(0, "id"), key=[0])
    v1 = table("shop.t", int_col(0, "id", column_id=1), text_col(1, "name", column_id=2), key=[0])
    v2 = table("shop.t", int_col(0, "id", column_id=3), int_col(1, "qty", column_id=4), key=[0])
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    zone.commit([(ITEMS, "c", (1, "a")), (LOG, "c", (1, "x")), (keep, "c", (1,))])
    zone.commit([(v1, "c", (1, "a")), (v1, "c", (2, "b"))])
    check(zone, out)

    zone.commit([(ITEMS, "c", (2, "b")), Ddl("drop", "shop.items", statement="DROP TABLE items")])
    results = check(zone, out)
    assert results["shop.items"].action == "removed"
    assert results["shop.items"].detail == (
        "dropped at _seq 7 (batch 3, mysql-bin.000001:1007: DROP TABLE items)"
    )
    assert not (out / "shop" / "items").exists()

    zone.commit(
        [
            (v1, "u", (1, "A"), (1, "a")),
            Ddl("drop", "shop.t"),
            Ddl("create", "shop.t", statement="CREATE TABLE t (id INT PRIMARY KEY, qty INT)"),
            (v2, "c", (1, 10)),
        ]
    )
    results = check(zone, out)
    assert results["shop.t"].action == "built"
    assert outputs(out)["shop.t"] == [{"id": 1, "qty": 10}]

    zone.commit(
        [
            (LOG, "c", (2, "y")),
            Ddl("drop", "shop.log", statement="DROP DATABASE shop"),
            Ddl("drop", "shop.t", statement="DROP DATABASE shop", joined=True),
        ]
    )
    results = check(zone, out)
    assert {t: r.action for t, r in results.items()} == {
        "other.keep": "unchanged",
        "shop.items": "removed",
        "shop.log": "removed",
        "shop.t": "removed",
    }
    assert sorted(outputs(out)) == ["other.keep"]


class _Killed(Exception):
    """A run stopped at a deletion."""


def test_a_removal_stopped_midway_is_finished_by_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dropped table's output goes data files first, then its Delta log newest entry
    first: a run stopped after any deletion leaves a table the next run loads and removes.
    A log that lost its first version all the same (a removal of an older version, in key
    order) is removed too, as its table has ended; the other tables are brought up to date."""
    zone = Zone(tmp_path / "landing")
    out, saved = tmp_path / "out", tmp_path / "saved"
    options = MaterializeOptions(deletion_vectors=_VECTORS["on"])
    zone.commit([(ITEMS, "c", (1, "a")), (ITEMS, "c", (3, "c")), (LOG, "c", (1, "x"))])
    materialize_delta(zone.root, out, options=options)
    zone.commit([(ITEMS, "u", (1, "b"), (1, "a")), (ITEMS, "c", (2, "b"))])
    materialize_delta(zone.root, out, options=options)
    zone.commit([Ddl("drop", "shop.items"), (LOG, "c", (2, "y"))])
    shutil.copytree(out, saved)
    keys = LocalStore(out).list("shop/items/")
    delete = LocalStore.delete
    for stop in range(len(keys)):
        shutil.rmtree(out)
        shutil.copytree(saved, out)
        done: list[str] = []

        def stopping(store: LocalStore, key: str, stop: int = stop, done: list[str] = done) -> None:
            if len(done) == stop:
                raise _Killed(key)
            done.append(key)
            delete(store, key)

        monkeypatch.setattr(LocalStore, "delete", stopping)
        with pytest.raises(_Killed):
            materialize_delta(zone.root, out, options=options)
        monkeypatch.setattr(LocalStore, "delete", delete)
        results = {r.table: r for r in materialize_delta(zone.root, out, options=options)}
        assert results["shop.items"].action == "removed", done
        assert not (out / "shop" / "items").exists(), done
        assert outputs(out) == expected_tables(zone), done
    shutil.rmtree(out)
    shutil.copytree(saved, out)
    (out / "shop" / "items" / "_delta_log" / "00000000000000000000.json").unlink()
    results = {r.table: r for r in materialize_delta(zone.root, out, options=options)}
    assert results["shop.items"].action == "removed"
    assert not (out / "shop" / "items").exists()
    assert outputs(out) == expected_tables(zone)
    # a table that has not ended is never taken for a leftover
    (out / "shop" / "log" / "_delta_log" / "00000000000000000000.json").unlink()
    with pytest.raises(IntegrityError, match=r"shop/log cannot be read"):
        materialize_delta(zone.root, out, options=options)


def test_renames_chain_swap_and_back(tmp_path: Path) -> None:
    def keyed(name: str) -> Any:
        return table(name, int_col(0, "id"), text_col(1, "name"), key=[0])

    def keyless(name: str) -> Any:
        return table(name, int_col(0, "a"), text_col(1, "b"))

    a, b, c = keyed("shop.a"), keyed("shop.b"), keyed("shop.c")
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    zone.commit([(a, "c", (1, "one")), (a, "c", (2, "two"))])
    check(zone, out)
    zone.commit(
        [(a, "u", (1, "ONE"), (1, "one")), Ddl("rename", "shop.a", "shop.b"), (b, "c", (3, "x"))]
    )
    results = check(zone, out)
    assert (results["shop.a"].action, results["shop.b"].action) == ("removed", "built")
    zone.commit([(b, "d", (2, "two")), Ddl("rename", "shop.b", "shop.c"), (c, "c", (4, "four"))])
    check(zone, out)
    assert sorted(r["id"] for r in outputs(out)["shop.c"]) == [1, 3, 4]

    x, y = keyed("shop.x"), keyless("shop.y")
    zone.commit([(x, "c", (1, "x1")), (y, "c", (7, "y7")), (y, "c", (7, "y7"))])
    check(zone, out)
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
    check(zone, out)
    got = outputs(out)
    assert got["shop.x"] == [{"a": 7, "b": "y7"}, {"a": 7, "b": "y7"}, {"a": 8, "b": "now x"}]
    assert got["shop.y"] == [{"id": 1, "name": "now y"}]


def test_column_changes_rebuild_and_keep_renamed_values(tmp_path: Path) -> None:
    """ADD, RENAME and DROP COLUMN and a widening (INT -> BIGINT): the table is rewritten
    once in the new shape; a renamed column keeps its values (matched by column id)."""
    v1 = table("s.t", int_col(0, "id", column_id=1), text_col(1, "name", column_id=2), key=[0])
    v2 = table(
        "s.t",
        int_col(0, "id", column_id=1),
        text_col(1, "label", column_id=2),  # renamed
        int_col(2, "qty", column_id=3),  # added
        key=[0],
    )
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    zone.commit([(v1, "c", (1, "a")), (v1, "c", (2, "b"))])
    check(zone, out)
    zone.commit([(v2, "c", (3, "c", 30)), (v2, "u", (1, "A", 10), (1, "a", None))])
    materialize_delta(zone.root, out)
    assert read_delta(out / "s" / "t", order_by="id") == (
        ["id", "label", "qty"],
        [(1, "A", 10), (2, "b", None), (3, "c", 30)],
    )
    zone.commit([(v2, "d", (2, "b", None))])
    results = {r.table: r for r in materialize_delta(zone.root, out)}
    assert results["s.t"].action == "merged"
    assert read_delta(out / "s" / "t", order_by="id")[1] == [(1, "A", 10), (3, "c", 30)]


def test_replayed_batches_count_once(tmp_path: Path) -> None:
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    zone.commit([(ITEMS, "c", (1, "a")), (LOG, "c", (1, "x"))])
    zone.commit([(ITEMS, "u", (1, "b"), (1, "a")), (LOG, "c", (2, "y"))])
    check(zone, out)
    zone.replay([1, 2])
    results = check(zone, out)
    assert results["shop.log"].detail == "rebuilt: batch 3 replays transactions"
    assert outputs(out)["shop.log"] == [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]


def test_tables_without_rows_have_their_columns(tmp_path: Path) -> None:
    """A table created (or dropped and created again) without rows yet is an empty Delta
    table with the columns its create record gives; its first rows then merge in."""
    v1 = table("shop.t", int_col(0, "id", column_id=1), text_col(1, "name", column_id=2), key=[0])
    v2 = table("shop.t", int_col(0, "id", column_id=3), int_col(1, "qty", column_id=4), key=[0])
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    zone.commit([Ddl("create", "shop.t", version=v1)])
    results = check(zone, out)
    assert results["shop.t"].action == "built"
    assert read_delta(out / "shop" / "t") == (["id", "name"], [])

    zone.commit([(v1, "c", (1, "a"))])
    check(zone, out)
    zone.commit([Ddl("drop", "shop.t"), Ddl("create", "shop.t", version=v2)])
    results = check(zone, out)
    assert read_delta(out / "shop" / "t") == (["id", "qty"], [])
    zone.commit([(v2, "c", (5, 50))])
    results = check(zone, out)
    assert results["shop.t"].action == "merged"
    assert read_delta(out / "shop" / "t") == (["id", "qty"], [(5, 50)])


def test_every_table_name_gets_a_directory_of_its_own(tmp_path: Path) -> None:
    # a leading "_" was passed over as hidden, "a%2Fb" read back as "a/b" (and found no
    # rows), "a\\b" stopped the writer, and delta-rs decoded "%" escapes in its paths
    zone = awkward_zone(tmp_path / "landing")
    landed = {p.parent.relative_to(zone.root).as_posix() for p in zone.root.glob("*/*/*.parquet")}
    assert landed == set(AWKWARD_NAMES.values())
    out = tmp_path / "out"
    chosen = MaterializeOptions(deletion_vectors=_VECTORS["on"])
    results = materialize_delta(zone.root, out, options=chosen)
    where = {r.table: Path(r.path).relative_to(out).as_posix() for r in results}
    assert where == AWKWARD_NAMES
    got = {}
    for result in results:
        names, rows = read_delta(result.path)
        got[result.table] = sorted((dict(zip(names, r, strict=True)) for r in rows), key=repr)
    assert got == expected_tables(zone)
    assert all(len(rows) == 3 for rows in got.values())


def test_a_table_left_where_an_older_escaping_put_it_stops_the_run(tmp_path: Path) -> None:
    # before ":" was escaped, shop.a:b was built at shop/a:b; a run now builds shop/a~3Ab, and
    # the old table would stay as it was, never brought up to date
    v = table("shop.a:b", int_col(0, "id"), text_col(1, "name"), key=[0])
    zone = Zone(tmp_path / "landing")
    zone.commit([(v, "c", (1, "one"))])
    out = tmp_path / "out"
    materialize_delta(zone.root, out)
    (out / "shop" / "a~3Ab").rename(out / "shop" / "a:b")
    zone.commit([(v, "c", (2, "two"))])

    with pytest.raises(IntegrityError) as stopped:
        materialize_delta(zone.root, out)
    assert "the output of shop.a:b is at shop/a:b, but its directory is shop/a~3Ab now" in str(
        stopped.value
    )
    assert "move shop/a:b to shop/a~3Ab" in str(stopped.value)
    assert sorted(p.name for p in (out / "shop").iterdir()) == ["a:b"]  # nothing changed

    (out / "shop" / "a:b").rename(out / "shop" / "a~3Ab")  # as the hint says
    assert [r.action for r in materialize_delta(zone.root, out)] == ["merged"]
    names, rows = read_delta(out / "shop" / "a~3Ab")
    assert (names, sorted(rows)) == (["id", "name"], [(1, "one"), (2, "two")])


def test_a_datetime_column_after_the_first_build_turns_timestamp_ntz_on(tmp_path: Path) -> None:
    """A DATETIME column (Delta's timestamp_ntz) brought into a table built without one, by
    ADD COLUMN or by DROP and CREATE: the rebuild turns the feature timestampNtz on (reader
    version 3); its overwrite once committed the schema without it, and no reader loaded
    the table after, nor did any later run."""
    v1 = table("shop.t", int_col(0, "id", column_id=1), key=[0])
    v2 = table("shop.t", *v1.columns, col(1, T.DATETIME2, "d", column_id=2), key=[0])
    n1 = table("shop.n", int_col(0, "id", column_id=1), key=[0])
    n2 = table("shop.n", int_col(0, "id", column_id=3), col(1, T.DATETIME2, "d", column_id=4))
    n2 = table("shop.n", *n2.columns, key=[0])
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    options = MaterializeOptions(deletion_vectors=_VECTORS["on"])
    zone.commit([(v1, "c", (1,)), (n1, "c", (1,))])
    materialize_delta(zone.root, out, options=options)
    when = dt.datetime(2020, 1, 2, 3, 4, 5)
    zone.commit(
        [
            Ddl("alter", "shop.t", statement="ALTER TABLE t ADD COLUMN d DATETIME", version=v2),
            (v2, "c", (2, when)),
            Ddl("drop", "shop.n"),
            Ddl("create", "shop.n", statement="CREATE TABLE n (id INT, d DATETIME)", version=n2),
            (n2, "c", (5, when)),
        ]
    )
    results = materialize_delta(zone.root, out, options=options)
    assert [(r.table, r.action) for r in results] == [("shop.n", "built"), ("shop.t", "built")]
    for name in ("n", "t"):
        protocol = DeltaTable(str(out / "shop" / name)).protocol()
        assert (protocol.min_reader_version, protocol.reader_features) == (3, ["timestampNtz"])
    assert read_delta(out / "shop" / "t", order_by="id") == (["id", "d"], [(1, None), (2, when)])
    assert read_delta(out / "shop" / "n", order_by="id") == (["id", "d"], [(5, when)])

    later = dt.datetime(2021, 6, 7, 8, 9, 10)
    zone.commit([(v2, "u", (1, later), (1, None)), (n2, "c", (6, None))])
    results = materialize_delta(zone.root, out, options=options)
    assert [(r.table, r.action) for r in results] == [("shop.n", "merged"), ("shop.t", "merged")]
    want_t = (["id", "d"], [(1, later), (2, when)])
    want_n = (["id", "d"], [(5, when), (6, None)])
    assert read_delta(out / "shop" / "t", order_by="id") == want_t
    assert read_delta(out / "shop" / "n", order_by="id") == want_n
    written = DeltaTable(str(out / "shop" / "t"))  # delta-rs reads it too
    assert sorted(pa.table(written.scan().read_all()).to_pylist(), key=repr) == [
        {"id": 1, "d": later},
        {"id": 2, "d": when},
    ]
    features = {"timestampNtz", "deletionVectors"} if _VECTORS["on"] else {"timestampNtz"}
    assert set(written.protocol().reader_features or ()) == features
    full = tmp_path / "full"
    materialize_delta(zone.root, full, options=replace(options, full_refresh=True))
    assert read_delta(full / "shop" / "t", order_by="id") == want_t
    assert read_delta(full / "shop" / "n", order_by="id") == want_n
