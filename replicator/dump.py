"""``replicator dump``: row changes as JSON lines, one change per line.

Values are written losslessly, each JSON type chosen so a consumer cannot silently lose
precision (README "dump output"):

* integers as JSON numbers (exact at any width, BIGINT UNSIGNED included);
* FLOAT/DOUBLE as JSON numbers (shortest repr that round-trips);
* DECIMAL as a string of its digits ("-12.3400"), since most JSON readers parse numbers as
  doubles;
* DATE "YYYY-MM-DD", DATETIME "YYYY-MM-DD HH:MM:SS[.ffffff]", TIMESTAMP
  "YYYY-MM-DDTHH:MM:SS[.ffffff]Z" (UTC), TIME "[-]HHH:MM:SS[.ffffff]" as MySQL prints it;
* zero/invalid dates as null (and counted in the summary), never as a made-up date;
* text as strings; binary values (BINARY, VARBINARY, BLOB, GEOMETRY WKB, text of unknown
  charset) as ``{"base64": "..."}``;
* JSON columns as their canonical JSON text (a string); a JSON column logged only as diffs
  without its before image (PARTIAL_JSON with MINIMAL row images) as
  ``{"json_diffs": [{"op": "REPLACE", "path": "$.a", "value": "<json>"}]}``;
* VECTOR as a list of floats;
* SQL NULL as null; columns absent from a partial row image are left out.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, TextIO

from .binlog import events as ev
from .binlog.json_binary import json_to_text
from .binlog.json_diff import UnappliedJsonDiffs
from .binlog.position import StreamPosition
from .binlog.transaction import Transaction
from .binlog.values import ABSENT, Geometry, InvalidTemporal
from .config import SourceConfig
from .source.schema import InformationSchemaLookup
from .source.stream import ReplicaStream


def format_time(value: dt.timedelta) -> str:
    """A TIME value as MySQL prints it: sign, hours past 24 kept, microseconds when set."""
    micros = (value.days * 86400 + value.seconds) * 1_000_000 + value.microseconds
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    seconds, frac = divmod(micros, 1_000_000)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{sign}{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{text}.{frac:06d}" if frac else text


@dataclass(slots=True)
class DumpStats:
    events: int = 0
    row_changes: int = 0
    invalid_temporals: int = 0
    transactions: int = 0


def _datetime_text(value: dt.datetime) -> str:
    # not strftime: its %Y does not pad years below 1000 on Linux ('18-04-01')
    text = f"{value.year:04d}-{value.month:02d}-{value.day:02d} {value:%H:%M:%S}"
    if value.microsecond:
        text += f".{value.microsecond:06d}"
    return text


@dataclass(slots=True)
class RowChangeFormatter:
    """Turns row events into JSON-ready dicts, tracking the current GTID."""

    stats: DumpStats = field(default_factory=DumpStats)
    gtid: str | None = None

    def value(self, value: object) -> Any:
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, Decimal):
            return format(value, "f")
        if isinstance(value, Geometry):  # WKB with the SRID the server stored
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
            if value.epoch is not None:  # a real date of year 0: as SELECT shows it
                return value.text
            self.stats.invalid_temporals += 1
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

    def transaction(self, transaction: Transaction) -> Iterator[dict[str, Any]]:
        """Row changes of one whole transaction from the live stream."""
        self.gtid = transaction.gtid
        self.stats.transactions += 1
        self.stats.events += len(transaction.events)
        for event in transaction.events:
            if isinstance(event, ev.RowsEvent):
                yield from self._rows(event)

    def changes(self, event: ev.Event) -> Iterator[dict[str, Any]]:
        self.stats.events += 1
        if isinstance(event, ev.MysqlGtidEvent):
            self.gtid = event.gtid
            self.stats.transactions += 1
        elif isinstance(event, ev.MariadbGtidEvent):
            self.gtid = str(event.gtid)
            self.stats.transactions += 1
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
                self.stats.row_changes += 1
                yield {
                    **common,
                    "before": self.image(table, before),
                    "after": self.image(table, after),
                }
        elif event.kind is ev.RowsKind.INSERT:
            for row in event.rows:
                self.stats.row_changes += 1
                yield {**common, "before": None, "after": self.image(table, row)}
        else:
            for row in event.rows:
                self.stats.row_changes += 1
                yield {**common, "before": self.image(table, row), "after": None}


def json_lines(events: Iterable[ev.Event], formatter: RowChangeFormatter) -> Iterator[str]:
    """One compact JSON document per row change."""
    for event in events:
        for change in formatter.changes(event):
            yield _dumps(change)


def _dumps(change: dict[str, Any]) -> str:
    return json.dumps(change, ensure_ascii=False, separators=(",", ":"))


async def dump_live(
    cfg: SourceConfig,
    start: StreamPosition | None,
    *,
    stop_at_end: bool,
    formatter: RowChangeFormatter,
    out: TextIO,
) -> None:
    """Stream row changes of a live server as JSON lines until the end (or forever)."""
    lookup = InformationSchemaLookup(cfg)
    try:
        async with ReplicaStream(
            cfg, start, stop_at_end=stop_at_end, schema_lookup=lookup, objects=True
        ) as stream:
            async for item in stream:
                if isinstance(item, Transaction):
                    for change in formatter.transaction(item):
                        out.write(_dumps(change))
                        out.write("\n")
                    out.flush()
    finally:
        lookup.close()
