"""Bring one output table up to the landing zone's last batch: unchanged, merged, rebuilt
from scratch, or removed. Shared by ``materialize`` and the streaming helper.

The state records the last landing batch it holds (``state``). What came since decides:

* nothing of the table: the state stays (its ``last_batch`` moves on);
* only row changes under the table's name: they are merged into the state (incremental);
* a lifecycle record naming the table (as ``table`` or as a rename's ``to``), or a replay
  batch (``replay``, ``start_moved``) with files or records of it: the table is rebuilt from
  every manifest (``lineage`` says which rows make it up; ``changes`` reads them, replayed
  copies left out). Simple and exact, and such batches are rare.

Before anything, the state must come from this landing zone (``identity``: the landing zone
ids of the state and of the manifests agree); a state from before ids adopts the id.

A table the lineage says does not exist at the end (dropped, renamed away) has its output
removed (``state.remove``). One that exists without any file yet (created, or dropped and
created again, no rows) is built empty in the columns its create or alter record gives
(``changes.read_lineage``); without such a record (a landing zone written before records
carried schemas) it has no columns to show: no output either (``empty``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pyspark.sql import SparkSession

from ..errors import ConfigError
from ..landed.batches import Landing, why_rebuild
from ..landed.committed import CommittedFile, TableDir
from ..landed.lineage import Ended, Lineage
from ..landed.options import MaterializeOptions, TableResult
from . import identity
from . import state as st
from .changes import read_files, read_lineage
from .merge import Merged, current_state
from .output import read_state, state_schema, write_settings, write_state

__all__ = ["Landing", "run_table"]  # Landing: re-exported for the streaming helper


@dataclass(frozen=True, slots=True)
class _Run:
    landing: Landing
    table: TableDir
    link: Path
    options: MaterializeOptions
    mode: str  # "batch" or "stream"
    stream_batch: int
    stream_query: str | None = None

    def state(self, **changes: object) -> st.TableState:
        base = st.TableState(
            table=self.table.name,
            landing=str(self.landing.root),
            mode=self.mode,
            last_batch=self.landing.end,
            batch_mark=self.landing.mark(self.landing.end),
            stream_batch=self.stream_batch,
            stream_query=self.stream_query,
            last_seq=None,
            key=[],
            keep_metadata=self.options.keep_metadata,
            allow_unknown=self.options.allow_unknown,
            schema="",
            rows=0,
            lineage=True,
            landing_id=self.landing.landing_id,
        )
        return replace(base, **changes)  # type: ignore[arg-type]

    def result(
        self, action: str, files: Sequence[CommittedFile] = (), **fields: object
    ) -> TableResult:
        base = TableResult(
            table=self.table.name,
            path=self.link,
            action=action,
            batches=len({f.batch for f in files}),
            changes=sum(f.rows for f in files),
            rows=0,
            unmatched=0,
            last_batch=self.landing.end,
            waiting=self.landing.waiting,
        )
        return replace(base, **fields)  # type: ignore[arg-type]


def _check(previous: st.TableState, run: _Run) -> None:
    problems = []
    if previous.mode != run.mode:
        problems.append(f"it is written by a {previous.mode} query")
    if previous.landing != str(run.landing.root):
        problems.append(f"it was built from {previous.landing}")
    if previous.keep_metadata != run.options.keep_metadata:
        problems.append(f"it was built with keep_metadata={previous.keep_metadata}")
    if previous.allow_unknown != run.options.allow_unknown:
        problems.append(f"it was built with allow_unknown={previous.allow_unknown}")
    if problems:
        raise ConfigError(
            f"the existing state of {previous.table} does not match this run: "
            + "; ".join(problems),
            hint="use the same options, another --out, or --full-refresh",
        )


def run_table(
    spark: SparkSession,
    landing: Landing,
    out: Path,
    table: TableDir,
    options: MaterializeOptions,
    *,
    mode: str = "batch",
    stream_batch: int = -1,
    stream_query: str | None = None,
) -> TableResult:
    """Bring ``<out>/<db>/<table>`` up to ``landing.end`` (see the module doc)."""
    run = _Run(landing, table, out / table.rel, options, mode, stream_batch, stream_query)
    st.clean(run.link)
    existing = st.load(run.link)
    tombstone = st.load_gone(run.link) if existing is None else None
    before = existing[0] if existing is not None else tombstone
    # an output of another landing zone stops even a full refresh: it may hold tables the
    # new landing zone never had, which a refresh of the others would leave behind
    note = None
    if before is not None:
        note = identity.check(before, out, landing.root, landing.landing_id, landing.end)
        identity.check_applied(before, out, landing, refresh=options.full_refresh)
    if options.full_refresh:
        existing = tombstone = None
    result = _run_table(spark, run, existing, tombstone)
    if note is None:
        return result
    return replace(result, detail=f"{result.detail}; {note}" if result.detail else note)


def _run_table(
    spark: SparkSession,
    run: _Run,
    found: tuple[st.TableState, Path] | None,
    gone: st.TableState | None,
) -> TableResult:
    landing, table, mode, stream_batch = run.landing, run.table, run.mode, run.stream_batch
    if found is not None:
        _check(found[0], run)
    if gone is not None and (gone.mode != mode or gone.landing != str(landing.root)):
        gone = None  # another writer's tombstone: start over
    previous = found[0] if found is not None else gone
    done = 0 if previous is None else previous.last_batch
    new = [m for m in landing.manifests if m.batch > done]
    new_files = [f for m in new for f in m.files if f.table == table.name]
    # a state of an older materialize may miss records in the batches it holds
    why = why_rebuild(
        new if previous is None or previous.lineage else landing.manifests, table.name
    )
    if previous is None or why is not None or (gone is not None and new_files):
        # a first build says "built": it is no rebuild, whatever records its batches hold
        return _rebuild(spark, run, found, "built" if previous is None else why)
    if gone is not None:
        if (
            landing.end > done
            or stream_batch != gone.stream_batch
            or run.stream_query != gone.stream_query
            or gone.landing_id != landing.landing_id
        ):
            st.update_gone(
                run.link,
                replace(
                    gone,
                    last_batch=max(landing.end, done),
                    batch_mark=landing.mark(max(landing.end, done)),
                    stream_batch=stream_batch,
                    stream_query=run.stream_query,
                    landing_id=landing.landing_id,
                ),
            )
        return run.result(gone.gone or "removed", detail=gone.detail)
    assert found is not None
    if not new_files:
        state = replace(
            found[0],
            last_batch=max(landing.end, done),
            batch_mark=landing.mark(max(landing.end, done)),
            stream_batch=stream_batch,
            stream_query=run.stream_query,
            lineage=True,
            landing_id=landing.landing_id,
        )
        if state != found[0]:
            st.update(run.link, state)
        return run.result("unchanged", rows=found[0].rows)
    return _merge(spark, run, found, new_files)


def _merge(
    spark: SparkSession,
    run: _Run,
    found: tuple[st.TableState, Path],
    files: Sequence[CommittedFile],
) -> TableResult:
    """Merge ``files`` (row changes under the table's name only) into the state."""
    previous = found[0]
    read = read_files(
        spark,
        run.table.name,
        files,
        run.options,
        previous_key=tuple(previous.key) if run.table.name not in run.options.keys else None,
        previous_schema=state_schema(previous),
    )
    if list(read.model.key) != previous.key:
        raise ConfigError(
            f"table {run.table.name}: the existing state is keyed by "
            f"({', '.join(previous.key)}), this run by ({', '.join(read.model.key)})",
            hint="rebuild with --full-refresh to change a table's identity columns",
        )
    base = read_state(spark, found, read.model)
    last_seqs = [f.last_seq for f in files if f.last_seq is not None]
    if previous.last_seq is not None:
        last_seqs.append(previous.last_seq)
    return _publish(
        spark,
        run,
        read.model.key,
        current_state(read.model, read.changes, base),
        files,
        "merged",
        max(last_seqs) if last_seqs else None,
        None,
    )


def _rebuild(
    spark: SparkSession,
    run: _Run,
    found: tuple[st.TableState, Path] | None,
    why: str | None,
) -> TableResult:
    """Build the table from every manifest, following its lineage."""
    landing, name = run.landing, run.table.name
    target = landing.table(name)
    if isinstance(target, Ended):
        return _remove(run, found, "removed", target.describe())
    read = read_lineage(spark, target, landing.of(target.tables), landing.rereading, run.options)
    if read is None:
        return _remove(run, found, "empty", _no_rows(target))
    changes, files = read
    last_seqs = [f.last_seq for f in files if f.last_seq is not None]
    detail = None if why == "built" else why
    return _publish(
        spark,
        run,
        changes.model.key,
        current_state(changes.model, changes.changes),
        files,
        "built",
        max(last_seqs) if last_seqs else None,
        detail,
    )


def _no_rows(lineage: Lineage) -> str:
    if lineage.cut is not None:
        return f"no rows since the {lineage.cut.describe()}"
    return "no committed rows yet"


def _remove(
    run: _Run, found: tuple[st.TableState, Path] | None, action: str, detail: str
) -> TableResult:
    """The table has no output: remove an existing one, and remember why (a tombstone; an
    empty table that never had an output needs none)."""
    had = found is not None or os.path.lexists(run.link) or st.load_gone(run.link) is not None
    if action == "empty" and not had:
        return run.result("empty", detail=detail)
    st.remove(run.link, run.state(gone=action, detail=detail))
    return run.result(action, detail=detail)


def _publish(
    spark: SparkSession,
    run: _Run,
    key: Sequence[str],
    merged: Merged,
    files: Sequence[CommittedFile],
    action: str,
    last_seq: int | None,
    detail: str | None,
) -> TableResult:
    unmatched = 0

    def write(directory: Path) -> int:
        nonlocal unmatched
        with write_settings(spark):
            rows, unmatched = write_state(merged, directory)
        return rows

    recorded = st.publish(
        run.link,
        write,
        run.state(
            last_seq=last_seq,
            key=list(key),
            schema=merged.rows.schema.json(),
            detail=detail,
        ),
    )
    return run.result(action, files, rows=recorded.rows, unmatched=unmatched, detail=detail)
