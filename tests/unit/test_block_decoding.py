"""The native core's blocks against the reference loop (``RowLayout.decode``).

The core (``native.py``, C) is a fast path: for any bytes, decoding a rows event's images
into a block must give exactly what the reference decoders give, values and errors alike,
whether the block's columns are native buffers (read back through Arrow, as the sink reads
them) or values (``objects=True``, as ``replicator dump`` asks). Hypothesis builds tables
of mixed column types, row images with NULLs, partial images and update pairs; then the same
images are cut at every length, and replaced by random bytes. The ``*_raw`` kinds put any
bytes in fixed-width columns (zero dates, invalid DECIMAL digit groups, fractions out of
range), which the native core hands to the Python converters.
"""

from __future__ import annotations

import struct
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replicator.binlog import native
from replicator.binlog.constants import ColumnType as T
from replicator.binlog.errors import DecodeError
from replicator.binlog.rows import RowImage, TableDecoder
from replicator.binlog.schema import ColumnDef
from replicator.binlog.values import ABSENT, InvalidTemporal
from replicator.dump import RowChangeFormatter
from tests.blocks import block_rows
from tests.encoders import (
    encode_date,
    encode_datetime2,
    encode_decimal,
    encode_time2,
    encode_timestamp2,
)
from tests.hypothesis_budget import examples
from tests.unit.test_native import require_native

# --------------------------------------------------------------------------- column kinds
# name -> (ColumnDef fields, strategy of values, encoder of one value)


def _int(fmt: str) -> Any:
    size = struct.calcsize("<" + fmt)
    bits = 8 * size
    if fmt.isupper():
        values = st.integers(0, 2**bits - 1)
    else:
        values = st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    return values, lambda v: struct.pack("<" + fmt, v)


def _float32() -> Any:
    values = st.floats(width=32, allow_nan=False)
    return values, lambda v: struct.pack("<f", v)


def _text(prefix: int, codec: str | None) -> Any:
    encode_value: Any = bytes
    if codec is None:
        values: Any = st.binary(max_size=40)
    else:
        alphabet = st.characters(codec="latin-1" if codec == "cp1252" else "utf-8")
        values = st.text(alphabet, max_size=20).filter(lambda s: codec != "cp1252" or _cp1252_ok(s))

        def encode_value(v: str) -> bytes:
            return v.encode("utf-8" if codec == "utf-8" else "cp1252")

    def encode(v: Any) -> bytes:
        raw: bytes = encode_value(v)
        return len(raw).to_bytes(prefix, "little") + raw

    return values, encode


def _cp1252_ok(text: str) -> bool:
    try:
        text.encode("cp1252")
    except UnicodeEncodeError:
        return False
    return True


LABELS = ("red", "green", "blue")


def _bit(v: int) -> bytes:
    return v.to_bytes(2, "big")


KINDS: dict[str, tuple[dict[str, Any], Any]] = {
    "tiny": ({"type": T.TINY}, _int("b")),
    "utiny": ({"type": T.TINY, "unsigned": True}, _int("B")),
    "short": ({"type": T.SHORT}, _int("h")),
    "long": ({"type": T.LONG}, _int("i")),
    "ulong": ({"type": T.LONG, "unsigned": True}, _int("I")),
    "longlong": ({"type": T.LONGLONG}, _int("q")),
    "ulonglong": ({"type": T.LONGLONG, "unsigned": True}, _int("Q")),
    "int24": (
        {"type": T.INT24},
        (st.integers(-(2**23), 2**23 - 1), lambda v: (v % 2**24).to_bytes(3, "little")),
    ),
    "float": ({"type": T.FLOAT, "meta": 4}, _float32()),
    "double": (
        {"type": T.DOUBLE, "meta": 8},
        (st.floats(allow_nan=False), lambda v: struct.pack("<d", v)),
    ),
    "year": ({"type": T.YEAR}, (st.integers(0, 255), lambda v: bytes([v]))),
    "decimal": (
        {"type": T.NEWDECIMAL, "meta": 12 << 8 | 2},
        (
            st.decimals(min_value=-(10**10) + 1, max_value=10**10 - 1, places=2),
            lambda v: encode_decimal(v, 12, 2),
        ),
    ),
    "decimal_wide": (
        {"type": T.NEWDECIMAL, "meta": 30 << 8 | 10},
        (
            st.decimals(min_value=-(10**20) + 1, max_value=10**20 - 1, places=10),
            lambda v: encode_decimal(v, 30, 10),
        ),
    ),
    "decimal_65": (
        {"type": T.NEWDECIMAL, "meta": 65 << 8 | 30},
        (
            st.decimals(min_value=-(10**35) + 1, max_value=10**35 - 1, places=30),
            lambda v: encode_decimal(v, 65, 30),
        ),
    ),
    "decimal_fraction": (
        {"type": T.NEWDECIMAL, "meta": 5 << 8 | 5},
        (
            st.decimals(min_value=-1, max_value=1, places=5).filter(lambda v: abs(v) < 1),
            lambda v: encode_decimal(v, 5, 5),
        ),
    ),
    "decimal_whole": (
        {"type": T.NEWDECIMAL, "meta": 19 << 8 | 0},
        (st.integers(-(10**19) + 1, 10**19 - 1).map(Decimal), lambda v: encode_decimal(v, 19, 0)),
    ),
    "date": ({"type": T.DATE}, (st.dates(), encode_date)),
    "datetime0": (
        {"type": T.DATETIME2, "meta": 0},
        (
            st.datetimes(min_value=datetime(1000, 1, 1)).map(lambda d: d.replace(microsecond=0)),
            lambda v: encode_datetime2(v, 0),
        ),
    ),
    "datetime6": (
        {"type": T.DATETIME2, "meta": 6},
        (st.datetimes(min_value=datetime(1000, 1, 1)), lambda v: encode_datetime2(v, 6)),
    ),
    "timestamp0": (
        {"type": T.TIMESTAMP2, "meta": 0},
        (
            # 0 is the zero timestamp, a marker: see the raw kinds
            st.integers(1, 2**32 - 1).map(lambda s: datetime.fromtimestamp(s, UTC)),
            lambda v: encode_timestamp2(v, 0),
        ),
    ),
    "timestamp5": (
        {"type": T.TIMESTAMP2, "meta": 5},
        (
            st.tuples(st.integers(1, 2**32 - 1), st.integers(0, 99999)).map(
                lambda t: datetime.fromtimestamp(t[0], UTC).replace(microsecond=t[1] * 10)
            ),
            lambda v: encode_timestamp2(v, 5),
        ),
    ),
    "time6": (
        {"type": T.TIME2, "meta": 6},
        (
            st.integers(-838 * 3600 * 10**6, 838 * 3600 * 10**6).map(
                lambda us: timedelta(microseconds=us)
            ),
            lambda v: encode_time2(v, 6),
        ),
    ),
    "datetime3": (
        {"type": T.DATETIME2, "meta": 3},
        (
            st.datetimes(min_value=datetime(1000, 1, 1)).map(
                lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000)
            ),
            lambda v: encode_datetime2(v, 3),
        ),
    ),
    "time0": (
        {"type": T.TIME2, "meta": 0},
        (
            st.integers(-838 * 3600, 838 * 3600).map(lambda s: timedelta(seconds=s)),
            lambda v: encode_time2(v, 0),
        ),
    ),
    "varchar_utf8": ({"type": T.VARCHAR, "meta": 80, "charset": "utf-8"}, _text(1, "utf-8")),
    "varchar_long": ({"type": T.VARCHAR, "meta": 1000, "charset": "utf-8"}, _text(2, "utf-8")),
    "varchar_latin1": ({"type": T.VARCHAR, "meta": 40, "charset": "cp1252"}, _text(1, "cp1252")),
    "varchar_sjis": (
        {"type": T.VARCHAR, "meta": 40, "charset": "shift_jis"},
        (
            st.text("abcxyz\u3042\u3093\u30ab\u65e5\u672c", max_size=10),
            lambda v: bytes([len(v.encode("shift_jis"))]) + v.encode("shift_jis"),
        ),
    ),
    "varbinary": ({"type": T.VARCHAR, "meta": 40, "charset": "binary"}, _text(1, None)),
    "char_binary": (
        {"type": T.STRING, "meta": T.STRING << 8 | 40, "charset": "binary"},
        _text(1, None),
    ),
    "text": ({"type": T.BLOB, "meta": 2, "charset": "utf-8"}, _text(2, "utf-8")),
    "mediumblob": ({"type": T.BLOB, "meta": 3}, _text(3, None)),
    "longtext": ({"type": T.BLOB, "meta": 4, "charset": "cp1252"}, _text(4, "cp1252")),
    "enum": (
        {"type": T.ENUM, "meta": T.ENUM << 8 | 1, "enum_values": LABELS},
        (st.integers(0, 3), lambda v: bytes([v])),
    ),
    "enum_wide": (
        {"type": T.ENUM, "meta": T.ENUM << 8 | 2, "enum_values": LABELS},
        (st.integers(0, 3), lambda v: v.to_bytes(2, "little")),
    ),
    "set": (
        {"type": T.SET, "meta": T.SET << 8 | 1, "set_values": LABELS},
        (st.integers(0, 7), lambda v: bytes([v])),
    ),
    "bit": ({"type": T.BIT, "meta": 1 << 8 | 3}, (st.integers(0, 2**11 - 1), _bit)),
}


# Any bytes in fixed-width columns: values that may be invalid (and fail alike).
RAW_KINDS: dict[str, tuple[dict[str, Any], Any]] = {
    "date_raw": ({"type": T.DATE}, (st.binary(min_size=3, max_size=3), bytes)),
    "datetime2_raw": ({"type": T.DATETIME2, "meta": 2}, (st.binary(min_size=6, max_size=6), bytes)),
    "timestamp4_raw": (
        {"type": T.TIMESTAMP2, "meta": 4},
        (st.binary(min_size=6, max_size=6), bytes),
    ),
    "time1_raw": ({"type": T.TIME2, "meta": 1}, (st.binary(min_size=4, max_size=4), bytes)),
    "decimal_raw": (
        {"type": T.NEWDECIMAL, "meta": 14 << 8 | 4},
        (st.binary(min_size=7, max_size=7), bytes),
    ),
}
EVERY_KIND = {**KINDS, **RAW_KINDS}


def _columns(kinds: list[str]) -> tuple[ColumnDef, ...]:
    return tuple(
        ColumnDef(index=i, **{"meta": 0, **EVERY_KIND[kind][0]}) for i, kind in enumerate(kinds)
    )


@st.composite
def tables(
    draw: st.DrawFn, kinds: dict[str, Any] = KINDS
) -> tuple[tuple[ColumnDef, ...], list[str]]:
    drawn = draw(st.lists(st.sampled_from(sorted(kinds)), min_size=1, max_size=14))
    return _columns(drawn), drawn


@st.composite
def images(draw: st.DrawFn, kinds: list[str], present: tuple[int, ...]) -> bytes:
    """One row image: NULL bitmap over the present columns, then their non-NULL values."""
    nulls = 0
    values = b""
    for bit, index in enumerate(present):
        if draw(st.booleans()) and draw(st.booleans()):
            nulls |= 1 << bit
            continue
        strategy, encode = EVERY_KIND[kinds[index]][1]
        values += encode(draw(strategy))
    return nulls.to_bytes((len(present) + 7) // 8, "little") + values


FORMS = ("buffers", "objects") if native.available() else ()
ALL = (*FORMS, "reference")


def _decode(
    columns: tuple[ColumnDef, ...],
    data: bytes,
    before_bits: int,
    after_bits: int | None,
    *,
    form: str,
) -> tuple[tuple[RowImage, ...], tuple[RowImage, ...]] | tuple[str, str]:
    decoder = TableDecoder.build(columns, decoders="reference" if form == "reference" else "native")
    layout = decoder.layout(before_bits)
    after = None if after_bits is None else decoder.layout(after_bits)
    try:
        block = decoder.decode(data, 0, layout, after, objects=form == "objects")
    except DecodeError as exc:
        return type(exc).__name__, str(exc)
    return block_rows(block)


def _same(
    columns: tuple[ColumnDef, ...], data: bytes, before_bits: int, after_bits: int | None
) -> tuple[tuple[RowImage, ...], tuple[RowImage, ...]] | tuple[str, str]:
    reference = _decode(columns, data, before_bits, after_bits, form="reference")
    for form in FORMS:
        decoded = _decode(columns, data, before_bits, after_bits, form=form)
        assert decoded == reference, form
        # the same type too: 1 == 1.0 == True would hide a wrong conversion
        assert repr(decoded) == repr(reference), form
    return reference


def _bits(present: tuple[int, ...]) -> int:
    return sum(1 << i for i in present)


@settings(max_examples=examples(300), deadline=None)
@given(st.data())
def test_fast_rows_match_the_reference(data: st.DataObject) -> None:
    columns, kinds = data.draw(tables())
    n = len(columns)
    full = tuple(range(n))
    present = data.draw(
        st.one_of(st.just(full), st.lists(st.sampled_from(full), min_size=1, unique=True))
    )
    present = tuple(sorted(present))
    rows = data.draw(st.lists(images(kinds, present), min_size=1, max_size=6))
    blob = b"".join(rows)
    decoded = _same(columns, blob, _bits(present), None)
    assert isinstance(decoded[0], tuple)
    assert len(decoded[0]) == len(rows)
    for image in decoded[0]:
        assert isinstance(image, tuple)
        assert all((v is ABSENT) == (i not in present) for i, v in enumerate(image))
    # every cut: the same rows, or the same error
    for cut in range(len(blob)):
        _same(columns, blob[:cut], _bits(present), None)


@settings(max_examples=examples(200), deadline=None)
@given(st.data())
def test_fast_update_pairs_match_the_reference(data: st.DataObject) -> None:
    columns, kinds = data.draw(tables())
    full = tuple(range(len(columns)))
    before = tuple(sorted(data.draw(st.lists(st.sampled_from(full), min_size=1, unique=True))))
    after = data.draw(st.one_of(st.just(full), st.just(before)))
    pairs = data.draw(
        st.lists(st.tuples(images(kinds, before), images(kinds, after)), min_size=1, max_size=4)
    )
    blob = b"".join(b + a for b, a in pairs)
    decoded = _same(columns, blob, _bits(before), _bits(after))
    assert isinstance(decoded[0], tuple)
    assert len(decoded[0]) == len(decoded[1]) == len(pairs)
    for cut in range(len(blob)):
        _same(columns, blob[:cut], _bits(before), _bits(after))


@settings(max_examples=examples(300), deadline=None)
@given(st.data())
def test_any_bytes_in_fixed_width_columns_decode_or_fail_alike(data: st.DataObject) -> None:
    columns, kinds = data.draw(tables(EVERY_KIND))
    present = tuple(range(len(columns)))
    rows = data.draw(st.lists(images(kinds, present), min_size=1, max_size=6))
    _same(columns, b"".join(rows), _bits(present), None)
    _same(columns, b"".join(rows[:2]), _bits(present), _bits(present))


def test_unusual_fixed_width_values_go_to_the_converters() -> None:
    """Zero dates, the zero TIMESTAMP and a bad DECIMAL digit group: markers or the error."""
    columns = _columns(["date_raw", "datetime2_raw", "timestamp4_raw", "time1_raw"])
    zeros = b"\x00" + bytes(3) + b"\x80" + bytes(5) + bytes(6) + b"\x80" + bytes(3)
    (row,) = _same(columns, zeros, 0b1111, None)[0]  # type: ignore[str-unpack]  # no error
    assert row == (
        InvalidTemporal("0000-00-00"),
        InvalidTemporal("0000-00-00 00:00:00.00"),
        InvalidTemporal("0000-00-00 00:00:00.0000"),
        timedelta(0),
    )
    decimal = _columns(["decimal_raw"])
    name, message = _same(decimal, b"\x00" + b"\x80" + b"\xff" * 6, 0b1, None)
    assert name == "DecodeError" and "invalid digit group" in message


@settings(max_examples=examples(300), deadline=None)
@given(tables(), st.binary(max_size=120), st.booleans())
def test_random_bytes_decode_or_fail_alike(
    table: tuple[tuple[ColumnDef, ...], list[str]], blob: bytes, update: bool
) -> None:
    columns, _ = table
    full = _bits(tuple(range(len(columns))))
    _same(columns, blob, full, full if update else None)


def test_a_bad_row_after_good_ones_fails_with_the_reference_error() -> None:
    columns = _columns(["longlong", "varchar_utf8", "enum"])
    good = b"\x00" + struct.pack("<q", 7) + b"\x02hi" + b"\x01"
    bad_text = b"\x00" + struct.pack("<q", 8) + b"\x02\xc3\x28" + b"\x01"
    bad_enum = b"\x00" + struct.pack("<q", 9) + b"\x00" + b"\x09"
    assert _same(columns, good * 3, 0b111, None)[0] == ((7, "hi", "red"),) * 3
    name, message = _same(columns, good + bad_text, 0b111, None)
    assert name == "DecodeError" and "not valid utf-8" in message
    name, message = _same(columns, good + bad_enum, 0b111, None)
    assert name == "DecodeError" and "ENUM index 9" in message
    name, message = _same(columns, good + good[:-3], 0b111, None)
    assert name == "TruncatedError"


def test_memo_columns_convert_past_their_cache_size() -> None:
    columns = _columns(["date", "decimal", "datetime3"])
    rows = []
    expected = []
    for n in range(3000):
        day = date(2000, 1, 1) + timedelta(days=n)
        amount = Decimal(n) / 100
        when = datetime(2020, 1, 1) + timedelta(seconds=n, milliseconds=n % 1000)
        rows.append(b"\x00" + encode_date(day) + encode_decimal(amount, 12, 2))
        rows[-1] += encode_datetime2(when, 3)
        expected.append((day, amount, when))
    blob = b"".join(rows) * 2
    decoded = _same(columns, blob, 0b111, None)
    assert list(decoded[0]) == expected * 2


def test_images_of_no_columns_with_bytes_left_are_refused() -> None:
    columns = _columns(["long"])
    for form in ALL:
        name, message = _decode(columns, b"\x00", 0, None, form=form)
        assert name == "DecodeError"
        assert isinstance(message, str)
        assert message.startswith("1 bytes of row images for a row image of no columns")


@pytest.mark.parametrize("form", ALL)
def test_absent_columns_are_marked(form: str) -> None:
    columns = _columns(["long", "varchar_utf8", "long"])
    decoded = _decode(columns, b"\x00" + struct.pack("<i", 5), 0b001, None, form=form)
    assert decoded == (((5, ABSENT, ABSENT),), ())


_AS_TEXT: dict[int, type] = {
    T.NEWDECIMAL: Decimal,
    T.DATE: date,
    T.DATETIME2: datetime,
    T.TIMESTAMP2: datetime,
}


def _dump_lines(columns: tuple[ColumnDef, ...], rows: tuple[RowImage, ...]) -> list[bytes]:
    """The JSON objects ``replicator dump`` writes of these row images."""
    return RowChangeFormatter()._encoder(columns, rows[0])(rows) if rows else []


@settings(max_examples=examples(300), deadline=None)
@given(st.data())
def test_text_values_are_what_the_dump_writes_of_the_objects(data: st.DataObject) -> None:
    """``text_values`` (what ``dump --binlog-file`` reads with): the native core gives valid
    DECIMAL and temporal values as text, and the dump's lines are the same bytes as of the
    reference decoders' objects, zero dates, bad digit groups and cut images included."""
    require_native()
    columns, kinds = data.draw(tables(EVERY_KIND))
    present = tuple(range(len(columns)))
    blob = b"".join(data.draw(st.lists(images(kinds, present), min_size=1, max_size=6)))
    blob = blob[: data.draw(st.sampled_from([len(blob), data.draw(st.integers(0, len(blob)))]))]
    reference = _decode(columns, blob, _bits(present), None, form="reference")
    decoder = TableDecoder.build(columns, decoders="native", text_values=True)
    try:
        block = decoder.decode(blob, 0, decoder.layout(_bits(present)), None, objects=True)
    except DecodeError as exc:
        assert reference == (type(exc).__name__, str(exc))
        return
    texts, _ = block_rows(block)
    objects, _ = reference
    assert isinstance(objects, tuple)
    assert len(texts) == len(objects)
    assert _dump_lines(columns, texts) == _dump_lines(columns, objects)
    for text_row, object_row in zip(texts, objects, strict=True):
        for column, text, value in zip(columns, text_row, object_row, strict=True):
            made = _AS_TEXT.get(column.type)
            # a valid value of those types is text; every other value is the object
            expected = str if made is not None and type(value) is made else type(value)
            assert type(text) is expected, (column, value)


def test_text_values_of_decimals_and_times_as_the_dump_writes_them() -> None:
    require_native()
    columns = _columns(["decimal", "decimal_fraction", "date", "datetime6", "timestamp5"])
    row = b"\x00" + encode_decimal(Decimal("-12.30"), 12, 2)
    row += encode_decimal(Decimal("-0.00010"), 5, 5) + encode_date(date(5, 1, 2))
    row += encode_datetime2(datetime(2020, 1, 2, 3, 4, 5, 1000), 6)
    row += encode_timestamp2(datetime(2020, 1, 2, 3, 4, 5, 10, tzinfo=UTC), 5)
    zero = b"\x00" + encode_decimal(Decimal("-0.00"), 12, 2) + encode_decimal(Decimal(0), 5, 5)
    zero += encode_date(date(2020, 2, 29)) + encode_datetime2(datetime(1000, 1, 1), 6)
    zero += encode_timestamp2(datetime(2020, 1, 2, 3, 4, 5, tzinfo=UTC), 5)
    decoder = TableDecoder.build(columns, decoders="native", text_values=True)
    block = decoder.decode(row + zero, 0, decoder.layout(0b11111), None, objects=True)
    assert block_rows(block)[0] == (
        ("-12.30", "-0.00010", "0005-01-02", "2020-01-02 03:04:05.001000",
         "2020-01-02T03:04:05.000010Z"),
        ("0.00", "0.00000", "2020-02-29", "1000-01-01 00:00:00", "2020-01-02T03:04:05Z"),
    )  # fmt: skip
