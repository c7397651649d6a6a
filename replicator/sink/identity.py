"""The landing zone's identity: a random id made once, with the landing zone.

A landing zone removed and made again at the same path (a demo started over, a restore from
the wrong backup) counts its batches from 1 again, and a reader that knows it by its path
alone (``replicator materialize``'s output) would take the new batches for the old ones. So
each landing zone has an id, kept in ``<root>/_state/identity.json`` and written into every
manifest (``landing_id``); ``spark.state`` records it with each table it builds and refuses
to go on from an output built from another landing zone.

The id is made by the first ``replicator run`` (or ``checkpoint set``) on a landing zone,
before its first batch. A landing zone written before ids existed gets one at its next start:
its older manifests stay as they are (commit records are never rewritten) and the later ones
carry it. A lost identity file is restored from the manifests; one that disagrees with them
stops with exit 4.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path

from ..errors import IntegrityError, SinkError
from ..landed.contract import LANDING_ID_KEY, is_landing_id
from ..storage import LocalStore, Store

__all__ = ["IDENTITY_FILE", "LANDING_ID_KEY", "establish", "is_landing_id", "read_identity"]

IDENTITY_FILE = Path("_state") / "identity.json"
IDENTITY_KEY = IDENTITY_FILE.as_posix()


def read_identity(root: Path | Store) -> str | None:
    """The id of the landing zone at ``root``; None when it has none (yet)."""
    store = root if isinstance(root, Store) else LocalStore(root)
    path = store.uri(IDENTITY_KEY)
    try:
        raw = store.read(IDENTITY_KEY)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SinkError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        value = json.loads(raw).get(LANDING_ID_KEY)
    except (ValueError, AttributeError):
        value = None
    if not is_landing_id(value):
        raise IntegrityError(
            f"{path} does not hold a landing zone id",
            hint="remove it to have it restored from the manifests (or made anew when there "
            "are none); nothing was changed",
        )
    assert isinstance(value, str)
    return value


def establish(root: Path | Store, recorded: str | None) -> tuple[str, str]:
    """The landing zone's id, made when it has none. ``recorded``: the id its manifests
    carry (None: no manifest carries one). Returns the id and what happened: ``kept``,
    ``created`` or ``restored`` (from the manifests)."""
    store = root if isinstance(root, Store) else LocalStore(root)
    found = read_identity(store)
    if found is not None:
        if recorded is not None and recorded != found:
            raise IntegrityError(
                f"the manifests of {store.location} belong to landing zone {recorded}, but "
                f"{store.uri(IDENTITY_KEY)} says it is landing zone {found}",
                hint="the commit records and the state come from two landing zones: restore "
                "the landing zone from one backup; nothing was changed",
            )
        return found, "kept"
    landing_id = recorded or uuid.uuid4().hex
    record = {
        LANDING_ID_KEY: landing_id,
        "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    try:
        store.write(IDENTITY_KEY, json.dumps(record, indent=1, sort_keys=True).encode() + b"\n")
    except OSError as exc:
        raise SinkError(
            f"cannot write {store.uri(IDENTITY_KEY)}: {exc.strerror or exc}",
            hint="check free space and permissions of the landing zone; nothing was lost",
        ) from exc
    return landing_id, "restored" if recorded else "created"
