"""Primitive field readers shared by the event decoders.

Length-encoded integers and strings follow the client/server protocol
(mysql-server ``include/mysql_com.h`` ``net_field_length_ll`` and ``net_store_length``):
a first byte below 0xFB is the value, 0xFC/0xFD/0xFE announce a 2/3/8-byte little-endian value.
Every reader takes ``(buf, pos)`` and returns ``(value, new_pos)``; bounds are the caller's
responsibility except where a length read from the data could run past the end.
"""

from __future__ import annotations

from .errors import TruncatedError


def read_lenenc(buf: bytes, pos: int) -> tuple[int, int]:
    """Read a length-encoded integer."""
    if pos >= len(buf):
        raise TruncatedError("length-encoded integer past the end of the event")
    first = buf[pos]
    if first < 0xFB:
        return first, pos + 1
    if first == 0xFC:
        width = 2
    elif first == 0xFD:
        width = 3
    elif first == 0xFE:
        width = 8
    else:
        raise TruncatedError(f"invalid length-encoded integer prefix 0x{first:02x}")
    end = pos + 1 + width
    if end > len(buf):
        raise TruncatedError("length-encoded integer past the end of the event")
    return int.from_bytes(buf[pos + 1 : end], "little"), end


def write_lenenc(value: int) -> bytes:
    """Encode a length-encoded integer (inverse of ``read_lenenc``)."""
    if value < 0:
        raise ValueError("length-encoded integers are unsigned")
    if value < 0xFB:
        return bytes((value,))
    if value < 1 << 16:
        return b"\xfc" + value.to_bytes(2, "little")
    if value < 1 << 24:
        return b"\xfd" + value.to_bytes(3, "little")
    if value < 1 << 64:
        return b"\xfe" + value.to_bytes(8, "little")
    raise ValueError("length-encoded integer above 2**64-1")


def read_lenenc_bytes(buf: bytes, pos: int) -> tuple[bytes, int]:
    """Read a length-encoded string as bytes."""
    length, pos = read_lenenc(buf, pos)
    end = pos + length
    if end > len(buf):
        raise TruncatedError("length-encoded string past the end of the event")
    return bytes(buf[pos:end]), end


def take(buf: bytes, pos: int, length: int) -> tuple[bytes, int]:
    """Read ``length`` bytes, failing clearly when the event is shorter."""
    end = pos + length
    if end > len(buf) or length < 0:
        raise TruncatedError(f"field of {length} bytes past the end of the event")
    return bytes(buf[pos:end]), end


def uint(buf: bytes, pos: int, width: int) -> tuple[int, int]:
    """Read an unsigned little-endian integer of ``width`` bytes."""
    end = pos + width
    if end > len(buf):
        raise TruncatedError(f"{width}-byte integer past the end of the event")
    return int.from_bytes(buf[pos:end], "little"), end


def bitmap_bits(data: bytes, count: int) -> tuple[bool, ...]:
    """Bits of a server bitmap, least significant bit of the first byte first
    (``MY_BITMAP`` as used for row-image column and NULL bitmaps)."""
    value = int.from_bytes(data, "little")
    return tuple(bool(value >> i & 1) for i in range(count))


def bitmap_bits_msb(data: bytes, count: int) -> tuple[bool, ...]:
    """Bits of an optional-metadata bitmap: most significant bit of the first byte first
    (``Table_map_log_event`` SIGNEDNESS and COLUMN_VISIBILITY)."""
    return tuple(bool(data[i // 8] >> (7 - i % 8) & 1) for i in range(count))
