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
(``make_changes``), and Arrow buffers for the Parquet writer (``sink.native_arrow``).

Set ``REPLICATOR_NATIVE=0`` in the environment to use the Python decoders only.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from typing import Any

from .charsets import decode_mysql_latin1
from .columns import ColumnPlan
from .values import ABSENT

__all__ = [
    "IMPORT_ERROR",
    "available",
    "unavailable",
    "Instruction",
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


def row_spec(plans: Sequence[ColumnPlan], present: Sequence[int]) -> Any:
    """The native decoder of images with the columns ``present`` (a ``RowsDecoder``)."""
    instructions = tuple(instruction(plans[i]) for i in present)
    return _core.RowSpec(len(plans), tuple(present), instructions, ABSENT)


def pair_spec(before: Any, after: Any) -> Any:
    """The native decoder of update images (a ``PairsDecoder``)."""
    return _core.PairSpec(before, after)


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
