"""``replicator run --demo-reset`` removes the demo's own directories and nothing else.

The directories are real: a landing zone written by the commit protocol, an output written by
``spark.state`` (as materialize does), and a server directory with what ``MariaDBServer``
leaves in one (its datadir marker) and the record ``start_demo`` writes. The full cycle with
the real demo server is in tests/live/test_demo_cli.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from replicator.binlog.gtid import MariadbGtidPosition
from replicator.binlog.position import StreamPosition
from replicator.cli import main
from replicator.config import SinkConfig
from replicator.embedded.demo import DemoRecord, default_output, default_server_dir
from replicator.embedded.mariadb import DATADIR_MARKER
from replicator.embedded.reset import reset_demo
from replicator.errors import ConfigError
from replicator.sink.identity import read_identity
from replicator.sink.landing import LandingZone
from replicator.sink.lock import LandingLock
from replicator.spark import state


def _landing_zone(root: Path) -> str:
    zone = LandingZone(SinkConfig(root=str(root)))
    checkpoint = zone.recover()
    end = StreamPosition("mysql-bin.000001", 1000, MariadbGtidPosition.parse("0-1-1"))
    zone.begin(checkpoint).commit(end, checkpoint.next_seq)
    assert zone.landing_id is not None
    return zone.landing_id


def _output(out: Path, table: str, landing: Path, landing_id: str | None) -> None:
    def write(directory: Path) -> int:
        directory.mkdir(parents=True)
        (directory / "part-0.parquet").write_bytes(b"rows")
        return 1

    with state.lock(out):
        database, _, name = table.partition(".")
        record = state.TableState(
            table=table,
            landing=str(landing.resolve()),
            mode="batch",
            last_batch=1,
            stream_batch=-1,
            last_seq=1,
            key=[],
            keep_metadata=False,
            allow_unknown=False,
            schema="",
            rows=1,
            lineage=True,
            landing_id=landing_id,
        )
        state.publish(out / database / name, write, record)


def _demo(cwd: Path) -> tuple[Path, Path, Path]:
    """A demo as it stands after `replicator run` and `replicator materialize`."""
    landing = cwd / "landing"
    landing_id = _landing_zone(landing)
    server_dir = default_server_dir(landing)
    (server_dir / "data").mkdir(parents=True)
    (server_dir / DATADIR_MARKER).write_text("")
    DemoRecord(str(landing), landing_id, "127.0.0.1", 3307).write(server_dir)
    output = default_output(landing)
    _output(output, "shop.orders", landing, landing_id)
    _output(output, "shop.customers", landing, None)  # from before landing zone ids
    return landing, server_dir, output


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_the_demo_is_removed_and_each_directory_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    landing, _, _ = _demo(tmp_path)
    (tmp_path / "notes.txt").write_text("mine")
    (landing / "_compactions").mkdir()
    (landing / "_compactions" / f"{1:020d}.intent.json").write_text("{}")  # a compact killed

    lines = reset_demo(Path("landing"))

    assert lines == [
        "removed landing/ (the demo's landing zone, 1 batches)",
        "removed .replicator-demo/ (the demo's MariaDB server and its binlog)",
        "removed current/ (materialized from it, 2 tables)",
    ]
    assert _files(tmp_path) == ["notes.txt"]
    assert reset_demo(Path("landing")) == ["nothing to remove: no demo at landing/"]


def test_a_landing_zone_that_is_not_the_demos_stops_the_reset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A config's sink.root at the demo's path (the default ./landing): another id."""
    monkeypatch.chdir(tmp_path)
    landing, _, _ = _demo(tmp_path)
    demo_id = read_identity(landing)
    _swap_landing_zone(landing)
    before = _files(tmp_path)

    with pytest.raises(ConfigError) as caught:
        reset_demo(Path("landing"))

    assert f"but the demo filled landing zone {demo_id}" in str(caught.value)
    assert "nothing was removed" in str(caught.value)
    assert _files(tmp_path) == before


def _swap_landing_zone(landing: Path) -> None:
    for path in sorted(landing.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    _landing_zone(landing)


def test_a_landing_zone_without_a_demo_record_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _landing_zone(tmp_path / "landing")
    before = _files(tmp_path)
    with pytest.raises(ConfigError, match="is not known as the demo's landing zone"):
        reset_demo(Path("landing"))
    assert _files(tmp_path) == before


def test_a_running_demo_is_not_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    landing, _, _ = _demo(tmp_path)
    lock = LandingLock(landing).acquire("replicator run")
    before = _files(tmp_path)
    try:
        with pytest.raises(ConfigError, match="stop the running demo first"):
            reset_demo(Path("landing"))
    finally:
        lock.release()
    assert _files(tmp_path) == before


def test_an_output_of_another_landing_zone_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _, _, output = _demo(tmp_path)
    other = tmp_path / "prod-landing"
    _output(output, "crm.accounts", other, _landing_zone(other))

    lines = reset_demo(Path("landing"))

    assert lines[-1] == (
        f"kept current/: crm.accounts in it was built from another landing zone ({other.resolve()})"
    )
    assert (output / "crm" / "accounts").is_symlink()
    assert not (tmp_path / "landing").exists()


def test_the_cli_never_resets_a_configured_landing_zone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _demo(tmp_path)
    config = tmp_path / "c.yaml"
    config.write_text("source:\n  host: db\nsink:\n  root: landing\n")
    before = _files(tmp_path)

    result = CliRunner().invoke(main, ["run", "--demo-reset", "--config", str(config)])
    assert result.exit_code == 2
    assert "never removes a landing zone named by a config" in result.stderr

    monkeypatch.setenv("REPLICATOR_SOURCE__HOST", "db")
    result = CliRunner().invoke(main, ["run", "--demo-reset"])
    assert result.exit_code == 2
    assert "never removes a landing zone named by a config" in result.stderr
    assert _files(tmp_path) == before


def test_a_file_of_the_users_in_the_landing_zone_stops_the_reset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The landing zone is the demo's, but a file the layout does not place there is in it
    (a user's own): nothing is removed, and the file is named."""
    monkeypatch.chdir(tmp_path)
    landing, _, _ = _demo(tmp_path)
    (landing / "my-export.csv").write_text("mine")
    (landing / "shop" / "orders").mkdir(parents=True)
    (landing / "shop" / "orders" / "notes.txt").write_text("mine")
    before = _files(tmp_path)

    with pytest.raises(ConfigError) as caught:
        reset_demo(Path("landing"))

    assert "holds what is not the landing zone's: my-export.csv, shop/orders/notes.txt" in str(
        caught.value
    )
    assert "nothing was removed" in str(caught.value)
    assert _files(tmp_path) == before


def test_a_landing_zone_that_holds_the_current_directory_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run --landing .` made the current directory the demo's landing zone: a reset from
    there would remove the directory the user stands in (their other files with it)."""
    landing, _, _ = _demo(tmp_path)
    monkeypatch.chdir(landing)
    before = _files(tmp_path)

    with pytest.raises(ConfigError, match="holds the current directory"):
        reset_demo(Path("."))

    assert _files(tmp_path) == before


def test_a_project_directory_that_the_demo_landed_into_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run --landing project`: the demo landed into a directory of the user's."""
    project = tmp_path / "project"
    _landing_zone(project)
    (project / "src").mkdir()
    (project / "src" / "main.py").write_text("mine")
    server_dir = default_server_dir(project)
    (server_dir / "data").mkdir(parents=True)
    (server_dir / DATADIR_MARKER).write_text("")
    DemoRecord(str(project), read_identity(project) or "", "127.0.0.1", 3307).write(server_dir)
    monkeypatch.chdir(tmp_path)
    before = _files(tmp_path)

    with pytest.raises(ConfigError, match=r"is not the landing zone's: src/main\.py"):
        reset_demo(Path("project"))

    assert _files(tmp_path) == before


def test_an_output_without_a_demo_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No demo here at all, but a current/ with a materialize lock file (of some other run)
    and the user's own files: kept."""
    monkeypatch.chdir(tmp_path)
    output = tmp_path / "current"
    (output / "reports").mkdir(parents=True)
    (output / state.LOCK_FILE).write_bytes(b"")
    (output / "reports" / "q3.csv").write_text("mine")

    lines = reset_demo(Path("landing"))

    assert lines == [
        "kept current/: no demo record names the landing zone it would be materialized from"
    ]
    assert _files(output) == [state.LOCK_FILE, "reports", "reports/q3.csv"]


def test_files_of_the_users_beside_the_demos_tables_keep_the_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _, _, output = _demo(tmp_path)
    (output / "analysis").mkdir()
    (output / "analysis" / "notebook.ipynb").write_text("{}")
    (output / "shop" / "orders.csv").write_text("mine")

    lines = reset_demo(Path("landing"))

    assert lines[-1] == (
        "kept current/: it holds what materialize did not write: analysis/notebook.ipynb, "
        "shop/orders.csv"
    )
    assert (output / "analysis" / "notebook.ipynb").is_file()
    assert (output / "shop" / "orders").is_symlink()
    assert not (tmp_path / "landing").exists()
