"""The decoder's view of the schema: the history's catalog as of the event being decoded.

The reader thread decodes events in binlog order. ``SchemaTracker`` sits beside the decoder:
it answers the decoder's TABLE_MAP lookups from the schema history's current catalog (an
``exact`` lookup: the columns as of this point of the binlog, cross-checked with the names a
TABLE_MAP logs), and it applies each DDL statement as its QUERY event is decoded, before the
next event is decoded, so the rows events after an ALTER are read with the altered columns
(also inside one transaction, as MySQL 8.0.21+ logs ``CREATE TABLE ... SELECT``).

A QUERY event whose statement changed the catalog comes out as a ``SchemaChangeEvent`` (the
same event, carrying the recorded ``SchemaChange``); the pipeline turns its effects into
landing records and records the change in the run's schema history, which its owner
(``schema.ledger.SchemaLedger``) writes with the batch that holds it. The history here is a
view that owner handed out when the stream started (``reader_view``): the reader thread runs
ahead of the pipeline, and the owner's module doc says why the two are kept apart.

The reader resumes after the last transaction it handed over when a connection breaks, so the
tracker keeps a mark there (``mark``) and forgets what it applied after it (``rewind``): no
transaction the pipeline took whole holds them (a large transaction's parts that did are
aborted, ``TransactionAborted``, and the owner rolls them back too).

A table whose columns are not known at the stream's start (``Catalog.unknown``: the history
was seeded after DDL that changed it) is learned from its first TABLE_MAP that logs full
metadata (``learn``, called by the decoder; ``schema.learned``): the definition is recorded
as a history-only change that the TABLE_MAP event carries to the pipeline
(``TableLearnedEvent``), and the TABLE_MAP is decoded again with it. Without full metadata
the stream stops there. DDL on such a table before then keeps it unknown (``schema.ddl``).

A statement it cannot apply exactly stops the stream (``IntegrityError`` naming the statement
and its position) when it touches a replicated table, or when the tables it touches cannot be
told; on tables that are not replicated the history forgets those tables instead.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence

import structlog

from ..binlog import events as ev
from ..binlog.charsets import charset_for_collation
from ..binlog.parser import query_status
from ..binlog.records import record
from ..binlog.schema import ColumnSchema, TableSchema
from ..binlog.tablemap import TableMapBody
from ..errors import IntegrityError
from . import ddl
from .history import Effect, Forgotten, Learned, Point, SchemaChange, SchemaHistory
from .learned import has_full_metadata, learned_table
from .model import Column, Table

Replicated = Callable[[str, str], bool]
log = structlog.get_logger("replicator")

# statements that never change a table, skipped without parsing (transaction control)
_NOT_DDL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE", "XA ")


def may_change_tables(event: ev.QueryEvent) -> bool:
    """A QUERY event worth parsing as DDL: it succeeded and is not transaction control."""
    statement = event.query.lstrip(" \t\r\n(").upper()
    return not event.error_code and not statement.startswith(_NOT_DDL)


_TEXT_FORMS = frozenset({"uuid", "inet4", "inet6"})


@record
class SchemaChangeEvent(ev.QueryEvent):
    """A QUERY event whose DDL statement changed the catalog, with the recorded change."""

    change: SchemaChange


@record
class TableLearnedEvent(ev.TableMapEvent):
    """The TABLE_MAP a table unknown at the stream's start was learned from, with the
    recorded change (one ``Learned`` effect, no lifecycle record)."""

    change: SchemaChange


def table_schema(table: Table) -> TableSchema:
    """A history table as the decoder's ``TableSchema`` (``exact``)."""
    key = {c.casefold() for c in table.primary_key}
    return TableSchema(
        table.schema,
        table.name,
        tuple(_column_schema(c, c.name.casefold() in key) for c in table.columns),
        exact=True,
        key=tuple(table.primary_key),
    )


def _column_schema(column: Column, primary: bool) -> ColumnSchema:
    labels = column.labels
    return ColumnSchema(
        name=column.name,
        data_type=column.data_type,
        unsigned=column.unsigned,
        charset=column.charset,
        enum_values=labels if column.data_type == "enum" else None,
        set_values=labels if column.data_type == "set" else None,
        primary_key=primary,
        precision=column.fsp,
        column_id=column.id,
        text_form=column.data_type if column.data_type in _TEXT_FORMS else None,
        fill=None if column.fill is None else json.dumps(column.fill.to_json(), sort_keys=True),
    )


class SchemaTracker:
    """A ``SchemaLookup`` from the schema history, advanced by the DDL it decodes."""

    exact = True  # the lookups describe the table at the event being decoded

    def __init__(
        self, history: SchemaHistory, replicated: Replicated, *, skipping: bool = False
    ) -> None:
        self.history = history
        self.replicated = replicated
        # applying the DDL of a range `checkpoint set` skipped: a statement that rewrote rows
        # unlogged is the one the user chose to skip, so it is logged, not a stop
        self.skipping = skipping
        self.generation = 0  # bumped at every change: decodes cached before are stale
        self._mark = len(history.changes)
        self._gtid: str | None = None
        self._cache: dict[tuple[str, str], TableSchema | None] = {}
        # changes ``learn`` recorded while a TABLE_MAP was decoded, in decoding order, until
        # that event comes through ``on_event``
        self._learned: list[SchemaChange] = []

    def __call__(self, schema: str, table: str) -> TableSchema | None:
        key = (schema, table)
        found = self._cache.get(key, self)
        if found is self:
            known = self.history.catalog.table(schema, table)
            found = None if known is None else table_schema(known)
            self._cache[key] = found
        assert not isinstance(found, SchemaTracker)
        return found

    def learn(self, table_map: TableMapBody, file: str, position: int) -> bool:
        """The decoder found no table for ``table_map``: when it is a replicated table whose
        columns are not known (see the module doc), record them from the event and return
        True (the event is decoded again); a TABLE_MAP without names stops the stream."""
        schema, name = table_map.schema, table_map.table
        if not self.history.catalog.is_unknown(schema, name) or not self.replicated(schema, name):
            return False
        point = Point(file, position, self._gtid)
        qualified = f"{schema}.{name}"
        if not has_full_metadata(table_map.columns):
            seeded = self.history.seed_point
            read_at = "" if seeded is None else f" at {seeded.describe()}"
            raise IntegrityError(
                f"rows of {qualified} at {point.describe()}, whose columns at this position are "
                f"not known: the schema history was read from the server's catalog{read_at}, "
                f"and {qualified} changed between the stream's start and there, so its "
                "columns at the start could not be taken from it; the binlog does not log "
                "their names here (binlog_row_metadata is not FULL), so they cannot be "
                "learned from it either",
                hint="start the landing zone at a position after the statement that changed "
                "the table (start.gtid), or start it now with a snapshot of the tables (no "
                "start position: snapshot.mode: initial), or leave the table out "
                "(filters.exclude); with binlog_row_metadata=FULL on the source, binlog "
                "written from then on can be started at any position",
            )
        catalog = self.history.catalog
        key = catalog.key(schema, name)
        table = learned_table(
            *key,
            table_map.columns,
            table_map.primary_key,
            first_id=catalog.next_column_id,
            seen_later=self.history.seen_later.get(key),
            at=point.describe(),
        )
        statement = f"-- {qualified} learned from its TABLE_MAP (binlog_row_metadata=FULL)"
        change = self.history.record(SchemaChange(point, statement, (Learned(table),)))
        self._learned.append(change)
        self._changed()
        log.info(
            "learned a table unknown at the start from its TABLE_MAP",
            table=qualified,
            at=point.describe(),
            columns=[c.name for c in table.columns],
        )
        return True

    def mark(self) -> None:
        """A transaction was handed over: the changes so far are final."""
        self._mark = len(self.history.changes)

    def rewind(self) -> None:
        """The stream resumes at the mark: forget the changes applied after it."""
        self._back_to_mark()
        self._gtid = None

    def discard_open(self, current: ev.Event) -> None:
        """The assembler dropped an incomplete group (no XID/COMMIT came): forget the DDL it
        applied since the mark. ``current`` is the event that made the drop; when it is a DDL
        statement itself, it was applied on top of the dropped group's and cannot be told
        apart safely, so the stream stops."""
        if isinstance(current, SchemaChangeEvent):
            raise IntegrityError(
                f"an incomplete transaction was dropped at {current.file}:{current.position}, "
                "where a DDL statement begins: the schema history cannot be rebuilt exactly",
                hint="start replicator again (it resumes after the last complete transaction)",
            )
        self._back_to_mark()

    def _back_to_mark(self) -> None:
        if len(self.history.changes) > self._mark:
            self.history.truncate(self._mark)
            self._changed()
        self._learned.clear()

    def _changed(self) -> None:
        self.generation += 1
        self._cache.clear()

    def apply(self, event: ev.QueryEvent, gtid: str | None) -> ev.Event:
        """A QUERY event of transaction ``gtid`` read apart from the stream (a DDL scan)."""
        self._gtid = gtid
        return self.on_event(event)

    def on_event(self, event: ev.Event) -> ev.Event:
        """Follow one decoded event; a DDL QUERY comes back as a ``SchemaChangeEvent``."""
        kind = type(event)
        if kind is ev.TableMapEvent and self._learned:
            return self._learned_from(event)  # type: ignore[arg-type]
        if kind is ev.RowsEvent or kind is ev.TableMapEvent:  # most events: nothing to follow
            return event
        if isinstance(event, ev.MariadbGtidEvent):
            self._gtid = str(event.gtid)
        elif isinstance(event, ev.MysqlGtidEvent):
            self._gtid = event.gtid
        elif isinstance(event, ev.QueryEvent):
            return self._query(event)
        elif isinstance(event, ev.TransactionPayloadEvent):
            inner = tuple(self.on_event(e) for e in event.events)
            if any(a is not b for a, b in zip(inner, event.events, strict=True)):
                return dataclasses.replace(event, events=inner)
        return event

    def _learned_from(self, event: ev.TableMapEvent) -> ev.Event:
        """The TABLE_MAP ``learn`` recorded a change for comes out carrying it (the events
        of a transaction payload are all decoded before the first comes through here)."""
        key = self.history.catalog.key(event.schema, event.table)
        for i, change in enumerate(self._learned):
            (effect,) = change.effects
            assert isinstance(effect, Learned)
            point = change.point
            if (point.file, point.position) == (event.file, event.position) and key == (
                effect.table.schema,
                effect.table.name,
            ):
                del self._learned[i]
                fields = {
                    f.name: getattr(event, f.name) for f in dataclasses.fields(ev.TableMapEvent)
                }
                return TableLearnedEvent(**fields, change=change)
        return event

    def _query(self, event: ev.QueryEvent) -> ev.Event:
        if not may_change_tables(event):
            return event
        context = context_of(event)
        point = Point(event.file, event.position, self._gtid)
        effects: Sequence[Effect]
        try:
            _, effects = ddl.apply_ddl(self.history.catalog, event.query, context)
        except ddl.DdlError as exc:
            effects = self._not_understood(exc, point, event.query)
        if not effects:
            return event
        for effect in effects:
            if isinstance(effect, ddl.Unrepresentable) and self.replicated(
                effect.table.schema, effect.table.name
            ):
                if self.skipping:
                    log.warning(
                        "skipped a statement that rewrote rows unlogged",
                        table=effect.table.qualified,
                        at=point.describe(),
                        reason=effect.reason,
                        statement=shown(event.query),
                    )
                    continue
                raise IntegrityError(
                    f"{effect.table.qualified} at {point.describe()}: {effect.reason}: "
                    f"{shown(event.query)!r}",
                    hint="the statement changed rows without logging them, so the landing "
                    "zone cannot follow it exactly: move the checkpoint past this statement "
                    "with `replicator checkpoint set`, then read the table again with "
                    f"`replicator snapshot --tables '{effect.table.qualified}'`",
                )
        change = self.history.record(
            SchemaChange(point, event.query, tuple(effects)),
            # MySQL logs the setting (a TIMESTAMP added without NULL or DEFAULT fills the
            # time of the ALTER under OFF); MariaDB does not: its fill is then unknown
            explicit_defaults_for_timestamp=query_status(
                event.status_vars
            ).explicit_defaults_for_timestamp,
        )
        self._changed()
        fields = {f.name: getattr(event, f.name) for f in dataclasses.fields(ev.QueryEvent)}
        return SchemaChangeEvent(**fields, change=change)

    def _not_understood(self, exc: ddl.DdlError, point: Point, statement: str) -> list[Forgotten]:
        """A statement the parser refused: stop if it may touch a replicated table, else
        forget the (unreplicated) tables it names."""
        tables = exc.tables
        catalog = self.history.catalog
        if (
            isinstance(exc, ddl.UnknownTableError)
            and self.replicated(*exc.table)
            and self.history.seed_point is not None
        ):
            # not a statement the parser failed on: a table whose columns at the stream's
            # start were never known (it changed between the start and the seed)
            names = f"{exc.table[0]}.{exc.table[1]}"
            seeded = self.history.seed_point.describe()
            raise IntegrityError(
                f"DDL statement at {point.describe()} changes {names}, whose columns at this "
                f"position are not known: the schema history was read from the server's "
                f"catalog at {seeded}, and {names} changed between the stream's start and "
                f"there, so its columns at the start could not be taken from it: "
                f"{shown(statement)!r}",
                hint="start the landing zone at a position after this statement (start.gtid), "
                "or start it now with a snapshot of the tables (no start position: "
                "snapshot.mode: initial), or leave the table out (filters.exclude)",
            ) from exc
        if tables is None or any(self.replicated(db, t) for db, t in tables):
            raise IntegrityError(
                f"DDL statement at {point.describe()} cannot be applied to the schema "
                f"history: {exc}: {shown(statement)!r}",
                hint="replicator does not guess a table's columns: report the statement; to "
                "go on, start a new landing zone after this position (its history is then "
                "read from the server), or exclude the table with filters.exclude",
            ) from exc
        return [Forgotten(db, t) for db, t in tables if catalog.table(db, t) is not None]


# sql_mode bits (MySQL/MariaDB ``MODE_STRICT_TRANS_TABLES``, ``MODE_STRICT_ALL_TABLES``,
# ``MODE_NO_BACKSLASH_ESCAPES``)
_STRICT = (1 << 21) | (1 << 22)
_NO_BACKSLASH_ESCAPES = 1 << 20


def context_of(event: ev.QueryEvent) -> ddl.Context:
    """What the DDL parser needs from a QUERY event besides the statement."""
    status = query_status(event.status_vars)
    server = status.collation_server
    return ddl.Context(
        default_db=event.schema or None,
        ansi_quotes=status.ansi_quotes,
        server_charset=None if server is None else charset_for_collation(server),
        strict=bool((status.sql_mode or 0) & _STRICT),
        no_backslash_escapes=bool((status.sql_mode or 0) & _NO_BACKSLASH_ESCAPES),
    )


def shown(statement: str) -> str:
    """A statement for a message: white space folded, at most 200 characters."""
    text = " ".join(statement.split())
    return text if len(text) <= 200 else text[:197] + "..."
