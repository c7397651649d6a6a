"""Compiled row decoders: one generated Python function per table map and row layout.

The reference row loop (``RowLayout.decode``) calls one decoder closure per value; at a few
million values per second the calls, the ``(value, offset)`` tuples and the loop itself cost
more than the decoding. Here the ``ColumnPlan``s of a layout's columns are turned, once per
TABLE_MAP and presence bitmap, into the source of a function that decodes every row image of
a rows event in one loop (``namedtuple`` and ``dataclasses`` build their methods the same
way):

* the NULL bitmap is read once per row and tested with constant masks;
* a run of fixed-width columns (integers, floats, DECIMAL, DATE, DATETIME2...) with no NULL
  among them in this row is read with one precompiled ``struct`` format;
* DECIMAL and temporal values go through their per-column ``FixedMemo`` (a dict hit for
  repeated values); length-prefixed text and bytes are sliced and decoded inline;
* other types call their reference decoder.

Only integers and names made here appear in the generated source; every object the code uses
(struct unpackers, caches, codecs, labels) is passed in as a closure variable, never spelled
out in the source.

The compiled code is a fast path, not a second definition of the formats: it raises nothing.
When a row does not decode (truncated, invalid text, an ENUM index out of range, anything), it
returns the row's start offset and ``False``, and the caller decodes from that row on with the
reference decoders, which raise the error with its exact message. A row image that runs past
the end of the event is detected after the row, since slicing never fails.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

from .charsets import decode_mysql_latin1
from .columns import MEMO_LIMIT, ColumnPlan
from .values import ABSENT

__all__ = ["PairsDecoder", "RowsDecoder", "compile_pairs", "compile_rows"]

# (buf, pos, end, out) -> (pos, ok): appends every image from pos to end to out.
RowsDecoder = Callable[[bytes, int, int, list[Any]], tuple[int, bool]]
# (buf, pos, end, before_out, after_out) -> (pos, ok): update images, before then after.
PairsDecoder = Callable[[bytes, int, int, list[Any], list[Any]], tuple[int, bool]]

_RUN_KINDS = frozenset({"struct", "memo"})


class _Source:
    """Lines of generated code plus the objects they refer to by name."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.names: dict[str, object] = {"ABSENT": ABSENT}
        self._known: dict[object, str] = {}

    def name(self, prefix: str, value: object) -> str:
        """A closure variable holding ``value`` (one per distinct value)."""
        try:
            key: object = (hash(value), value)
        except TypeError:  # a dict: by identity (``names`` keeps it alive)
            key = id(value)
        found = self._known.get(key)
        if found is None:
            found = f"{prefix}{len(self.names)}"
            self.names[found] = value
            self._known[key] = found
        return found

    def add(self, indent: int, *lines: str) -> None:
        self.lines.extend("    " * indent + line for line in lines)


def _null_bits(null_bytes: int) -> str:
    if null_bytes == 0:
        return "0"
    if null_bytes <= 3:
        return " | ".join(
            "buf[pos]" if i == 0 else f"buf[pos + {i}] << {8 * i}" for i in range(null_bytes)
        )
    return f"int.from_bytes(buf[pos:pos + {null_bytes}], 'little')"


def _length(width: int, src: _Source) -> str:
    """Expression for a ``width``-byte little-endian length that starts at ``s - width``."""
    if width == 4:
        unpack = src.name("u", struct.Struct("<I").unpack_from)
        return f"{unpack}(buf, s - 4)[0]"
    return " | ".join(f"buf[s - {width - i}]" + (f" << {8 * i}" if i else "") for i in range(width))


def _value(plan: ColumnPlan, var: str, src: _Source, indent: int) -> None:
    """Code reading one non-NULL value at ``pos`` into ``var`` and advancing ``pos``."""
    kind = plan.kind
    if kind == "struct":
        if plan.fmt == "B":
            src.add(indent, f"{var} = buf[pos]")
        else:
            unpack = src.name("u", struct.Struct("<" + plan.fmt).unpack_from)
            src.add(indent, f"{var} = {unpack}(buf, pos)[0]")
        src.add(indent, f"pos += {plan.width}")
    elif kind == "memo":
        src.add(indent, f"r = buf[pos:pos + {plan.width}]", f"pos += {plan.width}")
        _memo(plan, var, "r", src, indent, check=True)
    elif kind == "data":
        src.add(indent, f"s = pos + {plan.width}", f"pos = s + ({_length(plan.width, src)})")
        data = "buf[s:pos]"
        if plan.text is decode_mysql_latin1:  # its ASCII fast path, without the call
            text = src.name("t", plan.text)
            src.add(
                indent, f"r = {data}", f"{var} = r.decode('ascii') if r.isascii() else {text}(r)"
            )
            return
        if plan.text is not None:
            data = f"{src.name('t', plan.text)}({data})"
        elif plan.pad:
            data = f"{data}.ljust({plan.pad}, b'\\x00')"
        src.add(indent, f"{var} = {data}")
    elif kind == "enum":
        labels = src.name("l", plan.labels)
        index = "buf[pos]" if plan.width == 1 else "buf[pos] | buf[pos + 1] << 8"
        src.add(indent, f"{var} = {labels}[{index}]", f"pos += {plan.width}")
    elif kind == "year":
        src.add(indent, f"{var} = buf[pos]", "pos += 1", f"if {var}:", f"    {var} += 1900")
    else:
        call = src.name("c", plan.decode)
        src.add(indent, f"{var}, pos = {call}(buf, pos)")


def _memo(
    plan: ColumnPlan, var: str, raw: str, src: _Source, indent: int, *, check: bool = False
) -> None:
    """Code converting the bytes in ``raw`` through the column's ``FixedMemo``: its cache
    lookup, else its converter, cached (``FixedMemo.miss`` without the call). With ``check``
    (bytes sliced, not unpacked), a slice cut short by the end of the event is never
    converted or cached: the reference decoders share the cache."""
    memo = plan.memo
    assert memo is not None
    cache = src.name("k", memo.cache)
    src.add(indent, f"{var} = {src.name('g', memo.get)}({raw})", f"if {var} is None:")
    if check:
        src.add(indent + 1, f"if len({raw}) != {plan.width}:", "    return start, False")
    src.add(
        indent,
        f"    {var} = {src.name('c', memo.convert)}({raw})",
        f"    if len({cache}) >= {MEMO_LIMIT}:",
        f"        {cache}.clear()",
        f"    {cache}[{raw}] = {var}",
    )


def _column(plan: ColumnPlan, var: str, bit: int, src: _Source, indent: int) -> None:
    src.add(indent, f"if nulls & {bit:#x}:", f"    {var} = None", "else:")
    _value(plan, var, src, indent + 1)


def _run(members: list[tuple[ColumnPlan, str, int]], src: _Source, indent: int) -> None:
    """A run of fixed-width columns: one struct read when none of them is NULL."""
    mask = 0
    fmt = "<"
    width = 0
    for plan, _, bit in members:
        mask |= bit
        fmt += plan.fmt if plan.kind == "struct" else f"{plan.width}s"
        width += plan.width
    unpack = src.name("u", struct.Struct(fmt).unpack_from)
    targets = [var if plan.kind == "struct" else "r" + var for plan, var, _ in members]
    src.add(indent, f"if nulls & {mask:#x}:")
    for plan, var, bit in members:
        _column(plan, var, bit, src, indent + 1)
    src.add(
        indent, "else:", f"    {', '.join(targets)} = {unpack}(buf, pos)", f"    pos += {width}"
    )
    for plan, var, _ in members:
        if plan.kind == "memo":
            _memo(plan, var, "r" + var, src, indent + 1)


def _image(
    plans: Sequence[ColumnPlan], present: Sequence[int], null_bytes: int, src: _Source, indent: int
) -> str:
    """Code decoding one row image at ``pos``; returns the expression of its tuple."""
    src.add(indent, f"nulls = {_null_bits(null_bytes)}", f"pos += {null_bytes}")
    pending: list[tuple[ColumnPlan, str, int]] = []

    def flush() -> None:
        if len(pending) >= 2:
            _run(pending, src, indent)
        else:
            for plan, var, bit in pending:
                _column(plan, var, bit, src, indent)
        pending.clear()

    for k, index in enumerate(present):
        plan = plans[index]
        member = (plan, f"v{index}", 1 << k)
        if plan.kind in _RUN_KINDS:
            pending.append(member)
        else:
            flush()
            _column(*member, src, indent)
    flush()
    shown = set(present)
    values = [f"v{i}" if i in shown else "ABSENT" for i in range(len(plans))]
    return "(" + ", ".join(values) + ("," if len(values) == 1 else "") + ")"


def _build(src: _Source, name: str) -> Any:
    params = ", ".join(src.names)
    code = "\n".join([f"def _factory({params}):", *src.lines, f"    return {name}"])
    namespace: dict[str, Any] = {}
    exec(compile(code, f"<rowcode {name}>", "exec"), namespace)  # generated: see module doc
    return namespace["_factory"](**src.names)


def compile_rows(
    plans: Sequence[ColumnPlan], present: Sequence[int], null_bytes: int
) -> RowsDecoder:
    """The decoder of insert/delete images with the columns ``present``."""
    src = _Source()
    src.add(
        1,
        "def rows(buf, pos, end, out):",
        "    append = out.append",
        "    start = pos",
        "    try:",
        "        while pos < end:",
        "            start = pos",
    )
    image = _image(plans, present, null_bytes, src, 4)
    src.add(
        4,
        "if pos > end:",
        "    return start, False",
        f"append({image})",
    )
    src.add(1, "    except Exception:", "        return start, False", "    return pos, True")
    decoder: RowsDecoder = _build(src, "rows")
    return decoder


def compile_pairs(
    plans: Sequence[ColumnPlan],
    before: tuple[Sequence[int], int],
    after: tuple[Sequence[int], int],
) -> PairsDecoder:
    """The decoder of update images: (present columns, NULL bitmap bytes) before and after."""
    src = _Source()
    src.add(
        1,
        "def pairs(buf, pos, end, out, out_after):",
        "    append = out.append",
        "    append_after = out_after.append",
        "    start = pos",
        "    try:",
        "        while pos < end:",
        "            start = pos",
    )
    image = _image(plans, before[0], before[1], src, 4)
    src.add(4, f"before = {image}")
    image = _image(plans, after[0], after[1], src, 4)
    src.add(
        4,
        "if pos > end:",
        "    return start, False",
        "append(before)",
        f"append_after({image})",
    )
    src.add(1, "    except Exception:", "        return start, False", "    return pos, True")
    decoder: PairsDecoder = _build(src, "pairs")
    return decoder
