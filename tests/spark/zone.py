"""Landing zones for the Spark tests, written by the real commit protocol (LandingZone), and a
plain-Python reference of what a table holds after its changes.

``Zone.commit`` lands one batch: a list of changes ``(version, op, values[, before])`` gets
consecutive ``_seq`` numbers and goes through ``Batch.add``/``Batch.commit`` as the pipeline
hands them over, with the before image of every update (the writer keeps its key columns as
``_before_key``; ``None`` as the fourth item leaves it out, as older pipelines did).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from replicator.binlog.constants import ColumnType as T
from replicator.binlog.schema import ColumnDef
from replicator.binlog.values import ABSENT
from replicator.config import SinkConfig
from replicator.pipeline.changes import RowChange, TableVersion
from replicator.sink.landing import LandingZone
from replicator.source.protocol import StreamPosition

TS = dt.datetime(2026, 11, 22, 10, 0, 0, tzinfo=dt.UTC)

Change = tuple[Any, ...]  # (version, op, values) or (version, op, values, before)


def col(index: int, type_: int, name: str, meta: int = 0, **kw: Any) -> ColumnDef:
    return ColumnDef(index=index, type=type_, meta=meta, name=name, **kw)


def int_col(index: int, name: str, **kw: Any) -> ColumnDef:
    return col(index, T.LONG, name, **kw)


def text_col(index: int, name: str) -> ColumnDef:
    return col(index, T.VARCHAR, name, 400, charset="utf-8")


def table(name: str, *columns: ColumnDef, key: Sequence[int] = ()) -> TableVersion:
    schema, _, tbl = name.partition(".")
    return TableVersion(schema, tbl, tuple(columns), tuple(key))


class Zone:
    """A landing zone under ``root`` and the batches committed to it."""

    def __init__(self, root: Path, *, keep_before_image: bool = False) -> None:
        self.root = root
        self.zone = LandingZone(SinkConfig(root=str(root), keep_before_image=keep_before_image))
        self.checkpoint = self.zone.recover()
        self.history: list[tuple[TableVersion, RowChange]] = []

    def commit(self, changes: Iterable[Change]) -> dict[str, Any]:
        """Land ``changes`` as one batch (one transaction); returns its manifest."""
        batch = self.zone.begin(self.checkpoint)
        seq = self.checkpoint.next_seq
        groups: list[tuple[TableVersion, list[RowChange]]] = []
        for item in changes:
            version, op, values = item[0], item[1], tuple(item[2])
            before = tuple(item[3]) if len(item) > 3 and item[3] is not None else None
            change = RowChange(
                op, seq, f"0-1-{seq}", TS, 1, "mysql-bin.000001", 1000 + seq, values, before
            )
            seq += 1
            self.history.append((version, change))
            if groups and groups[-1][0] == version:
                groups[-1][1].append(change)
            else:
                groups.append((version, [change]))
        for version, rows in groups:
            batch.add(version, rows)
        batch.transactions += 1
        end = StreamPosition("mysql-bin.000001", 1000 + seq)
        self.checkpoint = batch.commit(end, seq)
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


def expected_keyed(
    history: Iterable[tuple[TableVersion, RowChange]], name: str
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
            assert change.before is not None
            old_key = tuple(change.before[i] for i in version.primary_key)
            old = rows.pop(old_key, None)
            row = _merge_partial(old, names, change.values)
        elif change.op == "d":
            rows.pop(tuple(change.values[i] for i in version.primary_key), None)
            continue
        else:
            row = _merge_partial(None, names, change.values)
        rows[tuple(row[k] for k in key_names)] = row
    return rows


def expected_multiset(
    history: Iterable[tuple[TableVersion, RowChange]], name: str
) -> Counter[tuple[object, ...]]:
    """Whole rows (tuples) and their copies after ``history`` of a keyless table."""
    rows: Counter[tuple[object, ...]] = Counter()
    for version, change in history:
        if version.name != name:
            continue
        if change.op in ("u", "d"):
            gone = change.before if change.op == "u" else change.values
            assert gone is not None
            if rows[tuple(gone)] > 0:
                rows[tuple(gone)] -= 1
        if change.op != "d":
            rows[tuple(change.values)] += 1
    return +rows
