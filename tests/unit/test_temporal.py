"""Temporal row formats: go-mysql's server-written TIME2/DATETIME2 vectors, a MySQL 8.0 binlog,
hand-checked images, and hypothesis round trips for every format and precision."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from replicator.binlog import temporal as t
from replicator.binlog.errors import DecodeError, TruncatedError
from replicator.binlog.values import InvalidTemporal
from tests import encoders as enc
from tests.corpus.util import CORPUS_DIR

CORPUS = CORPUS_DIR  # ../shared/binlog-corpus, or $REPLICATOR_CORPUS_DIR
GO_MYSQL_VECTORS = CORPUS / "go-mysql" / "test-vectors.json"
TIME_MAX = timedelta(hours=838, minutes=59, seconds=59, microseconds=999999)


def go_mysql_vectors(test: str) -> list[dict[str, Any]]:
    if not GO_MYSQL_VECTORS.is_file():
        pytest.skip(f"binlog corpus not found at {GO_MYSQL_VECTORS}")
    vectors: list[dict[str, Any]] = json.loads(GO_MYSQL_VECTORS.read_text())["vectors"]
    return [v for v in vectors if v["test"] == test]


def parse_time(text: str) -> timedelta:
    match = re.fullmatch(r"(-?)(\d+):(\d{2}):(\d{2})(?:\.(\d+))?", text)
    assert match is not None, text
    micro = int((match[5] or "").ljust(6, "0"))
    value = timedelta(hours=int(match[2]), minutes=int(match[3]), seconds=int(match[4]))
    value += timedelta(microseconds=micro)
    return -value if match[1] else value


def expected_datetime(text: str) -> datetime | InvalidTemporal:
    """go-mysql returns a string for invalid dates; we return InvalidTemporal(text)."""
    date_part, time_part = text.split(" ")
    year, month, day = (int(x) for x in date_part.split("-"))
    if not (year and month and day):
        return InvalidTemporal(text)
    clock = parse_time(time_part)
    return datetime(year, month, day) + clock


# {[]byte("..."), dec, flag, "expected"},   (DATETIME2 writes the dec as uint16(n))
_TAIL = re.compile(r'\s*,\s*(?:uint16\()?(\d)\)?,\s*(true|false),\s*"([^"]+)"\},?\s*\Z')


def test_go_mysql_time2_vectors() -> None:
    checked = 0
    for vector in go_mysql_vectors("TestDecodeTime2"):
        match = _TAIL.match(vector["same_line_tail"])
        assert match is not None, vector
        fsp, expected = int(match[1]), parse_time(match[3])
        data = bytes.fromhex(vector["hex"])
        assert t.time2_decoder(fsp)(data, 0) == (expected, len(data)), vector
        assert enc.encode_time2(expected, fsp) == data
        checked += 1
    assert checked == 15


def test_go_mysql_datetime2_vectors() -> None:
    checked = invalid = 0
    for vector in go_mysql_vectors("TestDecodeDatetime2"):
        match = _TAIL.match(vector["same_line_tail"])
        assert match is not None, vector
        fsp, expected = int(match[1]), expected_datetime(match[3])
        data = bytes.fromhex(vector["hex"])
        assert t.datetime2_decoder(fsp)(data, 0) == (expected, len(data)), vector
        assert enc.encode_datetime2(expected, fsp) == data
        invalid += isinstance(expected, InvalidTemporal)
        checked += 1
    assert (checked, invalid) == (11, 4)


def test_negative_time_from_mysql_80_binlog() -> None:
    """rust_mysql_common time_issue.000001 (MySQL 8.0.40) stores TIME2(0) '-507:48:27'."""
    path = CORPUS / "rust_mysql_common" / "time_issue.000001"
    if not path.is_file():
        pytest.skip(f"binlog corpus file not found: {path}")
    value = -timedelta(hours=507, minutes=48, seconds=27)
    image = enc.encode_time2(value, 0)
    data = path.read_bytes()
    assert data.count(image) == 1
    assert t.time2_decoder(0)(data, data.index(image)) == (value, data.index(image) + 3)


def test_packed_longlong_forms_agree_with_row_formats() -> None:
    """TIME2(6)/DATETIME2(6) images are the packed longlong plus an offset."""
    value = -timedelta(hours=838, minutes=59, seconds=58, microseconds=123456)
    image = enc.encode_time2(value, 6)
    assert t.time_from_packed(int.from_bytes(image, "big") - (1 << 47)) == value
    moment = datetime(2016, 10, 28, 15, 30, 42, 654321)
    image = enc.encode_datetime2(moment, 6)
    packed = ((int.from_bytes(image[:5], "big") - 0x8000000000) << 24) + 654321
    assert t.datetime_from_packed(packed) == moment
    assert t.datetime_from_packed(0, 0) == InvalidTemporal("0000-00-00 00:00:00")


# ---------------------------------------------------------------- hand-checked images


def test_date_images() -> None:
    decode = t.date_decoder()
    # 2016-10-28: (2016 << 9 | 10 << 5 | 28) = 0x0FC15C little-endian
    assert decode(bytes.fromhex("5CC10F"), 0) == (date(2016, 10, 28), 3)
    assert decode(b"\x00\x00\x00", 0) == (InvalidTemporal("0000-00-00"), 3)
    feb31 = enc.encode_date(InvalidTemporal("2020-02-31"))
    assert decode(feb31, 0) == (InvalidTemporal("2020-02-31"), 3)
    year0 = enc.encode_date(InvalidTemporal("0000-01-01"))
    # a real date of year 0: its exact days since 1970-01-01 come along (Arrow's date32)
    assert decode(year0, 0) == (InvalidTemporal("0000-01-01", -719528), 3)


def test_zero_timestamps() -> None:
    assert t.timestamp2_decoder(0)(bytes(4), 0) == (InvalidTemporal("0000-00-00 00:00:00"), 4)
    assert t.timestamp2_decoder(3)(bytes(6), 0) == (
        InvalidTemporal("0000-00-00 00:00:00.000"),
        6,
    )
    assert t.timestamp_decoder()(bytes(4), 0) == (InvalidTemporal("0000-00-00 00:00:00"), 4)
    assert t.timestamp_hires_decoder(6)(bytes(7), 0) == (
        InvalidTemporal("0000-00-00 00:00:00.000000"),
        7,
    )
    assert enc.encode_timestamp2(InvalidTemporal("0000-00-00 00:00:00"), 0) == bytes(4)
    with pytest.raises(ValueError, match="zero TIMESTAMP"):
        enc.encode_timestamp2(InvalidTemporal("2020-00-00 00:00:00"), 0)


def test_timestamp2_image() -> None:
    # 1 second past the epoch + 0.5 s at fsp 1 (unit 1/100 s: 50), big-endian.
    value = datetime(1970, 1, 1, 0, 0, 1, 500000, tzinfo=UTC)
    assert enc.encode_timestamp2(value, 1) == bytes.fromhex("0000000132")
    decoded, end = t.timestamp2_decoder(1)(bytes.fromhex("0000000132"), 0)
    assert (decoded, end) == (value, 5)
    assert isinstance(decoded, datetime) and decoded.tzinfo is UTC


def test_datetime2_invalid_text_keeps_fraction_digits() -> None:
    image = enc.encode_datetime2(InvalidTemporal("2020-00-00 00:00:00.120"), 3)
    assert t.datetime2_decoder(3)(image, 0) == (InvalidTemporal("2020-00-00 00:00:00.120"), 7)


def test_legacy_images() -> None:
    # DATETIME: 20161028153042 little-endian in 8 bytes.
    image = (20161028153042).to_bytes(8, "little")
    assert t.datetime_decoder()(image, 0) == (datetime(2016, 10, 28, 15, 30, 42), 8)
    assert t.datetime_decoder()(bytes(8), 0) == (InvalidTemporal("0000-00-00 00:00:00"), 8)
    # TIME: -838:59:59 is -8385959 as a signed 3-byte little-endian integer.
    image = (-8385959).to_bytes(3, "little", signed=True)
    assert t.time_decoder()(image, 0) == (-timedelta(hours=838, minutes=59, seconds=59), 3)
    # TIMESTAMP: epoch seconds little-endian.
    image = (1477668642).to_bytes(4, "little")
    assert t.timestamp_decoder()(image, 0) == (
        datetime(2016, 10, 28, 15, 30, 42, tzinfo=UTC),
        4,
    )


def test_mariadb_hires_images() -> None:
    """Hand-computed from MariaDB's formulas (Field_*_hires in sql/field.cc)."""
    # TIME(1) 00:00:00.0 is zero_point = (838:59:59 + 1 s) in 1/10 s = 30204000, 4 bytes.
    assert enc.encode_time_hires(timedelta(0), 1) == (30204000).to_bytes(4, "big")
    assert t.time_hires_decoder(1)((30204000 - 15).to_bytes(4, "big"), 0) == (
        timedelta(seconds=-1.5),
        4,
    )
    # TIME(6) is 6 bytes around (838:59:59 + 1 s) * 10^6.
    zero6 = (838 * 3600 + 59 * 60 + 60) * 10**6
    image = (zero6 + 3_723_000_004).to_bytes(6, "big")
    assert t.time_hires_decoder(6)(image, 0) == (
        timedelta(hours=1, minutes=2, seconds=3, microseconds=4),
        6,
    )
    # DATETIME(3): pack_time / 1000 in 7 bytes.
    packed = ((((2001 * 13 + 2) * 32 + 3) * 24 + 4) * 60 + 5) * 60 + 6
    image = (packed * 1000 + 789).to_bytes(7, "big")
    assert t.datetime_hires_decoder(3)(image, 0) == (datetime(2001, 2, 3, 4, 5, 6, 789000), 7)
    # TIMESTAMP(2): 4 big-endian seconds, then hundredths in 1 byte.
    image = (1477668642).to_bytes(4, "big") + bytes([12])
    assert t.timestamp_hires_decoder(2)(image, 0) == (
        datetime(2016, 10, 28, 15, 30, 42, 120000, tzinfo=UTC),
        5,
    )
    assert [t.time_hires_decoder(f)(bytes(8), 0)[1] for f in range(1, 7)] == [4, 4, 5, 5, 5, 6]
    sizes = [t.datetime_hires_decoder(f)(bytes(8), 0)[1] for f in range(1, 7)]
    assert sizes == [6, 6, 7, 7, 7, 8]


def test_truncated_and_bad_precision() -> None:
    decoders: list[Callable[[bytes, int], tuple[object, int]]] = [
        t.date_decoder(),
        t.time2_decoder(6),
        t.datetime2_decoder(6),
        t.timestamp2_decoder(6),
        t.time_decoder(),
        t.datetime_decoder(),
        t.timestamp_decoder(),
        t.time_hires_decoder(6),
        t.datetime_hires_decoder(6),
        t.timestamp_hires_decoder(6),
    ]
    for decode in decoders:
        with pytest.raises(TruncatedError):
            decode(bytes(9), 7)
        with pytest.raises(TruncatedError):
            decode(b"", 0)
    for build in (t.time2_decoder, t.datetime2_decoder, t.timestamp2_decoder):
        with pytest.raises(DecodeError, match="precision 7"):
            build(7)
    with pytest.raises(ValueError, match="precision 2"):
        enc.encode_datetime2(datetime(2020, 1, 1, 0, 0, 0, 123000), 2)


# ------------------------------------------------------------------- round trips

FSP = st.integers(0, 6)
HIRES_FSP = st.integers(1, 6)


def truncate(micro: int, fsp: int) -> int:
    unit: int = 10 ** (6 - fsp)
    return micro - micro % unit


@st.composite
def naive_datetimes(draw: st.DrawFn, fsp: int) -> datetime:
    value = draw(st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31)))
    return value.replace(microsecond=truncate(value.microsecond, fsp))


@st.composite
def invalid_datetimes(draw: st.DrawFn, fsp: int) -> InvalidTemporal:
    year = draw(st.integers(0, 9999))
    month = draw(st.integers(0, 12))
    day = draw(st.integers(0, 31))
    if month and day and year:
        month = 0  # force a date no calendar holds
    clock = draw(st.tuples(st.integers(0, 23), st.integers(0, 59), st.integers(0, 59)))
    text = f"{year:04d}-{month:02d}-{day:02d} {clock[0]:02d}:{clock[1]:02d}:{clock[2]:02d}"
    if fsp:
        text += "." + str(draw(st.integers(0, 10**fsp - 1))).zfill(fsp)
    return InvalidTemporal(text, _arrow_micros(text) if year == 0 else None)


def _arrow_micros(text: str) -> int | None:
    """Arrow's own reading of a year-0 datetime (proleptic Gregorian), the oracle for
    ``InvalidTemporal.epoch``; None where Arrow holds no such date (0000-02-31, month 0)."""
    try:
        value = pa.array([text]).cast(pa.timestamp("us")).view(pa.int64())[0].as_py()
    except pa.ArrowInvalid:
        return None
    return int(value)


@st.composite
def utc_datetimes(draw: st.DrawFn, fsp: int) -> datetime:
    value = draw(
        st.datetimes(
            min_value=datetime(1970, 1, 1, 0, 0, 1),
            max_value=datetime(2106, 2, 7, 6, 28, 15),
        )
    )
    return value.replace(microsecond=truncate(value.microsecond, fsp), tzinfo=UTC)


@st.composite
def times(draw: st.DrawFn, fsp: int, limit: timedelta = TIME_MAX) -> timedelta:
    total = limit // timedelta(microseconds=1)
    micro = draw(st.integers(-total, total))
    sign = -1 if micro < 0 else 1
    return timedelta(microseconds=sign * truncate(abs(micro), fsp))


def check(decoder: Callable[[bytes, int], tuple[object, int]], image: bytes, value: object) -> None:
    """Decode at an offset, with garbage on both sides."""
    buf = b"\xa5" * 3 + image + b"\x5a" * 9
    assert decoder(buf, 3) == (value, 3 + len(image))


@given(st.dates())
def test_date_round_trip(value: date) -> None:
    check(t.date_decoder(), enc.encode_date(value), value)


@given(st.data(), FSP)
def test_datetime2_round_trip(data: st.DataObject, fsp: int) -> None:
    value: datetime | InvalidTemporal = data.draw(
        st.one_of(naive_datetimes(fsp), invalid_datetimes(fsp))
    )
    image = enc.encode_datetime2(value, fsp)
    assert len(image) == t.datetime2_size(fsp)
    check(t.datetime2_decoder(fsp), image, value)


@given(st.data(), FSP)
def test_timestamp2_round_trip(data: st.DataObject, fsp: int) -> None:
    value = data.draw(utc_datetimes(fsp))
    image = enc.encode_timestamp2(value, fsp)
    assert len(image) == t.timestamp2_size(fsp)
    check(t.timestamp2_decoder(fsp), image, value)


@given(st.data(), FSP)
def test_time2_round_trip(data: st.DataObject, fsp: int) -> None:
    value = data.draw(times(fsp))
    image = enc.encode_time2(value, fsp)
    assert len(image) == t.time2_size(fsp)
    check(t.time2_decoder(fsp), image, value)


@given(st.data())
def test_legacy_datetime_round_trip(data: st.DataObject) -> None:
    value: datetime | InvalidTemporal = data.draw(
        st.one_of(naive_datetimes(0), invalid_datetimes(0))
    )
    check(t.datetime_decoder(), enc.encode_datetime(value), value)


@given(st.data())
def test_legacy_timestamp_round_trip(data: st.DataObject) -> None:
    value = data.draw(utc_datetimes(0))
    check(t.timestamp_decoder(), enc.encode_timestamp(value), value)


@given(st.data())
def test_legacy_time_round_trip(data: st.DataObject) -> None:
    value = data.draw(times(0))
    check(t.time_decoder(), enc.encode_time(value), value)


@given(st.data(), HIRES_FSP)
def test_datetime_hires_round_trip(data: st.DataObject, fsp: int) -> None:
    value: datetime | InvalidTemporal = data.draw(
        st.one_of(naive_datetimes(fsp), invalid_datetimes(fsp))
    )
    image = enc.encode_datetime_hires(value, fsp)
    assert len(image) == t.DATETIME_HIRES_BYTES[fsp]
    check(t.datetime_hires_decoder(fsp), image, value)


@given(st.data(), HIRES_FSP)
def test_timestamp_hires_round_trip(data: st.DataObject, fsp: int) -> None:
    value = data.draw(utc_datetimes(fsp))
    image = enc.encode_timestamp_hires(value, fsp)
    assert len(image) == 4 + t.TIMESTAMP_HIRES_FRACTION_BYTES[fsp]
    check(t.timestamp_hires_decoder(fsp), image, value)


@given(st.data(), HIRES_FSP)
def test_time_hires_round_trip(data: st.DataObject, fsp: int) -> None:
    value = data.draw(times(fsp))
    image = enc.encode_time_hires(value, fsp)
    assert len(image) == t.TIME_HIRES_BYTES[fsp]
    check(t.time_hires_decoder(fsp), image, value)


def test_extremes_round_trip() -> None:
    for fsp in range(7):
        top = timedelta(microseconds=truncate(TIME_MAX // timedelta(microseconds=1), fsp))
        tick = timedelta(microseconds=10 ** (6 - fsp))
        for value in (top, -top, timedelta(0), tick, -tick):
            check(t.time2_decoder(fsp), enc.encode_time2(value, fsp), value)
            check(t.time_hires_decoder(fsp), enc.encode_time_hires(value, fsp), value)
        for moment in (datetime(1, 1, 1), datetime(9999, 12, 31, 23, 59, 59)):
            check(t.datetime2_decoder(fsp), enc.encode_datetime2(moment, fsp), moment)
            check(t.datetime_hires_decoder(fsp), enc.encode_datetime_hires(moment, fsp), moment)
        for instant in (
            datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC),
            datetime(2106, 2, 7, 6, 28, 15, tzinfo=UTC),
        ):
            check(t.timestamp2_decoder(fsp), enc.encode_timestamp2(instant, fsp), instant)
            check(t.timestamp_hires_decoder(fsp), enc.encode_timestamp_hires(instant, fsp), instant)
