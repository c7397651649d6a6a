"""Encoders for the tests: Python values to the bytes a server writes in a row image.

The package only decodes; these write the other direction so that property tests can build
row images from generated values and check that decoding gives the values back. Each one
follows the server function cited in the decoder it mirrors:

* temporals (``replicator/binlog/temporal.py``): ``Field_newdate::store_TIME`` (DATE),
  ``my_datetime_packed_to_binary`` / ``my_timestamp_to_binary`` / ``my_time_packed_to_binary``
  (mysys/my_time.cc: DATETIME2, TIMESTAMP2, TIME2), ``Field_datetime`` / ``Field_timestamp`` /
  ``Field_time`` (sql/field.cc: the classic formats), MariaDB's ``Field_*_hires`` (the
  pre-10.0 hires formats);
* DECIMAL (``replicator/binlog/decimal.py``): ``decimal2bin`` (strings/decimal.cc);
* binary JSON (``replicator/binlog/json_binary.py``): ``serialize_json_value``
  (sql/json_binary.cc).

They raise ``ValueError`` for a value the column cannot hold exactly.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from decimal import Context, Decimal, InvalidOperation

from replicator.binlog.constants import ColumnType
from replicator.binlog.decimal import MAX_PRECISION
from replicator.binlog.json_binary import JsonOpaque, JsonValue
from replicator.binlog.temporal import (
    DATETIME_HIRES_BYTES,
    MAX_FSP,
    TIME_HIRES_BYTES,
    TIMESTAMP_HIRES_FRACTION_BYTES,
    datetime2_size,
    fraction_layout,
    time2_size,
    timestamp2_size,
)
from replicator.binlog.values import InvalidTemporal

__all__ = [
    "decimal_to_bin",
    "encode_date",
    "encode_datetime",
    "encode_datetime2",
    "encode_datetime_hires",
    "encode_decimal",
    "encode_json_value",
    "encode_time",
    "encode_time2",
    "encode_time_hires",
    "encode_timestamp",
    "encode_timestamp2",
    "encode_timestamp_hires",
]

# ------------------------------------------------------------------------------ temporals

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO = 1_000_000
_DATETIMEF_INT_OFS = 0x8000000000  # my_time.cc DATETIMEF_INT_OFS
# TIME_MAX_VALUE_SECONDS (838:59:59) + 1, in microseconds: Field_time_hires::zero_point
_TIME_HIRES_ZERO = (838 * 3600 + 59 * 60 + 59 + 1) * _MICRO

_Fields = tuple[int, int, int, int, int, int, int]
"""(year, month, day, hour, minute, second, microsecond)"""

_TEXT = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})(?: (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?)?\Z",
)


def _check_fsp(fsp: int, what: str) -> None:
    if not 0 <= fsp <= MAX_FSP:
        raise ValueError(f"invalid fractional seconds precision {fsp} for {what}")


def _hires_unit(fsp: int) -> int:
    """Microseconds per stored unit for precision ``fsp`` (MariaDB ``sec_part_shift``)."""
    return int(10 ** (MAX_FSP - fsp))


def _fields(value: date | datetime | InvalidTemporal) -> _Fields:
    """(year, month, day, hour, minute, second, microsecond) of a value or invalid text."""
    if isinstance(value, InvalidTemporal):
        match = _TEXT.match(value.text)
        if match is None:
            raise ValueError(f"cannot encode {value!r}")
        fraction = match.group(7) or ""
        micro = int(fraction.ljust(MAX_FSP, "0")) if fraction else 0
        year, month, day = (int(match.group(i)) for i in (1, 2, 3))
        hour, minute, second = (int(match.group(i) or 0) for i in (4, 5, 6))
        return year, month, day, hour, minute, second, micro
    if isinstance(value, datetime):
        return (
            value.year,
            value.month,
            value.day,
            value.hour,
            value.minute,
            value.second,
            value.microsecond,
        )
    return value.year, value.month, value.day, 0, 0, 0, 0


def _check_micro(micro: int, unit: int, fsp: int) -> None:
    if micro % unit:
        raise ValueError(f"{micro} microseconds do not fit fractional precision {fsp}")


def _time_parts(value: timedelta) -> tuple[bool, int, int, int, int, int]:
    """(negative, total microseconds magnitude, hours, minutes, seconds, microseconds)."""
    total = value // timedelta(microseconds=1)
    negative = total < 0
    magnitude = -total if negative else total
    seconds, micro = divmod(magnitude, _MICRO)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return negative, magnitude, hours, minutes, secs, micro


def encode_date(value: date | InvalidTemporal) -> bytes:
    year, month, day, *_ = _fields(value)
    return (year << 9 | month << 5 | day).to_bytes(3, "little")


def encode_datetime2(value: datetime | InvalidTemporal, fsp: int) -> bytes:
    _check_fsp(fsp, "DATETIME")
    year, month, day, hour, minute, second, micro = _fields(value)
    frac_bytes, unit = fraction_layout(fsp)
    _check_micro(micro, _hires_unit(fsp), fsp)
    ymd = (year * 13 + month) << 5 | day
    packed = (ymd << 17 | hour << 12 | minute << 6 | second) + _DATETIMEF_INT_OFS
    return (packed << 8 * frac_bytes | micro // unit).to_bytes(datetime2_size(fsp), "big")


def _epoch_parts(value: datetime | InvalidTemporal) -> tuple[int, int]:
    if isinstance(value, InvalidTemporal):
        if any(_fields(value)):
            raise ValueError(f"only the zero TIMESTAMP can be encoded, not {value!r}")
        return 0, 0
    if value.tzinfo is None:
        raise ValueError("TIMESTAMP values must be timezone-aware")
    delta = value - _EPOCH
    seconds, micro = divmod(delta // timedelta(microseconds=1), _MICRO)
    if not 0 <= seconds < 1 << 32:
        raise ValueError(f"{value!r} is outside the TIMESTAMP range")
    return seconds, micro


def encode_timestamp2(value: datetime | InvalidTemporal, fsp: int) -> bytes:
    _check_fsp(fsp, "TIMESTAMP")
    seconds, micro = _epoch_parts(value)
    _check_micro(micro, _hires_unit(fsp), fsp)
    frac_bytes, unit = fraction_layout(fsp)
    whole = seconds << 8 * frac_bytes | micro // unit
    return whole.to_bytes(timestamp2_size(fsp), "big")


def encode_time2(value: timedelta, fsp: int) -> bytes:
    _check_fsp(fsp, "TIME")
    negative, _, hours, minutes, seconds, micro = _time_parts(value)
    if hours > 1023:
        raise ValueError(f"{value!r} is outside the TIME2 range")
    _check_micro(micro, _hires_unit(fsp), fsp)
    frac_bytes, unit = fraction_layout(fsp)
    hms = hours << 12 | minutes << 6 | seconds
    magnitude = hms << 8 * frac_bytes | micro // unit
    size = time2_size(fsp)
    stored = (-magnitude if negative else magnitude) + (1 << (8 * size - 1))
    return stored.to_bytes(size, "big")


def encode_datetime(value: datetime | InvalidTemporal) -> bytes:
    year, month, day, hour, minute, second, micro = _fields(value)
    _check_micro(micro, _MICRO, 0)
    number = ((year * 100 + month) * 100 + day) * 1_000_000 + hour * 10_000 + minute * 100
    return (number + second).to_bytes(8, "little")


def encode_timestamp(value: datetime | InvalidTemporal) -> bytes:
    seconds, micro = _epoch_parts(value)
    _check_micro(micro, _MICRO, 0)
    return seconds.to_bytes(4, "little")


def encode_time(value: timedelta) -> bytes:
    negative, _, hours, minutes, seconds, micro = _time_parts(value)
    _check_micro(micro, _MICRO, 0)
    number = hours * 10_000 + minutes * 100 + seconds
    if number >= 1 << 23:
        raise ValueError(f"{value!r} is outside the TIME range")
    return (-number if negative else number).to_bytes(3, "little", signed=True)


def encode_datetime_hires(value: datetime | InvalidTemporal, fsp: int) -> bytes:
    _check_fsp(fsp, "DATETIME")
    if fsp == 0:
        return encode_datetime(value)
    year, month, day, hour, minute, second, micro = _fields(value)
    unit = _hires_unit(fsp)
    _check_micro(micro, unit, fsp)
    packed = ((((year * 13 + month) * 32 + day) * 24 + hour) * 60 + minute) * 60 + second
    packed = packed * _MICRO + micro
    return (packed // unit).to_bytes(DATETIME_HIRES_BYTES[fsp], "big")


def encode_timestamp_hires(value: datetime | InvalidTemporal, fsp: int) -> bytes:
    _check_fsp(fsp, "TIMESTAMP")
    if fsp == 0:
        return encode_timestamp(value)
    seconds, micro = _epoch_parts(value)
    unit = _hires_unit(fsp)
    _check_micro(micro, unit, fsp)
    fraction = (micro // unit).to_bytes(TIMESTAMP_HIRES_FRACTION_BYTES[fsp], "big")
    return seconds.to_bytes(4, "big") + fraction


def encode_time_hires(value: timedelta, fsp: int) -> bytes:
    _check_fsp(fsp, "TIME")
    if fsp == 0:
        return encode_time(value)
    negative, magnitude, *_ = _time_parts(value)
    unit = _hires_unit(fsp)
    _check_micro(magnitude, unit, fsp)
    if magnitude >= _TIME_HIRES_ZERO:
        raise ValueError(f"{value!r} is outside the TIME range")
    scaled = magnitude // unit
    stored = (-scaled if negative else scaled) + _TIME_HIRES_ZERO // unit
    return stored.to_bytes(TIME_HIRES_BYTES[fsp], "big")


# -------------------------------------------------------------------------------- DECIMAL

_DIGITS_PER_GROUP = 9
_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)  # strings/decimal.cc dig2bytes
# Large enough that scaleb() never rounds a 65-digit value.
_EXACT = Context(prec=2 * MAX_PRECISION)


def _groups(precision: int, scale: int) -> list[tuple[int, int]]:
    """(byte width, digit count) of each group, most significant first."""
    intg0, intg0x = divmod(precision - scale, _DIGITS_PER_GROUP)
    frac0, frac0x = divmod(scale, _DIGITS_PER_GROUP)
    groups: list[tuple[int, int]] = []
    if intg0x:
        groups.append((_DIG2BYTES[intg0x], intg0x))
    groups.extend([(4, _DIGITS_PER_GROUP)] * (intg0 + frac0))
    if frac0x:
        groups.append((_DIG2BYTES[frac0x], frac0x))
    return groups


def encode_decimal(value: Decimal | int | str, precision: int, scale: int) -> bytes:
    """The row-image bytes MySQL writes for ``value`` in a DECIMAL(precision, scale) column.

    Raises ``ValueError`` when the value needs rounding or does not fit.
    """
    if not 1 <= precision <= MAX_PRECISION or not 0 <= scale <= precision:
        raise ValueError(f"invalid DECIMAL({precision},{scale})")
    number = Decimal(value)
    if not number.is_finite():
        raise ValueError(f"{value!r} is not a finite decimal")
    try:
        scaled = number.scaleb(scale, _EXACT)
        unscaled = int(scaled.to_integral_exact(context=_EXACT))
    except InvalidOperation as exc:  # pragma: no cover - inputs are finite and small
        raise ValueError(f"{value!r} does not fit DECIMAL({precision},{scale})") from exc
    if Decimal(unscaled) != scaled:
        raise ValueError(f"{value!r} has more than {scale} fractional digits")
    negative = number.is_signed() and unscaled != 0
    magnitude = abs(unscaled)
    if magnitude >= 10**precision:
        raise ValueError(f"{value!r} does not fit DECIMAL({precision},{scale})")
    raw = 0
    shift = 0
    for width, digits in reversed(_groups(precision, scale)):
        magnitude, group = divmod(magnitude, 10**digits)
        raw |= group << shift
        shift += 8 * width
    size = shift // 8
    if negative:
        raw ^= (1 << shift) - 1
    raw ^= 1 << (shift - 1)
    return raw.to_bytes(size, "big")


def decimal_to_bin(value: Decimal) -> tuple[int, int, bytes]:
    """``decimal2bin`` for ``value`` at its own precision and scale: (precision, scale, bytes),
    as a DECIMAL inside binary JSON stores it."""
    if not value.is_finite():
        raise ValueError("only finite decimals can be stored")
    sign, digit_tuple, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digit_tuple))
    if exponent > 0:
        digits += "0" * exponent
        exponent = 0
    scale = -exponent
    if len(digits) < scale:
        digits = "0" * (scale - len(digits)) + digits
    int_digits = digits[: len(digits) - scale].lstrip("0")
    frac_digits = digits[len(digits) - scale :]
    intg = len(int_digits)
    precision = max(intg + scale, 1)
    if precision > 255 or scale > 255:
        raise ValueError("decimal too wide for the binary JSON format")
    out = bytearray()
    lead = intg % _DIGITS_PER_GROUP
    pos = 0
    if lead:
        out += int(int_digits[:lead]).to_bytes(_DIG2BYTES[lead], "big")
        pos = lead
    while pos < intg:
        out += int(int_digits[pos : pos + 9]).to_bytes(4, "big")
        pos += 9
    pos = 0
    while pos + 9 <= scale:
        out += int(frac_digits[pos : pos + 9]).to_bytes(4, "big")
        pos += 9
    tail = scale - pos
    if tail:
        out += int(frac_digits[pos:]).to_bytes(_DIG2BYTES[tail], "big")
    if not out:  # DECIMAL(1,0) zero: one leftover integer digit
        out = bytearray(1)
    negative = bool(sign) and not value.is_zero()
    if negative:
        out = bytearray(b ^ 0xFF for b in out)
    out[0] ^= 0x80
    return precision, scale, bytes(out)


# ---------------------------------------------------------------------------- binary JSON

# Type bytes (sql/json_binary.cc, JSONB_TYPE_*).
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

_MAX_DEPTH = 200  # the decoder's bound (the server's JSON_DOCUMENT_MAX_DEPTH is 100)
_SMALL_MAX = 0xFFFF
_LARGE_MAX = 0xFFFFFFFF

_U16 = struct.Struct("<H")
_I16 = struct.Struct("<h")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_U64 = struct.Struct("<Q")
_I64 = struct.Struct("<q")
_F64 = struct.Struct("<d")


def encode_json_value(value: JsonValue) -> bytes:
    """Serialize ``value`` in MySQL's binary JSON format (``serialize_json_value``).

    Objects keep their insertion order (the server sorts keys by length, then bytes; do so
    before calling to get byte-identical output). Each container uses the small format when
    all its offsets and its size fit in 16 bits, the large format otherwise. Integers take
    the narrowest signed type, or uint64 above the int64 range, as the server's JSON parser
    does. Raises ValueError for values MySQL cannot store.
    """
    type_, payload = _encode(value, 0)
    return bytes([type_]) + payload


def _encode(value: JsonValue, depth: int) -> tuple[int, bytes]:
    if depth > _MAX_DEPTH:
        raise ValueError(f"JSON nested deeper than {_MAX_DEPTH}")
    if value is None:
        return _LITERAL, bytes([_LITERAL_NULL])
    if value is True:
        return _LITERAL, bytes([_LITERAL_TRUE])
    if value is False:
        return _LITERAL, bytes([_LITERAL_FALSE])
    if isinstance(value, int):
        return _encode_int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"JSON has no representation for {value!r}")
        return _DOUBLE, _F64.pack(value)
    if isinstance(value, str):
        raw = value.encode("utf-8")
        return _STRING, _varlen(len(raw)) + raw
    if isinstance(value, Decimal):
        precision, scale, image = decimal_to_bin(value)
        return _OPAQUE, _opaque_payload(ColumnType.NEWDECIMAL, bytes([precision, scale]) + image)
    if isinstance(value, JsonOpaque):
        return _OPAQUE, _opaque_payload(value.mysql_type, value.data)
    if isinstance(value, dict):
        for large in (False, True):
            obj = _encode_container(list(value), list(value.values()), True, large, depth)
            if obj is not None:
                return (_LARGE_OBJECT if large else _SMALL_OBJECT), obj
        raise ValueError("JSON object larger than 4 GiB")
    if isinstance(value, list):
        for large in (False, True):
            arr = _encode_container([], value, False, large, depth)
            if arr is not None:
                return (_LARGE_ARRAY if large else _SMALL_ARRAY), arr
        raise ValueError("JSON array larger than 4 GiB")
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def _encode_int(value: int) -> tuple[int, bytes]:
    if -(1 << 15) <= value < (1 << 15):
        return _INT16, _I16.pack(value)
    if -(1 << 31) <= value < (1 << 31):
        return _INT32, _I32.pack(value)
    if -(1 << 63) <= value < (1 << 63):
        return _INT64, _I64.pack(value)
    if 0 <= value < (1 << 64):
        return _UINT64, _U64.pack(value)
    raise ValueError(f"integer {value} outside the int64/uint64 range")


def _opaque_payload(mysql_type: int, data: bytes) -> bytes:
    if not 0 <= mysql_type <= 0xFF:
        raise ValueError(f"opaque type {mysql_type} does not fit a byte")
    return bytes([mysql_type]) + _varlen(len(data)) + data


def _varlen(length: int) -> bytes:
    if length > _LARGE_MAX:
        raise ValueError("string or opaque value larger than 4 GiB")
    out = bytearray()
    while True:
        byte = length & 0x7F
        length >>= 7
        if length:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _inlinable(type_: int, large: bool) -> bool:
    return type_ in (_LITERAL, _INT16, _UINT16) or (large and type_ in (_INT32, _UINT32))


def _encode_container(
    names: Sequence[str], items: Sequence[JsonValue], is_object: bool, large: bool, depth: int
) -> bytes | None:
    """One container's bytes (without its type byte), or None if it needs the large format:
    an object's ``names`` are its keys, one per item; an array has none."""
    osize = 4 if large else 2
    limit = _LARGE_MAX if large else _SMALL_MAX
    pack_offset = _U32.pack if large else _U16.pack
    count = len(items)
    header = 2 * osize + count * ((osize + 2) if is_object else 0) + count * (1 + osize)
    key_entries = bytearray()
    keys = bytearray()
    offset = header
    if len(names) != (count if is_object else 0):
        raise ValueError(f"{len(names)} keys for {count} items (object: {is_object})")
    for key in names:
        raw = key.encode("utf-8")
        if len(raw) > _SMALL_MAX:
            raise ValueError("JSON object key longer than 65535 bytes")
        if offset > limit:
            return None
        key_entries += pack_offset(offset) + _U16.pack(len(raw))
        keys += raw
        offset += len(raw)
    value_entries = bytearray()
    values = bytearray()
    for item in items:
        type_, payload = _encode(item, depth + 1)
        if _inlinable(type_, large):
            value_entries.append(type_)
            value_entries += payload.ljust(osize, b"\x00")
            continue
        if offset > limit:
            return None
        value_entries.append(type_)
        value_entries += pack_offset(offset)
        values += payload
        offset += len(payload)
    if offset > limit or count > limit:
        return None
    return (
        pack_offset(count)
        + pack_offset(offset)
        + bytes(key_entries + value_entries)
        + keys
        + values
    )
