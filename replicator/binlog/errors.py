"""Errors raised while decoding a binary log; every one names where it happened."""

from __future__ import annotations

from ..errors import IntegrityError, ServerRefusedError


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


class ServerError(ServerRefusedError):
    """An ERR packet sent by the server in the dump stream."""

    def __init__(self, code: int, sql_state: str, message: str) -> None:
        self.code = code
        self.sql_state = sql_state
        self.server_message = message
        super().__init__(f"server error {code} ({sql_state}): {message}")
