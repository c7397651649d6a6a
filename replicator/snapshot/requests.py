"""Snapshot requests (``replicator snapshot``): files under ``_state/snapshot-requests/`` of
the landing zone; the daemon takes them into the snapshot progress at its next commit and
deletes them once that commit is durable. Read and written through the landing zone's
``storage.Store`` (a directory or an object store), by key.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from pathlib import Path

from ..errors import IntegrityError
from ..storage import LocalStore, Store

REQUESTS = Path("_state") / "snapshot-requests"
_FOLDER = REQUESTS.as_posix()


def _store(root: Path | Store) -> Store:
    return root if isinstance(root, Store) else LocalStore(root)


def write_request(root: Path | Store, patterns: Iterable[str]) -> str:
    """Ask the daemon (now, or at its next start) to snapshot the tables matching the
    ``db.table`` globs; returns the request's key."""
    key = f"{_FOLDER}/{time.time_ns()}-{os.getpid()}.json"
    _store(root).write(key, (json.dumps({"tables": list(patterns)}) + "\n").encode())
    return key


def is_table_pattern(table: object) -> bool:
    """A ``db.table`` glob, as ``replicator snapshot --tables`` takes them."""
    return isinstance(table, str) and table.count(".") == 1


def read_requests(root: Path | Store) -> list[tuple[str, list[str]]]:
    """The requests waiting (by key), oldest first (a file that does not parse is an
    error)."""
    store = _store(root)
    out: list[tuple[str, list[str]]] = []
    for key in store.list(_FOLDER):
        name = key.rpartition("/")[2]
        if not name.endswith(".json") or name.startswith("."):
            continue
        try:
            tables = json.loads(store.read(key).decode("utf-8"))["tables"]
            if not isinstance(tables, list) or not all(is_table_pattern(t) for t in tables):
                raise ValueError('"tables" is not a list of database.table patterns')
            out.append((key, tables))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise IntegrityError(
                f"snapshot request {store.uri(key)} is unreadable: {exc}",
                hint="remove it and ask again with `replicator snapshot`",
            ) from exc
    return out
