"""Row images of WRITE/UPDATE/DELETE_ROWS events, decoded into blocks (``block.py``).

Body layout (mysql-server ``libbinlogevents/src/rows_event.cpp`` ``Rows_event::Rows_event``,
``sql/log_event.cc`` ``Rows_log_event::write_data_body``): post-header table_id and flags,
for v2 events a 2-byte extra-info length (counting itself) and the extra info; lenenc column
count; the bitmap of columns present in the (before) image; for updates a second bitmap for
the after image; then rows until the end of the event. Each row image is a NULL bitmap over
the *present* columns followed by the values of the present, non-NULL columns in column order
(``pack_row`` in sql/rpl_record.cc).

Decoders are chosen once per TABLE_MAP and per presence bitmap (``RowLayout``). A rows event
is decoded by one fast decoder, the native core's ``BlockSpec`` (``native.py``, C), straight
into a block; the reference decoders (``columns.py``, one call per value, ``RowLayout.decode``)
decode the events it gives up on, and raise the exact error, and every event when the core is
not built (``REPLICATOR_NATIVE=0``, or no C compiler where the package was installed).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from . import native
from .block import Block, NativeKind, Vector, Vectors
from .columns import ColumnDecoder, ColumnPlan, build_plan
from .errors import DecodeError, TruncatedError
from .schema import ColumnDef
from .values import ABSENT

RowImage = tuple[object, ...]
AfterHook = Callable[[bytes, int, RowImage], tuple[RowImage, int]]

RowDecoders = Literal["native", "reference"]
ROW_DECODERS: RowDecoders | None = None
"""The decoders new ``TableDecoder``s use: the native core, or the reference decoders only;
None: the native core when it is available (``default_decoders``). Tests set it to compare
the two."""


def default_decoders() -> RowDecoders:
    if ROW_DECODERS is not None:
        return ROW_DECODERS
    return "native" if native.available() else "reference"


@dataclass(frozen=True, slots=True)
class RowLayout:
    """Decoders for one set of present columns."""

    column_count: int
    present: tuple[int, ...]
    decoders: tuple[ColumnDecoder, ...]
    null_bytes: int
    template: tuple[object, ...]  # ABSENT everywhere, copied per row
    spec: Any = None  # the native BlockSpec; None: reference decoders only

    def decode(self, buf: bytes, pos: int) -> tuple[RowImage, int]:
        """Decode one row image starting at ``pos`` (the reference loop)."""
        nb = self.null_bytes
        nulls = int.from_bytes(buf[pos : pos + nb], "little")
        pos += nb
        row = list(self.template)
        bit = 1
        for index, decoder in zip(self.present, self.decoders, strict=True):
            if nulls & bit:
                row[index] = None
            else:
                row[index], pos = decoder(buf, pos)
            bit <<= 1
        return tuple(row), pos


@dataclass(slots=True)
class TableDecoder:
    """Everything needed to decode rows of one table shape (a TABLE_MAP's columns); the
    parser builds it once per shape, not once per TABLE_MAP event."""

    columns: tuple[ColumnDef, ...]
    decoders: tuple[ColumnDecoder, ...]
    plans: tuple[ColumnPlan, ...]
    lanes: tuple[tuple[Any, ...] | None, ...] | None  # None: reference decoders only
    natives: tuple[NativeKind | None, ...]
    # DECIMAL, DATE, DATETIME2 and TIMESTAMP2 values the native core decodes as objects come
    # as the text `replicator dump` writes of them (``native.instruction``); the reference
    # decoders still make objects
    text_values: bool = False
    _layouts: dict[int, RowLayout] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        columns: tuple[ColumnDef, ...],
        *,
        decoders: RowDecoders | None = None,
        text_values: bool = False,
    ) -> TableDecoder:
        plans = tuple(build_plan(c) for c in columns)
        which = default_decoders() if decoders is None else decoders
        if which == "native" and not native.available():
            raise RuntimeError(f"the native row decoders are not available: {native.unavailable()}")
        lanes: tuple[tuple[Any, ...] | None, ...] | None = None
        natives: tuple[NativeKind | None, ...] = (None,) * len(columns)
        if which == "native":
            found = [native.lane(c, p) for c, p in zip(columns, plans, strict=True)]
            lanes = tuple(None if f is None else f[0] for f in found)
            natives = tuple(None if f is None else f[1] for f in found)
        return cls(columns, tuple(p.decode for p in plans), plans, lanes, natives, text_values)

    def layout(self, present_bits: int) -> RowLayout:
        found = self._layouts.get(present_bits)
        if found is None:
            n = len(self.columns)
            present = tuple(i for i in range(n) if present_bits >> i & 1)
            spec = None
            if self.lanes is not None:
                spec = native.block_spec(
                    self.plans, self.lanes, present, text_values=self.text_values
                )
            found = RowLayout(
                column_count=n,
                present=present,
                decoders=tuple(self.decoders[i] for i in present),
                null_bytes=(len(present) + 7) // 8,
                template=(ABSENT,) * n,
                spec=spec,
            )
            self._layouts[present_bits] = found
        return found

    def decode(
        self,
        buf: bytes,
        pos: int,
        layout: RowLayout,
        after_layout: RowLayout | None,
        after_hook: AfterHook | None = None,
        *,
        objects: bool = False,
    ) -> Block:
        """Every row image from ``pos`` to the end of ``buf`` as a block. For updates, images
        alternate before/after; ``after_hook``, when given, decodes the after image itself
        (PARTIAL_UPDATE_ROWS needs the before image to apply JSON diffs). ``objects``: every
        column as a list of values, none as buffers."""
        end = len(buf)
        if pos < end and not layout.present and (after_layout is None or not after_layout.present):
            # an image of no columns takes no bytes: the bytes left over cannot be row images
            raise DecodeError(f"{end - pos} bytes of row images for a row image of no columns")
        if after_hook is None and layout.spec is not None:
            after_spec = None if after_layout is None else after_layout.spec
            decoded = layout.spec.decode(buf, pos, end, after_spec, objects)
            if decoded is not None:
                count, first, second = decoded
                columns = _spread(first, layout.present, layout.column_count)
                after = None
                if after_layout is not None:
                    after = _spread(second, after_layout.present, after_layout.column_count)
                return Block(count, columns, after, self.natives)
        rows, afters = _reference(buf, pos, layout, after_layout, after_hook)
        columns = _vectors(rows, layout.present, layout.column_count)
        after = None
        if after_layout is not None:
            after = _vectors(afters, after_layout.present, after_layout.column_count)
        return Block(len(rows), columns, after, self.natives)


def _spread(found: tuple[Vector, ...], present: tuple[int, ...], width: int) -> Vectors:
    """The present columns' vectors at their column indexes (None for the others)."""
    if len(present) == width:
        return found
    out: list[Vector | None] = [None] * width
    for index, vector in zip(present, found, strict=True):
        out[index] = vector
    return tuple(out)


def _vectors(rows: list[RowImage], present: tuple[int, ...], width: int) -> Vectors:
    """Row tuples of the reference decoders as one list per present column."""
    out: list[Vector | None] = [None] * width
    if rows:
        transposed = list(zip(*rows, strict=True))
        for index in present:
            out[index] = list(transposed[index])
    else:
        for index in present:
            out[index] = []
    return tuple(out)


def _reference(
    buf: bytes,
    pos: int,
    layout: RowLayout,
    after_layout: RowLayout | None,
    after_hook: AfterHook | None,
) -> tuple[list[RowImage], list[RowImage]]:
    """The reference loop: one decoder call per value; raises the exact error."""
    end = len(buf)
    rows: list[RowImage] = []
    afters: list[RowImage] = []
    try:
        if after_layout is None:
            decode = layout.decode
            while pos < end:
                row, pos = decode(buf, pos)
                rows.append(row)
        else:
            while pos < end:
                before, pos = layout.decode(buf, pos)
                if after_hook is not None:
                    after, pos = after_hook(buf, pos, before)
                else:
                    after, pos = after_layout.decode(buf, pos)
                rows.append(before)
                afters.append(after)
    except (IndexError, struct.error) as exc:
        raise TruncatedError(f"row image runs past the end of the event: {exc}") from exc
    if pos != end:
        raise DecodeError(f"row images overrun the event by {pos - end} bytes")
    return rows, afters
