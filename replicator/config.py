"""Configuration, parsed once into frozen objects and passed explicitly.

This module holds the settings objects; loading them from YAML and the environment is done
by ``load_config``. Secrets are wrapped in ``Secret`` so they never print.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

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
    ) -> Secret:
        """A secret from exactly one of: a literal, an environment variable, a file."""
        given = [x for x in (value, env, file) if x not in (None, "")]
        if len(given) > 1:
            raise ConfigError(
                f"{key}: give only one of {key}, {key}_env, {key}_file",
                hint=f"remove all but one of the {key} settings",
            )
        if env:
            if env not in os.environ:
                raise ConfigError(
                    f"{key}_env: environment variable {env} is not set",
                    hint=f"export {env} or use {key}_file",
                )
            return cls(os.environ[env])
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
