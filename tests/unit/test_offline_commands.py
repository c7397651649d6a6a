"""The commands that never connect to the source read only the sections they use, so they
run where the source's password variable is not set (a laptop, a CI job, a cron host)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from replicator.cli import main
from replicator.config import SinkConfig
from replicator.sink.landing import LandingZone

UNSET = "REPLICATOR_TEST_PASSWORD_NOBODY_SET"


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv(UNSET, raising=False)
    root = tmp_path / "landing"
    LandingZone(SinkConfig(root=str(root))).recover()  # an empty landing zone, with its id
    path = tmp_path / "c.yaml"
    path.write_text(
        f"source:\n  host: 127.0.0.1\n  user: repl\n  password_env: {UNSET}\n"
        f"sink:\n  root: {root}\nservice:\n  http_enabled: false\n"
    )
    return path


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (("checkpoint", "show", "--config"), 0, '"next_seq": 1'),
        (("checkpoint", "set", "--gtid", "0-1-5", "--config"), 0, "checkpoint set to"),
        (("status", "--no-source", "--json", "--config"), 0, '"landing"'),
        (("schema", "show", "--config"), 2, "no schema history yet"),  # nothing landed yet
        (("snapshot", "--tables", "shop.orders", "--config"), 0, "snapshot requested"),
        (("compact", "--config"), 0, ""),
    ],
)
def test_an_offline_command_needs_no_source_password(
    config: Path, args: tuple[str, ...], code: int, says: str
) -> None:
    result = CliRunner().invoke(main, [*args, str(config)])
    assert "password" not in result.output, result.output
    assert result.exit_code == code, result.output
    assert says in result.output


def test_run_still_demands_it(config: Path) -> None:
    result = CliRunner().invoke(main, ["run", "--config", str(config), "--for", "0.1"])
    assert result.exit_code == 2, result.output
    assert "source.password_env: names an environment variable that is not set" in result.output


def test_checkpoint_set_writes_what_show_reads(config: Path) -> None:
    CliRunner().invoke(main, ["checkpoint", "set", "--config", str(config), "--gtid", "0-1-5"])
    shown = CliRunner().invoke(main, ["checkpoint", "show", "--config", str(config)])
    assert json.loads(shown.output)["position"]["mariadb_gtid"] == "0-1-5"


@pytest.mark.parametrize(("command", "code"), [("status", 0), ("check", 1)])
def test_commands_that_ask_the_source_need_no_broker_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str, code: int
) -> None:
    """``status`` and ``check`` ask the source, never the broker: the source's password is
    read, the mqtt section is not (the source's port is closed: status reports it, check
    exits 1; a config error would be 2)."""
    monkeypatch.delenv(UNSET, raising=False)
    monkeypatch.setenv("REPLICATOR_TEST_SOURCE_PASSWORD", "x")
    root = tmp_path / "landing"
    LandingZone(SinkConfig(root=str(root))).recover()
    path = tmp_path / "c.yaml"
    path.write_text(
        "source:\n  host: 127.0.0.1\n  port: 1\n  password_env: REPLICATOR_TEST_SOURCE_PASSWORD\n"
        f"  connect_timeout: 0.5\nsink:\n  root: {root}\nservice:\n  http_enabled: false\n"
        f"mqtt:\n  enabled: true\n  username: u\n  password_env: {UNSET}\n"
    )
    result = CliRunner().invoke(main, [command, "--config", str(path)])
    assert "mqtt.password_env" not in result.output, result.output
    assert result.exit_code == code, result.output
    assert "cannot reach 127.0.0.1:1" in result.output
