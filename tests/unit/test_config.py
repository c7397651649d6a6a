"""Configuration: the example file documents every key, and every mistake exits 2 naming it.

The table below goes through the real command line (``replicator run --config``): each bad
config must stop before anything connects, with exit code 2 and a message that names the key
(and, where there is one, the bad value).
"""

from __future__ import annotations

import ast
import dataclasses
import re
import typing
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from replicator.binlog.position import start_position
from replicator.cli import main
from replicator.config import (
    LIMITS,
    Config,
    Limit,
    Secret,
    ServiceConfig,
    SinkConfig,
    SnapshotConfig,
    load_config,
)
from replicator.errors import ConfigError
from replicator.storage import redact_url

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "config" / "replicator.example.yaml"
CONFIG_SOURCE = ROOT / "replicator" / "config.py"


def _keys(cls: type, prefix: str = "") -> set[str]:
    """Every settable key of a settings dataclass, dotted (``source.tls.ca_file``)."""
    out: set[str] = set()
    for f in dataclasses.fields(cls):
        default = f.default_factory() if callable(f.default_factory) else f.default
        if dataclasses.is_dataclass(default):
            out |= _keys(type(default), f"{prefix}{f.name}.")
        elif isinstance(default, Secret):
            out.add(f"{prefix}{f.name}_env")  # the example shows the env form
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
    # every default but the landing zone's: not ./landing, where the embedded demo lands
    assert config.sink.root == "./landing-replicator"
    sink = dataclasses.replace(Config().sink, root=config.sink.root)
    assert config == dataclasses.replace(Config(), source=config.source, sink=sink)


SECRET = "hunter2"  # no message may show it: the secret cases below put it where secrets go
BIG = "1" * 5000  # more digits than int() converts (Python 3.11: 4300)

BAD_CONFIGS: list[tuple[str, dict[str, str], str]] = [
    # (yaml text, environment, what the message must contain); $TMP is the test's directory
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
    # -- numbers with a fraction: never NaN or infinite, each within its limit (LIMITS)
    ("source:\n  heartbeat_seconds: .nan\n", {}, "source.heartbeat_seconds: .nan is not a number"),
    ("source:\n  heartbeat_seconds: .inf\n", {}, "source.heartbeat_seconds: .inf is out of range"),
    ("source:\n  heartbeat_seconds: -.inf\n", {}, "source.heartbeat_seconds: -.inf is out of"),
    ("source:\n  heartbeat_seconds: 1e12\n", {}, "source.heartbeat_seconds: 1e12 is out of range"),
    ("source:\n  heartbeat_seconds: 1.0e+12\n", {}, "source.heartbeat_seconds: 1.0e+12 is out"),
    ("source:\n  heartbeat_seconds: 4294968\n", {}, "source.heartbeat_seconds: 4294968 is out"),
    ("source:\n  heartbeat_seconds: 0.0001\n", {}, "source.heartbeat_seconds: 0.0001 is out"),
    (f"source:\n  heartbeat_seconds: {BIG}\n", {}, "source.heartbeat_seconds: 1111"),
    ("source:\n  heartbeat_seconds: soon\n", {}, "source.heartbeat_seconds: 'soon' is not a"),
    ("source:\n  heartbeat_seconds: true\n", {}, "source.heartbeat_seconds: True is not a"),
    ("", {"REPLICATOR_SOURCE__HEARTBEAT_SECONDS": "nan"}, "source.heartbeat_seconds: nan"),
    ("", {"REPLICATOR_SOURCE__HEARTBEAT_SECONDS": "inf"}, "source.heartbeat_seconds: inf"),
    ("", {"REPLICATOR_SOURCE__HEARTBEAT_SECONDS": "1e999"}, "source.heartbeat_seconds: 1e999"),
    ("source:\n  connect_timeout: 0\n", {}, "source.connect_timeout: 0 is out of range"),
    ("source:\n  connect_timeout: .nan\n", {}, "source.connect_timeout: .nan"),
    ("source:\n  connect_timeout: 3601\n", {}, "source.connect_timeout: 3601"),
    ("source:\n  reconnect_initial_delay: -1\n", {}, "source.reconnect_initial_delay: -1"),
    ("source:\n  reconnect_max_delay: 1e12\n", {}, "source.reconnect_max_delay: 1e12"),
    ("source:\n  reconnect_initial_delay: 40\n", {}, "source.reconnect_initial_delay: 40 is"),
    ("sink:\n  batch_max_seconds: .inf\n", {}, "sink.batch_max_seconds: .inf"),
    ("sink:\n  batch_max_seconds: 86401\n", {}, "sink.batch_max_seconds: 86401"),
    ("service:\n  shutdown_timeout: .nan\n", {}, "service.shutdown_timeout: .nan"),
    ("service:\n  shutdown_timeout: 1e9\n", {}, "service.shutdown_timeout: 1e9"),
    ("service:\n  progress_seconds: -1\n", {}, "service.progress_seconds: -1"),
    ("service:\n  progress_seconds: 0.01\n", {}, "service.progress_seconds: 0.01"),
    ("service:\n  progress_seconds: .inf\n", {}, "service.progress_seconds: .inf"),
    ("mqtt:\n  timeout: 0\n", {}, "mqtt.timeout: 0"),
    ("mqtt:\n  timeout: .nan\n", {}, "mqtt.timeout: .nan"),
    ("mqtt:\n  timeout: 1e9\n", {}, "mqtt.timeout: 1e9"),
    ("mqtt:\n  reconnect_initial_delay: 0\n", {}, "mqtt.reconnect_initial_delay: 0"),
    ("mqtt:\n  reconnect_max_delay: .inf\n", {}, "mqtt.reconnect_max_delay: .inf"),
    ("mqtt:\n  reconnect_initial_delay: 60\n", {}, "mqtt.reconnect_initial_delay: 60 is"),
    # -- integers: decimal whole numbers only, each within its limit
    ("sink:\n  row_group_rows: 1e30\n", {}, "sink.row_group_rows: '1e30' is not an integer"),
    ("sink:\n  row_group_rows: 1.0e+30\n", {}, "sink.row_group_rows: 1.0e+30 is not an integer"),
    (f"sink:\n  row_group_rows: {10**30}\n", {}, f"sink.row_group_rows: {10**30} is out"),
    ("sink:\n  row_group_rows: 2147483648\n", {}, "sink.row_group_rows: 2147483648"),
    (f"sink:\n  row_group_rows: {BIG}\n", {}, "sink.row_group_rows: 1111"),
    ("", {"REPLICATOR_SINK__ROW_GROUP_ROWS": "1e30"}, "sink.row_group_rows: '1e30'"),
    ("", {"REPLICATOR_SINK__ROW_GROUP_ROWS": BIG}, "sink.row_group_rows: 1111"),
    ("sink:\n  batch_max_rows: 1.5\n", {}, "sink.batch_max_rows: 1.5 is not an integer"),
    ("sink:\n  batch_max_rows: 100.0\n", {}, "sink.batch_max_rows: 100.0 is not an integer"),
    ("sink:\n  batch_max_rows: 2147483648\n", {}, "sink.batch_max_rows: 2147483648"),
    ("sink:\n  batch_max_bytes: 1099511627777\n", {}, "sink.batch_max_bytes: 1099511627777"),
    ("sink:\n  batch_max_bytes: 0\n", {}, "sink.batch_max_bytes: 0"),
    ("sink:\n  large_transaction_rows: 2147483648\n", {}, "sink.large_transaction_rows: 21"),
    ("sink:\n  large_transaction_rows: 0\n", {}, "sink.large_transaction_rows: 0"),
    ("source:\n  buffer_events: 2147483648\n", {}, "source.buffer_events: 2147483648"),
    ("source:\n  buffer_events: 0\n", {}, "source.buffer_events: 0"),
    ("source:\n  buffer_rows: 99999999999\n", {}, "source.buffer_rows: 99999999999"),
    ("mqtt:\n  queue_size: 1000001\n", {}, "mqtt.queue_size: 1000001"),
    ("mqtt:\n  queue_size: 0\n", {}, "mqtt.queue_size: 0"),
    ("source:\n  max_checksum_retries: 0\n", {}, "source.max_checksum_retries: 0"),
    ("source:\n  max_checksum_retries: 101\n", {}, "source.max_checksum_retries: 101"),
    ("source:\n  server_id: 4294967296\n", {}, "source.server_id: 4294967296"),
    ("source:\n  port: 03306\n", {}, "source.port: 03306 is not an integer"),  # YAML: octal
    ("source:\n  port: 0x10\n", {}, "source.port: 0x10 is not an integer"),
    ("source:\n  port: 1:30\n", {}, "source.port: 1:30 is not an integer"),  # YAML: base 60
    ("", {"REPLICATOR_SOURCE__PORT": "²"}, "source.port: '²' is not an integer"),
    ("", {"REPLICATOR_SOURCE__PORT": "--5"}, "source.port: '--5' is not an integer"),
    ("mqtt:\n  port: 0\n", {}, "mqtt.port: 0"),
    ("mqtt:\n  keepalive: 30.5\n", {}, "mqtt.keepalive: 30.5 is not an integer"),
    ("mqtt:\n  keepalive: 65536\n", {}, "mqtt.keepalive: 65536"),
    ("service:\n  http_port: 65536\n", {}, "service.http_port: 65536"),
    ("service:\n  http_port: 9108.0\n", {}, "service.http_port: 9108.0 is not an integer"),
    ("service:\n  http_port: true\n", {}, "service.http_port: True is not an integer"),
    ("service:\n  http_port: [9108]\n", {}, "service.http_port: ['9108'] is not an integer"),
    ("service:\n  http_port:\n    port: 9108\n", {}, "service.http_port: {'port': '9108'}"),
    # -- start
    ("start:\n  file: b.000001\n  position: 1180591620717411303424\n", {}, "start.position: 11"),
    ("start:\n  file: b.000001\n  position: 18446744073709551616\n", {}, "start.position: 18"),
    ("start:\n  position: 1000\n", {}, "start.position: 1000 is set without start.file"),
    ("start:\n  gtid: nonsense\n", {}, "start.gtid: not a MariaDB GTID"),
    ("start:\n  gtid: ''\n  file: mysql-bin.000001\n", {}, "start.gtid or start.file"),
    ("start:\n  file: ''\n", {}, "start.file: empty"),
    # -- the landing zone
    ("sink:\n  root: ''\n", {}, "sink.root: empty"),
    ("sink:\n  root: '  '\n", {}, "sink.root: empty"),
    ('sink:\n  root: "land\\0ing"\n', {}, "sink.root: 'land\\x00ing' contains a NUL"),
    ("sink:\n  root: /proc/self/landing\n", {}, "sink.root: '/proc/self/landing' is under /proc"),
    ("sink:\n  root: /sys/landing\n", {}, "sink.root: '/sys/landing' is under /sys"),
    ("sink:\n  root: /dev/shm/landing\n", {}, "sink.root: '/dev/shm/landing' is under /dev"),
    ("sink:\n  root: /dev\n", {}, "sink.root: '/dev' is under /dev"),
    ("sink:\n  root: $TMP/bad.yaml\n", {}, "bad.yaml' is a file, not a directory"),
    ("sink:\n  root: $TMP/bad.yaml/landing\n", {}, "landing' is inside "),
    ("", {"REPLICATOR_SINK__ROOT": "$TMP/bad.yaml"}, "sink.root: '"),
    ("sink:\n  root: ~/landing\n", {}, "sink.root: '~/landing' starts with ~"),
    # -- secrets: the value of password / password_env / password_file is never shown
    (f"source:\n  password: ['{SECRET}']\n", {}, "source.password: not a string"),
    (f"source:\n  password:\n    x: {SECRET}\n", {}, "source.password: not a string"),
    (f"source:\n  password_env: {SECRET}\n", {}, "source.password_env: names an environment"),
    (f"source:\n  password_env: [{SECRET}]\n", {}, "source.password_env: not a string"),
    (f"source:\n  password_file: [{SECRET}]\n", {}, "source.password_file: not a string"),
    (f"source:\n  password_file: /nonexistent/{SECRET}\n", {}, "source.password_file: cannot"),
    (f'source:\n  password_file: "/{SECRET}\\0"\n', {}, "source.password_file: not a file"),
    ("source:\n  password_file: /dev/zero\n", {}, "source.password_file: the file it names is"),
    (f"source:\n  password: {SECRET}\n  password_env: {SECRET}\n", {}, "source.password: give"),
    (f"mqtt:\n  password: [{SECRET}]\n", {}, "mqtt.password: not a string"),
    (f"mqtt:\n  username: u\n  password_env: {SECRET}\n", {}, "mqtt.password_env: names an"),
    ("", {"REPLICATOR_SOURCE__PASSWORD_ENV": SECRET}, "source.password_env: names an"),
    ("", {"REPLICATOR_SOURCE__PASSWORD__X": SECRET}, "source.password: not a string"),
    ("", {"REPLICATOR_MQTT__PASSWORD_FILE": f"/no/{SECRET}"}, "mqtt.password_file: cannot"),
    ("", {"REPLICATOR_MQTT__PASSWORD": SECRET}, "mqtt.password: set without mqtt.username"),
    ("", {"REPLICATOR_SOURCE__PASSWORD": f"{SECRET}\udcff"}, "source.password: not valid UTF-8"),
    # -- hosts, users, text
    ("source:\n  host: db host\n", {}, "source.host: 'db host' is not a host name"),
    ("source:\n  host: db:3306\n", {}, "source.host: 'db:3306' is not a host name"),
    ("source:\n  host: http://db\n", {}, "source.host: 'http://db' is not a host name"),
    ("source:\n  host: '[::1]'\n", {}, "source.host: '[::1]' is not a host name"),
    ("source:\n  host: ''\n", {}, "source.host: empty"),
    ('source:\n  host: "db\\0"\n', {}, "source.host: 'db\\x00' contains a NUL"),
    ("", {"REPLICATOR_SOURCE__HOST": "db\udcff"}, "source.host: 'db\\udcff' is not valid UTF-8"),
    ("source:\n  user: ''\n", {}, "source.user: empty"),
    ("source:\n  user: yes\n", {}, "source.user: True is not a string"),
    ('source:\n  unix_socket: "/run/my\\0sql"\n', {}, "source.unix_socket: '/run/my\\x00sql'"),
    ('source:\n  tls:\n    ca_file: "ca\\0"\n', {}, "source.tls.ca_file: 'ca\\x00' contains"),
    ("mqtt:\n  enabled: true\n  host: a b\n", {}, "mqtt.host: 'a b' is not a host name"),
    ("mqtt:\n  enabled: true\n  host: ''\n", {}, "mqtt.host: empty"),
    (f"mqtt:\n  client_id: {'x' * 65536}\n", {}, "mqtt.client_id: 'xxx"),
    (f"mqtt:\n  topic_prefix: {'t' * 65530}\n", {}, "mqtt.topic_prefix: 'ttt"),
    ("service:\n  http_host: '*'\n", {}, "service.http_host: '*' is not a host name"),
    ("service:\n  http_host: localhost:9108\n", {}, "service.http_host: 'localhost:9108'"),
    ("service:\n  log_level: [info]\n", {}, "service.log_level: ['info'] is not a string"),
    ("sink:\n  compression: ZSTD\n", {}, "sink.compression: 'ZSTD' is not supported"),
    # -- filters
    ('filters:\n  include: ["shop.\\0*"]\n', {}, "filters.include: 'shop.\\x00*' contains a NUL"),
    ("filters:\n  include: []\n", {}, "filters.include: empty"),
    ("", {"REPLICATOR_FILTERS__INCLUDE": " , "}, "filters.include: empty"),
    ("filters:\n  exclude_columns: [password_hash]\n", {}, "filters.exclude_columns: 'pass"),
    ("filters:\n  exclude_columns: [users.password_hash]\n", {}, "filters.exclude_columns: 'u"),
    ("filters:\n  include: 1.5\n", {}, "filters.include: 1.5 is not a list of strings"),
    # -- shapes: a list or scalar for a section, a section for a scalar, numbers for booleans
    ("source: [a, b]\n", {}, "source: expected a section"),
    ("source:\n", {}, "source: expected a section"),
    ("source:\n  tls: true\n", {}, "source.tls: expected a section"),
    ("", {"REPLICATOR_SOURCE__TLS": "on"}, "source.tls: expected a section"),
    ("source:\n  host:\n    name: db\n", {}, "source.host: {'name': 'db'} is not a string"),
    ("source:\n  tls:\n    enabled: 1\n", {}, "source.tls.enabled: 1 is not true or false"),
    ("source:\n  annotate_rows: 0\n", {}, "source.annotate_rows: 0 is not true or false"),
    ("", {"REPLICATOR_SOURCE__ANNOTATE_ROWS": "2"}, "source.annotate_rows: '2'"),
    ("source:\n  1: a\n  true: b\n", {}, "source.1: unknown setting"),
    # -- YAML itself
    ("source:\n  port: 1\n  port: 2\n", {}, "source.port: given twice"),
    ("source:\n  host: a\nsource:\n  port: 1\n", {}, "source: given twice"),
    ("source:\n  tls:\n    enabled: true\n    enabled: false\n", {}, "source.tls.enabled: given"),
    ("source: " + "[" * 3000 + "]" * 3000 + "\n", {}, "is nested too deeply"),
    ("source:\n  host: db\udcff\n", {}, "is not UTF-8 text"),  # written as the byte 0xff
]


@pytest.mark.parametrize(("text", "environ", "expected"), BAD_CONFIGS)
def test_bad_config_exits_2_naming_the_key(
    tmp_path: Path, text: str, environ: dict[str, str], expected: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(text.replace("$TMP", str(tmp_path)).encode("utf-8", "surrogateescape"))
    env = {name: value.replace("$TMP", str(tmp_path)) for name, value in environ.items()}
    result = CliRunner().invoke(main, ["run", "--config", str(path)], env=env)
    assert result.exit_code == 2, result.output
    first_line = result.output.strip().splitlines()[-1]
    assert first_line.startswith("error: "), result.output
    assert expected in first_line
    assert SECRET not in result.stdout
    assert SECRET not in result.stderr


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        ("source:\n  password: 3.14159265\n", "source.password", "3.14159265"),
        ("source:\n  password: 271828\n", "source.password", "271828"),
        ("source:\n  password: 0123\n", "source.password", "0123"),
        ("source:\n  password: 1_000\n", "source.password", "1_000"),
        ("mqtt:\n  username: u\n  password: 2.5e+3\n", "mqtt.password", "2.5e+3"),
        ("source:\n  password_file: 42\n", "source.password_file", "42"),
        ("source:\n  password: true\n", "source.password", "True"),
        ("source:\n  password: off\n", "source.password", "False"),
    ],
)
def test_a_secret_written_as_a_number_or_boolean_is_refused(
    tmp_path: Path, text: str, key: str, value: str
) -> None:
    """YAML reads an unquoted 3.14159265 as a number and ``yes`` as a boolean: a secret must
    be quoted text. Exit 2 naming the key and saying to quote it; the value is not shown."""
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    assert caught.value.exit_code == 2
    message = str(caught.value)
    assert message.startswith(f"{key}: "), message
    assert "quote" in message
    assert value not in message


def _numeric_settings(cls: type, prefix: str = "") -> dict[str, object]:
    """Every int/float setting, dotted, with its default."""
    out: dict[str, object] = {}
    for f in dataclasses.fields(cls):
        default = f.default_factory() if callable(f.default_factory) else f.default
        if dataclasses.is_dataclass(default):
            out |= _numeric_settings(type(default), f"{prefix}{f.name}.")
        elif type(default) in (int, float):
            out[f"{prefix}{f.name}"] = default
    return out


def test_every_number_has_a_limit_its_default_keeps() -> None:
    numbers = _numeric_settings(Config)
    assert set(numbers) == set(LIMITS)
    assert [key for key, default in numbers.items() if not LIMITS[key].allows(default)] == []  # type: ignore[arg-type]


def _env(settings: dict[str, str]) -> dict[str, str]:
    return {
        "REPLICATOR_" + key.upper().replace(".", "__"): value for key, value in settings.items()
    }


def test_limits_include_their_ends(tmp_path: Path) -> None:
    low = {key: str(limit.least) for key, limit in LIMITS.items()}
    high = {key: str(limit.most) for key, limit in LIMITS.items()}
    for ends in (low, high):
        ends |= {"start.file": "mysql-bin.000001", "sink.root": str(tmp_path / "landing")}
        ends |= {"source.reconnect_max_delay": ends["source.reconnect_initial_delay"]}
        ends |= {"mqtt.reconnect_max_delay": ends["mqtt.reconnect_initial_delay"]}
        config = load_config(None, environ=_env(ends))
        assert config.start.position == int(ends["start.position"])
        assert config.source.heartbeat_seconds == float(ends["source.heartbeat_seconds"])
    assert load_config(None, environ=_env({"service.progress_seconds": "0"})).service
    assert high["source.heartbeat_seconds"] == "4294967"
    assert high["start.position"] == str(2**64 - 1)


def test_numbers_are_read_as_written(tmp_path: Path) -> None:
    """YAML numbers stay text until a setting types them: a string setting gets the text."""
    path = tmp_path / "c.yaml"
    path.write_text(
        "source:\n  password: '0123'\n  user: 1.50\n  heartbeat_seconds: 2.5\n"
        "  connect_timeout: 7\n  buffer_rows: 1_000\n  port: +3307\n"
        "sink:\n  keep_before_image: yes\nmqtt:\n  password: 1e3\n  username: 010\n"
    )
    config = load_config(path, environ={"REPLICATOR_SOURCE__TLS__ENABLED": "on"})
    source = config.source
    assert (source.password.reveal(), source.user) == ("0123", "1.50")
    assert (source.heartbeat_seconds, source.connect_timeout) == (2.5, 7.0)
    assert (source.buffer_rows, source.port, source.tls.enabled) == (1000, 3307, True)
    assert config.sink.keep_before_image is True
    assert (config.mqtt.password.reveal(), config.mqtt.username) == ("1e3", "010")
    assert type(source.user) is str


def test_start_position_bounds() -> None:
    assert start_position(None, "mysql-bin.000001", 2**64 - 1) is not None
    for position in (3, -1, 2**64, 2**70):
        with pytest.raises(ConfigError, match="start position"):
            start_position(None, "mysql-bin.000001", position)
    with pytest.raises(ConfigError, match="past the largest"):
        start_position("0-1-5", None, 2**70)


def test_checkpoint_set_refuses_a_position_past_u64(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(f"sink:\n  root: {tmp_path / 'landing'}\n")
    args = ["checkpoint", "set", "--config", str(path), "--file", "b.000001", "--pos", str(2**70)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert f"start position {2**70} is past the largest binlog position" in result.output
    assert not (tmp_path / "landing" / "_state").exists()


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


def test_config_uses_only_public_pydantic_api() -> None:
    """No private pydantic or pydantic-settings module, name or hook (``_load_env_vars``):
    config.py's classes override nothing of pydantic's."""
    tree = ast.parse(CONFIG_SOURCE.read_text())
    from_imports = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pydantic")
    ]
    modules = [node.module or "" for node in from_imports]
    modules += [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name.startswith("pydantic")
    ]
    assert [m for m in modules if any(part.startswith("_") for part in m.split("."))] == []
    names = [alias for node in from_imports for alias in node.names]
    assert [alias.name for alias in names if alias.name.startswith("_")] == []
    pydantic_names = {alias.asname or alias.name for alias in names}
    assert pydantic_names  # config.py validates with pydantic
    private_attributes = [
        f"{node.value.id}.{node.attr}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in pydantic_names
        and node.attr.startswith("_")
    ]
    assert private_attributes == []
    subclasses = [
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        and any(isinstance(base, ast.Name) and base.id in pydantic_names for base in node.bases)
    ]
    assert subclasses == []
    assert "_load_env_vars" not in CONFIG_SOURCE.read_text()


def test_choices_are_literals() -> None:
    """snapshot.mode, the log level and format and the compression are ``Literal`` types, not
    text checked by hand after loading: mypy checks the code that compares them."""
    hints = {
        "snapshot.mode": typing.get_type_hints(SnapshotConfig)["mode"],
        "service.log_level": typing.get_type_hints(ServiceConfig)["log_level"],
        "service.log_format": typing.get_type_hints(ServiceConfig)["log_format"],
        "sink.compression": typing.get_type_hints(SinkConfig)["compression"],
    }
    choices = {key: set(typing.get_args(_literal(kind))) for key, kind in hints.items()}
    assert choices == {
        "snapshot.mode": {"initial", "never", "when_needed"},
        "service.log_level": {"debug", "info", "warning", "error"},
        "service.log_format": {"auto", "json", "console"},
        "sink.compression": {"zstd", "snappy", "gzip", "none"},
    }


def _literal(kind: object) -> object:
    """The ``Literal`` inside an optional or annotated type."""
    for arg in (kind, *typing.get_args(kind)):
        if typing.get_origin(arg) is typing.Literal:
            return arg
    raise AssertionError(f"no Literal in {kind!r}")


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"REPLICATOR_SNAPSHOT__MODE": "sometimes"}, "snapshot.mode: 'sometimes' is not a"),
        ({"REPLICATOR_SNAPSHOT__MODE": "NEVER"}, "snapshot.mode: 'NEVER' is not a snapshot mode"),
        ({"REPLICATOR_SERVICE__LOG_LEVEL": "LOUD"}, "service.log_level: 'LOUD' is not a log"),
        ({"REPLICATOR_SINK__COMPACTION__EVERY": "0.5"}, "sink.compaction.every: 0.5 is out of"),
        (
            {"REPLICATOR_SERVICE__PROGRESS_SECONDS": "nan"},
            "service.progress_seconds: nan is not a number (use 0.1 to 86400, or 0",
        ),
        # a value's own problem is told before a section's check across its settings
        (
            {"REPLICATOR_SERVICE__HTTP_HOST": "*", "REPLICATOR_SOURCE__PORT": "x"},
            "source.port: 'x' is not an integer",
        ),
        (
            {"REPLICATOR_SOURCE__HOST": "a b", "REPLICATOR_SINK__BATCH_MAX_ROWS": "0"},
            "sink.batch_max_rows: 0 is out of range (use 1 to 2147483647: row changes",
        ),
    ],
)
def test_choices_and_ranges_refused_with_their_words(
    environ: dict[str, str], expected: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(None, environ=environ)
    assert str(caught.value).startswith(expected), str(caught.value)


def test_choices_and_zero_turning_off_are_read() -> None:
    config = load_config(
        None,
        environ={
            "REPLICATOR_SNAPSHOT__MODE": "when_needed",
            "REPLICATOR_SERVICE__LOG_LEVEL": "WARNING",
            "REPLICATOR_SERVICE__PROGRESS_SECONDS": "0",
            "REPLICATOR_SINK__COMPACTION__EVERY": "0",
            "REPLICATOR_SINK__COMPRESSION": "gzip",
        },
    )
    assert (config.snapshot.mode, config.service.log_level) == ("when_needed", "warning")
    assert (config.service.progress_seconds, config.sink.compaction.every) == (0, 0)
    assert config.sink.compression == "gzip"
    assert LIMITS["sink.compaction.every"] == Limit(
        1, 30 * 86400, "seconds between compactions, e.g. 3600", True
    )
    assert LIMITS["source.port"] == Limit(1, 65535, "a TCP port")


# AWS secret keys hold "/" and "+": urlsplit ends the netloc at the "/", so the secret's first
# part reads as a port and the rest as the path
SLASHED_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.mark.parametrize(
    "root",
    [
        f"s3://AKIAEXAMPLEKEYID:{SLASHED_SECRET}@bucket/prefix",
        f"s3://AKIAEXAMPLEKEYID:{SLASHED_SECRET}#x@bucket/prefix",
        f"gs://{SLASHED_SECRET}@bucket/prefix",
    ],
)
def test_a_root_with_a_secret_holding_slashes_is_refused_unshown(root: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="carries credentials") as caught:
        load_config(None, {"REPLICATOR_SINK__ROOT": root}, sections=("sink",))
    config = tmp_path / "c.yaml"
    config.write_text(f"sink:\n  root: '{root}'\n")
    result = CliRunner().invoke(main, ["checkpoint", "show", "--config", str(config)])
    assert result.exit_code == 2
    for piece in SLASHED_SECRET.split("/"):
        assert piece not in str(caught.value)
        assert piece not in result.output


def test_an_endpoint_with_credentials_is_refused_unshown() -> None:
    env = {
        "REPLICATOR_SINK__ROOT": "s3://bucket/prefix",
        "REPLICATOR_SINK__OBJECT_STORE__ENDPOINT": "http://minioadmin:Endp-s3cret/9@minio:9000",
    }
    with pytest.raises(ConfigError, match="carries credentials") as caught:
        load_config(None, env, sections=("sink",))
    assert "Endp-s3cret" not in str(caught.value)
    assert "minio:9000" in str(caught.value)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("s3://bucket/zone", "s3://bucket/zone"),
        ("s3://key:secret@bucket/zone?x=1", "s3://bucket/zone"),
        (f"s3://key:{SLASHED_SECRET}@bucket/zone", "s3://bucket/zone"),
        ("http://user:p@ss@minio:9000/", "http://minio:9000/"),
        ("s3://bucket/zone#frag", "s3://bucket/zone"),
        ("/local/path", "/local/path"),
    ],
)
def test_redact_url_keeps_no_part_of_a_credential(url: str, shown: str) -> None:
    assert redact_url(url) == shown


@pytest.mark.parametrize("section", ["source", "mqtt"])
@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("ca_file", "/etc/ssl/ca.pem"),
        ("cert_file", "/etc/ssl/me.pem"),
        ("key_file", "/etc/ssl/me.key"),
        ("verify_server_cert", "false"),
        ("verify_hostname", "false"),
    ],
)
def test_tls_settings_without_tls_enabled_are_refused(section: str, key: str, value: str) -> None:
    """A CA or certificate given without ``enabled: true`` would connect in clear text."""
    env = {f"REPLICATOR_{section.upper()}__TLS__{key.upper()}": value}
    with pytest.raises(ConfigError) as caught:
        load_config(None, {**env, "REPLICATOR_SOURCE__PASSWORD": "x"})
    assert str(caught.value).startswith(f"{section}.tls.enabled: {key} set while TLS is off")
    enabled = {**env, f"REPLICATOR_{section.upper()}__TLS__ENABLED": "true"}
    loaded = load_config(None, {**enabled, "REPLICATOR_SOURCE__PASSWORD": "x"})
    assert getattr(loaded, section).tls.enabled


def test_an_at_sign_anywhere_in_a_root_is_refused_as_a_possible_credential() -> None:
    """A secret with a ``/`` (``gs://sec/ret@bucket``) cannot be told from a key prefix
    holding an ``@``: both are refused, the message says why, and shows neither."""
    for root in ("s3://bucket/team@2024/landing", "gs://wJalrXUtnFEMI/K7MDENG@bucket/p"):
        with pytest.raises(ConfigError, match="an '@' anywhere counts as one") as caught:
            load_config(None, {"REPLICATOR_SINK__ROOT": root}, sections=("sink",))
        assert "K7MDENG" not in str(caught.value) and "team" not in str(caught.value)
