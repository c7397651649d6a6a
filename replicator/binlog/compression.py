"""Decompression of compressed events.

* MariaDB ``log_bin_compress`` (QUERY_COMPRESSED, *_ROWS_COMPRESSED_V1): one header byte
  ``0x80 | algorithm << 4 | lenlen``, then the uncompressed length in ``lenlen`` big-endian
  bytes, then a zlib stream (MariaDB ``sql/log_event.cc`` ``binlog_buf_compress`` /
  ``binlog_buf_uncompress``; algorithm 0 is zlib, the only one defined).
* MySQL TRANSACTION_PAYLOAD: a zstd frame (``libbinlogevents/src/compression/zstd_dec.cpp``).
"""

from __future__ import annotations

import zlib

import zstandard

from .errors import DecodeError


def mariadb_uncompress(data: bytes) -> bytes:
    """Inflate a MariaDB compressed event section."""
    if not data or not data[0] & 0x80:
        raise DecodeError("compressed event section lacks the compression header")
    algorithm = (data[0] >> 4) & 0x07
    lenlen = data[0] & 0x07
    if algorithm != 0:
        raise DecodeError(f"unknown MariaDB event compression algorithm {algorithm}")
    if lenlen < 1 or lenlen > 4 or len(data) < 1 + lenlen:
        raise DecodeError(f"invalid MariaDB compressed length size {lenlen}")
    expected = int.from_bytes(data[1 : 1 + lenlen], "big")
    try:
        out = zlib.decompress(data[1 + lenlen :])
    except zlib.error as exc:
        raise DecodeError(f"cannot inflate MariaDB compressed event: {exc}") from exc
    if len(out) != expected:
        raise DecodeError(
            f"MariaDB compressed event inflated to {len(out)} bytes, header says {expected}"
        )
    return out


def zstd_uncompress(data: bytes, expected_size: int) -> bytes:
    """Inflate a TRANSACTION_PAYLOAD zstd frame and check its declared size."""
    try:
        out = zstandard.ZstdDecompressor().decompressobj().decompress(data)
    except zstandard.ZstdError as exc:
        raise DecodeError(f"cannot inflate zstd transaction payload: {exc}") from exc
    if expected_size and len(out) != expected_size:  # 0: the header did not say
        raise DecodeError(
            f"zstd transaction payload inflated to {len(out)} bytes, header says {expected_size}"
        )
    return bytes(out)
