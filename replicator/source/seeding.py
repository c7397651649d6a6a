"""Seeding a schema history from the source: its catalog, and the binlog position it holds at.

``information_schema`` shows the tables as they are now, while the stream may start earlier.
A seed is only worth something with the exact binlog position it describes, so it is read
between two readings of the binlog's end, ``e1`` and ``e2``: when no DDL statement was logged
between them (the DDL in ``e1..e2`` is scanned from the binlog itself), the catalog holds at
``e1``. Otherwise it is read again.

When the stream starts before ``e1`` (a configured start position, or an existing landing
zone written before schema histories existed), the DDL of ``start..e1`` is scanned too: a
table that one of those statements touched is taken out of the seed, because its columns at
``start`` are not what the catalog shows now. A table the range created simply did not exist
yet; any other stays in the history as a table whose columns are not known
(``Catalog.unknown``): DDL on it only moves or drops its name, and its columns are learned
from its first TABLE_MAP that logs them (``binlog_row_metadata=FULL``; ``schema.learned``,
which takes the column types a TABLE_MAP cannot show from the catalog read here, kept as
``SchemaHistory.seen_later``). Its first rows without full metadata stop the stream.

For a start given as a file and position on MariaDB, the GTID state there is looked up
(``BINLOG_GTID_POS``), so the checkpoint carries GTIDs from the first batch on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, replace

import pymysql
import structlog

from ..binlog import events as ev
from ..binlog.position import StreamPosition, is_past, position_reached
from ..binlog.transaction import Transaction, TransactionPart
from ..checkpoint import position_to_json
from ..config import SourceConfig
from ..errors import IntegrityError
from ..schema import ddl
from ..schema.history import Point, SchemaHistory
from ..schema.model import Catalog, Table
from ..schema.tracker import SchemaTracker, context_of, may_change_tables
from .catalog import read_catalog, read_traits
from .connection import open_connection
from .errors import SourceUnavailableError
from .server_info import mariadb_gtid_at, server_info
from .stream import ReplicaStream, server_facts

log = structlog.get_logger("replicator")
ATTEMPTS = 5


@dataclass(frozen=True, slots=True)
class Seed:
    history: SchemaHistory
    start: StreamPosition  # where the stream begins (the configured start, or e1 for "now")
    unknown: tuple[tuple[str, str], ...]  # tables whose columns at ``start`` are not known


async def seed_history(
    cfg: SourceConfig, start: StreamPosition | None, *, report_host: str = "replicator"
) -> Seed:
    """Read the catalog at a known position and fit it to ``start`` (None: "now").
    ``report_host``: the name the DDL scans register with as a replica."""
    conn = open_connection(cfg)
    try:
        traits = read_traits(conn)
        for _ in range(ATTEMPTS):
            e1 = server_facts(server_info(conn)).end
            catalog = read_catalog(conn, traits)
            e2 = server_facts(server_info(conn)).end
            if e1 == e2 or not await scan_ddl(cfg, e1, e2, report_host=report_host):
                break
        else:
            raise SourceUnavailableError(
                f"the source's tables changed each of the {ATTEMPTS} times they were read",
                hint="start again when fewer DDL statements run on the source",
            )
        if start is None:
            start = e1
        elif not start.has_gtid and start.file and traits.flavor == "mariadb":
            found = mariadb_gtid_at(conn, start.file, start.position)
            if found is not None:  # else not at a group start the server knows: file/position
                start = replace(start, mariadb_gtid=found)
    finally:
        with contextlib.suppress(pymysql.err.Error):
            conn.close()
    unknown: tuple[tuple[str, str], ...] = ()
    seen_later: dict[tuple[str, str], Table] = {}
    if _before(start, e1):
        scanned = await scan_ddl(cfg, start, e1, report_host=report_host)
        now = catalog
        catalog, unknown = fit_to_start(catalog, scanned)
        seen_later = {k: t for k, t in now.tables.items() if k not in catalog.tables}
    point = Point(e1.file, e1.position, None)
    log.info(
        "schema history seeded",
        tables=len(catalog.tables),
        at=e1.describe(),
        start=start.describe(),
        unknown_at_start=[f"{db}.{t}" for db, t in unknown] or None,
    )
    history = SchemaHistory(
        catalog, point, valid_from=position_to_json(start), seen_later=seen_later
    )
    return Seed(history, start, unknown)


async def apply_skipped_ddl(
    cfg: SourceConfig,
    history: SchemaHistory,
    end: StreamPosition,
    start: StreamPosition,
    replicated: Callable[[str, str], bool],
    *,
    report_host: str = "replicator",
) -> int:
    """``checkpoint set`` moved the stream forward from ``end`` (where the last batch, and so
    the history, ended) to ``start``: the DDL of the range it skips is read from the binlog
    and applied, so the history holds at ``start``. Returns how many changes it recorded."""
    conn = open_connection(cfg)
    try:
        now = server_facts(server_info(conn)).end
    finally:
        with contextlib.suppress(pymysql.err.Error):
            conn.close()
    if not is_past(now, start):  # the scan would wait for transactions never written
        raise IntegrityError(
            f"the checkpoint's position {start.describe()} is past the end of the source's "
            f"binlog ({now.describe()})",
            hint="`replicator checkpoint set` to a position the source has written",
        )
    tracker = SchemaTracker(history, replicated, skipping=True)
    before = len(history.changes)
    for point, event in await scan_ddl(cfg, end, start, report_host=report_host):
        tracker.apply(event, point.gtid)
    applied = len(history.changes) - before
    log.info(
        "schema history advanced over a skipped range",
        changes=applied,
        start=end.describe(),
        end=start.describe(),
    )
    return applied


def _before(start: StreamPosition, end: StreamPosition) -> bool:
    """True when ``start`` is before ``end`` (by GTID state when both have one)."""
    if start.mariadb_gtid is not None and end.mariadb_gtid is not None:
        return not all(start.mariadb_gtid.contains(g) for g in end.mariadb_gtid)
    if start.mysql_gtid is not None and end.mysql_gtid is not None:
        return not start.mysql_gtid.issuperset(end.mysql_gtid)
    return not position_reached(start.file, start.position, end.file, end.position)


async def scan_ddl(
    cfg: SourceConfig,
    start: StreamPosition,
    end: StreamPosition,
    *,
    report_host: str = "replicator",
) -> list[tuple[Point, ev.QueryEvent]]:
    """Every statement that may change a table, logged from ``start`` to ``end``."""
    found: list[tuple[Point, ev.QueryEvent]] = []
    # rows events are framed and CRC32-checked but their rows are not decoded: the scan
    # reads statements only, and the stream decodes the same range again anyway
    stream = ReplicaStream(
        cfg,
        start,
        stop_at_end=True,
        end=end,
        name="ddl-scan",
        report_host=report_host,
        statements_only=True,
    )
    async with stream:
        async for item in stream:
            if not isinstance(item, (Transaction, TransactionPart)):
                continue
            for event in item.events:
                if isinstance(event, ev.QueryEvent) and may_change_tables(event):
                    found.append((Point(event.file, event.position, item.gtid), event))
    log.debug(
        "ddl scan",
        start=start.describe(),
        end=end.describe(),
        transactions=stream.stats.transactions,
        passed_over=stream.stats.transactions_passed_over,
        statements=len(found),
    )
    return found


def fit_to_start(
    catalog: Catalog, statements: list[tuple[Point, ev.QueryEvent]]
) -> tuple[Catalog, tuple[tuple[str, str], ...]]:
    """The seed as of the start of ``statements``: every table they touch is taken out.
    Returns it with the tables whose columns at the start are unknown (touched first by
    something other than their creation), which it lists as ``unknown``."""
    work = Catalog(traits=catalog.traits, databases=dict(catalog.databases))
    seen: set[tuple[str, str]] = set()
    unknown: list[tuple[str, str]] = []
    redefined: set[str] = set()  # databases whose default charset changed in the range

    def touch(key: tuple[str, str], created: bool) -> None:
        if key not in seen:
            seen.add(key)
            if not created:
                unknown.append(key)

    for _, event in statements:
        try:
            work, effects = ddl.apply_ddl(work, event.query, context_of(event))
        except ddl.DdlError as exc:
            for key in exc.tables or ():
                touch(catalog.key(*key), created=False)
            continue
        for effect in effects:
            for key, created in _touched(effect, catalog):
                touch(key, created)
            if isinstance(effect, (ddl.DatabaseAltered, ddl.DatabaseDropped)):
                redefined.add(
                    effect.after.name
                    if isinstance(effect, ddl.DatabaseAltered)
                    else effect.database.name
                )
    tables = {k: t for k, t in catalog.tables.items() if k not in seen}
    # a database whose default charset changed in the range had another one at the start,
    # which the catalog no longer shows: unknown (a CREATE TABLE needing it stops)
    databases = {
        name: replace(db, charset=None, collation=None) if name in redefined else db
        for name, db in catalog.databases.items()
    }
    fitted = replace(catalog, tables=tables, databases=databases, unknown=frozenset(unknown))
    return fitted, tuple(unknown)


def _touched(effect: object, catalog: Catalog) -> list[tuple[tuple[str, str], bool]]:
    if isinstance(effect, ddl.TableCreated):
        return [((effect.table.schema, effect.table.name), True)]
    if isinstance(effect, ddl.DatabaseDropped):
        name = effect.database.name
        return [(key, False) for key in catalog.tables if key[0] == name]
    if isinstance(effect, ddl.TableRenamed):  # a rename's target did not exist before it
        before, after = effect.before, effect.after
        return [((before.schema, before.name), False), ((after.schema, after.name), True)]
    out = []
    for attribute in ("table", "before", "after"):
        table = getattr(effect, attribute, None)
        if table is not None and hasattr(table, "columns"):
            out.append(((table.schema, table.name), False))
    return out
