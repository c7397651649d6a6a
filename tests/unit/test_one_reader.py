"""The daemon and the readers read the commit records with one parser (``landed.manifests``,
``landed.compacted``): whatever the daemon's recovery refuses, ``materialize`` refuses too,
rather than building current state from a record the daemon would call edited."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replicator.config import SinkConfig
from replicator.errors import IntegrityError
from replicator.landed.committed import committed_files
from replicator.landed.compacted import read_records
from replicator.sink import compaction as cp
from replicator.sink.landing import LandingZone
from replicator.storage import LocalStore
from tests.unit.test_compaction import Zone, _settings


def _zone(tmp_path: Path) -> Zone:
    zone = Zone(tmp_path)
    for _ in range(3):
        zone.add({"db.t": 2})
    return zone


def _edit(path: Path, **changes: object) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


def _both_refuse(root: Path, match: str) -> None:
    with pytest.raises(IntegrityError, match=match):
        LandingZone(SinkConfig(root=str(root))).recover()
    with pytest.raises(IntegrityError, match=match):
        committed_files(root)


def test_a_manifest_with_an_edited_field_is_refused_by_both(tmp_path: Path) -> None:
    _zone(tmp_path)
    manifest = tmp_path / "_manifests" / f"{2:020d}.json"
    data = json.loads(manifest.read_text())
    data["files"][0]["sha256"] = "not a hash"
    manifest.write_text(json.dumps(data))
    _both_refuse(tmp_path, r"00000000000000000002\.json lists .* with an invalid 'sha256'")


def test_a_chain_with_a_moved_start_is_refused_by_both(tmp_path: Path) -> None:
    _zone(tmp_path)
    _edit(
        tmp_path / "_manifests" / f"{3:020d}.json",
        start={"file": "mysql-bin.000009", "position": 4},
    )
    _both_refuse(tmp_path, r"starts at .*mysql-bin\.000009.*but batch 2 ended at")


def test_a_stranger_among_the_manifests_is_refused_by_both(tmp_path: Path) -> None:
    _zone(tmp_path)
    (tmp_path / "_manifests" / "notes.json").write_text("{}")
    _both_refuse(tmp_path, "holds files that are not commit records: 'notes.json'")


def test_a_compaction_record_with_an_edited_hash_is_refused_by_readers(tmp_path: Path) -> None:
    _zone(tmp_path)
    cp.run_compaction(LocalStore(tmp_path), _settings())
    record = tmp_path / "_compactions" / f"{1:020d}.json"
    data = json.loads(record.read_text())
    data["outputs"][0]["sha256"] = "0" * 63
    record.write_text(json.dumps(data))
    with pytest.raises(IntegrityError, match="with an invalid sha256"):
        read_records(LocalStore(tmp_path))
    with pytest.raises(IntegrityError, match="with an invalid sha256"):
        committed_files(tmp_path)
