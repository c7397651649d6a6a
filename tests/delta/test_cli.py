"""``replicator materialize --format delta`` from the command line: one line per table,
``--optimize`` compacts and vacuums without changing a row or losing the batch a table holds,
and the Delta-only options are refused with the Parquet output."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from deltalake import DeltaTable

from replicator.cli import main
from tests.delta.test_lifecycle import ITEMS, LOG, outputs
from tests.spark.zone import Zone, expected_tables

pytestmark = pytest.mark.delta


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["materialize", *args], catch_exceptions=False)
    return result.exit_code, result.output


def test_materialize_then_optimize(tmp_path: Path) -> None:
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    args = ("--format", "delta", "--landing", str(zone.root), "--out", str(out))
    for batch in range(1, 6):
        zone.commit(
            [(ITEMS, "c", (batch * 10 + i, f"b{batch}")) for i in range(3)]
            + [(LOG, "c", (batch, "x"))]
        )
        code, text = run(*args)
        assert code == 0, text
    assert "shop.items: merged, 1 batches, 3 changes -> 15 rows (up to batch 5)" in text
    items = DeltaTable(str(out / "shop" / "items"))
    assert len(items.file_uris()) == 5
    app = next(iter(items.history(1)))  # the last commit: a MERGE of this run
    assert app["operation"] == "MERGE"

    code, text = run(*args, "--optimize", "--retention-hours", "0")
    assert code == 0, text
    assert "shop.items: optimized, 5 files -> 1; 5 files of old versions vacuumed" in text
    assert len(DeltaTable(str(out / "shop" / "items")).file_uris()) == 1
    assert outputs(out) == expected_tables(zone)

    zone.commit([(ITEMS, "u", (10, "again"), (10, "b1"))])
    code, text = run(*args)
    assert code == 0, text
    assert "shop.items: merged, 1 batches, 1 changes -> 15 rows (up to batch 6)" in text
    assert "shop.log: unchanged" in text
    assert outputs(out) == expected_tables(zone)


def test_delta_only_options_need_the_delta_format(tmp_path: Path) -> None:
    zone = Zone(tmp_path / "landing")
    zone.commit([(ITEMS, "c", (1, "a"))])
    code, text = run("--landing", str(zone.root), "--out", str(tmp_path / "o"), "--follow")
    assert code == 2
    assert "--follow needs --format delta" in text


def test_parallel_needs_the_parquet_format(tmp_path: Path) -> None:
    zone = Zone(tmp_path / "landing")
    zone.commit([(ITEMS, "c", (1, "a"))])
    out = tmp_path / "o"
    code, text = run(
        "--landing", str(zone.root), "--out", str(out), "--format", "delta", "--parallel", "2"
    )
    assert code == 2
    assert "--parallel needs --format parquet" in text
    assert not out.exists()


def test_a_directory_without_a_landing_zone_is_refused(tmp_path: Path) -> None:
    """A mistyped --landing (an existing directory) exits 2, not 0 with nothing selected."""
    empty = tmp_path / "not-a-landing-zone"
    empty.mkdir()
    out = tmp_path / "o"
    code, text = run("--format", "delta", "--landing", str(empty), "--out", str(out))
    assert code == 2
    assert f"no landing zone at {empty} (no _state/ or _manifests/ there)" in text
    assert not out.exists()


def test_a_table_that_fails_does_not_stop_the_others(tmp_path: Path) -> None:
    """docs/spark.md, Exit codes (both formats): the failed table keeps its output, the
    others are brought up to date, and the error names the table, its output and the OS's
    cause, which delta-rs's own first line ("Generic LocalFileSystem error") does not."""
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    zone.commit([(ITEMS, "c", (1, "a")), (LOG, "c", (1, "x"))])
    (out / "shop").mkdir(parents=True)
    (out / "shop" / "items").write_text("a file where the table's output goes")
    code, text = run("--format", "delta", "--landing", str(zone.root), "--out", str(out))
    assert code == 1, text
    where = out / "shop" / "items"
    assert text.splitlines() == [
        f"error: table shop.items: cannot read the output {where}: Not a directory (Generic "
        "LocalFileSystem error) (free space on the output's filesystem or fix its permissions, "
        "then run again: the table keeps its last commit)",
        f"error: materialize failed for table shop.items: cannot read the output {where}: Not a "
        "directory (Generic LocalFileSystem error); 1 other tables are up to date",
    ]
    assert outputs(out) == {"shop.log": expected_tables(zone)["shop.log"]}

    where.unlink()
    code, text = run("--format", "delta", "--landing", str(zone.root), "--out", str(out))
    assert code == 0, text
    assert outputs(out) == expected_tables(zone)
