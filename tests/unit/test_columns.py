"""Column decoders chosen by ``build_decoder``: every type, its metadata, signedness and
charset, truncation and refusal at build time."""

from __future__ import annotations

import json
import re
import struct
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replicator.binlog.charsets import (
    MYSQL_LATIN1_TABLE,
    charset_for_collation,
    codec_for_charset,
    codec_for_collation,
    text_decoder,
)
from replicator.binlog.columns import build_decoder
from replicator.binlog.constants import ColumnType as T
from replicator.binlog.errors import DecodeError, TruncatedError
from replicator.binlog.json_binary import decode_json_text
from replicator.binlog.schema import ColumnDef
from replicator.binlog.values import Geometry, InvalidTemporal
from tests.corpus.util import CORPUS_DIR
from tests.encoders import encode_datetime2, encode_decimal, encode_json_value, encode_time2

CORPUS = CORPUS_DIR  # ../shared/binlog-corpus, or $REPLICATOR_CORPUS_DIR
GO_MYSQL_VECTORS = CORPUS / "go-mysql" / "test-vectors.json"


def col(type_: int, meta: int = 0, **kwargs: Any) -> ColumnDef:
    return ColumnDef(index=2, type=type_, meta=meta, **kwargs)


def decode(column: ColumnDef, image: bytes) -> object:
    """Decode ``image`` placed between junk bytes; the decoder must consume exactly it."""
    buf = b"\xee\xee" + image + b"\x99" * 3
    value, end = build_decoder(column)(buf, 2)
    assert end == 2 + len(image)
    return value


def char_meta(byte_length: int, real_type: int = T.STRING) -> int:
    """STRING metadata as Field_string::do_save_field_metadata writes it."""
    high = real_type ^ ((byte_length & 0x300) >> 4)
    return high << 8 | (byte_length & 0xFF)


# ------------------------------------------------------------------------- integers

INT_TYPES = [(T.TINY, 1), (T.SHORT, 2), (T.INT24, 3), (T.LONG, 4), (T.LONGLONG, 8)]


@pytest.mark.parametrize(("type_", "width"), INT_TYPES)
def test_integers_at_their_limits(type_: int, width: int) -> None:
    bits = 8 * width
    signed = col(type_)
    unsigned = col(type_, unsigned=True)
    for value in (-(1 << (bits - 1)), -1, 0, 1, (1 << (bits - 1)) - 1):
        assert decode(signed, value.to_bytes(width, "little", signed=True)) == value
    for value in (0, 1, 1 << (bits - 1), (1 << bits) - 1):
        assert decode(unsigned, value.to_bytes(width, "little")) == value
    assert decode(col(T.LONGLONG, unsigned=True), b"\xff" * 8) == 18446744073709551615


def test_go_mysql_unsigned_integer_vectors() -> None:
    if not GO_MYSQL_VECTORS.is_file():
        pytest.skip(f"binlog corpus not found at {GO_MYSQL_VECTORS}")
    vectors: list[dict[str, Any]] = json.loads(GO_MYSQL_VECTORS.read_text())["vectors"]
    by_width = {width: type_ for type_, width in INT_TYPES}
    checked = 0
    for vector in vectors:
        if vector["test"] != "TestDecodeUnsignedIntegers":
            continue
        match = re.match(r"\s*,\s*(\d+)\}", vector["same_line_tail"])
        assert match is not None, vector
        data = bytes.fromhex(vector["hex"])
        assert decode(col(by_width[len(data)], unsigned=True), data) == int(match[1])
        checked += 1
    assert checked == 25


@given(st.data(), st.sampled_from(INT_TYPES), st.booleans())
def test_integer_round_trip(data: st.DataObject, kind: tuple[int, int], unsigned: bool) -> None:
    type_, width = kind
    bits = 8 * width
    low, high = (0, (1 << bits) - 1) if unsigned else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    value = data.draw(st.integers(low, high))
    image = value.to_bytes(width, "little", signed=not unsigned)
    assert decode(col(type_, unsigned=unsigned), image) == value


def test_year() -> None:
    assert [decode(col(T.YEAR), bytes([n])) for n in (0, 1, 70, 155, 255)] == [
        0,
        1901,
        1970,
        2055,
        2155,
    ]


def test_float_and_double() -> None:
    single = decode(col(T.FLOAT, 4), struct.pack("<f", 1.1))
    assert single == struct.unpack("<f", struct.pack("<f", 1.1))[0]
    assert single != 1.1  # the exact float32 value, not a re-rounded decimal
    assert decode(col(T.DOUBLE, 8), struct.pack("<d", -2.5e300)) == -2.5e300


def test_newdecimal_via_metadata() -> None:
    image = encode_decimal(Decimal("-1234.50"), 10, 2)
    assert decode(col(T.NEWDECIMAL, 10 << 8 | 2), image) == Decimal("-1234.50")


def test_bit_is_an_unsigned_int() -> None:
    assert decode(col(T.BIT, 0 << 8 | 3), bytes([0b100])) == 4  # BIT(3): 1 byte
    assert decode(col(T.BIT, 1 << 8 | 0), bytes([0b100000])) == 32  # BIT(8): 1 byte
    assert decode(col(T.BIT, 1 << 8 | 2), b"\x03\xff") == 0x3FF  # BIT(10): 2 bytes big-endian
    assert decode(col(T.BIT, 8 << 8 | 0), b"\xff" * 8) == (1 << 64) - 1  # BIT(64)


def test_null_type_takes_no_bytes() -> None:
    assert decode(col(T.NULL), b"") is None


# ------------------------------------------------------------------------ temporal


def test_temporal_types_dispatch_on_metadata() -> None:
    moment = datetime(2016, 10, 28, 15, 30, 42, 123000)
    assert decode(col(T.DATETIME2, 3), encode_datetime2(moment, 3)) == moment
    assert decode(col(T.TIME2, 0), encode_time2(-timedelta(hours=838), 0)) == -timedelta(hours=838)
    assert decode(col(T.DATE), b"\x00\x00\x00") == InvalidTemporal("0000-00-00")
    assert decode(col(T.NEWDATE), bytes.fromhex("5CC10F")) == date(2016, 10, 28)
    legacy = (20161028153042).to_bytes(8, "little")
    assert decode(col(T.DATETIME, 0), legacy) == datetime(2016, 10, 28, 15, 30, 42)
    # The same type code with fsp metadata is MariaDB's hires format (7 bytes at fsp 3).
    packed = ((((2016 * 13 + 10) * 32 + 28) * 24 + 15) * 60 + 30) * 60 + 42
    hires = (packed * 1000 + 123).to_bytes(7, "big")
    assert decode(col(T.DATETIME, 3), hires) == moment
    assert decode(col(T.TIMESTAMP, 0), bytes(4)) == InvalidTemporal("0000-00-00 00:00:00")
    assert decode(col(T.TIMESTAMP2, 0), bytes(4)) == InvalidTemporal("0000-00-00 00:00:00")
    assert decode(col(T.TIME, 0), (-10203).to_bytes(3, "little", signed=True)) == -timedelta(
        hours=1, minutes=2, seconds=3
    )
    with pytest.raises(DecodeError, match=r"column #2 \(TIME2, meta 0x7\)"):
        build_decoder(col(T.TIME2, 7))


def test_cached_decoders_stay_correct_past_the_cache_size() -> None:
    decoder = build_decoder(col(T.DATETIME2, 0))
    start = datetime(2020, 1, 1)
    moments = [start + timedelta(seconds=n) for n in range(3000)]
    images = [encode_datetime2(moment, 0) for moment in moments]
    for _ in range(2):
        for moment, image in zip(moments, images, strict=True):
            assert decoder(b"\x00" + image, 1) == (moment, 6)
    amounts = build_decoder(col(T.NEWDECIMAL, 4 << 8 | 2))
    for n in range(-9999, 10000, 7):
        image = encode_decimal(Decimal(n).scaleb(-2), 4, 2)
        assert amounts(image, 0) == (Decimal(n).scaleb(-2), 2)
    with pytest.raises(TruncatedError, match="DECIMAL"):
        amounts(image[:1], 0)  # the same prefix is never served from the cache


# --------------------------------------------------------------------------- strings


def test_varchar_length_prefix_follows_max_length() -> None:
    short = col(T.VARCHAR, 255, charset="utf-8")
    assert decode(short, b"\x03abc") == "abc"
    long = col(T.VARCHAR, 300, charset="utf-8")
    assert decode(long, b"\x03\x00abc") == "abc"
    text = "x" * 300
    assert decode(long, (300).to_bytes(2, "little") + text.encode()) == text
    assert decode(col(T.VAR_STRING, 20, charset="utf-8"), b"\x00") == ""


def test_char_longer_than_255_bytes_uses_two_length_bytes() -> None:
    meta = char_meta(400)  # CHAR(100) CHARACTER SET utf8mb4
    column = col(T.STRING, meta, charset="utf-8")
    assert column.string_length == 400
    value = "é" * 150  # 300 bytes; trailing spaces were stripped by the server
    assert decode(column, (300).to_bytes(2, "little") + value.encode()) == value
    short = col(T.STRING, char_meta(40), charset="utf-8")  # CHAR(10) utf8mb4
    assert decode(short, b"\x02ab") == "ab"  # no padding invented


def test_char_128_utf8mb4_from_a_mysql_80_binlog() -> None:
    """rust_mysql_common mysql-enum-string-set.000001 (MySQL 8.0.28): CHAR(128) utf8mb4 is
    512 bytes wide, so its value '0123456789' x 10 carries a 2-byte length."""
    path = CORPUS / "rust_mysql_common" / "mysql-enum-string-set.000001"
    if not path.is_file():
        pytest.skip(f"binlog corpus file not found: {path}")
    data = path.read_bytes()
    value = "0123456789" * 10
    start = data.index(value.encode()) - 2
    column = col(T.STRING, char_meta(512), charset=codec_for_collation(255))
    assert build_decoder(column)(data, start) == (value, start + 102)


def test_charsets() -> None:
    emoji = "ok 😀"
    assert decode(col(T.VARCHAR, 100, charset="utf-8"), b"\x07" + emoji.encode()) == emoji
    latin1 = col(T.VARCHAR, 100, charset=codec_for_charset("latin1"))
    assert decode(latin1, b"\x03\x80\x81\xe9") == "€\x81é"
    ucs2 = col(T.STRING, char_meta(20), charset=codec_for_charset("ucs2"))
    assert decode(ucs2, b"\x04\x00A\x20\xac") == "A€"
    utf16 = col(T.BLOB, 2, charset=codec_for_charset("utf16"))
    assert decode(utf16, b"\x04\x00" + "😀".encode("utf-16-be")) == "😀"
    utf16le = col(T.VARCHAR, 100, charset=codec_for_charset("utf16le"))
    assert decode(utf16le, b"\x02A\x00") == "A"
    utf32 = col(T.VARCHAR, 100, charset=codec_for_charset("utf32"))
    assert decode(utf32, b"\x04\x00\x01\xf6\x00") == "😀"
    cp932 = col(T.VARCHAR, 100, charset=codec_for_charset("cp932"))
    assert decode(cp932, b"\x02" + "あ".encode("cp932")) == "あ"


def test_mysql_latin1_covers_every_byte() -> None:
    assert MYSQL_LATIN1_TABLE[0x80] == "€"
    assert [MYSQL_LATIN1_TABLE[b] for b in (0x81, 0x8D, 0x8F, 0x90, 0x9D)] == [
        "\x81",
        "\x8d",
        "\x8f",
        "\x90",
        "\x9d",
    ]
    assert text_decoder("cp1252")(bytes(range(256))) == MYSQL_LATIN1_TABLE


def test_binary_and_unknown_charsets_give_bytes() -> None:
    blob = col(T.BLOB, 2, charset="binary")
    assert decode(blob, b"\x05\x00a\x00\x00b\x00") == b"a\x00\x00b\x00"
    varbinary = col(T.VARCHAR, 10, charset="binary")
    assert decode(varbinary, b"\x02\x00\xff") == b"\x00\xff"
    unknown = col(T.VARCHAR, 10, charset=None)
    assert decode(unknown, b"\x02\xc3\xa9") == b"\xc3\xa9"
    # BINARY(4): the server strips trailing 0x00 (Field_string::pack); SELECT shows them.
    binary4 = col(T.STRING, char_meta(4), charset="binary")
    assert decode(binary4, b"\x01a") == b"a\x00\x00\x00"
    assert decode(binary4, b"\x04a\x00\x00b") == b"a\x00\x00b"


@pytest.mark.parametrize(("type_", "prefix"), [(T.TINY_BLOB, 1), (T.BLOB, 2), (T.MEDIUM_BLOB, 3)])
def test_blob_length_prefixes(type_: int, prefix: int) -> None:
    data = bytes(range(200))
    for meta in (prefix, 0):  # 0: the type's own default
        column = col(type_, meta, charset="binary")
        assert decode(column, len(data).to_bytes(prefix, "little") + data) == data
    long = col(T.BLOB, 4, charset="utf-8")
    assert decode(long, (3).to_bytes(4, "little") + b"abc") == "abc"


def test_invalid_text_names_the_column() -> None:
    column = ColumnDef(index=0, type=T.VARCHAR, meta=50, name="title", charset="utf-8")
    with pytest.raises(DecodeError, match=r"column `title`: bytes are not valid utf-8"):
        build_decoder(column)(b"\x02\xc3\x28", 0)
    blob = ColumnDef(index=1, type=T.BLOB, meta=3, charset="ascii")
    with pytest.raises(DecodeError, match=r"column #1: bytes are not valid ascii"):
        build_decoder(blob)(b"\x01\x00\x00\x80", 0)


def test_unknown_codec_is_refused_at_build() -> None:
    with pytest.raises(DecodeError, match="unknown text codec"):
        build_decoder(col(T.VARCHAR, 10, charset="no-such-codec"))


# ------------------------------------------------------------------------ ENUM, SET


def test_enum() -> None:
    column = col(T.ENUM, T.ENUM << 8 | 1, enum_values=("a", "b", "c"))
    assert [decode(column, bytes([i])) for i in range(4)] == ["", "a", "b", "c"]
    with pytest.raises(DecodeError, match="ENUM index 4"):
        build_decoder(column)(b"\x04", 0)
    wide = col(T.ENUM, T.ENUM << 8 | 2, enum_values=tuple(str(n) for n in range(300)))
    assert decode(wide, (300).to_bytes(2, "little")) == "299"
    assert decode(col(T.ENUM, T.ENUM << 8 | 2), (7).to_bytes(2, "little")) == 7
    # STRING metadata that the TABLE_MAP reader left unresolved still reaches ENUM.
    assert decode(col(T.STRING, T.ENUM << 8 | 1, enum_values=("x",)), b"\x01") == "x"


def test_set() -> None:
    column = col(T.SET, T.SET << 8 | 1, set_values=("one", "two", "three", "four"))
    assert decode(column, bytes([0b0101])) == "one,three"
    assert decode(column, bytes([0b1010])) == "two,four"
    assert decode(column, b"\x00") == ""
    with pytest.raises(DecodeError, match="SET bits"):
        build_decoder(column)(bytes([0b10000]), 0)
    assert decode(col(T.SET, T.SET << 8 | 1), bytes([0b1010])) == 0b1010
    members = tuple(f"m{n}" for n in range(64))
    wide = col(T.SET, T.SET << 8 | 8, set_values=members)
    assert decode(wide, ((1 << 63) | 1).to_bytes(8, "little")) == "m0,m63"
    assert decode(col(T.STRING, T.SET << 8 | 1, set_values=("p",)), b"\x01") == "p"


# ------------------------------------------------------------ JSON, GEOMETRY, VECTOR


def test_json_goes_through_binary_json() -> None:
    document = encode_json_value({"a": [1, "x", None]})
    column = col(T.JSON, 4)
    value = decode(column, len(document).to_bytes(4, "little") + document)
    assert value == decode_json_text(document) == '{"a":[1,"x",null]}'
    assert decode(column, bytes(4)) == "null"


def test_mariadb_json_is_text() -> None:
    column = col(T.BLOB, 4, charset="utf-8")  # MariaDB logs JSON as LONGTEXT
    assert decode(column, (9).to_bytes(4, "little") + b'{"foo":1}') == '{"foo":1}'


def test_geometry_is_its_wkb_with_the_srid_beside() -> None:
    wkb = b"\x01\x01\x00\x00\x00" + struct.pack("<dd", 1.0, 2.0)  # POINT(1 2)
    stored = (4326).to_bytes(4, "little") + wkb
    value = decode(col(T.GEOMETRY, 4), len(stored).to_bytes(4, "little") + stored)
    assert value == wkb
    assert isinstance(value, Geometry) and value.srid == 4326
    with pytest.raises(DecodeError, match="SRID"):
        build_decoder(col(T.GEOMETRY, 4))(b"\x02\x00\x00\x00\x00\x00", 0)


def test_vector_is_a_list_of_float32() -> None:
    # rust_mysql_common vector.binlog (MySQL 9.0.1): [1.1, 2.2, 3.3] as float32.
    stored = bytes.fromhex("cdcc8c3fcdcc0c4033335340")
    value = decode(col(T.VECTOR, 4), len(stored).to_bytes(4, "little") + stored)
    assert value == list(struct.unpack("<3f", stored))
    assert value == pytest.approx([1.1, 2.2, 3.3])
    with pytest.raises(DecodeError, match="VECTOR value of 3 bytes"):
        build_decoder(col(T.VECTOR, 4))(b"\x03\x00\x00\x00abc", 0)


# -------------------------------------------------------------- refusals, truncation


def test_unsupported_types_are_refused_at_build() -> None:
    with pytest.raises(DecodeError, match="old-style DECIMAL"):
        build_decoder(col(T.DECIMAL))
    with pytest.raises(DecodeError, match="unsupported column type TYPED_ARRAY"):
        build_decoder(col(T.TYPED_ARRAY))
    with pytest.raises(DecodeError, match="unsupported column type 99"):
        build_decoder(col(99))
    with pytest.raises(DecodeError, match=r"column `d` \(NEWDECIMAL, meta 0x0\)"):
        build_decoder(ColumnDef(index=0, type=T.NEWDECIMAL, meta=0, name="d"))
    with pytest.raises(DecodeError, match="ENUM pack length 3"):
        build_decoder(col(T.ENUM, T.ENUM << 8 | 3))
    with pytest.raises(DecodeError, match="invalid BIT metadata"):
        build_decoder(col(T.BIT, 9 << 8))
    with pytest.raises(DecodeError, match="invalid JSON length size 0"):
        build_decoder(col(T.JSON, 0))


TRUNCATABLE = [
    col(T.TINY),
    col(T.SHORT),
    col(T.INT24),
    col(T.LONG, unsigned=True),
    col(T.LONGLONG),
    col(T.FLOAT, 4),
    col(T.DOUBLE, 8),
    col(T.YEAR),
    col(T.NEWDECIMAL, 10 << 8 | 2),
    col(T.BIT, 2 << 8 | 3),
    col(T.DATE),
    col(T.DATETIME2, 6),
    col(T.VARCHAR, 10, charset="utf-8"),
    col(T.VARCHAR, 1000, charset="utf-8"),
    col(T.VARCHAR, 10, charset="binary"),
    col(T.STRING, char_meta(4), charset="binary"),
    col(T.BLOB, 3, charset="utf-8"),
    col(T.BLOB, 4, charset="binary"),
    col(T.ENUM, T.ENUM << 8 | 2, enum_values=("a",)),
    col(T.SET, T.SET << 8 | 2, set_values=("a",)),
    col(T.SET, T.SET << 8 | 2),
    col(T.JSON, 4),
    col(T.GEOMETRY, 4),
    col(T.VECTOR, 4),
]


@pytest.mark.parametrize("column", TRUNCATABLE, ids=lambda c: f"{T(c.type).name}-{c.meta}")
def test_truncated_values_raise(column: ColumnDef) -> None:
    decoder = build_decoder(column)
    with pytest.raises(TruncatedError):
        decoder(b"", 0)
    with pytest.raises(TruncatedError):
        decoder(b"\x05", 1)
    if column.type not in (T.TINY, T.YEAR):  # one byte is a whole TINYINT or YEAR
        with pytest.raises(TruncatedError):
            decoder(b"\x05", 0)


@pytest.mark.parametrize("prefix", [1, 2, 3, 4])
def test_lengths_past_the_end_raise(prefix: int) -> None:
    for charset in ("utf-8", "binary", None):
        decoder = build_decoder(col(T.BLOB, prefix, charset=charset))
        with pytest.raises(TruncatedError, match="column #2"):
            decoder((10).to_bytes(prefix, "little") + b"123456789", 0)


# -------------------------------------------------------------------- charset table


def test_collation_ids() -> None:
    assert codec_for_collation(255) == "utf-8"  # utf8mb4_0900_ai_ci (MySQL 8)
    assert codec_for_collation(323) == "utf-8"  # utf8mb4_mn_cyrl_0900_as_cs (8.0.30)
    assert codec_for_collation(45) == "utf-8"  # utf8mb4_general_ci
    assert codec_for_collation(33) == "utf-8"  # utf8mb3_general_ci
    assert codec_for_collation(76) == "utf-8"  # utf8mb3_tolower_ci (MySQL only)
    assert codec_for_collation(2304) == "utf-8"  # MariaDB utf8mb4_uca1400_ai_ci
    assert codec_for_collation(8) == "cp1252"  # latin1_swedish_ci
    assert codec_for_collation(1032) == "cp1252"  # MariaDB latin1_swedish_nopad_ci
    assert codec_for_collation(63) == "binary"
    assert codec_for_collation(35) == "utf-16-be"  # ucs2
    assert codec_for_collation(54) == "utf-16-be"  # utf16
    assert codec_for_collation(56) == "utf-16-le"  # utf16le
    assert codec_for_collation(60) == "utf-32-be"  # utf32
    assert codec_for_collation(248) == "gb18030"
    assert codec_for_collation(95) == "cp932"
    assert codec_for_collation(97) == "euc_jp"  # eucjpms
    assert codec_for_collation(3) is None  # dec8: no faithful Python codec
    assert charset_for_collation(3) == "dec8"
    for unknown in (0, 17, 100, 251, 324, 1023, 4000):
        assert charset_for_collation(unknown) is None
        assert codec_for_collation(unknown) is None


def test_charset_names() -> None:
    expected = {
        "utf8mb4": "utf-8",
        "UTF8MB3": "utf-8",
        "utf8": "utf-8",
        "latin1": "cp1252",
        "binary": "binary",
        "greek": "iso8859-7",
        "hebrew": "iso8859-8",
        "latin2": "iso8859-2",
        "latin5": "iso8859-9",
        "latin7": "iso8859-13",
        "sjis": "shift_jis",
        "ujis": "euc_jp",
        "euckr": "euc_kr",
        "macroman": "mac-roman",
        "macce": "mac-latin2",
        "koi8r": "koi8-r",
        "swe7": None,
        "no-such-charset": None,
    }
    assert {name: codec_for_charset(name) for name in expected} == expected


def test_every_codec_in_the_table_exists() -> None:
    ids = [i for i in range(4096) if charset_for_collation(i) is not None]
    assert len(ids) > 1000
    # None: no text codec; "binary": bytes, never decoded
    codecs = {c for i in ids if (c := codec_for_collation(i)) is not None} - {"binary"}
    assert len(codecs) > 10
    decoded = {codec: text_decoder(codec)("abc".encode(codec)) for codec in codecs}
    assert decoded == dict.fromkeys(codecs, "abc")


def _compressed_value(raw: bytes, *, wrap: bool) -> bytes:
    """A MariaDB COMPRESSED column value as sql/field_comp.cc stores it."""
    import zlib

    size_len = max(1, (len(raw).bit_length() + 7) // 8)
    if wrap:
        body = zlib.compress(raw)
    else:
        packer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
        body = packer.compress(raw) + packer.flush()
    head = 0x80 | size_len | (0 if wrap else 0x08)
    return bytes((head,)) + len(raw).to_bytes(size_len, "big") + body


@pytest.mark.parametrize("wrap", [True, False])
def test_mariadb_compressed_columns(wrap: bool) -> None:
    text = "compress me \u00e9 " * 40
    value = _compressed_value(text.encode(), wrap=wrap)
    varchar = build_decoder(ColumnDef(index=0, type=141, meta=1001, charset="utf-8"))
    cell = len(value).to_bytes(2, "little") + value
    assert varchar(cell + b"tail", 0) == (text, len(cell))
    blob = build_decoder(ColumnDef(index=0, type=140, meta=2, charset="binary"))
    stored_raw = b"\x00" + b"ab"  # too short to shrink: header 0x00, then the bytes
    assert blob(len(stored_raw).to_bytes(2, "little") + stored_raw, 0) == (b"ab", 5)
    assert blob(b"\x00\x00", 0) == (b"", 2)
    broken = bytearray(value)
    broken[-3] ^= 0xFF
    with pytest.raises(DecodeError, match=r"inflate"):
        varchar(len(broken).to_bytes(2, "little") + bytes(broken), 0)
