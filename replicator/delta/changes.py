"""Reading a table's committed row changes in one schema with pyarrow, ready to fold.

The Spark path (``replicator.spark.changes``) ported to Arrow, with the same meaning and the
same values, so that ``--format delta`` and the Spark output agree:

* Types are those Spark shows for the landing zone's Arrow types (``spark.type_map``;
  ``output_type``): unsigned integers one size up, BIGINT UNSIGNED as decimal(20,0) (exact),
  TIME as bigint microseconds, the NULL type as int. Each is a type Delta Lake stores.
* Files are read one schema version at a time (``file_versions``) and brought to the newest
  version's columns by column id (``align``: a renamed column keeps its values, by name when
  a side has no ids; a column an older version lacks holds its fill, or null listed in
  ``_absent`` and ``UNKNOWN`` when the fill is an expression default the binlog does not
  carry). The before image (``_before_key``, or ``_before`` of older writers) is renamed and
  filled the same way.
* The types are widened over every version (``widen``/``unify``, the rules of
  ``spark.schema``) and each version cast to them (``conform``) exactly: a value that does
  not fit its new type exactly stops the read naming the table and column, never rounds.
  A DECIMAL shown as text (widened past 38 digits) is written at the scale of the column's
  newest version (``_decimals_as_text``, the rules of ``landed.decimal_text``, as the Spark
  path), as the source shows it after the ALTER, so that a key stays one key across it.
* ``read_lineage`` reads the rows of a lineage's data segments only, without the row changes
  a replay landed a second time (``replayed``); ``read_files`` reads given files whole.

The result (``ArrowRead.changes``) has the layout of ``layout`` (the table's columns, ``META``,
``_absent``, ``_before_key``, ``UNKNOWN``), sorted by ``_seq``. Files are size-checked before
they are read (``CommittedFile.check_size``) and read through the landing zone's filesystem
(a directory or an object store), only the columns a step needs.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import struct
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import IntegrityError
from ..landed import fill_values as fv
from ..landed.columns import (
    Fill,
    Source,
    find_field,
    match,
    refuse_working_columns,
    resolve_key,
    table_columns,
)
from ..landed.committed import CommittedFile, file_key, unreadable
from ..landed.compacted import reads
from ..landed.contract import AUX, FIELD_TYPE_KEY
from ..landed.decimal_text import (
    not_decimal_text,
    rescaled,
    text_pattern,
    text_scales,
    zeros,
)
from ..landed.lineage import Lineage, Segment
from ..landed.options import MaterializeOptions
from ..landed.versions import FileVersion, file_versions, identity_columns
from . import layout
from .layout import ABSENT, BEFORE, BEFORE_KEY, META, META_SCHEMA, UNKNOWN

__all__ = [
    "AUX",
    "ArrowModel",
    "ArrowRead",
    "FileVersion",
    "conform",
    "file_versions",
    "fill_value",
    "find_field",
    "output_type",
    "read_files",
    "read_lineage",
    "replayed",
    "unify",
    "widen",
]

MAX_DECIMAL_DIGITS = 38
_NAMES = pa.list_(pa.string())
_EMPTY_NAMES = pa.scalar([], _NAMES)

# ------------------------------------------------------------------------------------ types

_OUTPUT: dict[pa.DataType, pa.DataType] = {
    pa.uint8(): pa.int16(),
    pa.uint16(): pa.int32(),
    pa.uint32(): pa.int64(),
    pa.uint64(): pa.decimal128(20, 0),
    pa.duration("us"): pa.int64(),
    pa.null(): pa.int32(),
}
_KEPT = frozenset(
    {
        pa.int8(),
        pa.int16(),
        pa.int32(),
        pa.int64(),
        pa.float32(),
        pa.float64(),
        pa.string(),
        pa.binary(),
        pa.bool_(),
        pa.date32(),
        pa.timestamp("us"),
        pa.timestamp("us", tz="UTC"),
    }
)
_INTEGRAL = (pa.int8(), pa.int16(), pa.int32(), pa.int64())
# digits an integral type needs as a decimal; 19 for bigint, but BIGINT UNSIGNED
# (decimal(20,0)) is the usual partner (as ``spark.schema``)
_INTEGRAL_DIGITS = dict(zip(_INTEGRAL, (3, 5, 10, 20), strict=True))


def output_type(arrow_type: pa.DataType) -> pa.DataType:
    """The type the current state holds a landing-zone column of ``arrow_type`` as: the one
    Spark shows (``spark.type_map``), so that both formats agree, and one Delta Lake stores.
    Struct fields and list items are nullable, without metadata."""
    mapped = _OUTPUT.get(arrow_type)
    if mapped is not None:
        return mapped
    if arrow_type in _KEPT:
        return arrow_type
    if pa.types.is_decimal(arrow_type) and arrow_type.precision <= MAX_DECIMAL_DIGITS:
        return pa.decimal128(arrow_type.precision, arrow_type.scale)
    if pa.types.is_list(arrow_type):
        return pa.list_(output_type(arrow_type.value_type))
    if pa.types.is_struct(arrow_type):
        return pa.struct([pa.field(f.name, output_type(f.type)) for f in arrow_type])
    raise IntegrityError(
        f"the landing zone writes no {arrow_type} column",
        hint="the file was written by a newer replicator, or changed by hand",
    )


def _integral_rank(t: pa.DataType) -> int | None:
    return _INTEGRAL.index(t) if t in _INTEGRAL else None


def _as_decimal(t: pa.DataType) -> pa.Decimal128Type | None:
    if isinstance(t, pa.Decimal128Type):
        return t
    digits = _INTEGRAL_DIGITS.get(t)
    return None if digits is None else pa.decimal128(digits, 0)


def _widen_decimals(a: pa.Decimal128Type, b: pa.Decimal128Type) -> pa.DataType:
    scale = max(a.scale, b.scale)
    whole = max(a.precision - a.scale, b.precision - b.scale)
    if whole + scale > MAX_DECIMAL_DIGITS:
        return pa.string()
    return pa.decimal128(whole + scale, scale)


def _is_float(t: pa.DataType) -> bool:
    return bool(pa.types.is_floating(t))


def widen(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    """The type both ``a`` and ``b`` values fit in (output types; ``spark.schema``'s rules):
    tinyint < smallint < int < bigint < decimal(20,0); integers and decimals meet in a
    decimal with enough digits, or text past 38 digits; float < double; an integer or
    decimal with a float is double; string with binary is binary; structs and lists widen
    field by field; anything else is string. Symmetric."""
    if a == b:
        return a
    if pa.types.is_null(a):
        return b
    if pa.types.is_null(b):
        return a
    ra, rb = _integral_rank(a), _integral_rank(b)
    if ra is not None and rb is not None:
        return a if ra >= rb else b
    da, db = _as_decimal(a), _as_decimal(b)
    if da is not None and db is not None:
        return _widen_decimals(da, db)
    if (_is_float(a) or da is not None) and (_is_float(b) or db is not None):
        return pa.float64()
    if pa.types.is_struct(a) and pa.types.is_struct(b):
        return _widen_structs(a, b)
    if pa.types.is_list(a) and pa.types.is_list(b):
        return pa.list_(widen(a.value_type, b.value_type))
    if {a, b} == {pa.string(), pa.binary()}:
        return pa.binary()
    return pa.string()


def _fields(t: pa.DataType) -> list[pa.Field]:
    return [t.field(i) for i in range(t.num_fields)]


def _widen_structs(older: pa.DataType, newer: pa.DataType) -> pa.DataType:
    """Fields of both, the newer's first (a struct in a row keeps every field it had)."""
    fields = {f.name.lower(): f for f in _fields(older)}
    out: list[pa.Field] = []
    for field in _fields(newer):
        old = fields.pop(field.name.lower(), None)
        data_type = field.type if old is None else widen(old.type, field.type)
        out.append(pa.field(field.name, data_type))
    out.extend(pa.field(f.name, f.type) for f in fields.values())
    return pa.struct(out)


def unify(versions: Iterable[pa.Schema]) -> pa.Schema:
    """The schema all ``versions`` (oldest first; output types) are read as: the newest
    version's columns, in its order and spelling, each widened over every version that has
    it (names without regard to case); columns only older versions have were dropped."""
    ordered = list(versions)
    if not ordered:
        return pa.schema([])
    newest = ordered[-1]
    out: list[pa.Field] = []
    for field in newest:
        data_type = field.type
        for version in ordered[:-1]:
            old = find_field(version, field.name)
            if old is not None:
                data_type = widen(old.type, data_type)
        out.append(pa.field(field.name, data_type))
    return pa.schema(out)


# ------------------------------------------------------------------------------- values


class _Inexact(Exception):
    """A value that has no exact form in the type asked for."""


def _chunks(values: pa.Array | pa.ChunkedArray) -> list[pa.Array]:
    return list(values.chunks) if isinstance(values, pa.ChunkedArray) else [values]


def _java_float_text(value: float, digits: str, exponent: int) -> str:
    """Java's ``Double.toString``/``Float.toString`` form of a finite non-zero value whose
    shortest decimal digits are ``digits`` times 10**``exponent`` (Spark's cast to string)."""
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    point = len(digits) + exponent  # digits before the decimal point
    if 1e-3 <= magnitude < 1e7:
        if point <= 0:
            whole, fraction = "0", "0" * -point + digits
        elif point >= len(digits):
            whole, fraction = digits + "0" * (point - len(digits)), ""
        else:
            whole, fraction = digits[:point], digits[point:]
        return f"{sign}{whole}.{fraction.rstrip('0') or '0'}"
    fraction = digits[1:].rstrip("0") or "0"
    return f"{sign}{digits[0]}.{fraction}E{point - 1}"


def _shortest(value: float, single: bool) -> tuple[str, int]:
    """The shortest decimal digits (and exponent) that read back as ``value``, a double or
    (``single``) a float."""
    if single:
        for precision in range(1, 10):
            text = f"{value:.{precision}g}"
            if _to_float32(float(text)) == value:
                break
    else:
        text = repr(value)
    sign, digit_tuple, exponent = decimal.Decimal(text).normalize().as_tuple()
    del sign
    assert isinstance(exponent, int)
    return "".join(map(str, digit_tuple)), exponent


def _float_text(value: float, single: bool) -> str:
    """Java's ``Double.toString``/``Float.toString`` (Spark's cast to string) as specified:
    the fewest digits that tell the value from its neighbours (JDK 19 and later; JDK 17's
    prints a few doubles with more digits than needed, e.g. 2.4999999999999998E22 for
    2.5E22: the same value)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    digits, exponent = _shortest(value, single)
    if len(digits) == 1 and not 1e-3 <= abs(value) < 1e7:
        # d.dE...: two digits are shown, so Java shows the two closest to the value (4.9E-324
        # for the least double, not 5.0E-324)
        exact = decimal.Decimal(value)
        two = exact.scaleb(-exact.adjusted()).quantize(decimal.Decimal("0.1"))
        shown = two.scaleb(exact.adjusted())
        back = _to_float32(float(shown)) if single else float(shown)
        if back == value:
            _, digit_tuple, power = shown.as_tuple()
            assert isinstance(power, int)
            digits, exponent = "".join(map(str, digit_tuple)).rstrip("0") or "0", power
            exponent += len(digit_tuple) - len(digits)
    return _java_float_text(value, digits, exponent)


def _timestamp_text(value: dt.datetime) -> str:
    """Spark's cast of a timestamp to string: seconds, then the fraction without trailing
    zeros (an instant in UTC, the zone materialize runs Spark in)."""
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    text = value.strftime("%Y-%m-%d %H:%M:%S")
    if value.microsecond:
        text += "." + f"{value.microsecond:06d}".rstrip("0")
    return text


def _text(values: pa.Array, src: pa.DataType) -> pa.Array:
    """``values`` as the text Spark's cast to string gives (decimals with their scale, as
    ``format_string('%.<scale>f')``: plain digits, never an exponent)."""
    if pa.types.is_decimal(src):
        return _decimal_text(values, src.scale)
    if pa.types.is_floating(src):
        single = pa.types.is_float32(src)
        return pa.array(
            [None if v is None else _float_text(v, single) for v in values.to_pylist()],
            pa.string(),
        )
    if pa.types.is_timestamp(src):
        return pa.array(
            [None if v is None else _timestamp_text(v) for v in values.to_pylist()],
            pa.string(),
        )
    if (
        pa.types.is_integer(src)
        or pa.types.is_boolean(src)
        or pa.types.is_date32(src)
        or pa.types.is_binary(src)
    ):
        try:
            return values.cast(pa.string())
        except pa.ArrowInvalid as exc:  # bytes that are not UTF-8
            raise _Inexact(f"{src} values that are not UTF-8 text") from exc
    raise _Inexact(f"{src} values as text")


def _decimal_text(values: pa.Array, scale: int) -> pa.Array:
    """Decimals as their exact digits with ``scale`` decimals (``format_string('%.<scale>f')``
    in Spark's terms: plain digits, never an exponent)."""
    return pa.array(
        [None if v is None else format(v, f".{scale}f") for v in values.to_pylist()],
        pa.string(),
    )


def _double(values: pa.Array, src: pa.DataType) -> pa.Array:
    if pa.types.is_decimal(src):  # correctly rounded, as Spark's BigDecimal.doubleValue
        return pa.array([None if v is None else float(v) for v in values.to_pylist()], pa.float64())
    try:
        return values.cast(pa.float64())
    except pa.ArrowInvalid as exc:  # an integer past 2**53
        raise _Inexact(f"{src} values past 2**53 as double") from exc


def _conform(values: pa.Array, src: pa.DataType, dst: pa.DataType) -> pa.Array:
    if src == dst:
        return values
    if pa.types.is_null(src):
        return pa.nulls(len(values), dst)
    if pa.types.is_struct(dst):
        if not pa.types.is_struct(src):
            return pa.nulls(len(values), dst)
        children: list[pa.Array] = []
        for field in _fields(dst):
            have = find_field(src, field.name)
            children.append(
                pa.nulls(len(values), field.type)
                if have is None
                else _conform(
                    pc.struct_field(values, [src.get_field_index(have.name)]),
                    have.type,
                    field.type,
                )
            )
        return pa.StructArray.from_arrays(children, fields=_fields(dst), mask=values.is_null())
    if pa.types.is_list(dst) and pa.types.is_list(src):
        if values.offset:  # from_arrays takes no mask with sliced offsets: copy
            values = pa.concat_arrays([values])
        items = values.values
        return pa.ListArray.from_arrays(
            values.offsets,
            _conform(items, src.value_type, dst.value_type),
            type=dst,
            mask=values.is_null(),
        )
    if pa.types.is_string(dst):
        return _text(values, src)
    if pa.types.is_float64(dst):
        return _double(values, src)
    try:
        return values.cast(dst, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise _Inexact(f"{src} values as {dst}: {exc}") from exc


def conform(
    values: pa.Array | pa.ChunkedArray, src_type: pa.DataType, dst_type: pa.DataType
) -> pa.ChunkedArray:
    """``values`` (of output type ``src_type``) as ``dst_type``, which ``widen`` made of it,
    exactly: decimals past 38 digits as their exact text, integers and decimals with a float
    as the nearest double only when that is the value (an integer past 2**53 stops). A value
    with no exact form raises IntegrityError."""
    try:
        return pa.chunked_array(
            [_conform(chunk, src_type, dst_type) for chunk in _chunks(values)], type=dst_type
        )
    except _Inexact as exc:
        raise IntegrityError(
            f"cannot show {exc} exactly",
            hint="the column's type changed to one its older values do not fit in exactly",
        ) from exc


def _to_output(values: pa.ChunkedArray, dst: pa.DataType) -> pa.ChunkedArray:
    """A column as read from a file, in its output type (a widening: always exact)."""
    return values if values.type == dst else values.cast(dst)


# -------------------------------------------------------------------------------- fills

_BITS = dict(zip(_INTEGRAL, (8, 16, 32, 64), strict=True))


def _to_float32(value: float) -> float:
    """``value`` rounded to the nearest float (single precision), as a Python float."""
    try:
        packed = struct.pack("<f", value)
    except OverflowError:
        return math.copysign(math.inf, value)
    return float(struct.unpack("<f", packed)[0])


def _float32_of(text: str) -> float:
    """The float (single precision) nearest to the decimal ``text``, rounding once (as
    Java's ``Float.parseFloat``; going through a double could round twice)."""
    exact = decimal.Decimal(text)
    guess = _to_float32(float(exact))
    if not math.isfinite(guess) or exact == 0:
        return guess
    (bits,) = struct.unpack("<I", struct.pack("<f", guess))
    candidates = [guess]
    for step in (-1, 1):
        (other,) = struct.unpack("<f", struct.pack("<I", (bits + step) & 0xFFFFFFFF))
        if math.isfinite(other):
            candidates.append(float(other))

    def distance(candidate: float) -> tuple[decimal.Decimal, int]:
        (raw,) = struct.unpack("<I", struct.pack("<f", candidate))
        return abs(decimal.Decimal(candidate) - exact), raw & 1  # ties to even

    return min(candidates, key=distance)


def _scalar(value: object | None, dtype: pa.DataType) -> pa.Scalar | None:
    return None if value is None else pa.scalar(value, dtype)


def _convert(value: Any, dtype: pa.DataType) -> pa.Scalar | None:
    if dtype in _BITS:
        return _scalar(fv.integer(value, _BITS[dtype]), dtype)
    if isinstance(dtype, pa.Decimal128Type):
        return _scalar(fv.exact_decimal(value, dtype.precision, dtype.scale), dtype)
    if pa.types.is_floating(dtype):
        digits = fv.number_text(value)
        if digits is None:
            return None
        number = _float32_of(digits) if pa.types.is_float32(dtype) else float(digits)
        return pa.scalar(number, dtype)
    if pa.types.is_boolean(dtype):
        return pa.scalar(bool(value), dtype) if isinstance(value, bool | int) else None
    if pa.types.is_string(dtype):
        return _scalar(fv.text(value), dtype)
    if pa.types.is_binary(dtype):
        return _scalar(fv.binary(value), dtype)
    if pa.types.is_date32(dtype):
        return pa.scalar(dt.date.fromisoformat(value), dtype)
    if pa.types.is_timestamp(dtype) and dtype.tz is None:
        moment = dt.datetime.fromisoformat(value)
        return pa.scalar(moment.replace(tzinfo=None), dtype)
    if pa.types.is_timestamp(dtype):
        return _scalar(fv.instant_micros(value), pa.timestamp("us", tz="UTC"))
    if pa.types.is_list(dtype) and isinstance(value, list):
        items = [_convert(v, dtype.value_type) for v in value]
        if any(item is None for item in items):
            return None
        return pa.scalar([item.as_py() for item in items if item is not None], dtype)
    if pa.types.is_null(dtype):
        return pa.scalar(None, dtype)
    return None


def fill_value(value: Any, dtype: pa.DataType) -> pa.Scalar | None:
    """``value`` (a fill's JSON value, ``columns.Fill``) as a scalar of the output type
    ``dtype``, exactly (``spark.fills``: numbers from their decimal text, never through a
    float they do not fit; binary from ``{"base64": ...}``). None when it does not fit: the
    caller treats the column as unknown in those rows rather than guess."""
    if value is None:
        return pa.scalar(None, dtype)
    try:
        return _convert(value, dtype)
    except (ValueError, TypeError, ArithmeticError, pa.ArrowException):
        return None


# -------------------------------------------------------------------------------- model


@dataclass(frozen=True, slots=True)
class ArrowModel:
    """What the fold needs to know about a table (``layout.Model``)."""

    name: str  # db.t
    schema: pa.Schema  # the table's own columns, unified over its versions
    key: tuple[str, ...]  # primary key (spelled as in ``schema``); () = whole rows
    keep_metadata: bool = False
    allow_unknown: bool = False
    assume_stable_keys: bool = False
    # the text columns whose newest version is a DECIMAL, with its scale: the scale a
    # decimal of any version is written at (``_decimals_as_text``); None: a text column
    # whose newest version's source type the files do not say
    text_scales: tuple[tuple[str, int | None], ...] = ()

    def __post_init__(self) -> None:
        refuse_working_columns(self.name, self.schema.names)

    @property
    def identity(self) -> tuple[str, ...]:
        return layout.identity(self)

    @property
    def identity_type(self) -> pa.StructType:
        """The type of ``_before_key``."""
        return pa.struct([pa.field(n, self.schema.field(n).type) for n in self.identity])

    def output_schema(self) -> pa.Schema:
        """The state's columns: the table's, then the metadata and ``_absent`` it keeps."""
        return layout.output_schema(self)

    def changes_schema(self) -> pa.Schema:
        """The layout of ``ArrowRead.changes``."""
        return pa.schema(
            [
                *self.schema,
                *META_SCHEMA,
                pa.field(ABSENT, _NAMES),
                pa.field(BEFORE_KEY, self.identity_type),
                pa.field(UNKNOWN, _NAMES),
            ]
        )


@dataclass(frozen=True, slots=True)
class ArrowRead:
    """A table's changes in the change layout (``layout``), sorted by ``_seq``, and its
    model."""

    model: ArrowModel
    changes: pa.Table


def _output_schema(schema: pa.Schema) -> pa.Schema:
    """A file schema as the output types show it (no metadata)."""
    return pa.schema([pa.field(f.name, output_type(f.type)) for f in schema])


def _table_columns(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f for f in schema if f.name not in AUX and f.name != UNKNOWN])


# -------------------------------------------------------------------------------- reading


def _read(path: Path | str, source: tuple[Any, Any], columns: Sequence[str] | None) -> pa.Table:
    where, filesystem = source
    try:
        return pq.read_table(
            where, columns=None if columns is None else list(columns), filesystem=filesystem
        )
    except (OSError, pa.ArrowException) as exc:
        raise unreadable(path, exc) from exc


PART_ROWS = 131_072  # rows a part holds at most (``LineageScan.parts``)


def _read_parts(path: Path | str, source: tuple[Any, Any]) -> Iterator[pa.Table]:
    """A committed file a part at a time (``PART_ROWS`` rows), so that reading a large file
    never holds it whole."""
    where, filesystem = source
    try:
        with pq.ParquetFile(
            where, filesystem=filesystem, buffer_size=1 << 20, pre_buffer=False
        ) as found:
            schema = found.schema_arrow
            for batch in found.iter_batches(batch_size=PART_ROWS, use_threads=False):
                yield pa.Table.from_batches([batch], schema=schema)
    except (OSError, pa.ArrowException) as exc:
        raise unreadable(path, exc) from exc


_LOWEST = np.iinfo(np.int64).min
_HIGHEST = np.iinfo(np.int64).max


class _Tally:
    """The rows one physical file's read found for its manifest entries (``entries``: the
    whole file's one entry, or the slices of a compaction output read), gathered part by
    part (``add``: a part's ``_seq`` column, before any filter) and held to what the
    entries say (``check``). A committed file replaced by another of the same size (a
    restore from the wrong day, an object overwritten) passes the size check and would be
    read as this batch's rows; the ``_seq`` its rows carry gives it away at no cost (the
    column is read anyway): every row of an entry lies in its ``first_seq..last_seq``, and
    there are ``rows`` of them. Vectorised: a sort of the part's ``_seq`` and one
    ``searchsorted`` per bound, never a loop over rows."""

    def __init__(self, path: Path | str, entries: Sequence[CommittedFile]) -> None:
        self.path = path
        self.entries = list(entries)
        bounds = [(_LOWEST, _HIGHEST) if e.within is None else e.within for e in self.entries]
        self.lows = np.array([low for low, _ in bounds], np.int64)
        self.highs = np.array([high for _, high in bounds], np.int64)
        self.counts = np.zeros(len(bounds), np.int64)
        self.mins = np.full(len(bounds), _HIGHEST, np.int64)
        self.maxs = np.full(len(bounds), _LOWEST, np.int64)
        self.nulls = 0

    def add(self, seqs: pa.ChunkedArray) -> None:
        """Count a part's rows (``seqs``: its ``_seq`` column as the file holds it)."""
        self.nulls += seqs.null_count
        if len(self.entries) == 1 and self.entries[0].within is None:  # a whole file
            found = pc.min_max(seqs)
            if found["min"].is_valid:
                self.counts[0] += len(seqs) - seqs.null_count
                self.mins[0] = min(int(self.mins[0]), found["min"].as_py())
                self.maxs[0] = max(int(self.maxs[0]), found["max"].as_py())
            return
        values = pc.drop_null(seqs).combine_chunks().to_numpy(zero_copy_only=False)
        ordered = np.sort(values.astype(np.int64, copy=False), kind="stable")  # sorted: O(n)
        start = np.searchsorted(ordered, self.lows, side="left")
        end = np.searchsorted(ordered, self.highs, side="right")
        held = end > start
        self.counts += end - start
        self.mins[held] = np.minimum(self.mins[held], ordered[start[held]])
        self.maxs[held] = np.maximum(self.maxs[held], ordered[end[held] - 1])

    def check(self) -> None:
        """Refuse (IntegrityError) an entry whose rows are not the ones it lists."""
        for at, entry in enumerate(self.entries):
            count = int(self.counts[at])
            low, high = int(self.mins[at]), int(self.maxs[at])
            outside = count > 0 and (
                (entry.first_seq is not None and low < entry.first_seq)
                or (entry.last_seq is not None and high > entry.last_seq)
            )
            nulls = self.nulls if entry.within is None else 0  # a slice's filter drops them
            if not outside and not nulls and count == entry.rows:
                continue
            what = (
                f"committed file {self.path}"
                if entry.within is None
                else f"the slice of compaction output {self.path} that holds {entry.name}"
            )
            said = "its manifest" if entry.within is None else "the compaction record"
            seqs = f"_seq {low}..{high}" if count else "no row"
            if nulls:
                seqs += f" and {nulls} rows without a _seq"
            raise IntegrityError(
                f"{what} (batch {entry.batch}) holds {_rows(count + nulls)}, {seqs}; {said} "
                f"says {_rows(entry.rows)}, _seq {entry.first_seq}..{entry.last_seq}: these "
                "are not the rows committed; nothing was built from them",
                hint="the file was replaced after its commit by one of the same size: restore "
                "it from a backup (`replicator verify --deep` hashes every file of the "
                "landing zone)",
            )


def _rows(n: int) -> str:
    return "1 row" if n == 1 else f"{n} rows"


def _seq_in(seqs: pa.ChunkedArray, ranges: Iterable[tuple[int, int | None]]) -> pa.ChunkedArray:
    """``low <= _seq <= high`` for one of ``ranges`` (``high`` None: no end)."""
    mask: Any = None
    for low, high in ranges:
        test = pc.greater_equal(seqs, low)
        if high is not None:
            test = pc.and_(test, pc.less_equal(seqs, high))
        mask = test if mask is None else pc.or_(mask, test)
    return pc.equal(seqs, seqs) if mask is None else mask


def read_committed(
    files: Sequence[CommittedFile], columns: Sequence[str] | None = None
) -> pa.Table:
    """The rows of ``files`` (of one schema), each once: whole files as they are, slices of
    a compaction output by their ``_seq`` ranges (``compacted.reads``); each file
    size-checked first. ``columns``: read only these (``_seq`` is added). In output types."""
    for item in files:
        item.check_size()
    wanted = None if columns is None else list(dict.fromkeys([*columns, "_seq"]))
    by_path: dict[Path | str, list[CommittedFile]] = {}
    for item in files:
        by_path.setdefault(item.path, []).append(item)
    tables: list[pa.Table] = []
    for read in reads(files):
        table = _read(read.path, read.source, wanted)
        tally = _Tally(read.path, by_path[read.path])
        tally.add(table.column("_seq"))
        tally.check()
        if read.ranges is not None:
            table = table.filter(_seq_in(table.column("_seq"), read.ranges))
        tables.append(_as_output(table))
    return pa.concat_tables(tables)


def _as_output(table: pa.Table) -> pa.Table:
    schema = _output_schema(table.schema)
    return pa.table(
        [_to_output(table.column(i), f.type) for i, f in enumerate(schema)], schema=schema
    )


def _within(table: pa.Table, segments: Sequence[Segment]) -> pa.Table:
    """The rows whose ``_seq`` lies in one of ``segments`` (of one landed table)."""
    if not segments:
        return table.slice(0, 0)
    ranges = [(s.after + 1, None if s.before is None else s.before - 1) for s in segments]
    return table.filter(_seq_in(table.column("_seq"), ranges))


# ------------------------------------------------------------------------------ alignment


def _repeat(value: pa.Scalar, rows: int) -> pa.Array:
    """``value`` ``rows`` times (``pa.repeat`` refuses no rows of a nested type)."""
    return pa.repeat(value, rows) if rows else pa.array([], value.type)


def _filled(source: Source, dtype: pa.DataType, rows: int) -> tuple[pa.Array, bool]:
    """A missing column's value in an older version's rows, and whether it is known."""
    fill: Fill | None = source.fill
    if fill is None or fill.kind == "null":
        return pa.nulls(rows, dtype), True
    if fill.kind == "value":
        value = fill_value(fill.value, dtype)
        if value is not None:
            return _repeat(value, rows), True
    return pa.nulls(rows, dtype), False


def _rename_absent(absent: pa.ChunkedArray, sources: Sequence[Source]) -> pa.ChunkedArray:
    """``_absent`` (null as empty) with the older version's names of renamed columns made
    the newest's."""
    absent = pc.fill_null(absent, _EMPTY_NAMES)
    renames = {s.old.lower(): s.name for s in sources if s.old is not None and s.old != s.name}
    if not renames:
        return absent
    out: list[pa.Array] = []
    for chunk in absent.chunks:
        names = [n if n is None else renames.get(n.lower(), n) for n in chunk.values.to_pylist()]
        out.append(pa.ListArray.from_arrays(chunk.offsets, pa.array(names, pa.string())))
    return pa.chunked_array(out, type=_NAMES)


def _before(
    table: pa.Table, sources: Sequence[Source], types: pa.Schema
) -> pa.Array | pa.ChunkedArray:
    """The before image (key columns, or the whole row of a table without key) with the
    newest names, and fills for the columns the older version lacks."""
    field = find_field(table.schema, BEFORE_KEY) or find_field(table.schema, BEFORE)
    rows = table.num_rows
    if field is None or not pa.types.is_struct(field.type):
        return pa.nulls(rows, pa.struct([]))
    image = table.column(field.name).combine_chunks()
    arrays: list[pa.Array] = []
    names: list[pa.Field] = []
    for source in sources:
        if source.old is not None:
            have = find_field(field.type, source.old)
            if have is None:
                continue
            arrays.append(pc.struct_field(image, [field.type.get_field_index(have.name)]))
            names.append(pa.field(source.name, have.type))
        else:
            dtype = types.field(source.name).type
            arrays.append(_filled(source, dtype, rows)[0])
            names.append(pa.field(source.name, dtype))
    if not arrays:
        return pa.nulls(rows, pa.struct([]))
    return pa.StructArray.from_arrays(arrays, fields=names, mask=image.is_null())


def align(table: pa.Table, schema: pa.Schema, newest: pa.Schema, types: pa.Schema) -> pa.Table:
    """``table`` (rows of files of ``schema``, in output types) with the columns of the
    ``newest`` version (``types``: its output types), matched by column id (module doc).
    Each of the table's own columns keeps the source type its values have
    (``FIELD_TYPE_KEY``: the version's, or the newest's for a fill)."""
    sources = match(table_columns(schema, AUX), table_columns(newest, AUX))
    rows = table.num_rows
    columns: list[pa.Array | pa.ChunkedArray] = []
    names: list[str] = []
    labels: dict[str, bytes] = {}
    unknown: list[str] = []
    for source in sources:
        names.append(source.name)
        label = _label(newest, source.name) if source.old is None else _label(schema, source.old)
        if label is not None:
            labels[source.name] = label
        if source.old is not None:
            columns.append(table.column(source.old))
            continue
        value, known = _filled(source, types.field(source.name).type, rows)
        columns.append(value)
        if not known:
            unknown.append(source.name)
    for name in META:
        names.append(name)
        columns.append(table.column(name))
    if find_field(table.schema, ABSENT) is not None:
        absent = _rename_absent(table.column(ABSENT), sources)
    else:
        absent = pa.chunked_array([_repeat(_EMPTY_NAMES, rows)], type=_NAMES)
    missing = _repeat(pa.scalar(unknown, _NAMES), rows)
    if unknown:
        absent = pa.chunked_array([_append(absent, unknown)], type=_NAMES)
    names.extend([ABSENT, UNKNOWN, BEFORE_KEY])
    columns.extend([absent, missing, _before(table, sources, types)])
    fields = [
        pa.field(
            name,
            column.type,
            metadata=None if name not in labels else {FIELD_TYPE_KEY: labels[name]},
        )
        for name, column in zip(names, columns, strict=True)
    ]
    return pa.table(columns, schema=pa.schema(fields))


def _label(schema: pa.Schema, name: str) -> bytes | None:
    """The source type of ``schema``'s column ``name`` (``FIELD_TYPE_KEY``), if the file
    says."""
    field = find_field(schema, name)
    return None if field is None else (field.metadata or {}).get(FIELD_TYPE_KEY)


def _append(lists: pa.ChunkedArray, extra: Sequence[str]) -> pa.Array:
    """Each (non-null) list of ``lists`` followed by ``extra``."""
    return pa.array([[*row, *extra] for row in lists.to_pylist()], _NAMES)


# ------------------------------------------------------------------------------ the model


def table_model(
    table: str,
    frames: Sequence[pa.Table],
    key: Sequence[str],
    options: MaterializeOptions,
    previous: pa.Schema | None = None,
) -> ArrowModel:
    versions = [_table_columns(f.schema) for f in frames]
    if previous is not None:
        versions.insert(0, _table_columns(previous))
    columns = unify(versions)
    return ArrowModel(
        name=table,
        schema=columns,
        key=resolve_key(table, columns.names, key),
        keep_metadata=options.keep_metadata,
        allow_unknown=options.allow_unknown,
        assume_stable_keys=options.assume_stable_keys,
        text_scales=text_scales(
            [f.name for f in columns if pa.types.is_string(f.type)], frames[-1].schema
        )
        if frames
        else (),
    )


def _conformed(
    table: pa.Table, column: str, dst: pa.DataType, model: ArrowModel, shown: str
) -> pa.ChunkedArray:
    """``table``'s ``column`` as ``dst``; a value with no exact form there stops, naming the
    table, the column (``shown``) and the row change holding the value."""
    values = table.column(column)
    try:
        return conform(values, values.type, dst)
    except IntegrityError as exc:
        where = ""
        for row in range(table.num_rows):  # the first row change that fails
            try:
                conform(values.slice(row, 1), values.type, dst)
            except IntegrityError:
                seq, file, pos = (table.column(c)[row].as_py() for c in _WHERE)
                where = f" (the row change at _seq {seq}, binlog {file}:{pos})"
                break
        raise IntegrityError(
            f"table {model.name}, column {shown}: {exc.args[0]}{where}", hint=exc.hint
        ) from exc


_WHERE = ("_seq", "_binlog_file", "_binlog_pos")


def normalize(table: pa.Table, model: ArrowModel, files: Sequence[CommittedFile] = ()) -> pa.Table:
    """One aligned schema version's changes in the change layout (``layout``); a key value
    that is NULL stops (``files``: those the changes come from, to name the batch)."""
    table = _decimals_as_text(table, model)
    target = model.changes_schema()
    columns: list[pa.ChunkedArray] = []
    for field in model.schema:
        have = find_field(table.schema, field.name)
        if have is None:
            columns.append(pa.chunked_array([pa.nulls(table.num_rows, field.type)]))
            continue
        columns.append(_conformed(table, have.name, field.type, model, field.name))
    for name in META:
        columns.append(_to_output(table.column(name), target.field(name).type))
    columns.append(table.column(ABSENT))
    columns.append(_conformed(table, BEFORE_KEY, model.identity_type, model, BEFORE_KEY))
    columns.append(table.column(UNKNOWN))
    out = pa.table(columns, schema=target)
    _refuse_null_keys(out, model, files)
    return out


def _decimals_as_text(table: pa.Table, model: ArrowModel) -> pa.Table:
    """``table`` (one aligned version) with the decimals of the columns the model shows as
    text whose newest version is a DECIMAL (``ArrowModel.text_scales``) written as text at
    that version's scale, in the row images and the before image: the ALTER that changed
    the column rewrote every stored value at the new scale, so that is what the source
    shows (and a key stays one key across the change). Integers are decimals of scale 0;
    the landing zone's text of a DECIMAL past 38 digits has zeros appended. A newest scale
    below a version's (an ALTER that rounded values: the daemon stops at one) or unknown
    stops, naming the column."""
    for name, scale in model.text_scales:
        field = find_field(table.schema, name)
        if field is None:
            continue
        values = _scaled(table.column(field.name), field, scale, model, name)
        if values is None:
            continue
        at = table.schema.get_field_index(field.name)
        table = table.set_column(
            at, pa.field(field.name, pa.string(), metadata=field.metadata), values
        )
        before = table.column(BEFORE_KEY)
        kind = before.type
        inner = find_field(kind, name) if pa.types.is_struct(kind) else None
        if inner is None:
            continue
        index = kind.get_field_index(inner.name)
        image = pa.field(inner.name, inner.type, metadata=field.metadata)  # the same version
        chunks: list[pa.Array] = []
        fields = _fields(kind)
        fields[index] = pa.field(inner.name, pa.string())
        for chunk in _chunks(before):
            children = [pc.struct_field(chunk, [i]) for i in range(kind.num_fields)]
            text = _scaled(pa.chunked_array([children[index]]), image, scale, model, name)
            assert text is not None  # (of the same source type and scale as the column)
            children[index] = text.combine_chunks()
            chunks.append(pa.StructArray.from_arrays(children, fields=fields, mask=chunk.is_null()))
        rebuilt = pa.chunked_array(chunks, type=pa.struct(fields))
        table = table.set_column(table.schema.get_field_index(BEFORE_KEY), BEFORE_KEY, rebuilt)
    return table


def _scaled(
    values: pa.ChunkedArray, field: pa.Field, scale: int | None, model: ArrowModel, shown: str
) -> pa.ChunkedArray | None:
    """``values`` (of ``field``: its type and source type) as text at ``scale`` decimals;
    None when they need no change here (``decimal_text.rescaled``, which also stops)."""
    own = rescaled(model.name, shown, field, scale)
    if own is None:
        return None
    assert scale is not None  # (``rescaled`` stops when it is unknown)
    src = field.type
    out: list[pa.Array] = []
    for chunk in _chunks(values):
        if pa.types.is_decimal(src):
            out.append(_decimal_text(chunk, scale))
            continue
        text = chunk.cast(pa.string())
        if not pa.types.is_integer(src):
            _check_decimal_text(text, own, model.name, shown)
        out.append(pc.binary_join_element_wise(text, pa.scalar(zeros(own, scale)), ""))
    return pa.chunked_array(out, type=pa.string())


def _check_decimal_text(text: pa.Array, scale: int, table: str, column: str) -> None:
    """The landing zone's text of a DECIMAL (``decimal_text.text_pattern``); anything else
    stops rather than be padded wrong."""
    good = pc.match_substring_regex(text, pattern=text_pattern(scale))
    bad = pc.and_(pc.is_valid(text), pc.invert(pc.fill_null(good, True)))
    if pc.any(bad).as_py():
        raise not_decimal_text(table, column, text.filter(bad)[0].as_py(), scale)


def _refuse_null_keys(changes: pa.Table, model: ArrowModel, files: Sequence[CommittedFile]) -> None:
    """IntegrityError when a key column is NULL in a row image (one that leaves the column
    out, ``_absent``, has no value there, not a NULL) or in an update's before image: NULL
    identifies no row (the server keeps any number of them under a UNIQUE key), so a table
    keyed by a nullable column (``--key``) cannot be followed by its key."""
    if not model.key or not changes.num_rows:
        return
    absent = changes.column(ABSENT).combine_chunks()
    before = changes.column(BEFORE_KEY).combine_chunks()
    for name in model.key:
        values = changes.column(name)
        null = pc.is_null(values)
        if values.null_count:  # the rows whose image leaves the column out are no NULL
            parents = pc.list_parent_indices(absent)
            left_out = pc.filter(parents, pc.equal(pc.list_flatten(absent), name))
            rows = pa.array(np.arange(changes.num_rows, dtype=np.int64))
            null = pc.and_not(null, pc.is_in(rows, value_set=left_out.cast(pa.int64())))
        was = pc.struct_field(before, [before.type.get_field_index(name)])
        null = pc.or_(null, pc.and_(pc.is_valid(before), pc.is_null(was)))
        if not pc.any(null).as_py():
            continue
        row = pc.index(null, True).as_py()
        seq, file, pos = (changes.column(c)[row].as_py() for c in _WHERE)
        batch = next(
            (
                f.batch
                for f in files
                if f.first_seq is not None and f.last_seq is not None
                if f.first_seq <= seq <= f.last_seq
            ),
            None,
        )
        where = f"batch {batch}, " if batch is not None else ""
        raise IntegrityError(
            f"table {model.name}: key column {name} is NULL in the row change at _seq {seq} "
            f"({where}binlog {file}:{pos}); NULL identifies no row",
            hint=f"a key column must hold a value in every row: pass --key {model.name}=... "
            f"naming columns that are never NULL (--key {model.name}= for whole rows), with "
            "--full-refresh",
        )


def _assemble(
    table: str,
    versions: Sequence[FileVersion],
    frames: Sequence[pa.Table],
    keyed: Sequence[FileVersion],
    options: MaterializeOptions,
    *,
    previous_key: tuple[str, ...] | None = None,
    previous_schema: pa.Schema | None = None,
) -> ArrowRead:
    newest = versions[-1].schema
    types = _output_schema(newest)
    aligned = [align(f, v.schema, newest, types) for v, f in zip(versions, frames, strict=True)]
    key = identity_columns(table, keyed, newest, options, previous_key)
    model = table_model(table, aligned, key, options, previous_schema)
    changes = pa.concat_tables(
        [normalize(f, model, v.files) for v, f in zip(versions, aligned, strict=True)]
    )
    return ArrowRead(model, changes.sort_by("_seq"))


def read_files(
    table: str,
    files: Sequence[CommittedFile],
    options: MaterializeOptions,
    *,
    previous_key: tuple[str, ...] | None = None,
    previous_schema: pa.Schema | None = None,
) -> ArrowRead:
    """Every row change of ``files`` (of one table), in one schema. ``previous_schema``: the
    table's columns in an earlier state (output types), widened with the files'."""
    versions = file_versions(files)
    frames = [read_committed(v.files) for v in versions]
    return _assemble(
        table,
        versions,
        frames,
        versions,
        options,
        previous_key=previous_key,
        previous_schema=previous_schema,
    )


# ------------------------------------------------------------------------------ replays

_ID_COLUMNS = ("_op", "_gtid", "_binlog_file", "_binlog_pos")


def _identities(table: pa.Table) -> pa.ChunkedArray:
    """A row change's source identity: ``g:<gtid>``, else ``p:<file>:<pos>``, else null; null
    for a snapshot row (``r``): a replay re-reads the binlog, never a snapshot, so no
    snapshot row is a copy (a chunk read at the point of an earlier one, the source idle,
    has its identity)."""
    by_gtid = pc.binary_join_element_wise("g", table.column("_gtid"), ":")
    position = pc.cast(table.column("_binlog_pos"), pa.string())
    by_position = pc.binary_join_element_wise("p", table.column("_binlog_file"), position, ":")
    found = pc.coalesce(by_gtid, by_position)
    return pc.if_else(pc.equal(table.column("_op"), "r"), pa.scalar(None, pa.string()), found)


def _tagged(chosen: Sequence[CommittedFile]) -> pa.Table:
    """(table, batch, _seq, identity) of the rows of ``chosen`` that have an identity; a row
    of a compaction output counts for the entry whose ``_seq`` range holds it."""
    for item in chosen:
        item.check_size()
    by_path: dict[Path | str, list[CommittedFile]] = {}
    for item in chosen:
        by_path.setdefault(item.path, []).append(item)
    parts: list[pa.Table] = []
    for path, entries in by_path.items():
        read = _read(path, entries[0].source(), [*_ID_COLUMNS, "_seq"])
        tally = _Tally(path, entries)
        tally.add(read.column("_seq"))
        tally.check()
        read = read.append_column("id", _identities(read)).select(["_seq", "id"])
        read = read.filter(pc.is_valid(read.column("id")))
        for entry in entries:
            rows = (
                read
                if entry.within is None
                else read.filter(_seq_in(read.column("_seq"), [entry.within]))
            )
            parts.append(
                pa.table(
                    {
                        "table": _repeat(pa.scalar(entry.table), rows.num_rows),
                        "batch": _repeat(pa.scalar(entry.batch, pa.int64()), rows.num_rows),
                        "_seq": rows.column("_seq"),
                        "id": rows.column("id"),
                    }
                )
            )
    schema = pa.schema(
        [("table", pa.string()), ("batch", pa.int64()), ("_seq", pa.int64()), ("id", pa.string())]
    )
    return pa.concat_tables(parts) if parts else schema.empty_table()


def _pair(table: pa.Table) -> pa.ChunkedArray:
    return pc.binary_join_element_wise(table.column("table"), table.column("id"), "\x00")


def replayed(files: Sequence[CommittedFile], rereading: Collection[int]) -> pa.Array | None:
    """The ``_seq`` of the row changes in ``files`` to leave out: those a replay batch
    (``rereading``) landed again, i.e. rows of such a batch whose identity a lower batch of
    the same landed table holds too. None when no file is of a replay batch. ``files``:
    every committed file of the landed tables concerned (the first copies may be in any of
    them). Reads only the identity columns and ``_seq``."""
    again = [f for f in files if f.batch in rereading]
    if not again:
        return None
    names: dict[str, Path | str] = {}
    for item in files:
        other = names.setdefault(item.name, item.path)
        if other != item.path:
            raise IntegrityError(
                f"committed files {other} and {item.path} have the same name",
                hint="the landing zone names data files after their first _seq, which is "
                "unique: restore the manifests and files from one backup",
            )
    wanted = pc.unique(_pair(_tagged(again)))
    every = _tagged(files)
    every = every.append_column("pair", _pair(every)).filter(
        pc.is_in(_pair(every), value_set=wanted)
    )
    first = every.group_by("pair").aggregate([("batch", "min")])
    joined = every.join(first, "pair")
    # a copy is in a batch that re-reads: a batch that does not lands each row once, even
    # one with the identity of an earlier row (snapshot chunks read at one point)
    again = pa.array(sorted(rereading), pa.int64())
    later = joined.filter(
        pc.and_(
            pc.greater(joined.column("batch"), joined.column("batch_min")),
            pc.is_in(joined.column("batch"), value_set=again),
        )
    )
    return pc.unique(later.column("_seq").combine_chunks())


@dataclass(frozen=True, slots=True)
class LineageScan:
    """A lineage's changes to read part by part (``parts``), for tables too large to hold
    at once: the model is known from the files' footers before any row is read."""

    model: ArrowModel
    files: list[CommittedFile]  # the data files the rows come from
    rows: int  # row changes in those files (an upper bound of what ``parts`` yields)
    _versions: tuple[tuple[FileVersion, tuple[Segment, ...]], ...]
    _drop: pa.Array | None  # ``_seq`` of replayed copies

    def parts(self) -> Iterator[pa.Table]:
        """The changes, a piece of one physical file at a time (``PART_ROWS``), each in the
        change layout; ``_seq`` order holds within a part, not across parts."""
        newest = self._versions[-1][0].schema
        types = _output_schema(newest)
        wanted = {f.path for f in self.files}
        for version, segments in self._versions:
            rows = [f for f in version.files if f.path in wanted]
            by_path: dict[Path | str, list[CommittedFile]] = {}
            for entry in rows:
                by_path.setdefault(entry.path, []).append(entry)
            for item in reads(rows):
                entries = by_path[item.path]
                for entry in entries:
                    entry.check_size()
                tally = _Tally(item.path, entries)
                for read in _read_parts(item.path, item.source):
                    tally.add(read.column("_seq"))
                    frame = read
                    if item.ranges is not None:
                        frame = frame.filter(_seq_in(frame.column("_seq"), item.ranges))
                    frame = _within(_as_output(frame), segments)
                    if self._drop is not None and len(self._drop):
                        frame = frame.filter(
                            pc.invert(pc.is_in(frame.column("_seq"), value_set=self._drop))
                        )
                    if frame.num_rows:
                        aligned = align(frame, version.schema, newest, types)
                        yield normalize(aligned, self.model, rows)
                tally.check()  # before the caller's commit: it reads every part first

    def sample(self, column: str, every: int) -> pa.Array:
        """Every ``every``-th value of the table's ``column`` (in its model type) as the
        files hold it, reading that column only: an approximation of its distribution
        (rows of replayed copies and of other segments included, a column an older version
        names otherwise left out) for choosing range bounds, never for rows."""
        dtype = self.model.schema.field(column).type
        wanted = {f.path for f in self.files}
        found: list[pa.Array] = []
        for version, _ in self._versions:
            field = find_field(version.schema, column)
            if field is None:
                continue
            for item in reads([f for f in version.files if f.path in wanted]):
                values = _read(item.path, item.source, [field.name]).column(0)
                values = values.combine_chunks()[::every]
                try:
                    found.append(values.cast(output_type(field.type)).cast(dtype))
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    continue  # a type the cast cannot take: fewer samples
        return pa.concat_arrays(found) if found else pa.array([], dtype)


def scan_lineage(
    lineage: Lineage,
    files: Sequence[CommittedFile],
    rereading: Collection[int],
    options: MaterializeOptions,
) -> LineageScan | None:
    """``read_lineage`` without reading the rows yet: the model, the files and a way to
    read the changes in parts. None when the lineage has no file (see ``read_lineage``)."""
    schema_files = lineage.files(files)
    if not schema_files:
        return None
    data_files = lineage.files(files, data=True)
    wanted = {f.path for f in data_files}
    drop = (
        replayed([f for f in files if f.table in lineage.tables], rereading) if data_files else None
    )
    data = lineage.data()
    versions = file_versions(schema_files)
    newest = versions[-1].schema
    types = _output_schema(newest)
    empty = [
        align(_output_schema(v.schema).empty_table(), v.schema, newest, types) for v in versions
    ]
    keyed = [
        FileVersion(v.table, v.schema, tuple(f for f in v.files if f.path in wanted), v.newest)
        for v in versions
    ]
    keyed = [v for v in keyed if v.files] or [versions[-1]]
    key = identity_columns(lineage.name, keyed, newest, options, None)
    model = table_model(lineage.name, empty, key, options)
    return LineageScan(
        model,
        data_files,
        sum(f.rows for f in data_files),
        tuple((v, tuple(s for s in data if s.table == v.table)) for v in versions),
        drop,
    )


def read_lineage(
    lineage: Lineage,
    files: Sequence[CommittedFile],
    rereading: Collection[int],
    options: MaterializeOptions,
) -> tuple[ArrowRead, list[CommittedFile]] | None:
    """The row changes of ``lineage``'s current state (``files``: every committed file of
    the landing zone, or of its landed tables), each once; and the files they come from.
    A lineage without a file yet has no rows: its columns are those its newest create or
    alter record gives (``Record.schema``); None when none does (no schema to show)."""
    scan = scan_lineage(lineage, files, rereading, options)
    if scan is None:
        return _no_rows(lineage, options)
    parts = list(scan.parts())
    changes = pa.concat_tables(parts) if parts else scan.model.changes_schema().empty_table()
    return ArrowRead(scan.model, changes.sort_by("_seq")), scan.files


def _no_rows(
    lineage: Lineage, options: MaterializeOptions
) -> tuple[ArrowRead, list[CommittedFile]] | None:
    """A table without any row yet, in the columns its newest record with a schema gives:
    an empty read of a file of that schema, aligned and keyed as the files will be."""
    schema = next((r.schema for r in reversed(lineage.records) if r.schema is not None), None)
    if schema is None:
        return None
    types = _output_schema(schema)
    aligned = align(types.empty_table(), schema, schema, types)
    override = options.keys.get(lineage.name)
    key = tuple(override) if override is not None else (file_key(schema) or ())
    model = table_model(lineage.name, [aligned], key, options)
    return ArrowRead(model, normalize(aligned, model)), []
