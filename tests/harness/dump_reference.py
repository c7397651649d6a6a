"""The JSON lines ``replicator dump`` prints, made the plain way: one Python formatter per
value, then ``json.dumps`` per line.

This is how ``replicator.dump`` formatted row changes before it wrote them with orjson and
compiled per-table encoders. Its output is the contract (docs/type-mapping.md), so the tests
hold the fast formatter to it byte for byte. Kept on its own, not importing the product's
helpers, so that a change there cannot change the reference with it.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from replicator.binlog import events as ev
from replicator.binlog.json_binary import json_to_text
from replicator.binlog.json_diff import UnappliedJsonDiffs
from replicator.binlog.values import ABSENT, Geometry, InvalidTemporal


def format_time(value: dt.timedelta) -> str:
    micros = (value.days * 86400 + value.seconds) * 1_000_000 + value.microseconds
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    seconds, frac = divmod(micros, 1_000_000)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{sign}{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{text}.{frac:06d}" if frac else text


def _datetime_text(value: dt.datetime) -> str:
    text = f"{value.year:04d}-{value.month:02d}-{value.day:02d} {value:%H:%M:%S}"
    if value.microsecond:
        text += f".{value.microsecond:06d}"
    return text


@dataclass(slots=True)
class ReferenceFormatter:
    """Row events to JSON-ready dicts; counts as ``DumpStats`` does."""

    events: int = 0
    row_changes: int = 0
    invalid_temporals: int = 0
    transactions: int = 0
    gtid: str | None = None

    def value(self, value: object) -> Any:
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, Decimal):
            return format(value, "f")
        if isinstance(value, Geometry):
            return {"base64": base64.b64encode(value).decode("ascii"), "srid": value.srid}
        if isinstance(value, (bytes, bytearray, memoryview)):
            return {"base64": base64.b64encode(bytes(value)).decode("ascii")}
        if isinstance(value, dt.datetime):
            if value.tzinfo is not None:
                return _datetime_text(value.astimezone(dt.UTC)).replace(" ", "T") + "Z"
            return _datetime_text(value)
        if isinstance(value, dt.date):
            return value.isoformat()
        if isinstance(value, dt.timedelta):
            return format_time(value)
        if isinstance(value, InvalidTemporal):
            if value.epoch is not None:
                return value.text
            self.invalid_temporals += 1
            return None
        if isinstance(value, UnappliedJsonDiffs):
            return {
                "json_diffs": [
                    {"op": d.operation.name, "path": d.path}
                    | ({} if d.value is None else {"value": json_to_text(d.value)})
                    for d in value.diffs
                ]
            }
        if isinstance(value, (list, tuple)):
            return [self.value(v) for v in value]
        raise TypeError(f"no JSON form for {type(value).__name__}")

    def image(self, table: ev.TableMapEvent, row: tuple[object, ...]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for column, value in zip(table.columns, row, strict=True):
            if value is ABSENT:
                continue
            key = column.name if column.name is not None else f"@{column.index + 1}"
            out[key] = self.value(value)
        return out

    def changes(self, event: ev.Event) -> Iterator[dict[str, Any]]:
        self.events += 1
        if isinstance(event, ev.MysqlGtidEvent):
            self.gtid = event.gtid
            self.transactions += 1
        elif isinstance(event, ev.MariadbGtidEvent):
            self.gtid = str(event.gtid)
            self.transactions += 1
        elif isinstance(event, ev.TransactionPayloadEvent):
            for inner in event.events:
                yield from self.changes(inner)
        elif isinstance(event, ev.RowsEvent):
            yield from self._rows(event)

    def _rows(self, event: ev.RowsEvent) -> Iterator[dict[str, Any]]:
        table = event.table
        common = {
            "database": table.schema,
            "table": table.table,
            "op": event.kind.value,
            "gtid": self.gtid,
            "file": event.file,
            "position": event.position,
            "timestamp": dt.datetime.fromtimestamp(event.header.timestamp, dt.UTC)
            .isoformat()
            .replace("+00:00", "Z"),
            "server_id": event.header.server_id,
        }
        if event.kind is ev.RowsKind.UPDATE:
            for before, after in zip(event.rows, event.after, strict=True):
                self.row_changes += 1
                yield {
                    **common,
                    "before": self.image(table, before),
                    "after": self.image(table, after),
                }
        elif event.kind is ev.RowsKind.INSERT:
            for row in event.rows:
                self.row_changes += 1
                yield {**common, "before": None, "after": self.image(table, row)}
        else:
            for row in event.rows:
                self.row_changes += 1
                yield {**common, "before": self.image(table, row), "after": None}


def reference_output(events: Iterable[ev.Event]) -> tuple[bytes, ReferenceFormatter]:
    """What ``dump`` prints for ``events`` (UTF-8, a newline after each line), and the
    counts it reports."""
    formatter = ReferenceFormatter()
    lines = [
        json.dumps(change, ensure_ascii=False, separators=(",", ":")) + "\n"
        for event in events
        for change in formatter.changes(event)
    ]
    return "".join(lines).encode("utf-8"), formatter
