"""``materialize --format delta`` refuses inputs that pass its cheap checks but are not what
was committed, rather than building from them (exit 4, nothing changed):

* a committed data file replaced by a copy of another committed file of the same size (the
  size check passes, and only ``verify --deep`` and the newest batches at a start hash): the
  ``_seq`` of the rows read lie outside the manifest entry's range, or their number is not
  its ``rows``; the same for a slice of a compaction output;
* a Delta log whose app transaction was edited to a later batch than the one its commit's
  own record names: which batches the table holds is then unknown, and an incremental run
  would take the batches in between as applied.

A record written before records carried the batch still has its number checked alone."""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from deltalake import DeltaTable

from replicator.cli import main
from replicator.delta.changes import read_committed, replayed, scan_lineage
from replicator.delta.materialize import materialize_delta
from replicator.errors import IntegrityError
from replicator.landed.batches import Landing
from replicator.landed.committed import CommittedFile, read_manifests
from replicator.landed.lineage import Lineage
from replicator.landed.options import MaterializeOptions
from replicator.sink import compaction as cp
from replicator.storage import LocalStore
from tests.delta.test_lifecycle import outputs
from tests.spark.zone import Zone, expected_tables, int_col, table, text_col

pytestmark = pytest.mark.delta

ITEMS = table("shop.items", int_col(0, "id"), text_col(1, "name"), key=[0])
LOG = table("shop.log", int_col(0, "a"), text_col(1, "b"))  # no primary key: copies show


def _materialize(zone: Zone, out: Path, *extra: str) -> tuple[int, str]:
    args = ["--format", "delta", "--landing", str(zone.root), "--out", str(out), *extra]
    result = CliRunner().invoke(main, ["materialize", *args])
    return result.exit_code, result.output


def _file_of(zone: Zone, batch: int) -> CommittedFile:
    (found,) = [f for m in read_manifests(zone.root).manifests if m.batch == batch for f in m.files]
    return found


def _copy_over(zone: Zone, source: int, target: int) -> tuple[Path, bytes]:
    """Batch ``source``'s file copied over batch ``target``'s (of the same size); returns
    the path replaced and its original bytes."""
    old, new = Path(_file_of(zone, source).path), Path(_file_of(zone, target).path)
    assert old.stat().st_size == new.stat().st_size
    original = new.read_bytes()
    shutil.copyfile(old, new)
    return new, original


# ------------------------------------------------------------------ committed data files


def test_a_same_size_copy_of_another_batchs_file_stops_a_build(tmp_path: Path) -> None:
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    for b in range(1, 5):
        zone.commit([(LOG, "c", (b, "x"))])
    path, original = _copy_over(zone, 1, 2)  # batch 2's file now holds batch 1's row

    with pytest.raises(IntegrityError, match=r"\(batch 2\) holds 1 row, _seq 1\.\.1; its") as e:
        materialize_delta(zone.root, out, options=MaterializeOptions())
    assert str(path) in str(e.value)
    assert "verify --deep" in (e.value.hint or "")
    assert not DeltaTable.is_deltatable(str(out / "shop" / "log"))  # nothing built
    code, text = _materialize(zone, out)
    assert code == 4, text
    assert path.name in text

    path.write_bytes(original)  # restored from a backup
    materialize_delta(zone.root, out, options=MaterializeOptions())
    assert outputs(out) == expected_tables(zone)


@pytest.mark.parametrize("vectors", [False, True], ids=["merge", "vectors"])
def test_a_same_size_copy_stops_an_incremental_run(tmp_path: Path, vectors: bool) -> None:
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    options = MaterializeOptions(deletion_vectors=vectors)
    for b in range(1, 4):
        zone.commit([(ITEMS, "c", (b, "x"))])
    materialize_delta(zone.root, out, options=options)
    built = outputs(out)
    version = DeltaTable(str(out / "shop" / "items")).version()
    for b in range(4, 6):
        zone.commit([(ITEMS, "c", (b, "x"))])
    path, original = _copy_over(zone, 4, 5)  # batch 5's row never read, batch 4's twice

    with pytest.raises(IntegrityError, match=r"\(batch 5\) holds 1 row, _seq 4\.\.4; its"):
        materialize_delta(zone.root, out, options=options)
    assert outputs(out) == built
    assert DeltaTable(str(out / "shop" / "items")).version() == version

    path.write_bytes(original)
    materialize_delta(zone.root, out, options=options)
    assert outputs(out) == expected_tables(zone)


def _zone_of_four(root: Path) -> Zone:
    zone = Zone(root)
    for b in range(1, 5):
        zone.commit([(ITEMS, "c", (b * 10 + i, f"b{b}")) for i in range(b)])  # b rows
    return zone


def _tampered(
    files: Sequence[CommittedFile],
    batch: int,
    *,
    rows: int | None = None,
    first_seq: int | None = None,
    last_seq: int | None = None,
) -> list[CommittedFile]:
    """``files`` with batch ``batch``'s entry saying other ``rows`` or another range."""

    def edited(item: CommittedFile) -> CommittedFile:
        return dataclasses.replace(
            item,
            rows=item.rows if rows is None else rows,
            first_seq=item.first_seq if first_seq is None else first_seq,
            last_seq=item.last_seq if last_seq is None else last_seq,
        )

    return [edited(f) if f.batch == batch else f for f in files]


def test_a_whole_file_read_checks_the_entrys_rows_and_range(tmp_path: Path) -> None:
    zone = _zone_of_four(tmp_path / "landing")
    files = list(Landing.read(zone.root).files)
    assert all(f.within is None for f in files)
    assert read_committed(files).num_rows == 10
    entry = _file_of(zone, 3)
    assert entry.first_seq is not None

    with pytest.raises(IntegrityError, match=r"\(batch 3\) holds 3 rows, .*says 4 rows"):
        read_committed(_tampered(files, 3, rows=4))
    with pytest.raises(IntegrityError, match=r"\(batch 3\) holds 3 rows, .*says 3 rows"):
        read_committed(_tampered(files, 3, first_seq=entry.first_seq + 1))
    with pytest.raises(IntegrityError, match=r"committed file .* \(batch 2\)"):
        replayed(_tampered(files, 2, rows=1), {2})  # the replay check reads the files too


def test_a_slice_of_a_compaction_output_checks_the_entrys_rows(tmp_path: Path) -> None:
    zone = _zone_of_four(tmp_path / "landing")
    result = cp.run_compaction(
        LocalStore(zone.root), cp.Settings(older_than=0.0, target_bytes=1 << 30, retention=0.0)
    )
    assert result.merged == 4
    landing = Landing.read(zone.root)
    files = list(landing.files)
    assert all(f.within is not None for f in files)
    assert read_committed(files).num_rows == 10
    target = landing.table("shop.items")
    assert isinstance(target, Lineage)
    scan = scan_lineage(target, files, landing.rereading, MaterializeOptions())
    assert scan is not None
    assert sum(p.num_rows for p in scan.parts()) == 10

    fewer = _tampered(files, 2, rows=1)
    with pytest.raises(IntegrityError, match=r"slice of compaction output .* \(batch 2\) holds 2"):
        read_committed(fewer)
    scan = scan_lineage(target, fewer, landing.rereading, MaterializeOptions())
    assert scan is not None
    with pytest.raises(IntegrityError, match=r"\(batch 2\) holds 2 rows, .*says 1 row,"):
        list(scan.parts())
    entry = next(f for f in files if f.batch == 3)
    assert entry.last_seq is not None
    with pytest.raises(IntegrityError, match=r"\(batch 3\) holds 3 rows"):
        read_committed(_tampered(files, 3, last_seq=entry.last_seq - 1))
    with pytest.raises(IntegrityError, match=r"compaction output .* \(batch 4\)"):
        replayed(_tampered(files, 4, rows=5), {4})


# ------------------------------------------------------------------------- the Delta log


def _edit_last_commit(out: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """Apply ``edit`` (a function of one action, in place) to every action of the newest
    log entry of ``out``'s shop.items."""
    log = out / "shop" / "items" / "_delta_log"
    last = sorted(log.glob("*.json"))[-1]
    actions = [json.loads(line) for line in last.read_text().splitlines()]
    for action in actions:
        edit(action)
    last.write_text("".join(json.dumps(a) + "\n" for a in actions))


def test_an_app_transaction_edited_past_the_commits_record_stops_the_run(tmp_path: Path) -> None:
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    for b in range(1, 4):
        zone.commit([(ITEMS, "c", (b, "x"))])
    materialize_delta(zone.root, out, options=MaterializeOptions())
    zone.commit([(ITEMS, "c", (4, "x"))])

    def later(action: dict[str, Any]) -> None:
        if "txn" in action:
            action["txn"]["version"] = 4  # the commit's own record still says batch 3

    _edit_last_commit(out, later)
    built = outputs(out)
    version = DeltaTable(str(out / "shop" / "items")).version()
    with pytest.raises(IntegrityError, match=r"holds batches up to 4 by its app") as e:
        materialize_delta(zone.root, out, options=MaterializeOptions())
    assert str(out / "shop" / "items") in str(e.value)
    assert "records batch 3" in str(e.value)
    assert "--full-refresh" in (e.value.hint or "")
    assert outputs(out) == built
    assert DeltaTable(str(out / "shop" / "items")).version() == version
    code, text = _materialize(zone, out)
    assert code == 4, text

    code, text = _materialize(zone, out, "--full-refresh")  # the way out
    assert code == 0, text
    assert outputs(out) == expected_tables(zone)


def test_a_record_without_a_batch_has_its_number_checked_alone(tmp_path: Path) -> None:
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    for b in range(1, 4):
        zone.commit([(ITEMS, "c", (b, "x"))])
    materialize_delta(zone.root, out, options=MaterializeOptions())

    def older(action: dict[str, Any]) -> None:
        if "commitInfo" in action:  # as an older replicator recorded it
            record = json.loads(str(action["commitInfo"]["replicator"]))
            del record["batch"], record["batch_mark"]
            action["commitInfo"]["replicator"] = json.dumps(record)

    _edit_last_commit(out, older)
    zone.commit([(ITEMS, "c", (4, "x"))])
    (result,) = materialize_delta(zone.root, out, options=MaterializeOptions())
    assert result.action == "merged"
    assert outputs(out) == expected_tables(zone)
