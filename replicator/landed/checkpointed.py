"""The checkpoint as a reader sees it: the batch it names, which the manifests must reach.

The daemon commits a batch by writing its manifest first and the checkpoint naming that batch
last (``sink.landing``). A reader that reads the checkpoint first and lists the manifests
after it therefore finds the manifest of the checkpoint's batch, even while a daemon commits
meanwhile (``replicator checkpoint set`` never names a batch beyond the last manifest
either). A checkpoint naming a batch above the newest manifest means committed manifests
were removed: their batches' rows would be read as if they had never been committed (lost
from every output, or compacted as if they were not there), so every reader refuses, as the
daemon's start does (``LandingZone._check_checkpoint``, whose wording this follows).

Only the checkpoint's batch is read here: readers import nothing of the daemon's
``checkpoint`` module (docs/development.md); the daemon's start checks the rest of it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..errors import IntegrityError, SinkError
from ..storage import Store
from .contract import CHECKPOINT, MANIFESTS, is_digest

if TYPE_CHECKING:
    from .manifests import Manifest

__all__ = ["check_pinned", "check_reached", "checkpoint_batch", "checkpoint_pin", "newest_batch"]


def checkpoint_batch(store: Store) -> int:
    """The batch the checkpoint of ``store`` names (one read); 0 when there is none yet (a
    landing zone before its first commit, or a checkpoint removed to be rebuilt)."""
    return checkpoint_pin(store)[0]


def checkpoint_pin(store: Store) -> tuple[int, str | None]:
    """The batch the checkpoint of ``store`` names and its pin of that batch's manifest (its
    sha256; None in checkpoints written before pins), in one read; (0, None) when there is
    no checkpoint yet."""
    where = store.uri(CHECKPOINT)
    try:
        raw = store.read(CHECKPOINT)
    except FileNotFoundError:
        return 0, None
    except OSError as exc:
        raise SinkError(f"cannot read checkpoint {where}: {exc.strerror or exc}") from exc
    try:
        data = json.loads(raw)
        batch, pin = data["batch"], data.get("manifest_sha256")
        if not isinstance(batch, int) or isinstance(batch, bool) or batch < 0:
            raise ValueError(f"batch {batch!r} out of range")
        if pin is not None and not is_digest(pin):
            raise ValueError(f"manifest_sha256 {pin!r} is not a sha256")
    except (ValueError, KeyError, TypeError) as exc:
        raise IntegrityError(
            f"checkpoint {where} is unreadable: {exc}",
            hint="remove it to have it rebuilt from the manifests under _manifests/ (the "
            "stream then resumes after the last committed batch), or restore it from a "
            "backup; nothing was changed",
        ) from exc
    return int(batch), pin


def check_pinned(store: Store, pin: str | None, batch: int, manifests: Iterable[Manifest]) -> None:
    """The manifest of ``batch`` among ``manifests`` (when it is one of them) is the one the
    checkpoint pins (``pin``: its sha256; None: a checkpoint from before pins)."""
    if pin is None:
        return
    for manifest in manifests:
        if manifest.batch == batch and manifest.sha256 != pin:
            raise IntegrityError(
                f"checkpoint {store.uri(CHECKPOINT)} pins batch {batch}'s manifest "
                f"{manifest.path} at sha256 {pin}, but it has {manifest.sha256}: the manifest "
                "was edited after its commit",
                hint="restore the manifest from a backup; nothing was changed",
            )


def newest_batch(keys: list[str]) -> int | None:
    """The batch of the newest of the manifest ``keys`` (``manifests.manifest_keys``, in
    order); None when there is none."""
    return int(keys[-1].rpartition("/")[2][:20]) if keys else None


def check_reached(store: Store, checkpoint: int, newest: int | None) -> None:
    """IntegrityError unless the newest manifest (``newest``: its batch; None: there is none),
    listed after the checkpoint naming batch ``checkpoint`` was read, reaches it."""
    if checkpoint == 0 or (newest is not None and checkpoint <= newest):
        return
    where = store.uri(CHECKPOINT)
    if newest is None:
        raise IntegrityError(
            f"checkpoint {where} names batch {checkpoint}, but there is no manifest in "
            f"{store.uri(MANIFESTS)}",
            hint="the commit records were removed: restore _manifests/ from a backup; read "
            "without them, every committed batch would be left out",
        )
    raise IntegrityError(
        f"checkpoint {where} names batch {checkpoint}, but the last manifest is batch {newest}",
        hint="manifests after it were removed: restore them from a backup; read without "
        "them, the batches they committed would be left out",
    )
