"""The committed batches a materialize run applies, and what they ask of each table."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from ..errors import IntegrityError
from ..storage import LocalStore, Store
from .committed import (
    CommittedFile,
    Manifest,
    TableDir,
    check_landing,
    landing_id_of,
    open_landing,
    read_manifests,
)
from .lineage import Ended, Lineage, Plan, orphans, plan

__all__ = ["Landing", "landing_root", "why_rebuild"]


def landing_root(landing: Path | str | Store) -> Path | Store:
    """A directory (checked, as an absolute path: outputs record it) or an object store."""
    store = open_landing(landing)
    if isinstance(store, LocalStore):
        check_landing(store.root)
        return store.root.resolve()
    return store


@dataclass(frozen=True)
class Landing:
    """The committed batches a run applies (every one, in order, up to ``end``)."""

    root: Path | Store  # a directory, or an object store (storage)
    manifests: tuple[Manifest, ...]
    waiting: int | None = None  # the first committed batch not yet published
    # kept from earlier reads (a long-running follower): the files of older batches may
    # have been compacted since, so whoever reads them reads the manifests again (``current``)
    cached: bool = False
    files: tuple[CommittedFile, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "files", tuple(f for m in self.manifests for f in m.files))

    @classmethod
    def read(cls, root: Path | Store) -> Landing:
        found = read_manifests(root)
        return cls(root, found.manifests, found.waiting)

    def current(self) -> Landing:
        """The same landing zone with its manifests read now (this one when not cached)."""
        return Landing.read(self.root) if self.cached else self

    @property
    def end(self) -> int:
        return self.manifests[-1].batch if self.manifests else 0

    @cached_property
    def landing_id(self) -> str | None:
        """The landing zone's id, as its manifests carry it (None: written before ids)."""
        return landing_id_of(self.manifests)

    @cached_property
    def plan(self) -> Plan:
        return plan(self.manifests)

    @cached_property
    def rereading(self) -> frozenset[int]:
        return frozenset(m.batch for m in self.manifests if m.rereads)

    def table(self, name: str) -> Lineage | Ended:
        """What the landed rows make of table ``name`` at the end (its lineage, or how it
        ended); rows landed under the name where no lineage owns them stop (``orphans``)."""
        orphans(
            self.plan,
            name,
            [f for f in self.files if f.table == name and f.batch not in self.rereading],
        )
        return self.plan.table(name)

    def mark(self, batch: int) -> str | None:
        """The mark of committed batch ``batch`` (``Manifest.mark``; None: none such)."""
        if not self.manifests or not self.manifests[0].batch <= batch <= self.end:
            return None
        found = self.manifests[batch - self.manifests[0].batch]
        return found.mark if found.batch == batch else None

    def check_applied(
        self, table: str, where: str, batch: int, mark: str | None, *, refresh: bool
    ) -> None:
        """Stop (IntegrityError) when the output of ``table`` (``where``) holds batches up to
        ``batch`` that this landing zone does not: it ends before them, or its batch of that
        number is another commit than the one applied (``mark``, as the output recorded it;
        None: recorded by an older materialize, the number alone is checked). A landing zone
        restored from an older backup lands its later batches again under the same numbers,
        which a run would take as applied, their rows left out. ``refresh``: the run rebuilds
        from what the landing zone holds (``--full-refresh``), which is the way out."""
        if refresh:
            return
        now = self.mark(batch)
        if batch > self.end:
            problem = f"but the landing zone {self.root} ends at batch {self.end}"
        elif mark is not None and now is not None and mark != now:
            problem = (
                f"and the landing zone {self.root} holds another batch {batch} (its _seq range "
                "or stream positions differ)"
            )
        else:
            return
        raise IntegrityError(
            f"table {table}: the output {where} holds batches up to {batch}, {problem}: the "
            "landing zone was restored from an older backup, or the output is of another "
            "copy of it; nothing was changed",
            hint="rebuild the output from what the landing zone holds with --full-refresh",
        )

    def of(self, tables: Sequence[str]) -> list[CommittedFile]:
        wanted = set(tables)
        return [f for f in self.files if f.table in wanted]

    def tables(self) -> list[TableDir]:
        """Every table of the landing zone: those its committed files are of, and those its
        lifecycle records name (a table renamed or created without rows has no files). The
        names are the commit records', never read back from directory names."""
        names = {f.table for f in self.files} | set(self.plan.names)
        return [TableDir.named(name) for name in sorted(names)]


def why_rebuild(new: Sequence[Manifest], name: str) -> str | None:
    """Why batches ``new`` call for a rebuild of table ``name`` (None: they do not): a
    lifecycle record names it, or a replay batch touches it."""
    for manifest in new:
        for record in manifest.records:
            if name in (record.table, record.to):
                return f"rebuilt for the {record.describe()}"
        if manifest.rereads and manifest.touches(name):
            return f"rebuilt: batch {manifest.batch} replays transactions"
    return None
