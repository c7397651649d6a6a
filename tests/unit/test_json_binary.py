"""Binary JSON and PARTIAL_JSON diffs: hand-built bytes, property round trips, real server bytes."""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replicator.binlog.constants import ColumnType, EventType
from replicator.binlog.errors import DecodeError
from replicator.binlog.json_binary import (
    JsonOpaque,
    JsonValue,
    decimal_from_bin,
    decode_json_text,
    decode_json_value,
    json_to_text,
)
from replicator.binlog.json_diff import (
    JsonDiff,
    JsonDiffOperation,
    UnappliedJsonDiffs,
    apply_json_diffs,
    decode_json_diffs,
    decode_partial_after_image,
    decode_partial_json_header,
    parse_json_path,
)
from replicator.binlog.rows import TableDecoder
from replicator.binlog.schema import ColumnDef
from tests.encoders import decimal_to_bin, encode_json_value
from tests.hypothesis_budget import examples

REPLACE, INSERT, REMOVE = (
    JsonDiffOperation.REPLACE,
    JsonDiffOperation.INSERT,
    JsonDiffOperation.REMOVE,
)


# -- helpers ------------------------------------------------------------------------------------


def _same(a: JsonValue, b: JsonValue) -> bool:
    """Equal and of the same types all the way down (True == 1 in Python; not here)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float | Decimal):
        return repr(a) == repr(b)  # -0.0 vs 0.0, Decimal("1.0") vs Decimal("1.00")
    return a == b


def _as_parsed(value: JsonValue) -> Any:
    """What json.loads(parse_float=Decimal) must give back for json_to_text(value)."""
    if isinstance(value, dict):
        return {k: _as_parsed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_parsed(v) for v in value]
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, JsonOpaque):
        return value.text
    return value


def _obj(*members: tuple[bytes, int, bytes], large: bool = False) -> bytes:
    """A hand-laid object: header, keys, then values in the order given. Each member is
    (key, value type, value bytes); inlined scalars are passed with type | 0x100."""
    osize = 4 if large else 2
    fmt = "<I" if large else "<H"
    n = len(members)
    header = 2 * osize + n * (osize + 2) + n * (1 + osize)
    keys = b""
    key_entries = b""
    off = header
    for key, _, _ in members:
        key_entries += struct.pack(fmt, off) + struct.pack("<H", len(key))
        keys += key
        off += len(key)
    values = b""
    value_entries = b""
    for _, type_, raw in members:
        if type_ & 0x100:
            value_entries += bytes([type_ & 0xFF]) + raw.ljust(osize, b"\0")
        else:
            value_entries += bytes([type_]) + struct.pack(fmt, off)
            values += raw
            off += len(raw)
    body = key_entries + value_entries + keys + values
    return bytes([1 if large else 0]) + struct.pack(fmt, n) + struct.pack(fmt, off) + body


def _diff(op: JsonDiffOperation, path: str, value: JsonValue = None) -> bytes:
    raw = path.encode()
    doc = b"" if op == REMOVE else encode_json_value(value)  # a REMOVE has no value
    assert len(doc) < 251
    return bytes([op, len(raw)]) + raw + (b"" if op == REMOVE else bytes([len(doc)]) + doc)


def _diff_vector(*diffs: bytes) -> bytes:
    body = b"".join(diffs)
    return struct.pack("<I", len(body)) + body


# -- scalars and containers, hand-built ---------------------------------------------------------


def test_empty_value_is_json_null() -> None:
    # json_binary::parse_binary reads a zero-length value as the null literal.
    assert decode_json_value(b"") is None
    assert decode_json_text(b"") == "null"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"\x04\x00", None),
        (b"\x04\x01", True),
        (b"\x04\x02", False),
        (b"\x05\xff\xff", -1),
        (b"\x06\xff\xff", 65535),
        (b"\x07\x00\x00\x00\x80", -(2**31)),
        (b"\x08\xff\xff\xff\xff", 2**32 - 1),
        (b"\x09" + struct.pack("<q", -(2**63)), -(2**63)),
        (b"\x0a" + b"\xff" * 8, 2**64 - 1),
        (b"\x0b" + struct.pack("<d", 0.1), 0.1),
        (b"\x0c\x03abc", "abc"),
        (b"\x0c\x00", ""),
    ],
)
def test_top_level_scalars(raw: bytes, expected: JsonValue) -> None:
    assert _same(decode_json_value(raw), expected)


def test_string_with_two_byte_length() -> None:
    text = "é" * 100  # 200 bytes: length 200 = 0xC8 -> 0xC8 0x01
    assert decode_json_value(b"\x0c\xc8\x01" + text.encode()) == text


def test_inlined_scalars_small_and_large() -> None:
    small = _obj((b"a", 0x105, b"\xfe\xff"), (b"b", 0x106, b"\xfe\xff"), (b"c", 0x104, b"\x01"))
    assert _same(decode_json_value(small), {"a": -2, "b": 65534, "c": True})
    large = _obj(
        (b"a", 0x107, struct.pack("<i", -70000)),
        (b"b", 0x108, struct.pack("<I", 4_000_000_000)),
        (b"c", 0x104, b"\x00"),
        large=True,
    )
    assert _same(decode_json_value(large), {"a": -70000, "b": 4_000_000_000, "c": None})


def test_int32_is_not_inlined_in_small_format() -> None:
    # In the small format a value entry has 2 bytes: int32 lives at an offset.
    doc = _obj((b"a", 0x07, struct.pack("<i", -70000)))
    assert decode_json_value(doc) == {"a": -70000}


def test_keys_keep_stored_order() -> None:
    doc = _obj((b"zz", 0x105, b"\x01\x00"), (b"a", 0x105, b"\x02\x00"))
    assert list(decode_json_value(doc)) == ["zz", "a"]  # type: ignore[arg-type]
    assert decode_json_text(doc) == '{"zz":1,"a":2}'


def test_values_are_found_by_offset_not_position() -> None:
    # Values laid out in reverse order with a gap of junk between them (the sparse format
    # an in-place partial update leaves behind).
    header = 2 + 2 + 2 * 4 + 2 * 3
    keys = b"ab"
    v_b = b"\x02bb"
    junk = b"\xde\xad"
    v_a = b"\x01a"
    off_b = header + len(keys)
    off_a = off_b + len(v_b) + len(junk)
    body = (
        struct.pack("<HH", header, 1)
        + struct.pack("<HH", header + 1, 1)
        + b"\x0c"
        + struct.pack("<H", off_a)
        + b"\x0c"
        + struct.pack("<H", off_b)
        + keys
        + v_b
        + junk
        + v_a
    )
    size = 4 + len(body)
    doc = b"\x00" + struct.pack("<HH", 2, size) + body
    assert decode_json_value(doc) == {"a": "a", "b": "bb"}


def test_trailing_bytes_after_the_document_are_ignored() -> None:
    # parse_binary bounds a container by its own size field, as the server does
    # (go-mysql TestJsonCompatibility has such a value).
    assert decode_json_value(encode_json_value({"a": 1}) + b"\x00\x01junk") == {"a": 1}


def test_nested_containers() -> None:
    value: JsonValue = {"a": [1, {"b": [None, "x", 2.5]}, []], "c": {}}
    raw = encode_json_value(value)
    assert _same(decode_json_value(raw), value)
    assert decode_json_text(raw) == '{"a":[1,{"b":[null,"x",2.5]},[]],"c":{}}'


def test_large_format_is_used_when_small_overflows() -> None:
    big = "x" * 70_000
    raw = encode_json_value({"k": big, "n": [1, 2]})
    assert raw[0] == 0x01  # large object
    assert decode_json_value(raw) == {"k": big, "n": [1, 2]}
    # The nested array still fits the small format on its own.
    raw_list = encode_json_value([big, [1, 2], 100_000])
    assert raw_list[0] == 0x03
    assert decode_json_value(raw_list) == [big, [1, 2], 100_000]


# -- opaque values ------------------------------------------------------------------------------


def _opaque(mysql_type: int, data: bytes) -> bytes:
    return bytes([0x0F, mysql_type, len(data)]) + data


def _datetime_packed(y: int, mo: int, d: int, *hms_us: int) -> bytes:
    h, mi, s, us = hms_us
    ymd = ((y * 13 + mo) << 5) | d
    hms = (h << 12) | (mi << 6) | s
    return struct.pack("<q", (((ymd << 17) | hms) << 24) + us)


def _time_packed(h: int, mi: int, s: int, us: int, *, negative: bool = False) -> bytes:
    value = (((h << 12) | (mi << 6) | s) << 24) + us
    return struct.pack("<q", -value if negative else value)


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        (_opaque(ColumnType.DATE, _datetime_packed(2012, 3, 18, 0, 0, 0, 0)), '"2012-03-18"'),
        (
            _opaque(ColumnType.DATETIME, _datetime_packed(2012, 3, 18, 11, 30, 45, 5)),
            '"2012-03-18 11:30:45.000005"',
        ),
        (
            _opaque(ColumnType.TIMESTAMP, _datetime_packed(1970, 1, 1, 0, 0, 1, 0)),
            '"1970-01-01 00:00:01.000000"',
        ),
        (_opaque(ColumnType.DATE, bytes(8)), '"0000-00-00"'),
        (_opaque(ColumnType.TIME, _time_packed(87, 31, 46, 654321)), '"87:31:46.654321"'),
        (
            _opaque(ColumnType.TIME, _time_packed(838, 59, 59, 0, negative=True)),
            '"-838:59:59.000000"',
        ),
        (_opaque(ColumnType.BLOB, b"\x00\xff"), '"base64:type252:AP8="'),
        (_opaque(ColumnType.BIT, b""), '"base64:type16:"'),
    ],
)
def test_opaque_text(raw: bytes, text: str) -> None:
    value = decode_json_value(raw)
    assert isinstance(value, JsonOpaque)
    assert json_to_text(value) == text
    assert encode_json_value(value) == raw


@pytest.mark.parametrize(
    ("text", "precision", "scale"),
    [
        ("123.456", 6, 3),
        ("9.00", 3, 2),
        ("-0.05", 2, 2),
        ("0", 1, 0),
        ("-1234567890.123456789012", 22, 12),
        ("99999999999999999999999999999999999.999999999999999999999999999999", 65, 30),
    ],
)
def test_decimal_round_trip(text: str, precision: int, scale: int) -> None:
    got_precision, got_scale, image = decimal_to_bin(Decimal(text))
    assert (got_precision, got_scale) == (precision, scale)
    assert str(decimal_from_bin(image, precision, scale)) == text
    raw = encode_json_value(Decimal(text))
    assert decode_json_text(raw) == text  # MySQL prints a JSON decimal as a bare number


def test_decimal_known_image() -> None:
    # go-mysql TestDecodeDecimal: DECIMAL(10,2) 12345.00 and DECIMAL(13,2) -123.45.
    assert decimal_from_bin(bytes([128, 0, 48, 57, 0]), 10, 2) == Decimal("12345.00")
    assert str(decimal_from_bin(bytes([127, 255, 255, 255, 132, 210]), 13, 2)) == "-123.45"


# -- text ---------------------------------------------------------------------------------------


def test_text_escapes_and_keeps_unicode() -> None:
    value: JsonValue = {'q"\\': "tab\there\nnew\x01ctl ünï 😀"}
    assert json_to_text(value) == '{"q\\"\\\\":"tab\\there\\nnew\\u0001ctl ünï 😀"}'


def test_text_numbers_are_exact() -> None:
    value: JsonValue = [2**64 - 1, -(2**63), 0.1, 1e300, -0.0, Decimal("1.10"), Decimal("1E+2")]
    assert (
        json_to_text(value)
        == "[18446744073709551615,-9223372036854775808,0.1,1e+300,-0.0,1.10,100]"
    )


def test_text_rejects_non_finite() -> None:
    with pytest.raises(ValueError, match="no representation"):
        json_to_text([float("nan")])
    with pytest.raises(ValueError, match="no representation"):
        encode_json_value(float("inf"))


# -- malformed input ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        (b"\x00\x01", "shorter than its count"),
        (b"\x00\x01\x00\x40\x00", "exceeds"),
        (b"\x00\x05\x00\x08\x00\x00\x00\x00\x00", "do not fit"),
        (_obj((b"a", 0x0C, b"\x01x"))[:-2] + b"\x05x", "exceeds"),  # string runs past the end
        (b"\x04\x07", "unknown literal"),
        (b"\x0e\x00", "unknown type"),
        (b"\x0c\x80\x80\x80\x80\x80\x01", "longer than five bytes"),
        (b"\x0c\x05ab", "exceeds"),
        (b"\x0c\x02\xc3\x28", "not valid UTF-8"),
        (b"\x0b\x00\x00", "double truncated"),
        (b"\x0b" + struct.pack("<d", float("nan")), "not finite"),
        (b"\x09\x01\x02", "truncated"),
        (_opaque(ColumnType.DATE, b"\x00" * 7), "not 8"),
        (_opaque(ColumnType.NEWDECIMAL, b"\x06\x03\x80"), "needs"),
        (_opaque(ColumnType.NEWDECIMAL, b"\x02\x03" + b"\x80\x00"), "precision"),
        (b"\x0f", "missing its type"),
    ],
)
def test_malformed_raises_decode_error(raw: bytes, match: str) -> None:
    with pytest.raises(DecodeError, match=match):
        decode_json_value(raw)


def test_key_and_value_offsets_must_stay_inside_their_container() -> None:
    good = _obj((b"a", 0x0C, b"\x01x"))
    bad_key = bytearray(good)
    bad_key[5:7] = struct.pack("<H", 200)
    with pytest.raises(DecodeError, match="key at offset 200"):
        decode_json_value(bytes(bad_key))
    bad_value = bytearray(good)
    bad_value[10:12] = struct.pack("<H", 2)  # points into the header
    with pytest.raises(DecodeError, match="value at offset 2"):
        decode_json_value(bytes(bad_value))


def test_shared_subtrees_are_refused() -> None:
    # An array whose 200 entries all point at the same nested array of 200 entries that all
    # point at one string: 40000 values from ~1.2 kB. The server never writes this.
    n = 200
    inner_header = 4 + 3 * n
    inner = struct.pack("<HH", n, inner_header + 2)
    inner += (b"\x0c" + struct.pack("<H", inner_header)) * n + b"\x01x"
    outer_header = 4 + 3 * n
    outer = struct.pack("<HH", n, outer_header + len(inner))
    outer += (b"\x02" + struct.pack("<H", outer_header)) * n + inner
    with pytest.raises(DecodeError, match="overlap"):
        decode_json_value(b"\x02" + outer)


def test_nesting_depth_is_bounded() -> None:
    raw = b"\x02" + struct.pack("<HH", 0, 4)  # []
    for _ in range(250):  # [[[...]]]: each level one value entry pointing just past it
        raw = b"\x02" + struct.pack("<HHBH", 1, 6 + len(raw), raw[0], 7) + raw[1:]
    with pytest.raises(DecodeError, match="deeper"):
        decode_json_value(raw)
    shallow = b"\x02" + struct.pack("<HH", 0, 4)
    for _ in range(99):
        shallow = b"\x02" + struct.pack("<HHBH", 1, 6 + len(shallow), shallow[0], 7) + shallow[1:]
    assert json_to_text(decode_json_value(shallow)) == "[" * 100 + "]" * 100


@settings(max_examples=examples(300), deadline=None)
@given(st.binary(max_size=64))
def test_arbitrary_bytes_decode_or_raise_decode_error(raw: bytes) -> None:
    try:
        value = decode_json_value(raw)
    except DecodeError:
        return
    json.loads(json_to_text(value))


# -- property round trips -----------------------------------------------------------------------

_decimals = st.tuples(st.integers(-(10**35) + 1, 10**35 - 1), st.integers(0, 30)).map(
    lambda t: Decimal(f"{t[0]}E-{t[1]}")
)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.sampled_from([-(2**63), 2**63 - 1, 2**63, 2**64 - 1, -(2**15), 2**15, 2**31, -(2**31) - 1])
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
    | _decimals
    | st.builds(JsonOpaque, st.sampled_from([15, 16, 252, 254]), st.binary(max_size=20))
)
_trees: st.SearchStrategy[JsonValue] = st.recursive(
    _scalars,
    lambda children: (
        st.lists(children, max_size=6) | st.dictionaries(st.text(), children, max_size=6)
    ),
    max_leaves=25,
)


@settings(max_examples=examples(200), deadline=None)
@given(_trees)
def test_encode_decode_round_trip(value: JsonValue) -> None:
    raw = encode_json_value(value)
    decoded = decode_json_value(raw)
    assert _same(decoded, value)
    text = json_to_text(decoded)
    assert text == json_to_text(value)
    assert json.loads(text, parse_float=Decimal) == _as_parsed(value)


@settings(deadline=None)
@given(_trees, st.data())
def test_every_truncation_raises_decode_error(value: JsonValue, data: st.DataObject) -> None:
    raw = encode_json_value(value)
    cut = data.draw(st.integers(1, len(raw) - 1))
    with pytest.raises(DecodeError):
        decode_json_value(raw[:cut])


# -- JSON paths and diffs -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "legs"),
    [
        ("$", ()),
        ("$.a", ("a",)),
        ('$."a b".c', ("a b", "c")),
        ('$."q\\"uote"', ('q"uote',)),
        ("$[0][12]", (0, 12)),
        ("$[last]", (-1,)),
        ("$[last - 2]", (-3,)),
        (" $ . a [ 1 ] ", ("a", 1)),
        ("$.ключ", ("ключ",)),
    ],
)
def test_parse_json_path(path: str, legs: tuple[str | int, ...]) -> None:
    assert parse_json_path(path) == legs


@pytest.mark.parametrize(
    "path", ["a", "$.*", "$[*]", "$**.a", "$[1 to 2]", "$.", '$."open', "$[", "$x"]
)
def test_parse_json_path_rejects(path: str) -> None:
    with pytest.raises(ValueError):
        parse_json_path(path)


def test_decode_json_diffs() -> None:
    vector = _diff_vector(
        _diff(REPLACE, "$.age", 26),
        _diff(INSERT, '$."new key"', {"x": [1]}),
        _diff(REMOVE, "$.data[last]"),
    )
    data = b"prefix" + vector + b"rest"
    diffs, end = decode_json_diffs(data, 6)
    assert end == len(data) - 4
    assert diffs == [
        JsonDiff(REPLACE, "$.age", 26),
        JsonDiff(INSERT, '$."new key"', {"x": [1]}),
        JsonDiff(REMOVE, "$.data[last]", None),
    ]


def test_decode_json_diffs_long_path_uses_lenenc() -> None:
    path = "$." + "k" * 300
    body = bytes([REMOVE, 252]) + struct.pack("<H", len(path)) + path.encode()
    diffs, end = decode_json_diffs(struct.pack("<I", len(body)) + body, 0)
    assert diffs == [JsonDiff(REMOVE, path, None)]
    assert end == 4 + len(body)


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"\x05\x00\x00", "length truncated"),
        (struct.pack("<I", 10) + b"\x00", "exceeds"),
        (_diff_vector(b"\x03\x01$"), "unknown operation"),
        (_diff_vector(b"\x02\x05$.a"), "path exceeds"),
        (_diff_vector(b"\x02\x03$.*"), "invalid"),
        (_diff_vector(b"\x00\x03$.a\x05\x04\x01"), "value exceeds"),
        (_diff_vector(b"\x00\x03$.a"), "value length truncated"),
        (_diff_vector(b"\x02\xfb"), "invalid length-encoded"),
        (_diff_vector(b"\x00\x03$.a\x02\x04\x09"), "unknown literal"),
    ],
)
def test_decode_json_diffs_rejects(data: bytes, match: str) -> None:
    with pytest.raises(DecodeError, match=match):
        decode_json_diffs(data, 0)


def test_apply_json_diffs() -> None:
    before: JsonValue = {"a": 1, "bb": [1, 2, 3], "ccc": {"x": None}}
    diffs = [
        JsonDiff(REPLACE, "$.a", "one"),
        JsonDiff(INSERT, "$.b", True),  # shorter keys first: lands before "bb"
        JsonDiff(INSERT, "$.bb[1]", 9),
        JsonDiff(INSERT, "$.bb[100]", 99),  # index past the end appends
        JsonDiff(REMOVE, "$.bb[0]"),
        JsonDiff(REPLACE, "$.bb[last]", 100),
        JsonDiff(INSERT, '$.ccc."y z"', [1]),
        JsonDiff(REMOVE, "$.ccc.x"),
    ]
    after = apply_json_diffs(before, diffs)
    assert json_to_text(after) == '{"a":"one","b":true,"bb":[9,2,3,100],"ccc":{"y z":[1]}}'
    assert before == {"a": 1, "bb": [1, 2, 3], "ccc": {"x": None}}  # untouched


@pytest.mark.parametrize(
    ("diff", "match"),
    [
        (JsonDiff(REPLACE, "$", 1), "root"),
        (JsonDiff(REPLACE, "$.missing", 1), "not found"),
        (JsonDiff(REPLACE, "$.a[5]", 1), "out of range"),
        (JsonDiff(INSERT, "$.a", 1), "already exists"),
        (JsonDiff(INSERT, "$.nope.x", 1), "not found"),
        (JsonDiff(REMOVE, "$.a[3]"), "out of range"),
        (JsonDiff(REMOVE, "$.a.x"), "does not match"),
        (JsonDiff(REMOVE, "$[0]"), "does not match"),
    ],
)
def test_apply_json_diffs_rejects(diff: JsonDiff, match: str) -> None:
    with pytest.raises(DecodeError, match=match):
        apply_json_diffs({"a": [1, 2, 3]}, [diff])


def test_partial_json_header() -> None:
    # value_options=1, then one bit per JSON column of the table (here 10 of them).
    data = b"\x01" + bytes([0b0000_0101, 0b10]) + b"\xff"
    options, bits, pos = decode_partial_json_header(data, 0, 10)
    assert options == 1
    assert bits == (True, False, True, False, False, False, False, False, False, True)
    assert pos == 3
    # value_options=0: no partial_bits bytes follow.
    assert decode_partial_json_header(b"\x00\xff", 0, 3) == (0, (False, False, False), 1)
    with pytest.raises(DecodeError, match="not 0 or 1"):
        decode_partial_json_header(b"\x02\x00", 0, 1)
    with pytest.raises(DecodeError, match="truncated"):
        decode_partial_json_header(b"\x01", 0, 1)


# (id INT, a JSON, b JSON, n INT): two JSON columns, so partial_bits has two bits.
_PARTIAL_TABLE = (
    ColumnDef(0, ColumnType.LONG, 0),
    ColumnDef(1, ColumnType.JSON, 4),
    ColumnDef(2, ColumnType.JSON, 4),
    ColumnDef(3, ColumnType.LONG, 0),
)


def _json_cell(value: JsonValue) -> bytes:
    doc = encode_json_value(value)
    return struct.pack("<I", len(doc)) + doc


def test_partial_after_image_applies_diffs_to_the_before_image() -> None:
    decoder = TableDecoder.build(_PARTIAL_TABLE)
    layout = decoder.layout(0b1111)
    image = (
        b"\x00"
        + struct.pack("<i", 1)
        + _json_cell({"x": 1, "y": [1, 2]})
        + _json_cell([1.5, Decimal("2.50"), 1e300])
        + struct.pack("<i", 7)
    )
    before, pos = layout.decode(image, 0)
    assert pos == len(image)
    assert before == (1, '{"x":1,"y":[1,2]}', "[1.5,2.50,1e+300]", 7)
    after_bytes = (
        b"\x01\x02"  # value_options = PARTIAL_JSON; partial_bits: only the 2nd JSON column
        + b"\x00"
        + struct.pack("<i", 1)
        + _json_cell({"x": 2})  # column a logged in full
        + _diff_vector(_diff(REPLACE, "$[0]", 2.5), _diff(INSERT, "$[3]", "z"))
        + struct.pack("<i", 8)
    )
    after, end = decode_partial_after_image(after_bytes, 0, before, layout, _PARTIAL_TABLE)
    assert after == (1, '{"x":2}', '[2.5,2.50,1e+300,"z"]', 8)
    assert end == len(after_bytes)
    # value_options = 0: no partial_bits, the image is an ordinary one.
    plain = b"\x00" + image
    assert decode_partial_after_image(plain, 0, before, layout, _PARTIAL_TABLE) == (
        before,
        len(plain),
    )


def test_partial_after_image_without_before_image_keeps_the_diffs() -> None:
    decoder = TableDecoder.build(_PARTIAL_TABLE)
    after_bytes = (
        b"\x01\x01\x00"
        + _diff_vector(_diff(REPLACE, "$.x", 2))
        + _json_cell(None)
        + struct.pack("<i", 8)
    )
    minimal_before, _ = decoder.layout(0b0001).decode(b"\x00" + struct.pack("<i", 1), 0)
    after, end = decode_partial_after_image(
        after_bytes, 0, minimal_before, decoder.layout(0b1110), _PARTIAL_TABLE
    )
    assert end == len(after_bytes)
    assert after[1] == UnappliedJsonDiffs((JsonDiff(JsonDiffOperation.REPLACE, "$.x", 2),))
    assert after[2:] == ("null", 8)
    null_before = (1, None, "[]", 7)
    with pytest.raises(DecodeError, match="SQL NULL"):
        decode_partial_after_image(
            after_bytes, 0, null_before, decoder.layout(0b1110), _PARTIAL_TABLE
        )


@settings(deadline=None)
@given(_trees)
def test_canonical_text_reads_back_to_the_same_text(value: JsonValue) -> None:
    # decode_partial_after_image re-reads the before image's text; untouched parts must print
    # exactly as they were (doubles vs decimals, exponents, scales).
    from replicator.binlog.json_diff import _text_to_tree

    text = json_to_text(value)
    assert json_to_text(_text_to_tree(text)) == text


# -- real server bytes --------------------------------------------------------------------------


def _events(path: Path) -> Iterator[tuple[int, bytes]]:
    """(type, body without header and CRC) of each event in a CRC32 binlog file."""
    data = path.read_bytes()
    assert data[:4] == b"\xfebin"
    pos = 4
    while pos < len(data):
        _, type_, _, size, _, flags = struct.unpack_from("<IBIIIH", data, pos)
        event = bytearray(data[pos : pos + size])
        if type_ == EventType.FORMAT_DESCRIPTION:
            struct.pack_into("<H", event, 17, flags & ~1)  # in-use flag is not in the CRC
        assert zlib.crc32(event[:-4]) == struct.unpack_from("<I", event, size - 4)[0]
        yield type_, bytes(event[19:-4])
        pos += size


def _rows_header(body: bytes, *, two_bitmaps: bool) -> tuple[int, int, int, int]:
    """ROWS v2 post-header and column bitmaps: (column count, before bitmap, after bitmap,
    position of the first row). Only for tables of fewer than 251 columns."""
    pos = 8
    pos += struct.unpack_from("<H", body, pos)[0]  # extra info length includes itself
    ncol = body[pos]
    pos += 1
    nbytes = (ncol + 7) // 8
    before = int.from_bytes(body[pos : pos + nbytes], "little")
    pos += nbytes
    after = before
    if two_bitmaps:
        after = int.from_bytes(body[pos : pos + nbytes], "little")
        pos += nbytes
    return ncol, before, after, pos


# Column layouts for the test tables: each a function from (body, pos) to the value's bytes
# (for JSON: the document after its 4-byte length) and the next position.
def _fixed(n: int) -> Any:
    return lambda b, p: (b[p : p + n], p + n)


def _prefixed(n: int) -> Any:
    return lambda b, p: (
        b[p + n : p + n + int.from_bytes(b[p : p + n], "little")],
        p + n + int.from_bytes(b[p : p + n], "little"),
    )


JSON_COL = _prefixed(4)


def _row(body: bytes, pos: int, columns: list[Any], bitmap: int) -> tuple[dict[int, Any], int]:
    present = [i for i in range(len(columns)) if bitmap >> i & 1]
    nbytes = (len(present) + 7) // 8
    nulls = int.from_bytes(body[pos : pos + nbytes], "little")
    pos += nbytes
    row: dict[int, Any] = {}
    for k, i in enumerate(present):
        if nulls >> k & 1:
            row[i] = None
        else:
            row[i], pos = columns[i](body, pos)
    return row, pos


def _rows(body: bytes, columns: list[Any], *, update: bool) -> list[dict[int, Any]]:
    _, before, after, pos = _rows_header(body, two_bitmaps=update)
    rows = []
    while pos < len(body):
        row, pos = _row(body, pos, columns, before)
        rows.append(row)
        if update:
            row, pos = _row(body, pos, columns, after)
            rows.append(row)
    assert pos == len(body)
    return rows


def test_json_opaque_binlog(corpus_dir: Path) -> None:
    """rust_mysql_common json-opaque.binlog (MySQL 9.0.1): `foo.test(a JSON)`, 8 inserts."""
    docs = [
        _rows(body, [JSON_COL], update=False)[0][0]
        for type_, body in _events(corpus_dir / "rust_mysql_common" / "json-opaque.binlog")
        if type_ == EventType.WRITE_ROWS
    ]
    # Upstream (mysql_common -> serde_json) quotes the two decimals; MySQL prints JSON
    # decimals as bare numbers with their scale, and so do we.
    assert [decode_json_text(d) for d in docs] == [
        '{"a":"base64:type15:VQ=="}',
        '{"b":"2012-03-18"}',
        '{"c":"2012-03-18 11:30:45.000000"}',
        '{"c":"87:31:46.654321"}',
        '{"d":123.456}',
        '{"e":9.00}',
        '{"e":[0,1,true,false]}',
        '{"e":null}',
    ]
    assert decode_json_value(docs[4]) == {"d": Decimal("123.456")}
    assert decode_json_value(docs[1]) == {"b": JsonOpaque(ColumnType.DATE, docs[1][-8:])}
    # The encoder writes the server's exact bytes back (keys here are already sorted), except
    # that the server stored 9.00 as DECIMAL(11,2) and a Decimal only knows it needs (3,2).
    reencoded = [encode_json_value(decode_json_value(d)) for d in docs]
    assert [r == d for r, d in zip(reencoded, docs, strict=True)] == [True] * 5 + [False] + [
        True
    ] * 2
    assert docs[5][15:17] == bytes([11, 2])
    assert reencoded[5][15:17] == bytes([3, 2])
    assert [decode_json_text(r) for r in reencoded] == [decode_json_text(d) for d in docs]


def _go_mysql(corpus: Path, test: str) -> dict[int, bytes]:
    vectors = json.loads((corpus / "go-mysql" / "test-vectors.json").read_text())["vectors"]
    return {v["line"]: bytes.fromhex(v["hex"]) for v in vectors if v["test"] == test}


def test_go_mysql_parse_json(corpus_dir: Path) -> None:
    """TestParseJson: t10(c1 JSON, c2 DECIMAL(10,0)) WRITE_ROWS bodies."""
    vectors = _go_mysql(corpus_dir, "TestParseJson")
    columns = [JSON_COL, _fixed(5)]
    null_row = _rows(vectors[380], columns, update=False)
    assert null_row == [{0: None, 1: b"\x80\x00\x00\x00\x01"}]
    (row,) = _rows(vectors[381], columns, update=False)
    assert decode_json_text(row[0]) == '{"key1":"value1","key2":"value2"}'
    (long_row,) = _rows(vectors[393], columns, update=False)
    value = decode_json_value(long_row[0])
    assert isinstance(value, dict)
    assert list(value) == ["text"]
    text = value["text"]
    assert isinstance(text, str)
    assert text.startswith(
        "Lorem ipsum dolor sit amet, consectetuer adipiscing elit. Aenean commodo ligula eget"
    )
    assert text.endswith("Sed aliquam, nisi quis porttitor congue, elit erat euismod orci, ac")


def test_go_mysql_json_null(corpus_dir: Path) -> None:
    """TestJsonNull: a NOT NULL JSON column left empty by a non-strict insert (length 0)."""
    vectors = _go_mysql(corpus_dir, "TestJsonNull")
    columns = [_fixed(4), _fixed(8), _fixed(8), JSON_COL, _fixed(1), _fixed(4), _fixed(4)]
    (row,) = _rows(vectors[591], columns, update=False)
    assert row[3] == b""
    # go-mysql returns an empty byte string; the server's parse_binary reads JSON null.
    assert decode_json_value(row[3]) is None
    assert decode_json_text(row[3]) == "null"


def test_go_mysql_json_compatibility(corpus_dir: Path) -> None:
    """TestJsonCompatibility: t11(id INT, cfg VARCHAR(100), cfg_json JSON generated, age INT)."""
    vectors = _go_mysql(corpus_dir, "TestJsonCompatibility")
    columns = [_fixed(4), _prefixed(1), JSON_COL, _fixed(4)]

    def texts(line: int, update: bool) -> list[str]:
        return [decode_json_text(r[2]) for r in _rows(vectors[line], columns, update=update)]

    assert texts(629, False) == ["{}"]
    assert texts(636, True) == ["{}", '{"a":1234}']  # after MySQL 5.7.22
    assert texts(643, True) == ['{"a":1234}', "{}"]
    # "before MySQL 5.7.22": the virtual column's before image is garbage (an object that
    # claims 12 bytes in a 5-byte value). go-mysql can only ignore it; we refuse it.
    broken, good = _rows(vectors[652], columns, update=True)
    with pytest.raises(DecodeError, match="exceeds"):
        decode_json_value(broken[2])
    assert decode_json_text(good[2]) == '{"a":1234}'
    # The before image's value is an empty object followed by stale bytes: the object's own
    # size bounds it, as in the server, so both images read "{}" (go-mysql agrees).
    assert texts(660, True) == ["{}", "{}"]


def test_osheroff_json_remove_57_and_sparse_80(corpus_dir: Path) -> None:
    """JsonPartialUpdateParseTest: the document after JSON_REMOVE(custom_fields, '$."17fc…"')
    as MySQL 5.7 (rewritten) and 8.0 (updated in place: the removed member's bytes remain)."""
    vectors = json.loads(
        (corpus_dir / "mysql-binlog-connector-java" / "test-vectors.json").read_text()
    )["vectors"]
    by_name = {v["name"]: bytes.fromhex(v["hex"]) for v in vectors if v["name"]}
    removed = "17fc9889474028063990914001f6854f6b8b5784"
    kept = "1f3a2ea5bc1f60258df20521bee9ac636df69a3a"
    docs = {}
    for name in ("BINLOG_UPDATE_57", "BINLOG_UPDATE_80"):
        doc = decode_json_value(by_name[name])
        assert isinstance(doc, dict)
        assert removed not in doc
        assert kept in doc
        assert doc[kept] == {"currency": "USD"}
        assert len(doc) == 6
        docs[name] = doc
    assert removed.encode() in by_name["BINLOG_UPDATE_80"]  # stale bytes of the sparse format
    assert removed.encode() not in by_name["BINLOG_UPDATE_57"]
    assert json_to_text(docs["BINLOG_UPDATE_57"]) == json_to_text(docs["BINLOG_UPDATE_80"])


def _ignore(body: bytes) -> None:
    del body


def test_partial_update_rows_json_binlog(corpus_dir: Path) -> None:
    """rust_mysql_common json.binlog.000001 (MySQL 8.0.22, binlog_row_image=MINIMAL,
    binlog_row_value_options=PARTIAL_JSON). Table mysql.t(id INT PK, json_col JSON,
    name VARCHAR(100) AS (json_col->>'$.name'), age INT AS (json_col->'$.age')).

    No upstream decoded values exist. The oracle is the server itself: the generated
    columns it logged next to each diff must agree with the document the diff produces."""
    columns = [_fixed(4), JSON_COL, _prefixed(2), _fixed(4)]
    state: dict[int, JsonValue] = {}
    counts = {EventType.WRITE_ROWS: 0, EventType.UPDATE_ROWS: 0, EventType.PARTIAL_UPDATE_ROWS: 0}

    def check_generated(doc: JsonValue, row: dict[int, Any]) -> None:
        assert isinstance(doc, dict)
        assert doc["name"] == row[2].decode()
        assert doc["age"] == struct.unpack("<i", row[3])[0]

    def on_table_map(body: bytes) -> None:
        assert body[8:18] == b"\x05mysql\x00\x01t\x00"
        assert body[18:23] == bytes([4, 0x03, 0xF5, 0x0F, 0x03])

    def on_write(body: bytes) -> None:
        for row in _rows(body, columns, update=False):
            doc = decode_json_value(row[1])
            check_generated(doc, row)
            state[struct.unpack("<i", row[0])[0]] = doc
            counts[EventType.WRITE_ROWS] += 1

    def on_update(body: bytes) -> None:
        rows = _rows(body, columns, update=True)
        for before, after in zip(rows[::2], rows[1::2], strict=True):
            key = struct.unpack("<i", before[0])[0]
            assert decode_json_value(before[1]) == state[key]
            doc = decode_json_value(after[1])
            check_generated(doc, after)
            state[key] = doc
            counts[EventType.UPDATE_ROWS] += 1

    def on_partial_update(body: bytes) -> None:
        ncol, before_map, after_map, pos = _rows_header(body, two_bitmaps=True)
        assert (ncol, before_map, after_map) == (4, 0b0001, 0b1110)  # MINIMAL image
        while pos < len(body):
            before, pos = _row(body, pos, columns, before_map)
            key = struct.unpack("<i", before[0])[0]
            options, partial, pos = decode_partial_json_header(body, pos, 1)
            assert (options, partial) == (1, (True,))
            assert body[pos] == 0  # null bitmap of the 3 after-image columns
            diffs, pos = decode_json_diffs(body, pos + 1)
            assert [(d.operation, d.path) for d in diffs] == [(REPLACE, "$.age")]
            name, pos = columns[2](body, pos)
            age, pos = columns[3](body, pos)
            doc = apply_json_diffs(state[key], diffs)
            json.loads(json_to_text(doc))
            check_generated(doc, {2: name, 3: age})
            assert doc != state[key]
            state[key] = doc
            counts[EventType.PARTIAL_UPDATE_ROWS] += 1

    handlers: dict[int, Callable[[bytes], None]] = {
        EventType.TABLE_MAP: on_table_map,
        EventType.WRITE_ROWS: on_write,
        EventType.UPDATE_ROWS: on_update,
        EventType.PARTIAL_UPDATE_ROWS: on_partial_update,
    }
    for type_, body in _events(corpus_dir / "rust_mysql_common" / "json.binlog.000001"):
        handlers.get(type_, _ignore)(body)
    assert counts == {
        EventType.WRITE_ROWS: 6,
        EventType.UPDATE_ROWS: 6,
        EventType.PARTIAL_UPDATE_ROWS: 6,
    }
    assert json_to_text(state[1]) == '{"age":26,"data":"xxxxxxxxxx","name":"Joe"}'
    assert json_to_text(state[6]) == '{"age":42,"data":"zzzzzzzzzz","name":"Pete"}'
