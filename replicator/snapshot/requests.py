"""Snapshot requests (``replicator snapshot``): files under ``_state/snapshot-requests/`` of
the landing zone; the daemon takes them into the snapshot progress at its next commit and
deletes them once that commit is durable.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from pathlib import Path

from ..errors import IntegrityError

REQUESTS = Path("_state") / "snapshot-requests"


def write_request(root: Path, patterns: Iterable[str]) -> Path:
    """Ask the daemon (now, or at its next start) to snapshot the tables matching the
    ``db.table`` globs."""
    folder = root / REQUESTS
    folder.mkdir(parents=True, exist_ok=True)
    name = f"{time.time_ns()}-{os.getpid()}.json"
    temp = folder / f".{name}.tmp"
    temp.write_text(json.dumps({"tables": list(patterns)}) + "\n", encoding="utf-8")
    final = folder / name
    os.replace(temp, final)
    return final


def read_requests(root: Path) -> list[tuple[Path, list[str]]]:
    """The requests waiting, oldest first (a file that does not parse is an error)."""
    folder = root / REQUESTS
    try:
        names = sorted(p for p in folder.iterdir() if p.suffix == ".json")
    except FileNotFoundError:
        return []
    out: list[tuple[Path, list[str]]] = []
    for path in names:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            out.append((path, [str(t) for t in data["tables"]]))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise IntegrityError(
                f"snapshot request {path} is unreadable: {exc}",
                hint="remove it and ask again with `replicator snapshot`",
            ) from exc
    return out
