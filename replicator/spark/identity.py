"""Which landing zone an output was built from: an output never goes on from another one.

A landing zone removed and made again at the same path (the demo started over) counts its
batches from 1 again. An output that knew the old one by its path alone would take the new
batch 18 for the old batch 18, keep the old rows and report "unchanged". So each state
(``state.TableState``) records the id of the landing zone it was built from (``landing_id``:
a random id the landing zone got when it was made, carried by its manifests;
``committed.landing_id_of``), and ``check`` stops with an IntegrityError (exit 4) naming both
ids when they differ. A state of this landing zone stops too when it holds batches the
landing zone does not (``check_applied``): one restored from an older backup lands its later
batches again under the same numbers, which would be taken as applied; each state records
the mark of the last batch it applied (``Manifest.mark``).

A state written before landing zones had ids (or by an older materialize) has none: it adopts
the landing zone's id once, and says so, unless it holds batches the landing zone does not
have, which only another landing zone can explain.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..errors import IntegrityError
from ..landed.batches import Landing
from ..landed.contract import table_rel
from ..landed.outputs import check_placed
from ..storage import Store
from .state import TableState

__all__ = ["check", "check_applied", "check_output"]


def _another(problem: str, out: Path) -> IntegrityError:
    return IntegrityError(
        f"{problem}: the output holds rows of another landing zone (was the landing zone "
        "removed and made again at the same path?); nothing was changed",
        hint=f"remove the output directory {out} to build it from this landing zone, or pass "
        "--out another directory",
    )


def check(
    state: TableState, out: Path, root: Path | Store, landing_id: str | None, end: int
) -> str | None:
    """Is ``state`` (a table of the output ``out``) built from the landing zone at ``root``,
    whose manifests carry ``landing_id`` and end at batch ``end``? None: yes, nothing to say;
    a note: it adopts ``landing_id`` now (it was written before ids); IntegrityError: no."""
    if state.landing_id is not None:
        if state.landing_id == landing_id:
            return None
        theirs = landing_id or "(none: its manifests were written before landing zone ids)"
        raise _another(
            f"{state.table} in {out} was built from landing zone {state.landing_id}, but "
            f"{root} is landing zone {theirs}",
            out,
        )
    if state.landing != str(root):
        return None  # built from another path: the options check names it (table_job)
    if state.last_batch > end:
        raise _another(
            f"{state.table} in {out} holds batches up to {state.last_batch} of {root}, but "
            f"that landing zone has {end} committed batches",
            out,
        )
    if landing_id is None:
        return None
    return (
        f"the state now records landing zone {landing_id} (it was built before landing zones "
        "had ids)"
    )


def check_applied(state: TableState, out: Path, landing: Landing, *, refresh: bool) -> None:
    """The batches ``state`` holds are the landing zone's (``Landing.check_applied``): none
    past its end, and the last one the same commit (``state.batch_mark``)."""
    where = str(out / table_rel(state.table))
    landing.check_applied(state.table, where, state.last_batch, state.batch_mark, refresh=refresh)


def check_output(
    states: Iterable[tuple[Path, TableState]],
    out: Path,
    root: Path | Store,
    landing_id: str | None,
    end: int,
    *,
    landing: Landing | None = None,
    refresh: bool = False,
) -> None:
    """``check`` every table of the output before a run changes any of them, and that each
    (but a tombstone) is where its name puts it; with ``landing``, ``check_applied`` too."""
    for link, state in states:
        check(state, out, root, landing_id, end)
        if landing is not None:
            check_applied(state, out, landing, refresh=refresh)
        if state.gone is None:
            rel = link.relative_to(out).as_posix()
            remove = f"remove {rel} and the .{link.name}.v-* beside it"
            check_placed(state.table, rel, remove=remove)
