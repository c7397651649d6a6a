"""Reading the commit records under ``<root>/_manifests/``, trusting nothing.

A manifest is the commit point of a batch (``sink.landing``), so recovery builds on what the
manifests say, and a manifest that is missing, torn, edited or out of line must stop the
daemon rather than be skipped: skipping one would orphan committed files, and a checkpoint
that disagrees with them would hand out ``_seq`` numbers (and file names) that are taken.

``read_manifests`` checks each file (its name is the batch number in 20 digits; JSON with
the fields of the format and the right types) and the chain they form:

* batch numbers follow each other without a gap;
* ``_seq`` ranges follow each other without a gap or overlap (``first_seq`` is the previous
  ``last_seq + 1``; a batch with no rows has ``last_seq = first_seq - 1``);
* each batch starts where the previous one ended, unless ``checkpoint set`` moved the
  position in between (``start_moved`` in the manifest);
* each file entry's ``_seq`` range lies within its batch's, and no path is named twice;
* a file entry's ``bytes`` and ``sha256`` (``sink.digest``), and the manifest's pin of its
  schema history (``schema_history_sha256``), when there (manifests written before hashes
  have none), are a size and a hash;
* every manifest carries the same landing zone id (``sink.identity``) from the first one that
  carries one on (the manifests written before ids existed come first, without one).

Every failure is an ``IntegrityError`` (exit 4) naming the file and what is wrong; nothing is
deleted or rewritten here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from ..errors import IntegrityError
from ..storage import LocalStore, Store
from .digest import DIGEST_KEY, HISTORY_DIGEST_KEY, is_digest
from .identity import LANDING_ID_KEY, is_landing_id

MANIFESTS = "_manifests"
_NAME = re.compile(r"\d{20}\.json")
_TEMP = re.compile(r"\.\d{20}\.json\.tmp")
PROOF_KEY = "source"  # the proof of the last transaction landed (source.proof)


@dataclass(frozen=True, slots=True)
class Manifest:
    """One checked commit record; ``data`` is the JSON document as written."""

    path: Path | str  # a local path, or an object store's URL
    data: dict[str, Any]

    @property
    def batch(self) -> int:
        return int(self.data["batch"])

    @property
    def first_seq(self) -> int:
        return int(self.data["first_seq"])

    @property
    def last_seq(self) -> int:
        return int(self.data["last_seq"])

    @property
    def landing_id(self) -> str | None:
        """The landing zone's id (``sink.identity``); None in manifests written before ids."""
        value = self.data.get(LANDING_ID_KEY)
        return None if value is None else str(value)

    @property
    def history_pin(self) -> str | None:
        """The sha256 of the schema history file this batch names; None in manifests written
        before pins (and when it names none)."""
        value = self.data.get(HISTORY_DIGEST_KEY)
        return None if value is None else str(value)

    @property
    def files(self) -> list[dict[str, Any]]:
        files: list[dict[str, Any]] = self.data["files"]
        return files


def valid_proof(value: object) -> bool:
    """The shape of a manifest's ``source`` field (None allowed: nothing to prove)."""
    if value is None:
        return True
    if not isinstance(value, dict):
        return False
    gtid, before, events = value.get("gtid"), value.get("before"), value.get("events")
    return (
        (gtid is None or isinstance(gtid, str))
        and (before is None or (isinstance(before, dict) and isinstance(before.get("file"), str)))
        and is_digest(value.get("digest"))
        and isinstance(events, int)
        and not isinstance(events, bool)
        and events >= 0
    )


def _bad(path: Path | str, problem: str) -> IntegrityError:
    return IntegrityError(
        f"manifest {path} {problem}",
        hint="the manifests are the landing zone's commit records: restore this one from a "
        "backup (or put back what was moved); nothing was changed in the landing zone",
    )


def _int(data: dict[str, Any], key: str, path: Path | str) -> int:
    value = data.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise _bad(path, f"has no integer {key!r}")
    return value


def _position(data: dict[str, Any], key: str, path: Path | str, *, optional: bool) -> None:
    value = data.get(key)
    if value is None and optional:
        return
    if not isinstance(value, dict) or not isinstance(value.get("file", ""), str):
        raise _bad(path, f"has no valid {key!r} position")
    position = value.get("position", 4)
    if not isinstance(position, int) or isinstance(position, bool) or position < 0:
        raise _bad(path, f"has no valid {key!r} position")


def parse_manifest(path: Path | str, raw: bytes) -> Manifest:
    """Check one manifest's content (not its place in the chain)."""
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise _bad(path, f"is not valid JSON (torn or edited?): {exc}") from None
    if not isinstance(data, dict):
        raise _bad(path, "is not a JSON object")
    batch = _int(data, "batch", path)
    if PurePosixPath(str(path)).name != f"{batch:020d}.json":
        raise _bad(path, f"says it is batch {batch}, which does not match its name")
    first, last = _int(data, "first_seq", path), _int(data, "last_seq", path)
    if first < 1 or last < first - 1:
        raise _bad(path, f"has an impossible _seq range {first}..{last}")
    for key in ("rows", "transactions"):
        if _int(data, key, path) < 0:
            raise _bad(path, f"has a negative {key!r}")
    _position(data, "start", path, optional=True)
    _position(data, "end", path, optional=False)
    if not isinstance(data.get("committed_at"), str):
        raise _bad(path, "has no 'committed_at' time")
    files = data.get("files")
    if not isinstance(files, list):
        raise _bad(path, "has no 'files' list")
    for entry in files:
        _check_file_entry(entry, first, last, path)
    history = data.get("schema_history")
    if history is not None and (not isinstance(history, str) or ".." in history.split("/")):
        raise _bad(path, f"names an invalid schema history {history!r}")
    pin = data.get(HISTORY_DIGEST_KEY)
    if pin is not None and (history is None or not is_digest(pin)):
        raise _bad(path, f"has an invalid {HISTORY_DIGEST_KEY!r} {pin!r}")
    records = data.get("schema_changes", [])
    if not isinstance(records, list):
        raise _bad(path, "has an invalid 'schema_changes' list")
    for record in records:
        if not isinstance(record, dict) or not isinstance(record.get("table"), str):
            raise _bad(path, "has a schema change record without its table")
        at = _int(record, "seq", path)
        if not first <= at <= last:
            raise _bad(path, f"has a schema change at _seq {at}, outside {first}..{last}")
    pending = data.get("xa_pending", [])
    if not isinstance(pending, list) or not all(isinstance(p, str) for p in pending):
        raise _bad(path, "has an invalid 'xa_pending' list")
    if not valid_proof(data.get(PROOF_KEY)):  # the source proof (source.continuity)
        raise _bad(path, f"has an invalid {PROOF_KEY!r} proof")
    landing_id = data.get(LANDING_ID_KEY)
    if landing_id is not None and not is_landing_id(landing_id):
        raise _bad(path, f"has an invalid landing zone id {landing_id!r}")
    return Manifest(path, data)


def _check_file_entry(entry: object, first: int, last: int, path: Path | str) -> None:
    if not isinstance(entry, dict):
        raise _bad(path, "lists a file that is not an object")
    name = entry.get("path")
    if not isinstance(name, str) or not name or name.startswith("/") or ".." in name.split("/"):
        raise _bad(path, f"lists an invalid file path {name!r}")
    if not isinstance(entry.get("table"), str):
        raise _bad(path, f"lists {name} without its table")
    lo, hi = _int(entry, "first_seq", path), _int(entry, "last_seq", path)
    if not first <= lo <= hi <= last:
        raise _bad(path, f"lists {name} with _seq {lo}..{hi}, outside the batch's {first}..{last}")
    if _int(entry, "rows", path) < 0:
        raise _bad(path, f"lists {name} with a negative row count")
    if "bytes" in entry and _int(entry, "bytes", path) < 0:
        raise _bad(path, f"lists {name} with a negative size")
    if DIGEST_KEY in entry and not is_digest(entry[DIGEST_KEY]):
        raise _bad(path, f"lists {name} with an invalid {DIGEST_KEY!r} {entry[DIGEST_KEY]!r}")


def manifest_key(batch: int) -> str:
    """The key of batch ``batch``'s manifest."""
    return f"{MANIFESTS}/{batch:020d}.json"


def manifest_keys(store: Store) -> tuple[list[str], list[str]]:
    """(manifests, temp files of manifests never committed) under ``_manifests/``, as keys.
    Anything else there is refused: it is not ours, and guessing what it is risks data.

    On an object store a listing may lag behind a completed upload, so the batches after
    the last one listed are looked up by name too (a read of one key is not stale): a
    lagging listing must not hide the newest commit from recovery, which would take its
    files for leftovers."""
    committed: list[str] = []
    temps: list[str] = []
    strangers: list[str] = []
    for key in store.list(MANIFESTS):
        name = key.rpartition("/")[2]
        if key.count("/") == 1 and _NAME.fullmatch(name):
            committed.append(key)
        elif key.count("/") == 1 and _TEMP.fullmatch(name):
            temps.append(key)
        else:
            strangers.append(key[len(MANIFESTS) + 1 :])
    if strangers:
        shown = ", ".join(repr(s) for s in sorted(strangers)[:5])
        raise IntegrityError(
            f"{store.uri(MANIFESTS)} holds files that are not commit records: {shown}",
            hint="move them out of _manifests/ (only <20-digit batch>.json files belong there); "
            "if one is a renamed manifest, restore its original name",
        )
    committed.sort()
    if not store.renames:
        last = int(committed[-1].rpartition("/")[2][:20]) if committed else 0
        while store.exists(manifest_key(last + 1)):
            last += 1
            committed.append(manifest_key(last))
    return committed, temps


def manifest_files(root: Path) -> tuple[list[Path], list[Path]]:
    """``manifest_keys`` of a local landing zone, as paths."""
    committed, temps = manifest_keys(LocalStore(root))
    return [root / key for key in committed], [root / key for key in temps]


def read_manifests(root: Path | Store) -> list[Manifest]:
    """Every manifest of the landing zone at ``root``, checked one by one and as a chain."""
    store = root if isinstance(root, Store) else LocalStore(root)
    keys, _ = manifest_keys(store)
    manifests = []
    for key in keys:
        path = store.path(key) if isinstance(store, LocalStore) else store.uri(key)
        try:
            raw = store.read(key)
        except OSError as exc:
            raise _bad(path, f"cannot be read: {exc.strerror or exc}") from exc
        manifests.append(parse_manifest(path, raw))
    check_chain(manifests)
    return manifests


def check_chain(manifests: Iterable[Manifest]) -> None:
    """Batch numbers, ``_seq`` ranges and positions must follow on without gaps."""
    previous: Manifest | None = None
    seen_paths: dict[str, int] = {}
    for manifest in manifests:
        if previous is not None:
            if manifest.batch != previous.batch + 1:
                raise IntegrityError(
                    f"batch {previous.batch + 1} is missing: its manifest is not in "
                    f"{str(manifest.path).rpartition('/')[0]} (batch {previous.batch} is "
                    f"followed by {manifest.batch})",
                    hint="restore the missing manifest from a backup; its files are still in "
                    "the landing zone and nothing was changed",
                )
            if manifest.first_seq != previous.last_seq + 1:
                raise IntegrityError(
                    f"manifest {manifest.path} starts at _seq {manifest.first_seq}, but batch "
                    f"{previous.batch} ended at {previous.last_seq}",
                    hint="the manifests do not come from one writer: restore them from a "
                    "backup; two processes must never write one landing zone",
                )
            if previous.landing_id is not None and manifest.landing_id != previous.landing_id:
                raise IntegrityError(
                    f"manifest {manifest.path} belongs to landing zone "
                    f"{manifest.landing_id or '(none: written before ids)'}, batch "
                    f"{previous.batch} to landing zone {previous.landing_id}",
                    hint="the manifests come from two landing zones: restore them from a "
                    "backup; two landing zones must never share a directory",
                )
            moved = bool(manifest.data.get("start_moved", False))
            if not moved and manifest.data.get("start") != previous.data.get("end"):
                raise IntegrityError(
                    f"manifest {manifest.path} starts at {manifest.data.get('start')}, but batch "
                    f"{previous.batch} ended at {previous.data.get('end')}",
                    hint="the manifests do not come from one writer: restore them from a backup",
                )
        for entry in manifest.files:
            other = seen_paths.setdefault(str(entry["path"]), manifest.batch)
            if other != manifest.batch:
                raise IntegrityError(
                    f"{entry['path']} is named by the manifests of batches {other} and "
                    f"{manifest.batch}",
                    hint="one of them is not a commit record of this landing zone: restore the "
                    "manifests from a backup",
                )
        previous = manifest
