"""Bodies of MySQL's GTID, heartbeat v2 and transaction payload events.

Each decoder takes the event body: the bytes after the 19-byte common header, without the
4-byte CRC32. Sources in mysql-server (``libs/mysql/binlog/event`` from 8.1; earlier releases
keep the same code under ``libbinlogevents/src``):

GTID_LOG_EVENT (33) and ANONYMOUS_GTID_LOG_EVENT (34): ``control_events.cpp``
``Gtid_event::Gtid_event(const char *, const Format_description_event *)``. All little-endian:
flags u8 (bit 0 ``FLAG_MAY_HAVE_SBR``), 16 uuid bytes, gno i64. Then, when bytes remain, the
logical-clock type code u8; only code 2 is followed by last_committed and sequence_number
(i64 each) and the optional tail: immediate_commit_timestamp in 7 bytes whose bit 55 announces a
7-byte original_commit_timestamp (otherwise the two are equal); transaction_length as a
``net_field_length_ll`` integer; immediate_server_version u32 whose bit 31 announces an
original_server_version u32 (otherwise equal); commit_group_ticket u64. MySQL 5.6 stops after
the gno, and 5.7.4 and earlier wrote another type code, whose fields the server skips.

GTID_TAGGED_LOG_EVENT (42, MySQL 8.3+): the whole body is one ``mysql::serialization`` message
(``libs/mysql/serialization``: ``readme.md``, ``variable_length_integers.h``,
``serializer_impl.hpp`` ``decode_serializable``, ``serializer_default_impl.hpp``
``decode_serializable_metadata``/``decode_field_id``, ``primitive_type_codec.h``) whose fields
are listed by ``Gtid_event::define_fields`` in ``control_events.h``.

* Integers are variable-length: the number of trailing one bits of the first byte, plus one, is
  the byte count (1..9); the value is the rest of the first byte followed by the other bytes in
  little-endian order (a 9-byte integer keeps all 64 bits in bytes 2..9). Signed integers are
  zig-zag encoded first: ``x >= 0`` becomes ``2x``, ``x < 0`` becomes ``2(-x-1) + 1``.
* The message starts with the format version (1) as a field id, then the message size in bytes
  counted from the version, then the id-plus-one of the last field that a reader must
  understand (0 if every field may be ignored). Fields follow as ``field_id value``, ids in
  increasing order; an absent optional field simply has no entry, and the reader skips fields
  after the last one it knows by jumping to the end given by the size.
* Fields of ``Gtid_event``: 0 gtid_flags (unsigned), 1 uuid (16 unsigned integers, one per
  byte), 2 gno (signed), 3 tag (string: byte length, then the bytes; at most 32), 4
  last_committed and 5 sequence_number (signed), 6 immediate_commit_timestamp, 7
  original_commit_timestamp (absent when equal to 6), 8 transaction_length, 9
  immediate_server_version, 10 original_server_version (absent when equal to 9), 11
  commit_group_ticket (absent when unset), all unsigned.

``transaction_length`` (``Gtid_event::update_tagged_transaction_length`` and
``net_length_size_including_self``) is the size in bytes of the whole transaction as written,
from the first byte of the GTID event to the last byte of its commit event, headers and
checksums included.

HEARTBEAT_LOG_EVENT_V2 (41, MySQL 8.0.26+) and TRANSACTION_PAYLOAD_EVENT (40, MySQL 8.0.20+):
``codecs/binary.cpp`` ``Heartbeat::decode`` and ``Transaction_payload::decode``, with the field
codes in ``codecs/binary.h``. Both are a list of fields ``type length value`` where type and
length are ``net_field_length_ll`` integers, ended by type 0. Integer values are
``net_field_length_ll`` integers too; unknown types are skipped by their length. Heartbeat: 1
log file name (``length`` raw bytes), 2 log position. Payload: 1 payload size, 2 compression
type (``compression/base.h``: 0 zstd, 255 none), 3 uncompressed size (informational, not
written when uncompressed); the compressed bytes follow the end mark.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from uuid import UUID

from .errors import DecodeError, TruncatedError
from .gtid import TAG_MAX_LENGTH
from .reader import read_lenenc

__all__ = [
    "COMPRESSION_NONE",
    "COMPRESSION_ZSTD",
    "GtidFields",
    "decode_gtid",
    "decode_gtid_tagged",
    "decode_heartbeat_v2",
    "decode_payload_header",
    "read_varlen_signed",
    "read_varlen_unsigned",
]

COMPRESSION_ZSTD = 0
COMPRESSION_NONE = 255

_FLAG_MAY_HAVE_SBR = 1
_LOGICAL_TIMESTAMP_TYPECODE = 2
_COMMIT_TS_FLAG = 1 << 55
_SERVER_VERSION_FLAG = 1 << 31
_U32_MAX = (1 << 32) - 1
_U64_MAX = (1 << 64) - 1
_I64_MIN = -(1 << 63)
_I64_MAX = (1 << 63) - 1
_CLASSIC_FIXED = struct.Struct("<B16sq")

_SERIALIZATION_FORMAT_VERSION = 1
# Gtid_event::define_fields, in order; the id is the position.
(
    _F_GTID_FLAGS,
    _F_UUID,
    _F_GNO,
    _F_TAG,
    _F_LAST_COMMITTED,
    _F_SEQUENCE_NUMBER,
    _F_IMMEDIATE_COMMIT_TS,
    _F_ORIGINAL_COMMIT_TS,
    _F_TRANSACTION_LENGTH,
    _F_IMMEDIATE_SERVER_VERSION,
    _F_ORIGINAL_SERVER_VERSION,
    _F_COMMIT_GROUP_TICKET,
) = range(12)
_F_LAST_KNOWN = _F_COMMIT_GROUP_TICKET
_UNSIGNED_FIELD_MAX = {
    _F_GTID_FLAGS: 0xFF,
    _F_IMMEDIATE_COMMIT_TS: _U64_MAX,
    _F_ORIGINAL_COMMIT_TS: _U64_MAX,
    _F_TRANSACTION_LENGTH: _U64_MAX,
    _F_IMMEDIATE_SERVER_VERSION: _U32_MAX,
    _F_ORIGINAL_SERVER_VERSION: _U32_MAX,
    _F_COMMIT_GROUP_TICKET: _U64_MAX,
}
_SIGNED_FIELDS = frozenset((_F_GNO, _F_LAST_COMMITTED, _F_SEQUENCE_NUMBER))
_TAG_RE = re.compile(r"[a-z_][a-z0-9_]{0,31}", re.ASCII | re.IGNORECASE)

_OTW_END_MARK = 0
_OTW_HB_LOG_FILENAME = 1
_OTW_HB_LOG_POSITION = 2
_OTW_PAYLOAD_SIZE = 1
_OTW_PAYLOAD_COMPRESSION_TYPE = 2
_OTW_PAYLOAD_UNCOMPRESSED_SIZE = 3


@dataclass(frozen=True, slots=True)
class GtidFields:
    """What a MySQL GTID event body says. None means the writer did not include the field
    (older server); ``commit_flag`` is ``FLAG_MAY_HAVE_SBR``."""

    commit_flag: bool
    uuid: str
    tag: str
    gno: int
    last_committed: int | None
    sequence_number: int | None
    immediate_commit_timestamp: int | None
    original_commit_timestamp: int | None
    transaction_length: int | None
    immediate_server_version: int | None
    original_server_version: int | None


# -- mysql::serialization variable-length integers -----------------------------------------------


def read_varlen_unsigned(buf: bytes, pos: int) -> tuple[int, int]:
    """Read a ``mysql::serialization`` variable-length unsigned integer (1 to 9 bytes)."""
    if pos >= len(buf):
        raise TruncatedError("variable-length integer past the end of the event")
    first = buf[pos]
    count = 1
    while count < 9 and first >> (count - 1) & 1:
        count += 1
    end = pos + count
    if end > len(buf):
        raise TruncatedError("variable-length integer past the end of the event")
    if count == 1:
        return first >> 1, end
    rest = int.from_bytes(buf[pos + 1 : end], "little")
    if count == 9:
        return rest, end
    return (first >> count) | (rest << (8 - count)), end


def read_varlen_signed(buf: bytes, pos: int) -> tuple[int, int]:
    """Read a ``mysql::serialization`` variable-length signed (zig-zag) integer."""
    raw, pos = read_varlen_unsigned(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


# -- GTID -----------------------------------------------------------------------------------------


def _check_gno(gno: int) -> None:
    if gno < 0:
        raise DecodeError(f"negative GTID transaction number {gno}")


def decode_gtid(body: bytes) -> GtidFields:
    """Decode a GTID_LOG_EVENT or ANONYMOUS_GTID_LOG_EVENT body."""
    if len(body) < _CLASSIC_FIXED.size:
        raise TruncatedError(f"GTID event body of {len(body)} bytes, expected at least 25")
    flags, uuid_bytes, gno = _CLASSIC_FIXED.unpack_from(body, 0)
    _check_gno(gno)
    pos = _CLASSIC_FIXED.size
    last_committed = sequence_number = None
    immediate_ts = original_ts = transaction_length = None
    immediate_version = original_version = None
    if pos < len(body) and body[pos] == _LOGICAL_TIMESTAMP_TYPECODE:
        if pos + 17 > len(body):
            raise TruncatedError("GTID event ends inside its logical timestamps")
        last_committed, sequence_number = struct.unpack_from("<qq", body, pos + 1)
        pos += 17
        if pos + 7 <= len(body):
            immediate_ts = int.from_bytes(body[pos : pos + 7], "little")
            pos += 7
            if immediate_ts & _COMMIT_TS_FLAG:
                immediate_ts &= ~_COMMIT_TS_FLAG
                if pos + 7 > len(body):
                    raise TruncatedError("GTID event ends inside its original commit timestamp")
                original_ts = int.from_bytes(body[pos : pos + 7], "little")
                pos += 7
            else:
                original_ts = immediate_ts
            if pos < len(body):
                transaction_length, pos = read_lenenc(body, pos)
            if pos + 4 <= len(body):
                immediate_version = int.from_bytes(body[pos : pos + 4], "little")
                pos += 4
                if immediate_version & _SERVER_VERSION_FLAG:
                    immediate_version &= ~_SERVER_VERSION_FLAG
                    if pos + 4 > len(body):
                        raise TruncatedError("GTID event ends inside its original server version")
                    original_version = int.from_bytes(body[pos : pos + 4], "little")
                else:
                    original_version = immediate_version
            # A commit_group_ticket (8 bytes) may follow; it is internal to group replication.
    return GtidFields(
        commit_flag=bool(flags & _FLAG_MAY_HAVE_SBR),
        uuid=str(UUID(bytes=uuid_bytes)),
        tag="",
        gno=gno,
        last_committed=last_committed,
        sequence_number=sequence_number,
        immediate_commit_timestamp=immediate_ts,
        original_commit_timestamp=original_ts,
        transaction_length=transaction_length,
        immediate_server_version=immediate_version,
        original_server_version=original_version,
    )


def _read_tag(body: bytes, pos: int, end: int) -> tuple[str, int]:
    length, pos = read_varlen_unsigned(body, pos)
    if length > TAG_MAX_LENGTH:
        raise DecodeError(f"GTID tag of {length} bytes, at most {TAG_MAX_LENGTH} allowed")
    if pos + length > end:
        raise TruncatedError("GTID tag past the end of the event")
    raw = body[pos : pos + length]
    try:
        tag = raw.decode("ascii")
    except UnicodeDecodeError:
        tag = "?"
    if tag and _TAG_RE.fullmatch(tag) is None:
        raise DecodeError(f"invalid GTID tag {raw!r}")
    return tag.lower(), pos + length


def decode_gtid_tagged(body: bytes) -> GtidFields:
    """Decode a GTID_TAGGED_LOG_EVENT body (a ``mysql::serialization`` message)."""
    version, pos = read_varlen_unsigned(body, 0)
    if version != _SERIALIZATION_FORMAT_VERSION:
        raise DecodeError(f"GTID_TAGGED event in serialization format {version}, expected 1")
    size, pos = read_varlen_unsigned(body, pos)
    if size > len(body):
        raise TruncatedError(f"GTID_TAGGED message of {size} bytes in a body of {len(body)}")
    last_non_ignorable, pos = read_varlen_unsigned(body, pos)
    if last_non_ignorable > _F_LAST_KNOWN + 1:
        raise DecodeError(
            f"GTID_TAGGED event carries a field (id {last_non_ignorable - 1}) that a reader "
            "must understand and this one does not"
        )
    end = size
    values: dict[int, int] = {}
    uuid: str | None = None
    tag = ""
    previous = -1
    while pos < end:
        field_id, value_pos = read_varlen_unsigned(body, pos)
        if field_id <= previous:
            raise DecodeError(f"GTID_TAGGED field id {field_id} after field id {previous}")
        if field_id > _F_LAST_KNOWN:
            break  # a newer, ignorable field: the size tells where the message ends
        previous = field_id
        pos = value_pos
        if field_id == _F_UUID:
            uuid_bytes = bytearray()
            for _ in range(16):
                byte, pos = read_varlen_unsigned(body, pos)
                if byte > 0xFF:
                    raise DecodeError(f"GTID_TAGGED uuid byte value {byte}")
                uuid_bytes.append(byte)
            uuid = str(UUID(bytes=bytes(uuid_bytes)))
        elif field_id == _F_TAG:
            tag, pos = _read_tag(body, pos, end)
        elif field_id in _SIGNED_FIELDS:
            value, pos = read_varlen_signed(body, pos)
            if not _I64_MIN <= value <= _I64_MAX:
                raise DecodeError(f"GTID_TAGGED field {field_id} value {value} exceeds int64")
            values[field_id] = value
        else:
            value, pos = read_varlen_unsigned(body, pos)
            if value > _UNSIGNED_FIELD_MAX[field_id]:
                raise DecodeError(f"GTID_TAGGED field {field_id} value {value} out of range")
            values[field_id] = value
        if pos > end:
            raise TruncatedError("GTID_TAGGED field runs past the end of its message")
    if uuid is None or _F_GNO not in values:
        raise DecodeError("GTID_TAGGED event without a uuid or transaction number")
    gno = values[_F_GNO]
    _check_gno(gno)
    immediate_ts = values.get(_F_IMMEDIATE_COMMIT_TS)
    immediate_version = values.get(_F_IMMEDIATE_SERVER_VERSION)
    return GtidFields(
        # Gtid_event's constructor starts with FLAG_MAY_HAVE_SBR set.
        commit_flag=bool(values.get(_F_GTID_FLAGS, _FLAG_MAY_HAVE_SBR) & _FLAG_MAY_HAVE_SBR),
        uuid=uuid,
        tag=tag,
        gno=gno,
        last_committed=values.get(_F_LAST_COMMITTED),
        sequence_number=values.get(_F_SEQUENCE_NUMBER),
        immediate_commit_timestamp=immediate_ts,
        original_commit_timestamp=values.get(_F_ORIGINAL_COMMIT_TS, immediate_ts),
        transaction_length=values.get(_F_TRANSACTION_LENGTH),
        immediate_server_version=immediate_version,
        original_server_version=values.get(_F_ORIGINAL_SERVER_VERSION, immediate_version),
    )


# -- type-length-value bodies -------------------------------------------------------------------


def _read_tlv_integer(body: bytes, pos: int, length: int, what: str) -> int:
    """A ``net_field_length_ll`` value that must fill exactly its declared length."""
    end = pos + length
    if end > len(body):
        raise TruncatedError(f"{what} past the end of the event")
    value, value_end = read_lenenc(body[:end], pos)
    if value_end != end:
        raise DecodeError(f"{what} takes {value_end - pos} bytes but its field declares {length}")
    return value


def decode_heartbeat_v2(body: bytes) -> tuple[str, int]:
    """Decode a HEARTBEAT_LOG_EVENT_V2 body: (binlog file name, position)."""
    pos = 0
    name: str | None = None
    position: int | None = None
    while pos < len(body):
        field_type, pos = read_lenenc(body, pos)
        if field_type == _OTW_END_MARK:
            break
        length, pos = read_lenenc(body, pos)
        if pos + length > len(body):
            raise TruncatedError(f"heartbeat field {field_type} past the end of the event")
        if field_type == _OTW_HB_LOG_FILENAME:
            try:
                name = body[pos : pos + length].decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DecodeError("heartbeat log file name is not UTF-8") from exc
        elif field_type == _OTW_HB_LOG_POSITION:
            position = _read_tlv_integer(body, pos, length, "heartbeat log position")
        pos += length
    if name is None or position is None:
        raise DecodeError("heartbeat v2 event without a log file name and position")
    return name, position


def decode_payload_header(body: bytes) -> tuple[int, int, int, int]:
    """Decode a TRANSACTION_PAYLOAD_EVENT header.

    Returns ``(compression_type, payload_size, uncompressed_size, payload_offset)``; the
    payload is ``body[payload_offset : payload_offset + payload_size]``. An uncompressed
    payload without a declared uncompressed size reports its payload size; a compressed one
    reports 0 (unknown)."""
    pos = 0
    compression_type: int | None = None
    payload_size: int | None = None
    uncompressed_size: int | None = None
    while True:
        if pos >= len(body):
            raise TruncatedError("transaction payload header has no end mark")
        field_type, pos = read_lenenc(body, pos)
        if field_type == _OTW_END_MARK:
            break
        length, pos = read_lenenc(body, pos)
        if field_type == _OTW_PAYLOAD_SIZE:
            payload_size = _read_tlv_integer(body, pos, length, "payload size")
        elif field_type == _OTW_PAYLOAD_COMPRESSION_TYPE:
            compression_type = _read_tlv_integer(body, pos, length, "compression type")
            if compression_type not in (COMPRESSION_ZSTD, COMPRESSION_NONE):
                raise DecodeError(f"unknown transaction payload compression {compression_type}")
        elif field_type == _OTW_PAYLOAD_UNCOMPRESSED_SIZE:
            uncompressed_size = _read_tlv_integer(body, pos, length, "uncompressed size")
        elif pos + length > len(body):
            raise TruncatedError(f"payload header field {field_type} past the end of the event")
        pos += length
    if payload_size is None or compression_type is None:
        raise DecodeError("transaction payload header without payload size or compression type")
    if payload_size > len(body) - pos:
        raise TruncatedError(
            f"transaction payload of {payload_size} bytes but {len(body) - pos} follow its header"
        )
    if uncompressed_size is None:
        uncompressed_size = payload_size if compression_type == COMPRESSION_NONE else 0
    return compression_type, payload_size, uncompressed_size, pos
