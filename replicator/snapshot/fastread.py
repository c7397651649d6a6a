"""A result set read straight from the socket into blocks by the native core.

With the native core, the SELECT runs as a server-side prepared statement (``source.wire``:
COM_STMT_PREPARE, COM_STMT_EXECUTE, COM_STMT_CLOSE), so its rows come in the binary protocol:
the server sends numbers and temporals as they are stored instead of printing them as text,
which takes about a third less of its CPU on the standard table (docs/performance.md), and
they are read here without parsing text. A result column of a type that protocol has no
reading for here sends the SELECT as text instead. pymysql reads the column definitions; the
row packets that follow are read here in large blocks (from pymysql's socket file, which
``source.wire`` hands over) and parsed by ``_rowcore.text_block`` into a block's column
buffers (``binlog.block``: the layout
the binlog decoder gives the same column, so the sink cannot tell a snapshot chunk from a rows
event): no Python object per value. Columns of other types, and
every column from the first row holding a value buffers cannot (a zero date, latin1 text that
is not ASCII, a number out of range), are read by ``_rowcore.text_rows`` as the binlog decoders
build values (the column's ``columns.converter`` handles whatever the C fast path does not take,
and raises the exact error; a binary value reaches it as the text the text protocol would
send). A row the server split over several packets (16 MiB and more) is joined here and
parsed by ``_rowcore.text_row``. Without the native core, pymysql reads the rows and
the converters decode each value (the same values, several times slower).

A read may be capped by bytes (``snapshot.chunk_bytes``): the row whose packet brings the
bytes read to the cap is the last one taken (a single larger row goes alone; rows read as
objects stop at the end of a read buffer instead), the rest of the result set is read and
dropped unparsed, and ``ReadStats.cut`` says so. Every read honours the connection's socket
timeout (pymysql's ``read_timeout``): a timeout or a broken socket comes out as pymysql's
``OperationalError`` 2013, like a read of pymysql's own.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pymysql
import pymysql.cursors

from ..binlog import native
from ..binlog.block import Block, NativeKind
from ..binlog.charsets import decode_mysql_latin1, text_decoder
from ..binlog.constants import ColumnType as T
from ..binlog.schema import ColumnDef
from ..errors import IntegrityError
from ..source import wire
from .columns import Convert, converter

BYTES, UTF8, INT, FLOAT, PYTHON, DATE, DATETIME, TIMESTAMP = range(8)
MAX_PAYLOAD = 0xFFFFFF
READ_BYTES = 1 << 18
# The result column types the native core reads binary rows of (``_rowcore_c/text.c``
# ``wire_known``): DECIMAL, the integers, FLOAT, DOUBLE, TIMESTAMP, DATE, TIME, DATETIME,
# YEAR, and the types sent as length-encoded strings (VARCHAR, BIT, JSON to GEOMETRY).
BINARY_READABLE = frozenset({0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 12, 13, 15, 16, *range(245, 256)})
# ER_UNSUPPORTED_PS, ER_MAX_PREPARED_STMT_COUNT_REACHED: no prepared statement, the SELECT as
# text instead
_NO_PREPARED = (1295, 1461)


def kind(col: ColumnDef) -> int:
    """How the native core reads a column's text (see ``_rowcore_c/text.c``)."""
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


_INT_WIDTHS = {T.TINY: 1, T.SHORT: 2, T.INT24: 4, T.LONG: 4, T.LONGLONG: 8}
_TEXT_TYPES = frozenset(
    {T.VARCHAR, T.VAR_STRING, T.STRING, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB, T.BLOB}
)
MAX_DECIMAL_DIGITS = 38  # what decimal128 holds


def buffer_spec(col: ColumnDef) -> tuple[tuple[int, int, int], NativeKind] | None:
    """How the native core reads a column's text straight into buffers (``text_block``
    spec, and the block kind of the buffers, the same as the binlog decoder's for the
    column); None when its values stay objects."""
    core = native.core()
    code = col.real_type
    if col.text_form is not None:
        return None
    if code in _INT_WIDTHS:
        width, signed = _INT_WIDTHS[T(code)], int(not col.unsigned)
        return (core.TB_INT, width, signed), ("int", width, signed)
    if code in (T.FLOAT, T.DOUBLE):
        width = 4 if code == T.FLOAT else 8
        return (core.TB_FLOAT, width, 0), ("float", width, 0)
    if code == T.NEWDECIMAL:
        precision, scale = col.meta >> 8, col.meta & 0xFF
        if precision > MAX_DECIMAL_DIGITS or scale > precision:
            return None
        return (core.TB_DECIMAL, precision, scale), ("decimal128", precision, scale)
    if code in (T.DATE, T.NEWDATE):
        return (core.TB_DATE, 0, 0), ("date32", 0, 0)
    if code in (T.DATETIME, T.DATETIME2):
        return (core.TB_DATETIME, 0, 0), ("timestamp", 0, 0)
    if code in (T.TIMESTAMP, T.TIMESTAMP2):
        return (core.TB_TIMESTAMP, 0, 0), ("timestamp_utc", 0, 0)
    if code in (T.TIME, T.TIME2):
        return (core.TB_TIME, 0, 0), ("duration", 0, 0)
    if code == T.BIT:
        signed = int(col.bit_width <= 63)  # BIT(64) is uint64, as the writer's type says
        return (core.TB_BIT, 0, signed), ("int", 8, signed)
    if code in (T.ENUM, T.SET):
        if (col.enum_values or col.set_values) is None:
            return None  # labels unknown: the converter refuses the column
    elif code not in _TEXT_TYPES:
        return None
    if col.charset is None:
        return None
    if col.charset == "binary":
        if code in (T.ENUM, T.SET):
            return None
        # BINARY(n): padded to n bytes as the converter does (the server sends them all)
        pad = col.string_length if code == T.STRING else 0
        if not 0 <= pad <= 255:
            return None
        return (core.TB_BYTES, pad, 0), ("binary", 0, 0)
    decode = text_decoder(col.charset)
    if decode is bytes.decode:
        return (core.TB_UTF8, 0, 0), ("utf8", 0, 0)
    if decode is decode_mysql_latin1:
        return (core.TB_ASCII, 0, 0), ("utf8", 0, 0)
    return None


@dataclass(slots=True)
class ReadStats:
    """What one ``read_rows`` read: bytes of row packets, and whether the byte cap cut it
    (rows of the result set after the cut were dropped: the next chunk reads them)."""

    bytes: int = 0
    cut: bool = False


def read_rows(
    conn: pymysql.connections.Connection,
    sql: str,
    columns: Sequence[ColumnDef],
    batch: int,
    max_bytes: int | None = None,
    stats: ReadStats | None = None,
    block_bytes: int | None = None,
    binary: bool = True,
) -> Iterator[tuple[Block, tuple[object, ...]]]:
    """The rows of ``sql`` (a SELECT of ``columns``) as blocks of about ``batch`` rows (or
    about ``block_bytes``), each with its last row as a tuple (where the next chunk starts);
    with ``max_bytes``, only the rows up to that many bytes (see the module doc; ``stats``
    tells). ``binary``: as a prepared statement (the rows in the binary protocol) when the
    native core reads them."""
    stats = ReadStats() if stats is None else stats
    try:
        yield from _read_rows(conn, sql, columns, batch, max_bytes, stats, block_bytes, binary)
    except OSError as exc:  # a socket timeout or reset under the reads made here
        raise pymysql.err.OperationalError(
            2013, f"Lost connection to the source during a snapshot read ({exc or 'timed out'})"
        ) from exc


def _read_rows(
    conn: pymysql.connections.Connection,
    sql: str,
    columns: Sequence[ColumnDef],
    batch: int,
    max_bytes: int | None,
    stats: ReadStats,
    block_bytes: int | None,
    binary: bool,
) -> Iterator[tuple[Block, tuple[object, ...]]]:
    converters = tuple(converter(c) for c in columns)
    width = len(columns)
    if not native.available():
        for fetched in _slow(conn, sql, converters, batch, max_bytes, stats, block_bytes):
            yield Block.from_rows(fetched, width), fetched[-1]
        return
    kinds = tuple(kind(c) for c in columns)
    found = [buffer_spec(c) for c in columns]
    specs = tuple((0, 0, 0) if f is None else f[0] for f in found)
    natives = tuple(None if f is None else f[1] for f in found)
    core = native.core()
    statement = _prepare(conn, sql) if binary else None
    types: tuple[wire.WireColumn, ...] | None = None
    if statement is not None:
        result = wire.execute_statement(conn, statement)
    else:
        conn.query(sql, unbuffered=True)
        result = wire.unbuffered_result(conn)
    assert result is not None
    ended = False  # the whole result set read: the connection takes the next command
    if result.field_count != len(columns):
        raise IntegrityError(
            f"the snapshot query returned {result.field_count} columns for {len(columns)}"
        )
    if statement is not None:
        # the rows are as the execution's column definitions say (a statement the server
        # prepared again for a changed table may differ from what the prepare said)
        types = wire.result_columns(result)
        unreadable = _unreadable(types)
        if unreadable:
            raise IntegrityError(
                f"the snapshot query's binary rows have a column type {unreadable[0]} that "
                "has no binary reading here",
                hint="its prepare said otherwise; report the server version, or leave the "
                "table out of the snapshot (its changes still land from the binlog)",
            )
    rfile = wire.result_file(conn)
    assert rfile is not None
    buf = b""
    pieces: list[tuple[object, ...]] = []
    rows: list[tuple[object, ...]] = []  # once a value needs objects: the rest as tuples
    count = 0
    last: tuple[object, ...] = ()
    objects = False
    yielded = 0  # stats.bytes at the last block yielded
    try:
        while True:
            block = rfile.read1(READ_BYTES)
            if not block:
                raise pymysql.err.OperationalError(2013, "Lost connection during a snapshot read")
            buf = buf + block if buf else block
            offset = 0
            while True:
                if objects:
                    got, offset, state = core.text_rows(
                        buf, offset, kinds, converters, False, types
                    )
                    rows.extend(got)
                else:
                    room = batch - count
                    if max_bytes is not None and stats.bytes + len(buf) >= max_bytes:
                        room = _rows_within(buf, offset, max_bytes - stats.bytes - offset, room)
                        if room == 0:  # the cap is reached at offset
                            state = 0
                            break
                    vectors, n, offset, state, at = core.text_block(
                        buf, offset, specs, kinds, converters, False, room, types
                    )
                    if n:
                        pieces.append(vectors)
                        count += n
                        size = buf[at] | buf[at + 1] << 8 | buf[at + 2] << 16
                        last = core.text_row(buf[at + 4 : at + 4 + size], kinds, converters, types)
                    full = count >= batch
                    if full:
                        made, pieces, count = _block(pieces, count, natives), [], 0
                        yield made, last  # the pieces are not kept beside the block
                    if state == 4:  # a value the buffers cannot hold: objects from here on
                        objects = True
                        continue
                    if full and state == 0:  # whole packets may follow in buf
                        continue
                if state == 3:  # a row over several packets
                    stats.bytes += offset
                    joined, offset = _joined(rfile, buf, offset)
                    stats.bytes += len(joined[0])
                    buf, offset = joined[1], 0
                    row = core.text_row(joined[0], kinds, converters, types)
                    if not objects:
                        if pieces:
                            made, pieces, count = _block(pieces, count, natives), [], 0
                            yield made, last
                        objects = True
                    rows.append(row)
                    continue
                break
            if len(rows) >= batch:
                yield Block.from_rows(rows, width), rows[-1]
                rows = []
            if state == 1:
                ended = True
                break
            if state == 2:
                _raise_error(rfile, buf[offset:])
            stats.bytes += offset
            buf = buf[offset:]
            if max_bytes is not None and stats.bytes >= max_bytes:  # rows only: > 0
                _drain(rfile, buf)  # the rows after the cap: the next chunk reads them
                stats.cut = ended = True
                break
            if block_bytes is not None and stats.bytes - yielded >= block_bytes:
                yielded = stats.bytes  # wide rows: a block of fewer rows
                if pieces:
                    made, pieces, count = _block(pieces, count, natives), [], 0
                    yield made, last
                if rows:
                    made, tail, rows = Block.from_rows(rows, width), rows[-1], []
                    yield made, tail
        if pieces:
            made, pieces = _block(pieces, count, natives), []
            yield made, last
        if rows:
            yield Block.from_rows(rows, width), rows[-1]
    finally:
        wire.drop_result(conn, result)
    if statement is not None and ended:  # read part way, the connection is dropped
        wire.close_statement(conn, statement)


def _prepare(conn: pymysql.connections.Connection, sql: str) -> int | None:
    """``sql`` prepared (its statement id); None where the text protocol reads it instead: a
    server that takes no prepared statement now (``max_prepared_stmt_count`` reached, or 0)
    or not this one, or a result column type the binary reading does not know."""
    try:
        statement, types = wire.prepare(conn, sql)
    except pymysql.err.MySQLError as exc:
        if exc.args and exc.args[0] in _NO_PREPARED:
            return None
        raise
    if _unreadable(types):
        wire.close_statement(conn, statement)
        return None
    return statement


def _unreadable(types: tuple[wire.WireColumn, ...]) -> list[int]:
    """The result column types among ``types`` that have no binary reading here."""
    return [code for code, _, _ in types if code not in BINARY_READABLE]


def _block(
    pieces: list[tuple[object, ...]], count: int, natives: tuple[NativeKind | None, ...]
) -> Block:
    """One block of consecutive ``text_block`` results (buffers joined, lists chained)."""
    if len(pieces) == 1:
        return Block(count, pieces[0], None, natives)  # type: ignore[arg-type]
    columns: list[object] = []
    for k, kind_ in enumerate(natives):
        parts = [piece[k] for piece in pieces]
        if kind_ is None:
            columns.append([value for part in parts for value in part])  # type: ignore[attr-defined]
        else:
            found = b"".join(p[0] for p in parts)  # type: ignore[index]
            values = b"".join(p[1] for p in parts)  # type: ignore[index]
            lengths = None if parts[0][2] is None else b"".join(p[2] for p in parts)  # type: ignore[index]
            columns.append((found, values, lengths))
    return Block(count, tuple(columns), None, natives)  # type: ignore[arg-type]


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


def _rows_within(buf: bytes, offset: int, budget: int, most: int) -> int:
    """How many whole row packets from ``offset`` bring the bytes to ``budget`` (the one
    reaching it included); ``most`` when the buffer holds fewer (or another packet comes)."""
    rows = 0
    while budget > 0 and rows < most:
        if offset + 5 > len(buf):
            return most
        size = buf[offset] | buf[offset + 1] << 8 | buf[offset + 2] << 16
        first = buf[offset + 4]
        if size == MAX_PAYLOAD or first == 0xFF or (first == 0xFE and size < 9):
            return most  # a split row, an error or the end: text_block tells
        budget -= 4 + size
        offset += 4 + size
        rows += 1
    return rows


def _drain(rfile: object, data: bytes) -> None:
    """Read and drop the rest of a result set, up to its EOF packet, without parsing a row
    (an ERR packet raises the server's error). ``data`` starts at a packet."""
    continued = False  # the packet before had the maximum payload: this one ends its row
    while True:
        while len(data) < (4 if continued else 5):
            data += _more(rfile)
        size = data[0] | data[1] << 8 | data[2] << 16
        if not continued:
            if data[4] == 0xFF:
                _raise_error(rfile, data)
            if data[4] == 0xFE and size < 9:  # EOF (see _rowcore_c/text.c, packet_kind)
                while len(data) < 4 + size:  # read whole: the next reply follows it
                    data += _more(rfile)
                return
        continued = size == MAX_PAYLOAD
        skip = 4 + size
        while skip > len(data):
            skip -= len(data)
            data = _more(rfile)
        data = data[skip:]


def _raise_error(rfile: object, data: bytes) -> None:
    while len(data) < 4:
        data += _more(rfile)
    size = data[0] | data[1] << 8 | data[2] << 16
    while len(data) < 4 + size:
        data += _more(rfile)
    pymysql.err.raise_mysql_exception(data[4 : 4 + size])


def _slow(
    conn: pymysql.connections.Connection,
    sql: str,
    converters: tuple[Convert, ...],
    batch: int,
    max_bytes: int | None,
    stats: ReadStats,
    block_bytes: int | None,
) -> Iterator[list[tuple[object, ...]]]:
    cur = conn.cursor(pymysql.cursors.SSCursor)
    try:
        cur.execute(sql)
        rows: list[tuple[object, ...]] = []
        yielded = 0
        while True:
            row = cur.fetchone()
            if row is None:
                break
            stats.bytes += sum(len(v) for v in row if v is not None)
            rows.append(
                tuple(None if v is None else f(v) for f, v in zip(converters, row, strict=True))
            )
            if max_bytes is not None and stats.bytes >= max_bytes:
                stats.cut = True  # closing the cursor below reads the rest and drops it
                break
            if len(rows) >= batch or (
                block_bytes is not None and stats.bytes - yielded >= block_bytes
            ):
                yielded = stats.bytes
                yield rows
                rows = []
        if rows:
            yield rows
    finally:
        cur.close()
