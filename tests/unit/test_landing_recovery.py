"""Recovery of the landing zone after a crash at any commit step, and what it refuses.

A manifest is the commit point: files it names are rolled forward (renamed into place) and the
checkpoint advanced; temp files no manifest names are removed. Recovery trusts nothing it reads:
a missing, torn, edited or stray manifest, a checkpoint that disagrees with the manifests, a
committed file that is gone or a data file no manifest names stop it with an IntegrityError
(exit 4), and the landing zone is left exactly as it was (no file deleted, moved or rewritten).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replicator.binlog.position import StreamPosition
from replicator.checkpoint import Checkpoint, CheckpointStore, position_from_json
from replicator.config import SinkConfig
from replicator.errors import IntegrityError
from replicator.sink.landing import LandingZone


def _end(batch: int) -> dict[str, object]:
    return {"file": "mysql-bin.000001", "position": 1000 + batch, "mariadb_gtid": f"0-1-{batch}"}


def _manifest(root: Path, batch: int, files: list[str], first_seq: int, last_seq: int) -> Path:
    path = root / "_manifests" / f"{batch:020d}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "batch": batch,
                "committed_at": "2026-01-01T00:00:00Z",
                "first_seq": first_seq,
                "last_seq": last_seq,
                "rows": last_seq - first_seq + 1,
                "transactions": 1,
                "start": None if batch == 1 else _end(batch - 1),
                "end": _end(batch),
                "files": [
                    {
                        "table": "db.t",
                        "path": f,
                        "rows": 1,
                        "bytes": 1,
                        "first_seq": first_seq,
                        "last_seq": last_seq,
                    }
                    for f in files
                ],
            }
        )
    )
    return path


def _zone_with_batches(root: Path, batches: int) -> LandingZone:
    """``batches`` committed batches of 10 changes each (seq 1..10, 11..20, ...), published and
    checkpointed, as a daemon leaves them."""
    table = root / "db" / "t"
    table.mkdir(parents=True, exist_ok=True)
    for n in range(1, batches + 1):
        first = (n - 1) * 10 + 1
        name = f"part-{first:020d}.parquet"
        (table / name).write_bytes(b"x")
        _manifest(root, n, [f"db/t/{name}"], first, first + 9)
    CheckpointStore(root).save(
        Checkpoint(
            batch=batches,
            next_seq=batches * 10 + 1,
            position=position_from_json(_end(batches), "test"),
        )
    )
    return LandingZone(SinkConfig(root=str(root)))


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_committed_but_unpublished_batch_rolls_forward(tmp_path: Path) -> None:
    zone = LandingZone(SinkConfig(root=str(tmp_path)))
    table = tmp_path / "db" / "t"
    table.mkdir(parents=True)
    # one byte each, as the manifest says (``_manifest``)
    (table / ".part-00000000000000000001.parquet.tmp").write_bytes(b"1")
    (table / "part-00000000000000000005.parquet").write_bytes(b"2")  # already renamed
    _manifest(
        tmp_path,
        1,
        ["db/t/part-00000000000000000001.parquet", "db/t/part-00000000000000000005.parquet"],
        1,
        9,
    )
    checkpoint = zone.recover()
    assert (table / "part-00000000000000000001.parquet").read_bytes() == b"1"
    assert not list(table.glob(".*"))
    assert checkpoint.batch == 1 and checkpoint.next_seq == 10
    assert checkpoint.position is not None
    assert checkpoint.position.file == "mysql-bin.000001"
    assert checkpoint.position.position == 1001
    assert str(checkpoint.position.mariadb_gtid) == "0-1-1"
    assert CheckpointStore(tmp_path).load() == checkpoint


def test_uncommitted_batch_is_rolled_back(tmp_path: Path) -> None:
    zone = _zone_with_batches(tmp_path, 1)
    table = tmp_path / "db" / "t"
    (table / ".part-00000000000000000011.parquet.tmp").write_bytes(b"half")
    (tmp_path / "_manifests" / ".00000000000000000002.json.tmp").write_text("{")
    checkpoint = zone.recover()
    assert checkpoint.batch == 1 and checkpoint.next_seq == 11
    assert [p.name for p in table.iterdir()] == ["part-00000000000000000001.parquet"]
    assert [p.name for p in (tmp_path / "_manifests").iterdir()] == ["00000000000000000001.json"]


def test_a_lost_checkpoint_is_rebuilt_from_the_manifests(tmp_path: Path) -> None:
    zone = _zone_with_batches(tmp_path, 3)
    (tmp_path / "_state" / "checkpoint.json").unlink()
    checkpoint = zone.recover()
    assert (checkpoint.batch, checkpoint.next_seq) == (3, 31)
    assert checkpoint.position == StreamPosition(
        "mysql-bin.000001", 1003, checkpoint.position.mariadb_gtid if checkpoint.position else None
    )


def test_older_manifests_do_not_move_the_checkpoint_back(tmp_path: Path) -> None:
    zone = _zone_with_batches(tmp_path, 2)
    checkpoint = zone.recover()
    assert (checkpoint.batch, checkpoint.next_seq) == (2, 21)
    assert sorted(p.name for p in (tmp_path / "db" / "t").iterdir()) == [
        "part-00000000000000000001.parquet",
        "part-00000000000000000011.parquet",
    ]


def _missing_middle(root: Path) -> str:
    (root / "_manifests" / f"{2:020d}.json").unlink()
    return "batch 2 is missing"


def _missing_last(root: Path) -> str:
    (root / "_manifests" / f"{3:020d}.json").unlink()
    return "names batch 3, but the last manifest is batch 2"


def _truncated(root: Path) -> str:
    path = root / "_manifests" / f"{2:020d}.json"
    path.write_bytes(path.read_bytes()[:40])
    return "is not valid JSON"


def _empty_object(root: Path) -> str:
    (root / "_manifests" / f"{2:020d}.json").write_text("{}")
    return "has no integer 'batch'"


def _stray_copy(root: Path) -> str:
    (root / "_manifests" / "44 (copy).json").write_text("{}")
    return "are not commit records: '44 (copy).json'"


def _renumbered(root: Path) -> str:
    data = json.loads((root / "_manifests" / f"{2:020d}.json").read_text())
    data["batch"] = 7
    (root / "_manifests" / f"{2:020d}.json").write_text(json.dumps(data))
    return "says it is batch 7"


def _seq_gap(root: Path) -> str:
    data = json.loads((root / "_manifests" / f"{3:020d}.json").read_text())
    data["first_seq"] = 25
    data["files"][0]["first_seq"] = 25
    (root / "_manifests" / f"{3:020d}.json").write_text(json.dumps(data))
    return "starts at _seq 25, but batch 2 ended at 20"


def _position_break(root: Path) -> str:
    data = json.loads((root / "_manifests" / f"{3:020d}.json").read_text())
    data["start"] = {"file": "mysql-bin.000009", "position": 4}
    (root / "_manifests" / f"{3:020d}.json").write_text(json.dumps(data))
    return "but batch 2 ended at"


def _checkpoint_seq_behind(root: Path) -> str:
    CheckpointStore(root).save(Checkpoint(batch=3, next_seq=12, position=None))
    return "says the next _seq is 12, but batch 3 ended at _seq 30"


def _checkpoint_garbage(root: Path) -> str:
    (root / "_state" / "checkpoint.json").write_text('{"batch": "x"')
    return "checkpoint"


def _file_gone(root: Path) -> str:
    (root / "db" / "t" / f"part-{11:020d}.parquet").unlink()
    return "batch 2 is committed but its file db/t/part-00000000000000000011.parquet is gone"


def _stray_data_file(root: Path) -> str:
    (root / "db" / "t" / f"part-{99:020d}.parquet").write_bytes(b"stray")
    return "named by no manifest"


def _manifests_gone(root: Path) -> str:
    for path in (root / "_manifests").iterdir():
        path.unlink()
    return "but there is no manifest"


@pytest.mark.parametrize(
    "mutate",
    [
        _missing_middle,
        _missing_last,
        _truncated,
        _empty_object,
        _stray_copy,
        _renumbered,
        _seq_gap,
        _position_break,
        _checkpoint_seq_behind,
        _checkpoint_garbage,
        _file_gone,
        _stray_data_file,
        _manifests_gone,
    ],
)
def test_recovery_refuses_what_does_not_add_up_and_changes_nothing(
    tmp_path: Path, mutate: object
) -> None:
    _refused(tmp_path, mutate)


def _refused(root: Path, mutate: object) -> IntegrityError:
    """Three committed batches, ``mutate``d: recovery refuses with what it says (exit 4) and
    changes nothing."""
    zone = _zone_with_batches(root, 3)
    assert callable(mutate)
    expected = mutate(root)
    before = _snapshot(root)
    with pytest.raises(IntegrityError) as raised:
        zone.recover()
    assert expected in str(raised.value)
    assert raised.value.exit_code == 4
    assert _snapshot(root) == before
    return raised.value


def test_a_moved_checkpoint_starts_a_chain_that_says_so(tmp_path: Path) -> None:
    zone = _zone_with_batches(tmp_path, 2)
    data = json.loads((tmp_path / "_manifests" / f"{2:020d}.json").read_text())
    data["start"] = {"file": "mysql-bin.000001", "position": 4}  # replay: checkpoint set back
    data["start_moved"] = True
    (tmp_path / "_manifests" / f"{2:020d}.json").write_text(json.dumps(data))
    assert zone.recover().batch == 2


def test_a_file_that_exists_is_never_overwritten(tmp_path: Path) -> None:
    from replicator.binlog.schema import ColumnDef
    from replicator.sink.changes import TableVersion

    zone = _zone_with_batches(tmp_path, 1)
    version = TableVersion("db", "t", (ColumnDef(index=0, type=3, meta=0, name="id"),))
    with pytest.raises(IntegrityError, match="already exists"):
        zone._open_file(version, 1)
    assert (tmp_path / "db" / "t" / f"part-{1:020d}.parquet").read_bytes() == b"x"


def _moved_by_hand(root: Path) -> str:
    """The checkpoint's GTID edited back (0-1-3 -> 0-1-1) with its batch left as it was: the
    next run would land batches 2 and 3 again without marking them as replays."""
    path = root / "_state" / "checkpoint.json"
    data = json.loads(path.read_text())
    data["position"] = _end(1)
    path.write_text(json.dumps(data))
    return "resumes at GTID 0-1-1 (mysql-bin.000001:1001), but batch 3 ended at GTID 0-1-3"


def _position_removed(root: Path) -> str:
    path = root / "_state" / "checkpoint.json"
    data = json.loads(path.read_text())
    data["position"] = None
    path.write_text(json.dumps(data))
    return "resumes at no position, but batch 3 ended at GTID 0-1-3"


def _moved_without_origin(root: Path) -> str:
    path = root / "_state" / "checkpoint.json"
    data = json.loads(path.read_text())
    data["position"], data["moved"] = _end(1), True
    path.write_text(json.dumps(data))
    return "says it was moved, but not from where"


def _replay_marked_too_short(root: Path) -> str:
    path = root / "_state" / "checkpoint.json"
    data = json.loads(path.read_text())
    data["position"], data["moved"], data["replay_until"] = _end(1), True, _end(2)
    path.write_text(json.dumps(data))
    return "marks replays only up to GTID 0-1-2"


def _behind_a_committed_batch(root: Path) -> str:
    """A checkpoint one batch behind (a crash before step 4) whose position is not where the
    next, committed batch started."""
    CheckpointStore(root).save(
        Checkpoint(
            batch=2,
            next_seq=21,
            position=position_from_json(_end(1), "test"),
        )
    )
    return "resumes at GTID 0-1-1 (mysql-bin.000001:1001), but batch 2 ended at GTID 0-1-2"


@pytest.mark.parametrize(
    "mutate",
    [
        _moved_by_hand,
        _position_removed,
        _moved_without_origin,
        _replay_marked_too_short,
        _behind_a_committed_batch,
    ],
)
def test_a_checkpoint_that_does_not_resume_where_its_batch_ended_is_refused(
    tmp_path: Path, mutate: object
) -> None:
    assert "replicator checkpoint set" in (_refused(tmp_path, mutate).hint or "")


def test_a_checkpoint_moved_by_checkpoint_set_is_accepted(tmp_path: Path) -> None:
    """What `replicator checkpoint set` writes: moved, and replays marked up to where the
    stream had been."""
    zone = _zone_with_batches(tmp_path, 3)
    moved = Checkpoint(
        batch=3,
        next_seq=31,
        position=position_from_json(_end(1), "test"),
        moved=True,
        replay_until=position_from_json(_end(3), "test"),
    )
    CheckpointStore(tmp_path).save(moved)
    assert zone.recover() == moved


def test_a_checkpoint_behind_rolls_forward_when_the_next_batch_started_there(
    tmp_path: Path,
) -> None:
    zone = _zone_with_batches(tmp_path, 3)
    CheckpointStore(tmp_path).save(
        Checkpoint(batch=2, next_seq=21, position=position_from_json(_end(2), "test"))
    )
    assert (zone.recover().batch, zone.recover().next_seq) == (3, 31)


def test_a_replay_stays_marked_across_a_crash_before_its_checkpoint(tmp_path: Path) -> None:
    """`checkpoint set` back, then a batch committed (manifest) but not checkpointed: the
    rolled-forward checkpoint still marks replays up to where the stream had been."""
    zone = _zone_with_batches(tmp_path, 3)
    moved = Checkpoint(
        batch=3,
        next_seq=31,
        position=position_from_json(_end(1), "test"),
        moved=True,
        replay_until=position_from_json(_end(3), "test"),
    )
    CheckpointStore(tmp_path).save(moved)
    replay = json.loads((tmp_path / "_manifests" / f"{3:020d}.json").read_text())
    replay.update(
        batch=4, first_seq=31, last_seq=31, start=_end(1), start_moved=True, replay=True,
        end={"file": "mysql-bin.000001", "position": 1002, "mariadb_gtid": "0-1-2"}, files=[],
    )  # fmt: skip
    (tmp_path / "_manifests" / f"{4:020d}.json").write_text(json.dumps(replay))
    rolled = zone.recover()
    assert rolled.batch == 4
    assert rolled.replay_until == position_from_json(_end(3), "test")  # 0-1-2 is before it
