"""A fill's JSON value (``columns.Fill``) read exactly as a Python value, for both outputs.

The landing zone writes the value JSON-encoded as the column lands (``sink.fill``): a number
for integers, BIT, YEAR, FLOAT/DOUBLE and TIME (microseconds); a string for DECIMAL (its
digits), DATE (``YYYY-MM-DD``), DATETIME (ISO, naive), text, ENUM/SET labels, JSON and
UUID/INET; ``{"base64": ...}`` for binary strings. Each reader here takes one kind of value;
Spark's literals (``spark.fills``) and Arrow's scalars (``delta.changes.fill_value``) are made
from what they return, so both outputs fill the same rows with the same values. Numbers go
through their decimal text, never through a float they do not fit. ``None`` is a value that
does not fit the kind: the caller treats the column as unknown in those rows rather than
guess. Malformed text raises ``ValueError``, which the callers take as not fitting too.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import decimal
import json
from typing import Any

__all__ = ["binary", "exact_decimal", "instant_micros", "integer", "number_text", "text"]

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def number_text(value: Any) -> str | None:
    """A JSON number (or a string of decimal digits) as decimal text."""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        try:
            return str(decimal.Decimal(value))
        except decimal.InvalidOperation:
            return None
    return None


def integer(value: Any, bits: int) -> int | None:
    """A whole number that fits a signed integer of ``bits`` bits."""
    digits = number_text(value)
    if digits is None:
        return None
    number = decimal.Decimal(digits)
    if number != number.to_integral_value() or not -(2 ** (bits - 1)) <= number < 2 ** (bits - 1):
        return None
    return int(number)


def exact_decimal(value: Any, precision: int, scale: int) -> decimal.Decimal | None:
    """A number that ``DECIMAL(precision, scale)`` holds without rounding."""
    digits = number_text(value)
    if digits is None:
        return None
    number = decimal.Decimal(digits)
    exact = number.quantize(decimal.Decimal(1).scaleb(-scale))
    if exact != number or len(exact.as_tuple().digits) > precision:
        return None
    return exact


def instant_micros(value: Any) -> int | None:
    """An instant, microseconds since the epoch: ISO text with an offset (naive text is taken
    as UTC)."""
    if not isinstance(value, str):
        return None
    moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return (moment - _EPOCH) // dt.timedelta(microseconds=1)


def binary(value: Any) -> bytes | None:
    """Bytes: ``{"base64": ...}``, or text as its UTF-8 bytes."""
    if isinstance(value, dict) and isinstance(value.get("base64"), str):
        try:
            return base64.b64decode(value["base64"], validate=True)
        except binascii.Error:
            return None
    if isinstance(value, str):
        return value.encode("utf-8")
    return None


def text(value: Any) -> str | None:
    """Text: a string as it is, a number as its decimal text, a JSON document as JSON (a
    ``{"base64": ...}`` binary value is not text)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return None
    if isinstance(value, bool | int | float):
        return number_text(value)
    return json.dumps(value)
