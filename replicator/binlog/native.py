"""The native core: the C extension ``_rowcore`` that decodes rows events into blocks.

``_rowcore`` is optional (``setup.py`` builds it when a C compiler is there). Its
``BlockSpec`` decodes the row images of one row layout (``rows.RowLayout``) into a block
(``block.py``) with the same contract as every fast path here: it raises nothing about the
data, and returns None for an event it cannot decode, which the reference decoders then decode
(and raise the exact error). Each column gets two instructions, derived here from its
``ColumnPlan``:

* its value as an object (``instruction``): integers (1, 2, 3, 4, 8 bytes), FLOAT, DOUBLE and
  YEAR read directly; DECIMAL, DATE, DATETIME2, TIMESTAMP2 and TIME2 built in C, a value they
  cannot hold (a zero or invalid date, a DECIMAL digit group out of range, the zero
  TIMESTAMP) handed to the column's Python converter, which returns the marker or raises the
  error; length-prefixed text decoded in C when it is UTF-8 (strict), or ASCII in a MySQL
  ``latin1`` column, other text by the column's text function; bytes sliced (and padded for
  BINARY(n)); ENUM labels looked up; every other type through its reference decoder;
* for the common types, its buffers (``lane``): the values with no Python object each, in a
  layout (``NativeKind``) the sink turns into Arrow arrays without looking at them.

Set ``REPLICATOR_NATIVE=0`` in the environment to use the reference decoders only.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from typing import Any

from .block import NativeKind
from .charsets import decode_mysql_latin1
from .columns import ColumnPlan
from .constants import ColumnType
from .schema import ColumnDef

__all__ = [
    "IMPORT_ERROR",
    "available",
    "unavailable",
    "Instruction",
    "core",
    "instruction",
    "block_spec",
    "lane",
]

Instruction = tuple[int, int, int, int, object]

try:
    from . import _rowcore
except ImportError as exc:  # not built: no C compiler where the package was installed
    _core: Any = None
    IMPORT_ERROR: str | None = str(exc)
else:
    _core = _rowcore
    IMPORT_ERROR = None


@functools.cache
def unavailable() -> str | None:
    """Why the core is not used (not built, or ``REPLICATOR_NATIVE=0``); None when it is.
    Read once, at first use, so that importing this module reads no environment."""
    if _core is not None and os.environ.get("REPLICATOR_NATIVE", "1") == "0":
        return "turned off by REPLICATOR_NATIVE=0"
    return IMPORT_ERROR


def available() -> bool:
    """Whether row layouts get native decoders."""
    return unavailable() is None


_STRUCT_OPS = {"b": 1, "B": 0, "h": 1, "H": 0, "i": 1, "I": 0, "q": 1, "Q": 0}


_AS_TEXT = ("decimal", "date", "datetime2", "timestamp2")


def instruction(plan: ColumnPlan, *, text_values: bool = False) -> Instruction:
    """The native instruction of one column: (op, width, arg0, arg1, object).
    ``text_values``: a valid DECIMAL, DATE, DATETIME2 or TIMESTAMP2 value as the text
    ``replicator dump`` writes of it (a str), not as an object."""
    core = _core
    if plan.native is not None:
        name, width, first, second, obj = plan.native
        if text_values and name in _AS_TEXT:
            name += "_text"
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


# integer columns whose values fit buffers, by type code, with the byte width they land in
# (MEDIUMINT's 3 bytes widen to 4); other integer-like types (BIT, SET, ENUM without labels,
# unusual widths) stay objects
_INTEGER_WIDTHS = {
    ColumnType.TINY: 1,
    ColumnType.SHORT: 2,
    ColumnType.INT24: 4,
    ColumnType.LONG: 4,
    ColumnType.LONGLONG: 8,
}
_TEMPORAL = {
    "datetime2": ("timestamp", ColumnType.DATETIME2),
    "timestamp2": ("timestamp_utc", ColumnType.TIMESTAMP2),
    "time2": ("duration", ColumnType.TIME2),
}
MAX_DECIMAL_DIGITS = 38  # what decimal128 holds


def lane(col: ColumnDef, plan: ColumnPlan) -> tuple[tuple[Any, ...], NativeKind] | None:
    """How the core decodes one column into buffers: its lane instruction (op, in width, out
    width, arg0, arg1, obj) and the kind of the buffers; None when the column's values stay
    objects. Only types whose every usual value the buffers hold exactly qualify."""
    core = _core
    op, width, arg0, arg1, obj = instruction(plan)
    real = col.real_type
    if op == core.OP_INT and real in _INTEGER_WIDTHS:
        out = _INTEGER_WIDTHS[ColumnType(real)]
        return (core.LANE_INT, width, out, arg0, 0, None), ("int", out, int(bool(arg0)))
    if op == core.OP_YEAR and real == ColumnType.YEAR:
        return (core.LANE_YEAR, 1, 2, 0, 0, None), ("int", 2, 1)
    if op == core.OP_FLOAT and real == ColumnType.FLOAT:
        return (core.LANE_COPY, 4, 4, 0, 0, None), ("float", 4, 0)
    if op == core.OP_DOUBLE and real == ColumnType.DOUBLE:
        return (core.LANE_COPY, 8, 8, 0, 0, None), ("float", 8, 0)
    if op == core.OP_DECIMAL and arg0 + arg1 <= MAX_DECIMAL_DIGITS:
        return (core.LANE_DECIMAL, width, 16, arg0, arg1, None), ("decimal128", arg0 + arg1, arg1)
    if op == core.OP_DATE and real == ColumnType.DATE:
        return (core.LANE_DATE, 3, 4, 0, 0, None), ("date32", 0, 0)
    for name, (kind, type_code) in _TEMPORAL.items():
        if op == getattr(core, "OP_" + name.upper()) and real == type_code:
            lane_op = getattr(core, "LANE_" + name.upper())
            return (lane_op, width, 8, arg0, arg1, None), (kind, 0, 0)
    if op == core.OP_UTF8:
        return (core.LANE_UTF8, width, 0, 0, 0, None), ("utf8", 0, 0)
    if op == core.OP_LATIN1:
        return (core.LANE_ASCII, width, 0, 0, 0, None), ("utf8", 0, 0)
    if op == core.OP_BYTES:
        return (core.LANE_BYTES, width, 0, arg0, 0, None), ("binary", 0, 0)
    if op == core.OP_ENUM:
        assert isinstance(obj, tuple)
        try:
            labels = tuple(label.encode("utf-8") for label in obj)
        except UnicodeEncodeError:
            return None
        return (core.LANE_ENUM, width, 0, 0, 0, labels), ("utf8", 0, 0)
    return None


def block_spec(
    plans: Sequence[ColumnPlan],
    lanes: Sequence[tuple[Any, ...] | None],
    present: Sequence[int],
    *,
    text_values: bool = False,
) -> Any:
    """The native decoder of images with the columns ``present`` into blocks."""
    instructions = tuple(instruction(plans[i], text_values=text_values) for i in present)
    return _core.BlockSpec(instructions, tuple(lanes[i] for i in present))
