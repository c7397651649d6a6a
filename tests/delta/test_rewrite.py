"""Without deletion vectors (``--no-deletion-vectors``), a batch whose keys lie in large
files is applied file by file (``delta.rewrite``) instead of by a MERGE: with tiny files and
the threshold at one row, batches that move rows between keys, delete and insert give
exactly what the plain reference gives, each file keeps its key order, the files holding no
touched key are kept as they are, and partial row images take the columns they lack from
the earlier rows (or stop, with nothing applied)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from replicator.binlog.values import ABSENT
from replicator.delta import files as files_module
from replicator.delta import materialize as materialize_module
from replicator.delta.materialize import materialize_delta
from replicator.errors import IntegrityError
from replicator.landed.options import MaterializeOptions, TableResult
from tests.delta.test_lifecycle import ITEMS, outputs
from tests.delta.test_object_store import tables_on
from tests.delta.test_partial_images import WIDE
from tests.delta.test_ranged_build import workload
from tests.harness.duckdb_delta import read_delta
from tests.harness.s3 import S3Server
from tests.spark.zone import Zone, expected_tables, table, text_col

pytestmark = pytest.mark.delta

COPY = MaterializeOptions(deletion_vectors=False)  # copy-on-write, not deletion vectors


@pytest.fixture
def small_files(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files_module, "FILE_ROWS", 10)
    monkeypatch.setattr(materialize_module, "REWRITE_FROM_ROWS", 1)


# for a table of the even keys 0..198 in ten files: a key updated, one deleted, one moved to a
# new key, all in three of the files, and a new key
THREE_FILES_TOUCHED = [
    (ITEMS, "u", (4, "four"), (4, "n4")),
    (ITEMS, "d", (62, "n62")),
    (ITEMS, "u", (301, "moved"), (150, "n150")),
    (ITEMS, "c", (5, "new")),
]


def items_result(zone: Zone, out: Path, options: MaterializeOptions) -> TableResult:
    """Materialize ``zone`` into ``out``: the result for shop.items."""
    (result,) = (
        r for r in materialize_delta(zone.root, out, options=options) if r.table == "shop.items"
    )
    return result


def keys_by_file(path: Path) -> dict[str, list[int]]:
    return {
        u: pq.read_table(u.removeprefix("file://"), columns=["id"])["id"].to_pylist()
        for u in DeltaTable(str(path)).file_uris()
    }


def test_batches_over_many_files_give_the_reference_rows(tmp_path: Path, small_files: None) -> None:
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    zone.commit([(ITEMS, "c", (i, f"n{i}")) for i in range(0, 200, 2)])
    materialize_delta(zone.root, out, options=COPY)
    items = out / "shop" / "items"
    before = keys_by_file(items)
    assert len(before) == 10

    zone.commit(THREE_FILES_TOUCHED)
    result = items_result(zone, out, COPY)
    assert (result.action, result.rows) == ("merged", 100)
    assert DeltaTable(str(items)).history(1)[0]["operation"] == "WRITE"
    assert outputs(out) == expected_tables(zone)
    after = keys_by_file(items)
    kept = {u for u in before if u in after}
    assert len(kept) == 7  # the files without a touched key are not rewritten
    assert all(after[u] == before[u] for u in kept)
    assert all(keys == sorted(keys) for keys in after.values())
    assert sorted(after[u] for u in after if u not in kept) == [
        [0, 2, 4, 6, 8, 10, 12, 14, 16, 18],
        [5, 301],  # the new keys, in a file of their own
        [60, 64, 66, 68, 70, 72, 74, 76, 78],
        [140, 142, 144, 146, 148, 152, 154, 156, 158],
    ]

    for seed in (21, 22, 23):  # key moves, deletes and re-inserts, batch after batch
        workload(zone, seed)
        materialize_delta(zone.root, out, options=COPY)
        assert outputs(out) == expected_tables(zone)


def test_partial_images_take_their_other_columns_from_the_files(
    tmp_path: Path, small_files: None
) -> None:
    zone = Zone(tmp_path / "landing")
    out, lenient = tmp_path / "out", tmp_path / "lenient"
    options = MaterializeOptions(allow_unknown=True, deletion_vectors=False)
    zone.commit([(WIDE, "c", (i, f"a{i}", i * 10)) for i in range(30)])
    materialize_delta(zone.root, out, options=COPY)
    materialize_delta(zone.root, lenient, options=options)
    zone.commit(
        [
            (WIDE, "u", (ABSENT, "X", ABSENT), (1, ABSENT, ABSENT)),
            (WIDE, "u", (ABSENT, ABSENT, 7), (25, ABSENT, ABSENT)),
            (WIDE, "u", (12, "full", 0), (12, "a12", 120)),  # needs no earlier row
        ]
    )
    (result,) = materialize_delta(zone.root, out, options=COPY)
    assert result.action == "merged"
    wide = out / "shop" / "wide"
    assert DeltaTable(str(wide)).history(1)[0]["operation"] == "WRITE"
    rows = read_delta(wide, order_by="id")[1]
    assert rows == [
        (i, {1: "X", 12: "full"}.get(i, f"a{i}"), {25: 7, 12: 0}.get(i, i * 10)) for i in range(30)
    ]
    materialize_delta(zone.root, lenient, options=options)
    assert read_delta(lenient / "shop" / "wide", order_by="id")[1] == [(*r, []) for r in rows]

    zone.commit(
        [
            (WIDE, "u", (ABSENT, "Y", ABSENT), (2, ABSENT, ABSENT)),
            (WIDE, "u", (ABSENT, "seen", ABSENT), (77, ABSENT, ABSENT)),  # row 77 unseen
        ]
    )
    with pytest.raises(IntegrityError, match=r'the row with key \{"id": 77\} has columns no row'):
        materialize_delta(zone.root, out, options=COPY)
    assert read_delta(wide, order_by="id")[1] == rows  # nothing applied

    materialize_delta(zone.root, lenient, options=options)
    assert DeltaTable(str(lenient / "shop" / "wide")).history(1)[0]["operation"] == "WRITE"
    found = read_delta(lenient / "shop" / "wide", order_by="id")[1]
    assert found == [
        *[(*r, []) for r in rows[:2]],
        (2, "Y", 20, []),
        *[(*r, []) for r in rows[3:]],
        (77, "seen", None, ["b"]),
    ]


def test_a_batch_on_an_object_store_is_rewritten_file_by_file(
    s3_env: S3Server, tmp_path: Path, small_files: None
) -> None:
    bucket = s3_env.bucket("rewritten")
    out = f"s3://{bucket}/tables"
    zone = Zone(tmp_path / "landing")
    zone.commit([(ITEMS, "c", (i, f"n{i}")) for i in range(40)])
    materialize_delta(zone.root, out, options=COPY)
    zone.commit(
        [
            (ITEMS, "u", (3, "three"), (3, "n3")),
            (ITEMS, "d", (25, "n25")),
            (ITEMS, "c", (99, "new")),
        ]
    )
    (result,) = materialize_delta(zone.root, out, options=COPY)
    assert (result.action, result.rows) == ("merged", 40)
    assert tables_on(s3_env, bucket, "tables", tmp_path / "copy") == expected_tables(zone)
    copied = DeltaTable(str(tmp_path / "copy" / "shop" / "items"))
    assert copied.history(1)[0]["operation"] == "WRITE"
    assert len(copied.file_uris()) == 5  # two files rewritten, one for the new key


TEXT_KEYED = table("shop.k", text_col(0, "id"), text_col(1, "v"), key=[0])


def string_views(path: Path) -> int:
    """The table's files whose stored Arrow schema gives the key as string_view."""
    return sum(
        pq.read_schema(u.removeprefix("file://")).field("id").type == pa.string_view()
        for u in DeltaTable(str(path)).file_uris()
    )


def test_a_text_key_reads_back_the_files_the_merge_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """delta-rs's MERGE writes text as string_view in the Arrow schema it stores with each
    file; a later batch reads those files' keys back (to find its keys, to fold with their
    rows, to rewrite them) in the table's types: pyarrow joins and filters on text keys
    refuse string_view (the third batch stopped)."""
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    path = out / "shop" / "k"
    zone.commit([(TEXT_KEYED, "c", ("abc", "one")), (TEXT_KEYED, "c", ("abd", "x"))])
    materialize_delta(zone.root, out, options=COPY)
    zone.commit([(TEXT_KEYED, "u", ("abc", "two"), ("abc", "one"))])
    materialize_delta(zone.root, out, options=COPY)
    assert string_views(path) == 1
    zone.commit(
        [(TEXT_KEYED, "u", ("abc", "three"), ("abc", "two")), (TEXT_KEYED, "c", ("abe", "new"))]
    )
    (result,) = materialize_delta(zone.root, out, options=COPY)
    assert (result.action, result.rows) == ("merged", 3)
    assert DeltaTable(str(path)).history(1)[0]["operation"] == "MERGE"
    want = [("abc", "three"), ("abd", "x"), ("abe", "new")]
    assert read_delta(path, order_by="id") == (["id", "v"], want)

    monkeypatch.setattr(materialize_module, "REWRITE_FROM_ROWS", 1)  # file by file now
    assert string_views(path) >= 1
    zone.commit([(TEXT_KEYED, "u", ("abd", "y"), ("abd", "x")), (TEXT_KEYED, "d", ("abe", "new"))])
    (result,) = materialize_delta(zone.root, out, options=COPY)
    assert (result.action, result.rows) == ("merged", 2)
    assert DeltaTable(str(path)).history(1)[0]["operation"] == "WRITE"
    assert read_delta(path, order_by="id") == (["id", "v"], [("abc", "three"), ("abd", "y")])
    assert outputs(out) == expected_tables(zone)
