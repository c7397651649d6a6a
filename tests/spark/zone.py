"""Landing zones for the Spark tests, written by the real commit protocol (LandingZone), and a
plain-Python reference of what a table holds after its changes.

``Zone.commit`` lands one batch: a list of changes ``(version, op, values[, before])`` gets
consecutive ``_seq`` numbers and goes through ``Batch.add``/``Batch.commit`` as the pipeline
hands them over, with the before image of every update (the writer keeps its key columns as
``_before_key``; ``None`` as the fourth item leaves it out, as older pipelines did).

A ``Ddl`` among the changes is a lifecycle record (``schema_changes`` of the manifest) at its
place in the ``_seq`` order, as the pipeline numbers them (with ``version``, a create or alter
record carries that version's file schema, as the pipeline's do). Consecutive changes are one
transaction (one GTID, ``0-1-<n>``; with ``gtids=False`` none, and the binlog position is the
identity), each ``Ddl`` its own. ``Zone.replay`` lands earlier batches again, with their
identities and new ``_seq`` numbers, as the daemon does after ``checkpoint set`` moved it
back (the manifests say ``replay``); the reference ignores the copies. ``expected_tables``
replays everything, lifecycle records included, table by table.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from replicator.binlog.constants import ColumnType as T
from replicator.binlog.position import StreamPosition
from replicator.binlog.schema import ColumnDef
from replicator.binlog.values import ABSENT
from replicator.config import SinkConfig
from replicator.pipeline.lifecycle import SCHEMA_KEY, schema_text
from replicator.sink.changes import Run, TableVersion
from replicator.sink.landing import LandingZone
from tests.blocks import row_change

TS = dt.datetime(2026, 11, 22, 10, 0, 0, tzinfo=dt.UTC)

# Database and table names that need escaping in directory names (``safe_part``), each with
# the directory it must land in: hidden names, the landing zone's own ``_`` names, path
# separators, ``%`` (which URL readers decode) and the escape mark itself.
AWKWARD_NAMES = {
    "shop.orders": "shop/orders",
    "shop._audit": "shop/~5Faudit",
    "shop..hidden": "shop/~2Ehidden",
    "shop.a/b": "shop/a~2Fb",
    "shop.a~2Fb": "shop/a~7E2Fb",
    "shop.a\\b": "shop/a~5Cb",
    "shop.a%2Fb": "shop/a~252Fb",
    "shop.a%b": "shop/a~25b",
    "shop.a:b": "shop/a~3Ab",
    "shop.a b#c?d": "shop/a b#c?d",
    "shop.x.y": "shop/x.y",
    "_state.lock": "~5Fstate/lock",
    "_manifests.t": "~5Fmanifests/t",
}

Change = tuple[Any, ...]  # (version, op, values) or (version, op, values, before)


def col(index: int, type_: int, name: str, meta: int = 0, **kw: Any) -> ColumnDef:
    return ColumnDef(index=index, type=type_, meta=meta, name=name, **kw)


def int_col(index: int, name: str, **kw: Any) -> ColumnDef:
    return col(index, T.LONG, name, **kw)


def text_col(index: int, name: str, **kw: Any) -> ColumnDef:
    return col(index, T.VARCHAR, name, 400, charset="utf-8", **kw)


def table(name: str, *columns: ColumnDef, key: Sequence[int] = ()) -> TableVersion:
    schema, _, tbl = name.partition(".")
    return TableVersion(schema, tbl, tuple(columns), tuple(key))


@dataclass(frozen=True, slots=True)
class Ddl:
    """A lifecycle record to land at its place among the changes (``Zone.commit``)."""

    op: str  # create, alter, truncate, drop, rename
    table: str
    to: str | None = None
    statement: str = ""
    joined: bool = False  # another effect of the previous Ddl's statement (same identity)
    # a create's or alter's columns from then on: the record's ``schema``, as the pipeline
    # writes it (``pipeline.lifecycle``); None leaves it out, as older pipelines did
    version: TableVersion | None = None


Item = Change | Ddl
# an item as landed: the item, its GTID, binlog position
Landed = tuple[Item, str | None, int]
REPLAY_UNTIL = StreamPosition("mysql-bin.000001", 10**12)


class ModelChange(NamedTuple):
    """One row change as the model of ``expected_*`` applies it."""

    op: str
    seq: int
    values: tuple[object, ...]
    before: tuple[object, ...] | None


class Zone:
    """A landing zone under ``root`` and the batches committed to it."""

    def __init__(self, root: Path, *, keep_before_image: bool = False, gtids: bool = True) -> None:
        self.root = root
        self.zone = LandingZone(SinkConfig(root=str(root), keep_before_image=keep_before_image))
        self.checkpoint = self.zone.recover()
        self.gtids = gtids
        self.history: list[tuple[TableVersion, ModelChange]] = []
        self.records: list[tuple[int, Ddl]] = []  # (_seq, record), replays left out
        self.batches: dict[int, list[Landed]] = {}  # batch -> items with their identities
        self._transactions = 0

    def _gtid(self) -> str | None:
        self._transactions += 1
        return f"0-1-{self._transactions}" if self.gtids else None

    def commit(self, items: Iterable[Item]) -> dict[str, Any]:
        """Land ``items`` as one batch; returns its manifest."""
        landed: list[Landed] = []
        gtid: str | None = None
        fresh = True
        for item in items:
            joined = isinstance(item, Ddl) and item.joined
            if (isinstance(item, Ddl) or fresh) and not joined:
                gtid = self._gtid()
            fresh = isinstance(item, Ddl)
            landed.append((item, gtid, 0))
        return self._land(landed, replay=False)

    def replay(self, batches: Iterable[int]) -> list[dict[str, Any]]:
        """Land the items of ``batches`` again, one batch each, marked ``replay``."""
        return [self._land(self.batches[number], replay=True) for number in batches]

    def snapshot(
        self,
        version: TableVersion,
        rows: Iterable[tuple[object, ...]],
        *,
        at: int,
        replay: bool = False,
    ) -> dict[str, Any]:
        """Land a snapshot chunk: ``rows`` of ``version`` as reads (``r``), without GTID, at
        the read point's binlog position ``at``, as one batch (``replay``: one that re-reads;
        its rows are no copies all the same, the reference keeps them)."""
        return self._land([((version, "r", values), None, at) for values in rows], replay=replay)

    def _land(self, items: Sequence[Landed], *, replay: bool) -> dict[str, Any]:
        batch = self.zone.begin(self.checkpoint)
        seq = self.checkpoint.next_seq
        groups: list[tuple[TableVersion, list[Run]]] = []
        records: list[dict[str, Any]] = []
        landed: list[Landed] = []
        position = 0
        for item, gtid, original in items:
            joined = isinstance(item, Ddl) and item.joined
            position = original or (position if joined else 1000 + seq)
            landed.append((item, gtid, position))
            if isinstance(item, Ddl):
                record: dict[str, Any] = {
                    "seq": seq,
                    "op": item.op,
                    "table": item.table,
                    "gtid": gtid,
                    "file": "mysql-bin.000001",
                    "position": position,
                    "ts": TS.isoformat().replace("+00:00", "Z"),
                    "statement": item.statement or f"{item.op.upper()} {item.table}",
                }
                if item.to is not None:
                    record["to"] = item.to
                if item.version is not None:
                    record[SCHEMA_KEY] = schema_text(self.zone.file_schema(item.version))
                records.append(record)
                if not replay:
                    self.records.append((seq, item))
                seq += 1
                continue
            version, op, values = item[0], item[1], tuple(item[2])
            before = tuple(item[3]) if len(item) > 3 and item[3] is not None else None
            run = row_change(op, seq, gtid, TS, 1, "mysql-bin.000001", position, values, before)
            seq += 1
            if not replay or op == "r":  # (a replay re-reads the binlog, never a snapshot)
                self.history.append((version, ModelChange(op, seq - 1, values, before)))
            if groups and groups[-1][0] == version:
                groups[-1][1].append(run)
            else:
                groups.append((version, [run]))
        for version, rows in groups:
            batch.add(version, rows)
        batch.transactions += max(1, len({g for _, g, _ in landed}))
        end = StreamPosition("mysql-bin.000001", 1000 + seq)
        self.checkpoint = batch.commit(
            end, seq, records=records, replay_until=REPLAY_UNTIL if replay else None
        )
        self.batches[batch.number] = landed
        assert self.zone.last_manifest is not None
        return self.zone.last_manifest


def _merge_partial(
    old: dict[str, object] | None, names: Sequence[str], values: Sequence[object]
) -> dict[str, object]:
    row = dict(old or {})
    for name, value in zip(names, values, strict=True):
        if value is not ABSENT:
            row[name] = value
    return row


def _gone(change: ModelChange) -> tuple[object, ...]:
    """The row image an update ("u") or delete ("d") takes away: an update's before image."""
    gone = change.before if change.op == "u" else change.values
    if gone is None:
        raise ValueError(f"an update without its before image: {change}")
    return gone


def expected_keyed(
    history: Iterable[tuple[TableVersion, ModelChange]], name: str
) -> dict[tuple[object, ...], dict[str, object]]:
    """Key -> row (column name -> value) after applying ``history`` of table ``name``, one
    change at a time, as the server did; absent columns keep their value."""
    rows: dict[tuple[object, ...], dict[str, object]] = {}
    for version, change in history:
        if version.name != name:
            continue
        names = [c.name or "" for c in version.columns]
        key_names = [version.columns[i].name or "" for i in version.primary_key]
        if change.op == "u":
            old = rows.pop(tuple(_gone(change)[i] for i in version.primary_key), None)
            row = _merge_partial(old, names, change.values)
        elif change.op == "d":
            rows.pop(tuple(change.values[i] for i in version.primary_key), None)
            continue
        else:
            row = _merge_partial(None, names, change.values)
        rows[tuple(row[k] for k in key_names)] = row
    return rows


def expected_multiset(
    history: Iterable[tuple[TableVersion, ModelChange]], name: str
) -> Counter[tuple[object, ...]]:
    """Whole rows (tuples) and their copies after ``history`` of a keyless table."""
    rows: Counter[tuple[object, ...]] = Counter()
    for version, change in history:
        if version.name != name:
            continue
        if change.op in ("u", "d"):
            gone = _gone(change)
            if rows[tuple(gone)] > 0:
                rows[tuple(gone)] -= 1
        if change.op != "d":
            rows[tuple(change.values)] += 1
    return +rows


Rows = list[dict[str, object]]


def _apply(state: Any, version: TableVersion, change: ModelChange) -> Any:
    """One change on a table's state: key -> row (with a key) or Counter of rows."""
    names = [c.name or "" for c in version.columns]
    if version.primary_key:
        rows: dict[tuple[object, ...], dict[str, object]] = {} if state is None else state
        key_names = [version.columns[i].name or "" for i in version.primary_key]
        if change.op == "u":
            old = rows.pop(tuple(_gone(change)[i] for i in version.primary_key), None)
            row = _merge_partial(old, names, change.values)
        elif change.op == "d":
            rows.pop(tuple(change.values[i] for i in version.primary_key), None)
            return rows
        else:
            row = _merge_partial(None, names, change.values)
        rows[tuple(row[k] for k in key_names)] = row
        return rows
    copies: Counter[tuple[tuple[str, object], ...]] = Counter() if state is None else state
    if change.op in ("u", "d"):
        image = tuple(zip(names, _gone(change), strict=True))
        if copies[image] > 0:
            copies[image] -= 1
    if change.op != "d":
        copies[tuple(zip(names, change.values, strict=True))] += 1
    return copies


def expected_tables(zone: Zone) -> dict[str, Rows]:
    """Every table that exists after the zone's changes and lifecycle records (replays left
    out), as its rows (column name -> value), sorted; an existing empty table is []."""
    events: list[tuple[int, Any, Any]] = [(c.seq, v, c) for v, c in zone.history]
    events.extend((seq, None, record) for seq, record in zone.records)
    tables: dict[str, Any] = {}
    for _, version, item in sorted(events, key=lambda e: e[0]):
        if version is not None:
            tables[version.name] = _apply(tables.get(version.name), version, item)
        elif item.op in ("create", "truncate"):
            tables[item.table] = None
        elif item.op == "drop":
            tables.pop(item.table, None)
        elif item.op == "rename":
            tables[item.to] = tables.pop(item.table, None)
    out: dict[str, Rows] = {}
    for name, state in tables.items():
        if state is None:
            rows: Rows = []
        elif isinstance(state, Counter):
            rows = [dict(image) for image in state.elements()]
        else:
            rows = list(state.values())
        out[name] = sorted(rows, key=repr)
    return out


def awkward_zone(root: Path) -> Zone:
    """A zone with a keyed table for each of ``AWKWARD_NAMES``: three rows, one updated."""
    versions = [table(n, int_col(0, "id"), text_col(1, "name"), key=[0]) for n in AWKWARD_NAMES]
    zone = Zone(root)
    zone.commit([(v, "c", (k, f"{v.name}-{k}")) for v in versions for k in range(3)])
    zone.commit([(v, "u", (1, "changed"), (1, f"{v.name}-1")) for v in versions])
    return zone
