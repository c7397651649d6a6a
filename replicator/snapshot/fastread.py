"""A text result set read straight from the socket into row tuples by the native core.

pymysql sends the query and reads the column definitions; the row packets that follow are
read here in large blocks and parsed by ``_rowcore.text_rows``: no per-value Python objects
besides the values themselves, and each value built as the binlog decoders build it (the
column's ``columns.converter`` handles whatever the C fast path does not take, and raises
the exact error). A row the server split over several packets (16 MiB and more) is joined
here and parsed by ``_rowcore.text_row``. Without the native core, pymysql reads the rows and
the converters decode each value (the same values, several times slower).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pymysql
import pymysql.cursors

from ..binlog import native
from ..binlog.constants import ColumnType as T
from ..binlog.schema import ColumnDef
from ..errors import IntegrityError
from .columns import Convert, converter

BYTES, UTF8, INT, FLOAT, PYTHON, DATE, DATETIME, TIMESTAMP = range(8)
MAX_PAYLOAD = 0xFFFFFF
READ_BYTES = 1 << 18


def kind(col: ColumnDef) -> int:
    """How the native core reads a column's text (see ``_rowcore.c``, text result sets)."""
    code = col.real_type
    if col.text_form is not None:
        return PYTHON
    if code in (T.TINY, T.SHORT, T.INT24, T.LONG, T.LONGLONG, T.YEAR):
        return INT
    if code in (T.FLOAT, T.DOUBLE):
        return FLOAT
    if code in (T.DATE, T.NEWDATE):
        return DATE
    if code in (T.DATETIME, T.DATETIME2):
        return DATETIME
    if code in (T.TIMESTAMP, T.TIMESTAMP2):
        return TIMESTAMP
    if code in (T.NEWDECIMAL, T.TIME, T.TIME2, T.BIT, T.GEOMETRY, T.VECTOR):
        return PYTHON
    if col.charset == "utf-8":
        return UTF8
    if col.charset == "binary" and code != T.STRING:  # BINARY(n) is padded in Python
        return BYTES
    return PYTHON


def read_rows(
    conn: pymysql.connections.Connection, sql: str, columns: Sequence[ColumnDef], batch: int
) -> Iterator[list[tuple[object, ...]]]:
    """The rows of ``sql`` (a SELECT of ``columns``), in lists of about ``batch``."""
    converters = tuple(converter(c) for c in columns)
    if not native.available():
        yield from _slow(conn, sql, converters, batch)
        return
    kinds = tuple(kind(c) for c in columns)
    core = native.core()
    conn.query(sql, unbuffered=True)
    result = conn._result
    assert result is not None
    if result.field_count != len(columns):
        raise IntegrityError(
            f"the snapshot query returned {result.field_count} columns for {len(columns)}"
        )
    rfile = conn._rfile
    assert rfile is not None
    buf = b""
    pending: list[tuple[object, ...]] = []
    try:
        while True:
            block = rfile.read1(READ_BYTES)
            if not block:
                raise pymysql.err.OperationalError(2013, "Lost connection during a snapshot read")
            buf = buf + block if buf else block
            offset = 0
            while True:
                rows, offset, state = core.text_rows(buf, offset, kinds, converters, False)
                pending.extend(rows)
                if state == 3:  # a row over several packets
                    joined, offset = _joined(rfile, buf, offset)
                    buf, offset = joined[1], 0
                    pending.append(core.text_row(joined[0], kinds, converters))
                    continue
                break
            if len(pending) >= batch:
                yield pending
                pending = []
            if state == 1:
                break
            if state == 2:
                _raise_error(rfile, buf[offset:])
            buf = buf[offset:]
        if pending:
            yield pending
    finally:
        result.unbuffered_active = False
        conn._result = None


def _joined(rfile: object, buf: bytes, offset: int) -> tuple[tuple[bytes, bytes], int]:
    """The payload of a row split over packets starting at ``offset``, and what follows."""
    parts: list[bytes] = []
    data = buf[offset:]
    while True:
        while len(data) < 4:
            data += _more(rfile)
        size = data[0] | data[1] << 8 | data[2] << 16
        while len(data) < 4 + size:
            data += _more(rfile)
        parts.append(data[4 : 4 + size])
        data = data[4 + size :]
        if size < MAX_PAYLOAD:
            return (b"".join(parts), data), 0


def _more(rfile: object) -> bytes:
    block: bytes = rfile.read1(READ_BYTES)  # type: ignore[attr-defined]
    if not block:
        raise pymysql.err.OperationalError(2013, "Lost connection during a snapshot read")
    return block


def _raise_error(rfile: object, data: bytes) -> None:
    while len(data) < 4:
        data += _more(rfile)
    size = data[0] | data[1] << 8 | data[2] << 16
    while len(data) < 4 + size:
        data += _more(rfile)
    pymysql.err.raise_mysql_exception(data[4 : 4 + size])


def _slow(
    conn: pymysql.connections.Connection, sql: str, converters: tuple[Convert, ...], batch: int
) -> Iterator[list[tuple[object, ...]]]:
    cur = conn.cursor(pymysql.cursors.SSCursor)
    try:
        cur.execute(sql)
        while True:
            fetched = cur.fetchmany(batch)
            if not fetched:
                return
            yield [
                tuple(None if v is None else f(v) for f, v in zip(converters, row, strict=True))
                for row in fetched
            ]
    finally:
        cur.close()
