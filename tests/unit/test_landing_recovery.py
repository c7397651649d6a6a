"""Recovery of the landing zone after a crash at any commit step (no server needed).

A manifest is the commit point: files it names are rolled forward (renamed into place) and
the checkpoint advanced; temp files no manifest names are removed; a final file no manifest
names is moved aside, never left for Spark to read.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replicator.checkpoint import Checkpoint, CheckpointStore
from replicator.config import SinkConfig
from replicator.errors import IntegrityError
from replicator.sink.landing import LandingZone
from replicator.source.protocol import StreamPosition


def _manifest(root: Path, batch: int, files: list[str], last_seq: int) -> None:
    path = root / "_manifests" / f"{batch:020d}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "batch": batch,
                "committed_at": "2026-01-01T00:00:00Z",
                "first_seq": 1,
                "last_seq": last_seq,
                "rows": 1,
                "transactions": 1,
                "start": None,
                "end": {
                    "file": "mysql-bin.000001",
                    "position": 1000 + batch,
                    "mariadb_gtid": f"0-1-{batch}",
                },
                "files": [
                    {
                        "table": "db.t",
                        "path": f,
                        "rows": 1,
                        "bytes": 1,
                        "first_seq": 1,
                        "last_seq": last_seq,
                    }
                    for f in files
                ],
            }
        )
    )


def test_committed_but_unpublished_batch_rolls_forward(tmp_path: Path) -> None:
    zone = LandingZone(SinkConfig(root=str(tmp_path)))
    table = tmp_path / "db" / "t"
    table.mkdir(parents=True)
    (table / ".part-00000000000000000001.parquet.tmp").write_bytes(b"one")
    (table / "part-00000000000000000005.parquet").write_bytes(b"two")  # already renamed
    _manifest(
        tmp_path,
        1,
        ["db/t/part-00000000000000000001.parquet", "db/t/part-00000000000000000005.parquet"],
        9,
    )
    checkpoint = zone.recover()
    assert (table / "part-00000000000000000001.parquet").read_bytes() == b"one"
    assert not list(table.glob(".*"))
    assert checkpoint.batch == 1 and checkpoint.next_seq == 10
    assert checkpoint.position == StreamPosition(
        "mysql-bin.000001", 1001, checkpoint.position.mariadb_gtid if checkpoint.position else None
    )
    assert CheckpointStore(tmp_path).load() == checkpoint


def test_uncommitted_batch_is_rolled_back(tmp_path: Path) -> None:
    zone = LandingZone(SinkConfig(root=str(tmp_path)))
    table = tmp_path / "db" / "t"
    table.mkdir(parents=True)
    (table / ".part-00000000000000000011.parquet.tmp").write_bytes(b"half")
    (tmp_path / "_manifests").mkdir()
    (tmp_path / "_manifests" / ".00000000000000000002.json.tmp").write_text("{")
    CheckpointStore(tmp_path).save(Checkpoint(batch=1, next_seq=11, position=None))
    checkpoint = zone.recover()
    assert checkpoint.batch == 1 and checkpoint.next_seq == 11
    assert list(table.iterdir()) == []
    assert list((tmp_path / "_manifests").iterdir()) == []


def test_stray_final_file_is_moved_aside(tmp_path: Path) -> None:
    zone = LandingZone(SinkConfig(root=str(tmp_path)))
    table = tmp_path / "db" / "t"
    table.mkdir(parents=True)
    (table / "part-00000000000000000099.parquet").write_bytes(b"stray")
    zone.recover()
    assert not (table / "part-00000000000000000099.parquet").exists()
    assert (tmp_path / "_orphans" / "db" / "t" / "part-00000000000000000099.parquet").exists()


def test_committed_file_that_vanished_is_an_integrity_error(tmp_path: Path) -> None:
    zone = LandingZone(SinkConfig(root=str(tmp_path)))
    _manifest(tmp_path, 1, ["db/t/part-00000000000000000001.parquet"], 3)
    with pytest.raises(IntegrityError, match="is gone"):
        zone.recover()


def test_older_manifests_do_not_move_the_checkpoint_back(tmp_path: Path) -> None:
    zone = LandingZone(SinkConfig(root=str(tmp_path)))
    table = tmp_path / "db" / "t"
    table.mkdir(parents=True)
    for n in (1, 2):
        name = f"part-{n:020d}.parquet"
        (table / name).write_bytes(b"x")
        _manifest(tmp_path, n, [f"db/t/{name}"], n * 10)
    CheckpointStore(tmp_path).save(Checkpoint(batch=2, next_seq=21, position=None))
    checkpoint = zone.recover()
    assert (checkpoint.batch, checkpoint.next_seq) == (2, 21)
    assert sorted(p.name for p in table.iterdir()) == [
        "part-00000000000000000001.parquet",
        "part-00000000000000000002.parquet",
    ]
