"""Types of the native core, the optional C extension ``replicator.binlog._rowcore`` (sources in
``replicator/binlog/_rowcore_c/``, one file per job). Python reaches it through ``native.py``;
tests/unit/test_native.py checks this stub against the built module."""

from collections.abc import Callable, Sequence
from typing import Any, Final, Self

from typing_extensions import Buffer

_Converter = Callable[[bytes], object]
"""A column's Python function: the value of its text or stored bytes, or the exact error."""
_Crc32 = Callable[[memoryview], int]
"""binascii.crc32, or None where the events carry no checksum."""
_Buffers = tuple[bytes, bytes, bytes | None]
"""A block's buffer column: one set byte per row, the values, a 4-byte length per row (for
variable-length values) or None."""
_Column = list[object] | _Buffers
"""A block's column: its values as objects, or its buffers."""
_ArrowBuffers = tuple[bytes | None, bytes, bytes | None, int]
"""One Arrow column: validity bitmap or None, data, offsets or None, null count."""

# a value as an object (BlockSpec instructions: op, width, arg0, arg1, object)
OP_INT: Final[int]
OP_FLOAT: Final[int]
OP_DOUBLE: Final[int]
OP_YEAR: Final[int]
OP_DECIMAL: Final[int]
OP_DATE: Final[int]
OP_DATETIME2: Final[int]
OP_TIMESTAMP2: Final[int]
OP_TIME2: Final[int]
OP_UTF8: Final[int]
OP_LATIN1: Final[int]
OP_TEXT: Final[int]
OP_BYTES: Final[int]
OP_ENUM: Final[int]
OP_CALL: Final[int]
OP_DECIMAL_TEXT: Final[int]
OP_DATE_TEXT: Final[int]
OP_DATETIME2_TEXT: Final[int]
OP_TIMESTAMP2_TEXT: Final[int]

# a value into buffers (BlockSpec lanes: op, in width, out width, arg0, arg1, object)
LANE_INT: Final[int]
LANE_YEAR: Final[int]
LANE_COPY: Final[int]
LANE_DECIMAL: Final[int]
LANE_DATE: Final[int]
LANE_DATETIME2: Final[int]
LANE_TIMESTAMP2: Final[int]
LANE_TIME2: Final[int]
LANE_UTF8: Final[int]
LANE_ASCII: Final[int]
LANE_BYTES: Final[int]
LANE_ENUM: Final[int]

# the kinds of arrow_columns' specs (item index, kind, byte width)
ARROW_INT: Final[int]
ARROW_UINT: Final[int]
ARROW_FLOAT32: Final[int]
ARROW_FLOAT64: Final[int]
ARROW_STRING: Final[int]
ARROW_BINARY: Final[int]
ARROW_DATE32: Final[int]
ARROW_TIMESTAMP: Final[int]
ARROW_TIMESTAMP_UTC: Final[int]
ARROW_DURATION: Final[int]

# the ops of text_block's specs (op, arg0, arg1)
TB_OBJECTS: Final[int]
TB_INT: Final[int]
TB_FLOAT: Final[int]
TB_DECIMAL: Final[int]
TB_DATE: Final[int]
TB_DATETIME: Final[int]
TB_TIMESTAMP: Final[int]
TB_UTF8: Final[int]
TB_ASCII: Final[int]
TB_BYTES: Final[int]
TB_TIME: Final[int]
TB_BIT: Final[int]

class BlockSpec:
    """The decoder of the row images of one row layout into a block (rows.c)."""

    def __new__(
        cls,
        instructions: tuple[tuple[int, int, int, int, object], ...],
        lanes: tuple[tuple[int, int, int, int, int, object] | None, ...],
    ) -> Self: ...
    def decode(
        self,
        buf: Buffer,
        pos: int,
        end: int,
        after: BlockSpec | None = None,
        objects: bool = False,
    ) -> tuple[int, tuple[_Column, ...], tuple[_Column, ...] | None] | None:
        """(rows, columns, after images' columns or None); None when a row does not decode."""

def arrow_columns(
    rows: list[Any], width: int, specs: tuple[tuple[int, int, int], ...], /
) -> list[_ArrowBuffers | None]: ...
def concat_columns(parts: list[_Buffers], width: int, varlen: bool, /) -> _ArrowBuffers | None: ...

# a binary result set's columns: (type, decimals, unsigned) of each column's definition
_Wire = tuple[tuple[int, int, bool], ...] | None

def text_rows(
    buf: Buffer,
    offset: int,
    kinds: tuple[int, ...],
    fallbacks: tuple[_Converter, ...],
    deprecate_eof: bool,
    wire: _Wire = None,
    /,
) -> tuple[list[tuple[object, ...]], int, int]:
    """(rows, offset, state); binary rows with ``wire``."""

def text_row(
    payload: Buffer,
    kinds: tuple[int, ...],
    fallbacks: tuple[_Converter, ...],
    wire: _Wire = None,
    /,
) -> tuple[object, ...]: ...
def text_block(
    buf: Buffer,
    offset: int,
    specs: tuple[tuple[int, int, int], ...],
    kinds: tuple[int, ...],
    fallbacks: tuple[_Converter, ...],
    deprecate_eof: bool,
    max_rows: int,
    wire: _Wire = None,
    /,
) -> tuple[tuple[_Column, ...], int, int, int, int]:
    """(columns, count, offset, state, offset of the last row's packet or -1); binary rows
    with ``wire``."""

def split_events(
    buf: Buffer,
    start: int,
    seq: int,
    crc: _Crc32 | None,
    stop: Buffer | None = None,
    keep_first: bool = False,
    /,
) -> tuple[int, int, list[bytes]]:
    """(offset, seq, events)."""

def step_events(
    buf: Buffer, start: int, seq: int, position: int, types: Buffer, crc: _Crc32 | None, /
) -> tuple[int, int, int, int]:
    """(offset, seq, position, events stepped over)."""

def split_file_events(buf: Buffer, start: int, crc: _Crc32 | None, /) -> tuple[int, list[bytes]]:
    """(offset, events)."""

def skip_transactions(
    buf: Buffer,
    start: int,
    seq: int,
    position: int,
    limit: int,
    inside: Buffer,
    watch: Sequence[tuple[int, int]],
    budget: int,
    query_post: int,
    spells_begin: Callable[[bytes], bool],
    crc: _Crc32,
    /,
) -> tuple[int, int, int, int, int, list[tuple[int, int, int]], list[tuple[bytes, int, int]]]:
    """(offset, seq, position, events, transactions, mariadb, mysql)."""

_Origins = tuple[bytes, bytes, bytes, bytes, bytes | None, int, bytes, bytes]
"""Where each rows event of a run's segment came from (runs.RowOrigins)."""
_Segment = tuple[
    Any, int, int, tuple[_Column, ...], tuple[_Column, ...] | None, int, str | None, int, int,
    int, _Origins | None,
]  # fmt: skip
"""A run's segment: (token, event type, rows, columns, after columns or None, events, the
first event's GTID, commit time, server id and position, origins or None)."""

def take_transactions(
    buf: Buffer,
    start: int,
    seq: int,
    position: int,
    limit: int,
    watch: Sequence[tuple[int, int]],
    budget: int,
    posts: Buffer,
    spells_begin: Callable[[bytes], bool],
    crc: _Crc32,
    tables: dict[bytes, tuple[BlockSpec, int, Any]],
    max_images: int,
    max_bytes: int,
    /,
) -> tuple[
    int,
    int,
    int,
    int,
    int,
    list[tuple[int, int, int]],
    list[tuple[bytes, int, int]],
    list[_Segment],
    list[tuple[int, Any]],
    list[tuple[int, int]],
    tuple[bytes, bytes, bytes],
]:
    """(offset, seq, position, transactions, bytes, mariadb, mysql, segments, mapped,
    counts, (records, images, image_ends))."""
