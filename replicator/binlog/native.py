"""The native core: row layouts decoded by the C extension ``_rowcore`` when it is built.

``_rowcore`` is optional (``setup.py`` builds it when a C compiler is there). It decodes the
row images of a rows event into the same tuples the generated Python decoders of
``rowcode.py`` produce, with the same contract: it raises nothing about the data, and returns
the start of the first row it cannot decode so that the reference decoders take over from
there and raise the exact error. Each column becomes one instruction, derived here from its
``ColumnPlan``:

* integers (1, 2, 3, 4, 8 bytes), FLOAT, DOUBLE and YEAR are read directly;
* DECIMAL, DATE, DATETIME2, TIMESTAMP2 and TIME2 are built in C; a value they cannot hold
  (a zero or invalid date, a DECIMAL digit group out of range, the zero TIMESTAMP) goes to
  the column's Python converter, which returns the marker or raises the error;
* length-prefixed text is decoded in C when it is UTF-8 (strict), or ASCII in a MySQL
  ``latin1`` column; other text goes to the column's text function; bytes are sliced (and
  padded for BINARY(n));
* ENUM labels are looked up;
* every other type calls its reference decoder.

The core also builds the pipeline's ``RowChange`` tuples of a rows event
(``make_changes``), and Arrow columns straight from row tuples (``arrow_columns``), for the
Parquet writer: integers, floats, text, bytes, dates, timestamps and durations, with None as
null. It gives up (None) on any value that is not plainly of the column's type, and the
writer converts that column with pyarrow and its own checks, as without the core.

Set ``REPLICATOR_NATIVE=0`` in the environment to use the Python decoders only.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from .charsets import decode_mysql_latin1
from .columns import ColumnPlan
from .values import ABSENT

__all__ = [
    "AVAILABLE",
    "IMPORT_ERROR",
    "Instruction",
    "arrow_columns",
    "arrow_kind",
    "concat_columns",
    "core",
    "instruction",
    "make_changes",
    "pair_spec",
    "row_spec",
]

Instruction = tuple[int, int, int, int, object]

try:
    from . import _rowcore  # type: ignore[attr-defined]
except ImportError as exc:  # not built: no C compiler where the package was installed
    _core: Any = None
    IMPORT_ERROR: str | None = str(exc)
else:
    _core = _rowcore
    IMPORT_ERROR = None

if _core is not None and os.environ.get("REPLICATOR_NATIVE", "1") == "0":
    IMPORT_ERROR = "turned off by REPLICATOR_NATIVE=0"
AVAILABLE = IMPORT_ERROR is None
"""Whether row layouts get native decoders (``rows.ROW_DECODERS`` picks the default)."""

_STRUCT_OPS = {"b": 1, "B": 0, "h": 1, "H": 0, "i": 1, "I": 0, "q": 1, "Q": 0}


def instruction(plan: ColumnPlan) -> Instruction:
    """The native instruction of one column: (op, width, arg0, arg1, object)."""
    core = _core
    if plan.native is not None:
        name, width, first, second, obj = plan.native
        return getattr(core, "OP_" + name.upper()), width, first, second, obj
    kind = plan.kind
    if kind == "struct":
        fmt = plan.fmt
        if fmt in _STRUCT_OPS:
            return core.OP_INT, plan.width, _STRUCT_OPS[fmt], 0, None
        if fmt == "f":
            return core.OP_FLOAT, 4, 0, 0, None
        if fmt == "d":
            return core.OP_DOUBLE, 8, 0, 0, None
    elif kind == "year":
        return core.OP_YEAR, 1, 0, 0, None
    elif kind == "enum":
        return core.OP_ENUM, plan.width, 0, 0, plan.labels
    elif kind == "data":
        text = plan.text
        if text is None:
            return core.OP_BYTES, plan.width, plan.pad, 0, None
        if text is bytes.decode:  # charsets.text_decoder's strict UTF-8
            return core.OP_UTF8, plan.width, 0, 0, None
        if text is decode_mysql_latin1:
            return core.OP_LATIN1, plan.width, 0, 0, text
        return core.OP_TEXT, plan.width, 0, 0, text
    return core.OP_CALL, 0, 0, 0, plan.decode


def core() -> Any:
    """The extension module itself (only when ``AVAILABLE``)."""
    return _core


def concat_columns(
    parts: list[tuple[bytes, bytes, bytes | None]], width: int, varlen: bool
) -> ArrowBuffers | None:
    """One column of consecutive ``ColumnSpec`` results as Arrow buffers; None past Arrow's
    2 GiB of variable-length data."""
    found: ArrowBuffers | None = _core.concat_columns(parts, width, varlen)
    return found


def row_spec(plans: Sequence[ColumnPlan], present: Sequence[int]) -> Any:
    """The native decoder of images with the columns ``present`` (a ``RowsDecoder``)."""
    instructions = tuple(instruction(plans[i]) for i in present)
    return _core.RowSpec(len(plans), tuple(present), instructions, ABSENT)


def pair_spec(before: Any, after: Any) -> Any:
    """The native decoder of update images (a ``PairsDecoder``)."""
    return _core.PairSpec(before, after)


def arrow_kind(type_: pa.DataType) -> tuple[int, int] | None:
    """(kind, byte width) of an Arrow type the core builds columns of; None for the others
    (or without the core)."""
    core = _core
    if not AVAILABLE:
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
    found: list[ArrowBuffers | None] = _core.arrow_columns(rows, width, specs)
    return found


def make_changes(
    cls: type[Any],
    op: str,
    seq: int,
    gtid: str | None,
    ts: object,
    server_id: int,
    file: str,
    position: int,
    rows: Sequence[tuple[object, ...]],
    befores: Sequence[tuple[object, ...]] | None,
) -> list[Any]:
    """One ``cls`` (``RowChange``) per row, built by the core: (op, seq + i, gtid, ts,
    server_id, file, position, rows[i], befores[i] or None)."""
    made: list[Any] = _core.make_changes(
        cls, op, seq, gtid, ts, server_id, file, position, rows, befores
    )
    return made
