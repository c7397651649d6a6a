"""A block: the row images of one rows event, column by column (the one decoded form).

Every rows event is decoded into a ``Block`` (``rows.TableDecoder.decode``), and a snapshot chunk
becomes one too (``Block.from_rows``), so everything downstream handles rows one way: the
pipeline numbers a block's rows as one ``_seq`` range and projects its columns, the sink
turns its vectors into Arrow arrays.

A block holds, for each column of the table, one ``Vector`` of its values in row order:

* native buffers ``(set, values, lengths)``, for the common types when the native core is
  built: ``set`` one byte per row (1: a value, 0: NULL), ``values`` the values one after the
  other (fixed-width little-endian, or the bytes of variable-length ones), ``lengths`` a
  4-byte little-endian length per row for variable-length kinds (None otherwise). The
  column's ``NativeKind`` (``natives``) says how to read them;
* a list of the decoder's values (``columns.py``), for every other column, for a column of a
  common type holding a value its buffers cannot (a zero date, text that is not UTF-8...),
  and for every column when the core is not built or the caller asked for objects;
* None: the column is not in the image (``binlog_row_image=MINIMAL/NOBLOB``).

Inserts hold their new rows in ``columns``, deletes their old rows, updates their before
images in ``columns`` and their after images in ``after``.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from itertools import repeat
from typing import Union, cast

from .records import record
from .values import ABSENT

NativeBuffers = tuple[bytes, bytes, bytes | None]
Vector = Union[NativeBuffers, list[object]]  # noqa: UP007 - a runtime alias
Vectors = tuple[Vector | None, ...]
# How native buffers are laid out: ("int", byte width, signed), ("float", 4 | 8, 0),
# ("decimal128", precision, scale), ("date32" | "timestamp" | "timestamp_utc" |
# "duration" | "utf8" | "binary", 0, 0); dates are days and times microseconds since
# 1970-01-01 (durations: microseconds), timestamp_utc in UTC.
NativeKind = tuple[str, int, int]

FIXED_WIDTH = {"date32": 4, "timestamp": 8, "timestamp_utc": 8, "duration": 8}
VARIABLE = frozenset({"utf8", "binary"})


def value_width(kind: NativeKind) -> int:
    """Bytes per value of a fixed-width kind; 0 for variable-length ones."""
    name, width, _ = kind
    if name in ("int", "float"):
        return width
    if name == "decimal128":
        return 16
    return FIXED_WIDTH.get(name, 0)


@record
class Block:
    """The row images of one rows event or snapshot chunk (see the module doc)."""

    count: int
    columns: Vectors
    after: Vectors | None  # updates only
    natives: tuple[NativeKind | None, ...]  # per column: the kind its buffers have

    @classmethod
    def from_rows(cls, rows: Sequence[tuple[object, ...]], width: int) -> Block:
        """A block of row tuples (a snapshot chunk): one list per column."""
        if rows:
            columns: Vectors = tuple(list(values) for values in zip(*rows, strict=True))
        else:
            columns = tuple([] for _ in range(width))
        return cls(len(rows), columns, None, (None,) * width)

    @property
    def values(self) -> Vectors:
        """The images that land as the row's columns: the after images of updates."""
        return self.columns if self.after is None else self.after

    @property
    def before(self) -> Vectors | None:
        """Update before images (None for inserts and deletes)."""
        return None if self.after is None else self.columns

    def project(self, keep: Sequence[int]) -> Block:
        """Only the columns ``keep`` (indexes), in that order."""
        return Block(
            self.count,
            tuple(self.columns[i] for i in keep),
            None if self.after is None else tuple(self.after[i] for i in keep),
            tuple(self.natives[i] for i in keep),
        )

    def slice(self, start: int, stop: int) -> Block:
        """Rows ``start`` to ``stop`` (a block too large to convert at once is halved)."""
        kinds = self.natives
        columns = tuple(_slice(v, k, start, stop) for v, k in zip(self.columns, kinds, strict=True))
        after = None
        if self.after is not None:
            after = tuple(_slice(v, k, start, stop) for v, k in zip(self.after, kinds, strict=True))
        return Block(stop - start, columns, after, self.natives)

    def has_buffers(self) -> bool:
        vectors = self.columns if self.after is None else self.columns + self.after
        return any(type(v) is tuple for v in vectors)


def _slice(vector: Vector | None, kind: NativeKind | None, start: int, stop: int) -> Vector | None:
    if vector is None:
        return None
    if type(vector) is list:
        return vector[start:stop]
    assert kind is not None
    found, values, lengths = cast(NativeBuffers, vector)
    if lengths is None:
        width = value_width(kind)
        return found[start:stop], values[start * width : stop * width], None
    sizes = array("i", lengths)  # the core writes them in the machine's order
    first = sum(sizes[:start])
    taken = sum(sizes[start:stop])
    return found[start:stop], values[first : first + taken], lengths[start * 4 : stop * 4]


def rows_of(vectors: Vectors, count: int) -> list[tuple[object, ...]]:
    """Row tuples of vectors that are all lists (or absent: ``ABSENT`` in every row)."""
    columns: list[Sequence[object]] = []
    for vector in vectors:
        if vector is None:
            columns.append(list(repeat(ABSENT, count)))
        elif type(vector) is list:
            columns.append(vector)
        else:
            raise TypeError("rows_of takes object vectors only (decode with objects=True)")
    if not columns:
        return [() for _ in range(count)]
    return list(zip(*columns, strict=True))
