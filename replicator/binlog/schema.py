"""What a row decoder needs to know about each column of a table.

A ``ColumnDef`` joins three sources, resolved once per TABLE_MAP: the column type and metadata
the TABLE_MAP event carries (``log_event.cc``, ``Table_map_log_event::save_field_metadata``),
its optional metadata (names, signedness, charsets, ENUM/SET labels; ``binlog_row_metadata``),
and, when the server did not log those, a ``TableSchema`` the caller looked up
(information_schema).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ColumnDef:
    """One column as the row decoder sees it.

    ``type`` is the binlog type code after resolving MYSQL_TYPE_STRING's metadata into its real
    type (ENUM, SET or STRING). ``meta`` is the per-type metadata as one integer, laid out as
    the server's ``table_def`` does:

    * FLOAT/DOUBLE/BLOB/GEOMETRY/JSON/VECTOR: the length-prefix size in bytes (1 byte meta)
    * VARCHAR/VAR_STRING: maximum length in bytes (little-endian 2 bytes)
    * NEWDECIMAL: ``precision << 8 | scale``
    * BIT: ``bytes << 8 | bits`` (whole bytes, then the leftover bits)
    * STRING/ENUM/SET: ``real_type << 8 | low byte`` exactly as logged (big-endian 2 bytes);
      use ``string_length`` for CHAR(n) columns, ``meta & 0xff`` is the pack length of ENUM/SET
    * TIMESTAMP2/DATETIME2/TIME2: fractional seconds precision 0-6
    * TIMESTAMP/DATETIME/TIME from MariaDB: fractional seconds precision (0 = classic format)
    """

    index: int
    type: int
    meta: int
    nullable: bool = True
    name: str | None = None
    unsigned: bool = False
    # Python codec for text ("utf-8", "cp1252", "utf-16-be", ...), "binary" for bytes,
    # or None when unknown (then text columns decode to bytes).
    charset: str | None = None
    collation_id: int | None = None
    enum_values: tuple[str, ...] | None = None
    set_values: tuple[str, ...] | None = None
    geometry_type: int | None = None
    vector_dimensions: int | None = None
    visible: bool = True
    # from a schema history (``replicator.schema``), when the caller keeps one:
    column_id: int | None = None  # stable across renames; written as the Parquet field id
    text_form: str | None = None  # "uuid", "inet4", "inet6": bytes logged, text landed
    fill: str | None = None  # JSON: the value rows older than the column hold (see history)
    # a MariaDB long UNIQUE hash field (``DB_ROW_HASH_<n>``, see ``tablemap``): decoded to keep
    # the row images aligned, never landed (a server internal, derived from other columns)
    long_unique_hash: bool = False

    @property
    def real_type(self) -> int:
        """The type with an unresolved STRING (ENUM/SET in its metadata) resolved, as the row
        decoder resolves it (``columns._string``)."""
        if self.type == 254 and (self.meta >> 8) in (247, 248):  # STRING; ENUM, SET
            return self.meta >> 8
        return self.type

    @property
    def string_length(self) -> int:
        """Maximum byte length of a CHAR(n) column from its STRING metadata.

        Lengths above 255 steal two bits of the type byte
        (``Field_string::do_save_field_metadata``).
        """
        return (((self.meta >> 4) & 0x300) ^ 0x300) + (self.meta & 0xFF)

    @property
    def bit_width(self) -> int:
        """BIT(n)'s n from its ``bytes << 8 | bits`` metadata."""
        return (self.meta >> 8) * 8 + (self.meta & 0xFF)


@dataclass(frozen=True, slots=True)
class ColumnSchema:
    """A column as information_schema describes it (supplied by the caller)."""

    name: str
    data_type: str  # information_schema.COLUMNS.DATA_TYPE, lower case ("int", "enum", ...)
    unsigned: bool = False
    charset: str | None = None  # server charset name ("utf8mb4", "latin1", "binary")
    enum_values: tuple[str, ...] | None = None
    set_values: tuple[str, ...] | None = None
    primary_key: bool = False
    # fractional seconds of TIME/DATETIME/TIMESTAMP (information_schema DATETIME_PRECISION):
    # MariaDB's pre-10.0 high-resolution formats are logged without it in TABLE_MAP
    precision: int | None = None
    column_id: int | None = None  # see ColumnDef
    text_form: str | None = None
    fill: str | None = None


@dataclass(frozen=True, slots=True)
class TableSchema:
    """A table's columns in ordinal order, as looked up outside the decoder.

    ``exact``: the columns are those of the table at the binlog position being decoded (a
    schema history), not as the table is now (information_schema). A TABLE_MAP that logs
    column names must then agree with them, or the stream stops."""

    schema: str
    table: str
    columns: tuple[ColumnSchema, ...]
    exact: bool = False
    # the primary key's column names in key order, where the lookup knows it (a schema
    # history); None: the columns' ``primary_key`` flags, in column order
    key: tuple[str, ...] | None = None
