"""One Spark schema for every version of a table, and the casts that bring each version to it.

Each landing-zone file has the table's schema at its point in the binlog; an ALTER TABLE
starts new files. Spark's ``mergeSchema`` handles added columns but not MODIFY COLUMN: Spark
3.5 refuses to merge INT with BIGINT (CANNOT_MERGE_SCHEMAS), and its Parquet reader cannot
read an INT32 column as bigint. So the files of one schema version are read together, and
each version is cast to one unified schema (``unify``, ``conform_frame``):

* The columns are those of the newest version, in its order; a column only older versions
  have was dropped and is left out. Names match without regard to case, like MySQL's and
  Spark's; the newest spelling wins.
* A column's type is the narrowest one every version's values fit in exactly (``widen``):
  tinyint < smallint < int < bigint < decimal(20,0) (BIGINT UNSIGNED); integers and decimals
  meet in a decimal with enough digits, or exact text past 38 digits (as the landing zone
  writes DECIMAL(p > 38); ``changes.normalize`` writes every version's decimals there at the
  newest version's scale, ``landed.decimal_text``); float < double; an integer or decimal
  with a float becomes double; string with binary becomes binary; structs and arrays widen
  field by field. Anything else (a VARCHAR that became DATE, ...) becomes string: text is
  the one type every value can be shown in without loss, and the change is visible rather
  than a failed job.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

__all__ = ["conform", "conform_frame", "decimal_text", "find_field", "unify", "widen"]

MAX_DECIMAL_DIGITS = 38
# digits an integral type needs as a decimal
_INTEGRAL_DIGITS: dict[type[T.DataType], int] = {
    T.ByteType: 3,
    T.ShortType: 5,
    T.IntegerType: 10,
    T.LongType: 20,  # 19, but BIGINT UNSIGNED (decimal(20,0)) is the usual partner
}
_INTEGRAL_ORDER = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)


def _integral_rank(t: T.DataType) -> int | None:
    for rank, cls in enumerate(_INTEGRAL_ORDER):
        if type(t) is cls:
            return rank
    return None


def _as_decimal(t: T.DataType) -> T.DecimalType | None:
    if isinstance(t, T.DecimalType):
        return t
    digits = _INTEGRAL_DIGITS.get(type(t))
    return None if digits is None else T.DecimalType(digits, 0)


def _widen_decimals(a: T.DecimalType, b: T.DecimalType) -> T.DataType:
    scale = max(a.scale, b.scale)
    whole = max(a.precision - a.scale, b.precision - b.scale)
    if whole + scale > MAX_DECIMAL_DIGITS:
        return T.StringType()
    return T.DecimalType(whole + scale, scale)


def _is_float(t: T.DataType) -> bool:
    return isinstance(t, T.FloatType | T.DoubleType)


def widen(a: T.DataType, b: T.DataType) -> T.DataType:
    """The type both ``a`` and ``b`` values fit in (see the module doc); symmetric."""
    if a == b:
        return a
    if isinstance(a, T.NullType):
        return b
    if isinstance(b, T.NullType):
        return a
    ra, rb = _integral_rank(a), _integral_rank(b)
    if ra is not None and rb is not None:
        return a if ra >= rb else b
    da, db = _as_decimal(a), _as_decimal(b)
    if da is not None and db is not None:
        return _widen_decimals(da, db)
    if (_is_float(a) or da is not None) and (_is_float(b) or db is not None):
        return T.DoubleType()
    if isinstance(a, T.StructType) and isinstance(b, T.StructType):
        return _widen_structs(a, b)
    if isinstance(a, T.ArrayType) and isinstance(b, T.ArrayType):
        return T.ArrayType(widen(a.elementType, b.elementType), True)
    if {type(a), type(b)} == {T.StringType, T.BinaryType}:
        return T.BinaryType()
    return T.StringType()


def _widen_structs(older: T.StructType, newer: T.StructType) -> T.StructType:
    """Fields of both, the newer's first (a struct in a row keeps every field it had)."""
    fields = {f.name.lower(): f for f in older.fields}
    out: list[T.StructField] = []
    for field in newer.fields:
        old = fields.pop(field.name.lower(), None)
        data_type = field.dataType if old is None else widen(old.dataType, field.dataType)
        out.append(T.StructField(field.name, data_type, True))
    out.extend(T.StructField(f.name, f.dataType, True) for f in fields.values())
    return T.StructType(out)


def find_field(schema: T.StructType, name: str) -> T.StructField | None:
    """The field named ``name`` without regard to case, or None."""
    key = name.lower()
    for field in schema.fields:
        if field.name.lower() == key:
            return field
    return None


def unify(versions: Iterable[T.StructType]) -> T.StructType:
    """The schema all ``versions`` (oldest first) are read as: the newest version's columns,
    each widened over every version that has it."""
    ordered = list(versions)
    if not ordered:
        return T.StructType([])
    newest = ordered[-1]
    out: list[T.StructField] = []
    for field in newest.fields:
        data_type = field.dataType
        for version in ordered[:-1]:
            old = find_field(version, field.name)
            if old is not None:
                data_type = widen(old.dataType, data_type)
        out.append(T.StructField(field.name, data_type, True))
    return T.StructType(out)


def _null(dst: T.DataType) -> Column:
    return F.lit(None).cast(dst)


def conform(col: Column, src: T.DataType, dst: T.DataType) -> Column:
    """``col`` (of type ``src``) as type ``dst``, which ``widen`` produced from ``src``."""
    if src == dst:
        return col
    if isinstance(src, T.NullType):
        return _null(dst)
    if isinstance(dst, T.StructType):
        if not isinstance(src, T.StructType):
            return _null(dst)
        parts = []
        for field in dst.fields:
            have = find_field(src, field.name)
            part = (
                _null(field.dataType)
                if have is None
                else conform(col.getField(have.name), have.dataType, field.dataType)
            )
            parts.append(part.alias(field.name))
        return F.when(col.isNull(), _null(dst)).otherwise(F.struct(*parts))
    if isinstance(dst, T.ArrayType) and isinstance(src, T.ArrayType):
        element_src, element_dst = src.elementType, dst.elementType
        return F.transform(col, lambda x: conform(x, element_src, element_dst))
    if isinstance(dst, T.StringType) and isinstance(src, T.DecimalType):
        # at the decimal's own scale: a version at another scale than the column's newest
        # was written as text at the newest's already (``changes.normalize``)
        return decimal_text(col, src.scale)
    return col.cast(dst)


def decimal_text(col: Column, scale: int) -> Column:
    """A decimal as its exact digits with ``scale`` decimals, without exponent, as the
    landing zone writes DECIMAL(p > 38): Spark's own cast gives 0E-10, and format_string
    cannot take a Decimal; format_number is exact (java.math.BigDecimal, US symbols) once
    its grouping commas are gone."""
    return F.regexp_replace(F.format_number(col, scale), ",", "")


def conform_frame(
    df: DataFrame,
    dst: T.StructType,
    *,
    extra: Mapping[str, Column] | None = None,
) -> DataFrame:
    """``df``'s columns cast to ``dst`` (missing ones null, names matched without regard to
    case), followed by the ``extra`` columns."""
    columns: list[Column] = []
    for field in dst.fields:
        have = find_field(df.schema, field.name)
        column = (
            _null(field.dataType)
            if have is None
            else conform(F.col(_quote(have.name)), have.dataType, field.dataType)
        )
        columns.append(column.alias(field.name))
    columns.extend(value.alias(name) for name, value in (extra or {}).items())
    return df.select(*columns)


def _quote(name: str) -> str:
    """A column name as ``F.col`` takes it literally (dots and backticks in MySQL names)."""
    return "`" + name.replace("`", "``") + "`"
