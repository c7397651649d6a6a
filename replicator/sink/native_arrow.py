"""Arrow columns built by the native core for the Parquet writer: from a column's list of
values (or row tuples) in one pass (``arrow_columns``: integers, floats, text, bytes, dates,
timestamps and durations, with None as null), and from the native buffers of one column of
consecutive blocks (``concat_columns``).
The core gives up (None) on any value that is not plainly of the column's type, and the
writer converts that column with pyarrow and its own checks, as without the core."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ..binlog import native


def arrow_kind(type_: pa.DataType) -> tuple[int, int] | None:
    """(kind, byte width) of an Arrow type the core builds columns of; None for the others
    (or without the core)."""
    core = native.core()
    if not native.available():
        return None
    if pa.types.is_integer(type_):
        kind = core.ARROW_INT if pa.types.is_signed_integer(type_) else core.ARROW_UINT
        return kind, type_.bit_width // 8
    if pa.types.is_float32(type_):
        return core.ARROW_FLOAT32, 4
    if pa.types.is_float64(type_):
        return core.ARROW_FLOAT64, 8
    if pa.types.is_string(type_):
        return core.ARROW_STRING, 1
    if pa.types.is_binary(type_):
        return core.ARROW_BINARY, 1
    if pa.types.is_date32(type_):
        return core.ARROW_DATE32, 4
    if pa.types.is_timestamp(type_) and type_.unit == "us":
        if type_.tz is None:
            return core.ARROW_TIMESTAMP, 8
        if type_.tz == "UTC":
            return core.ARROW_TIMESTAMP_UTC, 8
    if pa.types.is_duration(type_) and type_.unit == "us":
        return core.ARROW_DURATION, 8
    return None


ArrowBuffers = tuple[bytes | None, bytes, bytes | None, int]
"""(validity or None, data, offsets or None, null count) of one Arrow column."""


def arrow_columns(
    rows: list[Any], width: int, specs: tuple[tuple[int, int, int], ...]
) -> list[ArrowBuffers | None]:
    """The Arrow buffers of columns of ``rows`` (tuples of ``width`` items), in one pass;
    ``specs``: (item index, kind, byte width) per column. None for a column left to
    pyarrow."""
    found: list[ArrowBuffers | None] = native.core().arrow_columns(rows, width, specs)
    return found


def concat_columns(
    parts: list[tuple[bytes, bytes, bytes | None]], width: int, varlen: bool
) -> ArrowBuffers | None:
    """One column of consecutive ``ColumnSpec`` results as Arrow buffers; None past Arrow's
    2 GiB of variable-length data."""
    found: ArrowBuffers | None = native.core().concat_columns(parts, width, varlen)
    return found
