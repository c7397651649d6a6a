"""Global transaction identifiers of both flavours, as immutable values.

A replica resumes from a GTID position, and the binlog announces positions in events; both need
exact, canonical, order-independent values that survive a round trip through text and bytes.

MariaDB (``sql/rpl_gtid.cc``, ``gtid_parser_helper`` and ``rpl_slave_state::load``): a GTID is
``domain-server-seq`` (u32, u32, u64). A replication position holds at most one GTID per domain
and is written as a comma-separated list; this is what ``SET @slave_connect_state=...`` and
``gtid_slave_pos`` take. Sequence numbers are ordered only inside one domain.

MySQL (``sql/rpl_gtid_set.cc``: ``Gtid_set::add_gtid_text``, ``Gtid_set::to_string``,
``Gtid_set::encode``, ``Gtid_set::add_gtid_encoding``; ``libs/mysql/gtid/tsid.cpp``,
``tag.cpp``): a GTID is ``uuid:N`` or, from 8.3, ``uuid:tag:N``. A set keeps, per (uuid, tag),
a list of half-open intervals ``[start, end)``. Text form: one comma-separated item per uuid,
colon-separated intervals, a tag switching the tag for the intervals after it. MySQL prints
uuids in byte order (``Uuid::operator<`` is a memcmp), for one uuid the untagged intervals first
and then the tags in string order (``Tsid::operator<``).

Binary form (PREVIOUS_GTIDS_LOG_EVENT body, COM_BINLOG_DUMP_GTID data), all little-endian:

* 8 bytes: in the classic (untagged) format the number of sids, top byte 0. In the tagged format
  (``encode_nsids_format``) the top byte and the low byte hold the format code 1 and bits 8..55
  hold the number of sids.
* per sid: 16 uuid bytes; tagged format only: the tag length as a ``mysql::serialization``
  variable-length unsigned integer (``variable_length_integers.h``; the count of trailing one
  bits of the first byte is the number of extra bytes) and the tag's ASCII bytes (length 0 for
  no tag); then 8 bytes interval count and per interval int64 start and int64 end (exclusive).

The server writes the classic format when no sid has a tag, so servers before 8.3 accept it.
"""

from __future__ import annotations

import bisect
import itertools
import re
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from uuid import UUID

from ..errors import ConfigError
from .errors import DecodeError, TruncatedError
from .records import record

__all__ = [
    "GNO_MAX",
    "TAG_MAX_LENGTH",
    "GtidParseError",
    "Interval",
    "MariadbGtid",
    "MariadbGtidPosition",
    "MysqlGtid",
    "MysqlGtidSet",
    "TsidIntervals",
]


class GtidParseError(ConfigError, ValueError):
    """A GTID or GTID set in text form that the server would not accept either."""

    hint = (
        "write MariaDB positions as domain-server-seq[,domain-server-seq...] and MySQL GTID "
        "sets as uuid[:tag]:N[-M][:...][,uuid...]"
    )


_U32_MAX = 0xFFFF_FFFF
_U64_MAX = 0xFFFF_FFFF_FFFF_FFFF

# ---------------------------------------------------------------------------------------------
# MariaDB


_MARIADB_GTID_RE = re.compile(r"\s*([0-9]+)\s*-\s*([0-9]+)\s*-\s*([0-9]+)\s*", re.ASCII)


def _check_range(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ValueError(f"{name} {value} is outside {low}..{high}")


@record
class MariadbGtid:
    """One MariaDB GTID, ``domain_id-server_id-seq_no``."""

    domain_id: int
    server_id: int
    seq_no: int

    def __post_init__(self) -> None:
        _check_range("domain_id", self.domain_id, 0, _U32_MAX)
        _check_range("server_id", self.server_id, 0, _U32_MAX)
        _check_range("seq_no", self.seq_no, 0, _U64_MAX)

    @classmethod
    def parse(cls, text: str) -> MariadbGtid:
        """Parse ``D-S-N``; surrounding whitespace is ignored."""
        match = _MARIADB_GTID_RE.fullmatch(text)
        if match is None:
            raise GtidParseError(f"not a MariaDB GTID (domain-server-seq): {text!r}")
        try:
            return cls(int(match[1]), int(match[2]), int(match[3]))
        except ValueError as exc:
            raise GtidParseError(f"bad MariaDB GTID {text.strip()!r}: {exc}") from exc

    def __str__(self) -> str:
        return f"{self.domain_id}-{self.server_id}-{self.seq_no}"


@record
class MariadbGtidPosition:
    """A MariaDB replication position: the last GTID applied in each replication domain.

    ``gtids`` may be given in any order; it is stored sorted by domain. Two GTIDs of one domain
    are an error, as in the server (a position names exactly one point per domain).
    MariaDB orders transactions only within a domain, by ``seq_no``; domains are independent
    streams and the server id is not part of the order.
    """

    gtids: tuple[MariadbGtid, ...] = ()

    def __post_init__(self) -> None:
        ordered = tuple(sorted(self.gtids, key=lambda gtid: gtid.domain_id))
        for before, after in itertools.pairwise(ordered):
            if before.domain_id == after.domain_id:
                raise ValueError(
                    f"GTIDs {before} and {after} are both in domain {before.domain_id}; "
                    "a position has one GTID per domain"
                )
        object.__setattr__(self, "gtids", ordered)

    @classmethod
    def parse(cls, text: str) -> MariadbGtidPosition:
        """Parse ``"0-1-100,1-2-7"``. Empty or blank text is the empty position."""
        if not text.strip():
            return cls()
        gtids = tuple(MariadbGtid.parse(item) for item in text.split(","))
        try:
            return cls(gtids)
        except ValueError as exc:
            raise GtidParseError(f"bad MariaDB GTID position {text.strip()!r}: {exc}") from exc

    def get(self, domain_id: int) -> MariadbGtid | None:
        """The position's GTID in ``domain_id``, or None."""
        for gtid in self.gtids:
            if gtid.domain_id == domain_id:
                return gtid
        return None

    def advance(self, gtid: MariadbGtid) -> MariadbGtidPosition:
        """A new position with ``gtid`` as its domain's point (replacing any earlier one).

        The position moves wherever it is told, like the server's own state: a lower
        ``seq_no`` is not refused here.
        """
        gtids = self.gtids
        if len(gtids) == 1 and gtids[0].domain_id == gtid.domain_id:
            # one domain, the common case (once per transaction): nothing to sort or check
            moved = object.__new__(MariadbGtidPosition)
            object.__setattr__(moved, "gtids", (gtid,))
            return moved
        kept = tuple(other for other in gtids if other.domain_id != gtid.domain_id)
        return MariadbGtidPosition((*kept, gtid))

    def contains(self, gtid: MariadbGtid) -> bool:
        """True if ``gtid`` is at or before this position: its domain is present and its
        ``seq_no`` is not above the position's ``seq_no`` for that domain."""
        mine = self.get(gtid.domain_id)
        return mine is not None and gtid.seq_no <= mine.seq_no

    def __contains__(self, gtid: object) -> bool:
        return isinstance(gtid, MariadbGtid) and self.contains(gtid)

    def is_empty(self) -> bool:
        return not self.gtids

    def __len__(self) -> int:
        return len(self.gtids)

    def __iter__(self) -> Iterator[MariadbGtid]:
        return iter(self.gtids)

    def __str__(self) -> str:
        return ",".join(str(gtid) for gtid in self.gtids)


# ---------------------------------------------------------------------------------------------
# MySQL

#: Largest transaction number MySQL hands out (``GNO_END - 1``, GNO_END being INT64_MAX).
GNO_MAX = 2**63 - 2
_GNO_END = GNO_MAX + 1
#: Longest tag (``mysql::gtid::tag_max_length``).
TAG_MAX_LENGTH = 32

#: A half-open interval ``[start, end)`` of transaction numbers.
Interval = tuple[int, int]

_UUID_RE = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.ASCII | re.IGNORECASE
)
_TAG_RE = re.compile(r"[a-z_][a-z0-9_]{0,31}", re.ASCII | re.IGNORECASE)
# 19 digits hold every valid number; longer ones are rejected instead of handed to int().
_INTERVAL_RE = re.compile(r"([0-9]{1,19})(?:\s*-\s*([0-9]{1,19}))?", re.ASCII)

_FORMAT_UNTAGGED = 0
_FORMAT_TAGGED = 1
_U64 = struct.Struct("<Q")


def _normalize_tag(tag: str) -> str:
    """Tags are case-insensitive; MySQL keeps them lowercase (``Tag::replace``)."""
    if tag and _TAG_RE.fullmatch(tag) is None:
        raise ValueError(
            f"invalid GTID tag {tag!r}: 1 to {TAG_MAX_LENGTH} characters of letters, digits and "
            "'_', not starting with a digit"
        )
    return tag.lower()


def _check_gno(gno: int) -> None:
    _check_range("transaction number", gno, 1, GNO_MAX)


def _normalize_intervals(intervals: Iterable[Interval]) -> tuple[Interval, ...]:
    """Sort and merge overlapping or touching intervals; refuse empty or out-of-range ones."""
    ordered = sorted(intervals)
    merged: list[Interval] = []
    for start, end in ordered:
        if not 1 <= start < end <= _GNO_END:
            raise ValueError(f"invalid GTID interval [{start}, {end}): need 1 <= start < end")
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return tuple(merged)


def _format_interval(interval: Interval) -> str:
    start, end = interval
    return str(start) if end == start + 1 else f"{start}-{end - 1}"


@record
class MysqlGtid:
    """One MySQL GTID: ``uuid:gno`` or ``uuid:tag:gno``. The tag is stored lowercase."""

    uuid: UUID
    gno: int
    tag: str = ""

    def __post_init__(self) -> None:
        _check_gno(self.gno)
        object.__setattr__(self, "tag", _normalize_tag(self.tag))

    @classmethod
    def parse(cls, text: str) -> MysqlGtid:
        """Parse ``uuid:N`` or ``uuid:tag:N`` (whitespace around the parts is ignored)."""
        parts = [part.strip() for part in text.split(":")]
        if (
            len(parts) not in (2, 3)
            or not parts[-1].isascii()
            or not parts[-1].isdigit()
            or not parts[1]
        ):
            raise GtidParseError(f"not a MySQL GTID (uuid[:tag]:N): {text!r}")
        try:
            return cls(_parse_uuid(parts[0]), int(parts[-1]), parts[1] if len(parts) == 3 else "")
        except ValueError as exc:
            raise GtidParseError(f"bad MySQL GTID {text.strip()!r}: {exc}") from exc

    def __str__(self) -> str:
        if self.tag:
            return f"{self.uuid}:{self.tag}:{self.gno}"
        return f"{self.uuid}:{self.gno}"


def _parse_uuid(text: str) -> UUID:
    # Only the 36-character form, as Tsid::from_cstring reads it; UUID() alone would also
    # take braces, "urn:uuid:" and missing hyphens.
    if _UUID_RE.fullmatch(text) is None:
        raise ValueError(f"expected a UUID like 3e11fa47-71ca-11e1-9e33-c80aa9429562, got {text!r}")
    return UUID(text)


@dataclass(frozen=True, slots=True)
class TsidIntervals:
    """The transactions of one (uuid, tag) in a MySQL GTID set, as sorted, merged, half-open
    intervals. Built from any intervals; they are normalized on construction."""

    uuid: UUID
    tag: str
    intervals: tuple[Interval, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "tag", _normalize_tag(self.tag))
        object.__setattr__(self, "intervals", _normalize_intervals(self.intervals))

    @property
    def sort_key(self) -> tuple[bytes, str]:
        """MySQL's order: uuid bytes (memcmp), then tag; the empty (untagged) tag first."""
        return (self.uuid.bytes, self.tag)

    def contains(self, gno: int) -> bool:
        index = bisect.bisect_right(self.intervals, (gno, _GNO_END + 1)) - 1
        return index >= 0 and gno < self.intervals[index][1]


def _trusted_entry(uid: UUID, tag: str, intervals: tuple[Interval, ...]) -> TsidIntervals:
    """Build a TsidIntervals from already normalized parts, skipping the checks."""
    entry = object.__new__(TsidIntervals)
    object.__setattr__(entry, "uuid", uid)
    object.__setattr__(entry, "tag", tag)
    object.__setattr__(entry, "intervals", intervals)
    return entry


def _trusted_set(entries: tuple[TsidIntervals, ...]) -> MysqlGtidSet:
    """Build a MysqlGtidSet from entries already sorted, merged and non-empty."""
    gtid_set = object.__new__(MysqlGtidSet)
    object.__setattr__(gtid_set, "entries", entries)
    return gtid_set


def _add_interval(intervals: tuple[Interval, ...], new: Interval) -> tuple[Interval, ...]:
    start, end = new
    if not intervals or start > intervals[-1][1]:
        return (*intervals, new)
    last_start, last_end = intervals[-1]
    if last_start <= start <= last_end:  # the common case: extends or lies in the last one
        if end <= last_end:
            return intervals
        return (*intervals[:-1], (last_start, end))
    return _normalize_intervals((*intervals, new))


def _covers(outer: tuple[Interval, ...], inner: tuple[Interval, ...]) -> bool:
    for start, end in inner:
        index = bisect.bisect_right(outer, (start, _GNO_END + 1)) - 1
        if index < 0 or end > outer[index][1]:
            return False
    return True


@dataclass(frozen=True, slots=True)
class MysqlGtidSet:
    """An immutable MySQL GTID set.

    ``entries`` may be given in any order and may repeat a (uuid, tag); it is stored in MySQL's
    order with one entry per (uuid, tag), and entries without intervals are dropped.
    """

    entries: tuple[TsidIntervals, ...] = ()

    def __post_init__(self) -> None:
        grouped: dict[tuple[bytes, str], list[TsidIntervals]] = {}
        for entry in self.entries:
            grouped.setdefault(entry.sort_key, []).append(entry)
        normalized: list[TsidIntervals] = []
        for key in sorted(grouped):
            group = grouped[key]
            intervals = (
                group[0].intervals
                if len(group) == 1
                else _normalize_intervals(iv for entry in group for iv in entry.intervals)
            )
            if intervals:
                normalized.append(_trusted_entry(group[0].uuid, group[0].tag, intervals))
        object.__setattr__(self, "entries", tuple(normalized))

    # -- text ----------------------------------------------------------------------------------

    @classmethod
    def parse(cls, text: str) -> MysqlGtidSet:
        """Parse the server's text form, e.g. ``"uuid:1-5:11-18, uuid2:1-4:aaaa:1"``.

        Whitespace and newlines between the parts are ignored, empty items between commas are
        skipped, an item may repeat a uuid, and intervals may overlap or come in any order.
        Empty or blank text is the empty set. Unlike the server, a reversed range (``5-3``) is
        an error instead of being ignored, and numbers are decimal only.
        """
        entries: list[TsidIntervals] = []
        for item in text.split(","):
            if not item.strip():
                continue
            parts = item.split(":")
            try:
                uid = _parse_uuid(parts[0].strip())
            except ValueError as exc:
                raise GtidParseError(f"bad MySQL GTID set {text.strip()!r}: {exc}") from exc
            tag = ""
            intervals: list[Interval] = []
            for raw in parts[1:]:
                part = raw.strip()
                number = _INTERVAL_RE.fullmatch(part)
                if number is not None:
                    start = int(number[1])
                    last = int(number[2]) if number[2] is not None else start
                    if not 1 <= start <= last <= GNO_MAX:
                        raise GtidParseError(
                            f"bad interval {part!r} in MySQL GTID set {text.strip()!r}: need "
                            f"1 <= start <= end <= {GNO_MAX}"
                        )
                    intervals.append((start, last + 1))
                elif _TAG_RE.fullmatch(part) is not None:
                    entries.append(_trusted_entry(uid, tag, _normalize_intervals(intervals)))
                    tag, intervals = part.lower(), []
                else:
                    raise GtidParseError(
                        f"expected a tag or an interval, got {part!r} in MySQL GTID set "
                        f"{text.strip()!r}"
                    )
            entries.append(_trusted_entry(uid, tag, _normalize_intervals(intervals)))
        return cls(tuple(entries))

    def to_string(self, separator: str = ",") -> str:
        """The canonical text. The server's ``@@gtid_executed`` uses ``separator=",\\n"``."""
        items: list[str] = []
        previous: UUID | None = None
        for entry in self.entries:
            text = "".join(":" + _format_interval(iv) for iv in entry.intervals)
            if entry.tag:
                text = f":{entry.tag}{text}"
            if entry.uuid == previous:
                items[-1] += text
            else:
                items.append(f"{entry.uuid}{text}")
                previous = entry.uuid
        return separator.join(items)

    def __str__(self) -> str:
        return self.to_string()

    # -- set operations ------------------------------------------------------------------------

    def is_empty(self) -> bool:
        return not self.entries

    def __bool__(self) -> bool:
        return bool(self.entries)

    def _find(self, key: tuple[bytes, str]) -> TsidIntervals | None:
        for entry in self.entries:
            if entry.sort_key == key:
                return entry
        return None

    def intervals(self, uid: UUID, tag: str = "") -> tuple[Interval, ...]:
        """The half-open intervals held for ``uid`` and ``tag`` (empty if none)."""
        entry = self._find((uid.bytes, _normalize_tag(tag)))
        return entry.intervals if entry is not None else ()

    def contains(self, gtid: MysqlGtid) -> bool:
        entry = self._find((gtid.uuid.bytes, gtid.tag))
        return entry is not None and entry.contains(gtid.gno)

    def __contains__(self, gtid: object) -> bool:
        return isinstance(gtid, MysqlGtid) and self.contains(gtid)

    def add(self, gtid: MysqlGtid) -> MysqlGtidSet:
        """A new set that also holds ``gtid``."""
        key = (gtid.uuid.bytes, gtid.tag)
        entries = list(self.entries)
        new = (gtid.gno, gtid.gno + 1)
        for index, entry in enumerate(entries):
            if entry.sort_key == key:
                intervals = _add_interval(entry.intervals, new)
                if intervals is entry.intervals:
                    return self
                entries[index] = _trusted_entry(entry.uuid, entry.tag, intervals)
                return _trusted_set(tuple(entries))
        keys = [entry.sort_key for entry in entries]
        entries.insert(bisect.bisect(keys, key), _trusted_entry(gtid.uuid, gtid.tag, (new,)))
        return _trusted_set(tuple(entries))

    def with_runs(self, runs: Iterable[tuple[bytes, int, int]]) -> MysqlGtidSet:
        """A new set that also holds the GTIDs ``first..last`` (inclusive) of each run's
        uuid (as 16 bytes), untagged."""
        added = tuple(
            TsidIntervals(UUID(bytes=uid), "", ((first, last + 1),)) for uid, first, last in runs
        )
        return self.union(MysqlGtidSet(added)) if added else self

    def union(self, other: MysqlGtidSet) -> MysqlGtidSet:
        """A new set holding the transactions of both."""
        if not other.entries:
            return self
        if not self.entries:
            return other
        return MysqlGtidSet(self.entries + other.entries)

    def __or__(self, other: MysqlGtidSet) -> MysqlGtidSet:
        return self.union(other)

    def issuperset(self, other: MysqlGtidSet) -> bool:
        """True if every transaction of ``other`` is in this set."""
        for entry in other.entries:
            mine = self._find(entry.sort_key)
            if mine is None or not _covers(mine.intervals, entry.intervals):
                return False
        return True

    def missing_from(self, other: MysqlGtidSet) -> int:
        """How many transactions of this set ``other`` does not hold."""
        missing = 0
        for entry in self.entries:
            theirs = other._find(entry.sort_key)
            for start, end in entry.intervals:
                missing += end - start
                for their_start, their_end in theirs.intervals if theirs is not None else ():
                    missing -= max(0, min(end, their_end) - max(start, their_start))
        return missing

    def issubset(self, other: MysqlGtidSet) -> bool:
        return other.issuperset(self)

    # -- bytes ---------------------------------------------------------------------------------

    def encode(self) -> bytes:
        """The binary form; the classic format unless some entry has a tag."""
        tagged = any(entry.tag for entry in self.entries)
        count = len(self.entries)
        # encode_nsids_format: the tagged format repeats its code in the top and low bytes.
        header = (_FORMAT_TAGGED << 56 | count << 8 | _FORMAT_TAGGED) if tagged else count
        out = [_U64.pack(header)]
        for entry in self.entries:
            out.append(entry.uuid.bytes)
            if tagged:
                tag = entry.tag.encode("ascii")
                out.append(_encode_varlen(len(tag)))
                out.append(tag)
            out.append(_U64.pack(len(entry.intervals)))
            flat = [bound for interval in entry.intervals for bound in interval]
            out.append(struct.pack(f"<{len(flat)}q", *flat))
        return b"".join(out)

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview) -> MysqlGtidSet:
        """Decode the binary form; ``data`` must hold exactly one encoded set."""
        gtid_set, end = cls.decode_from(data)
        if end != len(data):
            raise DecodeError(f"{len(data) - end} bytes left after the encoded GTID set")
        return gtid_set

    @classmethod
    def decode_from(
        cls, data: bytes | bytearray | memoryview, offset: int = 0
    ) -> tuple[MysqlGtidSet, int]:
        """Decode one encoded set starting at ``offset``; return it and the offset after it."""
        view = memoryview(data).cast("B")
        size = len(view)

        def need(pos: int, count: int, what: str) -> None:
            if size - pos < count:
                raise TruncatedError(
                    f"encoded GTID set ends in {what}: {count} bytes needed at offset {pos}, "
                    f"{max(size - pos, 0)} left"
                )

        need(offset, 8, "the sid count")
        (header,) = _U64.unpack_from(view, offset)
        pos = offset + 8
        gtid_format = header >> 56
        if gtid_format == _FORMAT_UNTAGGED:
            n_sids = header & ((1 << 56) - 1)
        elif gtid_format == _FORMAT_TAGGED:
            n_sids = (header >> 8) & ((1 << 48) - 1)
        else:
            raise DecodeError(f"unknown GTID set encoding format {gtid_format}")
        entries: list[TsidIntervals] = []
        for _ in range(n_sids):
            need(pos, 16, "a uuid")
            uid = UUID(bytes=bytes(view[pos : pos + 16]))
            pos += 16
            tag = ""
            if gtid_format == _FORMAT_TAGGED:
                tag_length, pos = _decode_varlen(view, pos)
                if tag_length > TAG_MAX_LENGTH:
                    raise DecodeError(f"GTID tag length {tag_length} over {TAG_MAX_LENGTH}")
                need(pos, tag_length, "a tag")
                raw = bytes(view[pos : pos + tag_length])
                pos += tag_length
                try:
                    tag = _normalize_tag(raw.decode("ascii"))
                except (UnicodeDecodeError, ValueError) as exc:
                    raise DecodeError(f"invalid GTID tag {raw!r} in encoded GTID set") from exc
            need(pos, 8, "an interval count")
            (n_intervals,) = _U64.unpack_from(view, pos)
            pos += 8
            need(pos, 16 * n_intervals, "the intervals")
            bounds = struct.unpack_from(f"<{2 * n_intervals}q", view, pos)
            pos += 16 * n_intervals
            intervals: list[Interval] = []
            last = 0
            for index in range(0, len(bounds), 2):
                start, end = bounds[index], bounds[index + 1]
                # Gtid_set::add_gtid_encoding: strictly increasing, non-empty, not touching.
                if start <= last or end <= start:
                    raise DecodeError(
                        f"GTID interval [{start}, {end}) for {uid} out of order or empty "
                        f"(previous end {last})"
                    )
                intervals.append((start, end))
                last = end
            entries.append(_trusted_entry(uid, tag, tuple(intervals)))
        return cls(tuple(entries)), pos


def _encode_varlen(value: int) -> bytes:
    """``mysql::serialization`` unsigned varlen: the first byte's trailing ones count the
    extra bytes, and the value follows them, least significant bits first."""
    if value < 0 or value > _U64_MAX:
        raise ValueError(f"varlen value {value} out of range")
    extra = max(value.bit_length() - 1, 0) // 7  # 7 value bits per byte
    if extra >= 8:  # nine bytes: a 0xff marker, then the whole value
        return b"\xff" + value.to_bytes(8, "little")
    word = (value << (extra + 1)) | ((1 << extra) - 1)
    return word.to_bytes(extra + 1, "little")


def _decode_varlen(view: memoryview, pos: int) -> tuple[int, int]:
    if pos >= len(view):
        raise TruncatedError(f"encoded GTID set ends in a tag length at offset {pos}")
    first = view[pos]
    extra = 0
    while extra < 8 and first & (1 << extra):
        extra += 1
    if len(view) - pos < extra + 1:
        raise TruncatedError(f"encoded GTID set ends in a tag length at offset {pos}")
    if extra == 8:
        return int.from_bytes(view[pos + 1 : pos + 9], "little"), pos + 9
    word = int.from_bytes(view[pos : pos + extra + 1], "little")
    return word >> (extra + 1), pos + extra + 1
