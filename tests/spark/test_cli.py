"""``replicator materialize`` (the click command): output and exit codes (docs/spark.md: 0 done,
2 bad arguments, 4 data that cannot be applied exactly, 1 anything else). The command reuses
the test session's SparkSession (it only stops a session it started)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession

from replicator.binlog.values import ABSENT
from replicator.errors import ConfigError
from replicator.spark.cli import materialize, parse_keys
from tests.spark.zone import Zone, int_col, table, text_col

pytestmark = pytest.mark.spark

ITEMS = table("shop.items", int_col(0, "id"), text_col(1, "name"), key=[0])
LOG = table("shop.log", int_col(0, "a"), text_col(1, "b"))


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(materialize, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_materialize_command(spark: SparkSession, tmp_path: Path) -> None:
    zone = Zone(tmp_path / "landing")
    zone.commit([(ITEMS, "c", (1, "a")), (ITEMS, "c", (2, "b")), (LOG, "c", (1, "x"))])
    out = tmp_path / "out"

    code, stdout, stderr = run(
        "--landing", str(zone.root), "--out", str(out), "--tables", "shop.items"
    )
    assert (code, stderr) == (0, "")
    assert stdout == "shop.items: built, 1 batches, 2 changes -> 2 rows (up to batch 1)\n"
    assert sorted(r["id"] for r in spark.read.parquet(str(out / "shop" / "items")).collect()) == [
        1,
        2,
    ]
    assert not (out / "shop" / "log").exists()
    assert spark.sparkContext._jsc is not None  # the test session is still alive

    # --master is accepted; the active test session is reused, so no second one starts
    code, stdout, _ = run("--landing", str(zone.root), "--out", str(out), "--master", "local[1]")
    assert code == 0
    assert stdout.splitlines() == [
        "shop.items: unchanged, 0 batches, 0 changes -> 2 rows (up to batch 1)",
        "shop.log: built, 1 batches, 1 changes -> 1 rows (up to batch 1)",
    ]

    code, _, stderr = run("--landing", str(zone.root), "--out", str(out), "--keep-metadata")
    assert code == 2
    assert "does not match this run" in stderr and "--full-refresh" in stderr


def test_bad_arguments_exit_2(spark: SparkSession, tmp_path: Path) -> None:
    zone = Zone(tmp_path / "landing")
    zone.commit([(ITEMS, "c", (1, "a"))])
    code, _, stderr = run("--landing", str(tmp_path / "missing"), "--out", str(tmp_path / "o"))
    assert code == 2
    assert "is not a directory" in stderr
    code, _, stderr = run("--landing", str(zone.root), "--out", str(tmp_path / "o"), "--key", "id")
    assert code == 2
    assert "DB.TABLE=COLUMN" in stderr
    code, _, stderr = run(
        "--landing", str(zone.root), "--out", str(tmp_path / "o"), "--tables", "shop.nope"
    )
    assert code == 2
    assert "table shop.nope is not in the landing zone" in stderr
    code, _, stderr = run("--out", str(tmp_path / "o"))
    assert code == 2  # click: missing --landing
    code, _, stderr = run("--landing", str(zone.root), "--out", str(zone.root / "inside"))
    assert code == 2
    assert "inside the landing zone" in stderr


def test_data_that_cannot_be_applied_exits_4(spark: SparkSession, tmp_path: Path) -> None:
    zone = Zone(tmp_path / "landing")
    zone.commit([(LOG, "c", (1, ABSENT))])
    code, stdout, stderr = run("--landing", str(zone.root), "--out", str(tmp_path / "out"))
    assert (code, stdout) == (4, "")
    assert "table shop.log: a partial row image of a table without primary key" in stderr
    assert "binlog_row_image=FULL" in stderr


def test_without_pyspark_exit_2(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in [m for m in sys.modules if m.startswith("replicator.spark.")]:
        if name != "replicator.spark.cli":
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "pyspark", None)
    monkeypatch.setitem(sys.modules, "pyspark.sql", None)
    (tmp_path / "landing").mkdir()
    code, _, stderr = run("--landing", str(tmp_path / "landing"), "--out", str(tmp_path / "o"))
    assert code == 2
    assert "pip install 'replicator[spark]'" in stderr


def test_parse_keys() -> None:
    assert parse_keys(["shop.a=id", "shop.b= x , y", "shop.c="]) == {
        "shop.a": ("id",),
        "shop.b": ("x", "y"),
        "shop.c": (),
    }
    with pytest.raises(ConfigError):
        parse_keys(["shop"])
