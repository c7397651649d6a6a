"""The value older rows hold for a column added later, as the landing zone records it.

When ``ALTER TABLE ... ADD COLUMN`` adds a column, the server fills every existing row with the
column's default, and the binlog logs nothing for those rows. The schema history keeps that
default as the column's ``fill`` (``schema.history``); the column's Parquet field carries it,
converted to the value the column lands as, under ``replicator.fill``:

* ``{"kind": "value", "value": V}``: V is JSON of the landed value: a number for integers,
  BIT, YEAR, FLOAT/DOUBLE and TIME (microseconds); a string for DECIMAL (its exact digits),
  DATE (``YYYY-MM-DD``), DATETIME (ISO, naive), text, ENUM/SET labels, JSON and UUID/INET;
  ``{"base64": ...}`` for binary strings.
* ``{"kind": "null"}``: the rows hold NULL (DEFAULT NULL, a nullable column without a
  default, or a zero date, which lands as null).
* ``{"kind": "unknown", "why": ...}``: the binlog cannot tell (an expression default such
  as CURRENT_TIMESTAMP or (uuid()), AUTO_INCREMENT, a generated column, a TIMESTAMP literal,
  which the server read in the session's time zone, GEOMETRY, a constant not written as the
  server stores it, see below); Spark treats the column of such rows as unknown
  (``_absent``), never as a guess.

A constant DEFAULT is kept as written (``schema.ddl_tree``), and the server converts it to
the column's type when it fills the rows: it rounds DECIMAL(5,2) 1.005 half up to 1.01 and
INT 1.7 to 2, reads YEAR 69 as 2069, TIME '10:00' as 10:00:00 and 1000 as 00:10:00, cuts or
rounds fraction digits past the column's, and matches ENUM/SET labels under the column's
collation ('B' is stored as 'b'). So a value is given only for a literal already in the
form the server stores: an integer for integer types and BIT (in range), no more decimals
than a DECIMAL's scale, a four-digit YEAR (1901-2155), ``[-]HH:MM:SS`` TIME and
``YYYY-MM-DD[ HH:MM:SS]`` DATE/DATETIME with no more fraction digits than the column's, ENUM
and SET labels exactly as defined, in definition order, where no label before could match
under a collation (printable ASCII, none equal but for case), text the column's character set
holds, a lower-case UUID, an INET4 without leading zeros; hex and bit literals only for
integers, BIT and strings. Anything else is unknown.

A column's implicit default (NOT NULL without DEFAULT) is the server's: 0, '' (a BINARY(n)
holds n zero bytes), the first ENUM label, the empty SET, and the zero date for temporal types.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
import re
from typing import Any

from ..binlog.charsets import BINARY, charset_for_collation
from ..binlog.constants import ColumnType as T
from ..binlog.schema import ColumnDef

_INTEGERS = frozenset({T.TINY, T.SHORT, T.INT24, T.LONG, T.LONGLONG, T.YEAR})
_TEXTS = frozenset({T.VARCHAR, T.VAR_STRING, T.STRING, T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB,
                    T.LONG_BLOB})  # fmt: skip
_ZERO_DATE_TYPES = frozenset({T.DATE, T.NEWDATE, T.DATETIME, T.DATETIME2, T.TIMESTAMP,
                              T.TIMESTAMP2})  # fmt: skip
_IMPLICIT_TEXT = {"uuid": "00000000-0000-0000-0000-000000000000", "inet4": "0.0.0.0",
                  "inet6": "::"}  # fmt: skip


class _Unknown(Exception):
    pass


def landing_fill(col: ColumnDef) -> dict[str, Any] | None:
    """The ``replicator.fill`` document of a column (None: the column has no fill)."""
    if col.fill is None:
        return None
    fill = json.loads(col.fill)
    kind = fill.get("kind")
    try:
        if kind == "null":
            return {"kind": "null"}
        if kind == "value":
            value = _value(col, str(fill.get("text", "")), bool(fill.get("hex", False)))
        elif kind == "implicit":
            value = _implicit(col)
        else:
            raise _Unknown(f"the default is an expression ({fill.get('text') or kind})")
    except _Unknown as exc:
        return {"kind": "unknown", "why": str(exc)}
    except (ValueError, ArithmeticError) as exc:
        return {"kind": "unknown", "why": f"default {fill.get('text')!r} not understood: {exc}"}
    return {"kind": "null"} if value is None else {"kind": "value", "value": value}


def _bytes(data: bytes) -> dict[str, str]:
    return {"base64": base64.b64encode(data).decode("ascii")}


def _value(col: ColumnDef, text: str, hexed: bool) -> object:
    """The landed value of a constant DEFAULT, only when ``text`` is already in the form the
    server stores for the column's type; any other literal (one the server rounds, truncates,
    reads another way or matches loosely) raises ``_Unknown``."""
    code = col.real_type
    raw = bytes.fromhex(text) if hexed else None
    if raw is not None and (code == T.YEAR or code not in (*_INTEGERS, T.BIT, *_TEXTS)):
        raise _Unknown(f"the server converts the bytes of {text!r} for this type")
    if col.text_form is not None:
        return _canonical_text_form(col.text_form, text)
    if code == T.YEAR:
        return _year(text)
    if code in _INTEGERS or code == T.BIT:
        number = int.from_bytes(raw, "big") if raw is not None else _integer(text)
        return _in_range(col, number)
    if code in (T.FLOAT, T.DOUBLE):
        return _float(col, text)
    if code == T.NEWDECIMAL:
        return _decimal(col, text)
    if code in (T.DATE, T.NEWDATE):
        if _ZERO_DATE.fullmatch(text):
            return None
        return dt.date.fromisoformat(_canonical(_DATE, text)).isoformat()
    if code in (T.DATETIME, T.DATETIME2):
        if _ZERO_DATE.fullmatch(text):
            return None
        _fraction(col, _canonical(_DATETIME, text))
        return dt.datetime.fromisoformat(text).isoformat()
    if code in (T.TIMESTAMP, T.TIMESTAMP2):
        if _ZERO_DATE.fullmatch(text):
            return None
        raise _Unknown("a TIMESTAMP literal is read in the session's time zone")
    if code in (T.TIME, T.TIME2):
        return _time_micros(col, text)
    if code == T.ENUM:
        return _labels(col.enum_values, text, one=True)
    if code == T.SET:
        return _labels(col.set_values, text, one=False)
    if code == T.JSON:
        return text
    if code in _TEXTS:
        if col.charset is None or col.charset == BINARY:
            data = raw if raw is not None else text.encode("utf-8")
            if code == T.STRING:  # BINARY(n): padded with zero bytes
                data = data.ljust(col.string_length, b"\x00")
            return _bytes(data)
        value = raw.decode(col.charset) if raw is not None else text
        _storable(col, value)
        return value.rstrip(" ") if code == T.STRING else value  # CHAR drops trailing spaces
    raise _Unknown(f"no fill for a column of type {code}")


# The forms a DEFAULT is taken in as the server stores it (anything else is unknown: the server
# rounds a DECIMAL half up and an INT to the nearest, reads YEAR 69 as 2069, TIME '10:00' as
# hours and minutes and 1000 as 00:10:00, truncates or rounds extra fraction digits, and
# matches ENUM/SET labels under the column's collation).
_INTEGER = re.compile(r"-?[0-9]+")
_DECIMAL = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
_FLOAT = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
_YEAR = re.compile(r"[0-9]{4}")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_DATETIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}(?: [0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?)?")
_TIME = re.compile(r"(-?)([0-9]{2,3}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?")
_ZERO_DATE = re.compile(r"0000-00-00(?: 00:00:00(?:\.0+)?)?")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_INET4 = re.compile(r"(?:0|[1-9][0-9]{0,2})(?:\.(?:0|[1-9][0-9]{0,2})){3}")
_BYTES: dict[int, int] = {T.TINY: 1, T.SHORT: 2, T.INT24: 3, T.LONG: 4, T.LONGLONG: 8}
_TIME_MAX = ((838 * 60 + 59) * 60 + 59) * 1_000_000 + 999_999


def _storable(col: ColumnDef, value: str) -> None:
    """Text the column's character set holds as it is (the server stores '?' for the rest)."""
    assert col.charset is not None
    try:
        value.encode(col.charset)
    except (UnicodeError, LookupError) as exc:
        raise _Unknown(f"{value!r} is not all in the column's character set") from exc
    # utf8mb3 holds no 4-byte character; where the row metadata names no collation, the
    # schema history has told its utf8mb3 columns' such defaults apart (``history.fill_of``)
    wide = any(ord(c) > 0xFFFF for c in value)
    if wide and col.charset == "utf-8" and _charset_of(col) == "utf8mb3":
        raise _Unknown(f"{value!r} is not all in the column's character set (utf8mb3)")


def _charset_of(col: ColumnDef) -> str | None:
    return None if col.collation_id is None else charset_for_collation(col.collation_id)


def _canonical(form: re.Pattern[str], text: str) -> str:
    if form.fullmatch(text) is None:
        raise _Unknown(f"the server stores the default {text!r} in another form")
    return text


def _integer(text: str) -> int:
    return int(_canonical(_INTEGER, text))


def _in_range(col: ColumnDef, number: int) -> int:
    code = col.real_type
    if code == T.BIT:
        low, high = 0, 2**col.bit_width - 1
    elif col.unsigned:
        low, high = 0, 2 ** (8 * _BYTES[code]) - 1
    else:
        low, high = -(2 ** (8 * _BYTES[code] - 1)), 2 ** (8 * _BYTES[code] - 1) - 1
    if not low <= number <= high:
        raise _Unknown(f"the default {number} is out of the column's range")
    return number


def _year(text: str) -> int:
    year = int(_canonical(_YEAR, text))
    if not 1901 <= year <= 2155:
        raise _Unknown(f"the server reads the year {text!r} another way")
    return year


def _float(col: ColumnDef, text: str) -> float:
    number = float(_canonical(_FLOAT, text))
    if not math.isfinite(number) or (col.unsigned and number < 0):
        raise _Unknown(f"the default {text!r} is out of the column's range")
    if number == 0 and text.startswith("-"):
        raise _Unknown(f"the server may store {text!r} as 0 or -0")
    return number


def _decimal(col: ColumnDef, text: str) -> str:
    precision, scale = col.meta >> 8, col.meta & 0xFF
    number = decimal.Decimal(_canonical(_DECIMAL, text))
    context = decimal.Context(prec=200)
    exact = number.quantize(decimal.Decimal(1).scaleb(-scale), context=context)
    if exact != number:
        raise _Unknown(f"the server rounds the default {text!r} to {scale} decimals")
    if exact.is_zero():
        exact = abs(exact)  # -0 is stored as 0
    if exact.adjusted() >= precision - scale or (col.unsigned and exact < 0):
        raise _Unknown(f"the default {text!r} is out of the column's range")
    return format(exact, "f")


def _fraction(col: ColumnDef, text: str) -> None:
    """Fraction digits beyond the column's (the server truncates or rounds them) are unknown."""
    _, dot, fraction = text.partition(".")
    if dot and len(fraction) > col.meta:
        raise _Unknown(f"the server cuts {text!r} to {col.meta} fraction digits")


def _time_micros(col: ColumnDef, text: str) -> int:
    found = _TIME.fullmatch(text)
    if found is None:
        raise _Unknown(f"the server reads the time {text!r} another way")
    sign, hours, minutes, seconds, fraction = found.groups()
    if int(minutes) > 59 or int(seconds) > 59:
        raise _Unknown(f"the server reads the time {text!r} another way")
    if fraction is not None:
        _fraction(col, text)
    micros = int((fraction or "").ljust(6, "0"))
    total = ((int(hours) * 60 + int(minutes)) * 60 + int(seconds)) * 1_000_000 + micros
    if total > _TIME_MAX:
        raise _Unknown(f"the time {text!r} is out of TIME's range")
    return -total if sign else total


def _labels(labels: tuple[str, ...] | None, text: str, *, one: bool) -> str:
    """An ENUM label, or SET labels, exactly as defined, in definition order, where no label
    before it could match it under the column's collation (the server takes the first match):
    the labels up to it are printable ASCII, and no earlier one differs only by case."""
    if not labels:
        raise _Unknown("the labels are not known")
    if text == "" and not one:
        return ""
    chosen = [text] if one else text.split(",")
    indexes = []
    for label in chosen:
        if label not in labels:
            raise _Unknown(f"{label!r} is not a label as defined: the server matches it")
        index = labels.index(label)
        earlier = labels[: index + 1]
        if not all(x.isascii() and x.isprintable() for x in earlier):
            raise _Unknown(f"the collation decides which label {label!r} matches")
        if any(x.casefold() == label.casefold() for x in labels[:index]):
            raise _Unknown(f"the collation decides which label {label!r} matches")
        indexes.append(index)
    if indexes != sorted(set(indexes)):
        raise _Unknown(f"the server orders the labels of {text!r} as defined")
    return text


def _canonical_text_form(form: str, text: str) -> str:
    if form == "uuid" and _UUID.fullmatch(text):
        return text
    if form == "inet4" and _INET4.fullmatch(text) and all(int(p) < 256 for p in text.split(".")):
        return text
    raise _Unknown(f"the server stores the {form} {text!r} in its own form")


def _implicit(col: ColumnDef) -> object:
    code = col.real_type
    if col.text_form is not None:
        return _IMPLICIT_TEXT[col.text_form]
    if code in _INTEGERS or code == T.BIT:
        return 0
    if code in (T.FLOAT, T.DOUBLE):
        return 0.0
    if code == T.NEWDECIMAL:
        return _value(col, "0", False)
    if code in _ZERO_DATE_TYPES:
        return None  # the zero date lands as null
    if code in (T.TIME, T.TIME2):
        return 0
    if code == T.ENUM:
        labels = col.enum_values
        if not labels:
            raise _Unknown("ENUM labels unknown")
        return labels[0]
    if code == T.SET:
        return ""
    if code in _TEXTS:
        if col.charset is None or col.charset == BINARY:
            return _bytes(b"\x00" * col.string_length if code == T.STRING else b"")
        return ""
    raise _Unknown(f"no implicit default known for a column of type {code}")
