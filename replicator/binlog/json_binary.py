"""MySQL binary JSON: decode a JSON column's value into a Python tree and into canonical text.

A JSON column's row image is a length prefix (its TABLE_MAP metadata, always 4 bytes) followed
by the document in MySQL's binary JSON format. That format is defined by mysql-server
``sql/json_binary.cc`` (the header comment at the top of the file, ``parse_binary``,
``parse_value``, ``parse_scalar``, ``parse_array_or_object``, ``read_variable_length`` and
``Value::element``/``Value::key``); the serializer ``serialize_json_value`` writes it. Layout:

* A document is one type byte followed by the value. Types: 0x00/0x01 small/large object,
  0x02/0x03 small/large array, 0x04 literal (0x00 null, 0x01 true, 0x02 false), 0x05 int16,
  0x06 uint16, 0x07 int32, 0x08 uint32, 0x09 int64, 0x0a uint64, 0x0b double, 0x0c utf8mb4
  string, 0x0f opaque. All integers are little-endian.
* A container starts with its element count and its size in bytes (both 2 bytes in the small
  format, 4 in the large), then for an object one key entry per member (offset of the key
  in the same 2/4 bytes, key length in 2 bytes), then one value entry per element (a type
  byte, then an offset or, for small enough scalars, the value itself "inlined" in the
  2/4-byte field: literals, int16 and uint16 always, int32 and uint32 in the large format).
  Offsets count from the first byte after the container's type byte (the element count).
* The server writes keys and values right after the header, but a partial update done in
  place (MySQL 8.0 ``Json_wrapper::attempt_binary_update``) can leave unused gaps, so values
  are located by their offsets only, never by assuming they are contiguous.
* Strings and opaque payloads carry their length as a variable-length integer, seven bits
  per byte, least significant group first, high bit set on every byte but the last, at most
  five bytes (``read_variable_length``).
* An opaque value is a MySQL column type byte, a variable-length size, then the raw bytes.
  DECIMAL (246) holds precision, scale and the ``decimal2bin`` image (``strings/decimal.cc``;
  read back by ``Json_decimal::convert_from_binary`` in ``sql/json_dom.cc``). DATE, TIME,
  DATETIME and TIMESTAMP hold the 8-byte packed integer of ``TIME_to_longlong_*_packed``
  (``mysys/my_time.cc``; ``Json_datetime::from_packed``). Anything else is printed by MySQL
  as ``"base64:type<N>:<base64 of the bytes>"``.
* A zero-length value (stored by non-strict inserts of NULL into a NOT NULL JSON column)
  is read as the JSON ``null`` literal by ``parse_binary``; so is it here.

Text output follows MySQL's JSON printer (``Json_wrapper::to_string`` and
``wrapper_to_string`` in ``sql/json_dom.cc``) except that it is compact (no spaces after ``,``
and ``:``): decimals print as bare numbers with their scale, dates/times as quoted strings
with six fraction digits, and doubles in Python's shortest round-trip form.

The inverse, ``encode_json_value``, is the tests' (tests/encoders.py).
"""

from __future__ import annotations

import base64
import json
import math
import struct
from dataclasses import dataclass
from decimal import Decimal
from typing import TypeAlias

from .constants import ColumnType
from .errors import DecodeError

__all__ = [
    "JsonOpaque",
    "JsonValue",
    "decimal_from_bin",
    "decode_json_text",
    "decode_json_value",
    "json_to_text",
]


@dataclass(frozen=True, slots=True)
class JsonOpaque:
    """A MySQL-typed scalar inside a JSON document that JSON has no type for.

    ``mysql_type`` is the column type (``ColumnType``) the server recorded, ``data`` the raw
    bytes. DATE/TIME/DATETIME/TIMESTAMP print as MySQL prints them; any other type prints as
    ``base64:type<N>:<base64>``. (DECIMAL is decoded to ``decimal.Decimal`` instead.)
    """

    mysql_type: int
    data: bytes

    @property
    def text(self) -> str:
        """The string MySQL prints for this value (without the JSON quotes)."""
        return _opaque_text(self.mysql_type, self.data)


JsonValue: TypeAlias = (
    dict[str, "JsonValue"]
    | list["JsonValue"]
    | str
    | int
    | float
    | bool
    | Decimal
    | JsonOpaque
    | None
)

# Type bytes (json_binary.cc, JSONB_TYPE_*).
_SMALL_OBJECT = 0x00
_LARGE_OBJECT = 0x01
_SMALL_ARRAY = 0x02
_LARGE_ARRAY = 0x03
_LITERAL = 0x04
_INT16 = 0x05
_UINT16 = 0x06
_INT32 = 0x07
_UINT32 = 0x08
_INT64 = 0x09
_UINT64 = 0x0A
_DOUBLE = 0x0B
_STRING = 0x0C
_OPAQUE = 0x0F

_LITERAL_NULL = 0x00
_LITERAL_TRUE = 0x01
_LITERAL_FALSE = 0x02

# JSON_DOCUMENT_MAX_DEPTH is 100 in the server; allow some slack but bound the recursion.
_MAX_DEPTH = 200

_LARGE_MAX = 0xFFFFFFFF

_TEMPORAL_TYPES = frozenset(
    {ColumnType.DATE, ColumnType.TIME, ColumnType.DATETIME, ColumnType.TIMESTAMP}
)

# Bytes needed for 0..9 leftover decimal digits (strings/decimal.cc, dig2bytes).
_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
_DIGITS_PER_WORD = 9

_U16 = struct.Struct("<H")
_I16 = struct.Struct("<h")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_U64 = struct.Struct("<Q")
_I64 = struct.Struct("<q")
_F64 = struct.Struct("<d")


# --------------------------------------------------------------------------- decoding


def decode_json_value(data: bytes) -> JsonValue:
    """Decode one binary JSON document (the bytes after the column's length prefix)."""
    if len(data) == 0:
        return None  # parse_binary: an empty value is the JSON null literal
    return _Parser(data).value(data[0], 1, len(data), 0)


def decode_json_text(data: bytes) -> str:
    """Decode a binary JSON document straight to canonical JSON text."""
    return json_to_text(decode_json_value(data))


def _fail(message: str, offset: int) -> DecodeError:
    return DecodeError(f"malformed binary JSON: {message} (byte {offset} of the value)")


def _inlinable(type_: int, large: bool) -> bool:
    """Whether a value entry holds the value itself rather than its offset."""
    return type_ in (_LITERAL, _INT16, _UINT16) or (large and type_ in (_INT32, _UINT32))


class _Parser:
    """Walks one document. Every header, key and scalar it reads is charged to a budget of
    the document's size: in what the server writes they never overlap, so running out means
    crafted offsets that share subtrees (which could otherwise expand exponentially)."""

    __slots__ = ("budget", "buf")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.budget = len(buf)

    def value(self, type_: int, start: int, end: int, depth: int) -> JsonValue:
        """Parse the value of type ``type_`` at ``start``; it may not pass ``end``."""
        if type_ in (_SMALL_OBJECT, _LARGE_OBJECT, _SMALL_ARRAY, _LARGE_ARRAY):
            if depth >= _MAX_DEPTH:
                raise _fail(f"nesting deeper than {_MAX_DEPTH}", start)
            large = type_ in (_LARGE_OBJECT, _LARGE_ARRAY)
            return self.container(type_ in (_SMALL_OBJECT, _LARGE_OBJECT), large, start, end, depth)
        value, stop = _parse_scalar(type_, self.buf, start, end)
        self._charge(stop - start, start)
        return value

    def _charge(self, nbytes: int, offset: int) -> None:
        self.budget -= nbytes
        if self.budget < 0:
            raise _fail("values overlap (more bytes decoded than the document holds)", offset)

    def container(
        self, is_object: bool, large: bool, start: int, end: int, depth: int
    ) -> JsonValue:
        buf = self.buf
        osize = 4 if large else 2
        key_entry = osize + 2 if is_object else 0
        value_entry = 1 + osize
        if end - start < 2 * osize:
            raise _fail("container shorter than its count and size fields", start)
        if large:
            count, size = struct.unpack_from("<II", buf, start)
        else:
            count, size = struct.unpack_from("<HH", buf, start)
        if size > end - start:
            raise _fail(f"container size {size} exceeds the {end - start} bytes available", start)
        header = 2 * osize + count * (key_entry + value_entry)
        if header > size:
            raise _fail(f"{count} entries do not fit in a container of {size} bytes", start)
        self._charge(header, start)
        cend = start + size
        keys: list[str] = []
        pos = start + 2 * osize
        for _ in range(count if is_object else 0):
            koff = _U32.unpack_from(buf, pos)[0] if large else _U16.unpack_from(buf, pos)[0]
            klen = _U16.unpack_from(buf, pos + osize)[0]
            if koff < header or koff + klen > size:
                raise _fail(f"key at offset {koff} (length {klen}) outside its object", pos)
            self._charge(klen, pos)
            try:
                keys.append(buf[start + koff : start + koff + klen].decode("utf-8"))
            except UnicodeDecodeError:
                raise _fail("object key is not valid UTF-8", start + koff) from None
            pos += key_entry
        values: list[JsonValue] = []
        for _ in range(count):
            type_ = buf[pos]
            if _inlinable(type_, large):
                values.append(_inline_scalar(type_, buf, pos + 1))
            else:
                voff = (
                    _U32.unpack_from(buf, pos + 1)[0]
                    if large
                    else _U16.unpack_from(buf, pos + 1)[0]
                )
                if voff < header or start + voff >= cend:
                    raise _fail(f"value at offset {voff} outside its container", pos)
                values.append(self.value(type_, start + voff, cend, depth + 1))
            pos += value_entry
        if is_object:
            return dict(zip(keys, values, strict=True))
        return values


def _inline_scalar(type_: int, buf: bytes, pos: int) -> JsonValue:
    """The scalar stored in a value entry itself (``_inlinable`` said it is there)."""
    if type_ == _LITERAL:
        return _literal(buf[pos], pos)
    return int(_FIXED_SCALARS[type_].unpack_from(buf, pos)[0])


def _literal(byte: int, offset: int) -> JsonValue:
    if byte == _LITERAL_NULL:
        return None
    if byte == _LITERAL_TRUE:
        return True
    if byte == _LITERAL_FALSE:
        return False
    raise _fail(f"unknown literal 0x{byte:02x}", offset)


_FIXED_SCALARS: dict[int, struct.Struct] = {
    _INT16: _I16,
    _UINT16: _U16,
    _INT32: _I32,
    _UINT32: _U32,
    _INT64: _I64,
    _UINT64: _U64,
}


def _parse_scalar(type_: int, buf: bytes, start: int, end: int) -> tuple[JsonValue, int]:
    """Parse a scalar at ``start`` (not past ``end``); return it and where it stops."""
    if type_ == _LITERAL:
        if end - start < 1:
            raise _fail("literal missing", start)
        return _literal(buf[start], start), start + 1
    fixed = _FIXED_SCALARS.get(type_)
    if fixed is not None:
        if end - start < fixed.size:
            raise _fail(f"integer of type 0x{type_:02x} truncated", start)
        return int(fixed.unpack_from(buf, start)[0]), start + fixed.size
    if type_ == _DOUBLE:
        if end - start < 8:
            raise _fail("double truncated", start)
        value = float(_F64.unpack_from(buf, start)[0])
        if not math.isfinite(value):
            raise _fail("double is not finite", start)
        return value, start + 8
    if type_ == _STRING:
        length, pos = _read_varlen(buf, start, end)
        if length > end - pos:
            raise _fail(f"string of {length} bytes exceeds the {end - pos} available", pos)
        try:
            return buf[pos : pos + length].decode("utf-8"), pos + length
        except UnicodeDecodeError:
            raise _fail("string is not valid UTF-8", pos) from None
    if type_ == _OPAQUE:
        if end - start < 1:
            raise _fail("opaque value missing its type", start)
        mysql_type = buf[start]
        length, pos = _read_varlen(buf, start + 1, end)
        if length > end - pos:
            raise _fail(f"opaque value of {length} bytes exceeds the {end - pos} available", pos)
        payload = bytes(buf[pos : pos + length])
        if mysql_type == ColumnType.NEWDECIMAL:
            return _decode_json_decimal(payload, pos), pos + length
        if mysql_type in _TEMPORAL_TYPES and length != 8:
            raise _fail(f"packed temporal of type {mysql_type} has {length} bytes, not 8", pos)
        return JsonOpaque(mysql_type, payload), pos + length
    raise _fail(f"unknown type 0x{type_:02x}", start)


def _read_varlen(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """read_variable_length: up to five 7-bit groups, low group first."""
    value = 0
    for i in range(5):
        if pos + i >= end:
            raise _fail("variable-length size truncated", pos)
        byte = buf[pos + i]
        value |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            if value > _LARGE_MAX:
                raise _fail("variable-length size above 4 GiB", pos)
            return value, pos + i + 1
    raise _fail("variable-length size longer than five bytes", pos)


# --------------------------------------------------------------------------- opaque values


def _decode_json_decimal(payload: bytes, offset: int) -> Decimal:
    """Json_decimal::convert_from_binary: precision byte, scale byte, decimal2bin image."""
    if len(payload) < 2:
        raise _fail("decimal missing its precision and scale", offset)
    precision, scale = payload[0], payload[1]
    try:
        return decimal_from_bin(payload[2:], precision, scale)
    except ValueError as exc:
        raise _fail(str(exc), offset) from None


def _decimal_bin_size(precision: int, scale: int) -> int:
    intg = precision - scale
    return (
        (intg // _DIGITS_PER_WORD) * 4
        + _DIG2BYTES[intg % _DIGITS_PER_WORD]
        + (scale // _DIGITS_PER_WORD) * 4
        + _DIG2BYTES[scale % _DIGITS_PER_WORD]
    )


def decimal_from_bin(data: bytes, precision: int, scale: int) -> Decimal:
    """Read MySQL's ``decimal2bin`` image (strings/decimal.cc, ``bin2decimal``).

    Big-endian groups of up to nine digits, leftover integer digits first and leftover
    fraction digits last; the top bit of the first byte is set for non-negative values and
    every byte is inverted for negative ones. Raises ValueError when the bytes do not fit.
    """
    if scale > precision or precision == 0:
        raise ValueError(f"invalid decimal precision {precision} / scale {scale}")
    size = _decimal_bin_size(precision, scale)
    if len(data) != size:
        raise ValueError(f"decimal({precision},{scale}) needs {size} bytes, got {len(data)}")
    raw = bytearray(data)
    negative = not raw[0] & 0x80
    raw[0] ^= 0x80
    if negative:
        raw = bytearray(b ^ 0xFF for b in raw)
    intg = precision - scale
    parts: list[str] = []
    pos = 0
    lead = _DIG2BYTES[intg % _DIGITS_PER_WORD]
    groups = [(lead, intg % _DIGITS_PER_WORD)] if lead else []
    groups += [(4, _DIGITS_PER_WORD)] * (intg // _DIGITS_PER_WORD)
    groups += [(4, _DIGITS_PER_WORD)] * (scale // _DIGITS_PER_WORD)
    tail = _DIG2BYTES[scale % _DIGITS_PER_WORD]
    if tail:
        groups.append((tail, scale % _DIGITS_PER_WORD))
    for nbytes, ndigits in groups:
        value = int.from_bytes(raw[pos : pos + nbytes], "big")
        if value >= 10**ndigits:
            raise ValueError(f"decimal group {value} has more than {ndigits} digits")
        parts.append(str(value).zfill(ndigits))
        pos += nbytes
    digits = "".join(parts)
    text = (digits[:intg] or "0") + ("." + digits[intg:] if scale else "")
    result = Decimal(("-" if negative else "") + text)
    if result.is_zero():
        result = abs(result)  # the server never prints a negative zero
    return result


def _opaque_text(mysql_type: int, data: bytes) -> str:
    if mysql_type == ColumnType.NEWDECIMAL and len(data) >= 2:
        try:
            return _decimal_text(decimal_from_bin(data[2:], data[0], data[1]))
        except ValueError:
            pass
    if mysql_type in _TEMPORAL_TYPES and len(data) == 8:
        packed = _I64.unpack_from(data)[0]
        if mysql_type == ColumnType.TIME:
            return _time_text(packed)
        return _datetime_text(packed, date_only=mysql_type == ColumnType.DATE)
    return f"base64:type{mysql_type}:{base64.b64encode(data).decode('ascii')}"


def _datetime_text(packed: int, *, date_only: bool) -> str:
    """TIME_from_longlong_datetime_packed (mysys/my_time.cc), printed by my_TIME_to_str."""
    sign = "-" if packed < 0 else ""
    packed = abs(packed)
    frac = packed % (1 << 24)
    ymdhms = packed >> 24
    ymd = ymdhms >> 17
    hms = ymdhms % (1 << 17)
    day = ymd % (1 << 5)
    year_month = ymd >> 5
    month = year_month % 13
    year = year_month // 13
    if date_only:
        return f"{sign}{year:04d}-{month:02d}-{day:02d}"
    hour = hms >> 12
    minute = (hms >> 6) % (1 << 6)
    second = hms % (1 << 6)
    return f"{sign}{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}.{frac:06d}"


def _time_text(packed: int) -> str:
    """TIME_from_longlong_time_packed (mysys/my_time.cc); hours may exceed 24."""
    sign = "-" if packed < 0 else ""
    packed = abs(packed)
    frac = packed % (1 << 24)
    hms = packed >> 24
    hour = (hms >> 12) % (1 << 10)
    minute = (hms >> 6) % (1 << 6)
    second = hms % (1 << 6)
    return f"{sign}{hour:02d}:{minute:02d}:{second:02d}.{frac:06d}"


def _decimal_text(value: Decimal) -> str:
    return format(value, "f")


# --------------------------------------------------------------------------- text


def json_to_text(value: JsonValue) -> str:
    """Canonical compact JSON text: keys in stored order, integers and decimals exact."""
    parts: list[str] = []
    _write_text(value, parts)
    return "".join(parts)


def _write_text(value: JsonValue, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"JSON has no representation for {value!r}")
        out.append(repr(value))
    elif isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError(f"JSON has no representation for {value!r}")
        out.append(_decimal_text(value))
    elif isinstance(value, JsonOpaque):
        out.append(json.dumps(value.text, ensure_ascii=False))
    elif isinstance(value, dict):
        out.append("{")
        first = True
        for key, item in value.items():
            if not first:
                out.append(",")
            first = False
            out.append(json.dumps(key, ensure_ascii=False))
            out.append(":")
            _write_text(item, out)
        out.append("}")
    elif isinstance(value, list):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write_text(item, out)
        out.append("]")
    else:
        raise TypeError(f"not a JSON value: {type(value).__name__}")
