"""Helpers shared by the corpus tests: decode a whole file, flatten payloads, list rows."""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path

from replicator.binlog import events as ev
from replicator.binlog.framing import _NeedData
from replicator.binlog.stream import BinlogFileDecoder


def file_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if path.suffix == ".gz" else data


def decode_all(path: Path, *, chunk: int | None = None) -> list[ev.Event]:
    """Every event of a file, fed whole (or in ``chunk``-byte pieces); raises on a bad one."""
    name = path.name[:-3] if path.suffix == ".gz" else path.name
    decoder = BinlogFileDecoder(name)
    data = file_bytes(path)
    pieces = [data] if chunk is None else [data[i : i + chunk] for i in range(0, len(data), chunk)]
    out: list[ev.Event] = []
    for piece in pieces:
        decoder.feed(piece)
        while not isinstance(item := decoder.next_event(), _NeedData):
            out.append(item)
    decoder.finish()
    return out


def flatten(events: list[ev.Event]) -> list[ev.Event]:
    out: list[ev.Event] = []
    for event in events:
        if isinstance(event, ev.TransactionPayloadEvent):
            out.extend(event.events)
        else:
            out.append(event)
    return out


@dataclass(frozen=True)
class Change:
    table: str
    op: str
    before: tuple[object, ...] | None
    after: tuple[object, ...] | None


def changes(events: list[ev.Event]) -> list[Change]:
    out: list[Change] = []
    for event in flatten(events):
        if not isinstance(event, ev.RowsEvent):
            continue
        name = f"{event.table.schema}.{event.table.table}"
        if event.kind is ev.RowsKind.INSERT:
            out.extend(Change(name, "c", None, row) for row in event.rows)
        elif event.kind is ev.RowsKind.DELETE:
            out.extend(Change(name, "d", row, None) for row in event.rows)
        else:
            out.extend(
                Change(name, "u", b, a) for b, a in zip(event.rows, event.after, strict=True)
            )
    return out
