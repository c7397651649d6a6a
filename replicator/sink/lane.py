"""The columnar lane: full row images of inserts and deletes decoded by the native core
straight into column buffers, and landed without a Python object per value.

The usual path decodes every value into a Python object, wraps each row in a ``RowChange``
and has the writer turn the objects back into Arrow arrays. For the common case, a rows event
that inserts or deletes whole rows of a table whose every column has a plain Arrow type, the
native core (``ColumnSpec``) decodes the images into per-column buffers in the reader thread
(``ColumnarRowsEvent``); the pipeline hands the event on as one ``ChunkRun`` (the metadata of
the whole event once), and the writer concatenates the buffers of consecutive events into
Arrow arrays (``concat_columns``, ``pa.Array.from_buffers``).

The lane only takes what it can land exactly as the usual path would: integers, YEAR,
FLOAT/DOUBLE, DECIMAL up to 38 digits, DATE, DATETIME2, TIMESTAMP2, TIME2, UTF-8 text,
ASCII in a MySQL ``latin1`` column, bytes (BINARY(n) padded) and ENUM labels. A value it
cannot take (a zero date, invalid text, a digit group out of range, an ENUM index past the
labels) makes it give the event up, and the event is decoded the usual way, which writes the
marker (null, counted) or reports the error. Anything that needs the row tuples (XA held
until COMMIT, excluded columns, ``replicator dump``) decodes them from the event's bytes on
first use, with the usual decoders. Tests compare both paths, file by file.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from ..binlog import native
from ..binlog.columns import ColumnPlan
from ..binlog.schema import ColumnDef
from .arrow_types import arrow_field

__all__ = ["column_spec", "lane_instruction"]


def lane_instruction(col: ColumnDef, plan: ColumnPlan) -> tuple[Any, ...] | None:
    """(op, in width, out width, arg0, arg1, obj) of one column for ``ColumnSpec``; None
    when the lane cannot land the column exactly as the usual path does."""
    core = native.core()
    op, width, arg0, arg1, obj = native.instruction(plan)
    arrow = arrow_field(col).type
    if op == core.OP_INT and pa.types.is_integer(arrow):
        return core.LANE_INT, width, arrow.bit_width // 8, arg0, 0, None
    if op == core.OP_YEAR and arrow == pa.int16():
        return core.LANE_YEAR, 1, 2, 0, 0, None
    if (op, arrow) in ((core.OP_FLOAT, pa.float32()), (core.OP_DOUBLE, pa.float64())):
        return core.LANE_COPY, width, width, 0, 0, None
    if op == core.OP_DECIMAL and pa.types.is_decimal128(arrow):
        return core.LANE_DECIMAL, width, 16, arg0, arg1, None
    if op == core.OP_DATE and arrow == pa.date32():
        return core.LANE_DATE, 3, 4, 0, 0, None
    temporal = {
        core.OP_DATETIME2: (core.LANE_DATETIME2, pa.timestamp("us")),
        core.OP_TIMESTAMP2: (core.LANE_TIMESTAMP2, pa.timestamp("us", tz="UTC")),
        core.OP_TIME2: (core.LANE_TIME2, pa.duration("us")),
    }
    if op in temporal and arrow == temporal[op][1]:
        return temporal[op][0], width, 8, arg0, arg1, None
    if op == core.OP_UTF8 and arrow == pa.string():
        return core.LANE_UTF8, width, 0, 0, 0, None
    if op == core.OP_LATIN1 and arrow == pa.string():
        return core.LANE_ASCII, width, 0, 0, 0, None
    if op == core.OP_BYTES and arrow == pa.binary():
        return core.LANE_BYTES, width, 0, arg0, 0, None
    if op == core.OP_ENUM and arrow == pa.string():
        assert isinstance(obj, tuple)
        try:
            labels = tuple(label.encode("utf-8") for label in obj)
        except UnicodeEncodeError:
            return None
        return core.LANE_ENUM, width, 0, 0, 0, labels
    return None


def column_spec(columns: Sequence[ColumnDef], plans: Sequence[ColumnPlan]) -> Any:
    """The ``ColumnSpec`` of a table's full row images, or None when a column keeps the
    table out of the lane (or the native core is not built)."""
    if not native.available() or not columns:
        return None
    instructions = []
    for col, plan in zip(columns, plans, strict=True):
        found = lane_instruction(col, plan)
        if found is None:
            return None
        instructions.append(found)
    return native.core().ColumnSpec(tuple(instructions))
