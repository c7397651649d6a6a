"""``replicator checkpoint set`` says the position it set, in the form it was given.

A GTID start has no file, and its byte position is the placeholder 4: the message must name
the GTID state and never a meaningless "position 4". A file start names file and position.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from replicator.checkpoint import CheckpointStore
from replicator.cli import main
from replicator.config import SinkConfig
from replicator.sink.landing import LandingZone
from replicator.snapshot_progress import SnapshotState

MYSQL_SET = "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    # `checkpoint set` moves the checkpoint of a landing zone `run` made, never a new one
    LandingZone(SinkConfig(root=str(tmp_path / "landing"))).recover()
    path = tmp_path / "replicator.yaml"
    path.write_text(f"sink:\n  root: {tmp_path / 'landing'}\nsource:\n  password: x\n")
    return path


@pytest.mark.parametrize(
    ("args", "said", "stored"),
    [
        (["--gtid", "0-1-100"], "checkpoint set to gtid 0-1-100", {"mariadb_gtid": "0-1-100"}),
        (
            ["--gtid", MYSQL_SET],
            f"checkpoint set to gtid set {MYSQL_SET}",
            {"mysql_gtid": MYSQL_SET},
        ),
        (
            ["--file", "mysql-bin.000003", "--pos", "1234"],
            "checkpoint set to mysql-bin.000003:1234",
            {"file": "mysql-bin.000003", "position": 1234},
        ),
    ],
)
def test_message_names_what_was_set(
    config: Path, args: list[str], said: str, stored: dict[str, object]
) -> None:
    runner = CliRunner()
    result = runner.invoke(main, ["checkpoint", "set", "--config", str(config), *args])
    assert result.exit_code == 0, result.output
    # the message is its own line (a first run also logs the landing zone id it made)
    assert said in result.output.splitlines()
    assert "position 4" not in result.output

    shown = runner.invoke(main, ["checkpoint", "show", "--config", str(config)])
    assert shown.exit_code == 0, shown.output
    position = json.loads(shown.output)["position"]
    assert {key: position.get(key) for key in stored} == stored


def test_a_snapshot_under_way_is_refused_and_held_xa_stay(config: Path, tmp_path: Path) -> None:
    """A snapshot's queue names its tables as of the checkpoint: a move would undo that (a
    replay re-takes the renames before it, and rewinds the history the names are looked up
    in), so it is refused until the snapshot is done. Once it is, only the position moves:
    held XA still waits, and the filters the snapshot was taken for stay to compare."""
    zone = LandingZone(SinkConfig(root=str(tmp_path / "landing")))
    checkpoint = zone.recover()
    under_way = SnapshotState(
        tables=("shop.items", "shop.other"), after=(1,), rows=1, filters=(("*.*",), ())
    )
    zone.checkpoints.save(dataclasses.replace(checkpoint, snapshot=under_way, xa_pending=("xa-1",)))
    move = ["checkpoint", "set", "--config", str(config), "--gtid", "0-1-100"]

    result = CliRunner().invoke(main, move)
    assert result.exit_code == 2, result.output
    assert "a snapshot is under way (2 tables to read: shop.items, shop.other)" in result.output
    assert "let the snapshot finish first" in result.output
    kept = CheckpointStore(tmp_path / "landing").load()
    assert kept is not None and kept.snapshot == under_way and not kept.moved

    done = SnapshotState(done=2, done_rows=5, filters=(("*.*",), ()))
    zone.checkpoints.save(dataclasses.replace(kept, snapshot=done))
    result = CliRunner().invoke(main, move)
    assert result.exit_code == 0, result.output
    after = CheckpointStore(tmp_path / "landing").load()
    assert after is not None
    assert after.snapshot == done
    assert after.xa_pending == ("xa-1",)
    assert after.moved
    assert after.position is not None and after.position.describe() == "gtid 0-1-100"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--file", ""], "--file is empty"),  # an unset shell variable: not "the first binlog"
        (["--file", "   "], "--file is empty"),
        (["--gtid", "0-1-5", "--pos", "1234"], "--pos 1234 is given without --file"),
        (["--pos", "1234"], "--pos 1234 is given without --file"),
        (["--gtid", "0-1-5", "--file", "mysql-bin.000002"], "not both"),
    ],
)
def test_options_the_config_would_refuse_are_refused(
    config: Path, args: list[str], says: str
) -> None:
    result = CliRunner().invoke(main, ["checkpoint", "set", "--config", str(config), *args])
    assert result.exit_code == 2, result.output
    assert says in result.output
    assert not (config.parent / "landing" / "_state" / "checkpoint.json").exists()


@pytest.mark.parametrize(("held", "given"), [("0-1-100", MYSQL_SET), (MYSQL_SET, "0-1-100")])
def test_a_gtid_of_the_other_server_kind_is_refused(config: Path, held: str, given: str) -> None:
    runner = CliRunner()
    first = runner.invoke(main, ["checkpoint", "set", "--config", str(config), "--gtid", held])
    assert first.exit_code == 0, first.output
    moved = runner.invoke(main, ["checkpoint", "set", "--config", str(config), "--gtid", given])
    assert moved.exit_code == 2, moved.output
    assert "--gtid gave a" in moved.output
    shown = runner.invoke(main, ["checkpoint", "show", "--config", str(config)])
    assert held in shown.output


def _commit_to(root: Path, gtid: str) -> None:
    """One batch (of no rows) from where the checkpoint stands to ``gtid``."""
    from replicator.binlog.gtid import MariadbGtidPosition
    from replicator.binlog.position import StreamPosition

    zone = LandingZone(SinkConfig(root=str(root)))
    checkpoint = zone.recover()
    end = StreamPosition("mysql-bin.000001", 1000, MariadbGtidPosition.parse(gtid))
    zone.begin(checkpoint).commit(end, checkpoint.next_seq)


def test_a_move_back_over_what_a_skip_left_out_is_refused(config: Path, tmp_path: Path) -> None:
    """A skip forward (0-1-5 to 0-1-9), a batch after it, then a move back before 0-1-9: the
    skipped transactions would land for the first time after later changes of their rows,
    with higher _seq, and readers would apply them over those (a row's value went back)."""
    root = tmp_path / "landing"
    _commit_to(root, "0-1-5")
    runner = CliRunner()

    def move(gtid: str) -> Any:
        return runner.invoke(main, ["checkpoint", "set", "--config", str(config), "--gtid", gtid])

    assert move("0-1-9").exit_code == 0  # a skip
    _commit_to(root, "0-1-12")
    for before in ("0-1-5", "0-1-7", "0-1-3"):
        refused = move(before)
        assert refused.exit_code == 2, refused.output
        assert f"gtid {before} is before gtid 0-1-9, where batch 2 went on after" in refused.output
        assert (
            "skipped the transactions from mysql-bin.000001:1000 (gtid 0-1-5) on" in refused.output
        )
        kept = CheckpointStore(root).load()
        assert kept is not None and kept.position is not None
        assert kept.position.describe() == "mysql-bin.000001:1000 (gtid 0-1-12)"
    assert move("0-1-9").exit_code == 0  # a replay of what landed after the skip
