"""A fill's value (``columns.Fill``) as a Spark literal of the column's type, exactly.

The landing zone writes the value JSON-encoded as the column lands (``sink.fill``): a number
for integers, BIT, YEAR, FLOAT/DOUBLE and TIME (microseconds; Spark shows TIME as bigint); a
string for DECIMAL (its digits), DATE (``YYYY-MM-DD``), DATETIME (ISO, naive), text, ENUM/SET
labels, JSON and UUID/INET; ``{"base64": ...}`` for binary strings. Numbers and text go
through Spark's own casts from their decimal text, which are exact (no float on the way);
binary through ``unbase64``. A value that does not fit the column's type is ``None``: the
caller treats the column as unknown in those rows rather than guess.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import decimal
import json
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

__all__ = ["fill_literal"]

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_BITS: dict[type[T.DataType], int] = {
    T.ByteType: 8,
    T.ShortType: 16,
    T.IntegerType: 32,
    T.LongType: 64,
}


def _number_text(value: Any) -> str | None:
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


def _integral(value: Any, dtype: T.DataType) -> Column | None:
    text = _number_text(value)
    if text is None:
        return None
    number = decimal.Decimal(text)
    bits = _BITS[type(dtype)]
    if number != number.to_integral_value() or not -(2 ** (bits - 1)) <= number < 2 ** (bits - 1):
        return None  # Spark's cast would make it null
    return F.lit(str(int(number))).cast(dtype)


def _decimal(value: Any, dtype: T.DecimalType) -> Column | None:
    text = _number_text(value)
    if text is None:
        return None
    number = decimal.Decimal(text)
    exact = number.quantize(decimal.Decimal(1).scaleb(-dtype.scale))
    if exact != number or len(exact.as_tuple().digits) > dtype.precision:
        return None  # Spark's cast would round it, or make it null
    return F.lit(format(exact, "f")).cast(dtype)


def _timestamp(value: Any) -> Column | None:
    """An instant: ISO text with an offset (naive text is taken as UTC)."""
    if not isinstance(value, str):
        return None
    moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    micros = (moment - _EPOCH) // dt.timedelta(microseconds=1)
    return F.timestamp_micros(F.lit(micros))


def _binary(value: Any) -> Column | None:
    if isinstance(value, dict) and isinstance(value.get("base64"), str):
        try:
            base64.b64decode(value["base64"], validate=True)
        except binascii.Error:
            return None
        return F.unbase64(F.lit(value["base64"]))
    if isinstance(value, str):
        return F.lit(value).cast(T.BinaryType())
    return None


def _text(value: Any) -> Column | None:
    if isinstance(value, str):
        return F.lit(value)
    if isinstance(value, dict):
        return None
    if isinstance(value, bool | int | float):
        return F.lit(_number_text(value))
    return F.lit(json.dumps(value))


def _convert(value: Any, dtype: T.DataType) -> Column | None:
    if isinstance(dtype, _INTEGRAL):
        return _integral(value, dtype)
    if isinstance(dtype, T.DecimalType):
        return _decimal(value, dtype)
    if isinstance(dtype, T.FloatType | T.DoubleType):
        text = _number_text(value)
        return None if text is None else F.lit(text).cast(dtype)
    if isinstance(dtype, T.BooleanType):
        return F.lit(bool(value)) if isinstance(value, bool | int) else None
    if isinstance(dtype, T.StringType):
        return _text(value)
    if isinstance(dtype, T.BinaryType):
        return _binary(value)
    if isinstance(dtype, T.DateType):
        return F.lit(dt.date.fromisoformat(value).isoformat()).cast(dtype)
    if isinstance(dtype, T.TimestampNTZType):
        return F.lit(dt.datetime.fromisoformat(value).isoformat()).cast(dtype)
    if isinstance(dtype, T.TimestampType):
        return _timestamp(value)
    if isinstance(dtype, T.ArrayType) and isinstance(value, list):
        items = [_convert(v, dtype.elementType) for v in value]
        if any(item is None for item in items):
            return None
        return F.array(*[item for item in items if item is not None]).cast(dtype)
    if isinstance(dtype, T.NullType):
        return F.lit(None)
    return None


def fill_literal(value: Any, dtype: T.DataType) -> Column | None:
    """``value`` (a fill's JSON value) as a literal of ``dtype``; None when it does not fit."""
    if value is None:
        return F.lit(None).cast(dtype)
    try:
        found = _convert(value, dtype)
    except (ValueError, TypeError, ArithmeticError):
        return None
    return None if found is None else found.cast(dtype)
