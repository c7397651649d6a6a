"""``materialize --format delta --deletion-vectors``: a keyed table's batches applied by
deletion vectors (``delta.vectors``). The files holding touched keys stay as they are and
gain vectors; new versions go to new files; DuckDB's delta extension and delta-rs's own scan
(both independent of the writer) read exactly the rows the plain reference gives, batch
after batch, through checkpoints, rebuilds and ``--optimize``; a vector file that does not
match its descriptor stops the run."""

from __future__ import annotations

import itertools
import json
import random
import string
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from hypothesis import given
from hypothesis import strategies as st

from replicator.binlog.values import ABSENT
from replicator.delta import files as files_module
from replicator.delta import materialize as materialize_module
from replicator.delta import vectors
from replicator.delta.materialize import materialize_delta, optimize_delta
from replicator.errors import IntegrityError
from replicator.landed.batches import Landing
from replicator.landed.options import MaterializeOptions
from replicator.storage import LocalStore
from tests.delta.test_lifecycle import ITEMS, outputs
from tests.delta.test_object_store import tables_on
from tests.delta.test_partial_images import WIDE
from tests.delta.test_ranged_build import workload
from tests.delta.test_rewrite import THREE_FILES_TOUCHED, items_result, string_views
from tests.harness.duckdb_delta import read_delta
from tests.harness.s3 import S3Server
from tests.spark.zone import Ddl, Zone, expected_tables, table, text_col

pytestmark = pytest.mark.delta

VECTORS = MaterializeOptions(deletion_vectors=True)  # (also the default for new tables)


@pytest.fixture
def small_files(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files_module, "FILE_ROWS", 10)


def scanned(path: Path) -> list[tuple[object, ...]]:
    """The table as delta-rs's DataFusion scan reads it (it applies deletion vectors)."""
    rows = pa.table(DeltaTable(str(path)).scan().read_all()).to_pylist()
    return sorted(tuple(r.values()) for r in rows)


def vector_files(path: Path) -> list[Path]:
    return sorted(path.glob("deletion_vector_*.bin"))


def test_batches_mark_rows_deleted_and_leave_the_files(tmp_path: Path, small_files: None) -> None:
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    zone.commit([(ITEMS, "c", (i, f"n{i}")) for i in range(0, 200, 2)])
    materialize_delta(zone.root, out, options=VECTORS)
    items = out / "shop" / "items"
    before = set(DeltaTable(str(items)).file_uris())
    assert len(before) == 10
    assert vector_files(items) == []
    # the integer key delta-encoded (what a batch reads of every file it may touch)
    first = pq.read_metadata(next(iter(before)).removeprefix("file://"))
    assert "DELTA_BINARY_PACKED" in first.row_group(0).column(0).encodings
    assert "RLE_DICTIONARY" in first.row_group(0).column(1).encodings

    zone.commit(THREE_FILES_TOUCHED)
    result = items_result(zone, out, VECTORS)
    assert (result.action, result.rows) == ("merged", 100)
    table = DeltaTable(str(items))
    assert table.history(1)[0]["operation"] == "MERGE"
    # the one reader feature vectors need (readers refuse a table with one they lack)
    assert table.protocol().reader_features == ["deletionVectors"]
    assert table.protocol().writer_features == ["deletionVectors"]
    after = set(table.file_uris())
    assert before <= after  # no file rewritten
    assert len(after - before) == 1  # the new versions and new keys, in one new file
    assert len(vector_files(items)) == 1
    selections = pa.table(table.deletion_vectors().read_all()).to_pylist()
    assert sorted(r["selection_vector"].count(False) for r in selections) == [1, 1, 1]
    assert outputs(out) == expected_tables(zone)
    assert scanned(items) == sorted(
        (r["id"], r["name"]) for r in expected_tables(zone)["shop.items"]
    )

    for seed in (21, 22, 23):  # key moves, deletes and re-inserts, batch after batch
        workload(zone, seed)
        materialize_delta(zone.root, out, options=VECTORS)
        assert outputs(out) == expected_tables(zone)
    assert len(vector_files(items)) > 1
    assert DeltaTable(str(items)).history(1)[0]["operation"] == "MERGE"
    # the keyless table is applied by MERGE, without vectors
    assert "deletionVectors" not in (
        DeltaTable(str(out / "shop" / "log")).protocol().reader_features or []
    )

    # later runs without the flag go on with vectors: the table has them
    workload(zone, 24)
    materialize_delta(zone.root, out)
    assert outputs(out) == expected_tables(zone)
    assert DeltaTable(str(items)).history(1)[0]["operation"] == "MERGE"

    # --optimize rewrites the files without their deleted rows
    (done,) = (d for d in optimize_delta(out, retention_hours=0) if d.table == "shop.items")
    assert done.files_added >= 1
    assert pa.table(DeltaTable(str(items)).deletion_vectors().read_all()).num_rows == 0
    assert outputs(out) == expected_tables(zone)
    assert vector_files(items) == []  # vacuumed: no version within the retention uses them


def test_a_file_whose_rows_are_all_deleted_is_removed(tmp_path: Path, small_files: None) -> None:
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    zone.commit([(ITEMS, "c", (i, f"n{i}")) for i in range(20)])
    materialize_delta(zone.root, out, options=VECTORS)
    items = out / "shop" / "items"
    zone.commit([(ITEMS, "d", (i, f"n{i}")) for i in range(10)])
    result = items_result(zone, out, VECTORS)
    assert result.rows == 10
    table = DeltaTable(str(items))
    assert len(table.file_uris()) == 1
    assert pa.table(table.deletion_vectors().read_all()).num_rows == 0
    assert outputs(out) == expected_tables(zone)


def test_partial_images_read_their_columns_through_the_vectors(
    tmp_path: Path, small_files: None
) -> None:
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    zone.commit([(WIDE, "c", (i, f"a{i}", i * 10)) for i in range(30)])
    materialize_delta(zone.root, out, options=VECTORS)
    zone.commit([(WIDE, "u", (1, "one", 1), (1, "a1", 10))])  # a full image: a vector
    materialize_delta(zone.root, out, options=VECTORS)
    zone.commit(
        [
            (WIDE, "u", (ABSENT, "X", ABSENT), (1, ABSENT, ABSENT)),  # from the new file
            (WIDE, "u", (ABSENT, ABSENT, 7), (25, ABSENT, ABSENT)),
        ]
    )
    materialize_delta(zone.root, out, options=VECTORS)
    rows = read_delta(out / "shop" / "wide", order_by="id")[1]
    assert rows == [(i, {1: "X"}.get(i, f"a{i}"), {1: 1, 25: 7}.get(i, i * 10)) for i in range(30)]


def test_checkpoints_keep_the_vectors(
    tmp_path: Path, small_files: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(materialize_module, "_CHECKPOINT_EVERY", 2)
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    zone.commit([(ITEMS, "c", (i, f"n{i}")) for i in range(50)])
    materialize_delta(zone.root, out, options=VECTORS)
    items = out / "shop" / "items"
    for i in range(6):
        zone.commit([(ITEMS, "u", (i * 7, f"v{i}"), (i * 7, f"n{i * 7}"))])
        materialize_delta(zone.root, out, options=VECTORS)
        assert outputs(out) == expected_tables(zone)
    assert list((items / "_delta_log").glob("*.checkpoint.parquet"))
    version, live = vectors.live_files(LocalStore(items), "")
    assert version == DeltaTable(str(items)).version()
    assert {f.path for f in live.values()} == {
        u.rsplit("/", 1)[-1] for u in DeltaTable(str(items)).file_uris()
    }
    # keys 0 and 7, 14, 21 and 28, 35: four files of ten rows hold them
    assert sum(1 for f in live.values() if f.vector) == 4
    assert pa.table(DeltaTable(str(items)).deletion_vectors().read_all()).num_rows == 4


def _thirty_rows_and_a_batch(tmp_path: Path, deleted: int) -> tuple[Zone, Path]:
    """A table of 30 rows, then a batch applied with vectors: key 3 updated, ``deleted``
    deleted."""
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    zone.commit([(ITEMS, "c", (i, f"n{i}")) for i in range(30)])
    materialize_delta(zone.root, out, options=VECTORS)
    zone.commit([(ITEMS, "u", (3, "three"), (3, "n3")), (ITEMS, "d", (deleted, f"n{deleted}"))])
    materialize_delta(zone.root, out, options=VECTORS)
    return zone, out


def test_a_truncated_table_is_rebuilt_with_its_new_rows(tmp_path: Path, small_files: None) -> None:
    zone, out = _thirty_rows_and_a_batch(tmp_path, deleted=17)
    assert vector_files(out / "shop" / "items")
    zone.commit([Ddl("truncate", "shop.items"), (ITEMS, "c", (1, "again"))])
    materialize_delta(zone.root, out, options=VECTORS)
    assert outputs(out) == expected_tables(zone)
    assert scanned(out / "shop" / "items") == [(1, "again")]


def test_a_vector_that_fails_its_checksum_stops_the_run(tmp_path: Path, small_files: None) -> None:
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    zone.commit([(ITEMS, "c", (i, f"n{i}")) for i in range(30)])
    materialize_delta(zone.root, out, options=VECTORS)
    zone.commit([(ITEMS, "u", (3, "three"), (3, "n3"))])
    materialize_delta(zone.root, out, options=VECTORS)
    items = out / "shop" / "items"
    (found,) = vector_files(items)
    blob = bytearray(found.read_bytes())
    blob[-6] ^= 0x40  # a bit of the vector's bitmap
    found.write_bytes(bytes(blob))
    version = DeltaTable(str(items)).version()
    zone.commit([(ITEMS, "u", (4, "four"), (4, "n4"))])
    with pytest.raises(IntegrityError, match=r"deletion vector of part-.* fails its checksum"):
        materialize_delta(zone.root, out, options=VECTORS)
    assert DeltaTable(str(items)).version() == version  # nothing committed


def test_a_commit_never_replaces_a_version(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    (tmp_path / "t" / "_delta_log").mkdir(parents=True)
    info = {"replicator": "{}"}
    vectors.commit(store, "t", 0, [], app="a", batch=1, info=info)
    first = (tmp_path / "t" / "_delta_log" / f"{0:020d}.json").read_bytes()
    with pytest.raises(FileExistsError):
        vectors.commit(store, "t", 0, [], app="b", batch=2, info=info)
    assert (tmp_path / "t" / "_delta_log" / f"{0:020d}.json").read_bytes() == first
    assert [p.name for p in (tmp_path / "t" / "_delta_log").iterdir()] == [f"{0:020d}.json"]
    lines = [json.loads(line) for line in first.splitlines()]
    assert lines[1] == {
        "txn": {"appId": "a", "version": 1, "lastUpdated": lines[1]["txn"]["lastUpdated"]}
    }


def test_batches_on_an_object_store_use_vectors(
    s3_env: S3Server, tmp_path: Path, small_files: None
) -> None:
    bucket = s3_env.bucket("vectors")
    out = f"s3://{bucket}/tables"
    zone = Zone(tmp_path / "landing")
    zone.commit([(ITEMS, "c", (i, f"n{i}")) for i in range(40)])
    materialize_delta(zone.root, out, options=VECTORS)
    zone.commit(
        [(ITEMS, "u", (3, "three"), (3, "n3")), (ITEMS, "d", (25, "n25")), (ITEMS, "c", (99, "x"))]
    )
    (result,) = materialize_delta(zone.root, out, options=VECTORS)
    assert (result.action, result.rows) == ("merged", 40)
    copy = tmp_path / "copy"
    assert tables_on(s3_env, bucket, "tables", copy) == expected_tables(zone)
    assert DeltaTable(str(copy / "shop" / "items")).history(1)[0]["operation"] == "MERGE"
    assert len(vector_files(copy / "shop" / "items")) == 1


# ------------------------------------------------------------------------------ the format


def test_z85_matches_the_reference_vector() -> None:
    # the example of the Z85 specification (ZeroMQ RFC 32)
    raw = bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B])
    assert vectors._z85(raw) == "HelloWorld"
    assert vectors._unz85("HelloWorld") == raw


@given(st.sets(st.integers(0, (1 << 32) - 1), max_size=300))
def test_a_vector_decodes_to_its_rows(rows: set[int]) -> None:
    positions = np.array(sorted(rows), dtype=np.int64)
    data = vectors.encode(positions)
    assert data[:4] == (1681511377).to_bytes(4, "little")
    assert vectors.decode(data, "v").tolist() == positions.tolist()


def test_a_vector_of_rows_past_32_bits_decodes_them() -> None:
    from pyroaring import BitMap

    low, high = BitMap([1, 2]).serialize(), BitMap([3]).serialize()
    data = (
        (1681511377).to_bytes(4, "little")
        + (2).to_bytes(8, "little")
        + (0).to_bytes(4, "little")
        + low
        + (1).to_bytes(4, "little")
        + high
    )
    assert vectors.decode(data, "v").tolist() == [1, 2, (1 << 32) + 3]
    with pytest.raises(IntegrityError, match="holds"):
        vectors.decode(data + b"\0", "v")
    with pytest.raises(IntegrityError, match="magic"):
        vectors.decode(b"\0" * 16, "v")
    with pytest.raises(IntegrityError, match="malformed"):
        vectors.decode(data[:-3], "v")  # a bitmap cut short
    with pytest.raises(IntegrityError, match="malformed"):
        vectors.decode(data[:12].replace(b"\x02", b"\x07", 1) + data[12:], "v")  # 7 halves


def test_a_batch_left_to_the_merge_reads_the_table_through_its_vectors(
    tmp_path: Path, small_files: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch ``locate`` leaves to the MERGE (a key value that is null, say) on a table with
    vectors: the rows it folds with are read through the vectors (pyarrow's dataset refuses
    such a table), and delta-rs's MERGE keeps the deleted rows deleted."""
    zone, out = _thirty_rows_and_a_batch(tmp_path, deleted=12)
    assert pa.table(DeltaTable(str(out / "shop" / "items")).deletion_vectors().read_all()).num_rows
    monkeypatch.setattr(materialize_module, "locate", lambda *args: None)
    zone.commit(
        [
            (ITEMS, "u", (3, "again"), (3, "three")),  # its row is in the new file
            (ITEMS, "u", (4, "four"), (4, "n4")),  # in a file with a vector
            (ITEMS, "c", (12, "back")),  # deleted by a vector, inserted again
        ]
    )
    result = items_result(zone, out, VECTORS)
    assert (result.action, result.rows) == ("merged", 30)
    assert outputs(out) == expected_tables(zone)
    assert scanned(out / "shop" / "items") == sorted(
        (r["id"], r["name"]) for r in expected_tables(zone)["shop.items"]
    )


def _noise(seed: int) -> str:
    """600 letters that do not compress."""
    return "".join(random.Random(seed).choices(string.ascii_letters, k=600))


def test_small_files_of_batches_are_compacted_as_they_gather(
    tmp_path: Path, small_files: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(materialize_module, "_SMALL_FILES", 4)
    monkeypatch.setattr(materialize_module, "_SMALL_BYTES", 4096)
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    zone.commit([(ITEMS, "c", (i, _noise(i))) for i in range(40)])  # files over 4 KB
    materialize_delta(zone.root, out, options=VECTORS)
    items = out / "shop" / "items"
    built = {u for u in DeltaTable(str(items)).file_uris()}
    counts = []
    values = {i: _noise(i) for i in range(40)}
    for i in range(8):
        # keys 0, 5, 10, 15, then the same again: their rows then lie in the batches' own
        # files (vectors on small files, compacted through them)
        key = i % 4 * 5
        zone.commit([(ITEMS, "u", (key, f"v{i}"), (key, values[key]))])
        values[key] = f"v{i}"
        materialize_delta(zone.root, out, options=VECTORS)
        assert outputs(out) == expected_tables(zone)
        files = set(DeltaTable(str(items)).file_uris())
        counts.append(len(files - built))  # the batches' own files
        assert built <= files  # the large files are never compacted
    # a fourth small file makes them fewer (files of up to 4 KB); never four at the end of
    # a run
    assert counts[:3] == [1, 2, 3]
    assert max(counts) == 3
    assert any(later < earlier for earlier, later in itertools.pairwise(counts))
    assert "OPTIMIZE" in [c["operation"] for c in DeltaTable(str(items)).history(20)]
    assert (
        DeltaTable(str(items)).transaction_version(
            materialize_module.app_id(Landing.read(zone.root))
        )
        == 9
    )


def test_a_batch_that_deletes_every_row_leaves_an_empty_table(tmp_path: Path) -> None:
    """The last rows deleted: every file is removed, and the small files counted for a
    compaction are none (their count was null, and the run stopped on it)."""
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    items = out / "shop" / "items"
    zone.commit([(ITEMS, "c", (1, "one")), (ITEMS, "c", (2, "two"))])
    materialize_delta(zone.root, out, options=VECTORS)
    zone.commit([(ITEMS, "d", (1, "one")), (ITEMS, "d", (2, "two"))])
    result = items_result(zone, out, VECTORS)
    assert (result.action, result.rows) == ("merged", 0)
    assert DeltaTable(str(items)).file_uris() == []
    assert read_delta(items) == (["id", "name"], [])
    assert scanned(items) == []
    zone.commit([(ITEMS, "c", (3, "three"))])
    result = items_result(zone, out, VECTORS)
    assert (result.action, result.rows) == ("merged", 1)
    assert read_delta(items) == (["id", "name"], [(3, "three")])
    assert scanned(items) == [(3, "three")]


def test_a_text_key_reads_back_the_files_the_merge_wrote(tmp_path: Path) -> None:
    """A table built and merged without vectors (delta-rs's MERGE stores text as string_view
    in the Arrow schema of the files it writes) and then given vectors: a batch finds its
    keys in those files in the table's types (pyarrow's join refuses string_view keys)."""
    keyed = table("shop.k", text_col(0, "id"), text_col(1, "v"), key=[0])
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    path = out / "shop" / "k"
    copy = MaterializeOptions(deletion_vectors=False)
    zone.commit([(keyed, "c", ("abc", "one")), (keyed, "c", ("abd", "x"))])
    materialize_delta(zone.root, out, options=copy)
    zone.commit([(keyed, "u", ("abc", "two"), ("abc", "one"))])
    materialize_delta(zone.root, out, options=copy)
    assert string_views(path) == 1  # the one file, delta-rs's
    zone.commit([(keyed, "u", ("abc", "three"), ("abc", "two")), (keyed, "c", ("abe", "new"))])
    (result,) = materialize_delta(zone.root, out, options=VECTORS)
    assert (result.action, result.rows) == ("merged", 3)
    assert pa.table(DeltaTable(str(path)).deletion_vectors().read_all()).num_rows == 1
    want = [("abc", "three"), ("abd", "x"), ("abe", "new")]
    assert read_delta(path, order_by="id") == (["id", "v"], want)
    assert scanned(path) == want
