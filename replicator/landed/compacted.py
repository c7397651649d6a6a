"""Reading through compaction: which file holds a manifest entry's rows now.

``replicator compact`` (``sink.compaction``) merges committed files into ``compact-<first
_seq>-<last _seq>.parquet`` outputs and commits them with one record,
``<root>/_compactions/<id>.json``: each output names the files it supersedes (manifest
entries, or outputs of earlier records). Manifests are never rewritten, so a reader keeps
going by the manifests and asks ``holders`` where each entry's rows are now: in the entry's
own file, or in a slice of an output.

A slice is the output's rows whose ``_seq`` lies in ``within`` = (the previous entry's
``last_seq`` + 1, this entry's ``last_seq``) — the output holds the rows of its entries only,
in ``_seq`` order, so these are exactly the entry's rows. Reading several entries of one output
reads the file once with one ``_seq`` condition per run of adjacent slices (``reads``): a row
is never read twice, and an incremental run that applied some of the output's batches already
reads only the rows of the batches after them.

Records are read before the manifests: a record only names files of batches committed before
it. Only outputs a record names are read: on an object store outputs are written at their
final keys before the record, so an output no record names (being written, or left by a run
that died) is never read, and a committed one is always in place. On a directory an output
that is committed but not yet renamed into place (a compactor died between its record and the
rename; the next run or the daemon's start finishes it) is not read yet: the files it
replaces are read meanwhile, as they are still there. Superseded files stay for the
retention period (``sink.compaction.retention``, a day by default), so a job that resolved the
old files a moment before a compaction still finds them.
This module needs pyarrow only, not Spark.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import IntegrityError
from ..storage import Store
from .contract import COMPACTIONS

if TYPE_CHECKING:
    from .committed import CommittedFile

__all__ = ["Holding", "Read", "holders", "read_arrow", "reads"]

_RECORD = re.compile(r"\d{20}\.json")


@dataclass(frozen=True, slots=True)
class Holding:
    """Where a manifest entry's rows are: ``path`` (relative), ``_seq`` in ``within``;
    ``bytes``: the output's size as its record gives it (readers check it before reading)."""

    path: str
    within: tuple[int, int]
    bytes: int | None = None


@dataclass(frozen=True, slots=True)
class _Entry:
    path: str
    first_seq: int
    last_seq: int
    rows: int


def _bad(path: Path, problem: str) -> IntegrityError:
    return IntegrityError(
        f"compaction record {path} {problem}",
        hint="compaction records are commit points: restore _compactions/ from a backup",
    )


def _entry(item: Any, path: Path) -> _Entry:
    try:
        return _Entry(
            str(item["path"]), int(item["first_seq"]), int(item["last_seq"]), int(item["rows"])
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise _bad(path, f"lists a file without its path, rows or _seq range: {exc}") from exc


def holders(store: Store) -> dict[str, Holding]:
    """Manifest entry path -> where its rows are now, for every entry a committed record
    superseded (entries not in it are read from their own files)."""
    names = sorted(
        key for key in store.list(COMPACTIONS) if _RECORD.fullmatch(key[len(COMPACTIONS) + 1 :])
    )
    replaces: dict[str, list[_Entry]] = {}  # output -> the files it replaces (direct)
    entries: dict[str, list[_Entry]] = {}  # output -> the manifest entries it holds
    sizes: dict[str, int | None] = {}  # output -> its size as its record says
    live: set[str] = set()
    for number, key in enumerate(names, start=1):
        path = Path(store.uri(key))
        if path.name != f"{number:020d}.json":
            raise _bad(path, f"follows compaction {number - 1}: a record is missing")
        try:
            data = json.loads(store.read(key))
            outputs = list(data["outputs"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise _bad(path, f"cannot be read: {exc}") from exc
        for item in outputs:
            output = _entry(item, path)
            direct = [_entry(old, path) for old in item.get("replaces") or ()]
            held = [e for old in direct for e in entries.get(old.path, [old])]
            if (
                sum(e.rows for e in held) != output.rows
                or not held
                or held[0].first_seq != output.first_seq
                or held[-1].last_seq != output.last_seq
            ):
                raise _bad(path, f"says {output.path} holds other rows than the files it replaces")
            live.difference_update(old.path for old in direct)
            live.add(output.path)
            replaces[output.path] = direct
            entries[output.path] = held
            size = item.get("bytes")
            sizes[output.path] = size if isinstance(size, int) else None
    out: dict[str, Holding] = {}

    def place(holder: str) -> None:
        if not store.exists(holder):
            # committed, not yet renamed into place (a compactor died between its record and
            # the rename; local disks only: object stores write outputs at their final keys
            # before the record): what it replaces is still there (retention runs
            # after the rename), so those are read meanwhile
            for old in replaces[holder]:
                if old.path in replaces:
                    place(old.path)
            return
        low = entries[holder][0].first_seq
        for entry in entries[holder]:
            out[entry.path] = Holding(holder, (low, entry.last_seq), sizes[holder])
            low = entry.last_seq + 1

    for holder in sorted(live):
        place(holder)
    return out


@dataclass(frozen=True, slots=True)
class Read:
    """One physical file to read: whole (``ranges`` None), or only the rows whose ``_seq``
    lies in one of ``ranges`` (inclusive)."""

    path: Path | str
    ranges: tuple[tuple[int, int], ...] | None
    source: tuple[Any, Any] = (None, None)  # what pyarrow reads, and its filesystem


def reads(files: Sequence[CommittedFile]) -> list[Read]:
    """``files`` as the physical reads that return each entry's rows once: whole files as
    they are, the slices of one output merged into one read (adjacent slices into one
    range). Order: by first appearance."""
    out: dict[Path | str, list[tuple[int, int]] | None] = {}
    sources: dict[Path | str, tuple[Any, Any]] = {}
    for item in files:
        sources.setdefault(item.path, item.source())
        if item.within is None:
            if item.path in out:
                raise IntegrityError(
                    f"committed file {item.path} is listed twice",
                    hint="restore the manifests and _compactions/ from one backup",
                )
            out[item.path] = None
            continue
        ranges = out.setdefault(item.path, [])
        if ranges is None:
            raise IntegrityError(
                f"{item.path} is both a committed file and a compaction output",
                hint="restore the manifests and _compactions/ from one backup",
            )
        ranges.append(item.within)
    result: list[Read] = []
    for path, ranges in out.items():
        if ranges is None:
            result.append(Read(path, None, sources[path]))
            continue
        merged: list[tuple[int, int]] = []
        for low, high in sorted(ranges):
            if merged and merged[-1][1] >= low:
                raise IntegrityError(
                    f"two entries of {path} overlap at _seq {low}",
                    hint="restore _compactions/ from a backup",
                )
            if merged and merged[-1][1] + 1 == low:
                merged[-1] = (merged[-1][0], high)
            else:
                merged.append((low, high))
        result.append(Read(path, tuple(merged), sources[path]))
    return result


def _mask(seqs: pa.ChunkedArray, ranges: Sequence[tuple[int, int]]) -> Any:
    mask: Any = None
    for low, high in ranges:
        test = pc.and_(pc.greater_equal(seqs, low), pc.less_equal(seqs, high))
        mask = test if mask is None else pc.or_(mask, test)
    return mask


def read_arrow(files: Sequence[CommittedFile], columns: Sequence[str] | None = None) -> pa.Table:
    """The rows of ``files`` (one schema), each once, with pyarrow (no Spark)."""
    tables: list[pa.Table] = []
    for read in reads(files):
        wanted = None if columns is None else list(dict.fromkeys([*columns, "_seq"]))
        where, filesystem = read.source
        table = pq.read_table(where, columns=wanted, filesystem=filesystem)
        if read.ranges is not None:
            table = table.filter(_mask(table.column("_seq"), read.ranges))
        if columns is not None:
            table = table.select(list(columns))
        tables.append(table)
    return pa.concat_tables(tables)
