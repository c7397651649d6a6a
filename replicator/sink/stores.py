"""The ``Store`` a ``sink`` section names: ``sink.root`` (a directory or an object store's
URL) with ``sink.object_store``'s endpoint, region and credentials (``storage``)."""

from __future__ import annotations

from pathlib import Path

from ..config import SinkConfig
from ..storage import LocalStore, ObjectStoreOptions, Store, open_store

__all__ = ["as_store", "landing_store"]


def landing_store(sink: SinkConfig) -> Store:
    """The landing zone's store (nothing is contacted yet)."""
    options = sink.object_store
    return open_store(
        sink.root,
        ObjectStoreOptions(
            endpoint=options.endpoint,
            region=options.region,
            access_key=options.access_key.reveal() or None,
            secret_key=options.secret_key.reveal() or None,
            session_token=options.session_token.reveal() or None,
        ),
    )


def as_store(root: Store | Path | str) -> Store:
    """``root`` as a store: a path is a local directory, as before object stores."""
    return root if isinstance(root, Store) else LocalStore(Path(root))
