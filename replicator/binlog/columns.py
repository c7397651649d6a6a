"""Per-column value decoders, chosen once per TABLE_MAP and called once per value.

``build_decoder(col)`` looks at the column's type, metadata, signedness and charset one time
and returns a closure ``decode(buf, offset) -> (value, offset_after)`` with everything it needs
precompiled (struct formats, codec, labels), so the row loop does no type dispatch.

Storage formats follow the server's ``Field_*::pack`` / ``unpack`` and the metadata layout of
``Field_*::do_save_field_metadata`` in mysql-server sql/field.cc (MariaDB sql/field.cc is the
same for these types), with ``log_event_print_value`` in sql/log_event.cc (mysqlbinlog -v) as
the reference reader:

* integers little-endian (1, 2, 3, 4, 8 bytes), signed or unsigned per column;
  YEAR one byte, 0 or 1900 + n; FLOAT/DOUBLE little-endian IEEE (FLOAT comes back as the
  exact float32 value widened to a Python float).
* NEWDECIMAL: ``decimal.py``; temporal types: ``temporal.py``.
* VARCHAR/VAR_STRING: 1-byte length if the column's max byte length < 256, else 2; CHAR
  (STRING): the same rule on its byte length, trailing pad characters are stripped by the
  server (``Field_string::pack``) and not restored for text. BINARY(n) is restored to its full
  length with 0x00, the pad byte the server stripped, so the value equals what SELECT returns.
* BLOB/TEXT/JSON/GEOMETRY/VECTOR: a little-endian length of ``meta`` (1-4) bytes, then data.
  Text is decoded strictly by the column's codec (``charsets.py``); a column whose charset is
  ``binary`` or unknown (None) yields ``bytes``. Invalid text raises ``DecodeError`` naming the
  column.
* ENUM: 1 or 2 bytes little-endian index -> label; index 0 is the error value "". SET:
  1-8 bytes little-endian bitmask -> labels in definition order joined by ",". Without known
  labels the index / bitmask comes back as int.
* BIT(n): big-endian in ``meta >> 8`` whole bytes plus one byte for leftover bits, returned
  as an unsigned int.
* JSON (MySQL binary JSON) -> canonical text via ``json_binary.decode_json_text``. MariaDB
  logs JSON as LONGTEXT, which decodes as text here.
* GEOMETRY: the stored value is a 4-byte little-endian SRID followed by WKB: a ``Geometry``
  (the WKB bytes, with ``srid``).
* VECTOR (MySQL 9): little-endian float32 elements -> ``list[float]``.
* NULL type: no bytes, None.

Old DECIMAL (type 0), MariaDB compressed columns (types 140/141) and types that never reach a
row event are refused at build time with ``DecodeError``. Every decoder raises
``TruncatedError`` when its value runs past the end of ``buf``. DECIMAL, DATE, DATETIME2,
TIMESTAMP2 and TIME2 decoders keep a small per-column cache keyed by the value's bytes, since
such values repeat across rows and the returned objects are immutable.

``build_plan(col)`` returns the same decoder inside a ``ColumnPlan`` that also says how the
value is laid out (a struct format, a cached fixed-width conversion, length-prefixed data, an
ENUM index...), so ``native.py`` can make it the native core's instructions for the column.
The plan and the decoder come from the same builder and the same parameters; the decoder is
the reference the native core falls back to.
"""

from __future__ import annotations

import struct
import sys
import zlib
from array import array
from collections.abc import Callable
from dataclasses import dataclass

from . import temporal, text_forms
from .charsets import BINARY, text_decoder
from .constants import ColumnType
from .decimal import build_decimal_converter, decimal_size
from .errors import DecodeError, TruncatedError
from .json_binary import decode_json_text
from .schema import ColumnDef
from .values import Geometry

__all__ = [
    "ColumnDecoder",
    "ColumnPlan",
    "FixedMemo",
    "build_decoder",
    "build_plan",
    "column_label",
]

ColumnDecoder = Callable[[bytes, int], tuple[object, int]]
_BytesReader = Callable[[bytes, int], tuple[bytes, int]]

# MariaDB column compression types (include/mysql_com.h, MYSQL_TYPE_*_COMPRESSED).
_MARIADB_BLOB_COMPRESSED = 140
_MARIADB_VARCHAR_COMPRESSED = 141
_SET_CACHE_LIMIT = 4096
MEMO_LIMIT = 1024  # values a FixedMemo holds before it starts over
_BIG_ENDIAN_HOST = sys.byteorder == "big"


def column_label(col: ColumnDef) -> str:
    """How errors name a column: its name when known, else its position."""
    return f"`{col.name}`" if col.name else f"#{col.index}"


def _type_name(type_code: int) -> str:
    try:
        return ColumnType(type_code).name
    except ValueError:
        return str(type_code)


def _truncated(label: str) -> TruncatedError:
    return TruncatedError(f"column {label}: value runs past the end of the row image")


class FixedMemo:
    """Fixed-width values converted through a cache keyed by their exact bytes: dates, times
    and amounts repeat across the rows of a transaction, and a dict hit costs a fraction of
    the conversion. Converters here return immutable, non-None values; the cache is dropped
    whenever it fills. ``get`` is the cache lookup (None on a miss), ``miss`` converts and
    caches."""

    __slots__ = ("cache", "convert", "get", "size", "what")

    def __init__(self, size: int, convert: Callable[[bytes], object], what: str) -> None:
        self.size = size
        self.convert = convert
        self.what = what
        self.cache: dict[bytes, object] = {}
        self.get = self.cache.get

    def miss(self, key: bytes) -> object:
        if len(key) != self.size:
            raise TruncatedError(f"{self.what} value runs past the end of the row image")
        value = self.convert(key)
        cache = self.cache
        if len(cache) >= MEMO_LIMIT:
            cache.clear()
        cache[key] = value
        return value

    def decoder(self) -> ColumnDecoder:
        size, get, miss = self.size, self.get, self.miss

        def decode(buf: bytes, offset: int) -> tuple[object, int]:
            end = offset + size
            key = buf[offset:end]
            value = get(key)
            if value is None:
                value = miss(key)
            return value, end

        return decode


@dataclass(frozen=True, slots=True)
class ColumnPlan:
    """One column's decoder and, for the common types, how to inline it.

    ``kind``:

    * ``"call"`` -- only ``decode`` knows the format;
    * ``"struct"`` -- ``width`` bytes read with the struct format character ``fmt``
      (little-endian, no conversion);
    * ``"memo"`` -- ``width`` bytes converted through ``memo``;
    * ``"data"`` -- a ``width``-byte little-endian length, then that many bytes, decoded by
      ``text`` (None: the bytes themselves) and, when ``pad``, right-padded with 0x00 to
      ``pad`` bytes (BINARY(n));
    * ``"enum"`` -- a ``width``-byte little-endian index into ``labels`` (index 0 is "");
    * ``"year"`` -- one byte, 0 or 1900 + n.

    ``native`` describes, for the native core (``native.py``), a fixed-width value it can
    build itself: (what, width, two parameters, the converter it hands unusual values to).
    """

    decode: ColumnDecoder
    kind: str = "call"
    width: int = 0
    fmt: str = ""
    memo: FixedMemo | None = None
    text: Callable[[bytes], str] | None = None
    pad: int = 0
    labels: tuple[str, ...] = ()
    native: tuple[str, int, int, int, object] | None = None


def build_decoder(col: ColumnDef) -> ColumnDecoder:
    """Choose and precompile the decoder for one column (once per TABLE_MAP)."""
    return build_plan(col).decode


def build_plan(col: ColumnDef) -> ColumnPlan:
    """The decoder of one column and how to inline it (once per TABLE_MAP)."""
    if col.text_form is not None:
        return ColumnPlan(_text_form(col))
    builder = _BUILDERS.get(col.type)
    if builder is None:
        raise DecodeError(
            f"column {column_label(col)}: {_unsupported_reason(col.type)}",
            hint="this column type cannot be decoded; report the server version and table",
        )
    try:
        return builder(col)
    except DecodeError as exc:
        if isinstance(exc.args[0], str) and exc.args[0].startswith("column "):
            raise
        raise DecodeError(
            f"column {column_label(col)} ({_type_name(col.type)}, meta {col.meta:#x}): "
            f"{exc.args[0]}"
        ) from exc


def _text_form(col: ColumnDef) -> ColumnDecoder:
    """MariaDB UUID/INET4/INET6: the fixed-size binary string they are logged as, formatted
    as SELECT prints it (``text_forms``)."""
    size = text_forms.SIZES.get(col.text_form or "")
    if col.type != ColumnType.STRING or size is None or col.string_length != size:
        raise DecodeError(
            f"column {column_label(col)}: a {col.text_form} column must be logged as "
            f"BINARY({size}), not as type {col.type} (meta {col.meta:#x})",
            hint="the schema history does not match the binlog here",
        )
    read = _bytes_reader(1, column_label(col))
    fmt = text_forms.FORMATTERS[col.text_form or ""]

    def decode(buf: bytes, offset: int) -> tuple[object, int]:
        data, end = read(buf, offset)
        if len(data) > size:
            raise DecodeError(
                f"column {column_label(col)}: {len(data)} bytes for a {size}-byte value"
            )
        return fmt(data.ljust(size, b"\x00")), end

    return decode


def _unsupported_reason(type_code: int) -> str:
    if type_code == ColumnType.DECIMAL:
        return (
            "old-style DECIMAL (type 0, MySQL < 5.0.3) is not written to row events by "
            "supported servers"
        )
    return f"unsupported column type {_type_name(type_code)}"


# ------------------------------------------------------------------------------ numbers


def _struct_decoder(fmt: str, col: ColumnDef) -> ColumnDecoder:
    unpack = struct.Struct(fmt).unpack_from
    width = struct.calcsize(fmt)
    label = column_label(col)

    def decode(buf: bytes, offset: int) -> tuple[object, int]:
        try:
            return unpack(buf, offset)[0], offset + width
        except struct.error:
            raise _truncated(label) from None

    return decode


def _struct_plan(fmt: str, col: ColumnDef) -> ColumnPlan:
    """A little-endian value of one struct format character ``fmt``."""
    return ColumnPlan(
        _struct_decoder("<" + fmt, col), "struct", width=struct.calcsize("<" + fmt), fmt=fmt
    )


def _tiny(col: ColumnDef) -> ColumnPlan:
    return _struct_plan("B" if col.unsigned else "b", col)


def _short(col: ColumnDef) -> ColumnPlan:
    return _struct_plan("H" if col.unsigned else "h", col)


def _long(col: ColumnDef) -> ColumnPlan:
    return _struct_plan("I" if col.unsigned else "i", col)


def _longlong(col: ColumnDef) -> ColumnPlan:
    return _struct_plan("Q" if col.unsigned else "q", col)


def _float(col: ColumnDef) -> ColumnPlan:
    return _struct_plan("f", col)


def _double(col: ColumnDef) -> ColumnPlan:
    return _struct_plan("d", col)


def _int24(col: ColumnDef) -> ColumnPlan:
    native = ("int", 3, 0 if col.unsigned else 1, 0, None)
    return ColumnPlan(_int24_decoder(col), native=native)


def _int24_decoder(col: ColumnDef) -> ColumnDecoder:
    # Low 16 bits unsigned, high byte signed or not: lo + (hi << 16) is the 24-bit value.
    unpack = struct.Struct("<HB" if col.unsigned else "<Hb").unpack_from
    label = column_label(col)

    def decode(buf: bytes, offset: int) -> tuple[object, int]:
        try:
            low, high = unpack(buf, offset)
        except struct.error:
            raise _truncated(label) from None
        return low + (high << 16), offset + 3

    return decode


def _year(col: ColumnDef) -> ColumnPlan:
    label = column_label(col)

    def decode(buf: bytes, offset: int) -> tuple[object, int]:
        try:
            value = buf[offset]
        except IndexError:
            raise _truncated(label) from None
        return (value + 1900 if value else 0), offset + 1

    return ColumnPlan(decode, "year", width=1)


def _memoized(
    size: int, convert: Callable[[bytes], object], what: str, native: tuple[str, int, int]
) -> ColumnPlan:
    """Fixed-width values decoded through a ``FixedMemo``; ``native``: (what, parameters)
    for the native core."""
    memo = FixedMemo(size, convert, what)
    name, first, second = native
    return ColumnPlan(
        memo.decoder(), "memo", width=size, memo=memo, native=(name, size, first, second, convert)
    )


def _newdecimal(col: ColumnDef) -> ColumnPlan:
    precision, scale = col.meta >> 8, col.meta & 0xFF
    convert = build_decimal_converter(precision, scale)
    size = decimal_size(precision, scale)
    what = f"DECIMAL({precision},{scale})"
    return _memoized(size, convert, what, ("decimal", precision - scale, scale))


def _bit(col: ColumnDef) -> ColumnDecoder:
    size = (col.meta >> 8) + (1 if col.meta & 0xFF else 0)
    if not 1 <= size <= 8 or (col.meta & 0xFF) > 7:
        raise DecodeError(f"invalid BIT metadata {col.meta:#x}")
    label = column_label(col)

    def decode(buf: bytes, offset: int) -> tuple[object, int]:
        end = offset + size
        if end > len(buf):
            raise _truncated(label)
        return int.from_bytes(buf[offset:end], "big"), end

    return decode


def _null(col: ColumnDef) -> ColumnDecoder:
    def decode(buf: bytes, offset: int) -> tuple[object, int]:
        return None, offset

    return decode


# ----------------------------------------------------------------------------- temporal


def _date(col: ColumnDef) -> ColumnPlan:
    return _memoized(3, temporal.date_converter(), "DATE", ("date", 0, 0))


def _time(col: ColumnDef) -> ColumnDecoder:
    return temporal.time_hires_decoder(col.meta) if col.meta else temporal.time_decoder()


def _datetime(col: ColumnDef) -> ColumnDecoder:
    if col.meta:
        return temporal.datetime_hires_decoder(col.meta)
    return temporal.datetime_decoder()


def _timestamp(col: ColumnDef) -> ColumnDecoder:
    if col.meta:
        return temporal.timestamp_hires_decoder(col.meta)
    return temporal.timestamp_decoder()


def _time2(col: ColumnDef) -> ColumnPlan:
    convert = temporal.time2_converter(col.meta)
    size = temporal.time2_size(col.meta)
    return _memoized(size, convert, "TIME", ("time2", *temporal.fraction_layout(col.meta)))


def _datetime2(col: ColumnDef) -> ColumnPlan:
    convert = temporal.datetime2_converter(col.meta)
    size = temporal.datetime2_size(col.meta)
    return _memoized(size, convert, "DATETIME", ("datetime2", *temporal.fraction_layout(col.meta)))


def _timestamp2(col: ColumnDef) -> ColumnPlan:
    convert = temporal.timestamp2_converter(col.meta)
    size = temporal.timestamp2_size(col.meta)
    layout = temporal.fraction_layout(col.meta)
    return _memoized(size, convert, "TIMESTAMP", ("timestamp2", *layout))


# ------------------------------------------------------------------- length-prefixed data


def _bytes_reader(prefix: int, label: str) -> _BytesReader:
    """Reads ``prefix`` bytes of little-endian length, then that many bytes."""
    if prefix == 1:

        def read1(buf: bytes, offset: int) -> tuple[bytes, int]:
            try:
                start = offset + 1
                end = start + buf[offset]
            except IndexError:
                raise _truncated(label) from None
            if end > len(buf):
                raise _truncated(label)
            return buf[start:end], end

        return read1
    if prefix == 3:

        def read3(buf: bytes, offset: int) -> tuple[bytes, int]:
            start = offset + 3
            if start > len(buf):
                raise _truncated(label)
            end = start + int.from_bytes(buf[offset:start], "little")
            if end > len(buf):
                raise _truncated(label)
            return buf[start:end], end

        return read3
    if prefix not in (2, 4):
        raise DecodeError(f"invalid length prefix size {prefix}")
    unpack = struct.Struct("<H" if prefix == 2 else "<I").unpack_from

    def read(buf: bytes, offset: int) -> tuple[bytes, int]:
        try:
            start = offset + prefix
            end = start + unpack(buf, offset)[0]
        except struct.error:
            raise _truncated(label) from None
        if end > len(buf):
            raise _truncated(label)
        return buf[start:end], end

    return read


def _text_reader(prefix: int, col: ColumnDef, codec: str) -> ColumnDecoder:
    """Length-prefixed text decoded strictly with ``codec``; VARCHAR/CHAR are inlined."""
    label = column_label(col)
    try:
        decode_text = text_decoder(codec)
    except LookupError:
        raise DecodeError(f"unknown text codec {codec!r}") from None

    def bad_text(exc: UnicodeDecodeError) -> DecodeError:
        problem = f"{exc.reason} at byte {exc.start}"
        return DecodeError(
            f"column {label}: bytes are not valid {codec} text ({problem})",
            hint="the stored bytes do not match the column's character set; check the "
            "column charset or the schema given to replicator",
        )

    if prefix == 1:

        def decode1(buf: bytes, offset: int) -> tuple[object, int]:
            try:
                start = offset + 1
                end = start + buf[offset]
            except IndexError:
                raise _truncated(label) from None
            if end > len(buf):
                raise _truncated(label)
            try:
                return decode_text(buf[start:end]), end
            except UnicodeDecodeError as exc:
                raise bad_text(exc) from None

        return decode1
    if prefix == 2:
        unpack = struct.Struct("<H").unpack_from

        def decode2(buf: bytes, offset: int) -> tuple[object, int]:
            try:
                start = offset + 2
                end = start + unpack(buf, offset)[0]
            except struct.error:
                raise _truncated(label) from None
            if end > len(buf):
                raise _truncated(label)
            try:
                return decode_text(buf[start:end]), end
            except UnicodeDecodeError as exc:
                raise bad_text(exc) from None

        return decode2
    read = _bytes_reader(prefix, label)

    def decode(buf: bytes, offset: int) -> tuple[object, int]:
        data, end = read(buf, offset)
        try:
            return decode_text(data), end
        except UnicodeDecodeError as exc:
            raise bad_text(exc) from None

    return decode


def _string_data(prefix: int, col: ColumnDef) -> ColumnPlan:
    """Text when the column has a text charset, else raw bytes."""
    if col.charset is None or col.charset == BINARY:
        return ColumnPlan(_bytes_reader(prefix, column_label(col)), "data", width=prefix)
    decode = _text_reader(prefix, col, col.charset)
    return ColumnPlan(decode, "data", width=prefix, text=text_decoder(col.charset))


def _varchar(col: ColumnDef) -> ColumnPlan:
    return _string_data(1 if col.meta < 256 else 2, col)


def _string(col: ColumnDef) -> ColumnPlan:
    real_type = col.meta >> 8
    if real_type in (ColumnType.ENUM, ColumnType.SET):  # TABLE_MAP type left unresolved
        return _BUILDERS[real_type](col)
    length = col.string_length
    prefix = 1 if length < 256 else 2
    if col.charset != BINARY:
        return _string_data(prefix, col)
    read = _bytes_reader(prefix, column_label(col))

    def decode_binary(buf: bytes, offset: int) -> tuple[object, int]:
        data, end = read(buf, offset)
        return data.ljust(length, b"\x00"), end

    return ColumnPlan(decode_binary, "data", width=prefix, pad=length)


_BLOB_DEFAULT_PREFIX = {
    ColumnType.TINY_BLOB: 1,
    ColumnType.BLOB: 2,
    ColumnType.MEDIUM_BLOB: 3,
    ColumnType.LONG_BLOB: 4,
}


def _blob(col: ColumnDef) -> ColumnPlan:
    prefix = col.meta or _BLOB_DEFAULT_PREFIX[ColumnType(col.type)]
    if not 1 <= prefix <= 4:
        raise DecodeError(f"invalid BLOB length size {prefix}")
    return _string_data(prefix, col)


def _compressed(col: ColumnDef) -> ColumnDecoder:
    """MariaDB ``COMPRESSED`` columns (MariaDB ``sql/field_comp.cc``).

    The stored value (after the usual length prefix) is empty, or a header byte then data:
    0x00 means the rest is stored as is; otherwise the high nibble names the method (8 =
    zlib), the low 3 bits the size of the big-endian original length that follows, and bit 3
    a raw deflate stream (no zlib wrapper). TABLE_MAP metadata is the VARCHAR length + 1
    (type 141) or the BLOB length size (type 140).
    """
    label = column_label(col)
    if col.type == _MARIADB_VARCHAR_COMPRESSED:
        read = _bytes_reader(1 if col.meta < 256 else 2, label)
    else:
        if not 1 <= col.meta <= 4:
            raise DecodeError(f"invalid compressed BLOB length size {col.meta}")
        read = _bytes_reader(col.meta, label)
    codec = col.charset
    decode_text = None if codec is None or codec == BINARY else text_decoder(codec)

    def inflate(data: bytes) -> bytes:
        if not data:
            return data
        head = data[0]
        if head == 0:
            return data[1:]
        method, size_len = head >> 4, head & 0x07
        if method != 8 or len(data) < 1 + size_len:
            raise DecodeError(f"column {label}: unknown column compression header {head:#04x}")
        expected = int.from_bytes(data[1 : 1 + size_len], "big")
        wbits = -zlib.MAX_WBITS if head & 0x08 else zlib.MAX_WBITS
        try:
            out = zlib.decompress(data[1 + size_len :], wbits)
        except zlib.error as exc:
            raise DecodeError(f"column {label}: cannot inflate compressed value: {exc}") from exc
        if len(out) != expected:
            raise DecodeError(
                f"column {label}: compressed value inflated to {len(out)} bytes, not {expected}"
            )
        return out

    def decode(buf: bytes, offset: int) -> tuple[object, int]:
        data, end = read(buf, offset)
        raw = inflate(data)
        if decode_text is None:
            return raw, end
        try:
            return decode_text(raw), end
        except UnicodeDecodeError as exc:
            raise DecodeError(f"column {label}: text is not valid {codec}: {exc}") from exc

    return decode


def _prefixed(col: ColumnDef, kind: str) -> _BytesReader:
    if not 1 <= col.meta <= 4:
        raise DecodeError(f"invalid {kind} length size {col.meta}")
    return _bytes_reader(col.meta, column_label(col))


def _json(col: ColumnDef) -> ColumnDecoder:
    read = _prefixed(col, "JSON")
    to_text = decode_json_text

    def decode(buf: bytes, offset: int) -> tuple[object, int]:
        data, end = read(buf, offset)
        return to_text(data), end

    return decode


def _geometry(col: ColumnDef) -> ColumnDecoder:
    read = _prefixed(col, "GEOMETRY")
    label = column_label(col)

    def decode(buf: bytes, offset: int) -> tuple[object, int]:
        data, end = read(buf, offset)
        if len(data) < 4:
            raise DecodeError(f"column {label}: GEOMETRY value shorter than its 4-byte SRID")
        return Geometry(data[4:], int.from_bytes(data[:4], "little")), end

    return decode


def _vector(col: ColumnDef) -> ColumnDecoder:
    read = _prefixed(col, "VECTOR")
    label = column_label(col)
    swap = _BIG_ENDIAN_HOST

    def decode(buf: bytes, offset: int) -> tuple[object, int]:
        data, end = read(buf, offset)
        if len(data) % 4:
            raise DecodeError(f"column {label}: VECTOR value of {len(data)} bytes")
        values = array("f")
        values.frombytes(data)
        if swap:  # pragma: no cover - little-endian hosts only in CI
            values.byteswap()
        return values.tolist(), end

    return decode


# ---------------------------------------------------------------------------- ENUM, SET


def _pack_length(col: ColumnDef, allowed: tuple[int, ...], kind: str) -> int:
    size = col.meta & 0xFF
    if size not in allowed:
        raise DecodeError(f"invalid {kind} pack length {size}")
    return size


def _enum(col: ColumnDef) -> ColumnPlan:
    size = _pack_length(col, (1, 2), "ENUM")
    label = column_label(col)
    unpack = struct.Struct("<B" if size == 1 else "<H").unpack_from
    if col.enum_values is None:
        return _struct_plan("B" if size == 1 else "H", col)
    labels = ("", *col.enum_values)  # index 0: the empty-string error value

    def decode(buf: bytes, offset: int) -> tuple[object, int]:
        try:
            index = unpack(buf, offset)[0]
        except struct.error:
            raise _truncated(label) from None
        try:
            return labels[index], offset + size
        except IndexError:
            raise DecodeError(
                f"column {label}: ENUM index {index} beyond its {len(labels) - 1} labels"
            ) from None

    return ColumnPlan(decode, "enum", width=size, labels=labels)


def _set(col: ColumnDef) -> ColumnDecoder:
    size = _pack_length(col, (1, 2, 3, 4, 8), "SET")
    label = column_label(col)
    if col.set_values is None:

        def decode_mask(buf: bytes, offset: int) -> tuple[object, int]:
            end = offset + size
            if end > len(buf):
                raise _truncated(label)
            return int.from_bytes(buf[offset:end], "little"), end

        return decode_mask
    members = col.set_values
    valid = (1 << len(members)) - 1
    cache: dict[int, str] = {}

    def decode(buf: bytes, offset: int) -> tuple[object, int]:
        end = offset + size
        if end > len(buf):
            raise _truncated(label)
        mask = int.from_bytes(buf[offset:end], "little")
        text = cache.get(mask)
        if text is None:
            if mask & ~valid:
                raise DecodeError(f"column {label}: SET bits {mask:#x} beyond its labels")
            text = ",".join([name for bit, name in enumerate(members) if mask >> bit & 1])
            if len(cache) < _SET_CACHE_LIMIT:
                cache[mask] = text
        return text, end

    return decode


def _called(build: Callable[[ColumnDef], ColumnDecoder]) -> Callable[[ColumnDef], ColumnPlan]:
    """A builder whose decoder is never inlined."""

    def plan(col: ColumnDef) -> ColumnPlan:
        return ColumnPlan(build(col))

    return plan


_BUILDERS: dict[int, Callable[[ColumnDef], ColumnPlan]] = {
    ColumnType.TINY: _tiny,
    ColumnType.SHORT: _short,
    ColumnType.INT24: _int24,
    ColumnType.LONG: _long,
    ColumnType.LONGLONG: _longlong,
    ColumnType.FLOAT: _float,
    ColumnType.DOUBLE: _double,
    ColumnType.NULL: _called(_null),
    ColumnType.YEAR: _year,
    ColumnType.NEWDECIMAL: _newdecimal,
    ColumnType.BIT: _called(_bit),
    ColumnType.DATE: _date,
    ColumnType.NEWDATE: _date,
    ColumnType.TIME: _called(_time),
    ColumnType.DATETIME: _called(_datetime),
    ColumnType.TIMESTAMP: _called(_timestamp),
    ColumnType.TIME2: _time2,
    ColumnType.DATETIME2: _datetime2,
    ColumnType.TIMESTAMP2: _timestamp2,
    ColumnType.VARCHAR: _varchar,
    ColumnType.VAR_STRING: _varchar,
    ColumnType.STRING: _string,
    _MARIADB_BLOB_COMPRESSED: _called(_compressed),
    _MARIADB_VARCHAR_COMPRESSED: _called(_compressed),
    ColumnType.TINY_BLOB: _blob,
    ColumnType.BLOB: _blob,
    ColumnType.MEDIUM_BLOB: _blob,
    ColumnType.LONG_BLOB: _blob,
    ColumnType.ENUM: _enum,
    ColumnType.SET: _called(_set),
    ColumnType.JSON: _called(_json),
    ColumnType.GEOMETRY: _called(_geometry),
    ColumnType.VECTOR: _called(_vector),
}
