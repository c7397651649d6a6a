"""A fill's value (``columns.Fill``) as a Spark literal of the column's type, exactly.

``landed.fill_values`` reads the fill's JSON value as a Python value of the column's kind
(the rules both outputs share); here it becomes a literal: numbers and text through Spark's
own casts from their decimal text, which are exact (no float on the way), binary as bytes.
A value that does not fit the column's type is ``None``: the caller treats the column as
unknown in those rows rather than guess.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..landed import fill_values as fv

__all__ = ["fill_literal"]

_BITS: dict[type[T.DataType], int] = {
    T.ByteType: 8,
    T.ShortType: 16,
    T.IntegerType: 32,
    T.LongType: 64,
}


def _lit(value: object | None) -> Column | None:
    return None if value is None else F.lit(value)


def _convert(value: Any, dtype: T.DataType) -> Column | None:
    bits = _BITS.get(type(dtype))
    if bits is not None:
        number = fv.integer(value, bits)
        return None if number is None else F.lit(str(number)).cast(dtype)
    if isinstance(dtype, T.DecimalType):
        exact = fv.exact_decimal(value, dtype.precision, dtype.scale)
        return None if exact is None else F.lit(format(exact, "f")).cast(dtype)
    if isinstance(dtype, T.FloatType | T.DoubleType):
        digits = fv.number_text(value)
        return None if digits is None else F.lit(digits).cast(dtype)
    if isinstance(dtype, T.BooleanType):
        return F.lit(bool(value)) if isinstance(value, bool | int) else None
    if isinstance(dtype, T.StringType):
        return _lit(fv.text(value))
    if isinstance(dtype, T.BinaryType):
        raw = fv.binary(value)
        return None if raw is None else F.lit(bytearray(raw))
    if isinstance(dtype, T.DateType):
        return F.lit(dt.date.fromisoformat(value).isoformat()).cast(dtype)
    if isinstance(dtype, T.TimestampNTZType):
        return F.lit(dt.datetime.fromisoformat(value).isoformat()).cast(dtype)
    if isinstance(dtype, T.TimestampType):
        micros = fv.instant_micros(value)
        return None if micros is None else F.timestamp_micros(F.lit(micros))
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
