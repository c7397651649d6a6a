"""Binlog files on disk as a source of the same events a live server sends.

A thin loop around ``binlog.stream.BinlogFileDecoder``: read chunks, feed, drain.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ..binlog.events import Event
from ..binlog.framing import _NeedData
from ..binlog.stream import BinlogFileDecoder
from ..binlog.tablemap import SchemaLookup
from ..errors import ConfigError

CHUNK = 1 << 20


def read_binlog_file(
    path: Path,
    *,
    schema_lookup: SchemaLookup | None = None,
    verify_checksum: bool = True,
    buffers: bool = True,
    text_values: bool = False,
) -> Iterator[Event]:
    """Yield every event of one binlog file in order; raise at the first bad one.
    ``buffers=False``: rows events decoded into values only, no buffers (``binlog.block``);
    with ``text_values`` too, DECIMAL and temporal values the native core decodes come as the
    text ``replicator dump`` writes of them (``binlog.rows.TableDecoder``)."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise ConfigError(f"cannot open binlog file {path}: {exc.strerror}") from exc
    decoder = BinlogFileDecoder(
        path.name, schema_lookup=schema_lookup, verify_checksum=verify_checksum
    )
    decoder.parser.buffers = buffers
    decoder.parser.text_values = text_values
    with handle:
        while True:
            chunk = handle.read(CHUNK)
            if chunk:
                decoder.feed(chunk)
            while True:
                event = decoder.next_event()
                if isinstance(event, _NeedData):
                    break
                yield event
            if not chunk:
                decoder.finish()
                return


def read_binlog_files(
    paths: list[Path],
    *,
    schema_lookup: SchemaLookup | None = None,
    verify_checksum: bool = True,
    buffers: bool = True,
    text_values: bool = False,
) -> Iterator[Event]:
    """Events of several files, in the order given."""
    for path in paths:
        yield from read_binlog_file(
            path,
            schema_lookup=schema_lookup,
            verify_checksum=verify_checksum,
            buffers=buffers,
            text_values=text_values,
        )
