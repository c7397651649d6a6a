"""Configuration, parsed once into frozen objects and passed explicitly.

This module holds the settings objects; loading them from YAML and the environment is done
by ``load_config``. Secrets are wrapped in ``Secret`` so they never print.
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .errors import ConfigError


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
            try:
                return cls(Path(file).read_text().rstrip("\r\n"))
            except OSError as exc:
                raise ConfigError(
                    f"{key}_file: cannot read {file}: {exc.strerror}",
                    hint="check the path and its permissions",
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
    compression: str = "zstd"
    row_group_rows: int = 128_000
    # a transaction with more row changes than this streams to staging files instead of
    # being held in memory, and commits as one batch at its end
    large_transaction_rows: int = 50_000


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


# -- loading ------------------------------------------------------------------------------------

ENV_PREFIX = "REPLICATOR_"
_SECRET_KEYS = ("password",)


def _describe(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _convert(key: str, value: object, kind: object) -> object:
    """Check/convert one scalar against a field type; errors name the key."""
    allowed = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
            return value.lower() in ("true", "yes", "1")
    elif kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value)
    elif kind is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
    elif kind is str and isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return str(value)
    raise ConfigError(
        f"{key}: {_describe(value)} is not {allowed.get(kind, str(kind))}",  # type: ignore[call-overload]
        hint=f"set {key} to {allowed.get(kind, str(kind))}",  # type: ignore[call-overload]
    )


def _build(
    cls: type, data: dict[str, object], prefix: str, environ: typing.Mapping[str, str]
) -> object:
    """Build a frozen settings dataclass from a mapping, checking every key and type."""
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    settable = [n for n in names if n not in _SECRET_KEYS]
    extra: dict[str, object] = {}
    for key in _SECRET_KEYS:
        if key in names:
            extra.update({f"{key}{suffix}": None for suffix in ("", "_env", "_file")})
    unknown = sorted(set(data) - set(settable) - set(extra))
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
            kwargs[name] = Secret.resolve(
                value=_opt_str(data.get(name), key),
                env=_opt_str(data.get(f"{name}_env"), f"{key}_env"),
                file=_opt_str(data.get(f"{name}_file"), f"{key}_file"),
                key=key,
                environ=environ,
            )
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
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    if isinstance(value, list) and all(isinstance(v, (str, int)) for v in value):
        return tuple(str(v) for v in value)
    raise ConfigError(
        f"{key}: {_describe(value)} is not a list of strings",
        hint=f'write {key} as a YAML list, e.g. ["shop.*"]',
    )


def _opt_str(value: object, key: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, (str, int)):
        raise ConfigError(f"{key}: {_describe(value)} is not a string", hint=f"quote {key}")
    return str(value)


def _env_overrides(environ: dict[str, str]) -> dict[str, object]:
    """``REPLICATOR_SOURCE__HOST=db`` -> {"source": {"host": "db"}}."""
    tree: dict[str, object] = {}
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


def _merge(base: dict[str, object], over: dict[str, object]) -> dict[str, object]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)  # type: ignore[arg-type]
        else:
            out[key] = value
    return out


def load_config(path: str | Path | None, environ: dict[str, str] | None = None) -> Config:
    """Read a YAML file (optional), apply ``REPLICATOR_SECTION__KEY`` overrides, validate."""
    data: dict[str, object] = {}
    if path is not None:
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise ConfigError(
                f"cannot read config file {path}: {exc.strerror}",
                hint="pass --config with a readable YAML file",
            ) from None
        try:
            loaded = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
            raise ConfigError(
                f"config file {path} is not valid YAML{where}",
                hint="fix the YAML syntax",
            ) from None
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


def _validate(config: Config) -> None:
    source = config.source
    if not 1 <= source.port <= 65535:
        raise ConfigError(f"source.port: {source.port} is out of range", hint="use 1..65535")
    if not 1 <= source.server_id <= 2**32 - 1:
        raise ConfigError(
            f"source.server_id: {source.server_id} is out of range",
            hint="use a replica id from 1 to 4294967295, unique among the source's replicas",
        )
    if source.heartbeat_seconds <= 0:
        raise ConfigError(
            f"source.heartbeat_seconds: {source.heartbeat_seconds} must be positive",
            hint="use a few seconds, e.g. 5",
        )
    if config.start.gtid and config.start.file:
        raise ConfigError(
            "start: give either gtid or file/position, not both",
            hint="remove start.gtid or start.file",
        )
    sink = config.sink
    for key, number in (
        ("sink.batch_max_rows", sink.batch_max_rows),
        ("sink.batch_max_bytes", sink.batch_max_bytes),
        ("sink.row_group_rows", sink.row_group_rows),
        ("sink.large_transaction_rows", sink.large_transaction_rows),
        ("source.buffer_events", config.source.buffer_events),
        ("source.buffer_rows", config.source.buffer_rows),
    ):
        if number < 1:
            raise ConfigError(f"{key}: {number} must be at least 1", hint=f"raise {key}")
    if sink.batch_max_seconds <= 0:
        raise ConfigError(
            f"sink.batch_max_seconds: {sink.batch_max_seconds} must be positive",
            hint="use e.g. 5",
        )
    if sink.compression not in ("zstd", "snappy", "gzip", "none"):
        raise ConfigError(
            f"sink.compression: {sink.compression!r} is not supported",
            hint="use zstd, snappy, gzip or none",
        )
    for key, globs in (
        ("filters.include", config.filters.include),
        ("filters.exclude", config.filters.exclude),
    ):
        for glob in globs:
            if glob.count(".") != 1:
                raise ConfigError(
                    f"{key}: {glob!r} must be database.table (globs allowed)",
                    hint='e.g. "shop.*" or "*.orders"',
                )
    if config.start.position < 4:
        raise ConfigError(
            f"start.position: {config.start.position} is before the first event",
            hint="binlog positions start at 4",
        )
    _validate_mqtt(config.mqtt)
    _validate_service(config.service)


def _validate_service(service: ServiceConfig) -> None:
    if not 0 <= service.http_port <= 65535:
        raise ConfigError(
            f"service.http_port: {service.http_port} is out of range",
            hint="use 1..65535, or 0 for any free port",
        )
    if service.http_enabled and not service.http_host:
        raise ConfigError(
            "service.http_host: empty", hint="use 127.0.0.1, or 0.0.0.0 to listen on all"
        )
    if service.shutdown_timeout <= 0:
        raise ConfigError(
            f"service.shutdown_timeout: {service.shutdown_timeout} must be positive",
            hint="seconds the first SIGTERM may take to commit, e.g. 30",
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
    if service.progress_seconds < 0:
        raise ConfigError(
            f"service.progress_seconds: {service.progress_seconds} must not be negative",
            hint="seconds between progress lines, or 0 for none",
        )


def _validate_mqtt(mqtt: MqttConfig) -> None:
    if not 1 <= mqtt.port <= 65535:
        raise ConfigError(f"mqtt.port: {mqtt.port} is out of range", hint="use 1..65535")
    if mqtt.enabled and not mqtt.host:
        raise ConfigError("mqtt.host: empty", hint="name the broker, or set mqtt.enabled: false")
    if mqtt.qos not in (0, 1, 2):
        raise ConfigError(f"mqtt.qos: {mqtt.qos} is not an MQTT QoS", hint="use 0, 1 or 2")
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
    if mqtt.password and not mqtt.username:
        raise ConfigError(
            "mqtt.password: set without mqtt.username",
            hint="MQTT sends a password only with a user name: set mqtt.username",
        )
    if not 1 <= mqtt.keepalive <= 65535:
        raise ConfigError(
            f"mqtt.keepalive: {mqtt.keepalive} is out of range",
            hint="use 1..65535 seconds, e.g. 30 (the offline will depends on it)",
        )
    if mqtt.queue_size < 1:
        raise ConfigError(f"mqtt.queue_size: {mqtt.queue_size} must be at least 1")
    if mqtt.timeout <= 0:
        raise ConfigError(f"mqtt.timeout: {mqtt.timeout} must be positive", hint="e.g. 10")
    if not 0 < mqtt.reconnect_initial_delay <= mqtt.reconnect_max_delay:
        raise ConfigError(
            "mqtt.reconnect_initial_delay must be positive and at most reconnect_max_delay",
            hint="e.g. reconnect_initial_delay: 0.5, reconnect_max_delay: 30",
        )
