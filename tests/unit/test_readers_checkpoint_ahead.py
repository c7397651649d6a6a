"""Every reader refuses a checkpoint naming a batch above the newest manifest.

The daemon writes a batch's manifest before the checkpoint naming it, so a reader that reads the
checkpoint first and lists the manifests after it finds the checkpoint's batch among them, even
while a daemon commits meanwhile (``landed.checkpointed``). When it does not, the newest
manifests were removed: read without them, their batches' rows would be lost from every output.
The daemon's start refuses that; so do the readers (``read_manifests``/``committed_files``,
which the Delta and Spark outputs read through), ``verify`` (which also names the data files no
manifest names, on a directory), ``status`` and ``compact``: an IntegrityError, exit 4. A
checkpoint that is lost (batch 0), behind the manifests (a crash between a manifest and its
checkpoint) or moved by ``replicator checkpoint set`` is read as before.
"""

from __future__ import annotations

import itertools
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from replicator import checkpoint as daemon_checkpoint
from replicator.cli import main
from replicator.config import SinkConfig
from replicator.errors import IntegrityError
from replicator.landed import contract
from replicator.landed.batches import Landing
from replicator.landed.committed import committed_files, read_manifests
from replicator.sink import compaction as cp
from replicator.sink.landing import LandingZone
from replicator.sink.verify import stray_data_files, verify_landing
from replicator.storage import LocalStore, Store, open_store
from tests.harness.s3 import S3Server
from tests.unit.test_object_store import _land, _options, _sink
from tests.unit.test_verify import _part, _zone

AHEAD = "names batch 3, but the last manifest is batch 2"


def _manifest(root: Path, batch: int) -> Path:
    return root / "_manifests" / f"{batch:020d}.json"


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def _newest_manifest_removed(root: Path) -> None:
    """Three batches committed; the manifest of the third removed (its file stays, under its
    final name, and the checkpoint still names batch 3)."""
    _zone(root, 3)
    _manifest(root, 3).unlink()


def test_the_daemon_and_the_readers_go_by_the_same_names() -> None:
    assert contract.CHECKPOINT == daemon_checkpoint.CHECKPOINT_KEY
    # the daemon's start and `verify` take the same keys for data files (``DATA_FILE``)
    keys = ["shop/t/part-00000000000000000001.parquet", "shop/t/.part-1.parquet.tmp", "x.json"]
    assert stray_data_files(keys, set()) == keys[:1]
    assert stray_data_files(keys, {keys[0]}) == []


def test_the_readers_refuse_a_checkpoint_beyond_the_newest_manifest(tmp_path: Path) -> None:
    _newest_manifest_removed(tmp_path)
    checkpoint = re.escape(str(tmp_path / "_state" / "checkpoint.json"))
    for read in (
        lambda: read_manifests(tmp_path),
        lambda: read_manifests(tmp_path, after=2),  # an incremental read: nothing new
        lambda: read_manifests(tmp_path, unpublished=True),  # the Spark stream's
        lambda: committed_files(tmp_path),
        lambda: Landing.read(tmp_path),  # what a materialize run applies
        lambda: cp.read_landing(LocalStore(tmp_path)),
    ):
        with pytest.raises(IntegrityError, match=f"checkpoint {checkpoint} {AHEAD}") as caught:
            read()
        assert "restore them from a backup" in str(caught.value)
    with pytest.raises(IntegrityError, match=AHEAD):  # as the daemon's start refuses it
        LandingZone(SinkConfig(root=str(tmp_path))).recover()


def test_verify_names_the_checkpoint_and_the_file_no_manifest_names(tmp_path: Path) -> None:
    _newest_manifest_removed(tmp_path)
    for deep in ((), ("--deep",)):
        code, out, _ = _cli("verify", "--landing", str(tmp_path), *deep)
        assert code == IntegrityError.exit_code, out
        bad = [line for line in out.splitlines() if line.startswith("bad: ")]
        assert len(bad) == 2, out
        assert bad[0].startswith(f"bad: checkpoint {tmp_path / '_state' / 'checkpoint.json'}")
        assert AHEAD in bad[0] and "restore them from a backup" in bad[0]
        assert "1 data file(s) in the landing zone are named by no manifest" in bad[1]
        assert str(tmp_path / _part(3)) in bad[1]
        assert out.splitlines()[-1].startswith("2 problem(s): 2 files")


def test_verify_names_a_data_file_copied_into_a_directory(tmp_path: Path) -> None:
    _zone(tmp_path, 2)
    copied = "shop/orders/part-99999999999999999999.parquet"
    shutil.copyfile(tmp_path / _part(1), tmp_path / copied)
    code, out, _ = _cli("verify", "--landing", str(tmp_path))
    assert code == IntegrityError.exit_code, out
    [bad] = [line for line in out.splitlines() if line.startswith("bad: ")]
    assert "1 data file(s) in the landing zone are named by no manifest" in bad
    assert str(tmp_path / copied) in bad and "move them out of the landing zone" in bad


def test_status_refuses_a_checkpoint_beyond_the_newest_manifest(tmp_path: Path) -> None:
    _newest_manifest_removed(tmp_path)
    for json_too in ((), ("--json",)):
        code, out, err = _cli("status", "--landing", str(tmp_path), *json_too)
        assert code == IntegrityError.exit_code, out
        assert out == ""
        assert err.startswith(f"error: checkpoint {tmp_path / '_state' / 'checkpoint.json'}")
        assert AHEAD in err and "restore them from a backup" in err


def test_status_refuses_a_checkpoint_whose_batch_s_manifest_is_gone(tmp_path: Path) -> None:
    """A crash between batch 3's manifest and its checkpoint, then batch 2's manifest lost:
    the checkpoint names batch 2, below the newest manifest, but batch 2 is gone."""
    zone = _zone(tmp_path, 2)
    kept = (tmp_path / "_state" / "checkpoint.json").read_bytes()
    _land(zone, itertools.count(100), 3)
    (tmp_path / "_state" / "checkpoint.json").write_bytes(kept)
    _manifest(tmp_path, 2).unlink()
    code, out, err = _cli("status", "--landing", str(tmp_path))
    assert code == IntegrityError.exit_code, out
    assert "names batch 2, but its manifest" in err and "is gone" in err


def test_the_readers_refuse_a_checkpoint_when_every_manifest_is_gone(tmp_path: Path) -> None:
    _zone(tmp_path, 2)
    shutil.rmtree(tmp_path / "_manifests")
    (tmp_path / "_manifests").mkdir()
    expected = f"names batch 2, but there is no manifest in {re.escape(str(tmp_path))}"
    with pytest.raises(IntegrityError, match=expected):
        read_manifests(tmp_path)
    code, out, _ = _cli("verify", "--landing", str(tmp_path))
    assert code == IntegrityError.exit_code and "there is no manifest in" in out
    code, _, err = _cli("status", "--landing", str(tmp_path))
    assert code == IntegrityError.exit_code and "there is no manifest in" in err


def test_compact_refuses_and_commits_nothing(tmp_path: Path) -> None:
    _newest_manifest_removed(tmp_path)
    code, out, err = _cli("compact", "--landing", str(tmp_path), "--older-than", "0s")
    assert code == IntegrityError.exit_code, out + err
    assert AHEAD in err
    records = tmp_path / "_compactions"
    assert not records.exists() or not any(records.iterdir())


def test_a_checkpoint_lost_behind_or_moved_is_read_as_before(tmp_path: Path) -> None:
    zone = _zone(tmp_path, 2)
    cp_path = tmp_path / "_state" / "checkpoint.json"
    kept = cp_path.read_bytes()
    _land(zone, itertools.count(100), 3)  # batch 3: then a crash before its checkpoint
    cp_path.write_bytes(kept)
    assert read_manifests(tmp_path).last_batch == 3
    assert read_manifests(tmp_path, after=3).manifests == ()
    assert _cli("verify", "--landing", str(tmp_path))[0] == 0
    assert _cli("status", "--landing", str(tmp_path))[0] == 0
    cp_path.unlink()  # lost: batch 0 until the daemon's start rebuilds it
    assert read_manifests(tmp_path).last_batch == 3
    assert _cli("verify", "--landing", str(tmp_path))[0] == 0
    LandingZone(SinkConfig(root=str(tmp_path))).recover()
    code, out, _ = _cli(
        "checkpoint", "set", "--landing", str(tmp_path), "--file", "mysql-bin.000001"
    )
    assert code == 0, out
    assert read_manifests(tmp_path).last_batch == 3
    assert _cli("verify", "--landing", str(tmp_path))[0] == 0
    assert _cli("status", "--landing", str(tmp_path))[0] == 0


class _CommitAfterListing(LocalStore):
    """A directory whose daemon commits a batch right after a reader lists the manifests:
    a reader that read the checkpoint first sees it name a batch the listing shows."""

    def __init__(self, root: Path, zone: LandingZone) -> None:
        super().__init__(root)
        self.zone = zone
        self.rows = itertools.count(1000)
        self.commits = 0

    def list(self, prefix: str = "") -> list[str]:
        found = super().list(prefix)
        if prefix == contract.MANIFESTS:
            _land(self.zone, self.rows, 2)
            self.commits += 1
        return found


def test_a_daemon_committing_while_the_readers_read_is_no_problem(tmp_path: Path) -> None:
    zone = _zone(tmp_path, 2)
    store = _CommitAfterListing(tmp_path, zone)
    assert read_manifests(store).last_batch == 2
    assert [m.batch for m in cp.read_landing(store)[0]] == [1, 2, 3]
    report = verify_landing(store, deep=True)  # batch 5's file is no stray: it is committed
    assert report.ok, report.lines()
    assert store.commits == 3


# -------------------------------------------------------------------------- object store


def _s3_zone(server: S3Server, url: str) -> Store:
    zone = LandingZone(_sink(server, url))
    zone.recover()
    ids = itertools.count(1)
    for _ in range(3):
        _land(zone, ids, 3)
    return open_store(url, _options(server))


def test_an_object_store_s_readers_refuse_it_too(s3_server: S3Server) -> None:
    url = f"s3://{s3_server.bucket('checkpoint-ahead')}/zone"
    store = _s3_zone(s3_server, url)
    store.delete(f"{contract.MANIFESTS}/{3:020d}.json")
    ahead = f"checkpoint {url}/_state/checkpoint.json {AHEAD}"
    for read in (
        lambda: read_manifests(store),
        lambda: read_manifests(store, after=2),
        lambda: cp.read_landing(store),
    ):
        with pytest.raises(IntegrityError, match=re.escape(ahead)):
            read()
    report = verify_landing(store, deep=True)
    # batch 3's file, under its final name before its manifest, is what a crash leaves on
    # an object store (the daemon's start deletes it): not reported as a stray
    assert report.lines() == [
        f"{ahead} (manifests after it were removed: restore them from a backup; read "
        "without them, the batches they committed would be left out)"
    ]
