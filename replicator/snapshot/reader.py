"""Reading a table's rows at a known binlog point, without locks or writes on the source.

Each chunk is read in a transaction of its own, opened with ``START TRANSACTION WITH
CONSISTENT SNAPSHOT``; the point of the binlog its rows belong to is learned lock-free:

* MariaDB reports it exactly: ``Binlog_snapshot_file`` / ``Binlog_snapshot_position`` are
  the binlog end as of the read view (the server orders commits in binlog order, so every
  transaction before that position is visible and none after it).
* MySQL has no such status. The executed GTID set is read before and after the read view is
  opened, and kept only when both agree (no commit in between; retried otherwise): the read
  view then holds exactly that set. This needs GTID mode on; without it a snapshot stops.
  (Not exercised against a live MySQL here: no MySQL server runs on the test machines.)

The chunk's rows are then read by primary key order, ``chunk_rows`` at a time, after the last
key landed (``WHERE (k1 > v1) OR (k1 = v1 AND k2 > v2) ...``, which both servers turn into an
index range), or, for a table without a usable key, the whole table in the one transaction.
Only SELECT and the replication privileges are needed.

Every read and write on the connection waits at most ``snapshot.query_timeout`` (connect and
handshake: ``source.connect_timeout``): a stalled source comes out as
``SourceUnavailableError`` and the runner reads the chunk again on a new connection. A table
dropped, renamed or rebuilt at the source after the read view opened (server errors 1146,
1412, 1054), or whose columns are not the ones the chunk was read by (``check_columns``),
comes out as ``TableChanged``: the stream has that DDL ahead, and the runner lets it decide.
``abort`` (any thread) wakes a read blocked on the socket, for a prompt shutdown.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import socket
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pymysql
import structlog

from ..binlog.block import Block
from ..binlog.gtid import MysqlGtidSet
from ..binlog.position import StreamPosition
from ..binlog.schema import ColumnDef
from ..binlog.values import InvalidTemporal
from ..config import SourceConfig
from ..errors import IntegrityError, ReplicatorError
from ..source import wire
from ..source.connection import describe_source, open_connection
from ..source.errors import translate_error
from .columns import quote, select_expression
from .fastread import ReadStats, read_rows

log = structlog.get_logger("replicator")
_AGREE_ATTEMPTS = 50
FETCH_ROWS = 8192
ER_NO_SUCH_TABLE = 1146
ER_TABLE_DEF_CHANGED = 1412  # "Table definition has changed, please retry transaction"
# an instant ALTER (DROP or RENAME COLUMN) committed after the read view opened: the SELECT
# names a column the table no longer has
ER_BAD_FIELD_ERROR = 1054
# the table's columns as the server has them now (``check_columns``)
_COLUMNS_SQL = (
    "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
    "AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION"
)
# access denied (global privilege, database, table): XA RECOVER may need one
_REFUSED = (1227, 1044, 1142)


class TableChanged(ReplicatorError):
    """The table a chunk reads is gone or rebuilt at the source since its read view opened
    (a DROP, RENAME or ALTER the stream has not reached yet)."""


@dataclass(frozen=True, slots=True)
class ReadPoint:
    """Where a chunk's read view stands in the binlog: a file/position (MariaDB) or a GTID
    set (MySQL)."""

    position: StreamPosition

    def describe(self) -> str:
        return self.position.describe()


@dataclass(frozen=True, slots=True)
class Estimate:
    """The server's figures for a table (InnoDB's are samples: off by tens of percent)."""

    rows: int | None  # for the ETA
    row_bytes: int | None  # AVG_ROW_LENGTH: the first chunk's LIMIT under chunk_bytes


class SnapshotReader:
    """One connection reading chunks (blocking; run it in a worker thread)."""

    def __init__(self, cfg: SourceConfig, flavor: str, timeout: float = 60.0) -> None:
        self.cfg = cfg
        self.flavor = flavor
        self.timeout = timeout
        self._conn: pymysql.connections.Connection | None = None

    def _connect(self) -> pymysql.connections.Connection:
        if self._conn is None:
            conn = open_connection(self.cfg, read_timeout=self.timeout)
            conn.decoders = {}  # every value as the bytes SELECT sent; columns.converter decodes
            with conn.cursor() as cur:
                cur.execute("SET SESSION character_set_results = binary")
                cur.execute("SET SESSION time_zone = '+00:00'")
                cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            self._conn = conn
        return self._conn

    def _fail(self, exc: pymysql.err.Error) -> ReplicatorError:
        self.close()
        return translate_error(exc, where=describe_source(self.cfg), account=self.cfg.user)

    def begin(self) -> ReadPoint:
        """Open a read view and say where it stands in the binlog."""
        try:
            conn = self._connect()
            with conn.cursor() as cur:
                if self.flavor == "mariadb":
                    cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
                    cur.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
                    status = {bytes(k).decode().lower(): bytes(v).decode() for k, v in cur}
                    file = status.get("binlog_snapshot_file", "")
                    if not file:
                        raise IntegrityError(
                            "the source reports no binlog position for a consistent snapshot",
                            hint="snapshots need the binary log on (log_bin)",
                        )
                    position = int(status["binlog_snapshot_position"])
                    return ReadPoint(StreamPosition(file, position))
                return ReadPoint(StreamPosition(mysql_gtid=self._mysql_point(cur)))
        except pymysql.err.Error as exc:
            raise self._fail(exc) from exc

    def _mysql_point(self, cur: Any) -> MysqlGtidSet:
        for attempt in range(_AGREE_ATTEMPTS):
            cur.execute("SELECT @@GLOBAL.gtid_executed, @@GLOBAL.gtid_mode")
            before, mode = (bytes(v).decode() for v in cur.fetchone())
            if mode.upper() != "ON":
                raise IntegrityError(
                    f"a snapshot of a MySQL source needs gtid_mode=ON (it is {mode})",
                    hint="turn GTIDs on, or set snapshot.mode: never and start from a position",
                )
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
            cur.execute("SELECT @@GLOBAL.gtid_executed")
            after = bytes(cur.fetchone()[0]).decode()
            if before == after:
                return MysqlGtidSet.parse(before.replace("\n", ""))
            cur.execute("ROLLBACK")
            time.sleep(min(0.2, 0.005 * (attempt + 1)))
        raise IntegrityError(
            f"the source committed during every one of {_AGREE_ATTEMPTS} attempts to open a "
            "snapshot, so its binlog point could not be told",
            hint="snapshot at a quieter time; nothing was landed for this chunk",
        )

    def estimate_rows(self, schema: str, table: str) -> Estimate:
        """The server's estimate of the table's rows and of their average width (None where
        it has none)."""
        try:
            with self._connect().cursor() as cur:
                cur.execute(
                    "SELECT TABLE_ROWS, AVG_ROW_LENGTH FROM information_schema.TABLES "
                    "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                    (schema, table),
                )
                row = cur.fetchone()
        except pymysql.err.Error as exc:
            raise self._fail(exc) from exc
        if not row:
            return Estimate(None, None)
        rows, width = (None if v is None else int(v) for v in row)  # int() takes text or bytes
        return Estimate(rows, width or None)

    def rows(
        self,
        schema: str,
        table: str,
        columns: Sequence[ColumnDef],
        key: Sequence[int],
        after: tuple[object, ...] | None,
        limit: int | None,
        max_bytes: int | None = None,
        stats: ReadStats | None = None,
        block_bytes: int | None = None,
        binary: bool = True,
        *,
        until: tuple[object, ...] | None = None,
        descending: bool = False,
    ) -> Iterator[tuple[Block, tuple[object, ...]]]:
        """The rows after ``after`` and up to ``until`` (by ``key``, column indexes) in key
        order (``descending``: the other way round), at most ``limit`` and ``max_bytes``
        (``stats.cut``: the rows stopped at the bytes); with no key, the whole table. Yields
        blocks (of about ``block_bytes`` at most), each with its last row. ``binary``: the
        rows in the binary protocol (``fastread``)."""
        sql = f"SELECT {', '.join(select_expression(c) for c in columns)} FROM "
        sql += f"{quote(schema)}.{quote(table)}"
        names = [quote(columns[i].name or "") for i in key]
        conn = self._connect()
        if key:
            where = []
            if after is not None:
                where.append(_after_clause(names, [conn.escape(_sql_value(v)) for v in after]))
            if until is not None:
                where.append(_until_clause(names, [conn.escape(_sql_value(v)) for v in until]))
            if where:
                sql += " WHERE " + " AND ".join(f"({w})" for w in where)
            sql += " ORDER BY " + ", ".join(f"{n} DESC" if descending else n for n in names)
            if limit is not None:
                sql += f" LIMIT {int(limit)}"
        try:
            yield from read_rows(
                conn, sql, columns, FETCH_ROWS, max_bytes, stats, block_bytes, binary
            )
        except pymysql.err.Error as exc:
            if exc.args and exc.args[0] in (
                ER_NO_SUCH_TABLE,
                ER_TABLE_DEF_CHANGED,
                ER_BAD_FIELD_ERROR,
            ):
                self.close()
                raise TableChanged(
                    f"{schema}.{table} at {describe_source(self.cfg)}: {exc.args[-1]}",
                    hint="the chunk is read again past the stream's DROP, RENAME or ALTER of "
                    "it, which decides what follows",
                ) from exc
            raise self._fail(exc) from exc
        except BaseException:
            self.close()  # a result set read part way leaves the connection unusable
            raise

    def check_columns(self, schema: str, table: str, names: Sequence[str]) -> None:
        """After a chunk's SELECT, in its transaction: the table's columns are ``names`` (the
        schema history's as of the read point), in this order, or ``TableChanged``. The
        SELECT names its columns, and the server resolves a name by the table as it stands
        when the SELECT opens it, not as of the read view: an instant ALTER committed in
        between (``RENAME COLUMN a TO b, RENAME COLUMN b TO a``) would land each column's
        values under the other's. The SELECT's metadata lock on the table holds until the
        transaction ends, so what information_schema shows now is what the SELECT read."""
        try:
            with self._connect().cursor() as cur:
                cur.execute(_COLUMNS_SQL, (schema, table))
                found = [bytes(row[0]).decode("utf-8") for row in cur]
        except pymysql.err.Error as exc:
            raise self._fail(exc) from exc
        if [n.casefold() for n in found] != [n.casefold() for n in names]:
            raise TableChanged(
                f"{schema}.{table} at {describe_source(self.cfg)}: its columns are "
                f"{', '.join(found)} since the chunk's read view opened (the schema history "
                f"has {', '.join(names)} there)",
                hint="the chunk is read again past the stream's ALTER of it",
            )

    def prepared(self) -> list[str] | None:
        """The XA transactions prepared at the source now (their xids, hex); None when the
        account may not list them."""
        try:
            conn = self._connect()
            with conn.cursor() as cur:
                cur.execute("XA RECOVER")
                return sorted(
                    (bytes(x) if isinstance(x, (bytes, bytearray)) else str(x).encode()).hex()
                    for x in (row[3] for row in cur)
                )
        except pymysql.err.OperationalError as exc:
            if exc.args and exc.args[0] in _REFUSED:
                return None
            raise self._fail(exc) from exc
        except pymysql.err.Error as exc:
            raise self._fail(exc) from exc

    def greatest(
        self, schema: str, table: str, columns: Sequence[ColumnDef], key: Sequence[int]
    ) -> tuple[object, ...] | None:
        """The greatest key the table holds in the open read view (None: no row)."""
        found = None
        for _, last in self.rows(schema, table, columns, key, None, 1, descending=True):
            found = tuple(last[i] for i in key)
        return found

    def end(self) -> None:
        """Close the chunk's read view."""
        if self._conn is None:
            return
        try:
            with self._conn.cursor() as cur:
                cur.execute("COMMIT")
        except pymysql.err.Error as exc:
            raise self._fail(exc) from exc

    def abort(self) -> None:
        """Wake a read blocked on the connection (from another thread): it fails at once and
        the connection is dropped (closing the socket alone would not wake it)."""
        conn = self._conn
        sock = None if conn is None else wire.raw_socket(conn)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):  # closing a broken connection
                conn.close()


def _key_order(names: Sequence[str], values: Sequence[str], inner: str, last: str) -> str:
    """A row comparison of the key with ``values`` spelled out term by term, so that both
    servers use the key's index: each term the columns before one equal, and that one
    ``inner`` (the last column: ``last``) its value."""
    terms = []
    for i in range(len(names)):
        equal = [f"{names[j]} = {values[j]}" for j in range(i)]
        op = last if i == len(names) - 1 else inner
        terms.append("(" + " AND ".join([*equal, f"{names[i]} {op} {values[i]}"]) + ")")
    return " OR ".join(terms)


def _until_clause(names: Sequence[str], values: Sequence[str]) -> str:
    """``(k1, k2) <= (v1, v2)``."""
    return _key_order(names, values, "<", "<=")


def _after_clause(names: Sequence[str], values: Sequence[str]) -> str:
    """``(k1, k2) > (v1, v2)``."""
    return _key_order(names, values, ">", ">")


def _sql_value(value: object) -> object:
    """A key value as pymysql escapes it (a TIMESTAMP's UTC value as the session prints it)."""
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    if isinstance(value, InvalidTemporal):
        return value.text
    return value
