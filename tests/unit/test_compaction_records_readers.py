"""The committed-file readers (``landed.committed``) trust no compaction record the manifests
contradict, and take no file gone for one still being published.

A record gives each manifest entry an output replaces as it was when merged (path, table, rows,
``_seq`` range), and readers work out the entry's slice of the output from it: a record that
says otherwise than the manifest (edited, or restored from another backup) stops them, naming
the record, the batch and the entry, where it would have them read one batch's rows for
another's. On a directory a file of a committed batch that is neither in place nor under its
staged name is gone (a commit being published has it under that name): when the newest record
was lost after retention deleted what it merged, the readers stop naming that record, as the
compactor and the daemon's start do, instead of waiting for a publication that never comes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from replicator.config import SinkConfig
from replicator.errors import IntegrityError
from replicator.landed.committed import committed_files, read_manifests
from replicator.landed.compacted import read_records, record_key
from replicator.sink import compaction as cp
from replicator.sink.landing import LandingZone
from replicator.storage import LocalStore
from tests.unit.test_compaction import Zone, _rows, _settings


def _compacted(root: Path, batches: int = 4, retention: float = 0.0) -> Zone:
    """``batches`` batches of three rows of db.t, merged into one output by record 1."""
    zone = Zone(root)
    for _ in range(batches):
        zone.add({"db.t": 3})
    result = cp.run_compaction(LocalStore(root), _settings(retention=retention))
    assert (result.record, result.outputs, result.merged) == (1, 1, batches)
    return zone


def _edit(root: Path, number: int, change: dict[int, dict[str, int]]) -> None:
    """Record ``number`` with ``change`` (replaced file index -> field -> added) applied to
    its only output's ``replaces``: still a record that adds up (rows, order, range)."""
    path = root / record_key(number)
    record = json.loads(path.read_text())
    replaces: list[dict[str, Any]] = record["outputs"][0]["replaces"]
    for index, fields in change.items():
        for name, added in fields.items():
            replaces[index][name] += added
    path.write_text(json.dumps(record, indent=1) + "\n")
    read_records(LocalStore(root))  # the record itself is still well-formed


BOUNDARY = {1: {"last_seq": 1}, 2: {"first_seq": 1}}  # batch 2's entry ends one _seq later
ROWS = {1: {"rows": 1}, 2: {"rows": -1}}  # a row of batch 3 said to be batch 2's


@pytest.mark.parametrize("retention", [0.0, 86400.0])
@pytest.mark.parametrize("change", [BOUNDARY, ROWS], ids=["boundary", "rows"])
def test_a_record_that_contradicts_a_manifest_entry_stops_every_read(
    tmp_path: Path, change: dict[int, dict[str, int]], retention: float
) -> None:
    root = tmp_path
    _compacted(root, retention=retention)
    _edit(root, 1, change)
    entry = json.loads((root / "_manifests" / f"{2:020d}.json").read_text())["files"][0]
    pattern = rf"compaction record .*{record_key(1)} does not match .* batch 2's manifest"
    with pytest.raises(IntegrityError, match=pattern) as caught:
        read_manifests(root)
    assert entry["path"] in str(caught.value)
    assert record_key(1) in (caught.value.hint or "")
    with pytest.raises(IntegrityError, match=pattern):
        committed_files(root)
    # an incremental read after batch 2 reads batch 3's slice, whose start moved
    with pytest.raises(IntegrityError, match=r"does not match .* batch 3's manifest"):
        committed_files(root, after=2)
    # batch 4's entry is as the manifest says: a read of it alone is not affected
    assert [m.batch for m in read_manifests(root, after=3).manifests] == [4]


@pytest.mark.parametrize("change", [BOUNDARY, ROWS], ids=["boundary", "rows"])
def test_the_daemons_start_refuses_a_record_that_contradicts_a_manifest(
    tmp_path: Path, change: dict[int, dict[str, int]]
) -> None:
    root = tmp_path
    _compacted(root, retention=86400.0)
    _edit(root, 1, change)
    with pytest.raises(IntegrityError, match=rf"{record_key(1)} replaces .* not a committed, live"):
        LandingZone(SinkConfig(root=str(root))).recover()


def test_an_edited_record_is_found_after_its_output_was_merged_again(tmp_path: Path) -> None:
    root = tmp_path
    zone = _compacted(root)
    zone.add({"db.t": 3})
    zone.add({"db.t": 3})
    result = cp.run_compaction(LocalStore(root), _settings(retention=0.0))
    assert (result.record, result.outputs) == (2, 1)
    _edit(root, 1, BOUNDARY)
    with pytest.raises(IntegrityError, match=rf"{record_key(1)} does not match .* batch 2's"):
        committed_files(root)


def test_a_record_as_written_is_read(tmp_path: Path) -> None:
    root = tmp_path
    zone = Zone(root)
    for _ in range(4):
        zone.add({"db.t": 3})
    before = _rows(root)
    cp.run_compaction(LocalStore(root), _settings(retention=0.0))
    assert _rows(root) == before
    assert _rows(root, after=2)["db.t"] == before["db.t"][6:]


def _lost_newest_record(root: Path) -> Zone:
    """Batch 1 of db.u (never merged), batches 2-6 of db.t merged by record 1, retention
    deleting what it merged at once; then record 1 lost (say, an incomplete restore)."""
    zone = Zone(root)
    zone.add({"db.u": 1})
    for _ in range(5):
        zone.add({"db.t": 1})
    result = cp.run_compaction(LocalStore(root), _settings(retention=0.0))
    assert (result.record, result.merged, result.deleted) == (1, 5, 5)
    (root / record_key(1)).unlink()
    return zone


def test_a_lost_record_stops_the_readers_naming_it(tmp_path: Path) -> None:
    root = tmp_path
    _lost_newest_record(root)
    pattern = rf"compaction record .*{record_key(1)} is missing"
    with pytest.raises(IntegrityError, match=pattern) as caught:
        read_manifests(root)
    assert "compact-" in str(caught.value)
    assert record_key(1) in (caught.value.hint or "")
    with pytest.raises(IntegrityError, match=pattern):
        committed_files(root, after=3)
    with pytest.raises(IntegrityError, match=pattern):
        read_manifests(root, unpublished=True)


def test_a_published_file_gone_is_an_error_not_a_wait(tmp_path: Path) -> None:
    root = tmp_path
    zone = Zone(root)
    for _ in range(3):
        zone.add({"db.t": 2})
    gone = json.loads((root / "_manifests" / f"{2:020d}.json").read_text())["files"][0]["path"]
    (root / gone).unlink()
    with pytest.raises(IntegrityError, match=f"batch 2 is committed but its file .*{gone} is gone"):
        read_manifests(root)
    assert [m.batch for m in read_manifests(root, after=2).manifests] == [3]


@pytest.mark.parametrize("checkpoint", [True, False])
def test_a_file_under_its_staged_name_is_waited_for(tmp_path: Path, checkpoint: bool) -> None:
    """A commit between its manifest and its rename (the daemon renames right after, or its
    next start does): later batches wait for the next run."""
    root = tmp_path
    zone = Zone(root)
    zone.add({"db.t": 2})
    zone.add({"db.t": 2})
    zone.add({"db.t": 2, "db.u": 1}, checkpoint=checkpoint)
    zone.add({"db.t": 2}, checkpoint=checkpoint)
    store = LocalStore(root)
    third = json.loads((root / "_manifests" / f"{3:020d}.json").read_text())["files"][1]["path"]
    os.replace(store.path(third), store.path(store.staged(third)))
    found = read_manifests(root)
    assert ([m.batch for m in found.manifests], found.waiting) == ([1, 2], 3)
    assert [m.batch for m in read_manifests(root, unpublished=True).manifests] == [1, 2, 3, 4]
    os.replace(store.path(store.staged(third)), store.path(third))
    found = read_manifests(root)
    assert ([m.batch for m in found.manifests], found.waiting) == ([1, 2, 3, 4], None)
