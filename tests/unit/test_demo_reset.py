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
    _demo(tmp_path)
    (tmp_path / "notes.txt").write_text("mine")

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
