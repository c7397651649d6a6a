"""DECIMAL(p, s) in its binary row format (MYSQL_TYPE_NEWDECIMAL), decoded.

The format is defined by mysql-server ``strings/decimal.cc`` (``decimal2bin`` / ``bin2decimal``,
``decimal_bin_size``) and is the same in MariaDB (``strings/decimal.c``). Digits are grouped in
nines from the decimal point outwards: every whole group of 9 digits takes 4 bytes, a partial
group takes ``_DIG2BYTES[digits]`` bytes; the integer part's partial group comes first, the
fraction's partial group last. Groups are big-endian. A negative value stores every byte
inverted, and finally the top bit of the first byte is flipped, so the top bit is 1 for
non-negative values. The row metadata is ``precision << 8 | scale`` (``Field_new_decimal::
do_save_field_metadata`` in sql/field.cc).

Values come back as ``decimal.Decimal`` with exactly ``scale`` fractional digits (exponent
``-scale``), exact up to the 65 digits MySQL allows. Negative zero is returned as zero
(``Decimal(-0)`` is plain 0). A digit group above its decimal range is a ``DecodeError``.
(The tests' encoder, ``decimal2bin``, is in tests/encoders.py.)
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Context, Decimal

from .errors import DecodeError, TruncatedError

__all__ = [
    "MAX_PRECISION",
    "DecimalDecoder",
    "build_decimal_converter",
    "build_decimal_decoder",
    "decimal_size",
    "decode_decimal",
]

MAX_PRECISION = 65
_DIGITS_PER_GROUP = 9
_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
# Large enough that scaleb() never rounds a 65-digit value.
_EXACT = Context(prec=2 * MAX_PRECISION)

DecimalDecoder = Callable[[bytes, int], tuple[Decimal, int]]


def _check_shape(precision: int, scale: int) -> None:
    if not 1 <= precision <= MAX_PRECISION or not 0 <= scale <= precision:
        raise DecodeError(f"invalid DECIMAL({precision},{scale}) metadata")


def _groups(precision: int, scale: int) -> list[tuple[int, int]]:
    """(byte width, digit count) of each group, most significant first."""
    intg0, intg0x = divmod(precision - scale, _DIGITS_PER_GROUP)
    frac0, frac0x = divmod(scale, _DIGITS_PER_GROUP)
    groups: list[tuple[int, int]] = []
    if intg0x:
        groups.append((_DIG2BYTES[intg0x], intg0x))
    groups.extend([(4, _DIGITS_PER_GROUP)] * (intg0 + frac0))
    if frac0x:
        groups.append((_DIG2BYTES[frac0x], frac0x))
    return groups


def decimal_size(precision: int, scale: int) -> int:
    """Bytes a DECIMAL(precision, scale) value takes in a row image (``decimal_bin_size``)."""
    _check_shape(precision, scale)
    return sum(width for width, _ in _groups(precision, scale))


def build_decimal_converter(precision: int, scale: int) -> Callable[[bytes], Decimal]:
    """Converts exactly ``decimal_size(precision, scale)`` bytes to the value."""
    _check_shape(precision, scale)
    groups = _groups(precision, scale)
    size = sum(width for width, _ in groups)
    top = 1 << (8 * size - 1)
    invert = top - 1  # every bit but the sign bit: undoes the negation after the sign flip
    # Per group, least significant first: (bit shift, bit mask, digit limit, decimal weight).
    plan: list[tuple[int, int, int, int]] = []
    shift = 0
    weight = 1
    for width, digits in reversed(groups):
        limit = 10**digits
        plan.append((shift, (1 << (8 * width)) - 1, limit, weight))
        shift += 8 * width
        weight *= limit
    layout = tuple(plan)
    exponent = -scale
    exact = _EXACT

    def bad_group(group: int) -> DecodeError:
        return DecodeError(f"DECIMAL({precision},{scale}) value has an invalid digit group {group}")

    def convert(raw_bytes: bytes) -> Decimal:
        raw = int.from_bytes(raw_bytes, "big")
        if raw & top:
            raw ^= top
            negative = False
        else:
            raw ^= invert
            negative = True
        unscaled = 0
        for bit_shift, mask, limit, group_weight in layout:
            group = (raw >> bit_shift) & mask
            if group >= limit:
                raise bad_group(group)
            unscaled += group * group_weight
        if negative:
            unscaled = -unscaled
        if exponent:
            return Decimal(unscaled).scaleb(exponent, exact)
        return Decimal(unscaled)

    if len(layout) in (2, 3):
        return _unrolled(layout, top, invert, exponent, bad_group)
    if len(layout) != 1:
        return convert
    ((_, _, only_limit, _),) = layout

    def convert_one_group(raw_bytes: bytes) -> Decimal:
        """Up to 9 digits in one group: no loop."""
        raw = int.from_bytes(raw_bytes, "big")
        if raw & top:
            unscaled = raw ^ top
            if unscaled >= only_limit:
                raise bad_group(unscaled)
        else:
            unscaled = raw ^ invert
            if unscaled >= only_limit:
                raise bad_group(unscaled)
            unscaled = -unscaled
        if exponent:
            return Decimal(unscaled).scaleb(exponent, exact)
        return Decimal(unscaled)

    return convert_one_group


def _unrolled(
    layout: tuple[tuple[int, int, int, int], ...],
    top: int,
    invert: int,
    exponent: int,
    bad_group: Callable[[int], DecodeError],
) -> Callable[[bytes], Decimal]:
    """``convert`` without its loop, for two or three digit groups (DECIMAL(10,2),
    DECIMAL(12,2), DECIMAL(18,4)... the usual amounts)."""
    low_limit, low_mask = layout[0][2], layout[0][1]
    mid_shift, mid_mask, mid_limit, mid_weight = layout[1]
    if len(layout) == 3:
        high_shift, _, high_limit, high_weight = layout[2]
    else:  # two groups: the "middle" one is the most significant, the high one is 0
        high_shift, high_limit, high_weight = 8 * 64, 1, 0
    exact = _EXACT
    from_bytes = int.from_bytes

    def convert(raw_bytes: bytes) -> Decimal:
        raw = from_bytes(raw_bytes, "big")
        if raw & top:
            raw ^= top
            negative = False
        else:
            raw ^= invert
            negative = True
        low = raw & low_mask
        mid = raw >> mid_shift & mid_mask
        high = raw >> high_shift
        if low >= low_limit or mid >= mid_limit or high >= high_limit:
            raise bad_group(low if low >= low_limit else mid if mid >= mid_limit else high)
        unscaled = high * high_weight + mid * mid_weight + low
        if negative:
            unscaled = -unscaled
        if exponent:
            return Decimal(unscaled).scaleb(exponent, exact)
        return Decimal(unscaled)

    return convert


def build_decimal_decoder(precision: int, scale: int) -> DecimalDecoder:
    """A ``(buf, offset)`` decoder for one DECIMAL(precision, scale) column."""
    convert = build_decimal_converter(precision, scale)
    size = decimal_size(precision, scale)

    def decode(buf: bytes, offset: int) -> tuple[Decimal, int]:
        end = offset + size
        raw = buf[offset:end]
        if len(raw) != size:
            raise TruncatedError(f"DECIMAL({precision},{scale}) value runs past the row image")
        return convert(raw), end

    return decode


def decode_decimal(buf: bytes, offset: int, precision: int, scale: int) -> tuple[Decimal, int]:
    """Decode one value; builds the decoder each call (use ``build_decimal_decoder`` in loops)."""
    return build_decimal_decoder(precision, scale)(buf, offset)
