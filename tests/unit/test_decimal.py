"""DECIMAL binary format: go-mysql's server-generated vectors, MySQL's own example, and
hypothesis round trips over every precision and scale."""

from __future__ import annotations

import json
import re
from decimal import Context, Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replicator.binlog.decimal import (
    MAX_PRECISION,
    build_decimal_decoder,
    decimal_size,
    decode_decimal,
)
from replicator.binlog.errors import DecodeError, TruncatedError
from tests.corpus.util import CORPUS_DIR
from tests.encoders import encode_decimal

CORPUS = CORPUS_DIR  # ../shared/binlog-corpus, or $REPLICATOR_CORPUS_DIR
GO_MYSQL_VECTORS = CORPUS / "go-mysql" / "test-vectors.json"
EXACT = Context(prec=200)


def go_mysql_vectors(test: str) -> list[dict[str, Any]]:
    if not GO_MYSQL_VECTORS.is_file():
        pytest.skip(f"binlog corpus not found at {GO_MYSQL_VECTORS}")
    vectors: list[dict[str, Any]] = json.loads(GO_MYSQL_VECTORS.read_text())["vectors"]
    return [v for v in vectors if v["test"] == test]


def make(unscaled: int, scale: int) -> Decimal:
    return Decimal(unscaled).scaleb(-scale, EXACT)


# --------------------------------------------------------------------- corpus vectors

# {[]byte{...}, precision, scale, "expected", expectedPos, nil},
_DECODE_DECIMAL_TAIL = re.compile(r'\s*,\s*(\d+),\s*(\d+),\s*"([^"]*)",\s*(\d+),\s*nil\},?\s*\Z')


def test_go_mysql_decode_decimal_vectors() -> None:
    """All 187 DECIMAL images from go-mysql's TestDecodeDecimal (a real server wrote them;
    each buffer may carry the next column's bytes after the value)."""
    vectors = go_mysql_vectors("TestDecodeDecimal")
    checked = 0
    for vector in vectors:
        match = _DECODE_DECIMAL_TAIL.match(vector["same_line_tail"])
        assert match is not None, vector
        precision, scale, expected, expected_pos = (
            int(match[1]),
            int(match[2]),
            match[3],
            int(match[4]),
        )
        data = bytes.fromhex(vector["hex"])
        value, end = decode_decimal(data, 0, precision, scale)
        assert (format(value, "f"), end) == (expected, expected_pos), vector
        assert value.as_tuple().exponent == -scale
        assert encode_decimal(value, precision, scale) == data[:end]
        checked += 1
    assert checked == 187


def test_go_mysql_decimal_data_vectors() -> None:
    """go-mysql's decimalData: expected string on the line before, meta after."""
    vectors = go_mysql_vectors("decimalData(var, used by TestDecodeDecimal*)")
    checked = 0
    for vector in vectors:
        expected = re.fullmatch(r'\s*"([^"]+)",\s*', vector["prev_line"])
        meta = re.fullmatch(r"\s*(\d+),\s*", vector["next_line"])
        assert expected is not None and meta is not None, vector
        precision, scale = int(meta[1]) >> 8, int(meta[1]) & 0xFF
        data = bytes.fromhex(vector["hex"])
        value, end = decode_decimal(data, 0, precision, scale)
        assert end == len(data) == decimal_size(precision, scale)
        assert format(value, "f") == expected[1]
        assert encode_decimal(value, precision, scale) == data
        checked += 1
    assert checked == 12


def test_mysql_source_example() -> None:
    """The worked example in strings/decimal.cc (decimal2bin): 1234567890.1234 as
    DECIMAL(14,4) is 81 0D FB 38 D2 04 D2; the negative stores every byte inverted."""
    image = bytes.fromhex("810DFB38D204D2")
    assert encode_decimal(Decimal("1234567890.1234"), 14, 4) == image
    assert decode_decimal(image, 0, 14, 4) == (Decimal("1234567890.1234"), 7)
    negative = bytes.fromhex("7EF204C72DFB2D")
    assert encode_decimal(Decimal("-1234567890.1234"), 14, 4) == negative
    assert decode_decimal(negative, 0, 14, 4) == (Decimal("-1234567890.1234"), 7)


def test_real_server_value_in_binlog_file() -> None:
    """MySQL 9.6 wrote DECIMAL(10,2) 250.00 into this file (INDEX.md, GTID_TAG row)."""
    path = CORPUS / "rust_mysql_common" / "binlog_transaction_with_GTID_TAG.000001"
    if not path.is_file():
        pytest.skip(f"binlog corpus file not found: {path}")
    assert encode_decimal(Decimal("250.00"), 10, 2) in path.read_bytes()


# ------------------------------------------------------------------------ properties


@st.composite
def decimals(draw: st.DrawFn) -> tuple[Decimal, int, int]:
    precision = draw(st.integers(1, MAX_PRECISION))
    scale = draw(st.integers(0, min(precision, 30)))
    largest = 10**precision - 1
    unscaled = draw(
        st.one_of(
            st.integers(-largest, largest),
            st.sampled_from([0, 1, -1, largest, -largest]),
        )
    )
    return make(unscaled, scale), precision, scale


@given(decimals(), st.binary(max_size=4), st.binary(max_size=4))
def test_round_trip(case: tuple[Decimal, int, int], before: bytes, after: bytes) -> None:
    value, precision, scale = case
    image = encode_decimal(value, precision, scale)
    assert len(image) == decimal_size(precision, scale)
    decoded, end = build_decimal_decoder(precision, scale)(before + image + after, len(before))
    assert decoded == value
    assert decoded.as_tuple().exponent == -scale
    assert end == len(before) + len(image)


def test_extremes_of_every_shape() -> None:
    """10^(p-s) - 10^-s and its negative, for every precision and scale up to 30."""
    for precision in range(1, MAX_PRECISION + 1):
        for scale in range(min(precision, 30) + 1):
            decode = build_decimal_decoder(precision, scale)
            largest = make(10**precision - 1, scale)
            ten = Decimal(10)
            assert largest == EXACT.subtract(
                EXACT.power(ten, precision - scale), EXACT.power(ten, -scale)
            )
            for value in (largest, largest.copy_negate(), make(0, scale), make(-1, scale)):
                image = encode_decimal(value, precision, scale)
                assert decode(image, 0) == (value, len(image))


def test_sizes_follow_dig2bytes() -> None:
    assert decimal_size(4, 2) == 2
    assert decimal_size(10, 2) == 5
    assert decimal_size(65, 30) == 30
    assert decimal_size(65, 0) == 29
    assert decimal_size(9, 9) == 4


def test_negative_zero_is_zero() -> None:
    image = encode_decimal(Decimal("-0.00"), 5, 2)
    assert image == encode_decimal(Decimal("0.00"), 5, 2) == bytes.fromhex("800000")
    # A negative sign over all-zero digits (all bytes inverted) also reads as plain zero.
    value, end = decode_decimal(bytes.fromhex("7FFFFF"), 0, 5, 2)
    assert (value, end) == (Decimal("0.00"), 3)
    assert not value.is_signed()


def test_encode_rejects_what_does_not_fit() -> None:
    with pytest.raises(ValueError, match="fractional digits"):
        encode_decimal(Decimal("1.005"), 5, 2)
    with pytest.raises(ValueError, match="does not fit"):
        encode_decimal(Decimal("1000.00"), 5, 2)
    with pytest.raises(ValueError, match="finite"):
        encode_decimal(Decimal("NaN"), 5, 2)


def test_bad_metadata_and_bytes() -> None:
    with pytest.raises(DecodeError, match="invalid DECIMAL"):
        build_decimal_decoder(0, 0)
    with pytest.raises(DecodeError, match="invalid DECIMAL"):
        build_decimal_decoder(66, 0)
    with pytest.raises(DecodeError, match="invalid DECIMAL"):
        build_decimal_decoder(5, 6)
    with pytest.raises(TruncatedError):
        decode_decimal(bytes.fromhex("810DFB38D204"), 0, 14, 4)
    with pytest.raises(TruncatedError):
        decode_decimal(bytes.fromhex("810DFB38D204D2"), 1, 14, 4)
    # A 9-digit group holding 0xFFFFFFFF (> 999999999) is not a decimal.
    with pytest.raises(DecodeError, match="invalid digit group"):
        decode_decimal(bytes.fromhex("FFFFFFFF"), 0, 9, 0)
