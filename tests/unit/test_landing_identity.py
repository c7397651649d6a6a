"""The landing zone's id (``sink.identity``): made once, carried by every manifest, restored
from the manifests when its file is lost, and never mixed with another landing zone's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from replicator.binlog.gtid import MariadbGtidPosition
from replicator.binlog.position import StreamPosition
from replicator.config import SinkConfig
from replicator.errors import IntegrityError
from replicator.sink.identity import IDENTITY_FILE, read_identity
from replicator.sink.landing import LandingZone


def _commit(root: Path, batches: int) -> LandingZone:
    """``batches`` empty batches through the real commit protocol (recover, begin, commit)."""
    zone = LandingZone(SinkConfig(root=str(root)))
    checkpoint = zone.recover()
    for _ in range(batches):
        number = checkpoint.batch + 1
        end = StreamPosition(
            "mysql-bin.000001", 1000 + number, MariadbGtidPosition.parse(f"0-1-{number}")
        )
        checkpoint = zone.begin(checkpoint).commit(end, checkpoint.next_seq)
    return zone


def _manifests(root: Path) -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted((root / "_manifests").glob("*.json"))]


def _as_written_before_ids(root: Path) -> None:
    """What a replicator from before landing zone ids left: no identity file, no id in the
    manifests (nor the links between them, nor the checkpoint's pin, which came later)."""
    (root / IDENTITY_FILE).unlink()
    for path in sorted((root / "_manifests").glob("*.json")):
        data = json.loads(path.read_text())
        del data["landing_id"], data["previous_sha256"]
        path.write_text(json.dumps(data))
    checkpoint = root / "_state" / "checkpoint.json"
    data = json.loads(checkpoint.read_text())
    del data["manifest_sha256"]
    checkpoint.write_text(json.dumps(data))


def test_a_new_landing_zone_gets_an_id_every_manifest_carries(tmp_path: Path) -> None:
    zone = _commit(tmp_path / "landing", 3)
    landing_id = read_identity(tmp_path / "landing")
    assert landing_id is not None and len(landing_id) == 32
    assert zone.landing_id == landing_id
    assert [m["landing_id"] for m in _manifests(tmp_path / "landing")] == [landing_id] * 3
    # the id stays across restarts
    again = LandingZone(SinkConfig(root=str(tmp_path / "landing")))
    again.recover()
    assert again.landing_id == landing_id


def test_a_landing_zone_made_again_at_the_same_path_gets_another_id(tmp_path: Path) -> None:
    root = tmp_path / "landing"
    first = _commit(root, 2).landing_id
    shutil.rmtree(root)
    second = _commit(root, 2).landing_id
    assert first is not None and second is not None and first != second


def test_a_landing_zone_from_before_ids_gets_one_at_its_next_start(tmp_path: Path) -> None:
    root = tmp_path / "landing"
    _commit(root, 2)
    _as_written_before_ids(root)

    zone = _commit(root, 1)  # the next start, and one more batch

    assert zone.landing_id is not None and read_identity(root) == zone.landing_id
    assert [m.get("landing_id") for m in _manifests(root)] == [None, None, zone.landing_id]
    LandingZone(SinkConfig(root=str(root))).recover()  # the chain of both kinds is fine


def test_a_lost_identity_file_is_restored_from_the_manifests(tmp_path: Path) -> None:
    root = tmp_path / "landing"
    landing_id = _commit(root, 2).landing_id
    (root / IDENTITY_FILE).unlink()

    zone = LandingZone(SinkConfig(root=str(root)))
    zone.recover()

    assert zone.landing_id == landing_id
    assert read_identity(root) == landing_id


def test_an_identity_file_of_another_landing_zone_stops_recovery(tmp_path: Path) -> None:
    root = tmp_path / "landing"
    landing_id = _commit(root, 2).landing_id
    other = _commit(tmp_path / "other", 1).landing_id
    assert landing_id is not None and other is not None
    shutil.copy(tmp_path / "other" / IDENTITY_FILE, root / IDENTITY_FILE)

    with pytest.raises(IntegrityError) as caught:
        LandingZone(SinkConfig(root=str(root))).recover()

    assert landing_id in str(caught.value) and other in str(caught.value)
    assert read_identity(root) == other  # nothing was changed


def test_manifests_of_two_landing_zones_stop_recovery(tmp_path: Path) -> None:
    root = tmp_path / "landing"
    landing_id = _commit(root, 3).landing_id
    assert landing_id is not None
    stranger = "f" * 32
    path = root / "_manifests" / f"{3:020d}.json"
    data = json.loads(path.read_text())
    data["landing_id"] = stranger
    path.write_text(json.dumps(data))

    with pytest.raises(IntegrityError) as caught:
        LandingZone(SinkConfig(root=str(root))).recover()

    assert landing_id in str(caught.value) and stranger in str(caught.value)


def test_a_manifest_without_id_after_one_with_an_id_stops_recovery(tmp_path: Path) -> None:
    root = tmp_path / "landing"
    _commit(root, 2)
    path = root / "_manifests" / f"{2:020d}.json"
    data = json.loads(path.read_text())
    del data["landing_id"]
    path.write_text(json.dumps(data))

    with pytest.raises(IntegrityError, match="written before ids"):
        LandingZone(SinkConfig(root=str(root))).recover()


def test_an_unreadable_identity_file_stops_recovery(tmp_path: Path) -> None:
    root = tmp_path / "landing"
    _commit(root, 1)
    (root / IDENTITY_FILE).write_text('{"landing_id": "not-an-id"}')

    with pytest.raises(IntegrityError, match="does not hold a landing zone id"):
        LandingZone(SinkConfig(root=str(root))).recover()
