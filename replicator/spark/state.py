"""The output directory: each table's current state, replaced atomically, with what it holds.

``<out>/<db>/<table>`` is a symbolic link to a hidden version directory next to it,
``<out>/<db>/.<table>.v-<id>/``, which holds the state as Parquet files (written by Spark)
and ``_replicator_state.json``: the last landing-zone batch applied (or the last streaming
micro-batch), the primary key, the options and the Spark schema of the rows. A run writes a
new version directory, then replaces the link in one ``rename(2)`` of a symbolic link, then
deletes the old version. A crash at any point leaves the link on a complete version whose
JSON matches its files; leftover version directories are removed by the next run. Readers
(``spark.read.parquet("<out>/<db>/<table>")``) always see one whole state; one that is
reading an old version while it is deleted fails and must retry.

A table that no longer exists (dropped, or renamed away: ``lineage``) has no link: ``remove``
first writes a tombstone ``<out>/<db>/.<table>.gone.json`` (the same JSON: up to which batch
the table is known gone), then unlinks the link (the commit point), then deletes the version.
A crash in between leaves the link, which wins: the tombstone counts only without a link, and
``publish`` deletes it once a new version is linked.

Names starting with ``.`` or ``_`` are skipped by Spark's Parquet reader, so neither the
version directories nor the JSON are ever read as data. One process at a time may write an
output directory: ``lock`` takes an exclusive ``flock`` on ``<out>/.replicator.lock``.
Needs a local (POSIX) filesystem.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from ..durable import fsync_dir, write_atomic
from ..errors import ConfigError, SinkError
from ..landed.outputs import LOCK_FILE, lock

__all__ = [
    "LOCK_FILE",
    "STATE_FILE",
    "TableState",
    "clean",
    "held",
    "load",
    "load_gone",
    "lock",
    "outputs",
    "publish",
    "remove",
    "update",
    "update_gone",
]

STATE_FILE = "_replicator_state.json"
FORMAT = 1


@dataclass(frozen=True, slots=True)
class TableState:
    """What a state version holds; stored as ``_replicator_state.json`` inside it."""

    table: str  # db.t
    landing: str  # the landing root it was built from (absolute)
    mode: str  # "batch" (materialize) or "stream" (streaming.merge_micro_batch)
    last_batch: int  # last landing-zone batch applied (batch mode)
    stream_batch: int  # last streaming micro-batch applied (stream mode); -1: none
    last_seq: int | None  # highest _seq applied
    key: list[str]  # primary key; [] = whole rows
    keep_metadata: bool
    allow_unknown: bool
    schema: str  # Spark StructType JSON of the rows
    rows: int
    format: int = FORMAT
    # a tombstone's: "removed" (dropped or renamed away) or "empty" (no columns known yet)
    gone: str | None = None
    detail: str | None = None  # what the last run did and why (for reports)
    # written by a materialize that applies lifecycle records and replays (older states may
    # hold rows a TRUNCATE, DROP or RENAME in the batches they hold since removed)
    lineage: bool = False
    # the id of the landing zone it was built from (None: before landing zones had ids, or
    # built from a landing zone written before them); see ``spark.identity``
    landing_id: str | None = None
    # the mark of batch ``last_batch`` (``Manifest.mark``): the landing zone's batch of that
    # number must be the same commit (None: written by an older materialize)
    batch_mark: str | None = None
    # the streaming query ``stream_batch`` counts in (its checkpoint's id): micro-batch ids
    # start again at 0 in a query with a new checkpoint (None: not known)
    stream_query: str | None = None

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), indent=1, sort_keys=True).encode() + b"\n"

    @classmethod
    def from_json(cls, data: dict[str, Any], where: Path) -> TableState:
        try:
            if data.get("format") != FORMAT:
                raise ValueError(f"format {data.get('format')!r}")
            return cls(**data)
        except (TypeError, ValueError) as exc:
            raise SinkError(
                f"cannot read {where}: {exc}",
                hint="the output directory was not written by this version of materialize: "
                "use another --out, or --full-refresh",
            ) from exc


def _versions(link: Path) -> Iterator[Path]:
    return _beside(link, "v")


_SUFFIX_DIGITS = 12  # hex digits that tell a table's versions (and temporary links) apart


def _fresh(link: Path, kind: str) -> Path:
    """A new name next to ``link`` for a version directory (``v``) or temporary link
    (``link``) of its table: ``.<table>.<kind>-<hex digits>``, the form ``_beside`` finds."""
    return link.parent / f".{link.name}.{kind}-{uuid.uuid4().hex[:_SUFFIX_DIGITS]}"


def _beside(link: Path, kind: str) -> Iterator[Path]:
    """``link``'s own version directories (``v``) or temporary links (``link``) next to it:
    named as ``_fresh`` names them, exactly, so that those of another table whose name starts
    like this one's (``a`` and ``a.v-0123456789ab``) are never taken for them."""
    mine = re.compile(re.escape(f".{link.name}.{kind}-") + f"[0-9a-f]{{{_SUFFIX_DIGITS}}}")
    if link.parent.is_dir():
        for entry in link.parent.iterdir():
            if mine.fullmatch(entry.name):
                yield entry


def _tombstone(link: Path) -> Path:
    return link.parent / f".{link.name}.gone.json"


def _read(path: Path, hint: str) -> TableState:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise SinkError(f"cannot read {path}: {exc}", hint=hint) from exc
    return TableState.from_json(data, path)


def load_gone(link: Path) -> TableState | None:
    """The tombstone of a removed table (``remove``); None when ``link`` exists or none."""
    path = _tombstone(link)
    if os.path.lexists(link) or not path.is_file():
        return None
    return _read(path, "the tombstone is damaged: delete it, or rebuild with --full-refresh")


def load(link: Path) -> tuple[TableState, Path] | None:
    """The state ``link`` points at and its version directory; None when there is none."""
    if not os.path.lexists(link):
        return None
    if not link.is_symlink():
        raise ConfigError(
            f"{link} exists and was not written by materialize",
            hint="choose an empty --out directory (or move that directory away)",
        )
    target = link.parent / os.readlink(link)
    state = _read(target / STATE_FILE, "the state is damaged: rebuild it with --full-refresh")
    return state, target


def held(link: Path) -> TableState | None:
    """What the output holds of ``link``'s table: the state the link points at, else its
    tombstone (a removed table); None when neither."""
    found = load(link)
    return found[0] if found is not None else load_gone(link)


def outputs(out: Path) -> Iterator[tuple[Path, TableState]]:
    """Every table the output directory ``out`` holds: (link, state) for each link, and for
    each tombstone without a link."""
    if not out.is_dir():
        return
    for database in sorted(out.iterdir()):
        if database.name.startswith((".", "_")) or database.is_symlink() or not database.is_dir():
            continue
        for entry in sorted(database.iterdir()):
            name = entry.name
            if not name.startswith(".") and entry.is_symlink():
                found = load(entry)
                if found is not None:
                    yield entry, found[0]
            elif name.startswith(".") and name.endswith(".gone.json"):
                link = database / name[1 : -len(".gone.json")]
                gone = load_gone(link)
                if gone is not None:
                    yield link, gone


def publish(link: Path, write: Callable[[Path], int], state: TableState) -> TableState:
    """Write a new version with ``write(directory) -> rows``, record ``state`` in it and
    swap ``link`` to it; returns the recorded state."""
    link.parent.mkdir(parents=True, exist_ok=True)
    old = load(link)
    version = _fresh(link, "v")
    try:
        rows = write(version)
        state = replace(state, rows=rows)
        write_atomic(version / STATE_FILE, state.to_json())
        fsync_dir(version)
        temp = _fresh(link, "link")
        os.symlink(version.name, temp)
        os.replace(temp, link)  # the commit point
        fsync_dir(link.parent)
    except BaseException:
        shutil.rmtree(version, ignore_errors=True)
        raise
    with contextlib.suppress(FileNotFoundError):
        _tombstone(link).unlink()  # the link wins now
    keep = {version.name}
    for stale in _versions(link):
        if stale.name not in keep:
            shutil.rmtree(stale, ignore_errors=True)
    if old is not None and old[1].name not in keep:
        shutil.rmtree(old[1], ignore_errors=True)
    return state


def remove(link: Path, state: TableState) -> None:
    """The table is gone: record ``state`` in a tombstone, then remove the link and its
    version (see the module doc). Also when there is no link (a tombstone alone)."""
    link.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(_tombstone(link), replace(state, rows=0, schema="").to_json())
    old = load(link)
    if old is not None:
        os.unlink(link)  # the commit point
        fsync_dir(link.parent)
        shutil.rmtree(old[1], ignore_errors=True)
    for stale in _versions(link):
        shutil.rmtree(stale, ignore_errors=True)


def update(link: Path, state: TableState) -> None:
    """Record ``state`` in the current version (same rows, e.g. a later ``last_batch``)."""
    found = load(link)
    if found is None:
        raise SinkError(f"{link} has no state to update")
    write_atomic(found[1] / STATE_FILE, state.to_json())


def update_gone(link: Path, state: TableState) -> None:
    """Record ``state`` in the tombstone of a removed table."""
    write_atomic(_tombstone(link), replace(state, rows=0, schema="").to_json())


def clean(link: Path) -> None:
    """Remove version directories ``link`` does not point at, temporary links and a
    tombstone next to a link (what a crash leaves)."""
    current = load(link)
    keep = None if current is None else current[1].name
    for stale in _versions(link):
        if stale.name != keep:
            shutil.rmtree(stale, ignore_errors=True)
    if current is not None:  # a removal that did not reach its commit point
        with contextlib.suppress(FileNotFoundError):
            _tombstone(link).unlink()
    for temp in _beside(link, "link"):
        with contextlib.suppress(OSError):
            temp.unlink()
