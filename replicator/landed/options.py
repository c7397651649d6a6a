"""What a materialize run (or a stream's micro-batch) is asked to do, and what it reports.

Kept apart from ``materialize`` so that the reading (``changes``), the per-table job
(``table_job``) and the streaming helper share them without importing each other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["MaterializeOptions", "TableResult"]


@dataclass(frozen=True, slots=True)
class MaterializeOptions:
    keep_metadata: bool = False  # keep the latest change's metadata columns per row
    allow_unknown: bool = False  # columns no row image carried: null + ``_absent``, not error
    assume_stable_keys: bool = False  # updates without ``_before_key`` keep their key
    keys: Mapping[str, Sequence[str]] = field(default_factory=dict)  # db.t -> key; () = none
    full_refresh: bool = False  # ignore the existing state, rebuild from every manifest
    # Delta: keyed tables' batches as deletion vectors (None: for tables built from now on)
    deletion_vectors: bool | None = None
    # Spark output: tables brought up to date at once, each by a driver thread of its own
    # that submits that table's jobs (1: one after another; the Delta output takes them in
    # turn whatever this says)
    parallel: int = 4


@dataclass(frozen=True, slots=True)
class TableResult:
    table: str
    path: Path | str  # a directory, or an object store URL (Delta output)
    # "built" (from scratch; also a table without rows, in its record's columns), "merged"
    # (incremental), "unchanged", "empty" (no committed file and no record's schema yet: no
    # columns to show), "removed" (the table does not exist: dropped or renamed away; its
    # output, if any, was removed)
    action: str
    batches: int  # landing batches with changes of this table read now
    changes: int  # row changes read now
    rows: int  # rows in the state
    unmatched: int  # keyless tables: deletes/updates of rows not in the state (ignored)
    last_batch: int  # the state holds every batch up to this one
    waiting: int | None  # first committed batch not yet published (applied next run)
    detail: str | None = None  # why: "dropped at _seq 12", "renamed to db.b at _seq 14", ...
