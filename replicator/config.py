"""Configuration, parsed once into frozen objects and passed explicitly.

This module holds the settings objects; loading them from YAML and the environment is done
by ``load_config``. Secrets are wrapped in ``Secret`` so they never print, and no error message
shows them either. Every number has a range (``LIMITS``) and every value is checked while
loading, so a bad one stops the program at start (exit 2, naming the key) instead of crashing
or misbehaving later.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import math
import os
import re
import stat
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .binlog.position import start_position
from .errors import ConfigError, InternalError

MAX_SECRET_BYTES = 65535  # the longest password MQTT can carry; plenty for MySQL too


class Secret:
    """A value that never shows itself in repr, str, logs or error messages."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('********')" if self._value else "Secret('')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __bool__(self) -> bool:
        return bool(self._value)

    @classmethod
    def resolve(
        cls,
        *,
        value: str | None = None,
        env: str | None = None,
        file: str | Path | None = None,
        key: str = "password",
        environ: typing.Mapping[str, str] | None = None,
    ) -> Secret:
        """A secret from exactly one of: a literal, an environment variable, a file."""
        given = [x for x in (value, env, file) if x not in (None, "")]
        if len(given) > 1:
            raise ConfigError(
                f"{key}: give only one of {key}, {key}_env, {key}_file",
                hint=f"remove all but one of the {key} settings",
            )
        if env:
            environ = os.environ if environ is None else environ
            if env not in environ:
                raise ConfigError(
                    f"{key}_env: environment variable {env} is not set",
                    hint=f"export {env} or use {key}_file",
                )
            return cls(environ[env])
        if file:
            # The path is not shown: a password may have been put here by mistake.
            try:
                with Path(file).open("rb") as handle:
                    raw = handle.read(MAX_SECRET_BYTES + 1)
            except OSError as exc:
                raise ConfigError(
                    f"{key}_file: cannot read the file it names: {exc.strerror}",
                    hint="check the path and its permissions",
                ) from None
            except ValueError:  # a NUL in the path
                raise ConfigError(
                    f"{key}_file: not a file path", hint=f"set {key}_file to a file's path"
                ) from None
            if len(raw) > MAX_SECRET_BYTES:
                raise ConfigError(
                    f"{key}_file: the file it names is larger than {MAX_SECRET_BYTES} bytes",
                    hint=f"point {key}_file at a file holding only the password",
                )
            try:
                return cls(raw.decode("utf-8").rstrip("\r\n"))
            except UnicodeDecodeError:
                raise ConfigError(
                    f"{key}_file: the file it names is not UTF-8 text",
                    hint="save the password as UTF-8",
                ) from None
        return cls(value or "")


@dataclass(frozen=True, slots=True)
class TlsConfig:
    enabled: bool = False
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    verify_server_cert: bool = True
    verify_hostname: bool = True


@dataclass(frozen=True, slots=True)
class SourceConfig:
    """The server replicator reads from."""

    host: str = "127.0.0.1"
    port: int = 3306
    user: str = "repl"
    password: Secret = field(default_factory=lambda: Secret(""))
    unix_socket: str | None = None
    tls: TlsConfig = field(default_factory=TlsConfig)
    server_id: int = 65000  # our replica id: must differ from every other replica's
    connect_timeout: float = 10.0
    heartbeat_seconds: float = 5.0
    annotate_rows: bool = False  # MariaDB: ask for ANNOTATE_ROWS events (bigger stream)
    reconnect_initial_delay: float = 0.2
    reconnect_max_delay: float = 30.0
    max_checksum_retries: int = 3  # a CRC mismatch at the same position this often: exit 4
    buffer_events: int = 10000  # bounded hand-off between the reader thread and the loop
    buffer_rows: int = 100_000  # ...also bounded by row images waiting in it (memory)


@dataclass(frozen=True, slots=True)
class StartConfig:
    """Where to begin when there is no checkpoint yet: "now" (default), a GTID position or
    set, or a binlog file and position."""

    gtid: str | None = None
    file: str | None = None
    position: int = 4


@dataclass(frozen=True, slots=True)
class SinkConfig:
    """The landing zone and how changes are batched into it."""

    root: str = "./landing"
    batch_max_rows: int = 100_000  # commit when a batch holds this many row changes...
    batch_max_bytes: int = 64 * 1024 * 1024  # ...or this many binlog bytes...
    batch_max_seconds: float = 5.0  # ...or its first transaction is this old
    keep_before_image: bool = False  # updates also carry the before image as `_before`
    # GEOMETRY columns land as struct<wkb: binary, srid: uint32> instead of WKB alone
    geometry_srid: bool = False
    compression: str = "zstd"
    row_group_rows: int = 128_000
    # a transaction with more row changes than this streams to staging files instead of
    # being held in memory, and commits as one batch at its end
    large_transaction_rows: int = 50_000


@dataclass(frozen=True, slots=True)
class SnapshotConfig:
    """Landing the rows tables hold already (replicator.snapshot)."""

    # initial: snapshot every replicated table when the landing zone is new (the default
    # unless start.gtid/start.file is set), and tables filters.include newly takes in;
    # when_needed: as initial, and snapshot every table again when the source no longer has
    # the checkpoint's binlog (instead of stopping); never: land changes only
    mode: str | None = None
    chunk_rows: int = 20_000  # rows per chunk (one read view, one SELECT)


@dataclass(frozen=True, slots=True)
class FilterConfig:
    """Which tables land. Globs over ``database.table`` (and ``database.table.column``)."""

    include: tuple[str, ...] = ("*.*",)
    exclude: tuple[str, ...] = ()
    exclude_columns: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class MqttConfig:
    """The MQTT broker told about every committed batch (``notify.py``; best-effort)."""

    enabled: bool = False
    host: str = "127.0.0.1"
    port: int = 1883
    client_id: str | None = None  # default "replicator-<hostname>"; unique per instance
    username: str | None = None
    password: Secret = field(default_factory=lambda: Secret(""))
    topic_prefix: str = "replicator"  # <prefix>/commits and <prefix>/status (retained)
    qos: int = 1  # for <prefix>/commits; the status messages always use QoS 1
    tls: TlsConfig = field(default_factory=TlsConfig)
    keepalive: int = 30  # seconds; the broker publishes our "offline" will after 1.5x silence
    timeout: float = 10.0  # seconds to wait for CONNACK and for each PUBACK
    queue_size: int = 1000  # notifications held while the broker is away; then oldest dropped
    reconnect_initial_delay: float = 0.5
    reconnect_max_delay: float = 30.0


@dataclass(frozen=True, slots=True)
class ServiceConfig:
    """The daemon itself: its HTTP port (/metrics, /healthz, /readyz), shutdown, logs."""

    http_enabled: bool = True
    http_host: str = "127.0.0.1"  # 0.0.0.0 in a container, so Prometheus can scrape it
    http_port: int = 9108  # 0: any free port (logged at start)
    shutdown_timeout: float = 30.0  # first SIGTERM: commit within this long, then exit
    log_level: str = "info"  # debug, info, warning, error
    log_format: str = "auto"  # auto (JSON unless stderr is a terminal), json, console
    progress_seconds: float = 5.0  # catch-up progress line on a terminal; 0 turns it off


@dataclass(frozen=True, slots=True)
class Config:
    service: ServiceConfig = field(default_factory=ServiceConfig)
    source: SourceConfig = field(default_factory=SourceConfig)
    start: StartConfig = field(default_factory=StartConfig)
    mqtt: MqttConfig = field(default_factory=MqttConfig)
    sink: SinkConfig = field(default_factory=SinkConfig)
    filters: FilterConfig = field(default_factory=FilterConfig)
    snapshot: SnapshotConfig = field(default_factory=SnapshotConfig)


# -- limits -------------------------------------------------------------------------------------
# Every number a setting may hold, checked when the config loads (a value out of range would
# crash or misbehave later, so it stops `replicator run` with exit 2 instead). Durations are
# seconds, at least a millisecond; counts of rows and events fit a signed 32-bit integer.

MAX_COUNT = 2**31 - 1
MAX_BYTES = 2**40  # 1 TiB
MAX_POSITION = 2**64 - 1  # binlog positions are u64 on the wire (COM_BINLOG_DUMP_GTID)
# The server's MASTER_HEARTBEAT_PERIOD range is 0.001 to 4294967 seconds (below a millisecond
# MariaDB turns heartbeats off: error 1703, ER_SLAVE_HEARTBEAT_VALUE_OUT_OF_RANGE_MIN).
MAX_HEARTBEAT = 4_294_967
HOUR = 3600
DAY = 86400


@dataclass(frozen=True, slots=True)
class Limit:
    """The allowed range of one numeric setting, and what the number means (for the hint)."""

    least: int | float
    most: int | float
    means: str
    zero_turns_off: bool = False  # 0 is allowed too, below ``least``

    def allows(self, number: int | float) -> bool:
        return self.least <= number <= self.most or (self.zero_turns_off and number == 0)

    def hint(self) -> str:
        off = ", or 0 to turn it off" if self.zero_turns_off else ""
        return f"use {_number(self.least)} to {_number(self.most)}{off}: {self.means}"


LIMITS: dict[str, Limit] = {
    "service.http_port": Limit(0, 65535, "a TCP port, or 0 for any free port"),
    "service.shutdown_timeout": Limit(0.001, HOUR, "seconds the first SIGTERM may take, e.g. 30"),
    "service.progress_seconds": Limit(0.1, DAY, "seconds between progress lines, e.g. 5", True),
    "source.port": Limit(1, 65535, "a TCP port"),
    "source.server_id": Limit(1, 2**32 - 1, "a replica id, unique among the source's replicas"),
    "source.connect_timeout": Limit(0.001, HOUR, "seconds, e.g. 10"),
    "source.heartbeat_seconds": Limit(
        0.001, MAX_HEARTBEAT, "seconds, e.g. 5; the server's heartbeat period range"
    ),
    "source.reconnect_initial_delay": Limit(0.001, HOUR, "seconds, e.g. 0.2"),
    "source.reconnect_max_delay": Limit(0.001, HOUR, "seconds, e.g. 30"),
    "source.max_checksum_retries": Limit(1, 100, "reads of one position before exit 4, e.g. 3"),
    "source.buffer_events": Limit(1, MAX_COUNT, "events, e.g. 10000"),
    "source.buffer_rows": Limit(1, MAX_COUNT, "row images, e.g. 100000"),
    "start.position": Limit(4, MAX_POSITION, "a byte offset in start.file; binlogs start at 4"),
    "sink.batch_max_rows": Limit(1, MAX_COUNT, "row changes, e.g. 100000"),
    "sink.batch_max_bytes": Limit(1, MAX_BYTES, "binlog bytes, e.g. 67108864"),
    "sink.batch_max_seconds": Limit(0.001, DAY, "seconds, e.g. 5"),
    "sink.row_group_rows": Limit(1, MAX_COUNT, "rows per Parquet row group, e.g. 128000"),
    "sink.large_transaction_rows": Limit(1, MAX_COUNT, "row changes, e.g. 50000"),
    "snapshot.chunk_rows": Limit(1, 10_000_000, "rows per snapshot chunk, e.g. 20000"),
    "mqtt.port": Limit(1, 65535, "a TCP port, usually 1883 (8883 with TLS)"),
    "mqtt.qos": Limit(0, 2, "the MQTT QoS of commit messages"),
    "mqtt.keepalive": Limit(1, 65535, "seconds, e.g. 30; the offline will depends on it"),
    "mqtt.timeout": Limit(0.001, HOUR, "seconds, e.g. 10"),
    "mqtt.queue_size": Limit(1, 1_000_000, "notifications held while the broker is away"),
    "mqtt.reconnect_initial_delay": Limit(0.001, HOUR, "seconds, e.g. 0.5"),
    "mqtt.reconnect_max_delay": Limit(0.001, HOUR, "seconds, e.g. 30"),
}
MAX_MQTT_STRING = 65535  # UTF-8 bytes: MQTT strings carry a 16-bit length


# -- loading ------------------------------------------------------------------------------------

ENV_PREFIX = "REPLICATOR_"
_SECRET_KEYS = ("password",)
# Integers in decimal, as written: no leading zero (YAML 1.1 would read 010 as octal 8), no
# fraction or exponent (100.0 and 1e5 are refused rather than guessed at).
_INTEGER = re.compile(r"[+-]?(?:0|[1-9](?:_?[0-9])*)", re.ASCII)
_DECIMAL = re.compile(
    r"[+-]?(?:[0-9](?:_?[0-9])*(?:\.(?:[0-9](?:_?[0-9])*)?)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?",
    re.ASCII,
)
_NOT_FINITE = re.compile(r"[+-]?\.?(?:inf|infinity|nan)", re.ASCII | re.IGNORECASE)
_SYSTEM_TREES = (Path("/proc"), Path("/sys"), Path("/dev"))


class YamlNumber(str):
    """A YAML scalar that YAML 1.1 would read as a number, kept exactly as written.

    Numbers are parsed here, by one grammar for the file and the environment; a string
    setting gets the text itself (``password: 0123`` is "0123", not the octal 83)."""

    __slots__ = ()


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, but numbers stay text (``YamlNumber``) until a setting types them."""


def _number_text(loader: yaml.SafeLoader, node: yaml.Node) -> YamlNumber:
    assert isinstance(node, yaml.ScalarNode)
    return YamlNumber(loader.construct_scalar(node))


_Loader.add_constructor("tag:yaml.org,2002:int", _number_text)
_Loader.add_constructor("tag:yaml.org,2002:float", _number_text)


def _describe(value: object) -> str:
    """A value for a message: repr, except numbers as written; long ones shortened."""
    text = value.strip() if isinstance(value, YamlNumber) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _number(value: int | float) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return _describe(value)


def _as_written(value: object, number: int | float) -> str:
    """A parsed number as the user wrote it (text from YAML or the environment)."""
    if isinstance(value, str):
        return _describe(YamlNumber(value))
    return _number(number)


def _out_of_range(key: str, shown: str) -> ConfigError:
    limit = LIMITS.get(key)
    return ConfigError(
        f"{key}: {shown} is out of range", hint=limit.hint() if limit else f"lower {key}"
    )


def _convert(key: str, value: object, kind: object) -> object:
    """Check/convert one scalar against a field type and its limit; errors name the key."""
    number: int | float
    if kind is int:
        number = _integer(key, value)
    elif kind is float:
        number = _float(key, value)
    elif kind is bool:
        return _boolean(key, value)
    elif kind is str:
        return _text(key, value)
    else:  # a settings field of a type this loader does not know
        raise InternalError(f"{key}: no loader for settings of type {kind!r}")
    limit = LIMITS.get(key)
    if limit is not None and not limit.allows(number):
        raise _out_of_range(key, _as_written(value, number))
    return number


def _integer(key: str, value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _INTEGER.fullmatch(value.strip()):
        text = value.strip()
        if len(text) > 100:  # far out of any range; int() of 4300+ digits even raises
            raise _out_of_range(key, _describe(YamlNumber(text)))
        return int(text)
    raise ConfigError(
        f"{key}: {_describe(value)} is not an integer",
        hint=f"set {key} to a whole number in decimal digits: no fraction, exponent or "
        "leading zero",
    )


def _float(key: str, value: object) -> float:
    number: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an int beyond any float
            raise _out_of_range(key, _describe(value)) from None
    elif isinstance(value, str):
        text = value.strip()
        if _DECIMAL.fullmatch(text):
            number = float(text)
        elif _NOT_FINITE.fullmatch(text):
            number = float(text.replace(".", ""))
    if number is None:
        raise ConfigError(
            f"{key}: {_describe(value)} is not a number", hint=f"set {key} to a number"
        )
    if math.isnan(number):
        raise ConfigError(
            f"{key}: {_as_written(value, number)} is not a number",
            hint=LIMITS[key].hint() if key in LIMITS else f"set {key} to a number",
        )
    if math.isinf(number):
        raise _out_of_range(key, _as_written(value, number))
    return number


def _boolean(key: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    # "1"/"0" from the environment; a YAML number (`enabled: 1`) is refused
    if isinstance(value, str) and not isinstance(value, YamlNumber):
        word = value.strip().lower()
        if word in ("true", "yes", "on", "1"):
            return True
        if word in ("false", "no", "off", "0"):
            return False
    raise ConfigError(
        f"{key}: {_describe(value)} is not true or false", hint=f"set {key} to true or false"
    )


def _text(key: str, value: object) -> str:
    if not isinstance(value, str):
        raise ConfigError(
            f"{key}: {_describe(value)} is not a string", hint=f"set {key} to a string"
        )
    _check_text(key, value)
    return str(value)  # a plain str, also for a YamlNumber


def _check_text(key: str, text: str) -> None:
    if "\0" in text:
        raise ConfigError(
            f"{key}: {_describe(text)} contains a NUL character", hint="remove the \\0"
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(
            f"{key}: {_describe(text)} is not valid UTF-8 text",
            hint="check the encoding of the config file or environment variable",
        ) from None


def _build(
    cls: type, data: dict[object, object], prefix: str, environ: typing.Mapping[str, str]
) -> object:
    """Build a frozen settings dataclass from a mapping, checking every key and type."""
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    settable = [n for n in names if n not in _SECRET_KEYS]
    extra: dict[str, object] = {}
    for key in _SECRET_KEYS:
        if key in names:
            extra.update({f"{key}{suffix}": None for suffix in ("", "_env", "_file")})
    unknown = sorted(set(data) - set(settable) - set(extra), key=str)
    if unknown:
        allowed = ", ".join(sorted(settable + list(extra)))
        raise ConfigError(
            f"{prefix}{unknown[0]}: unknown setting",
            hint=f"allowed under {prefix.rstrip('.') or 'the top level'}: {allowed}",
        )
    kwargs: dict[str, object] = {}
    for name in names:
        kind = hints[name]
        key = f"{prefix}{name}"
        if name in _SECRET_KEYS:
            kwargs[name] = _secret(key, data, environ)
            continue
        if name not in data:
            continue
        value = data[name]
        origin = typing.get_origin(kind)
        args = typing.get_args(kind)
        optional = origin in (typing.Union, types.UnionType) and type(None) in args
        if optional:
            if value is None:
                kwargs[name] = None
                continue
            kind = next(a for a in args if a is not type(None))
        if typing.get_origin(kind) is tuple:
            kwargs[name] = _string_list(key, value)
            continue
        if dataclasses.is_dataclass(kind):
            if not isinstance(value, dict):
                raise ConfigError(
                    f"{key}: expected a section (key: value pairs), got {_describe(value)}",
                    hint=f"write {key} as a mapping",
                )
            kwargs[name] = _build(kind, value, f"{key}.", environ)  # type: ignore[arg-type]
        else:
            kwargs[name] = _convert(key, value, kind)
    return cls(**kwargs)


def _string_list(key: str, value: object) -> tuple[str, ...]:
    """A YAML list of strings, or a comma-separated string (environment variables)."""
    items: list[object] | None = None
    if isinstance(value, str) and not isinstance(value, YamlNumber):
        items = [part.strip() for part in value.split(",") if part.strip()]
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        items = value
    if items is None:
        raise ConfigError(
            f"{key}: {_describe(value)} is not a list of strings",
            hint=f'write {key} as a YAML list, e.g. ["shop.*"]',
        )
    return tuple(_text(key, item) for item in items)


def _secret(key: str, data: dict[object, object], environ: typing.Mapping[str, str]) -> Secret:
    """``password``, ``password_env`` or ``password_file`` under ``key``'s section. No message
    shows any of their values: a password put under the wrong one by mistake (or given as a
    list) must not reach a terminal or a log."""
    name = key.rpartition(".")[2]
    value = _secret_text(key, data.get(name), "quote the password")
    env = _secret_text(
        f"{key}_env", data.get(f"{name}_env"), "give the name of a variable holding the password"
    )
    file = _secret_text(
        f"{key}_file", data.get(f"{name}_file"), "give the path of a file holding the password"
    )
    if env and env not in environ and value is None and file is None:
        # Secret.resolve would name the variable, which may be the password itself
        raise ConfigError(
            f"{key}_env: names an environment variable that is not set; the name is not shown, "
            "in case it is the password itself",
            hint=f"set {key}_env to the name of a variable holding the password, and export it",
        )
    secret = Secret.resolve(value=value, env=env, file=file, key=key, environ=environ)
    try:
        size = len(secret.reveal().encode("utf-8"))
    except UnicodeEncodeError:  # from an environment variable that is not UTF-8
        raise ConfigError(
            f"{key}: not valid UTF-8 text; the value is not shown", hint="give it as UTF-8"
        ) from None
    if size > MAX_SECRET_BYTES:
        raise ConfigError(f"{key}: longer than {MAX_SECRET_BYTES} bytes", hint="shorten it")
    return secret


def _secret_text(key: str, value: object, hint: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ConfigError(
            f"{key}: not a string; the value is not shown, as it may be secret", hint=hint
        )
    return str(value)


def _env_overrides(environ: dict[str, str]) -> dict[object, object]:
    """``REPLICATOR_SOURCE__HOST=db`` -> {"source": {"host": "db"}}."""
    tree: dict[object, object] = {}
    for name, value in environ.items():
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        path = [p.lower() for p in name[len(ENV_PREFIX) :].split("__")]
        node = tree
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"{name}: conflicts with another REPLICATOR_ variable")
            node = child
        node[path[-1]] = value
    return tree


def _merge(base: dict[object, object], over: dict[object, object]) -> dict[object, object]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)  # type: ignore[arg-type]
        else:
            out[key] = value
    return out


def _parse_yaml(path: str | Path, text: str) -> object:
    """The YAML document, refusing a key given twice in one mapping (PyYAML keeps the last)."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _refuse_duplicate_keys(path, node, "")
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise ConfigError(
            f"config file {path} is not valid YAML{where}", hint="fix the YAML syntax"
        ) from None
    except RecursionError:
        raise ConfigError(
            f"config file {path} is nested too deeply", hint="settings are two or three levels"
        ) from None
    finally:
        loader.dispose()


def _refuse_duplicate_keys(path: str | Path, node: yaml.Node, prefix: str) -> None:
    if isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _refuse_duplicate_keys(path, item, prefix)
    if not isinstance(node, yaml.MappingNode):
        return
    seen: dict[str, int] = {}
    for key_node, value_node in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
            continue
        key, line = str(key_node.value), key_node.start_mark.line + 1
        if key in seen:
            raise ConfigError(
                f"{prefix}{key}: given twice in config file {path} (lines {seen[key]} and {line})",
                hint="remove one of them: YAML would silently keep the last",
            )
        seen[key] = line
        _refuse_duplicate_keys(path, value_node, f"{prefix}{key}.")


def load_config(path: str | Path | None, environ: dict[str, str] | None = None) -> Config:
    """Read a YAML file (optional), apply ``REPLICATOR_SECTION__KEY`` overrides, validate."""
    data: dict[object, object] = {}
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                f"cannot read config file {path}: {exc.strerror}",
                hint="pass --config with a readable YAML file",
            ) from None
        except UnicodeDecodeError:
            raise ConfigError(
                f"config file {path} is not UTF-8 text", hint="save it as UTF-8"
            ) from None
        loaded = _parse_yaml(path, text)
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {path}: the top level must be a mapping of sections")
        data = loaded
    env = dict(os.environ if environ is None else environ)
    data = _merge(data, _env_overrides(env))
    config = _build(Config, data, "", env)
    assert isinstance(config, Config)
    _validate(config)
    return config


# -- checks across settings (single numbers are checked against LIMITS while loading) ------------


def _validate(config: Config) -> None:
    _validate_source(config.source)
    _validate_start(config.start)
    _validate_sink(config.sink)
    _validate_filters(config.filters)
    _validate_mqtt(config.mqtt)
    _validate_service(config.service)
    _validate_snapshot(config.snapshot)


SNAPSHOT_MODES = ("initial", "never", "when_needed")


def _validate_snapshot(snapshot: SnapshotConfig) -> None:
    if snapshot.mode is not None and snapshot.mode not in SNAPSHOT_MODES:
        raise ConfigError(
            f"snapshot.mode: {_describe(snapshot.mode)} is not a snapshot mode",
            hint="use initial (land the tables' rows first, then their changes), "
            "when_needed (initial, and again when the source has purged the checkpoint's "
            "binlog) or never (changes only); leave it out for initial, or never when start "
            "is set",
        )


def _validate_source(source: SourceConfig) -> None:
    if not source.unix_socket:
        _check_host("source.host", source.host, "the port goes in source.port")
    if not source.user.strip():
        raise ConfigError("source.user: empty", hint="name the replication account, e.g. repl")
    _check_delays("source", source.reconnect_initial_delay, source.reconnect_max_delay)


def _validate_start(start: StartConfig) -> None:
    if start.gtid is not None and start.file is not None:
        raise ConfigError(
            "start: give either gtid or file/position, not both",
            hint="remove start.gtid or start.file",
        )
    if start.position != 4 and start.file is None:
        raise ConfigError(
            f"start.position: {start.position} is set without start.file",
            hint="a position counts within one binlog file: set start.file too",
        )
    if start.file is not None and not start.file.strip():
        raise ConfigError("start.file: empty", hint="name a binlog file, e.g. mysql-bin.000001")
    try:
        start_position(start.gtid, start.file, start.position)
    except ConfigError as exc:  # a GTID that does not parse
        raise ConfigError(f"start.gtid: {exc.args[0]}", hint=exc.hint) from None


def _validate_sink(sink: SinkConfig) -> None:
    if sink.compression not in ("zstd", "snappy", "gzip", "none"):
        raise ConfigError(
            f"sink.compression: {sink.compression!r} is not supported",
            hint="use zstd, snappy, gzip or none (lower case)",
        )
    _check_root(sink.root)


def _check_root(root: str) -> None:
    """The landing zone: a directory (or one to create) on a real filesystem."""
    key = "sink.root"
    if not root.strip():
        raise ConfigError(
            f"{key}: empty",
            hint='name the landing zone directory, e.g. ./landing, or "." for this one',
        )
    if root.startswith("~"):
        raise ConfigError(
            f"{key}: {root!r} starts with ~, which is not expanded",
            hint="write the home directory out, e.g. /home/etl/landing",
        )
    absolute = Path(os.path.abspath(root))
    real = Path(os.path.realpath(root))
    for tree in _SYSTEM_TREES:
        if any(path == tree or tree in path.parents for path in (absolute, real)):
            raise ConfigError(
                f"{key}: {root!r} is under {tree}, which is not a place for files",
                hint="put the landing zone on a real filesystem, e.g. /var/lib/replicator",
            )
    for path in (real, *real.parents):  # the nearest existing one must be a directory
        try:
            mode = os.stat(path).st_mode
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError:
            return  # cannot look (permissions): opening the landing zone reports it
        if stat.S_ISDIR(mode):
            return
        where = "" if path == real else f"is inside {path}, which "
        raise ConfigError(
            f"{key}: {root!r} {where}is a file, not a directory",
            hint="name a directory for the landing zone; it is created if missing",
        )


def _validate_filters(filters: FilterConfig) -> None:
    if not filters.include:
        raise ConfigError(
            "filters.include: empty, so no table would land", hint='e.g. ["*.*"] or ["shop.*"]'
        )
    for key, globs in (("filters.include", filters.include), ("filters.exclude", filters.exclude)):
        for glob in globs:
            if glob.count(".") != 1:
                raise ConfigError(
                    f"{key}: {glob!r} must be database.table (globs allowed)",
                    hint='e.g. "shop.*" or "*.orders"',
                )
    for glob in filters.exclude_columns:
        # a name without wildcards must spell out database.table.column, or it never matches
        # and the column it was meant to keep out lands
        if not any(c in glob for c in "*?[") and glob.count(".") != 2:
            raise ConfigError(
                f"filters.exclude_columns: {glob!r} never matches: columns are named "
                "database.table.column",
                hint='e.g. "crm.users.password_hash" or "*.*.password_hash"',
            )


def _validate_service(service: ServiceConfig) -> None:
    if service.http_enabled:
        _check_host(
            "service.http_host",
            service.http_host,
            "127.0.0.1, or 0.0.0.0 to listen on all; the port goes in service.http_port",
        )
    if service.log_level.lower() not in ("debug", "info", "warning", "error"):
        raise ConfigError(
            f"service.log_level: {_describe(service.log_level)} is not a log level",
            hint="use debug, info, warning or error",
        )
    if service.log_format not in ("auto", "json", "console"):
        raise ConfigError(
            f"service.log_format: {_describe(service.log_format)} is not a log format",
            hint="use auto, json or console",
        )


def _validate_mqtt(mqtt: MqttConfig) -> None:
    if mqtt.enabled:
        _check_host("mqtt.host", mqtt.host, "the port goes in mqtt.port")
    prefix = mqtt.topic_prefix
    if not prefix or prefix.startswith("/") or prefix.endswith("/") or "//" in prefix:
        raise ConfigError(
            f"mqtt.topic_prefix: {_describe(prefix)} has an empty topic level",
            hint='use levels separated by single slashes, e.g. "replicator/prod"',
        )
    if any(c in prefix for c in "+#\0"):
        raise ConfigError(
            f"mqtt.topic_prefix: {_describe(prefix)} contains a wildcard (+, #) or NUL",
            hint="topics we publish to cannot contain + or #",
        )
    for key, text in (
        ("mqtt.topic_prefix", f"{prefix}/commits"),
        ("mqtt.client_id", mqtt.client_id or ""),
        ("mqtt.username", mqtt.username or ""),
    ):
        if len(text.encode("utf-8")) > MAX_MQTT_STRING:
            raise ConfigError(
                f"{key}: {_describe(text)} is longer than MQTT allows",
                hint=f"MQTT strings are at most {MAX_MQTT_STRING} bytes of UTF-8",
            )
    if mqtt.password and not mqtt.username:
        raise ConfigError(
            "mqtt.password: set without mqtt.username",
            hint="MQTT sends a password only with a user name: set mqtt.username",
        )
    _check_delays("mqtt", mqtt.reconnect_initial_delay, mqtt.reconnect_max_delay)


def _check_delays(section: str, initial: float, most: float) -> None:
    if initial > most:
        raise ConfigError(
            f"{section}.reconnect_initial_delay: {_number(initial)} is above "
            f"{section}.reconnect_max_delay ({_number(most)})",
            hint="the delay doubles from the initial one up to the maximum",
        )


def _check_host(key: str, host: str, hint: str) -> None:
    """A DNS name or an IP address, alone: no scheme, port, brackets, spaces."""
    if not host:
        raise ConfigError(f"{key}: empty", hint=hint)
    try:
        ipaddress.ip_address(host)
        return
    except ValueError:
        pass
    name = host[:-1] if host.endswith(".") else host  # a fully qualified "db.example."
    labels = name.split(".")
    if len(name) > 253 or not all(
        0 < len(label) <= 63 and all(c.isalnum() or c in "-_" for c in label) for label in labels
    ):
        raise ConfigError(
            f"{key}: {_describe(host)} is not a host name or IP address",
            hint=f"letters, digits, - and _ in dot-separated labels of up to 63, or an IPv4 or "
            f"IPv6 address; {hint}",
        )
