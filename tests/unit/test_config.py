"""Configuration: the example file documents every key, and every mistake exits 2 naming it.

The table below goes through the real command line (``replicator run --config``): each bad
config must stop before anything connects, with exit code 2 and a message that names the key
(and, where there is one, the bad value).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from replicator.cli import main
from replicator.config import Config, load_config

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "config" / "replicator.example.yaml"


def _keys(cls: type, prefix: str = "") -> set[str]:
    """Every settable key of a settings dataclass, dotted (``source.tls.ca_file``)."""
    out: set[str] = set()
    for f in dataclasses.fields(cls):
        default = f.default_factory() if callable(f.default_factory) else f.default  # type: ignore[misc]
        if dataclasses.is_dataclass(default):
            out |= _keys(type(default), f"{prefix}{f.name}.")
        elif f.name == "password":
            out.add(f"{prefix}password_env")  # the example shows the env form
        else:
            out.add(f"{prefix}{f.name}")
    return out


def _yaml_keys(node: object, prefix: str = "") -> set[str]:
    out: set[str] = set()
    assert isinstance(node, dict)
    for key, value in node.items():
        if isinstance(value, dict):
            out |= _yaml_keys(value, f"{prefix}{key}.")
        else:
            out.add(f"{prefix}{key}")
    return out


def test_example_documents_every_key_and_loads() -> None:
    documented = _yaml_keys(yaml.safe_load(EXAMPLE.read_text()))
    assert documented == _keys(Config)
    config = load_config(EXAMPLE, environ={"REPLICATOR_SOURCE_PASSWORD": "x"})
    assert config.source.password.reveal() == "x"
    assert config == dataclasses.replace(Config(), source=config.source)


BAD_CONFIGS: list[tuple[str, dict[str, str], str]] = [
    # (yaml text, environment, what the message must contain)
    ("source:\n  port: 70000\n", {}, "source.port: 70000"),
    ("source:\n  port: abc\n", {}, "source.port: 'abc'"),
    ("source:\n  server_id: 0\n", {}, "source.server_id: 0"),
    ("source:\n  hots: db\n", {}, "source.hots: unknown setting"),
    ("sourc:\n  host: db\n", {}, "sourc: unknown setting"),
    ("source: db.example\n", {}, "source: expected a section"),
    ("source:\n  heartbeat_seconds: -1\n", {}, "source.heartbeat_seconds: -1"),
    ("source:\n  password: a\n  password_env: B\n", {}, "source.password"),
    ("source:\n  password_env: NOT_SET_ANYWHERE\n", {}, "source.password_env"),
    ("source:\n  password_file: /nonexistent/pw\n", {}, "source.password_file"),
    ("source:\n  tls:\n    enabled: maybe\n", {}, "source.tls.enabled: 'maybe'"),
    ("source:\n  buffer_rows: 0\n", {}, "source.buffer_rows: 0"),
    ("start:\n  gtid: 0-1-5\n  file: mysql-bin.000001\n", {}, "start.gtid or start.file"),
    ("start:\n  position: 2\n", {}, "start.position: 2"),
    ("sink:\n  batch_max_rows: 0\n", {}, "sink.batch_max_rows: 0"),
    ("sink:\n  batch_max_seconds: 0\n", {}, "sink.batch_max_seconds: 0"),
    ("sink:\n  compression: lz5\n", {}, "sink.compression: 'lz5'"),
    ("sink:\n  keep_before_image: sometimes\n", {}, "sink.keep_before_image: 'sometimes'"),
    ("filters:\n  include: [shop]\n", {}, "filters.include: 'shop'"),
    ("filters:\n  exclude: 5\n", {}, "filters.exclude: 5"),
    ("mqtt:\n  qos: 3\n", {}, "mqtt.qos: 3"),
    ("mqtt:\n  topic_prefix: a/#\n", {}, "mqtt.topic_prefix: 'a/#'"),
    ("mqtt:\n  password: p\n", {}, "mqtt.password"),
    ("service:\n  http_port: -1\n", {}, "service.http_port: -1"),
    ("service:\n  log_level: loud\n", {}, "service.log_level: 'loud'"),
    ("service:\n  log_format: xml\n", {}, "service.log_format: 'xml'"),
    ("service:\n  shutdown_timeout: 0\n", {}, "service.shutdown_timeout: 0"),
    ("", {"REPLICATOR_SOURCE__PORT": "zero"}, "source.port: 'zero'"),
    ("", {"REPLICATOR_SINK__BATCH_MAX_ROWS": "-5"}, "sink.batch_max_rows: -5"),
    ("", {"REPLICATOR_NOPE__X": "1"}, "nope: unknown setting"),
    ("source: [\n", {}, "not valid YAML (line"),
    ("- a\n- b\n", {}, "top level must be a mapping"),
]


@pytest.mark.parametrize(("text", "environ", "expected"), BAD_CONFIGS)
def test_bad_config_exits_2_naming_the_key(
    tmp_path: Path, text: str, environ: dict[str, str], expected: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    result = CliRunner().invoke(main, ["run", "--config", str(path)], env=environ)
    assert result.exit_code == 2, result.output
    first_line = result.output.strip().splitlines()[-1]
    assert first_line.startswith("error: "), result.output
    assert expected in first_line


def test_missing_config_file_exits_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["run", "--config", str(tmp_path / "none.yaml")])
    assert result.exit_code == 2
    assert re.search(r"cannot read config file .*none\.yaml", result.output)


def test_environment_overrides_the_file(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("source:\n  host: a\n  port: 3306\nfilters:\n  include: ['x.*']\n")
    config = load_config(
        path,
        environ={
            "REPLICATOR_SOURCE__HOST": "b",
            "REPLICATOR_FILTERS__INCLUDE": "shop.*, crm.accounts",
            "REPLICATOR_SERVICE__HTTP_PORT": "0",
            "OTHER_VAR": "ignored",
        },
    )
    assert (config.source.host, config.source.port) == ("b", 3306)
    assert config.filters.include == ("shop.*", "crm.accounts")
    assert config.service.http_port == 0


def test_config_objects_are_frozen() -> None:
    config = Config()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.source.host = "x"  # type: ignore[misc]
