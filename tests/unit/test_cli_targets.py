"""What a new user meets on the command line: which landing zone each command acts on, that a
command that writes never makes a new landing zone at a mistaken path, the environment as a
config (as for ``run``), and hints that fit the command that prints them.

Landing zones here are written by the real commit protocol; tests/live/test_cli_new_user.py
has the cases that need a server."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from replicator.cli import main
from replicator.config import SinkConfig, load_config
from replicator.embedded import demo, mariadb
from replicator.embedded.demo import default_server_dir, start_demo
from replicator.errors import ConfigError, ReplicatorError
from replicator.metrics import Metrics, MetricsServer
from replicator.sink.landing import LandingZone
from replicator.sink.lock import LandingLock
from replicator.snapshot.requests import read_requests
from replicator.source import connection, server_info
from replicator.source.server_info import BinlogFile
from tests.harness import free_tcp_port
from tests.unit.test_object_store import _end
from tests.unit.test_read_commands import (
    _cli,
    _json,
    _landing_zone,
    demo_landing_zone,
    relative_root_elsewhere,
)
from tests.unit.test_verify import _history

ROOT = Path(__file__).resolve().parents[2]
UNSET = "REPLICATOR_TEST_PASSWORD_NOBODY_SET"


@pytest.fixture(autouse=True)
def _no_source_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("REPLICATOR_") and "__" in name:
            monkeypatch.delenv(name)


# -- 2. the commands that write need a landing zone that is there -----------------------------

WRITERS = [
    ("checkpoint", "set", "--gtid", "0-1-5"),
    ("snapshot", "--tables", "shop.orders"),
    ("compact",),
]


@pytest.mark.parametrize("command", WRITERS, ids=lambda c: c[0])
def test_a_writing_command_never_makes_a_landing_zone_at_a_relative_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: tuple[str, ...]
) -> None:
    config = relative_root_elsewhere(tmp_path, monkeypatch)
    elsewhere = tmp_path / "elsewhere"

    code, out, err = _cli(*command, "--config", str(config))

    assert code == 2, out + err
    assert f"no landing zone at {elsewhere / 'landing'} (--config {config}" in err
    assert f"taken from the current directory {elsewhere}" in err
    assert list(elsewhere.iterdir()) == []  # nothing made

    monkeypatch.chdir(tmp_path / "daemon-dir")  # where the daemon runs: found
    code, out, err = _cli(*command, "--config", str(config))
    assert code == 0, out + err


@pytest.mark.parametrize("command", WRITERS, ids=lambda c: c[0])
def test_a_writing_command_refuses_an_absolute_root_with_no_landing_zone(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    missing = tmp_path / "typo"
    config = tmp_path / "c.yaml"
    config.write_text(f"sink:\n  root: {missing}\n")
    code, _, err = _cli(*command, "--config", str(config))
    assert code == 2
    assert f"no landing zone at {missing} (--config {config})" in err
    assert not missing.exists()


# -- 4. --landing and the demo's landing zone for schema show, compact, snapshot, set ----------


def test_the_landing_zone_commands_take_landing(tmp_path: Path) -> None:
    root = tmp_path / "landing"
    _landing_zone(root, 2)

    code, out, err = _cli("schema", "show", "--landing", str(root))
    assert code == 2  # read (these batches were committed without one), not refused for want
    assert f"{root} has no schema history" in err  # of --config
    code, out, err = _cli("snapshot", "--landing", str(root), "--tables", "shop.orders")
    assert code == 0, err
    assert "snapshot requested: shop.orders" in out
    assert len(read_requests(root)) == 1
    code, out, err = _cli("compact", "--landing", str(root))
    assert code == 0, err
    code, out, err = _cli("checkpoint", "set", "--landing", str(root), "--gtid", "0-1-1")
    assert code == 0, err
    assert "checkpoint set to gtid 0-1-1" in out
    shown = _json(_cli("checkpoint", "show", "--landing", str(root))[1])
    assert shown["position"]["mariadb_gtid"] == "0-1-1"


def test_schema_show_says_when_its_table_glob_matches_nothing(tmp_path: Path) -> None:
    zone = LandingZone(SinkConfig(root=str(tmp_path)))
    zone.recover()
    zone.begin(zone.checkpoints.load()).commit(_end(1), 1, history=_history())

    code, out, err = _cli("schema", "show", "--landing", str(tmp_path), "--table", "shop.*")
    assert code == 0, err
    assert "\nshop.t\n" in out and err == ""
    code, out, err = _cli("schema", "show", "--landing", str(tmp_path), "--table", "Shop.T")
    assert code == 0, err
    assert "shop.t" not in out
    assert err == (
        "no table in the schema history matches --table 'Shop.T' (db.table, globs allowed, "
        "case matters); it has shop.t\n"
    )


def test_without_options_they_act_on_the_demo_landing_zone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    landing = tmp_path / "landing"
    demo_landing_zone(landing)

    code, _, err = _cli("schema", "show")  # the demo's is read (these batches have no history)
    assert code == 2 and "landing has no schema history" in err
    assert _cli("snapshot", "--tables", "shop.*")[0] == 0
    assert len(read_requests(landing)) == 1
    assert _cli("compact")[0] == 0
    code, _, err = _cli("checkpoint", "set", "--gtid", "0-1-2")
    assert code == 0, err
    assert _json(_cli("checkpoint", "show")[1])["position"]["mariadb_gtid"] == "0-1-2"

    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")  # no demo here: each says what it needs
    for command in (("schema", "show"), ("compact",), ("checkpoint", "set", "--gtid", "0-1-1")):
        code, _, err = _cli(*command)
        assert code == 2
        assert "needs --config FILE or --landing DIR" in err
    assert list((tmp_path / "sub").iterdir()) == []


# -- 3. the environment as the config, as for `run` -------------------------------------------


def test_status_and_checkpoint_show_read_the_environment_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "env-landing"
    _landing_zone(root, 2)
    env = {
        "REPLICATOR_SOURCE__HOST": "127.0.0.1",
        "REPLICATOR_SOURCE__PORT": str(free_tcp_port()),
        "REPLICATOR_SINK__ROOT": str(root),
        "REPLICATOR_SERVICE__HTTP_ENABLED": "false",
    }
    code, out, err = _cli("checkpoint", "show", env=env)
    assert code == 0, err
    assert _json(out)["batch"] == 2
    code, out, err = _cli("status", "--json", "--no-source", env=env)
    assert code == 0, err
    assert _json(out)["landing"] == str(root)


def test_check_asks_the_source_the_environment_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    port = free_tcp_port()  # nothing listens: check exits 1 naming where it asked
    env = {
        "REPLICATOR_SOURCE__HOST": "127.0.0.1",
        "REPLICATOR_SOURCE__PORT": str(port),
        "REPLICATOR_SOURCE__PASSWORD": "x",
        "REPLICATOR_SOURCE__CONNECT_TIMEOUT": "2",
    }
    code, out, err = _cli("check", env=env)
    assert code == 1, out + err
    assert "the environment" in err
    assert f"127.0.0.1:{port}" in err
    assert "3306" not in err
    # 8a: check asks once; nothing retries it
    assert "retries this on its own" not in err


# -- 5. status with the source's password variable unset --------------------------------------


def test_status_reports_the_landing_zone_when_the_source_password_is_unset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(UNSET, raising=False)
    root = tmp_path / "landing"
    _landing_zone(root, 2)
    config = tmp_path / "c.yaml"
    config.write_text(
        f"source:\n  password_env: {UNSET}\nsink:\n  root: {root}\n"
        "service:\n  http_enabled: false\n"
    )
    code, out, err = _cli("status", "--config", str(config))
    assert code == 0, err
    assert f"landing zone  {root}" in out
    assert "source        not asked: source.password_env: names an environment variable" in out
    assert "--no-source" in out
    code, out, _ = _cli("status", "--config", str(config), "--json")
    assert code == 0
    assert "source.password_env" in _json(out)["source_not_asked"]


# -- 6. a checkpoint the server's binlog does not hold ---------------------------------------


def _fake_server(monkeypatch: pytest.MonkeyPatch, files: tuple[BinlogFile, ...]) -> None:
    info = SimpleNamespace(
        version_string="10.11.0-MariaDB",
        binlog_end="mysql-bin.000001:400",
        gtid_binlog_pos="0-9-3",
        gtid_executed=None,
        binlog_files=files,
    )
    monkeypatch.setattr(connection, "open_connection", lambda *a, **k: SimpleNamespace(close=int))
    monkeypatch.setattr(server_info, "server_info", lambda conn: info)


@pytest.mark.parametrize(
    ("files", "says"),
    [
        ((BinlogFile("mysql-bin.000001", 400),), "past that file's end"),  # another server
        ((BinlogFile("other-bin.000001", 9000),), "has no binlog file mysql-bin.000001"),
    ],
)
def test_status_never_says_zero_behind_for_a_position_the_server_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: tuple[BinlogFile, ...], says: str
) -> None:
    root = tmp_path / "landing"
    _landing_zone(root, 2)  # checkpoint at mysql-bin.000001:1002
    config = tmp_path / "c.yaml"
    config.write_text(
        f"source:\n  password: x\nsink:\n  root: {root}\nservice:\n  http_enabled: false\n"
    )
    _fake_server(monkeypatch, files)
    code, out, err = _cli("status", "--config", str(config))
    assert code == 0, err
    assert "the checkpoint's position is not in this server's binlog" in out
    assert says in out
    assert "bytes behind" not in out
    code, out, _ = _cli("status", "--config", str(config), "--json")
    source = _json(out)["source"]
    assert "checkpoint_behind_bytes" not in source
    assert says in source["checkpoint_not_in_binlog"]


def test_status_counts_the_bytes_behind_on_the_landing_zones_own_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "landing"
    _landing_zone(root, 2)
    config = tmp_path / "c.yaml"
    config.write_text(
        f"source:\n  password: x\nsink:\n  root: {root}\nservice:\n  http_enabled: false\n"
    )
    _fake_server(monkeypatch, (BinlogFile("mysql-bin.000001", 1500),))
    code, out, _ = _cli("status", "--config", str(config))
    assert code == 0
    assert "checkpoint 498 bytes behind" in out


def test_position_missing() -> None:
    from replicator.progress import position_missing

    files = [BinlogFile("b.000001", 1000), BinlogFile("b.000002", 300)]
    assert position_missing(files, "b.000001", 1000) is None
    assert position_missing(files, "b.000002", 4) is None
    assert position_missing(files, "b.000002", 301) is not None
    assert position_missing(files, "b.000009", 4) == (
        "this server has no binlog file b.000009 (it has b.000001 to b.000002)"
    )


# -- 7. the example config's landing zone is not the demo's -----------------------------------


def test_the_example_config_lands_apart_from_the_demo() -> None:
    config = load_config(
        ROOT / "config" / "replicator.example.yaml", environ={"REPLICATOR_SOURCE_PASSWORD": "x"}
    )
    assert Path(config.sink.root) != demo.DEMO_LANDING
    assert config.sink.root.rstrip("/") not in ("landing", "./landing")
    readme = (ROOT / "README.md").read_text()
    assert f"`{config.sink.root}`" in readme


# -- 8. hints that fit the command -----------------------------------------------------------


def test_checkpoint_set_under_a_running_daemon_says_to_stop_it(tmp_path: Path) -> None:
    root = tmp_path / "landing"
    _landing_zone(root, 1)
    lock = LandingLock(root).acquire("replicator run", server_id=1)
    try:
        code, _, err = _cli("checkpoint", "set", "--landing", str(root), "--gtid", "0-1-1")
    finally:
        lock.release()
    assert code == 2
    assert "in use by another replicator process" in err
    assert "stop the daemon first" in err
    assert "its own sink.root" not in err


def test_a_busy_http_port_names_the_setting() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = MetricsServer(Metrics(), host="127.0.0.1", port=port)
        with pytest.raises(ConfigError) as caught:
            asyncio.run(server.listen())
    assert "service.http_port" in caught.value.hint
    assert "REPLICATOR_SERVICE__HTTP_PORT" in caught.value.hint


def test_a_second_demo_says_the_first_one_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The demo's server directory already has a live server: the second demo says that the
    demo runs, where its pid is, and what to do, not "use another server directory" (no
    option sets one)."""
    landing = tmp_path / "landing"

    def running(base_dir: Path) -> int:
        return 4242

    monkeypatch.setattr(demo, "mariadb_available", lambda: (True, ""))
    monkeypatch.setattr(demo, "running_server_pid", running, raising=False)
    monkeypatch.setattr(mariadb, "running_server_pid", running)
    with pytest.raises(ReplicatorError) as caught:
        start_demo(landing)
    text = str(caught.value)
    assert "the demo is already running" in text
    assert "pid 4242" in text
    assert str(default_server_dir(landing) / "mariadbd.pid") in text
    assert "another server directory" not in text


@pytest.mark.parametrize(
    ("variable", "setting"),
    [("REPLICATOR_SNK__ROOT", "snk: unknown setting"), ("REPLICATOR_SINK__ROTO", "sink.roto")],
)
def test_an_unknown_setting_from_the_environment_names_the_variable(
    variable: str, setting: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(None, environ={variable: "x"})
    assert setting in str(caught.value)
    assert variable in str(caught.value)


def test_the_same_setting_in_a_file_is_told_as_before(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("snk:\n  root: x\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    assert caught.value.args[0] == "snk: unknown setting"


# -- 1. dump --server-id, and refused next to the daemon of its config --------------------------


def test_dump_next_to_the_daemon_of_its_config_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "landing"
    _landing_zone(root, 1)
    config = tmp_path / "c.yaml"
    config.write_text(
        "source:\n  host: 127.0.0.1\n  port: 1\n  password: x\n  server_id: 7\n"
        f"sink:\n  root: {root}\n"
    )
    lock = LandingLock(root).acquire("replicator run", server_id=7, replica_host="r-1")
    try:
        result = CliRunner().invoke(main, ["dump", "--config", str(config), "--server-id", "7"])
        assert result.exit_code == 2, result.stderr
        assert f"pid {os.getpid()}" in result.stderr
        assert "server_id 7" in result.stderr
        assert "pass --server-id" in result.stderr
        # the config's own server_id, the same: refused too, naming where it comes from
        plain = CliRunner().invoke(main, ["dump", "--config", str(config)])
        assert plain.exit_code == 2, plain.stderr
        assert "source.server_id in" in plain.stderr and "pass --server-id" in plain.stderr
    finally:
        lock.release()


def test_dump_server_id_is_for_a_live_dump(tmp_path: Path) -> None:
    sample = ROOT / "tests" / "data" / "mariadb-full-metadata.000001"
    code, _, err = _cli("dump", "--binlog-file", str(sample), "--server-id", "9")
    assert code == 2
    assert "--server-id is for a live dump" in err


# -- 9. the docs -------------------------------------------------------------------------------


def test_the_docs_name_what_the_commands_do() -> None:
    operations = (ROOT / "docs" / "operations.md").read_text()
    assert "`cannot read the source's tables, retrying`" in operations
    assert "--server-id" in operations
    configuration = " ".join((ROOT / "docs" / "configuration.md").read_text().split())
    first = configuration.partition("read one YAML file")[0]
    for command in ("`check`", "`compact`", "`verify`"):
        assert command in first
