"""What a failure of the binlog dump means for the stream: final, or worth a reconnect.

Final: a refusal of the account (REPLICATION SLAVE missing, access denied) and a start the
server no longer has (ERR 1236 when the dump starts: purged binlog files or GTIDs). Worth a
reconnect: the network, the server going away, torn or corrupted bytes, and any ERR packet in
mid-stream (it may be a corrupted event marker). ``source.stream`` retries the second kind from
the last whole transaction it handed over; torn or corrupted bytes that fail at the same position
every time are the binlog's own, and final (``count_decode_failure``).

Error codes: mysql-server ``include/mysqld_ername.h`` / MariaDB ``sql/share/errmsg-utf8.txt``.
"""

from __future__ import annotations

import pymysql

from ..binlog.errors import ChecksumError, DecodeError, SchemaMismatchError, ServerError
from ..binlog.position import StreamPosition
from ..errors import IntegrityError, PositionGoneError, ReplicatorError, ServerRefusedError
from .errors import SourceUnavailableError
from .stream_stats import StreamStats

__all__ = [
    "ER_MASTER_FATAL_ERROR_READING_BINLOG",
    "REFUSED_AT_START",
    "count_decode_failure",
    "is_transient",
    "refused",
    "server_error",
]

ER_MASTER_FATAL_ERROR_READING_BINLOG = 1236
# access denied / specific privilege needed (ER_SPECIFIC_ACCESS_DENIED_ERROR, ...)
REFUSED_AT_START = frozenset({1044, 1045, 1142, 1227})


def refused(user: str, message: str) -> ServerRefusedError:
    """The server will not serve the binlog to ``user``: final, with the GRANT that fixes it."""
    return ServerRefusedError(
        f"the server refused to serve the binlog to {user!r}: {message}",
        hint=(
            "reading the binary log needs REPLICATION SLAVE: GRANT REPLICATION SLAVE ON "
            f"*.* TO '{user}'@'%'; (use the account's host; `replicator check` "
            "lists every privilege the account lacks)"
        ),
    )


def server_error(
    exc: ServerError, *, at_start: bool, position: StreamPosition | None, user: str
) -> ReplicatorError:
    """The server's ERR packet. 1236 when the dump starts (``at_start``: no event past the
    preamble the server sends first, the rotate, format description and GTID list) means the
    position is gone (purged binlog, unknown GTID, a GTID in a gap of the sequence): final.
    Anything else, or an ERR in mid-stream (which may be a corrupted event marker), is
    retried from the last whole transaction."""
    if at_start and exc.code in REFUSED_AT_START:
        return refused(user, exc.server_message)
    if exc.code == ER_MASTER_FATAL_ERROR_READING_BINLOG and at_start:
        assert position is not None
        return PositionGoneError(
            f"the server cannot send the binlog from {position.describe()}: {exc.server_message}",
            hint=(
                "those binlog files or GTIDs were purged (or the position is wrong); "
                "set snapshot.mode: when_needed to snapshot every table again from "
                "now on, or replay from a position the server still has (SHOW BINARY "
                "LOGS, @@gtid_purged)"
            ),
        )
    return SourceUnavailableError(
        f"server error {exc.code} during the binlog dump: {exc.server_message}"
    )


def is_transient(exc: BaseException) -> bool:
    """Failures worth a reconnect: the network, the server going away, torn bytes."""
    if isinstance(exc, SchemaMismatchError):
        return False
    if isinstance(exc, (OSError, EOFError, DecodeError)):
        return True
    if isinstance(exc, pymysql.err.OperationalError):
        return True
    return isinstance(exc, pymysql.err.InterfaceError)


def count_decode_failure(
    stats: StreamStats, exc: DecodeError, here: StreamPosition | None, max_retries: int
) -> None:
    """Count a decode failure at its position (``here``: the stream's, when the error has
    none); raise IntegrityError once it persists (``max_retries`` times at one position)."""
    if isinstance(exc, ChecksumError):
        stats.checksum_errors += 1
    stats.last_error = str(exc)
    key = (
        exc.file or (here.file if here else ""),
        exc.position if exc.position is not None else (here.position if here else 0),
    )
    seen = stats.checksum_failures_at.get(key, 0) + 1
    stats.checksum_failures_at[key] = seen
    if seen >= max_retries:
        raise IntegrityError(
            f"{exc} (failed {seen} times at {key[0]}:{key[1]})",
            hint=(
                "the same position failed every time it was read: first start replicator "
                "again (a flaky network or proxy can corrupt the stream repeatedly; the "
                "restart re-reads it from the last committed batch); if it fails there "
                "again, inspect the binlog at that position with mysqlbinlog/mariadb-binlog "
                "--verify-binlog-checksum"
            ),
        ) from exc
