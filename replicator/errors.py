"""One error tree for the whole program, split by whose fault an error is.

Every error carries the process exit code the CLI uses for it (docs/operations.md, Exit codes:
2 bad config, 3 server refused, 4 data integrity stop, 1 anything else) and a sentence saying
what to do next.
This module is pure: the sans-I/O ``binlog`` package builds its errors on it.
"""

from __future__ import annotations


class ReplicatorError(Exception):
    """Base of every error the program raises on purpose."""

    exit_code = 1
    hint = ""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        if hint is not None:
            self.hint = hint

    def __str__(self) -> str:
        text = super().__str__()
        return f"{text} ({self.hint})" if self.hint else text


class ConfigError(ReplicatorError):
    """The configuration or the command line is wrong: the user must change it."""

    exit_code = 2


class ServerRefusedError(ReplicatorError):
    """The server refused us: auth, privileges, purged binlog, settings."""

    exit_code = 3


class PositionGoneError(ServerRefusedError):
    """The server no longer has the binlog at the position asked for (purged, or a server
    that never had it): ``snapshot.mode: when_needed`` snapshots again instead of stopping."""


class IntegrityError(ReplicatorError):
    """The data cannot be trusted: a persistent CRC mismatch, an undecodable event."""

    exit_code = 4


class SinkError(ReplicatorError):
    """Writing the landing zone failed (disk full, permissions)."""

    exit_code = 1


class InternalError(ReplicatorError):
    """A bug in replicator itself."""

    exit_code = 1
