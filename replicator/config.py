"""Configuration, parsed once into frozen objects and passed explicitly.

The settings are frozen dataclasses; ``load_config`` fills them from a YAML file and
``REPLICATOR_SECTION__KEY`` environment variables and validates them with pydantic. Each
setting's type says how its value is read (numbers by one strict grammar, as written), a
number's range is its ``Field(ge=..., le=...)``, a choice is a ``Literal``, and the checks
across a section's settings are its ``model_validator``. So a bad value stops the program at
start (exit 2, naming the key) instead of crashing or misbehaving later. Secrets are wrapped in
``Secret`` so they never print, and no error message shows them either.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import ipaddress
import math
import os
import re
import stat
import typing
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Self
from urllib.parse import urlsplit

import yaml
from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    PlainValidator,
    TypeAdapter,
    ValidationError,
    model_validator,
    with_config,
)
from pydantic.fields import FieldInfo
from pydantic_core import CoreSchema, ErrorDetails, core_schema

from .binlog.position import start_position
from .errors import ConfigError
from .storage import carries_credentials, is_url, redact_url

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
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        # Validation only ever sees a Secret: load_config resolves password, password_env and
        # password_file into one first, so no pydantic error can carry the text.
        return core_schema.is_instance_schema(cls)

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
MAX_MQTT_STRING = 65535  # UTF-8 bytes: MQTT strings carry a 16-bit length


@dataclass(frozen=True, slots=True)
class Limit:
    """The allowed range of one numeric setting, and what the number means (for the hint):
    its type's ``Field(ge=..., le=..., description=...)``, and ``ZeroTurnsOff`` if it has it."""

    least: int | float
    most: int | float
    means: str
    zero_turns_off: bool = False  # 0 is allowed too, below ``least``

    def allows(self, number: int | float) -> bool:
        return self.least <= number <= self.most or (self.zero_turns_off and number == 0)

    def hint(self) -> str:
        off = ", or 0 to turn it off" if self.zero_turns_off else ""
        return f"use {_number(self.least)} to {_number(self.most)}{off}: {self.means}"

    @classmethod
    def of(cls, kind: object) -> Limit | None:
        """The limit an ``Annotated`` setting type carries, if any."""
        metadata = getattr(kind, "__metadata__", ())
        for info in metadata:
            if isinstance(info, FieldInfo) and info.description is not None:
                least = next(bound.ge for bound in info.metadata if hasattr(bound, "ge"))
                most = next(bound.le for bound in info.metadata if hasattr(bound, "le"))
                off = any(isinstance(meta, ZeroTurnsOff) for meta in metadata)
                return cls(least, most, info.description, off)
        return None


@dataclass(frozen=True, slots=True)
class ZeroTurnsOff:
    """After a number's ``Field(ge=..., le=...)``: 0 is allowed too, below the range, and turns
    the feature off."""

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        def off_or_in_range(
            value: object, in_range: core_schema.ValidatorFunctionWrapHandler
        ) -> object:
            number = _float(value)
            return number if number == 0 else in_range(value)

        return core_schema.no_info_wrap_validator_function(off_or_in_range, handler(source))


# -- values as written --------------------------------------------------------------------------

# Integers in decimal, as written: no leading zero (YAML 1.1 would read 010 as octal 8), no
# fraction or exponent (100.0 and 1e5 are refused rather than guessed at).
_INTEGER = re.compile(r"[+-]?(?:0|[1-9](?:_?[0-9])*)", re.ASCII)
_DECIMAL = re.compile(
    r"[+-]?(?:[0-9](?:_?[0-9])*(?:\.(?:[0-9](?:_?[0-9])*)?)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?",
    re.ASCII,
)
_NOT_FINITE = re.compile(r"[+-]?\.?(?:inf|infinity|nan)", re.ASCII | re.IGNORECASE)


class YamlNumber(str):
    """A YAML scalar that YAML 1.1 would read as a number, kept exactly as written.

    Numbers are parsed here, by one grammar for the file and the environment; a string
    setting gets the text itself (``password: 0123`` is "0123", not the octal 83)."""

    __slots__ = ()


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


# -- reading one value ----------------------------------------------------------------------------
# The validators of the settings' types. Each takes a value as loaded (from YAML, numbers as
# their text; from the environment, text) and raises ``_Invalid``: pydantic adds where it was,
# and ``_config_error`` names the dotted key.


class _Invalid(ValueError):
    """What is wrong with a value (shown after its key) and what to write instead; ``{key}`` in
    the hint stands for the dotted key, which only the error's location tells, and no hint
    means the setting's range (``LIMITS``). A section's own check (its ``model_validator``)
    names the key it refuses by ``at``, below the section ("" for the section itself)."""

    def __init__(self, problem: str, hint: str | None = None, *, at: str | None = None) -> None:
        super().__init__(problem)
        self.hint = hint
        self.at = at


def _integer(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    text = value.strip() if isinstance(value, str) else ""
    if not _INTEGER.fullmatch(text):
        raise _Invalid(
            f"{_describe(value)} is not an integer",
            "set {key} to a whole number in decimal digits: no fraction, exponent or leading zero",
        )
    # int() refuses 4300 digits or more; the first 99 are far out of every range already (the
    # message shows the value as written, not this number)
    return int(text.replace("_", "")[:100])


def _float(value: object) -> float:
    number: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an int beyond any float
            number = math.copysign(math.inf, value)
    elif isinstance(value, str):
        text = value.strip()
        if _DECIMAL.fullmatch(text):
            number = float(text)
        elif _NOT_FINITE.fullmatch(text):
            number = float(text.replace(".", ""))
    if number is None:
        raise _Invalid(f"{_describe(value)} is not a number", "set {key} to a number")
    if math.isnan(number):
        raise _Invalid(f"{_as_written(value, number)} is not a number")
    return number  # infinite ones are out of every range (Field(le=...))


def _boolean(value: object) -> bool:
    if isinstance(value, bool):
        return value
    # "1"/"0" from the environment; a YAML number (`enabled: 1`) is refused
    if isinstance(value, str) and not isinstance(value, YamlNumber):
        word = value.strip().lower()
        if word in ("true", "yes", "on", "1"):
            return True
        if word in ("false", "no", "off", "0"):
            return False
    raise _Invalid(f"{_describe(value)} is not true or false", "set {key} to true or false")


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise _Invalid(f"{_describe(value)} is not a string", "set {key} to a string")
    if "\0" in value:
        raise _Invalid(f"{_describe(value)} contains a NUL character", "remove the \\0")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _Invalid(
            f"{_describe(value)} is not valid UTF-8 text",
            "check the encoding of the config file or environment variable",
        ) from None
    return str(value)  # a plain str, also for a YamlNumber


def _string_list(value: object) -> tuple[str, ...]:
    """A YAML list of strings, or a comma-separated string (environment variables)."""
    items: list[object] | None = None
    if isinstance(value, str) and not isinstance(value, YamlNumber):
        items = [part.strip() for part in value.split(",") if part.strip()]
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        items = value
    if items is None:
        raise _Invalid(
            f"{_describe(value)} is not a list of strings",
            'write {key} as a YAML list, e.g. ["shop.*"]',
        )
    return tuple(_text(item) for item in items)


Integer = Annotated[int, BeforeValidator(_integer)]
Number = Annotated[float, BeforeValidator(_float)]
Flag = Annotated[bool, PlainValidator(_boolean)]
Text = Annotated[str, PlainValidator(_text)]
OptionalText = Text | None
Globs = Annotated[tuple[str, ...], PlainValidator(_string_list)]

# Choices: text, then one of the words (log levels in any case).
LogLevel = Annotated[
    Literal["debug", "info", "warning", "error"], BeforeValidator(lambda v: _text(v).lower())
]
LogFormat = Annotated[Literal["auto", "json", "console"], BeforeValidator(_text)]
Compression = Annotated[Literal["zstd", "snappy", "gzip", "none"], BeforeValidator(_text)]
SnapshotMode = Annotated[Literal["initial", "never", "when_needed"], BeforeValidator(_text)]

# What a value that is none of its setting's choices is told, and the hint, by key.
_NOT_A_CHOICE = {
    "service.log_level": ("is not a log level", "use debug, info, warning or error"),
    "service.log_format": ("is not a log format", "use auto, json or console"),
    "sink.compression": ("is not supported", "use zstd, snappy, gzip or none (lower case)"),
    "snapshot.mode": (
        "is not a snapshot mode",
        "use initial (land the tables' rows first, then their changes), when_needed (initial, "
        "and again when the source has purged the checkpoint's binlog) or never (changes "
        "only); leave it out for initial, or never when start is set",
    ),
}

# A key no setting has is refused, not ignored: it is likely a typo, and the setting meant
# would silently keep its default.
_UNKNOWN_KEYS_REFUSED = ConfigDict(extra="forbid")


# -- the settings ---------------------------------------------------------------------------------
# Plain frozen dataclasses: code builds them directly (the embedded demo, `replicator check`,
# tests, some beyond the limits a file may set) and they take what it gives. Only load_config
# validates, through pydantic (``_CONFIG``): the annotations and ``model_validator``s below are
# what it checks.


@with_config(_UNKNOWN_KEYS_REFUSED)
@dataclass(frozen=True, slots=True)
class TlsConfig:
    enabled: Flag = False
    ca_file: OptionalText = None
    cert_file: OptionalText = None
    key_file: OptionalText = None
    verify_server_cert: Flag = True
    verify_hostname: Flag = True

    @model_validator(mode="after")
    def _check(self) -> Self:
        # a CA or a certificate without `enabled` would otherwise mean clear text, silently
        given = [
            name
            for name, set_ in (
                ("ca_file", self.ca_file is not None),
                ("cert_file", self.cert_file is not None),
                ("key_file", self.key_file is not None),
                ("verify_server_cert", not self.verify_server_cert),
                ("verify_hostname", not self.verify_hostname),
            )
            if set_
        ]
        if given and not self.enabled:
            raise _Invalid(
                f"{', '.join(given)} set while TLS is off (the connection would be clear text)",
                "set enabled: true to use TLS, or remove them",
                at="enabled",
            )
        return self


@with_config(_UNKNOWN_KEYS_REFUSED)
@dataclass(frozen=True, slots=True)
class SourceConfig:
    """The server replicator reads from."""

    host: Text = "127.0.0.1"
    port: Annotated[Integer, Field(ge=1, le=65535, description="a TCP port")] = 3306
    user: Text = "repl"
    password: Secret = field(default_factory=lambda: Secret(""))
    unix_socket: OptionalText = None
    tls: TlsConfig = field(default_factory=TlsConfig)
    # without TLS (or a unix socket): the server's RSA public key (PEM) for caching_sha2_password
    # full authentication; or take the key the server sends (anyone at its address could)
    server_public_key_file: OptionalText = None
    get_server_public_key: Flag = False
    # our replica id: must differ from every other replica's
    server_id: Annotated[
        Integer,
        Field(ge=1, le=2**32 - 1, description="a replica id, unique among the source's replicas"),
    ] = 65000
    connect_timeout: Annotated[
        Number,
        Field(ge=0.001, le=HOUR, description="seconds, e.g. 10"),
    ] = 10.0
    heartbeat_seconds: Annotated[
        Number,
        Field(
            ge=0.001,
            le=MAX_HEARTBEAT,
            description="seconds, e.g. 5; the server's heartbeat period range",
        ),
    ] = 5.0
    annotate_rows: Flag = False  # MariaDB: ask for ANNOTATE_ROWS events (bigger stream)
    reconnect_initial_delay: Annotated[
        Number, Field(ge=0.001, le=HOUR, description="seconds, e.g. 0.2")
    ] = 0.2
    reconnect_max_delay: Annotated[
        Number, Field(ge=0.001, le=HOUR, description="seconds, e.g. 30")
    ] = 30.0
    # a CRC mismatch at the same position this often: exit 4
    max_checksum_retries: Annotated[
        Integer, Field(ge=1, le=100, description="reads of one position before exit 4, e.g. 3")
    ] = 3
    # bounded hand-off between the reader thread and the loop...
    buffer_events: Annotated[
        Integer, Field(ge=1, le=MAX_COUNT, description="events, e.g. 10000")
    ] = 10000
    # ...also bounded by row images waiting in it (memory)...
    buffer_rows: Annotated[
        Integer, Field(ge=1, le=MAX_COUNT, description="row images, e.g. 100000")
    ] = 100_000
    # ...and by the binlog bytes of their rows events (wide rows)
    buffer_bytes: Annotated[
        Integer, Field(ge=1, le=MAX_BYTES, description="binlog bytes, e.g. 67108864")
    ] = 64 * 1024 * 1024

    @model_validator(mode="after")
    def _check(self) -> Self:
        if not self.unix_socket:
            _check_host("host", self.host, "the port goes in source.port")
        if not self.user.strip():
            raise _Invalid("empty", "name the replication account, e.g. repl", at="user")
        _check_delays("source", self.reconnect_initial_delay, self.reconnect_max_delay)
        return self


@with_config(_UNKNOWN_KEYS_REFUSED)
@dataclass(frozen=True, slots=True)
class StartConfig:
    """Where to begin when there is no checkpoint yet: "now" (default), a GTID position or
    set, or a binlog file and position."""

    gtid: OptionalText = None
    file: OptionalText = None
    position: Annotated[
        Integer,
        Field(ge=4, le=MAX_POSITION, description="a byte offset in start.file; binlogs start at 4"),
    ] = 4

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.gtid is not None and self.file is not None:
            raise _Invalid(
                "give either gtid or file/position, not both",
                "remove start.gtid or start.file",
                at="",
            )
        if self.position != 4 and self.file is None:
            raise _Invalid(
                f"{self.position} is set without start.file",
                "a position counts within one binlog file: set start.file too",
                at="position",
            )
        if self.file is not None and not self.file.strip():
            raise _Invalid("empty", "name a binlog file, e.g. mysql-bin.000001", at="file")
        try:
            start_position(self.gtid, self.file, self.position)
        except ConfigError as exc:  # a GTID that does not parse
            raise _Invalid(exc.args[0], exc.hint, at="gtid") from None
        return self


@with_config(_UNKNOWN_KEYS_REFUSED)
@dataclass(frozen=True, slots=True)
class CompactionConfig:
    """Compaction and retention of the landing zone (``sink.compaction``; docs/operations.md)."""

    # the daemon compacts this often (seconds; 0: never, run `replicator compact` instead)
    every: Annotated[
        Number,
        Field(ge=1, le=30 * DAY, description="seconds between compactions, e.g. 3600"),
        ZeroTurnsOff(),
    ] = 0.0
    # only files of batches committed at least this long ago are merged
    older_than: Annotated[
        Number,
        Field(ge=0, le=365 * DAY, description="seconds, e.g. 86400"),
    ] = float(DAY)
    # a merged file grows to about this size
    target_bytes: Annotated[
        Integer, Field(ge=1024, le=MAX_BYTES, description="bytes, e.g. 134217728")
    ] = 128 * 1024**2
    # superseded files are deleted this long after the compaction that merged them
    retention: Annotated[
        Number,
        Field(ge=0, le=365 * DAY, description="seconds, e.g. 86400"),
    ] = float(DAY)


@with_config(_UNKNOWN_KEYS_REFUSED)
@dataclass(frozen=True, slots=True)
class ObjectStoreConfig:
    """How to reach the object store a ``sink.root`` URL names (``storage``). Credentials
    come from the store's usual chain (AWS: environment, profile, instance role) unless
    given here, each as ``<key>_env`` or ``<key>_file`` (or the key itself, quoted)."""

    endpoint: OptionalText = None  # an S3-compatible store: http(s)://host:port
    region: OptionalText = None
    access_key: Secret = field(default_factory=lambda: Secret(""))
    secret_key: Secret = field(default_factory=lambda: Secret(""))
    session_token: Secret = field(default_factory=lambda: Secret(""))
    # seconds a writer's lease on the landing zone lasts without renewal (sink.lock)
    lease_seconds: Annotated[Number, Field(ge=5, le=DAY, description="seconds, e.g. 60")] = 60.0

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.endpoint is not None and carries_credentials(self.endpoint):
            raise _Invalid(
                f"{redact_url(self.endpoint)!r} carries credentials or options; they are not "
                "read (and the URL is not shown whole)",
                "give credentials as access_key_env and secret_key_env (or through the "
                "store's credential chain), and the endpoint as http(s)://host:port",
                at="endpoint",
            )
        if self.endpoint is not None and urlsplit(self.endpoint).scheme not in ("http", "https"):
            raise _Invalid(
                f"{redact_url(self.endpoint)!r} is not an http(s) URL",
                "e.g. http://minio:9000 or https://s3.eu-central-1.amazonaws.com",
                at="endpoint",
            )
        if bool(self.access_key) != bool(self.secret_key):
            raise _Invalid(
                "access_key and secret_key go together",
                "give both (e.g. access_key_env and secret_key_env), or neither to use the "
                "store's credential chain (environment, profile, instance role)",
                at="",
            )
        return self


@with_config(_UNKNOWN_KEYS_REFUSED)
@dataclass(frozen=True, slots=True)
class SinkConfig:
    """The landing zone and how changes are batched into it."""

    # a directory, or an object store's URL (s3://bucket/prefix; gs://, abfs://, hdfs://)
    root: Text = "./landing"
    # commit when a batch holds this many row changes...
    batch_max_rows: Annotated[
        Integer, Field(ge=1, le=MAX_COUNT, description="row changes, e.g. 100000")
    ] = 100_000
    # ...or this many binlog bytes...
    batch_max_bytes: Annotated[
        Integer, Field(ge=1, le=MAX_BYTES, description="binlog bytes, e.g. 67108864")
    ] = 64 * 1024 * 1024
    # ...or its first transaction is this old
    batch_max_seconds: Annotated[
        Number,
        Field(ge=0.001, le=DAY, description="seconds, e.g. 5"),
    ] = 5.0
    keep_before_image: Flag = False  # updates also carry the before image as `_before`
    # GEOMETRY columns land as struct<wkb: binary, srid: uint32> instead of WKB alone
    geometry_srid: Flag = False
    compression: Compression = "zstd"
    row_group_rows: Annotated[
        Integer, Field(ge=1, le=MAX_COUNT, description="rows per Parquet row group, e.g. 128000")
    ] = 128_000
    # a transaction with more row changes than this (or more binlog bytes of rows events
    # than large_transaction_bytes) streams to staging files instead of being held in
    # memory, and commits as one batch at its end
    large_transaction_rows: Annotated[
        Integer, Field(ge=1, le=MAX_COUNT, description="row changes, e.g. 50000")
    ] = 50_000
    large_transaction_bytes: Annotated[
        Integer, Field(ge=1, le=MAX_BYTES, description="binlog bytes, e.g. 33554432")
    ] = 32 * 1024 * 1024
    compaction: CompactionConfig = field(default_factory=CompactionConfig)
    object_store: ObjectStoreConfig = field(default_factory=ObjectStoreConfig)

    @model_validator(mode="after")
    def _check(self) -> Self:
        if is_url(self.root):
            _check_url_root(self.root)
        else:
            _check_root(self.root)
        return self


@with_config(_UNKNOWN_KEYS_REFUSED)
@dataclass(frozen=True, slots=True)
class SnapshotConfig:
    """Landing the rows tables hold already (replicator.snapshot)."""

    # initial: snapshot every replicated table when the landing zone is new (the default
    # unless start.gtid/start.file is set), and tables filters.include newly takes in;
    # when_needed: as initial, and snapshot every table again when the source no longer has
    # the checkpoint's binlog (instead of stopping); never: land changes only
    mode: SnapshotMode | None = None
    # rows per chunk (one read view, one SELECT)
    chunk_rows: Annotated[
        Integer, Field(ge=1, le=10_000_000, description="rows per snapshot chunk, e.g. 20000")
    ] = 20_000
    # ...or this many bytes of row data, whichever comes first (one larger row goes alone)
    chunk_bytes: Annotated[
        Integer, Field(ge=1024, le=MAX_BYTES, description="bytes per snapshot chunk, e.g. 16777216")
    ] = 16 * 1024 * 1024
    # seconds a snapshot query may wait for the source (each read and write): a stalled
    # connection is dropped after this long and the chunk is read again on a new one
    query_timeout: Annotated[Number, Field(ge=0.1, le=HOUR, description="seconds, e.g. 60")] = 60.0


@with_config(_UNKNOWN_KEYS_REFUSED)
@dataclass(frozen=True, slots=True)
class FilterConfig:
    """Which tables land. Globs over ``database.table`` (and ``database.table.column``)."""

    include: Globs = ("*.*",)
    exclude: Globs = ()
    exclude_columns: Globs = ()

    def wants(self, database: str, table: str) -> bool:
        """Whether ``database``.``table`` lands: an include glob matches it and no exclude
        glob does."""
        name = f"{database}.{table}"
        return any(fnmatch.fnmatchcase(name, g) for g in self.include) and not any(
            fnmatch.fnmatchcase(name, g) for g in self.exclude
        )

    @model_validator(mode="after")
    def _check(self) -> Self:
        if not self.include:
            raise _Invalid(
                "empty, so no table would land", 'e.g. ["*.*"] or ["shop.*"]', at="include"
            )
        for key, globs in (("include", self.include), ("exclude", self.exclude)):
            for glob in globs:
                if glob.count(".") != 1:
                    raise _Invalid(
                        f"{glob!r} must be database.table (globs allowed)",
                        'e.g. "shop.*" or "*.orders"',
                        at=key,
                    )
        for glob in self.exclude_columns:
            # a name without wildcards must spell out database.table.column, or it never
            # matches and the column it was meant to keep out lands
            if not any(c in glob for c in "*?[") and glob.count(".") != 2:
                raise _Invalid(
                    f"{glob!r} never matches: columns are named database.table.column",
                    'e.g. "crm.users.password_hash" or "*.*.password_hash"',
                    at="exclude_columns",
                )
        return self


@with_config(_UNKNOWN_KEYS_REFUSED)
@dataclass(frozen=True, slots=True)
class MqttConfig:
    """The MQTT broker told about every committed batch (``notify.py``; best-effort)."""

    enabled: Flag = False
    host: Text = "127.0.0.1"
    port: Annotated[
        Integer, Field(ge=1, le=65535, description="a TCP port, usually 1883 (8883 with TLS)")
    ] = 1883
    client_id: OptionalText = None  # default "replicator-<hostname>"; unique per instance
    username: OptionalText = None
    password: Secret = field(default_factory=lambda: Secret(""))
    topic_prefix: Text = "replicator"  # <prefix>/commits and <prefix>/status (retained)
    # for <prefix>/commits; the status messages always use QoS 1
    qos: Annotated[Integer, Field(ge=0, le=2, description="the MQTT QoS of commit messages")] = 1
    tls: TlsConfig = field(default_factory=TlsConfig)
    # seconds; the broker publishes our "offline" will after 1.5x silence
    keepalive: Annotated[
        Integer,
        Field(ge=1, le=65535, description="seconds, e.g. 30; the offline will depends on it"),
    ] = 30
    # seconds to wait for CONNACK and for each PUBACK
    timeout: Annotated[Number, Field(ge=0.001, le=HOUR, description="seconds, e.g. 10")] = 10.0
    # notifications held while the broker is away; then oldest dropped
    queue_size: Annotated[
        Integer,
        Field(ge=1, le=1_000_000, description="notifications held while the broker is away"),
    ] = 1000
    reconnect_initial_delay: Annotated[
        Number, Field(ge=0.001, le=HOUR, description="seconds, e.g. 0.5")
    ] = 0.5
    reconnect_max_delay: Annotated[
        Number, Field(ge=0.001, le=HOUR, description="seconds, e.g. 30")
    ] = 30.0

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.enabled:
            _check_host("host", self.host, "the port goes in mqtt.port")
        prefix = self.topic_prefix
        if not prefix or prefix.startswith("/") or prefix.endswith("/") or "//" in prefix:
            raise _Invalid(
                f"{_describe(prefix)} has an empty topic level",
                'use levels separated by single slashes, e.g. "replicator/prod"',
                at="topic_prefix",
            )
        if any(c in prefix for c in "+#\0"):
            raise _Invalid(
                f"{_describe(prefix)} contains a wildcard (+, #) or NUL",
                "topics we publish to cannot contain + or #",
                at="topic_prefix",
            )
        for key, text in (
            ("topic_prefix", f"{prefix}/commits"),
            ("client_id", self.client_id or ""),
            ("username", self.username or ""),
        ):
            if len(text.encode("utf-8")) > MAX_MQTT_STRING:
                raise _Invalid(
                    f"{_describe(text)} is longer than MQTT allows",
                    f"MQTT strings are at most {MAX_MQTT_STRING} bytes of UTF-8",
                    at=key,
                )
        if self.password and not self.username:
            raise _Invalid(
                "set without mqtt.username",
                "MQTT sends a password only with a user name: set mqtt.username",
                at="password",
            )
        _check_delays("mqtt", self.reconnect_initial_delay, self.reconnect_max_delay)
        return self


@with_config(_UNKNOWN_KEYS_REFUSED)
@dataclass(frozen=True, slots=True)
class ServiceConfig:
    """The daemon itself: its HTTP port (/metrics, /healthz, /readyz), shutdown, logs."""

    http_enabled: Flag = True
    http_host: Text = "127.0.0.1"  # 0.0.0.0 in a container, so Prometheus can scrape it
    # 0: any free port (logged at start)
    http_port: Annotated[
        Integer, Field(ge=0, le=65535, description="a TCP port, or 0 for any free port")
    ] = 9108
    # first SIGTERM: commit within this long, then exit
    shutdown_timeout: Annotated[
        Number,
        Field(ge=0.001, le=HOUR, description="seconds the first SIGTERM may take, e.g. 30"),
    ] = 30.0
    log_level: LogLevel = "info"
    log_format: LogFormat = "auto"  # auto: JSON unless stderr is a terminal
    # catch-up progress line on a terminal; 0 turns it off
    progress_seconds: Annotated[
        Number,
        Field(ge=0.1, le=DAY, description="seconds between progress lines, e.g. 5"),
        ZeroTurnsOff(),
    ] = 5.0

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.http_enabled:
            _check_host(
                "http_host",
                self.http_host,
                "127.0.0.1, or 0.0.0.0 to listen on all; the port goes in service.http_port",
            )
        return self


@with_config(_UNKNOWN_KEYS_REFUSED)
@dataclass(frozen=True, slots=True)
class Config:
    """Every setting, by section; ``load_config`` reads it from a file and the environment."""

    service: ServiceConfig = field(default_factory=ServiceConfig)
    source: SourceConfig = field(default_factory=SourceConfig)
    start: StartConfig = field(default_factory=StartConfig)
    mqtt: MqttConfig = field(default_factory=MqttConfig)
    sink: SinkConfig = field(default_factory=SinkConfig)
    filters: FilterConfig = field(default_factory=FilterConfig)
    snapshot: SnapshotConfig = field(default_factory=SnapshotConfig)


def _limits(cls: type, prefix: str = "") -> Iterator[tuple[str, Limit]]:
    """The ``Limit`` in each numeric setting's type, by dotted key, sections walked into."""
    for name, kind in typing.get_type_hints(cls, include_extras=True).items():
        if isinstance(kind, type) and dataclasses.is_dataclass(kind):
            yield from _limits(kind, f"{prefix}{name}.")
        limit = Limit.of(kind)
        if limit is not None:
            yield f"{prefix}{name}", limit


# Every numeric setting's range by its dotted key ("sink.batch_max_rows"), from the types above.
LIMITS: dict[str, Limit] = dict(_limits(Config))


# -- loading ------------------------------------------------------------------------------------

ENV_PREFIX = "REPLICATOR_"
_SYSTEM_TREES = (Path("/proc"), Path("/sys"), Path("/dev"))
_CONFIG = TypeAdapter(Config)
_SECTION_TYPES: dict[str, type] = typing.get_type_hints(Config)  # "source": SourceConfig, ...


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, but numbers stay text (``YamlNumber``) until a setting types them."""


def _number_text(loader: yaml.SafeLoader, node: yaml.Node) -> YamlNumber:
    assert isinstance(node, yaml.ScalarNode)
    return YamlNumber(loader.construct_scalar(node))


_Loader.add_constructor("tag:yaml.org,2002:int", _number_text)
_Loader.add_constructor("tag:yaml.org,2002:float", _number_text)


def _from_environment(environ: Mapping[str, str]) -> dict[str, Any]:
    """``REPLICATOR_SOURCE__TLS__ENABLED=on`` -> {"source": {"tls": {"enabled": "on"}}}: the
    section, nested sections and the key after ``REPLICATOR_``, each before ``__``, in any
    case. Values stay text: each setting reads its own."""
    settings: dict[str, Any] = {}
    for name, value in environ.items():
        # Only REPLICATOR_ names with a section and a key set anything: a password variable
        # such as REPLICATOR_SOURCE_PASSWORD is no setting.
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        *sections, key = name[len(ENV_PREFIX) :].lower().split("__")
        if sections[0] not in _SECTION_TYPES:  # a misspelt section would set nothing
            raise _unknown_variable(name, _unknown_setting((), sections[0]))
        unknown = _unknown_key(sections, key)
        if unknown is not None:
            raise _unknown_variable(name, unknown)
        where: Any = settings
        for section in sections:
            if isinstance(where, dict):  # not under REPLICATOR_SOURCE__TLS=on, say
                where = where.setdefault(section, {})
        if isinstance(where, dict):
            where[key] = value
    return settings


def _unknown_key(sections: Sequence[str], key: str) -> ConfigError | None:
    """The unknown setting among ``sections`` and ``key`` (an environment variable's name
    after the prefix, split at ``__``), or None. A name past a setting that is no section
    (REPLICATOR_SOURCE__PORT__X) is left to the validation to refuse."""
    kind: object = Config
    path: list[str] = []
    for part in (*sections, key):
        if not (isinstance(kind, type) and dataclasses.is_dataclass(kind)):
            return None
        if part not in _keys_of(kind):
            return _unknown_setting(path, part)
        found = typing.get_type_hints(kind).get(part)
        args = [a for a in typing.get_args(found) if a is not type(None)]
        kind = args[0] if len(args) == 1 and dataclasses.is_dataclass(args[0]) else found
        path.append(part)
    return None


def _unknown_variable(name: str, error: ConfigError) -> ConfigError:
    """An unknown setting named by an environment variable: the message names the variable
    (the setting alone would send the reader to look for it in the config file)."""
    return ConfigError(
        f"{error.args[0]} (from the environment variable {name})",
        hint=f"{error.hint}; unset {name} or correct its name",
    )


def _secret(key: str, data: Mapping[object, object], environ: Mapping[str, str]) -> Secret:
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
    if isinstance(value, YamlNumber):
        # kept as written here, but a YAML number is not the text it looks like to every
        # reader of the file (0123 is 83 to YAML 1.1, 3.10 is 3.1 to any tool that rewrites it)
        raise ConfigError(
            f"{key}: written as a YAML number; the value is not shown, as it may be secret",
            hint=f"quote it ({key.rpartition('.')[2]}: '...'), so that it is text to every "
            "reader of the file",
        )
    if not isinstance(value, str):
        raise ConfigError(
            f"{key}: not a string; the value is not shown, as it may be secret", hint=hint
        )
    return str(value)


def _resolve_secrets(
    data: dict[Any, Any],
    environ: Mapping[str, str],
    sections: Mapping[str, type] = _SECTION_TYPES,
    prefix: str = "",
) -> None:
    """Each section's secret settings (``password``, ``password_env``, ``password_file``,
    and so on for every ``Secret`` field) into the one ``Secret`` the field holds; nested
    sections walked into. This happens before validation because pydantic's errors carry the
    values they refuse."""
    for name, kind in sections.items():
        section = data.get(name)
        if not isinstance(section, dict) or not dataclasses.is_dataclass(kind):
            continue
        hints = typing.get_type_hints(kind)
        section = dict(section)
        for secret_name in _secrets_of(kind):
            forms = (secret_name, f"{secret_name}_env", f"{secret_name}_file")
            if any(form in section for form in forms):
                secret = _secret(f"{prefix}{name}.{secret_name}", section, environ)
                section = {k: v for k, v in section.items() if k not in forms}
                section[secret_name] = secret
        nested = {
            field_name: hint
            for field_name, hint in hints.items()
            if isinstance(hint, type) and dataclasses.is_dataclass(hint)
        }
        if nested:
            _resolve_secrets(section, environ, nested, f"{prefix}{name}.")
        data[name] = section


def _secrets_of(cls: type) -> list[str]:
    hints = typing.get_type_hints(cls)
    return [f.name for f in dataclasses.fields(cls) if hints[f.name] is Secret]


def _keys_of(cls: type) -> list[str]:
    """The keys a section takes: its fields, and for a secret its _env and _file forms."""
    names = [f.name for f in dataclasses.fields(cls)]
    for secret in _secrets_of(cls):
        names += [f"{secret}_env", f"{secret}_file"]
    return names


def _merge(base: dict[Any, Any], over: dict[Any, Any]) -> dict[Any, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _read_file(path: str | Path) -> dict[Any, Any]:
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
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"config file {path}: the top level must be a mapping of sections")
    return loaded


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


def _config_error(error: ValidationError, data: Mapping[str, Any]) -> ConfigError:
    """What pydantic refused, as the user should read it: the dotted key, the value as written
    (``data``, what was validated) and what is allowed. One problem is told: an unknown key
    first (a typo explains the rest), then a value's own problem, then a section's check
    across its settings; the first in the order of the settings among them."""
    problem = min(error.errors(), key=_precedence)
    *path, last = problem["loc"]
    kind = problem["type"]
    if kind == "unexpected_keyword_argument":
        return _unknown_setting(path, last)
    if kind == "invalid_key":  # not text: `true:` or `null:` as a YAML key
        return _unknown_setting(path, problem["input"])
    key = ".".join(str(part) for part in problem["loc"])
    written = _as_loaded(data, problem["loc"], problem["input"])
    if kind == "dataclass_type":
        return ConfigError(
            f"{key}: expected a section (key: value pairs), got {_describe(written)}",
            hint=f"write {key} as a mapping",
        )
    if kind in ("greater_than_equal", "less_than_equal"):  # a number's Field(ge=, le=)
        shown = _as_written(written, problem["input"])
        return ConfigError(f"{key}: {shown} is out of range", hint=LIMITS[key].hint())
    if kind == "literal_error" and key in _NOT_A_CHOICE:
        refused, hint = _NOT_A_CHOICE[key]
        return ConfigError(f"{key}: {_describe(str(written))} {refused}", hint=hint)
    invalid = problem.get("ctx", {}).get("error")
    if isinstance(invalid, _Invalid):
        if invalid.at:
            key = f"{key}.{invalid.at}"
        hint = LIMITS[key].hint() if invalid.hint is None else invalid.hint
        return ConfigError(f"{key}: {invalid}", hint=hint.replace("{key}", key))
    # The types above refuse values only as handled above. Anything else pydantic itself
    # refuses is told in its words, without the value (it might be a secret's).
    return ConfigError(f"{key}: {problem['msg']}", hint=f"check {key}")


def _precedence(problem: ErrorDetails) -> int:
    if problem["type"] in ("unexpected_keyword_argument", "invalid_key"):
        return 0
    invalid = problem.get("ctx", {}).get("error")
    return 2 if isinstance(invalid, _Invalid) and invalid.at is not None else 1


def _as_loaded(data: object, loc: Sequence[object], default: object) -> object:
    """The value at ``loc`` in the loaded settings, as written (pydantic's error carries the
    value its last step saw: a parsed number, a log level in lower case)."""
    for part in loc:
        if not isinstance(data, Mapping) or part not in data:
            return default
        data = data[part]
    return data


def _unknown_setting(path: Sequence[object], name: object) -> ConfigError:
    section: type = Config
    for part in path:
        section = typing.get_type_hints(section)[str(part)]
    where = ".".join(str(part) for part in path)
    return ConfigError(
        f"{where + '.' if where else ''}{name}: unknown setting",
        hint=f"allowed under {where or 'the top level'}: {', '.join(sorted(_keys_of(section)))}",
    )


def load_config(
    path: str | Path | None,
    environ: dict[str, str] | None = None,
    *,
    sections: Collection[str] | None = None,
    defaults: Mapping[str, Any] | None = None,
    fixed: Mapping[str, Any] | None = None,
) -> Config:
    """Read a YAML file (optional), apply ``REPLICATOR_SECTION__KEY`` overrides, validate.
    ``sections``: only these are read (the others keep their defaults and their secrets are
    not looked up: ``replicator verify`` reads the sink alone, without the source password).
    ``defaults``: settings under the file and the environment, ``fixed``: settings over them
    (the embedded demo's own, and its server and landing zone)."""
    env: Mapping[str, str] = os.environ if environ is None else environ
    data = _merge(dict(defaults or {}), {} if path is None else _read_file(path))
    data = _merge(_merge(data, _from_environment(env)), dict(fixed or {}))
    if sections is not None:
        data = {name: value for name, value in data.items() if name in sections}
    _resolve_secrets(data, env)
    for name in _SECTION_TYPES:  # a section left out is checked too (sink.root on the disk)
        data.setdefault(name, {})
    try:
        return _CONFIG.validate_python(data)
    except ValidationError as exc:
        raise _config_error(exc, data) from None


# -- checks a section's model_validator makes ---------------------------------------------------


def _check_delays(section: str, initial: float, most: float) -> None:
    if initial > most:
        raise _Invalid(
            f"{_number(initial)} is above {section}.reconnect_max_delay ({_number(most)})",
            "the delay doubles from the initial one up to the maximum",
            at="reconnect_initial_delay",
        )


def _check_host(key: str, host: str, hint: str) -> None:
    """A DNS name or an IP address, alone: no scheme, port, brackets, spaces."""
    if not host:
        raise _Invalid("empty", hint, at=key)
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
        raise _Invalid(
            f"{_describe(host)} is not a host name or IP address",
            f"letters, digits, - and _ in dot-separated labels of up to 63, or an IPv4 or "
            f"IPv6 address; {hint}",
            at=key,
        )


OBJECT_STORE_SCHEMES = ("s3", "gs", "gcs", "abfs", "abfss", "hdfs", "viewfs")


def _check_url_root(root: str) -> None:
    """An object store's URL: a scheme pyarrow reaches, a bucket, no credentials in it (the
    URL is shown in logs and messages; a credential there would be too)."""
    parts = urlsplit(root)
    shown = redact_url(root)
    if carries_credentials(root):
        raise _Invalid(
            f"{shown!r} carries credentials or options (a user or password, '?' or '#'; an '@' "
            "anywhere counts as one); they are not read (and the URL is not shown whole)",
            "give credentials through the environment, a profile, the instance role or "
            "sink.object_store.access_key_env/secret_key_env, and the endpoint as "
            "sink.object_store.endpoint",
            at="root",
        )
    if parts.scheme not in OBJECT_STORE_SCHEMES:
        raise _Invalid(
            f"{shown!r}: {parts.scheme}:// is not an object store replicator writes",
            f"use a directory, or one of {', '.join(s + '://' for s in OBJECT_STORE_SCHEMES)}",
            at="root",
        )
    if not parts.netloc:
        raise _Invalid(f"{shown!r} names no bucket", "write s3://bucket/prefix", at="root")


def _check_root(root: str) -> None:
    """The landing zone: a directory (or one to create) on a real filesystem."""
    if not root.strip():
        raise _Invalid(
            "empty",
            'name the landing zone directory, e.g. ./landing, or "." for this one',
            at="root",
        )
    if root.startswith("~"):
        raise _Invalid(
            f"{root!r} starts with ~, which is not expanded",
            "write the home directory out, e.g. /home/etl/landing",
            at="root",
        )
    absolute = Path(os.path.abspath(root))
    real = Path(os.path.realpath(root))
    for tree in _SYSTEM_TREES:
        if any(path == tree or tree in path.parents for path in (absolute, real)):
            raise _Invalid(
                f"{root!r} is under {tree}, which is not a place for files",
                "put the landing zone on a real filesystem, e.g. /var/lib/replicator",
                at="root",
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
        raise _Invalid(
            f"{root!r} {where}is a file, not a directory",
            "name a directory for the landing zone; it is created if missing",
            at="root",
        )
