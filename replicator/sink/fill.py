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
  which the server read in the session's time zone, GEOMETRY); Spark treats the column of
  such rows as unknown (``_absent``), never as a guess.

A column's implicit default (NOT NULL without DEFAULT) is the server's: 0, '' (a BINARY(n)
holds n zero bytes), the first ENUM label, the empty SET, and the zero date for temporal types.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
from typing import Any

from ..binlog.charsets import BINARY
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
    code = col.real_type
    raw = bytes.fromhex(text) if hexed else None
    if col.text_form is not None:
        return text
    if code in _INTEGERS or code == T.BIT:
        if raw is not None:
            return int.from_bytes(raw, "big")
        return int(decimal.Decimal(text))
    if code in (T.FLOAT, T.DOUBLE):
        return float(text)
    if code == T.NEWDECIMAL:
        scale = col.meta & 0xFF
        number = decimal.Decimal(text).quantize(decimal.Decimal(1).scaleb(-scale))
        return format(number, "f")
    if code in (T.DATE, T.NEWDATE):
        if text.startswith("0000-00-00"):
            return None
        return dt.date.fromisoformat(text[:10]).isoformat()
    if code in (T.DATETIME, T.DATETIME2):
        if text.startswith("0000-00-00"):
            return None
        return dt.datetime.fromisoformat(text).isoformat()
    if code in (T.TIMESTAMP, T.TIMESTAMP2):
        if text.startswith("0000-00-00"):
            return None
        raise _Unknown("a TIMESTAMP literal is read in the session's time zone")
    if code in (T.TIME, T.TIME2):
        return _time_micros(text)
    if code in (T.ENUM, T.SET, T.JSON):
        return text
    if code in _TEXTS:
        if col.charset is None or col.charset == BINARY:
            data = raw if raw is not None else text.encode("utf-8")
            if code == T.STRING:  # BINARY(n): padded with zero bytes
                data = data.ljust(col.string_length, b"\x00")
            return _bytes(data)
        value = raw.decode(col.charset) if raw is not None else text
        return value.rstrip(" ") if code == T.STRING else value  # CHAR drops trailing spaces
    raise _Unknown(f"no fill for a column of type {code}")


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


def _time_micros(text: str) -> int:
    sign = -1 if text.startswith("-") else 1
    body = text.lstrip("-")
    whole, _, fraction = body.partition(".")
    parts = [int(p) for p in whole.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    hours, minutes, seconds = parts
    micros = int((fraction + "000000")[:6]) if fraction else 0
    return sign * (((hours * 60 + minutes) * 60 + seconds) * 1_000_000 + micros)
