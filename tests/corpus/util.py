"""Helpers shared by the corpus tests: where the corpus is, decode a whole file, flatten
payloads, list rows.

The corpus of real server-written binlog files lives outside the repository: by default in
``../shared/binlog-corpus`` beside it, or wherever ``REPLICATOR_CORPUS_DIR`` points (a
directory ``scripts/fetch-corpus`` filled). A copy fetched from the upstream repositories lacks
the files made for the corpus itself; tests that need one skip (``corpus_file``).
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from replicator.binlog import events as ev
from replicator.binlog.framing import _NeedData
from replicator.binlog.stream import BinlogFileDecoder

CORPUS_ENV = "REPLICATOR_CORPUS_DIR"
# tests/corpus/util.py -> <repository>/.. -> shared/binlog-corpus
DEFAULT_CORPUS_DIR = Path(__file__).resolve().parents[3] / "shared" / "binlog-corpus"


def corpus_root(environ: Mapping[str, str] = os.environ) -> Path:
    """``$REPLICATOR_CORPUS_DIR`` when set, else ``../shared/binlog-corpus`` beside the repo."""
    configured = environ.get(CORPUS_ENV)
    return Path(configured).resolve() if configured else DEFAULT_CORPUS_DIR


CORPUS_DIR = corpus_root()


def corpus_file(corpus: Path, rel: str) -> Path:
    """``corpus / rel``; the test skips, naming the file, when this corpus copy lacks it."""
    path = corpus / rel
    if not path.exists():
        pytest.skip(f"{rel} is not in the corpus at {corpus} (scripts/fetch-corpus --mirror)")
    return path


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
