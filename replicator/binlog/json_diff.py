"""JSON diffs of PARTIAL_UPDATE_ROWS events: decode them and apply them to the before image.

With ``binlog_row_value_options=PARTIAL_JSON`` a MySQL 8.0+ server logs an UPDATE that only
ran ``JSON_SET``/``JSON_REPLACE``/``JSON_REMOVE`` on a JSON column as a PARTIAL_UPDATE_ROWS
event (type 39) whose after image carries, for that column, a list of changes against the
before image instead of the whole document. Other tools dropped these rows silently; ours
decodes them.

Row image layout (mysql-server ``sql/rpl_record.cc``: ``pack_row``, ``pack_field``,
``start_partial_bit_reader``; ``sql/log_event.cc``: ``Rows_log_event::print_verbose_one_row``).
The event body is that of UPDATE_ROWS v2 (table id, flags, extra info, column count, the
before-image and after-image column bitmaps); each row is a before image, then an after
image:

* Before image: exactly as in UPDATE_ROWS (null bitmap over the columns set in the
  before-image bitmap, then their values). No extra fields.
* After image: first ``value_options``, a length-encoded integer (``net_field_length``; the
  server only accepts 0 or 1; bit 0 = PARTIAL_JSON_UPDATES). It is 0 when no JSON column of
  this row was logged as a diff.
* Only if ``value_options & 1``: ``partial_bits``, ``(json_column_count + 7) // 8`` bytes,
  one bit per JSON column of the *table* (every column whose TABLE_MAP type is JSON (245),
  in column order, whether or not it is in the after-image bitmap), least significant bit
  of the first byte first. A set bit means that column's after-image value is a diff.
* Then, as usual, the null bitmap over the columns set in the after-image bitmap, and the
  values of the non-null ones.
* A JSON column whose partial bit is set holds a diff vector instead of a document
  (``Json_diff_vector::write_binary``, ``Json_diff_vector::read_binary`` in
  ``sql/json_diff.cc``): a 4-byte little-endian length L (the same 4-byte prefix a full
  JSON value has), then L bytes of diffs, each:

  - operation, 1 byte: 0 REPLACE, 1 INSERT, 2 REMOVE (``enum_json_diff_operation``);
  - path length, length-encoded integer, then the path as text (``Json_path::to_string``,
    e.g. ``$.a[2]."key with space"``);
  - unless REMOVE: value length, length-encoded integer, then a binary JSON document
    (``json_binary.py``).

The diffs apply to the column's value in the before image, so the before image must hold
that column. With ``binlog_row_image=MINIMAL`` it holds only the key (seen in real 8.0.22
files), and a stateless decoder cannot rebuild the document: ``decode_partial_after_image``
(the row decoder's hook for the after image) then stops with a DecodeError that says so.

Semantics (``apply_json_diffs`` and ``seek_exact_path`` in ``sql/json_diff.cc``): paths have
no wildcards and are never just ``$``; REPLACE needs the path to exist; INSERT needs the
parent to exist and, in an object, the member to be absent (the member is placed where the
server's ``Json_object`` keeps it: keys ordered by length, then bytes), in an array it
inserts at the index clamped to the array's size; REMOVE needs the path to exist. A diff the
server would reject raises ``DecodeError``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from enum import IntEnum
from typing import TYPE_CHECKING, NoReturn

from .constants import ColumnType
from .errors import DecodeError
from .json_binary import JsonValue, decode_json_value, json_to_text
from .schema import ColumnDef
from .values import ABSENT

if TYPE_CHECKING:
    from .rows import RowImage, RowLayout

__all__ = [
    "JsonDiff",
    "JsonDiffOperation",
    "JsonPathLeg",
    "apply_json_diffs",
    "decode_json_diffs",
    "decode_partial_after_image",
    "decode_partial_json_header",
    "parse_json_path",
]

PARTIAL_JSON_UPDATES = 1


class JsonDiffOperation(IntEnum):
    """``enum_json_diff_operation`` (sql/json_diff.h)."""

    REPLACE = 0
    INSERT = 1
    REMOVE = 2


@dataclass(frozen=True, slots=True)
class JsonDiff:
    """One change to a JSON document. ``value`` is None for REMOVE (and for a JSON null)."""

    operation: JsonDiffOperation
    path: str
    value: JsonValue = None


# A path leg: a member name (str) or an array index (int). Non-negative indexes count from
# the start; -1 is ``[last]``, -(n + 1) is ``[last-n]``.
JsonPathLeg = str | int


def decode_partial_json_header(
    data: bytes, pos: int, json_column_count: int
) -> tuple[int, tuple[bool, ...], int]:
    """Read ``value_options`` and ``partial_bits`` at the start of a PARTIAL_UPDATE_ROWS
    after image. Returns (value_options, one flag per JSON column of the table, new pos).

    The flags are all False when value_options has no PARTIAL_JSON_UPDATES bit (then no
    partial_bits bytes are present).
    """
    value_options, pos = _read_lenenc(data, pos, len(data), "value_options")
    if value_options > PARTIAL_JSON_UPDATES:
        raise DecodeError(f"PARTIAL_UPDATE_ROWS value_options {value_options} is not 0 or 1")
    if not value_options & PARTIAL_JSON_UPDATES:
        return value_options, (False,) * json_column_count, pos
    nbytes = (json_column_count + 7) // 8
    if pos + nbytes > len(data):
        raise DecodeError("PARTIAL_UPDATE_ROWS partial_bits truncated")
    bits = tuple(bool(data[pos + i // 8] >> (i % 8) & 1) for i in range(json_column_count))
    return value_options, bits, pos + nbytes


def decode_partial_after_image(
    data: bytes,
    pos: int,
    before: RowImage,
    layout: RowLayout,
    columns: Sequence[ColumnDef],
) -> tuple[RowImage, int]:
    """Decode one PARTIAL_UPDATE_ROWS after image starting at ``pos`` (at value_options).

    Columns whose partial bit is set get their diffs applied to the same column of
    ``before`` (canonical JSON text, as the JSON column decoder produces it) and come out as
    canonical text too; every other column is decoded by ``layout`` as usual. When the before
    image lacks the column (binlog_row_image=MINIMAL) the diffs cannot be applied here and the
    column holds ``UnappliedJsonDiffs``; a diff against SQL NULL raises DecodeError.
    """
    json_columns = [i for i, col in enumerate(columns) if col.type == ColumnType.JSON]
    _, bits, pos = decode_partial_json_header(data, pos, len(json_columns))
    partial = {index for index, bit in zip(json_columns, bits, strict=True) if bit}
    if not partial:
        return layout.decode(data, pos)
    nulls = int.from_bytes(data[pos : pos + layout.null_bytes], "little")
    pos += layout.null_bytes
    row = list(layout.template)
    bit = 1
    for index, decoder in zip(layout.present, layout.decoders, strict=True):
        if nulls & bit:
            row[index] = None
        elif index in partial:
            diffs, pos = decode_json_diffs(data, pos)
            if before[index] is ABSENT:
                row[index] = UnappliedJsonDiffs(tuple(diffs))
            else:
                row[index] = json_to_text(apply_json_diffs(_before_document(before, index), diffs))
        else:
            row[index], pos = decoder(data, pos)
        bit <<= 1
    return tuple(row), pos


@dataclass(frozen=True, slots=True)
class UnappliedJsonDiffs:
    """A JSON column logged as diffs (PARTIAL_JSON) whose before image was not logged
    (binlog_row_image=MINIMAL): the new document cannot be computed from the binlog alone.
    Consumers that need the full value must stop or look the row up; never drop it."""

    diffs: tuple[JsonDiff, ...]


def _before_document(before: RowImage, index: int) -> JsonValue:
    value = before[index] if index < len(before) else ABSENT
    if value is ABSENT:
        raise DecodeError(
            f"column {index + 1} is logged as a JSON diff but its before image is missing",
            hint=(
                "PARTIAL_JSON updates need the JSON column in the before image: set "
                "binlog_row_image=FULL, or binlog_row_value_options='' on the source"
            ),
        )
    if not isinstance(value, str):
        raise DecodeError(f"column {index + 1} is logged as a JSON diff against SQL NULL")
    return _text_to_tree(value)


def _number(text: str) -> float | Decimal:
    # Canonical text prints decimals without exponent and doubles as repr(); a repr without
    # an exponent reads back as a Decimal that prints the same digits. Either way the text
    # of every untouched number is kept exactly.
    return float(text) if "e" in text or "E" in text else Decimal(text)


def _text_to_tree(text: str) -> JsonValue:
    """Canonical text (``json_to_text``) back to a tree that prints as the same text."""
    try:
        tree: JsonValue = json.loads(text, parse_float=_number)
    except json.JSONDecodeError as exc:
        raise DecodeError(f"before image is not JSON text: {exc.msg}") from None
    return tree


def decode_json_diffs(data: bytes, pos: int) -> tuple[list[JsonDiff], int]:
    """Decode the diff vector of one partial JSON column starting at ``pos`` (at its 4-byte
    length). Returns the diffs and the position just after them."""
    if pos + 4 > len(data):
        raise DecodeError("JSON diff vector length truncated")
    length = int.from_bytes(data[pos : pos + 4], "little")
    pos += 4
    end = pos + length
    if end > len(data):
        raise DecodeError(
            f"JSON diff vector of {length} bytes exceeds the {len(data) - pos} available"
        )
    diffs: list[JsonDiff] = []
    while pos < end:
        op_byte = data[pos]
        if op_byte > JsonDiffOperation.REMOVE:
            raise DecodeError(f"JSON diff has unknown operation {op_byte}")
        operation = JsonDiffOperation(op_byte)
        pos += 1
        path_length, pos = _read_lenenc(data, pos, end, "JSON diff path length")
        if pos + path_length > end:
            raise DecodeError("JSON diff path exceeds its diff vector")
        try:
            path = data[pos : pos + path_length].decode("utf-8")
        except UnicodeDecodeError:
            raise DecodeError("JSON diff path is not valid UTF-8") from None
        pos += path_length
        try:
            parse_json_path(path)
        except ValueError as exc:
            raise DecodeError(f"JSON diff path {path!r} is invalid: {exc}") from None
        value: JsonValue = None
        if operation != JsonDiffOperation.REMOVE:
            value_length, pos = _read_lenenc(data, pos, end, "JSON diff value length")
            if pos + value_length > end:
                raise DecodeError("JSON diff value exceeds its diff vector")
            value = decode_json_value(data[pos : pos + value_length])
            pos += value_length
        diffs.append(JsonDiff(operation, path, value))
    return diffs, end


def _read_lenenc(data: bytes, pos: int, end: int, what: str) -> tuple[int, int]:
    """net_field_length: <251 is the value; 252/253/254 prefix a 2/3/8-byte integer."""
    if pos >= end:
        raise DecodeError(f"{what} truncated")
    first = data[pos]
    if first < 251:
        return first, pos + 1
    size = {252: 2, 253: 3, 254: 8}.get(first)
    if size is None:
        raise DecodeError(f"{what} has invalid length-encoded prefix 0x{first:02x}")
    if pos + 1 + size > end:
        raise DecodeError(f"{what} truncated")
    return int.from_bytes(data[pos + 1 : pos + 1 + size], "little"), pos + 1 + size


# --------------------------------------------------------------------------- paths


def parse_json_path(path: str) -> tuple[JsonPathLeg, ...]:
    """Parse a seekable MySQL JSON path (sql/json_path.cc, ``parse_path``): ``$`` followed by
    ``.name``, ``."quoted name"``, ``[n]``, ``[last]`` or ``[last-n]`` legs. Wildcards and
    ranges are rejected (ValueError): they never appear in a diff."""
    i = _skip_ws(path, 0)
    if not path.startswith("$", i):
        raise ValueError("path does not start with '$'")
    i += 1
    legs: list[JsonPathLeg] = []
    while True:
        i = _skip_ws(path, i)
        if i == len(path):
            return tuple(legs)
        leg: JsonPathLeg
        if path[i] == ".":
            leg, i = _parse_member(path, _skip_ws(path, i + 1))
        elif path[i] == "[":
            leg, i = _parse_cell(path, _skip_ws(path, i + 1))
        else:
            raise ValueError(f"unexpected {path[i]!r} at {i}")
        legs.append(leg)


def _skip_ws(path: str, i: int) -> int:
    while i < len(path) and path[i].isspace():
        i += 1
    return i


def _parse_member(path: str, i: int) -> tuple[str, int]:
    if i < len(path) and path[i] == '"':
        j = i + 1
        while j < len(path) and path[j] != '"':
            j += 2 if path[j] == "\\" else 1
        if j >= len(path):
            raise ValueError("unterminated quoted member name")
        try:
            name = json.loads(path[i : j + 1])
        except json.JSONDecodeError as exc:
            raise ValueError(f"bad quoted member name: {exc.msg}") from None
        assert isinstance(name, str)
        return name, j + 1
    j = i
    while j < len(path) and not path[j].isspace() and path[j] not in '.["':
        j += 1
    name = path[i:j]
    if not name or "*" in name or "]" in name:
        raise ValueError(f"bad member name at {i}")
    return name, j


def _parse_cell(path: str, i: int) -> tuple[int, int]:
    if path.startswith("last", i):
        i = _skip_ws(path, i + 4)
        back = 0
        if i < len(path) and path[i] == "-":
            back, i = _parse_number(path, _skip_ws(path, i + 1))
        index = -(back + 1)
    else:
        index, i = _parse_number(path, i)
    i = _skip_ws(path, i)
    if i >= len(path) or path[i] != "]":
        raise ValueError(f"expected ']' at {i}")
    return index, i + 1


def _parse_number(path: str, i: int) -> tuple[int, int]:
    j = i
    while j < len(path) and path[j] in "0123456789":
        j += 1
    if j == i:
        raise ValueError(f"expected an array index at {i}")
    return int(path[i:j]), j


# --------------------------------------------------------------------------- applying


def apply_json_diffs(before: JsonValue, diffs: list[JsonDiff]) -> JsonValue:
    """Return the document the diffs make of ``before`` (which is left unchanged)."""
    doc = _copy(before)
    for diff in diffs:
        legs = parse_json_path(diff.path)
        if not legs:
            _reject(diff, "the root cannot be the target of a diff")
        if diff.operation == JsonDiffOperation.REPLACE:
            parent = _seek(doc, legs[:-1], diff)
            _replace(parent, legs[-1], _copy(diff.value), diff)
        elif diff.operation == JsonDiffOperation.INSERT:
            parent = _seek(doc, legs[:-1], diff)
            _insert(parent, legs[-1], _copy(diff.value), diff)
        else:
            parent = _seek(doc, legs[:-1], diff)
            _remove(parent, legs[-1], diff)
    return doc


def _reject(diff: JsonDiff, why: str) -> NoReturn:
    raise DecodeError(f"JSON diff {diff.operation.name} {diff.path} cannot be applied: {why}")


def _copy(value: JsonValue) -> JsonValue:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _array_position(leg: int, size: int) -> tuple[int, bool]:
    """Json_array_index: (position, within bounds)."""
    if leg >= 0:
        return min(leg, size), leg < size
    back = -leg - 1
    return (size - back - 1 if back < size else 0), back < size


def _seek(doc: JsonValue, legs: tuple[JsonPathLeg, ...], diff: JsonDiff) -> JsonValue:
    """seek_exact_path: follow member and cell legs without auto-wrapping."""
    node = doc
    for leg in legs:
        if isinstance(node, dict) and isinstance(leg, str):
            if leg not in node:
                _reject(diff, f"member {leg!r} not found")
            node = node[leg]
        elif isinstance(node, list) and isinstance(leg, int):
            pos, inside = _array_position(leg, len(node))
            if not inside:
                _reject(diff, f"array index {leg} out of range")
            node = node[pos]
        else:
            _reject(diff, "path does not match the document")
    return node


def _replace(parent: JsonValue, leg: JsonPathLeg, value: JsonValue, diff: JsonDiff) -> None:
    if isinstance(parent, dict) and isinstance(leg, str):
        if leg not in parent:
            _reject(diff, f"member {leg!r} not found")
        parent[leg] = value
    elif isinstance(parent, list) and isinstance(leg, int):
        pos, inside = _array_position(leg, len(parent))
        if not inside:
            _reject(diff, f"array index {leg} out of range")
        parent[pos] = value
    else:
        _reject(diff, "path does not match the document")


def _insert(parent: JsonValue, leg: JsonPathLeg, value: JsonValue, diff: JsonDiff) -> None:
    if isinstance(parent, dict) and isinstance(leg, str):
        if leg in parent:
            _reject(diff, f"member {leg!r} already exists")
        parent[leg] = value
        ordered = sorted(parent.items(), key=lambda kv: _key_order(kv[0]))
        parent.clear()
        parent.update(ordered)
    elif isinstance(parent, list) and isinstance(leg, int):
        pos, _ = _array_position(leg, len(parent))
        parent.insert(pos, value)
    else:
        _reject(diff, "path does not match the document")


def _remove(parent: JsonValue, leg: JsonPathLeg, diff: JsonDiff) -> None:
    if isinstance(parent, dict) and isinstance(leg, str):
        if leg not in parent:
            _reject(diff, f"member {leg!r} not found")
        del parent[leg]
    elif isinstance(parent, list) and isinstance(leg, int):
        pos, inside = _array_position(leg, len(parent))
        if not inside:
            _reject(diff, f"array index {leg} out of range")
        del parent[pos]
    else:
        _reject(diff, "path does not match the document")


def _key_order(key: str) -> tuple[int, bytes]:
    """Json_key_comparator: shorter keys first, then byte order."""
    raw = key.encode("utf-8")
    return len(raw), raw
