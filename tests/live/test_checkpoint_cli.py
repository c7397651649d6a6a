"""``replicator checkpoint show|set`` around real ``replicator run --stop-at-end`` runs.

``show`` prints where the last run stopped (batch, next ``_seq``, file/position, GTID state);
``set --gtid`` and ``set --file/--pos`` move it back, and the next run lands the replayed
changes again with higher ``_seq``. A bad ``set`` exits 2 and leaves the checkpoint alone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from replicator.cli import main
from tests.harness.mariadb import MariaDBServer
from tests.live.daemon import Daemon, daemon_config, new_http_port, run_to_end

DB = "checkpoint_cli"


def _landed(root: Path) -> list[tuple[int, int]]:
    """(``_seq``, id) of every committed row change of ``DB.t``, in ``_seq`` order."""
    rows: list[tuple[int, int]] = []
    for manifest in sorted((root / "_manifests").glob("*.json")):
        for entry in json.loads(manifest.read_text())["files"]:
            if entry["table"] == f"{DB}.t":
                table = pq.read_table(root / entry["path"], columns=["_seq", "id"])
                rows.extend(zip(table["_seq"].to_pylist(), table["id"].to_pylist(), strict=True))
    return sorted(rows)


def _show(config: Path) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["checkpoint", "show", "--config", str(config)])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert isinstance(shown, dict)
    return shown


def _set(config: Path, *args: str) -> str:
    result = CliRunner().invoke(main, ["checkpoint", "set", "--config", str(config), *args])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.live
def test_show_then_replay_by_gtid_and_by_file_position(
    tmp_path: Path, mariadb_full_metadata: MariaDBServer
) -> None:
    server = mariadb_full_metadata
    server.execute(f"CREATE DATABASE {DB}")
    server.execute(f"CREATE TABLE {DB}.t (id INT PRIMARY KEY, v INT)")
    start = server.binlog_status().gtid_binlog_pos
    after = []
    for n in (1, 2, 3):
        server.execute(f"INSERT INTO {DB}.t VALUES (%s, %s)", (n, n))
        after.append(server.binlog_status())
    root = tmp_path / "landing"
    port = new_http_port()
    config = daemon_config(
        tmp_path / "c.yaml",
        server,
        root,
        start_gtid=start,
        http_port=port,
        extra=f"filters:\n  include: ['{DB}.*']\n",
    )

    run_to_end(config, tmp_path / "run1.log", port)
    first = _landed(root)
    assert [row_id for _, row_id in first] == [1, 2, 3]
    shown = _show(config)
    assert shown["batch"] == len(list((root / "_manifests").glob("*.json"))) >= 1
    assert shown["next_seq"] == first[-1][0] + 1
    assert shown["position"] == {
        "file": after[2].file,
        "position": after[2].position,
        "mariadb_gtid": after[2].gtid_binlog_pos,
    }

    # back to just after row 1, by GTID: rows 2 and 3 land again, after everything else
    assert after[0].gtid_binlog_pos in _set(config, "--gtid", after[0].gtid_binlog_pos)
    moved = _show(config)
    assert moved["position"]["mariadb_gtid"] == after[0].gtid_binlog_pos
    assert (moved["batch"], moved["next_seq"]) == (shown["batch"], shown["next_seq"])
    run_to_end(config, tmp_path / "run2.log", port)
    second = _landed(root)
    assert second[:3] == first
    assert [row_id for _, row_id in second[3:]] == [2, 3]
    assert second[3][0] >= shown["next_seq"]

    # back to just after row 2, by file and position: row 3 lands a third time
    _set(config, "--file", after[1].file, "--pos", str(after[1].position))
    assert _show(config)["position"]["position"] == after[1].position
    run_to_end(config, tmp_path / "run3.log", port)
    third = _landed(root)
    assert third[:5] == second
    assert [row_id for _, row_id in third[5:]] == [3]
    assert third[5][0] > second[-1][0]

    checkpoint = root / "_state" / "checkpoint.json"
    saved = checkpoint.read_bytes()
    bad = CliRunner().invoke(
        main, ["checkpoint", "set", "--config", str(config), "--gtid", "nonsense"]
    )
    assert bad.exit_code == 2, bad.output
    assert checkpoint.read_bytes() == saved


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "needs --gtid or --file/--pos"),
        (("--gtid", "nonsense"), "not a MariaDB GTID"),
        (("--gtid", "0-1-5", "--file", "mysql-bin.000001"), "not both"),
        (("--file", "mysql-bin.000001", "--pos", "2"), "before the first event"),
    ],
)
def test_bad_set_exits_2_and_writes_nothing(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    root = tmp_path / "landing"
    config = tmp_path / "c.yaml"
    config.write_text(f"sink:\n  root: {root}\n")
    result = CliRunner().invoke(main, ["checkpoint", "set", "--config", str(config), *args])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not (root / "_state" / "checkpoint.json").exists()


@pytest.mark.live
def test_a_checkpoint_moved_back_by_hand_is_refused_and_checkpoint_set_marks_the_replay(
    tmp_path: Path, mariadb_full_metadata: MariaDBServer
) -> None:
    """A keyless table counts every landed change, so a range landed twice unmarked would
    show rows the source does not have: a checkpoint edited back by hand stops `run` (exit 4,
    nothing lands); the same move by `checkpoint set` lands the range again as a replay."""
    server = mariadb_full_metadata
    db = "checkpoint_hand"
    server.execute(f"CREATE DATABASE {db}")
    server.execute(f"CREATE TABLE {db}.bag (v INT)")  # no primary key
    start = server.binlog_status().gtid_binlog_pos
    after = []
    for n in (1, 2, 3, 4):
        server.execute(f"INSERT INTO {db}.bag VALUES (%s)", (n,))
        after.append(server.binlog_status())
    root = tmp_path / "landing"
    port = new_http_port()
    config = daemon_config(
        tmp_path / "c.yaml",
        server,
        root,
        start_gtid=start,
        http_port=port,
        extra=f"filters:\n  include: ['{db}.*']\n",
    )
    run_to_end(config, tmp_path / "run1.log", port)
    manifests = sorted((root / "_manifests").glob("*.json"))

    checkpoint = root / "_state" / "checkpoint.json"
    edited = json.loads(checkpoint.read_text())
    assert edited["position"]["mariadb_gtid"] == after[3].gtid_binlog_pos
    edited["position"] = {
        "file": after[1].file,
        "position": after[1].position,
        "mariadb_gtid": after[1].gtid_binlog_pos,
    }
    checkpoint.write_text(json.dumps(edited))
    log = tmp_path / "run2.log"
    daemon = Daemon(config, log, port, args=("--stop-at-end",)).start()
    try:
        code = daemon.wait(120)
    finally:
        daemon.kill()
    assert code == 4, daemon.log_tail()
    assert f"but batch {edited['batch']} ended at GTID {after[3].gtid_binlog_pos}" in (
        log.read_text()
    )
    assert sorted((root / "_manifests").glob("*.json")) == manifests

    checkpoint.unlink()  # rebuilt from the manifests, as the refusal's hint says
    _set(config, "--gtid", after[1].gtid_binlog_pos)
    run_to_end(config, tmp_path / "run3.log", port)
    lines = (tmp_path / "run3.log").read_text().splitlines()
    (replaying,) = [json.loads(line) for line in lines if '"event": "replaying"' in line]
    assert replaying["replay_from"] == f"gtid {after[1].gtid_binlog_pos}"
    assert replaying["replay_until"].endswith(f"(gtid {after[3].gtid_binlog_pos})")
    new = sorted((root / "_manifests").glob("*.json"))[len(manifests) :]
    replayed = [json.loads(path.read_text()) for path in new]
    assert sum(m["rows"] for m in replayed) == 2
    assert all(m["replay"] for m in replayed if m["rows"])
