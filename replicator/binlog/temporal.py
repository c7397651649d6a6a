"""DATE, TIME, DATETIME and TIMESTAMP in every row-image format, and as SELECT prints them.

Sources, per format:

* DATE (3 bytes, little-endian ``year << 9 | month << 5 | day``): ``Field_newdate::store_TIME``
  / ``get_TIME`` in sql/field.cc (MySQL and MariaDB).
* TIME2 / DATETIME2 / TIMESTAMP2 (MySQL 5.6+, MariaDB with ``mysql56_temporal_format=ON``):
  mysql-server ``mysys/my_time.cc`` (``my_time_packed_to_binary`` / ``_from_binary``,
  ``my_datetime_packed_to_binary`` / ``_from_binary``, ``my_timestamp_to_binary`` /
  ``_from_binary``, ``TIME_to_longlong_*_packed``), MariaDB ``sql/compat56.cc``. Big-endian;
  the fraction takes ``(fsp + 1) // 2`` bytes in units of 1/100, 1/10^4 or 1/10^6 s. TIME2 is a
  two's-complement-like value offset by ``1 << (8 * size - 1)``, so negative times need no
  special case once the whole field is read as one integer.
* Classic DATETIME (8-byte little-endian ``YYYYMMDDhhmmss``), TIMESTAMP (4-byte little-endian
  epoch seconds), TIME (3-byte little-endian signed ``±hhmmss``): ``Field_datetime``,
  ``Field_timestamp``, ``Field_time`` in sql/field.cc. Their TABLE_MAP metadata is 0.
* MariaDB's pre-10.0 "hires" formats (``mysql56_temporal_format=OFF``; TABLE_MAP type stays
  TIME/DATETIME/TIMESTAMP with a 1-byte fsp > 0): MariaDB sql/field.cc
  ``Field_time_hires`` / ``Field_datetime_hires`` / ``Field_timestamp_hires`` (``store_TIME``,
  ``get_date``, ``get_timestamp``), ``pack_time`` / ``unpack_time`` (sql/sql_time.cc,
  sql-common/my_time.c), byte widths from sql/sql_type.cc (``m_hires_bytes``,
  ``m_sec_part_bytes``). DATETIME is big-endian ``pack_time(t) / 10^(6-fsp)``; TIME is the same
  plus ``zero_point`` (838:59:59 + 1 s, scaled); TIMESTAMP is 4 big-endian seconds plus the
  fraction in units of 10^-fsp s.

Values: DATE -> ``datetime.date``; DATETIME -> naive ``datetime.datetime``; TIMESTAMP ->
``datetime.datetime`` in UTC; TIME -> signed ``datetime.timedelta`` (hours above 24 kept).
A date no calendar holds (zero date, month or day 0, year 0, Feb 31 stored with
ALLOW_INVALID_DATES) comes back as ``InvalidTemporal`` with the text MySQL prints for it,
fraction digits included. TIMESTAMP value 0 (with zero fraction) is the zero timestamp and
comes back as ``InvalidTemporal("0000-00-00 00:00:00")``.

Each format has a ``*_decoder`` (``(buf, offset) -> (value, end)``); the four common ones also
expose a ``*_converter`` over exactly-sized bytes for callers that cache by bytes. The
``*_from_text`` functions read the text a snapshot's SELECT gives. (The tests' encoders, the
other direction, are in tests/encoders.py.)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import TypeVar

from .errors import DecodeError, TruncatedError
from .values import InvalidTemporal

__all__ = [
    "DATETIME_HIRES_BYTES",
    "MAX_FSP",
    "TIMESTAMP_HIRES_FRACTION_BYTES",
    "TIME_HIRES_BYTES",
    "date_converter",
    "date_decoder",
    "datetime2_converter",
    "datetime2_decoder",
    "datetime2_size",
    "datetime_decoder",
    "datetime_from_packed",
    "datetime_hires_decoder",
    "fraction_layout",
    "time2_converter",
    "time2_decoder",
    "time2_size",
    "time_decoder",
    "time_from_packed",
    "time_hires_decoder",
    "timestamp2_converter",
    "timestamp2_decoder",
    "timestamp2_size",
    "timestamp_decoder",
    "timestamp_hires_decoder",
]

MAX_FSP = 6
_POW10 = (1, 10, 100, 1_000, 10_000, 100_000, 1_000_000)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO = 1_000_000

# MariaDB sql/sql_type.cc: Type_handler_{datetime,time}::m_hires_bytes, timestamp sec part.
DATETIME_HIRES_BYTES = (5, 6, 6, 7, 7, 7, 8)
TIME_HIRES_BYTES = (3, 4, 4, 5, 5, 5, 6)
TIMESTAMP_HIRES_FRACTION_BYTES = (0, 1, 1, 2, 2, 3, 3)
# TIME_MAX_VALUE_SECONDS (838:59:59) + 1, in microseconds: Field_time_hires::zero_point before
# scaling.
_TIME_HIRES_ZERO = (838 * 3600 + 59 * 60 + 59 + 1) * _MICRO

_DATETIMEF_INT_OFS = 0x8000000000  # my_time.cc DATETIMEF_INT_OFS
_T = TypeVar("_T")

DateDecoder = Callable[[bytes, int], tuple[date | InvalidTemporal, int]]
DatetimeDecoder = Callable[[bytes, int], tuple[datetime | InvalidTemporal, int]]
TimeDecoder = Callable[[bytes, int], tuple[timedelta, int]]


def _check_fsp(fsp: int, what: str) -> None:
    if not 0 <= fsp <= MAX_FSP:
        raise DecodeError(f"invalid fractional seconds precision {fsp} for {what}")


def _fraction_bytes(fsp: int) -> int:
    return (fsp + 1) // 2


def _fraction_unit(fsp: int) -> int:
    """Microseconds per stored fraction unit in the MySQL 5.6 formats."""
    return _POW10[MAX_FSP - 2 * _fraction_bytes(fsp)]


def fraction_layout(fsp: int) -> tuple[int, int]:
    """(bytes, microseconds per unit) of the fraction of a MySQL 5.6 temporal value."""
    return _fraction_bytes(fsp), _fraction_unit(fsp)


def _hires_unit(fsp: int) -> int:
    """Microseconds per stored unit for precision ``fsp`` (MariaDB ``sec_part_shift``)."""
    return _POW10[MAX_FSP - fsp]


def time2_size(fsp: int) -> int:
    return 3 + _fraction_bytes(fsp)


def datetime2_size(fsp: int) -> int:
    return 5 + _fraction_bytes(fsp)


def timestamp2_size(fsp: int) -> int:
    return 4 + _fraction_bytes(fsp)


_Fields = tuple[int, int, int, int, int, int, int]
"""(year, month, day, hour, minute, second, microsecond)"""


def _datetime_text(fields: _Fields, fsp: int) -> str:
    year, month, day, hour, minute, second, micro = fields
    text = f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}"
    if fsp:
        text += f".{micro // _hires_unit(fsp):0{fsp}d}"
    return text


_DAYS_TO_YEAR_ZERO = -719528  # 0000-01-01 in days since 1970-01-01 (proleptic Gregorian)
_DAY_MICROS = 86_400_000_000


def _year_zero_days(year: int, month: int, day: int) -> int | None:
    """Days since 1970-01-01 of a real date of year 0 (a leap year), else None."""
    if year != 0 or not 1 <= month <= 12 or day < 1:
        return None
    try:
        return _DAYS_TO_YEAR_ZERO + date(2000, month, day).toordinal() - _YEAR_2000_ORDINAL
    except ValueError:
        return None


_YEAR_2000_ORDINAL = date(2000, 1, 1).toordinal()  # 2000 is a leap year like year 0


def _year_zero_micros(fields: _Fields) -> int | None:
    year, month, day, hour, minute, second, micro = fields
    days = _year_zero_days(year, month, day)
    if days is None or hour > 23 or minute > 59 or second > 59 or micro > 999_999:
        return None
    return days * _DAY_MICROS + ((hour * 60 + minute) * 60 + second) * 1_000_000 + micro


def _make_datetime(fields: _Fields, fsp: int) -> datetime | InvalidTemporal:
    try:
        return datetime(*fields)
    except ValueError:
        return InvalidTemporal(_datetime_text(fields, fsp), _year_zero_micros(fields))


def _zero_timestamp(fsp: int) -> InvalidTemporal:
    return InvalidTemporal(_datetime_text((0, 0, 0, 0, 0, 0, 0), fsp))


def _truncated(what: str) -> TruncatedError:
    return TruncatedError(f"{what} value runs past the row image")


# --------------------------------------------------------------------------- decoders


def _fixed_width(
    size: int, convert: Callable[[bytes], _T], what: str
) -> Callable[[bytes, int], tuple[_T, int]]:
    """A ``(buf, offset)`` decoder around a converter of exactly ``size`` bytes."""

    def decode(buf: bytes, offset: int) -> tuple[_T, int]:
        end = offset + size
        raw = buf[offset:end]
        if len(raw) != size:
            raise _truncated(what)
        return convert(raw), end

    return decode


def date_converter() -> Callable[[bytes], date | InvalidTemporal]:
    """DATE from its 3 bytes: little-endian ``year << 9 | month << 5 | day``."""

    def convert(raw: bytes) -> date | InvalidTemporal:
        packed = raw[0] | raw[1] << 8 | raw[2] << 16
        year = packed >> 9
        month = (packed >> 5) & 15
        day = packed & 31
        try:
            return date(year, month, day)
        except ValueError:
            text = f"{year:04d}-{month:02d}-{day:02d}"
            return InvalidTemporal(text, _year_zero_days(year, month, day))

    return convert


def datetime2_converter(fsp: int) -> Callable[[bytes], datetime | InvalidTemporal]:
    """DATETIME2(fsp) from its ``datetime2_size(fsp)`` bytes: 5 bytes big-endian
    ``1 sign | 17 year*13+month | 5 day | 5 hour | 6 minute | 6 second``, then the fraction."""
    _check_fsp(fsp, "DATETIME")
    frac_bits = 8 * _fraction_bytes(fsp)
    frac_mask = (1 << frac_bits) - 1
    unit = _fraction_unit(fsp)
    ofs = _DATETIMEF_INT_OFS

    from_bytes = int.from_bytes

    def convert(raw: bytes) -> datetime | InvalidTemporal:
        whole = from_bytes(raw, "big")
        micro = (whole & frac_mask) * unit
        packed = (whole >> frac_bits) - ofs
        ymd = packed >> 17
        year_month = ymd >> 5
        year = year_month // 13  # divmod without the call
        month = year_month - year * 13
        day = ymd & 31
        hour = (packed >> 12) & 31
        minute = (packed >> 6) & 63
        second = packed & 63
        try:
            return datetime(year, month, day, hour, minute, second, micro)
        except ValueError:
            fields = (year, month, day, hour, minute, second, micro)
            return InvalidTemporal(_datetime_text(fields, fsp), _year_zero_micros(fields))

    return convert


def timestamp2_converter(fsp: int) -> Callable[[bytes], datetime | InvalidTemporal]:
    """TIMESTAMP2(fsp) from its ``timestamp2_size(fsp)`` bytes: 4 bytes big-endian epoch
    seconds, then the fraction."""
    _check_fsp(fsp, "TIMESTAMP")
    frac_bits = 8 * _fraction_bytes(fsp)
    frac_mask = (1 << frac_bits) - 1
    unit = _fraction_unit(fsp)
    zero = _zero_timestamp(fsp)
    epoch = _EPOCH
    utc = UTC
    fromtimestamp = datetime.fromtimestamp

    def convert(raw: bytes) -> datetime | InvalidTemporal:
        whole = int.from_bytes(raw, "big")
        seconds = whole >> frac_bits
        micro = (whole & frac_mask) * unit
        if micro:
            return epoch + timedelta(0, seconds, micro)
        if seconds:
            return fromtimestamp(seconds, utc)
        return zero

    return convert


def time2_converter(fsp: int) -> Callable[[bytes], timedelta]:
    """TIME2(fsp) from its ``time2_size(fsp)`` bytes: big-endian
    ``1 sign | 1 unused | 10 hour | 6 minute | 6 second`` + fraction, offset binary."""
    _check_fsp(fsp, "TIME")
    frac_bits = 8 * _fraction_bytes(fsp)
    frac_mask = (1 << frac_bits) - 1
    unit = _fraction_unit(fsp)
    offset_value = 1 << (8 * time2_size(fsp) - 1)

    def convert(raw: bytes) -> timedelta:
        value = int.from_bytes(raw, "big") - offset_value
        magnitude = -value if value < 0 else value
        hms = magnitude >> frac_bits
        seconds = ((hms >> 12) & 1023) * 3600 + ((hms >> 6) & 63) * 60 + (hms & 63)
        delta = timedelta(0, seconds, (magnitude & frac_mask) * unit)
        return -delta if value < 0 else delta

    return convert


def date_decoder() -> DateDecoder:
    """DATE (3 bytes)."""
    return _fixed_width(3, date_converter(), "DATE")


def datetime2_decoder(fsp: int) -> DatetimeDecoder:
    """DATETIME2(fsp), see ``datetime2_converter``."""
    return _fixed_width(datetime2_size(fsp), datetime2_converter(fsp), "DATETIME")


def timestamp2_decoder(fsp: int) -> DatetimeDecoder:
    """TIMESTAMP2(fsp), see ``timestamp2_converter``."""
    return _fixed_width(timestamp2_size(fsp), timestamp2_converter(fsp), "TIMESTAMP")


def time2_decoder(fsp: int) -> TimeDecoder:
    """TIME2(fsp), see ``time2_converter``."""
    return _fixed_width(time2_size(fsp), time2_converter(fsp), "TIME")


def datetime_decoder() -> DatetimeDecoder:
    """Classic DATETIME: 8 bytes little-endian, the decimal number ``YYYYMMDDhhmmss``."""

    def decode(buf: bytes, offset: int) -> tuple[datetime | InvalidTemporal, int]:
        end = offset + 8
        if end > len(buf):
            raise _truncated("DATETIME")
        number = int.from_bytes(buf[offset:end], "little")
        ymd, hms = divmod(number, 1_000_000)
        year, md = divmod(ymd, 10_000)
        month, day = divmod(md, 100)
        hour, ms = divmod(hms, 10_000)
        minute, second = divmod(ms, 100)
        return _make_datetime((year, month, day, hour, minute, second, 0), 0), end

    return decode


def timestamp_decoder() -> DatetimeDecoder:
    """Classic TIMESTAMP: 4 bytes little-endian epoch seconds."""
    zero = _zero_timestamp(0)
    utc = UTC

    def decode(buf: bytes, offset: int) -> tuple[datetime | InvalidTemporal, int]:
        end = offset + 4
        if end > len(buf):
            raise _truncated("TIMESTAMP")
        seconds = int.from_bytes(buf[offset:end], "little")
        if seconds:
            return datetime.fromtimestamp(seconds, utc), end
        return zero, end

    return decode


def time_decoder() -> TimeDecoder:
    """Classic TIME: 3 bytes little-endian signed, the decimal number ``±hhmmss``."""

    def decode(buf: bytes, offset: int) -> tuple[timedelta, int]:
        end = offset + 3
        if end > len(buf):
            raise _truncated("TIME")
        number = int.from_bytes(buf[offset:end], "little", signed=True)
        magnitude = -number if number < 0 else number
        hour, ms = divmod(magnitude, 10_000)
        minute, second = divmod(ms, 100)
        delta = timedelta(0, hour * 3600 + minute * 60 + second)
        return (-delta if number < 0 else delta), end

    return decode


def _unpack_hires(packed: int) -> _Fields:
    """MariaDB ``unpack_time`` for a non-negative value: (y, m, d, h, mi, s, us)."""
    rest, micro = divmod(packed, _MICRO)
    rest, second = divmod(rest, 60)
    rest, minute = divmod(rest, 60)
    rest, hour = divmod(rest, 24)
    rest, day = divmod(rest, 32)
    year, month = divmod(rest, 13)
    return year, month, day, hour, minute, second, micro


def datetime_hires_decoder(fsp: int) -> DatetimeDecoder:
    """MariaDB DATETIME(fsp>0) hires: big-endian ``pack_time(t) / 10^(6-fsp)``."""
    _check_fsp(fsp, "DATETIME")
    if fsp == 0:
        return datetime_decoder()
    size = DATETIME_HIRES_BYTES[fsp]
    unit = _hires_unit(fsp)

    def decode(buf: bytes, offset: int) -> tuple[datetime | InvalidTemporal, int]:
        end = offset + size
        if end > len(buf):
            raise _truncated("DATETIME")
        packed = int.from_bytes(buf[offset:end], "big") * unit
        return _make_datetime(_unpack_hires(packed), fsp), end

    return decode


def timestamp_hires_decoder(fsp: int) -> DatetimeDecoder:
    """MariaDB TIMESTAMP(fsp>0) hires: 4 bytes big-endian seconds + fraction in 10^-fsp s."""
    _check_fsp(fsp, "TIMESTAMP")
    if fsp == 0:
        return timestamp_decoder()
    frac_bits = 8 * TIMESTAMP_HIRES_FRACTION_BYTES[fsp]
    frac_mask = (1 << frac_bits) - 1
    size = 4 + TIMESTAMP_HIRES_FRACTION_BYTES[fsp]
    unit = _hires_unit(fsp)
    zero = _zero_timestamp(fsp)
    epoch = _EPOCH

    def decode(buf: bytes, offset: int) -> tuple[datetime | InvalidTemporal, int]:
        end = offset + size
        if end > len(buf):
            raise _truncated("TIMESTAMP")
        whole = int.from_bytes(buf[offset:end], "big")
        seconds = whole >> frac_bits
        micro = (whole & frac_mask) * unit
        if seconds or micro:
            return epoch + timedelta(0, seconds, micro), end
        return zero, end

    return decode


def time_hires_decoder(fsp: int) -> TimeDecoder:
    """MariaDB TIME(fsp>0) hires: big-endian ``pack_time(t) / 10^(6-fsp) + zero_point``."""
    _check_fsp(fsp, "TIME")
    if fsp == 0:
        return time_decoder()
    size = TIME_HIRES_BYTES[fsp]
    unit = _hires_unit(fsp)
    zero_point = _TIME_HIRES_ZERO // unit

    def decode(buf: bytes, offset: int) -> tuple[timedelta, int]:
        end = offset + size
        if end > len(buf):
            raise _truncated("TIME")
        micro = (int.from_bytes(buf[offset:end], "big") - zero_point) * unit
        return timedelta(microseconds=micro), end

    return decode


# ------------------------------------------------------------------ packed longlong forms


def datetime_from_packed(packed: int, fsp: int = MAX_FSP) -> datetime | InvalidTemporal:
    """A DATETIME from MySQL's in-memory packed longlong (``TIME_to_longlong_datetime_packed``),
    as used for temporal scalars inside binary JSON."""
    magnitude = -packed if packed < 0 else packed
    micro = magnitude & 0xFFFFFF
    ymdhms = magnitude >> 24
    ymd = ymdhms >> 17
    hms = ymdhms & 0x1FFFF
    year_month = ymd >> 5
    fields = (year_month // 13, year_month % 13, ymd & 31, hms >> 12, (hms >> 6) & 63, hms & 63)
    return _make_datetime((*fields, micro), fsp)


def time_from_packed(packed: int) -> timedelta:
    """A TIME from MySQL's packed longlong (``TIME_to_longlong_time_packed``)."""
    magnitude = -packed if packed < 0 else packed
    hms = magnitude >> 24
    seconds = ((hms >> 12) & 1023) * 3600 + ((hms >> 6) & 63) * 60 + (hms & 63)
    delta = timedelta(0, seconds, magnitude & 0xFFFFFF)
    return -delta if packed < 0 else delta


# ----------------------------------------------------------------- from SELECT's text

# SELECT prints temporals as 'YYYY-MM-DD', 'YYYY-MM-DD hh:mm:ss[.f]' and '[-]h:mm:ss[.f]'
# (the fraction with the column's fsp digits); a snapshot reads them in that form and must
# give the values the row decoders give for the same stored bytes.
_TEXT_DATETIME = re.compile(
    rb"(\d{4})-(\d{2})-(\d{2})(?: (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?)?"
)
_TEXT_TIME = re.compile(rb"(-?)(\d+):(\d{2}):(\d{2})(?:\.(\d{1,6}))?")


def _text_fields(raw: bytes) -> _Fields:
    found = _TEXT_DATETIME.fullmatch(raw)
    if found is None:
        raise DecodeError(f"not a date or datetime: {raw[:40]!r}")
    year, month, day, hour, minute, second, fraction = found.groups()
    micro = int(fraction.ljust(6, b"0")) if fraction else 0
    return (int(year), int(month), int(day), int(hour or 0), int(minute or 0),
            int(second or 0), micro)  # fmt: skip


def date_from_text(raw: bytes) -> date | InvalidTemporal:
    """DATE as SELECT prints it (the value ``date_converter`` gives for the same date)."""
    year, month, day, *_ = _text_fields(raw)
    try:
        return date(year, month, day)
    except ValueError:
        return InvalidTemporal(
            f"{year:04d}-{month:02d}-{day:02d}", _year_zero_days(year, month, day)
        )


def datetime_from_text(fsp: int) -> Callable[[bytes], datetime | InvalidTemporal]:
    """DATETIME(fsp) as SELECT prints it."""

    def convert(raw: bytes) -> datetime | InvalidTemporal:
        return _make_datetime(_text_fields(raw), fsp)

    return convert


def timestamp_from_text(fsp: int) -> Callable[[bytes], datetime | InvalidTemporal]:
    """TIMESTAMP(fsp) as SELECT prints it in a session with ``time_zone = '+00:00'``."""
    zero = _zero_timestamp(fsp)

    def convert(raw: bytes) -> datetime | InvalidTemporal:
        fields = _text_fields(raw)
        if not any(fields):
            return zero
        return datetime(*fields, tzinfo=UTC)

    return convert


def time_from_text(raw: bytes) -> timedelta:
    """TIME as SELECT prints it (``-838:59:59.000000`` .. ``838:59:59.000000``)."""
    found = _TEXT_TIME.fullmatch(raw)
    if found is None:
        raise DecodeError(f"not a time: {raw[:40]!r}")
    sign, hours, minutes, seconds, fraction = found.groups()
    micro = int(fraction.ljust(6, b"0")) if fraction else 0
    delta = timedelta(0, int(hours) * 3600 + int(minutes) * 60 + int(seconds), micro)
    return -delta if sign else delta
