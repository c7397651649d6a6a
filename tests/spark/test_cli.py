"""``replicator materialize`` (the click command): output and exit codes (docs/spark.md: 0 done,
2 bad arguments, 4 data that cannot be applied exactly, 1 anything else). The command reuses
the test session's SparkSession (it only stops a session it started)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession

from replicator.binlog.values import ABSENT
from replicator.errors import ConfigError
from replicator.spark.cli import materialize, parse_keys
from tests.spark.zone import Ddl, Zone, int_col, table, text_col

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


def _state_files(out: Path) -> dict[str, str]:
    return {
        str(p.relative_to(out)): p.read_text() for p in sorted(out.rglob("_replicator_state.json"))
    }


def test_an_output_of_another_landing_zone_stops_with_exit_4(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The demo started over: a new landing zone at the same path, the old output kept."""
    landing, out = tmp_path / "landing", tmp_path / "out"
    old = Zone(landing)
    for n in range(1, 6):
        old.commit([(ITEMS, "c", (n, "old")), (LOG, "c", (n, "old"))])
    assert run("--landing", str(landing), "--out", str(out))[0] == 0
    before = _state_files(out)
    old_id = old.zone.landing_id
    shutil.rmtree(landing)
    new = Zone(landing)
    new.commit([(ITEMS, "c", (100, "new"))])
    new_id = new.zone.landing_id
    assert old_id is not None and new_id is not None and old_id != new_id

    code, stdout, stderr = run("--landing", str(landing), "--out", str(out))

    assert (code, stdout) == (4, "")
    assert f"built from landing zone {old_id}" in stderr
    assert f"{landing} is landing zone {new_id}" in stderr
    assert f"remove the output directory {out}" in stderr
    assert _state_files(out) == before  # nothing was changed
    # the fix the message names
    shutil.rmtree(out)
    assert run("--landing", str(landing), "--out", str(out))[0] == 0
    rows = spark.read.parquet(str(out / "shop" / "items")).collect()
    assert [(r["id"], r["name"]) for r in rows] == [(100, "new")]


def test_an_output_ahead_of_a_restored_landing_zone_stops_with_exit_4(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The landing zone restored from a backup taken before batch 3, which the output holds:
    batch 3 landed again (other transactions) would be taken as applied and its rows left
    out. The run stops before changing any table, also once the number has caught up;
    --full-refresh rebuilds, and later runs go on from there."""
    landing, out = tmp_path / "landing", tmp_path / "out"
    zone = Zone(landing)
    for n in range(1, 3):
        zone.commit([(ITEMS, "c", (n, "a")), (LOG, "c", (n, "a"))])
    shutil.copytree(landing, tmp_path / "backup")
    zone.commit([(ITEMS, "c", (3, "lost")), (LOG, "c", (3, "lost"))])
    assert run("--landing", str(landing), "--out", str(out))[0] == 0
    before = _state_files(out)
    shutil.rmtree(landing)
    shutil.copytree(tmp_path / "backup", landing)

    code, stdout, stderr = run("--landing", str(landing), "--out", str(out))
    assert (code, stdout) == (4, "")
    assert f"holds batches up to 3, but the landing zone {landing} ends at batch 2" in stderr
    assert "--full-refresh" in stderr
    again = Zone(landing)  # the daemon goes on from the restored checkpoint: batch 3 again
    again.commit([(ITEMS, "c", (30, "again"))])
    code, stdout, stderr = run("--landing", str(landing), "--out", str(out))
    assert (code, stdout) == (4, "")
    assert "holds another batch 3" in stderr
    assert _state_files(out) == before  # nothing was changed

    assert run("--landing", str(landing), "--out", str(out), "--full-refresh")[0] == 0
    again.commit([(LOG, "c", (40, "later"))])
    assert run("--landing", str(landing), "--out", str(out))[0] == 0
    items = spark.read.parquet(str(out / "shop" / "items")).collect()
    assert sorted((r["id"], r["name"]) for r in items) == [(1, "a"), (2, "a"), (30, "again")]
    log = spark.read.parquet(str(out / "shop" / "log")).collect()
    assert sorted((r["a"], r["b"]) for r in log) == [(1, "a"), (2, "a"), (40, "later")]


def test_an_output_from_before_ids_adopts_the_id_once(spark: SparkSession, tmp_path: Path) -> None:
    landing, out = tmp_path / "landing", tmp_path / "out"
    zone = Zone(landing)
    zone.commit([(ITEMS, "c", (1, "a"))])
    assert run("--landing", str(landing), "--out", str(out), "--tables", "shop.items")[0] == 0
    (path,) = out.rglob("_replicator_state.json")
    data = json.loads(path.read_text())
    assert data.pop("landing_id") == zone.zone.landing_id
    path.write_text(json.dumps(data))  # as a materialize from before landing zone ids left it
    zone.commit([(ITEMS, "c", (2, "b"))])

    code, stdout, _ = run("--landing", str(landing), "--out", str(out), "--tables", "shop.items")
    assert code == 0
    assert stdout == (
        "shop.items: merged, 1 batches, 1 changes -> 2 rows (up to batch 2); the state now "
        f"records landing zone {zone.zone.landing_id} (it was built before landing zones had "
        "ids)\n"
    )
    (path,) = out.rglob("_replicator_state.json")  # the merge wrote a new version
    assert json.loads(path.read_text())["landing_id"] == zone.zone.landing_id
    code, stdout, _ = run("--landing", str(landing), "--out", str(out), "--tables", "shop.items")
    assert (code, stdout) == (
        0,
        "shop.items: unchanged, 0 batches, 0 changes -> 2 rows (up to batch 2)\n",
    )


def test_an_output_from_before_ids_ahead_of_the_landing_zone_stops(
    spark: SparkSession, tmp_path: Path
) -> None:
    landing, out = tmp_path / "landing", tmp_path / "out"
    zone = Zone(landing)
    for n in range(1, 4):
        zone.commit([(ITEMS, "c", (n, "a"))])
    assert run("--landing", str(landing), "--out", str(out))[0] == 0
    (path,) = out.rglob("_replicator_state.json")
    data = json.loads(path.read_text())
    del data["landing_id"]
    path.write_text(json.dumps(data))
    shutil.rmtree(landing)
    Zone(landing).commit([(ITEMS, "c", (7, "new"))])

    code, _, stderr = run("--landing", str(landing), "--out", str(out))

    assert code == 4
    assert "holds batches up to 3" in stderr and "has 1 committed batches" in stderr


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


def test_a_failed_spark_read_shows_the_java_cause_and_the_s3a_fix(spark: SparkSession) -> None:
    """The error Spark gives for an s3a:// path without the hadoop-aws jar, as materialize
    reports it: not only "An error occurred while calling o27.parquet"."""
    from replicator.spark.cli import spark_failure

    with pytest.raises(Exception, match="An error occurred while calling") as failed:  # Py4J
        spark.read.parquet("s3a://landing-bucket/zone/shop/orders/part-1.parquet").collect()
    message, hint = spark_failure(failed.value)
    assert "An error occurred while calling" in message
    assert "UnsupportedFileSystemException" in message or "ClassNotFoundException" in message
    assert "s3a" in message
    assert "org.apache.hadoop:hadoop-aws" in hint and "docs/spark.md" in hint
    assert spark_failure(ValueError("plain")) == ("plain", "")


def test_a_first_build_says_built_whatever_its_batches_hold(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A table whose first batch holds its CREATE record: built, not "rebuilt for" it."""
    zone = Zone(tmp_path / "landing")
    zone.commit([Ddl("create", "shop.items"), (ITEMS, "c", (1, "a"))])
    code, stdout, stderr = run("--landing", str(zone.root), "--out", str(tmp_path / "out"))
    assert (code, stderr) == (0, "")
    assert stdout == "shop.items: built, 1 batches, 1 changes -> 1 rows (up to batch 1)\n"
