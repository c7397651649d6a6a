"""Row images of WRITE/UPDATE/DELETE_ROWS events, decoded by per-table compiled decoders.

Body layout (mysql-server ``libbinlogevents/src/rows_event.cpp`` ``Rows_event::Rows_event``,
``sql/log_event.cc`` ``Rows_log_event::write_data_body``): post-header table_id and flags,
for v2 events a 2-byte extra-info length (counting itself) and the extra info; lenenc column
count; the bitmap of columns present in the (before) image; for updates a second bitmap for
the after image; then rows until the end of the event. Each row image is a NULL bitmap over
the *present* columns followed by the values of the present, non-NULL columns in column order
(``pack_row`` in sql/rpl_record.cc).

Decoders are chosen once per TABLE_MAP and per presence bitmap (``RowLayout``). Each layout
also gets a fast decoder that decodes a whole event's images in one loop: the native core
(``native.py``, C) when it is built, else a generated Python function (``rowcode.py``). The
reference loop here (``RowLayout.decode``, one decoder call per value) takes over from the
first row the fast decoder cannot decode, and raises the error.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from . import native
from .columns import ColumnDecoder, ColumnPlan, build_plan
from .errors import DecodeError, TruncatedError
from .rowcode import PairsDecoder, RowsDecoder, compile_pairs, compile_rows
from .schema import ColumnDef
from .values import ABSENT

RowImage = tuple[object, ...]

RowDecoders = Literal["native", "python", "reference"]
# (columns, plans) -> a ColumnSpec, or None when the table cannot take the columnar lane
LaneFactory = Callable[[tuple[ColumnDef, ...], tuple[ColumnPlan, ...]], object | None]
ROW_DECODERS: RowDecoders | None = None
"""The fast decoders new ``TableDecoder``s use: the native core, generated Python, or none
(the reference loop only); None: the native core when it is available (``default_decoders``).
Tests set it to compare every path with the reference."""


def default_decoders() -> RowDecoders:
    if ROW_DECODERS is not None:
        return ROW_DECODERS
    return "native" if native.available() else "python"


@dataclass(frozen=True, slots=True)
class RowLayout:
    """Decoders for one set of present columns."""

    column_count: int
    present: tuple[int, ...]
    decoders: tuple[ColumnDecoder, ...]
    null_bytes: int
    template: tuple[object, ...]  # ABSENT everywhere, copied per row
    plans: tuple[ColumnPlan, ...] | None = None  # every column's; None: no fast decoders
    fast: RowDecoders = "python"  # which fast decoders, when plans are given
    _rows: list[RowsDecoder] = field(default_factory=list, compare=False, repr=False)
    _pairs: dict[tuple[int, ...], PairsDecoder] = field(
        default_factory=dict, compare=False, repr=False
    )

    def rows_decoder(self) -> RowsDecoder | None:
        """The fast decoder of insert/delete images (built on first use)."""
        if self.plans is None:
            return None
        if not self._rows:
            if self.fast == "native":
                decoder: RowsDecoder = native.row_spec(self.plans, self.present)
            else:
                decoder = compile_rows(self.plans, self.present, self.null_bytes)
            self._rows.append(decoder)
        return self._rows[0]

    def pairs_decoder(self, after: RowLayout) -> PairsDecoder | None:
        """The fast decoder of update images, this layout before and ``after`` after."""
        if self.plans is None:
            return None
        found = self._pairs.get(after.present)
        if found is None:
            if self.fast == "native":
                found = native.pair_spec(self.rows_decoder(), after.rows_decoder())
            else:
                found = compile_pairs(
                    self.plans, (self.present, self.null_bytes), (after.present, after.null_bytes)
                )
            self._pairs[after.present] = found
        return found

    def decode(self, buf: bytes, pos: int) -> tuple[RowImage, int]:
        """Decode one row image starting at ``pos``."""
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
    plans: tuple[ColumnPlan, ...] | None = None  # None: reference decoders only
    fast: RowDecoders = "python"
    _layouts: dict[int, RowLayout] = field(default_factory=dict)
    _lane: list[object] = field(default_factory=list)  # [the ColumnSpec or None], once known

    def lane(self, factory: LaneFactory) -> object | None:
        """The columnar lane's decoder of full images (``sink.lane``), built once."""
        if not self._lane:
            plans = self.plans or tuple(build_plan(c) for c in self.columns)
            self._lane.append(factory(self.columns, plans))
        return self._lane[0]

    @classmethod
    def build(
        cls, columns: tuple[ColumnDef, ...], *, decoders: RowDecoders | None = None
    ) -> TableDecoder:
        plans = tuple(build_plan(c) for c in columns)
        fast = default_decoders() if decoders is None else decoders
        if fast == "native" and not native.available():
            raise RuntimeError(f"the native row decoders are not available: {native.unavailable()}")
        kept = None if fast == "reference" else plans
        return cls(columns, tuple(p.decode for p in plans), kept, fast)

    def layout(self, present_bits: int) -> RowLayout:
        found = self._layouts.get(present_bits)
        if found is None:
            n = len(self.columns)
            present = tuple(i for i in range(n) if present_bits >> i & 1)
            found = RowLayout(
                column_count=n,
                present=present,
                decoders=tuple(self.decoders[i] for i in present),
                null_bytes=(len(present) + 7) // 8,
                template=(ABSENT,) * n,
                plans=self.plans,
                fast=self.fast,
            )
            self._layouts[present_bits] = found
        return found


def decode_images(
    buf: bytes,
    pos: int,
    layout: RowLayout,
    after_layout: RowLayout | None,
    after_hook: Callable[[bytes, int, RowImage], tuple[RowImage, int]] | None = None,
) -> tuple[tuple[RowImage, ...], tuple[RowImage, ...]]:
    """Decode every row image from ``pos`` to the end of ``buf``.

    For updates, images alternate before/after. ``after_hook``, when given, decodes the after
    image itself (PARTIAL_UPDATE_ROWS needs the before image to apply JSON diffs).
    """
    end = len(buf)
    rows: list[RowImage] = []
    afters: list[RowImage] = []
    if pos < end and not layout.present and (after_layout is None or not after_layout.present):
        # an image of no columns takes no bytes: the bytes left over cannot be row images
        raise DecodeError(f"{end - pos} bytes of row images for a row image of no columns")
    if after_hook is None:
        done = False
        if after_layout is None:
            fast = layout.rows_decoder()
            if fast is not None:
                pos, done = fast(buf, pos, end, rows)
        else:
            pairs = layout.pairs_decoder(after_layout)
            if pairs is not None:
                pos, done = pairs(buf, pos, end, rows, afters)
        if done:
            return tuple(rows), tuple(afters)
    # The reference loop: everything without a fast decoder, and from the first row the fast
    # one could not decode (it raises the error the fast decoder does not).
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
    return tuple(rows), tuple(afters)
