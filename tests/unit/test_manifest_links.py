"""Each manifest pins the one before it by the SHA-256 of its bytes, and the checkpoint pins the
manifest of its batch: a manifest edited in place, however consistently (a lifecycle record's
op, a count, a time), stops the daemon's start, the committed-file readers (also an
incremental read that starts after it), ``compact`` and ``verify``, and changes nothing.
Landing zones written before links read as before, and the next batch links to them."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from replicator.cli import main
from replicator.config import SinkConfig
from replicator.errors import IntegrityError
from replicator.landed.committed import read_manifests
from replicator.sink import compaction as cp
from replicator.sink.landing import LandingZone
from replicator.storage import LocalStore
from tests.unit.test_object_store import _land


def _zone(root: Path, batches: int = 3) -> Iterator[int]:
    zone = LandingZone(SinkConfig(root=str(root)))
    zone.recover()
    rows = itertools.count(1)
    for _ in range(batches):
        _land(zone, rows, 2)
    return rows


def _manifest(root: Path, batch: int) -> Path:
    return root / "_manifests" / f"{batch:020d}.json"


def _edit(path: Path, key: str, value: object) -> None:
    """``key`` set to ``value``: still a manifest that adds up by itself."""
    data = json.loads(path.read_text())
    data[key] = value
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def _files(root: Path) -> dict[Path, bytes]:
    """Every file but the locks (whose records say who last held them)."""
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and p.suffix != ".lock"}


def test_each_manifest_links_to_the_one_before_and_the_checkpoint_to_its_own(
    tmp_path: Path,
) -> None:
    _zone(tmp_path)
    first = json.loads(_manifest(tmp_path, 1).read_text())
    assert "previous_sha256" in first and first["previous_sha256"] is None
    manifests = read_manifests(tmp_path).manifests
    assert [m.previous_pin for m in manifests[1:]] == [m.sha256 for m in manifests[:-1]]
    checkpoint = json.loads((tmp_path / "_state" / "checkpoint.json").read_text())
    assert checkpoint["manifest_sha256"] == manifests[-1].sha256


def _stops_every_reader(root: Path, pattern: str, said: str, *, after: int) -> None:
    """The daemon's start, the readers (also one reading after batch ``after``), ``compact``
    and ``verify`` (its report saying ``said``) stop at the edit, and change nothing."""
    before = _files(root)
    with pytest.raises(IntegrityError, match=pattern):
        LandingZone(SinkConfig(root=str(root))).recover()
    with pytest.raises(IntegrityError, match=pattern):
        read_manifests(root)
    with pytest.raises(IntegrityError, match=pattern):
        read_manifests(root, after=after)
    with pytest.raises(IntegrityError, match=pattern):
        cp.run_compaction(LocalStore(root), cp.Settings(older_than=0.0))
    result = CliRunner().invoke(main, ["verify", "--landing", str(root)])
    assert result.exit_code == 4, result.output
    assert said in result.output + result.stderr
    assert _files(root) == before


def test_a_middle_manifest_edited_stops_every_reader(tmp_path: Path) -> None:
    _zone(tmp_path)
    _edit(_manifest(tmp_path, 2), "committed_at", "2020-01-01T00:00:00.000000Z")
    link = r"manifest .*00003\.json pins batch 2's manifest .* one of the two was edited"
    # read after batch 2: what batch 2 was, through the link back to it
    _stops_every_reader(tmp_path, link, "one of the two was edited", after=2)


def test_the_newest_manifest_edited_is_found_by_the_checkpoints_pin(tmp_path: Path) -> None:
    _zone(tmp_path)
    _edit(_manifest(tmp_path, 3), "transactions", 7)
    pinned = r"checkpoint .* pins batch 3's manifest .* the manifest was edited after its commit"
    _stops_every_reader(tmp_path, pinned, "the manifest was edited after its commit", after=1)


def test_a_link_removed_is_an_edit(tmp_path: Path) -> None:
    _zone(tmp_path)
    path = _manifest(tmp_path, 2)
    data = json.loads(path.read_text())
    del data["previous_sha256"]
    path.write_text(json.dumps(data))
    with pytest.raises(IntegrityError, match=r"00002\.json has no link to batch 1's manifest"):
        read_manifests(tmp_path)


def test_manifests_from_before_links_read_as_before_and_the_next_links_to_them(
    tmp_path: Path,
) -> None:
    rows = _zone(tmp_path, 2)
    for batch in (1, 2):
        path = _manifest(tmp_path, batch)
        data = json.loads(path.read_text())
        del data["previous_sha256"]
        path.write_text(json.dumps(data))
    checkpoint = tmp_path / "_state" / "checkpoint.json"
    data = json.loads(checkpoint.read_text())
    del data["manifest_sha256"]
    checkpoint.write_text(json.dumps(data))
    assert [m.batch for m in read_manifests(tmp_path).manifests] == [1, 2]
    zone = LandingZone(SinkConfig(root=str(tmp_path)))
    zone.recover()
    _land(zone, rows, 2)
    manifests = read_manifests(tmp_path).manifests
    assert [m.linked for m in manifests] == [False, False, True]
    assert manifests[2].previous_pin == manifests[1].sha256
