"""The schema history a landing zone has committed, read as ``replicator schema show`` (and
tests) read it: the file the last manifest names, checked against the hash that manifest pins
it to (``sink.digest``). Read-only: a running daemon is not disturbed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ..errors import ConfigError, IntegrityError
from ..schema.history import SchemaHistory
from ..storage import LocalStore, Store
from .digest import HISTORY_DIGEST_KEY, check_history

__all__ = ["load_committed_history"]


def load_committed_history(root: Path | Store) -> SchemaHistory:
    """The schema history of the landing zone at ``root`` (a directory or a store) as its
    last manifest names it."""
    store = root if isinstance(root, Store) else LocalStore(root)
    manifests = [
        key
        for key in store.list("_manifests")
        if re.fullmatch(r"_manifests/\d{20}\.json", key) is not None
    ]
    where = store.location
    if not manifests:
        raise ConfigError(
            f"no committed batch in {where}: no schema history yet",
            hint="check sink.root (relative paths are relative to the current directory)",
        )
    try:
        manifest = json.loads(store.read(manifests[-1]))
        name, pinned = manifest.get("schema_history"), manifest.get(HISTORY_DIGEST_KEY)
    except (OSError, ValueError, AttributeError) as exc:
        raise IntegrityError(f"cannot read {store.uri(manifests[-1])}: {exc}") from exc
    if not name:
        raise ConfigError(
            f"{where} has no schema history (written by a replicator from before it kept one)",
            hint="the next `replicator run` seeds one",
        )
    try:
        raw = store.read(name)
        check_history(raw, pinned, store.uri(name), manifest.get("batch"))
        return SchemaHistory.from_json(json.loads(raw))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise IntegrityError(f"cannot read the schema history {store.uri(name)}: {exc}") from exc
