"""``status``, ``checkpoint show`` and ``check`` without a hand-written config (``targets``):
``--landing DIR``, the demo's own settings by default, and a clear error (exit 2, the absolute
path looked at) when no landing zone is where the path points. Landing zones here are written
by the real commit protocol; a live daemon and the real demo are in tests/live."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from replicator.binlog.gtid import MariadbGtidPosition
from replicator.binlog.position import StreamPosition
from replicator.cli import main
from replicator.config import SinkConfig
from replicator.embedded.demo import DemoRecord, default_server_dir
from replicator.sink.identity import read_identity
from replicator.sink.landing import LandingZone
from replicator.sink.lock import LandingLock
from tests.harness import free_tcp_port


def _landing_zone(root: Path, batches: int = 2) -> None:
    zone = LandingZone(SinkConfig(root=str(root)))
    checkpoint = zone.recover()
    for number in range(1, batches + 1):
        end = StreamPosition(
            "mysql-bin.000001", 1000 + number, MariadbGtidPosition.parse(f"0-1-{number}")
        )
        checkpoint = zone.begin(checkpoint).commit(end, checkpoint.next_seq)


def _cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


def demo_landing_zone(landing: Path, batches: int = 3) -> str:
    """A landing zone of ``batches`` with the record the demo writes next to it
    (``embedded.demo.start_demo``); returns its id."""
    _landing_zone(landing, batches)
    landing_id = read_identity(landing)
    assert landing_id is not None
    DemoRecord(str(landing), landing_id, "127.0.0.1", free_tcp_port()).write(
        default_server_dir(landing)
    )
    return landing_id


def _json(text: str) -> dict[str, Any]:
    data = json.loads(text)
    assert isinstance(data, dict)
    return data


def test_checkpoint_show_and_status_read_a_landing_zone_without_a_config(tmp_path: Path) -> None:
    root = tmp_path / "landing"
    _landing_zone(root, 2)

    code, out, err = _cli("checkpoint", "show", "--landing", str(root))
    assert (code, err) == (0, "")
    assert _json(out)["position"] == {
        "file": "mysql-bin.000001",
        "position": 1002,
        "mariadb_gtid": "0-1-2",
    }

    code, out, err = _cli("status", "--landing", str(root), "--json")
    assert (code, err) == (0, "")
    report = _json(out)
    assert report["landing"] == str(root)
    assert report["landing_id"] == read_identity(root)
    assert report["checkpoint"]["batch"] == 2
    assert report["daemon"] == {
        "reachable": False,
        "why": "no running daemon recorded in the landing zone's lock",
    }
    assert "source" not in report  # no config: the source is unknown

    code, out, _ = _cli("status", "--landing", str(root))
    assert code == 0
    assert "source        not asked (--no-source, or --landing: no config names it)" in out


def test_status_asks_the_http_port_the_running_daemon_recorded(tmp_path: Path) -> None:
    root = tmp_path / "landing"
    _landing_zone(root, 1)
    port = free_tcp_port()  # nothing listens: the report names the address it tried
    lock = LandingLock(root).acquire("replicator run", server_id=1)
    lock.note(http_host="0.0.0.0", http_port=port)
    try:
        code, out, _ = _cli("status", "--landing", str(root), "--json")
    finally:
        lock.release()
    assert code == 0
    report = _json(out)
    assert report["writer"]["running"] is True
    assert report["daemon"]["reachable"] is False
    assert f"http://127.0.0.1:{port}" in report["daemon"]["why"]

    code, out, _ = _cli("status", "--landing", str(root))  # the process has let go
    assert code == 0
    assert "daemon        not running (its last writer has ended: pid" in out


def test_status_asks_a_daemon_recorded_on_an_ipv6_address(tmp_path: Path) -> None:
    root = tmp_path / "landing"
    _landing_zone(root, 1)
    port = free_tcp_port()
    lock = LandingLock(root).acquire("replicator run", server_id=1)
    lock.note(http_host="::1", http_port=port)
    try:
        code, out, _ = _cli("status", "--landing", str(root), "--json")
    finally:
        lock.release()
    assert code == 0
    assert f"http://[::1]:{port}" in _json(out)["daemon"]["why"]


def relative_root_elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A config whose ``sink.root: landing`` is relative, read from another directory
    (``elsewhere``, made the current one) than the one its landing zone is under
    (``daemon-dir``); returns the config's path."""
    _landing_zone(tmp_path / "daemon-dir" / "landing")
    config = tmp_path / "c.yaml"
    config.write_text("sink:\n  root: landing\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    return config


def test_a_relative_sink_root_read_from_another_directory_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = relative_root_elsewhere(tmp_path, monkeypatch)
    elsewhere = tmp_path / "elsewhere"

    for command in (["checkpoint", "show"], ["status", "--no-source"]):
        code, out, err = _cli(*command, "--config", str(config))
        assert (code, out) == (2, "")
        assert f"no landing zone at {elsewhere / 'landing'} (--config {config}" in err
        assert f"landing is a relative path, taken from the current directory {elsewhere}" in err
        assert "make sink.root an absolute path" in err

    code, _, err = _cli("checkpoint", "show", "--landing", "landing")
    assert code == 2
    assert f"no landing zone at {elsewhere / 'landing'} (--landing landing" in err
    assert "make --landing an absolute path" in err

    monkeypatch.chdir(tmp_path / "daemon-dir")  # where the daemon runs: found
    assert _cli("checkpoint", "show", "--config", str(config))[0] == 0


def test_a_directory_without_a_landing_zone_is_an_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    for path in (empty, tmp_path / "missing"):
        code, out, err = _cli("checkpoint", "show", "--landing", str(path))
        assert (code, out) == (2, "")
        assert f"no landing zone at {path} (--landing {path})" in err


def test_what_the_read_commands_refuse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "c.yaml"
    config.write_text("sink:\n  root: landing\n")
    code, _, err = _cli("status", "--config", str(config), "--landing", "landing")
    assert code == 2 and "not both" in err
    code, _, err = _cli("checkpoint", "show")
    assert code == 2
    assert "checkpoint show needs --config FILE or --landing DIR" in err
    assert f"{tmp_path} holds no demo landing zone either" in err
    code, _, err = _cli("check", "--config", str(config), "--host", "db", "--server-id", "7")
    assert code == 2
    assert "check takes --config or connection options, not both (--host, --server-id)" in err


def test_without_options_they_read_the_demo_landing_zone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    landing = tmp_path / "landing"
    landing_id = demo_landing_zone(landing)

    code, out, _ = _cli("checkpoint", "show")
    assert code == 0 and _json(out)["batch"] == 3
    code, out, _ = _cli("status", "--json", "--no-source")
    assert code == 0 and _json(out)["landing_id"] == landing_id
    # a landing zone whose path the record does not name is not the demo's
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    assert _cli("checkpoint", "show")[0] == 2
