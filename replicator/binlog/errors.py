"""Errors raised while decoding a binary log; every one names where it happened."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from ..errors import IntegrityError, ServerRefusedError

if TYPE_CHECKING:  # the events' module costs start-up time where only errors are needed
    from . import events as ev


class DecodeError(IntegrityError):
    """Bytes that do not form a valid event. Carries the binlog file and position."""

    hint = "the binlog cannot be decoded at this position; report it with the file and position"

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        position: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.file = file
        self.position = position
        where = ""
        if file is not None or position is not None:
            where = f" at {file or '?'}:{position if position is not None else '?'}"
        super().__init__(f"{message}{where}", hint=hint)


class SchemaMismatchError(DecodeError):
    """A TABLE_MAP whose columns do not line up with what is known of its table (the
    server's catalog today, or the schema history): the table changed, not the bytes, so
    reading the stream again cannot help."""


class ChecksumError(DecodeError):
    """An event's CRC32 does not match its bytes."""

    hint = "the event was corrupted in transit or on disk; re-read it from the server"


class TruncatedError(DecodeError):
    """An event or field ends before its declared size."""


class UnknownEventError(DecodeError):
    """An event type we do not know and that is not flagged ignorable."""

    hint = "this server writes an event type replicator does not support; upgrade replicator"


class EncryptedBinlogError(DecodeError):
    """The binary log is encrypted (START_ENCRYPTION_EVENT)."""

    hint = (
        "encrypted binlog not supported: read it through the server (replication decrypts it) "
        "or disable encrypt_binlog"
    )


class IncidentError(DecodeError):
    """The source logged an INCIDENT event: changes it made may be missing from its binlog
    (a replica of the server stops there too, with ER_SLAVE_INCIDENT)."""

    hint = (
        "see the source's error log for what was lost. To go on, take the affected tables "
        "again with `replicator snapshot --tables ...` and move the checkpoint past the "
        "event with `replicator checkpoint set --file FILE --pos POS` (the next event's "
        "position, named above)"
    )

    # the incidents the servers write (MySQL and MariaDB ``Incident``, rpl_constants.h)
    NAMES: ClassVar[dict[int, str]] = {1: "the incident LOST_EVENTS"}

    @classmethod
    def of(cls, event: ev.IncidentEvent) -> IncidentError | None:
        """The stop ``event`` calls for (None: INCIDENT_NONE, which reports nothing)."""
        if event.incident == 0:
            return None
        name = cls.NAMES.get(event.incident, f"an unknown incident ({event.incident})")
        message = f" ({event.message})" if event.message else ""
        stop = cls(
            f"the source logged {name}{message} at {event.file}:{event.position}: changes "
            f"may be missing from its binlog (the next event is at {event.file}:"
            f"{event.next_position})"
        )
        stop.file, stop.position = event.file, event.position
        return stop


class ServerError(ServerRefusedError):
    """An ERR packet sent by the server in the dump stream."""

    def __init__(self, code: int, sql_state: str, message: str) -> None:
        self.code = code
        self.sql_state = sql_state
        self.server_message = message
        super().__init__(f"server error {code} ({sql_state}): {message}")
