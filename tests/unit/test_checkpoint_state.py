"""A start refuses a checkpoint whose held XA transactions or snapshot progress are not what
its batch's manifest says, and changes nothing: taken as they are, the first would have the
start delete the held rows of a prepared XA transaction, the second skip a table's snapshot.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from replicator.config import SinkConfig
from replicator.errors import IntegrityError
from replicator.sink.changes import HeldXa
from replicator.sink.landing import LandingZone
from replicator.snapshot_progress import SnapshotState
from tests.unit.test_object_store import VERSION, _end, _land
from tests.unit.test_parquet_writer import change

HELD = "a.mysql-bin.000001.1500"


def _zone(root: Path) -> None:
    """Two batches; the second holds a prepared XA transaction and leaves a snapshot of two
    tables part way through the first."""
    zone = LandingZone(SinkConfig(root=str(root)))
    zone.recover()
    _land(zone, itertools.count(1), 2)
    checkpoint = zone.checkpoints.load()
    batch = zone.begin(checkpoint)
    seq = checkpoint.next_seq
    batch.add(VERSION, [change(seq, [100, "n"])])
    held = HeldXa(
        key="a",
        xid="'a'",
        groups=[(VERSION, [change(0, [777, "held"])])],
        file="mysql-bin.000001",
        position=1500,
    )
    snapshot = SnapshotState(tables=("shop.orders", "shop.other"), after=(5,), key=("id",), rows=1)
    batch.commit(_end(batch.number), seq + 1, {held.key: held}, snapshot=snapshot)


def _no_held(data: dict[str, Any]) -> None:
    data["xa_pending"] = []


def _other_held(data: dict[str, Any]) -> None:
    data["xa_pending"] = ["b.mysql-bin.000001.1600"]


def _table_skipped(data: dict[str, Any]) -> None:
    data["snapshot"]["tables"] = ["shop.other"]
    data["snapshot"]["after"] = None


def _snapshot_done(data: dict[str, Any]) -> None:
    data["snapshot"] = SnapshotState().to_json()


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (_no_held, "prepared XA transactions"),
        (_other_held, "prepared XA transactions"),
        (_table_skipped, "snapshot's progress"),
        (_snapshot_done, "snapshot's progress"),
    ],
)
def test_a_checkpoint_edited_beside_its_position_is_refused(
    tmp_path: Path, edit: Callable[[dict[str, Any]], None], says: str
) -> None:
    _zone(tmp_path)
    path = tmp_path / "_state" / "checkpoint.json"
    data = json.loads(path.read_text())
    assert data["xa_pending"] == [HELD] and data["snapshot"]["tables"] == [
        "shop.orders",
        "shop.other",
    ]
    edit(data)
    path.write_text(json.dumps(data))
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    with pytest.raises(IntegrityError, match=rf"{says}.*but batch 2") as caught:
        LandingZone(SinkConfig(root=str(tmp_path))).recover()
    assert "rebuilt from" in (caught.value.hint or "")
    after = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert after == before  # the held XA file is still there
    assert (tmp_path / "_state" / "xa" / f"{HELD}.pickle").exists()


def test_the_checkpoint_as_committed_is_taken(tmp_path: Path) -> None:
    _zone(tmp_path)
    zone = LandingZone(SinkConfig(root=str(tmp_path)))
    checkpoint = zone.recover()
    assert checkpoint.xa_pending == (HELD,)
    assert checkpoint.snapshot.tables == ("shop.orders", "shop.other")
    assert [h.key for h in zone.load_held(checkpoint.xa_pending)] == ["a"]


def test_a_held_xa_file_edited_is_refused_before_it_is_unpickled(tmp_path: Path) -> None:
    _zone(tmp_path)
    path = tmp_path / "_state" / "xa" / f"{HELD}.pickle"
    data = path.read_bytes()
    assert b"held" in data
    path.write_bytes(data.replace(b"held", b"edit"))  # the same length, rows changed
    zone = LandingZone(SinkConfig(root=str(tmp_path)))
    checkpoint = zone.recover()
    with pytest.raises(IntegrityError, match=rf"{HELD}.pickle, .* is not the file batch 2"):
        zone.load_held(checkpoint.xa_pending)


def test_held_xa_files_are_pinned_across_batches(tmp_path: Path) -> None:
    """A held file written by an earlier batch stays pinned by every later manifest, also
    after a restart read it back."""
    _zone(tmp_path)
    zone = LandingZone(SinkConfig(root=str(tmp_path)))
    checkpoint = zone.recover()
    held = zone.load_held(checkpoint.xa_pending)
    batch = zone.begin(checkpoint)
    batch.add(VERSION, [change(checkpoint.next_seq, [200, "m"])])
    batch.commit(_end(batch.number), checkpoint.next_seq + 1, {h.key: h for h in held})
    pins = [
        json.loads((tmp_path / "_manifests" / f"{n:020d}.json").read_text())["xa_pending_sha256"]
        for n in (2, 3)
    ]
    assert pins[0] == pins[1] and list(pins[0]) == [HELD]
