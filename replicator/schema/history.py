"""The schema history: every version of every table, with the stream position it began at.

It starts from a seed (the catalog read from ``information_schema`` at a known binlog
position, see ``replicator.schema.seed``) and grows by one ``SchemaChange`` per DDL statement
of the binlog, in stream order: the statement, where it was logged, and its effects as the
DDL parser computed them against the catalog of that moment (``replicator.schema.ddl``). The
current catalog is the seed with every change's effects applied, so any earlier state can be
rebuilt by applying fewer of them: ``rewind`` does that when a stream starts from a position
before some recorded changes (a replay after ``checkpoint set``, a reconnect).

Columns added to an existing table get their ``fill`` here: the value the server wrote into
the rows that existed when the column was added (its default then, or the type's implicit
default for a NOT NULL column without one; ``expression`` when the binlog cannot tell, as for
``DEFAULT CURRENT_TIMESTAMP``, AUTO_INCREMENT or generated columns, a FLOAT(M,D) default with
more than D decimals, which the server rounds, and a TIMESTAMP without NULL or DEFAULT unless
the statement ran under ``explicit_defaults_for_timestamp=ON``: OFF makes it NOT NULL DEFAULT
CURRENT_TIMESTAMP or the zero date, and only MySQL logs the setting). Whether a constant is
written as the server stores it for the type is decided where it is converted (``sink.fill``).

The history is written into the landing zone with the batch whose transactions it covers
(``sink.landing``), as the JSON ``to_json`` makes; nothing here does I/O. In a run, one object
owns it and says when it is written (``schema.ledger``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from . import ddl
from .model import Catalog, ColumnDefault, Database, Table

FORMAT = 1
EXPRESSION_FILL = ColumnDefault("expression")
NULL_FILL = ColumnDefault("null")


@dataclass(frozen=True, slots=True)
class Forgotten:
    """A table the history no longer knows: a DDL statement on it could not be understood,
    and it is not replicated (so nothing stopped). Any later use of it stops instead."""

    schema: str
    name: str


@dataclass(frozen=True, slots=True)
class Learned:
    """A table whose columns were not known (``Catalog.unknown``), as a TABLE_MAP with full
    metadata showed it (``schema.learned``). It changes only the history: the table existed
    all along, so the landing zone gets no lifecycle record for it; files written after it
    carry its column ids."""

    table: Table


Effect = ddl.Effect | Forgotten | Learned
_EFFECT_TYPES: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (
        ddl.TableCreated,
        ddl.TableAltered,
        ddl.TableRenamed,
        ddl.TableDropped,
        ddl.TableTruncated,
        ddl.DatabaseCreated,
        ddl.DatabaseAltered,
        ddl.DatabaseDropped,
        ddl.UnknownRenamed,
        ddl.Unrepresentable,
        Forgotten,
        Learned,
    )
}


class RewindError(Exception):
    """The history cannot be rewound to a start (see ``SchemaHistory.rewind``)."""


@dataclass(frozen=True, slots=True)
class Point:
    """Where a change was logged: the QUERY event's binlog file and position, and the GTID of
    its transaction (None without GTIDs)."""

    file: str
    position: int
    gtid: str | None = None

    def describe(self) -> str:
        where = f"{self.file}:{self.position}"
        return f"{where} (gtid {self.gtid})" if self.gtid else where

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "position": self.position, "gtid": self.gtid}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Point:
        return cls(str(data["file"]), int(data["position"]), data.get("gtid"))


@dataclass(frozen=True, slots=True)
class SchemaChange:
    """One DDL statement of the binlog and what it did to the catalog."""

    point: Point
    statement: str
    effects: tuple[Effect, ...]
    seq: int = 0  # the ``_seq`` of its first landing record (0: not landed yet)

    def to_json(self) -> dict[str, Any]:
        return {
            "point": self.point.to_json(),
            "statement": self.statement,
            "seq": self.seq,
            "effects": [effect_to_json(e) for e in self.effects],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SchemaChange:
        return cls(
            point=Point.from_json(data["point"]),
            statement=str(data["statement"]),
            effects=tuple(effect_from_json(e) for e in data["effects"]),
            seq=int(data.get("seq", 0)),
        )


def effect_to_json(effect: Effect) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": type(effect).__name__}
    for f in dataclasses.fields(effect):
        out[f.name] = _value_to_json(getattr(effect, f.name))
    return out


def _value_to_json(value: object) -> object:
    if isinstance(value, (Table, Database)):
        return {"@": type(value).__name__, **value.to_json()}
    if isinstance(value, tuple):
        return [_value_to_json(v) for v in value]
    return value


def effect_from_json(data: dict[str, Any]) -> Effect:
    cls = _EFFECT_TYPES[str(data["kind"])]
    kwargs = {
        f.name: _value_from_json(data[f.name]) for f in dataclasses.fields(cls) if f.name in data
    }
    effect: Effect = cls(**kwargs)
    return effect


def _value_from_json(value: object) -> object:
    if isinstance(value, dict) and value.get("@") == "Table":
        return Table.from_json(value)
    if isinstance(value, dict) and value.get("@") == "Database":
        return Database.from_json(value)
    if isinstance(value, list):
        return tuple(_value_from_json(v) for v in value)
    return value


def apply_effect(catalog: Catalog, effect: Effect) -> Catalog:
    """The catalog after one effect (effects carry whole tables, so this needs no parsing)."""
    if isinstance(effect, Forgotten):
        return catalog.without_table(effect.schema, effect.name)
    if isinstance(effect, Learned):
        return catalog.with_table(effect.table)
    return ddl.apply_ddl_effect(catalog, effect)


def with_fills(effect: Effect, explicit_defaults_for_timestamp: bool | None = None) -> Effect:
    """Give the columns an ALTER TABLE added their ``fill`` (see the module doc);
    ``explicit_defaults_for_timestamp``: the session's setting when the statement ran, when
    its QUERY event tells (MySQL logs it; MariaDB does not: None)."""
    if not isinstance(effect, ddl.TableAltered):
        return effect
    old = {c.id for c in effect.before.columns}
    columns = tuple(
        c
        if c.id in old or c.fill is not None
        else dataclasses.replace(c, fill=fill_of(c, explicit_defaults_for_timestamp))
        for c in effect.after.columns
    )
    if columns == effect.after.columns:
        return effect
    return dataclasses.replace(effect, after=dataclasses.replace(effect.after, columns=columns))


# explicit_defaults_for_timestamp=OFF (MySQL 5.7's and MariaDB's before 10.10 default) makes a
# TIMESTAMP column without NULL or DEFAULT NOT NULL DEFAULT CURRENT_TIMESTAMP (the table's
# first such column) or the zero date, which the binlog does not show
TIMESTAMP_FILL = ColumnDefault(
    "expression", "CURRENT_TIMESTAMP or the zero date (explicit_defaults_for_timestamp=OFF)"
)
_SCALED = re.compile(r"(?:float|double)\(\d+,(\d+)\)")
_NUMBER = re.compile(r"-?(?:\d+(?:\.(\d*))?|\.(\d+))")


def fill_of(column: Any, explicit_defaults_for_timestamp: bool | None = None) -> ColumnDefault:
    """What the server puts into existing rows for a column added now."""
    if column.generated is not None or column.auto_increment:
        return EXPRESSION_FILL  # computed per row: not in the binlog
    default: ColumnDefault = column.default
    timestamp = default.kind == "none" and column.data_type == "timestamp"
    if timestamp and explicit_defaults_for_timestamp is not True:  # ON: like any type
        return TIMESTAMP_FILL
    if default.kind == "value" and not default.hex and _rounded(column, default.text or ""):
        return ColumnDefault("expression", default.text)
    if default.kind == "value" and not default.hex and _beyond_utf8mb3(column, default.text):
        return ColumnDefault("expression", default.text)  # the server stores '?' for them
    if default.kind in ("value", "null", "expression"):
        return default
    return NULL_FILL if column.nullable else ColumnDefault("implicit")


def _beyond_utf8mb3(column: Any, text: str | None) -> bool:
    """A default with a 4-byte character for a utf8mb3 column (which cannot hold one; the
    row metadata of a binlog may not say which of the two utf8 a column is)."""
    narrow = column.charset in ("utf8", "utf8mb3")
    return narrow and any(ord(c) > 0xFFFF for c in text or "")


def _rounded(column: Any, text: str) -> bool:
    """A FLOAT(M,D)/DOUBLE(M,D) default the server rounds to D decimals (only the history
    knows D: a TABLE_MAP does not carry it)."""
    scaled = _SCALED.match(column.column_type)
    if scaled is None:
        return False
    number = _NUMBER.fullmatch(text)
    if number is None:
        return True  # an exponent, or text: not taken as written
    decimals = number.group(1) or number.group(2) or ""
    return len(decimals) > int(scaled.group(1))


@dataclass(slots=True)
class SchemaHistory:
    """The seed and every change since, with the current catalog."""

    seed: Catalog
    seed_point: Point | None  # where the seed was read (None: an empty history)
    changes: list[SchemaChange] = field(default_factory=list)
    # the first stream position the history describes (the start the seed was fitted to), as
    # the checkpoint writes positions; None: the seed point
    valid_from: dict[str, Any] | None = None
    # the tables taken out of the seed because DDL between the start and ``seed_point``
    # changed them, as the server's catalog showed them at ``seed_point``: what a TABLE_MAP
    # cannot tell about a column is taken from here when such a table is learned
    # (``schema.learned``), so a replay learns the same without the server
    seen_later: dict[tuple[str, str], Table] = field(default_factory=dict)
    catalog: Catalog = field(init=False)

    def __post_init__(self) -> None:
        self.catalog = self._replay(self.changes)

    def _replay(self, changes: Iterable[SchemaChange]) -> Catalog:
        catalog = self.seed
        for change in changes:
            for effect in change.effects:
                catalog = apply_effect(catalog, effect)
        return catalog

    def record(
        self, change: SchemaChange, *, explicit_defaults_for_timestamp: bool | None = None
    ) -> SchemaChange:
        """Append a change (its added columns get their fill); returns it as recorded.
        ``explicit_defaults_for_timestamp``: the setting the statement ran under, when known
        (``QueryStatus``)."""
        setting = explicit_defaults_for_timestamp
        effects = tuple(with_fills(e, setting) for e in change.effects)
        change = dataclasses.replace(change, effects=effects)
        for effect in change.effects:
            self.catalog = apply_effect(self.catalog, effect)
        self.changes.append(change)
        return change

    def copy(self) -> SchemaHistory:
        """An independent history with the same seed and changes."""
        return SchemaHistory(
            self.seed, self.seed_point, list(self.changes), self.valid_from, self.seen_later
        )

    def rewind(self, keep: Callable[[Point], bool]) -> int:
        """Drop the changes from the first one ``keep`` rejects on; returns how many went.
        Raises ``RewindError`` when ``keep`` accepts a later one again: a start that is not a
        prefix of the binlog (a GTID state ahead in one domain, behind in another), which
        would drop changes the server does not send again."""
        kept = [keep(change.point) for change in self.changes]
        cut = kept.index(False) if False in kept else len(kept)
        if any(kept[cut:]):
            later = self.changes[cut + kept[cut:].index(True)]
            raise RewindError(
                f"the stream would start before the change at {self.changes[cut].point.describe()}"
                f" but after the one at {later.point.describe()}"
            )
        del self.changes[cut:]
        self.catalog = self._replay(self.changes)
        return len(kept) - cut

    def truncate(self, count: int) -> None:
        """Keep only the first ``count`` changes."""
        if count < len(self.changes):
            del self.changes[count:]
            self.catalog = self._replay(self.changes)

    def versions(
        self, schema: str, name: str
    ) -> Iterator[tuple[SchemaChange | None, Table | None]]:
        """Each version of a table in order: (the change that made it, or None for the seed;
        the table, or None when the change dropped it or renamed it away)."""
        key = self.seed.key(schema, name)
        current = self.seed.tables.get(key)
        if current is not None:
            yield None, current
        catalog = self.seed
        for change in self.changes:
            for effect in change.effects:
                catalog = apply_effect(catalog, effect)
            now = catalog.tables.get(key)
            if now != current or (now is not None and _touches(change, key)):
                yield change, now
            current = now

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "format": FORMAT,
            "seed_point": None if self.seed_point is None else self.seed_point.to_json(),
            "seed": self.seed.to_json(),
            "changes": [c.to_json() for c in self.changes],
            "valid_from": self.valid_from,
        }
        if self.seen_later:
            out["seen_later"] = [t.to_json() for _, t in sorted(self.seen_later.items())]
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SchemaHistory:
        if data.get("format") != FORMAT:
            raise ValueError(f"schema history format {data.get('format')!r} is not {FORMAT}")
        point = data.get("seed_point")
        return cls(
            seed=Catalog.from_json(data["seed"]),
            seed_point=None if point is None else Point.from_json(point),
            changes=[SchemaChange.from_json(c) for c in data.get("changes", ())],
            valid_from=data.get("valid_from"),
            seen_later={
                (t.schema, t.name): t
                for t in (Table.from_json(x) for x in data.get("seen_later", ()))
            },
        )


def resync_change(old: Catalog, new: Catalog, point: Point, statement: str) -> SchemaChange:
    """The change that turns ``old`` (the history's catalog where the binlog it could read
    ends) into ``new`` (the source's catalog read at ``point``), when the binlog between the
    two is gone: every table that is still the same is truncated (a snapshot lands its rows
    again), every other one is dropped and, if it exists now, created again with new column
    ids. No rename can be told from a drop and a create without the binlog, and none needs to
    be: every row is read again."""
    effects: list[ddl.Effect] = []
    next_id = old.next_column_id
    for key, table in sorted(old.tables.items()):
        now = new.tables.get(key)
        if now is not None and _same_columns(table, now):
            effects.append(ddl.TableTruncated(table))
        else:
            effects.append(ddl.TableDropped(table))
    for schema, name in sorted(old.unknown - new.tables.keys()):  # never landed: gone
        effects.append(ddl.TableDropped(Table(schema, name, ())))
    for name, database in sorted(old.databases.items()):
        if name not in new.databases:
            effects.append(ddl.DatabaseDropped(database, ()))  # its tables are dropped above
        elif new.databases[name] != database:
            effects.append(ddl.DatabaseAltered(database, new.databases[name]))
    for name, database in sorted(new.databases.items()):
        if name not in old.databases:
            effects.append(ddl.DatabaseCreated(database))
    for key, table in sorted(new.tables.items()):
        before = old.tables.get(key)
        if before is not None and _same_columns(before, table):
            continue
        columns = tuple(
            dataclasses.replace(c, id=next_id + i, fill=None) for i, c in enumerate(table.columns)
        )
        next_id += len(columns)
        effects.append(ddl.TableCreated(dataclasses.replace(table, columns=columns)))
    return SchemaChange(point, statement, tuple(effects))


def _same_columns(a: Table, b: Table) -> bool:
    """The same table but for column ids and fills (which only the history knows)."""

    def plain(table: Table) -> Table:
        columns = tuple(dataclasses.replace(c, id=0, fill=None) for c in table.columns)
        return dataclasses.replace(table, columns=columns)

    return plain(a) == plain(b)


def _touches(change: SchemaChange, key: tuple[str, str]) -> bool:
    """A change that truncated the table, or re-created it with the same columns."""
    for effect in change.effects:
        tables = [getattr(effect, n, None) for n in ("table", "after", "before")]
        if any(isinstance(t, Table) and (t.schema, t.name) == key for t in tables):
            return True
    return False
