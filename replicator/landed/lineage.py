"""Which landed rows make up each table: the lifecycle records applied in ``_seq`` order.

Row changes land under the name their table had when they happened (``<root>/<db>/<t>/``);
the manifests' lifecycle records (``committed.Record``) say what DDL did to the tables, at a
``_seq`` between the row changes around the statement. A table is therefore followed by its
*lineage*: the segments of landed names it was, e.g. ``db.c`` = the rows of ``db.a`` up to the
rename ``a -> c``, then those of ``db.c``. Applied exactly:

* ``create``: the name starts a new, empty table (what held the name before is gone);
* ``truncate``: the table is empty at this ``_seq`` (``Lineage.start``); its schema goes on;
* ``drop``: the table is gone (``Ended``) unless a later ``create`` (or a rename into its
  name) brings the name back;
* ``rename``: the table moves to the new name; renames chain and swap (``a -> tmp, b -> a,
  tmp -> b`` is three records in order), and a table renamed away and back keeps its state;
* ``alter``: columns changed; nothing to do here (``columns`` matches them by id).

Replays (``checkpoint set`` moved the stream back, and later batches say ``replay``) land
records a second time: a record of a batch that re-reads is left out when a lower batch holds
its source identity (GTID, else binlog file and position with the table and op:
``Record.identity``). A batch that does not re-read lands no copies: its records all count.
A name no record mentions before its rows is a table from the start. Rows under a name after
it ended (dropped or renamed away, and no ``create`` since) fit no table: ``orphans`` finds
them (a landing zone the daemon cannot write), and the caller stops rather than leave them
out. Plain Python and pyarrow; no Spark.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import pyarrow.compute as pc

from ..errors import IntegrityError
from .committed import CommittedFile, Manifest, Record, read_file

__all__ = [
    "Ended",
    "Lineage",
    "Plan",
    "Segment",
    "dedup_records",
    "orphans",
    "plan",
]


@dataclass(frozen=True, slots=True)
class Segment:
    """Rows landed under ``table`` with ``after < _seq < before`` (``before`` None: no end)."""

    table: str
    after: int
    before: int | None

    def overlaps(self, item: CommittedFile) -> bool:
        """``item`` (a file of ``table``) may hold rows of this segment."""
        if item.table != self.table:
            return False
        if item.first_seq is None or item.last_seq is None:
            return True
        return item.last_seq > self.after and (self.before is None or item.first_seq < self.before)


@dataclass(frozen=True, slots=True)
class Lineage:
    """A table that exists at the end: the landed segments it was made of, oldest first
    (since it was last created, or from the start), and the ``_seq`` its state starts empty
    at (``start``: its last create or truncate; 0 for none)."""

    name: str
    segments: tuple[Segment, ...]
    start: int
    cut: Record | None  # the create or truncate at ``start``
    records: tuple[Record, ...]  # the records that shaped it (since its last create)

    def data(self) -> tuple[Segment, ...]:
        """The segments clipped to rows after ``start``: the rows of the current state."""
        out: list[Segment] = []
        for segment in self.segments:
            after = max(segment.after, self.start)
            if segment.before is None or segment.before > after + 1:
                out.append(Segment(segment.table, after, segment.before))
        return tuple(out)

    @property
    def tables(self) -> tuple[str, ...]:
        """The landed names of the segments, in order of first use."""
        return tuple(dict.fromkeys(s.table for s in self.segments))

    def files(self, files: Iterable[CommittedFile], *, data: bool = False) -> list[CommittedFile]:
        """The files that may hold rows of the segments (of ``data()`` with ``data``)."""
        segments = self.data() if data else self.segments
        return [f for f in files if any(s.overlaps(f) for s in segments)]


@dataclass(frozen=True, slots=True)
class Ended:
    """A name that holds no table at the end: ``record`` dropped it or renamed it away."""

    name: str
    record: Record

    def describe(self) -> str:
        """``renamed to db.b at _seq 12 (batch 3, mysql-bin.000001:345: RENAME ...)``."""
        what = f"renamed to {self.record.to}" if self.record.op == "rename" else "dropped"
        return f"{what} at _seq {self.record.seq} ({self.record.origin()})"


@dataclass(slots=True)
class _Owned:
    """A segment as it is built; ``closed_by`` ended it."""

    table: str
    after: int
    before: int | None = None
    closed_by: Record | None = None


@dataclass(slots=True)
class _Open:
    start: int
    cut: Record | None
    segments: list[_Owned] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)

    def close(self, record: Record) -> None:
        self.segments[-1].before = record.seq
        self.segments[-1].closed_by = record


@dataclass(frozen=True, slots=True)
class Plan:
    """Every table at the end of the landing zone, and where each landed name was held."""

    lineages: dict[str, Lineage]
    ended: dict[str, Ended]
    owned: dict[str, tuple[_Owned, ...]]  # landed name -> every segment any table had there
    records: tuple[Record, ...]  # the records applied (replayed copies left out)

    @property
    def names(self) -> frozenset[str]:
        """Every name the records mention."""
        found = {r.table for r in self.records} | {r.to for r in self.records if r.to}
        return frozenset(found)

    def table(self, name: str) -> Lineage | Ended:
        """What ``name`` is at the end (a name no record mentions: all its rows)."""
        found = self.lineages.get(name) or self.ended.get(name)
        if found is not None:
            return found
        return Lineage(name, (Segment(name, 0, None),), 0, None, ())


def dedup_records(manifests: Sequence[Manifest]) -> list[Record]:
    """The records in ``_seq`` order, replayed copies left out: a record of a batch that
    re-reads (``Manifest.rereads``) whose source identity a lower batch holds. A batch that
    does not re-read lands each record once, even at a point an earlier record came from (a
    second snapshot of a table at the same read point: a ``truncate`` again)."""
    first: dict[tuple[object, ...], int] = {}
    kept: list[Record] = []
    for manifest in sorted(manifests, key=lambda m: m.batch):
        for record in manifest.records:
            identity = record.identity
            if identity is not None:
                held = first.setdefault(identity, record.batch)
                if manifest.rereads and held != record.batch:
                    continue  # a replayed copy
            kept.append(record)
    return sorted(kept, key=lambda r: r.seq)


def plan(manifests: Sequence[Manifest]) -> Plan:
    """Apply the (deduplicated) lifecycle records of ``manifests`` (see the module doc)."""
    records = dedup_records(manifests)
    live: dict[str, _Open] = {}
    ended: dict[str, Record] = {}
    owned: dict[str, list[_Owned]] = {}

    def open_segment(table: _Open, name: str, at: int) -> None:
        segment = _Owned(name, at)
        table.segments.append(segment)
        owned.setdefault(name, []).append(segment)

    def new(name: str, at: int, cut: Record | None) -> _Open:
        table = _Open(at, cut)
        open_segment(table, name, at)
        live[name] = table
        return table

    def get(name: str) -> _Open:
        """The table under ``name``; one the records never created is taken to exist from
        the start (or, after it ended, from that point: its CREATE was not seen)."""
        found = live.get(name)
        if found is not None:
            return found
        gone = ended.pop(name, None)
        return new(name, 0 if gone is None else gone.seq, None)

    for name in dict.fromkeys(f.table for m in manifests for f in m.files):
        new(name, 0, None)  # rows before the first record that names them
    for record in records:
        if record.op == "create":
            replaced = live.pop(record.table, None)
            if replaced is not None:
                replaced.close(record)
            ended.pop(record.table, None)
            new(record.table, record.seq, record).records.append(record)
        elif record.op == "truncate":
            table = get(record.table)
            table.start, table.cut = record.seq, record
            table.records.append(record)
        elif record.op == "alter":
            get(record.table).records.append(record)
        elif record.op == "drop":
            if record.table in ended:
                continue
            get(record.table).close(record)
            del live[record.table]
            ended[record.table] = record
        else:  # rename
            assert record.to is not None
            table = get(record.table)
            table.close(record)
            del live[record.table]
            ended[record.table] = record
            replaced = live.pop(record.to, None)
            if replaced is not None:  # the server refuses this; the name's old table goes
                replaced.close(record)
            ended.pop(record.to, None)
            open_segment(table, record.to, record.seq)
            table.records.append(record)
            live[record.to] = table
    return Plan(
        lineages={name: _lineage(name, table) for name, table in live.items()},
        ended={name: Ended(name, record) for name, record in ended.items()},
        owned={name: tuple(segments) for name, segments in owned.items()},
        records=tuple(records),
    )


def _lineage(name: str, table: _Open) -> Lineage:
    return Lineage(
        name=name,
        segments=tuple(Segment(s.table, s.after, s.before) for s in table.segments),
        start=table.start,
        cut=table.cut,
        records=tuple(table.records),
    )


def _gaps(segments: Sequence[_Owned], first: int, last: int) -> list[tuple[int, int, Record]]:
    """The ``_seq`` ranges ``[lo, hi]`` within ``[first, last]`` that no segment holds, each
    with the record that ended the segment before it."""
    gaps: list[tuple[int, int, Record]] = []
    ordered = sorted(segments, key=lambda s: s.after)
    for segment, following in zip(ordered, [*ordered[1:], None], strict=True):
        if segment.before is None or segment.closed_by is None:
            continue
        lo = segment.before + 1
        hi = last if following is None else following.after - 1
        lo, hi = max(lo, first), min(hi, last)
        if lo <= hi:
            gaps.append((lo, hi, segment.closed_by))
    return gaps


def orphans(found: Plan, name: str, files: Sequence[CommittedFile]) -> None:
    """IntegrityError when a file of ``name`` holds rows after the table under that name
    ended (dropped or renamed away, and not created again). Files of replay batches are
    skipped: their repeated rows are left out anyway (``changes.replayed``)."""
    segments = found.owned.get(name, ())
    for item in files:
        if item.table != name or item.first_seq is None or item.last_seq is None:
            continue
        gaps = _gaps(segments, item.first_seq, item.last_seq)
        if not gaps:
            continue
        seqs = read_file(item, ["_seq"]).column("_seq")
        for lo, hi, record in gaps:
            inside = pc.and_(pc.greater_equal(seqs, lo), pc.less_equal(seqs, hi))
            if pc.any(inside).as_py():
                at = pc.min(pc.filter(seqs, inside)).as_py()
                raise IntegrityError(
                    f"table {name}: {item.path} holds a row change at _seq {at}, after the "
                    f"{record.describe()}, and no CREATE brought {name} back",
                    hint="the landing zone misses the statement that created the table again: "
                    "re-land it from before that position (`replicator checkpoint set`)",
                )
