"""The catalog: databases and tables with every column fact the landing zone needs.

A ``Column`` holds what ``information_schema.COLUMNS`` shows for it (name, base type, full
type text, signedness, lengths, precision, character set and collation, ENUM/SET labels,
nullability, default, generation expression), plus a stable ``id``: a column keeps its id
across renames and type changes (``ALTER TABLE ... CHANGE/MODIFY/RENAME COLUMN``) and a new
column (also one re-added under an old name) gets a new one. Ids are unique in the whole
catalog and never reused (``Catalog.next_column_id``). Spark folds old files into the
newest schema by these ids (they are written as Parquet field ids), which is how a renamed
column carries its values.

The same model is built two ways, which must agree: from ``information_schema`` (the seed of
a schema history; ``replicator.source.schema``) and by applying parsed DDL statements to an
earlier catalog (``replicator.schema.ddl``). Names follow the server: database and table
names compare exactly (``lower_case_table_names=0``; with 1 they are stored lower-cased),
column names compare without case.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

DefaultKind = Literal["none", "null", "value", "expression", "implicit"]

# information_schema DATA_TYPE values that hold text in a character set (and so have
# ``charset``/``collation``); binary strings have the charset "binary" on MySQL and None on
# MariaDB's information_schema, and are normalised to "binary" here.
TEXT_TYPES = frozenset(
    {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set"}
)
BINARY_TYPES = frozenset(
    {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class ColumnDefault:
    """A column's default as the DDL (or information_schema) states it.

    * ``none``: no DEFAULT clause. A nullable column then defaults to NULL; a NOT NULL one
      to its type's implicit default ('' / 0 / the first ENUM label / the zero date), which
      is what the server fills into existing rows when such a column is added.
    * ``null``: DEFAULT NULL.
    * ``value``: a constant. ``text`` is the value as written, unquoted and unescaped
      ('x' -> ``x``, -1.5 -> ``-1.5``, '2020-01-01' -> ``2020-01-01``); a bit or hex
      literal (b'101', x'ff', 0xff) is kept as its bytes in hex with ``hex`` set.
    * ``expression``: anything computed (CURRENT_TIMESTAMP, (uuid()), (a + 1), NOW(6)...):
      ``text`` is its SQL text. Rows written before such a column was added hold a value
      the binlog never shows, so those rows have it as unknown.
    * ``implicit`` (only as a column's ``fill``, never from DDL): the type's implicit default
      of a NOT NULL column added without a DEFAULT.
    """

    kind: DefaultKind = "none"
    text: str | None = None
    hex: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        if self.text is not None:
            out["text"] = self.text
        if self.hex:
            out["hex"] = True
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ColumnDefault:
        return cls(str(data["kind"]), data.get("text"), bool(data.get("hex", False)))  # type: ignore[arg-type]


NO_DEFAULT = ColumnDefault()


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    # information_schema DATA_TYPE, lower case: "int", "varchar", "decimal", "enum", "json"
    # (MySQL), "longtext" (a MariaDB JSON column), "uuid"/"inet4"/"inet6" (MariaDB), ...
    data_type: str
    # information_schema COLUMN_TYPE: "int(10) unsigned", "varchar(40)", "enum('a','b')"
    column_type: str
    unsigned: bool = False
    length: int | None = None  # CHAR/VARCHAR/BINARY/VARBINARY length; BIT width in bits
    precision: int | None = None  # DECIMAL precision
    scale: int | None = None  # DECIMAL scale
    fsp: int | None = None  # TIME/DATETIME/TIMESTAMP fractional seconds precision
    charset: str | None = None  # text types: "utf8mb4", "latin1", ...; binary strings: "binary"
    collation: str | None = None
    labels: tuple[str, ...] | None = None  # ENUM/SET labels, in definition order
    nullable: bool = True
    default: ColumnDefault = NO_DEFAULT
    generated: str | None = None  # generation expression of a VIRTUAL/STORED column
    auto_increment: bool = False
    invisible: bool = False
    id: int = 0  # stable column id within the table (see the module doc)
    # For a column added to an existing table (ALTER TABLE ... ADD): what the server wrote
    # into the rows that existed then, i.e. its default at that moment (``expression`` when
    # that value cannot be known from the binlog). None: the column is as old as its table.
    # Set by the schema history, not by the DDL parser.
    fill: ColumnDefault | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "data_type": self.data_type,
            "column_type": self.column_type,
            "nullable": self.nullable,
        }
        for key in ("unsigned", "auto_increment", "invisible"):
            if getattr(self, key):
                out[key] = True
        for key in ("length", "precision", "scale", "fsp", "charset", "collation", "generated"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.labels is not None:
            out["labels"] = list(self.labels)
        if self.default != NO_DEFAULT:
            out["default"] = self.default.to_json()
        if self.fill is not None:
            out["fill"] = self.fill.to_json()
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Column:
        labels = data.get("labels")
        default = data.get("default")
        fill = data.get("fill")
        return cls(
            name=str(data["name"]),
            data_type=str(data["data_type"]),
            column_type=str(data["column_type"]),
            unsigned=bool(data.get("unsigned", False)),
            length=data.get("length"),
            precision=data.get("precision"),
            scale=data.get("scale"),
            fsp=data.get("fsp"),
            charset=data.get("charset"),
            collation=data.get("collation"),
            labels=None if labels is None else tuple(str(x) for x in labels),
            nullable=bool(data.get("nullable", True)),
            default=NO_DEFAULT if default is None else ColumnDefault.from_json(default),
            generated=data.get("generated"),
            auto_increment=bool(data.get("auto_increment", False)),
            invisible=bool(data.get("invisible", False)),
            id=int(data.get("id", 0)),
            fill=None if fill is None else ColumnDefault.from_json(fill),
        )


@dataclass(frozen=True, slots=True)
class Table:
    schema: str  # the database
    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...] = ()  # column names, in key order
    charset: str | None = None  # the table's default character set (for columns added later)
    collation: str | None = None

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"

    def column(self, name: str) -> Column | None:
        """The column called ``name`` (column names compare without case)."""
        folded = name.casefold()
        return next((c for c in self.columns if c.name.casefold() == folded), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": self.schema,
            "name": self.name,
            "columns": [c.to_json() for c in self.columns],
            "primary_key": list(self.primary_key),
            "charset": self.charset,
            "collation": self.collation,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Table:
        return cls(
            schema=str(data["schema"]),
            name=str(data["name"]),
            columns=tuple(Column.from_json(c) for c in data["columns"]),
            primary_key=tuple(str(x) for x in data.get("primary_key", ())),
            charset=data.get("charset"),
            collation=data.get("collation"),
        )


@dataclass(frozen=True, slots=True)
class Database:
    name: str
    charset: str | None = None  # default character set of tables created in it
    collation: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "charset": self.charset, "collation": self.collation}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Database:
        return cls(str(data["name"]), data.get("charset"), data.get("collation"))


@dataclass(frozen=True, slots=True)
class ServerTraits:
    """Server facts that change how DDL is read (fixed for a source)."""

    flavor: Literal["mariadb", "mysql"] = "mariadb"
    version: tuple[int, int, int] = (10, 11, 0)
    lower_case_table_names: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "flavor": self.flavor,
            "version": list(self.version),
            "lower_case_table_names": self.lower_case_table_names,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ServerTraits:
        major, minor, patch = (int(x) for x in data.get("version", (10, 11, 0)))
        return cls(
            flavor=data.get("flavor", "mariadb"),
            version=(major, minor, patch),
            lower_case_table_names=int(data.get("lower_case_table_names", 0)),
        )


def no_pad(column: Column, traits: ServerTraits | None = None) -> bool:
    """Whether a text column's collation is NO PAD: trailing spaces count when values are
    compared, where a PAD SPACE collation compares them as if the shorter were padded with
    spaces (information_schema.COLLATIONS.PAD_ATTRIBUTE). The NO PAD collations are named
    so: MariaDB's ``*_nopad_*`` (10.2+, and ``uca1400_*_nopad_*``), MySQL 8's ``*_0900_*``
    (https://dev.mysql.com/doc/refman/8.0/en/charset-binary-collations.html#charset-binary-
    collations-trailing-space-comparisons). A column that names no collation has its
    character set's default: NO PAD only for utf8mb4 on MySQL 8 (``utf8mb4_0900_ai_ci``);
    ``traits`` None: the source's flavor is not known, taken as MariaDB's."""
    if column.charset is None or column.charset == "binary":
        return False
    if column.collation is None:
        mysql8 = traits is not None and traits.flavor == "mysql" and traits.version >= (8, 0, 1)
        return mysql8 and column.charset == "utf8mb4"
    name = column.collation.lower()
    return "_nopad_" in name or "_0900_" in name


@dataclass(frozen=True, slots=True)
class Catalog:
    """Every database and table of the source at one point of its binlog (immutable: each
    change makes a new catalog sharing the unchanged tables)."""

    traits: ServerTraits = field(default_factory=ServerTraits)
    databases: dict[str, Database] = field(default_factory=dict)
    tables: dict[tuple[str, str], Table] = field(default_factory=dict)
    # The id the next new column gets. Column ids are unique in the whole catalog and never
    # reused (a table created again, or another table renamed into a name, gets ids of its
    # own), so files of unrelated tables that end up under one name never share an id.
    next_column_id: int = 1
    # Tables that exist here but whose columns are not known: a stream started before DDL
    # that changed them, with the seed read after it (``source.seeding``). DDL moves or drops
    # the names; their columns are learned from a TABLE_MAP with full metadata
    # (``schema.learned``), which makes them ordinary tables.
    unknown: frozenset[tuple[str, str]] = frozenset()

    def table(self, schema: str, name: str) -> Table | None:
        return self.tables.get(self.key(schema, name))

    def key(self, schema: str, name: str) -> tuple[str, str]:
        """How the server stores a table's name (lower-cased with lower_case_table_names)."""
        if self.traits.lower_case_table_names:
            return schema.lower(), name.lower()
        return schema, name

    def is_unknown(self, schema: str, name: str) -> bool:
        """A table that exists here with columns not known (see ``unknown``)."""
        return bool(self.unknown) and self.key(schema, name) in self.unknown

    def with_table(self, table: Table) -> Catalog:
        tables = dict(self.tables)
        key = (table.schema, table.name)
        tables[key] = table
        top = max((c.id for c in table.columns), default=0)
        return replace(
            self,
            tables=tables,
            next_column_id=max(self.next_column_id, top + 1),
            unknown=self.unknown - {key},
        )

    def numbered(self) -> Catalog:
        """The catalog with its columns numbered 1..n across all tables (for a seed)."""
        tables: dict[tuple[str, str], Table] = {}
        next_id = 1
        for key, table in sorted(self.tables.items()):
            columns = tuple(replace(c, id=next_id + i) for i, c in enumerate(table.columns))
            next_id += len(columns)
            tables[key] = replace(table, columns=columns)
        return replace(self, tables=tables, next_column_id=next_id)

    def without_table(self, schema: str, name: str) -> Catalog:
        tables = dict(self.tables)
        key = self.key(schema, name)
        tables.pop(key, None)
        return replace(self, tables=tables, unknown=self.unknown - {key})

    def with_unknown_renamed(self, before: tuple[str, str], after: tuple[str, str]) -> Catalog:
        """A table whose columns are not known renamed: it stays unknown under ``after``."""
        moved = (self.unknown - {self.key(*before)}) | {self.key(*after)}
        return replace(self, unknown=moved)

    def with_database(self, database: Database) -> Catalog:
        databases = dict(self.databases)
        databases[database.name] = database
        return replace(self, databases=databases)

    def without_database(self, name: str) -> Catalog:
        databases = {k: v for k, v in self.databases.items() if k != name}
        tables = {k: v for k, v in self.tables.items() if k[0] != name}
        unknown = frozenset(k for k in self.unknown if k[0] != name)
        return replace(self, databases=databases, tables=tables, unknown=unknown)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "traits": self.traits.to_json(),
            "databases": [d.to_json() for _, d in sorted(self.databases.items())],
            "tables": [t.to_json() for _, t in sorted(self.tables.items())],
            "next_column_id": self.next_column_id,
        }
        if self.unknown:
            out["unknown"] = [list(key) for key in sorted(self.unknown)]
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Catalog:
        databases = [Database.from_json(d) for d in data.get("databases", ())]
        tables = [Table.from_json(t) for t in data.get("tables", ())]
        top = max((c.id for t in tables for c in t.columns), default=0)
        return cls(
            traits=ServerTraits.from_json(data.get("traits", {})),
            databases={d.name: d for d in databases},
            tables={(t.schema, t.name): t for t in tables},
            next_column_id=max(int(data.get("next_column_id", 1)), top + 1),
            unknown=frozenset((str(db), str(t)) for db, t in data.get("unknown", ())),
        )
