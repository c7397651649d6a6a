"""TABLE_MAP_EVENT: the table a following ROWS event changes, and how to read its columns.

Layout (mysql-server ``libbinlogevents/src/rows_event.cpp`` ``Table_map_event::Table_map_event``,
``sql/log_event.cc`` ``Table_map_log_event::save_field_metadata`` and ``init_*_field``):
post-header table_id (6 bytes; 4 when the FDE says 6) and flags (2); then schema and table
names (1-byte length, bytes, NUL), lenenc column count, one type byte per column, lenenc
metadata length and the per-type metadata, a NULL-able bitmap, and optional metadata as
type/lenenc-length/value fields (``Table_map_event::Optional_metadata_field_type``,
written when ``binlog_row_metadata`` is MINIMAL or FULL; MariaDB 10.5+ writes the same).

Column facts the event does not carry (names, signedness, charsets, ENUM/SET labels when
``binlog_row_metadata`` is off) come from a caller-supplied ``TableSchema``.

MariaDB 10.4+ gives each long UNIQUE key (one no index can hold: on BLOB/TEXT without a
prefix, longer than the engine's key limit, or ``USING HASH``) a hidden field after the
table's own, ``DB_ROW_HASH_<n>`` of type LONGLONG, which TABLE_MAP and row images include
and no catalog shows (sql/sql_table.cc ``add_hash_field``, which ``mysql_prepare_create_table``
runs for every such key after the columns, so an ALTER puts them last again; sql/table.cc
``init_from_binary_frm_image``: "Last n fields are unique_index_hash fields"). With names
logged, trailing columns of that name and type that the schema does not have are decoded
(the row images stay aligned) and marked ``ColumnDef.long_unique_hash``: never landed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from .charsets import codec_for_charset, codec_for_collation, text_decoder
from .constants import ColumnType
from .errors import DecodeError, SchemaMismatchError
from .reader import bitmap_bits, bitmap_bits_msb, read_lenenc, read_lenenc_bytes, take, uint
from .schema import ColumnDef, TableSchema

SchemaLookup = Callable[[str, str], TableSchema | None]

# Optional metadata field types (rows_event.h Optional_metadata_field_type)
SIGNEDNESS = 1
DEFAULT_CHARSET = 2
COLUMN_CHARSET = 3
COLUMN_NAME = 4
SET_STR_VALUE = 5
ENUM_STR_VALUE = 6
GEOMETRY_TYPE = 7
SIMPLE_PRIMARY_KEY = 8
PRIMARY_KEY_WITH_PREFIX = 9
ENUM_AND_SET_DEFAULT_CHARSET = 10
ENUM_AND_SET_COLUMN_CHARSET = 11
COLUMN_VISIBILITY = 12
VECTOR_DIMENSIONALITY = 13

_T = ColumnType
# MariaDB COMPRESSED columns (include/mysql_com.h MYSQL_TYPE_BLOB_COMPRESSED = 140,
# MYSQL_TYPE_VARCHAR_COMPRESSED = 141): metadata as their plain counterparts.
BLOB_COMPRESSED = 140
VARCHAR_COMPRESSED = 141
_ONE_BYTE_META = frozenset(
    {BLOB_COMPRESSED, _T.FLOAT, _T.DOUBLE, _T.BLOB, _T.TINY_BLOB, _T.MEDIUM_BLOB, _T.LONG_BLOB,
     _T.GEOMETRY, _T.JSON, _T.VECTOR, _T.TIMESTAMP2, _T.DATETIME2, _T.TIME2}
)  # fmt: skip
# MariaDB logs its pre-10.0 high-resolution TIME/DATETIME/TIMESTAMP with one metadata byte
# (the fsp); MySQL logs none for these legacy types (MariaDB sql/field.h
# Field_*_hires::do_save_field_metadata).
_MAYBE_ONE_BYTE_META = frozenset({_T.TIMESTAMP, _T.DATETIME, _T.TIME})
_TWO_BYTE_LE_META = frozenset({_T.VARCHAR, _T.VAR_STRING, VARCHAR_COMPRESSED})
_NUMERIC = frozenset(
    {_T.TINY, _T.SHORT, _T.INT24, _T.LONG, _T.LONGLONG, _T.FLOAT, _T.DOUBLE, _T.NEWDECIMAL,
     _T.DECIMAL}
)  # fmt: skip
_CHARACTER = frozenset(
    {_T.STRING, _T.VAR_STRING, _T.VARCHAR, _T.BLOB, BLOB_COMPRESSED, VARCHAR_COMPRESSED}
)
# MariaDB counts GEOMETRY among the character columns of the charset metadata (it is a BLOB
# with the binary charset there); MySQL does not (sql/log_event_server.cc
# Table_map_log_event::init_charset_field in each server).
_CHARACTER_MARIADB = _CHARACTER | {_T.GEOMETRY}
_ENUM_SET = frozenset({_T.ENUM, _T.SET})
# the names MariaDB gives long UNIQUE hash fields (sql/sql_table.cc make_long_hash_field_name:
# "DB_ROW_HASH_%u", numbered from 1 past the table's own column names)
_LONG_UNIQUE_HASH_NAME = re.compile(r"DB_ROW_HASH_[1-9][0-9]*")
_LONG_UNIQUE_HINT = (
    "a MariaDB long UNIQUE key (on BLOB/TEXT) adds hidden hash columns; set "
    "binlog_row_metadata=FULL so they can be recognized by name"
)


@dataclass(slots=True)
class _OptionalMetadata:
    signedness: tuple[bool, ...] | None = None
    default_charset: tuple[int, dict[int, int]] | None = None
    column_charsets: list[int] | None = None
    names: list[str] | None = None
    set_values: list[tuple[bytes, ...]] | None = None
    enum_values: list[tuple[bytes, ...]] | None = None
    geometry_types: list[int] | None = None
    primary_key: list[int] = field(default_factory=list)
    enum_set_default_charset: tuple[int, dict[int, int]] | None = None
    enum_set_column_charsets: list[int] | None = None
    visibility: tuple[bool, ...] | None = None
    vector_dimensions: list[int] | None = None
    present: bool = False


@dataclass(frozen=True, slots=True)
class TableMapBody:
    table_id: int
    flags: int
    schema: str
    table: str
    columns: tuple[ColumnDef, ...]
    primary_key: tuple[int, ...]
    has_metadata: bool


def _read_metadata(types: list[int], meta: bytes) -> tuple[list[int], list[int]]:
    """Split the metadata block per column; returns (real types, metadata ints)."""
    real_types: list[int] = []
    metas: list[int] = []
    pos = 0
    for t in types:
        value = 0
        real = t
        if t in _ONE_BYTE_META:
            value, pos = meta[pos], pos + 1
        elif t in _TWO_BYTE_LE_META:
            value, pos = int.from_bytes(meta[pos : pos + 2], "little"), pos + 2
        elif t == _T.NEWDECIMAL:
            value, pos = meta[pos] << 8 | meta[pos + 1], pos + 2
        elif t == _T.BIT:
            value, pos = meta[pos + 1] << 8 | meta[pos], pos + 2
        elif t in (_T.STRING, _T.ENUM, _T.SET):
            value, pos = meta[pos] << 8 | meta[pos + 1], pos + 2
            byte0 = value >> 8
            if byte0 in (_T.ENUM, _T.SET):
                real = byte0
            elif t == _T.STRING:
                real = _T.STRING
        elif t in _MAYBE_ONE_BYTE_META:
            value = -1  # resolved below: these take a byte only if the block has one
        real_types.append(real)
        metas.append(value)
    # MySQL writes no metadata for legacy temporal types; MariaDB hires ones write one byte.
    # The block's size tells which: assign bytes left over to those columns in order.
    pending = [i for i, m in enumerate(metas) if m == -1]
    if pending:
        spare = len(meta) - pos
        if spare not in (0, len(pending)):
            raise DecodeError("TABLE_MAP metadata block size does not match its columns")
        for i in pending:
            if spare:
                metas[i], pos = meta[pos], pos + 1
            else:
                metas[i] = 0
    if pos != len(meta):
        raise DecodeError(
            f"TABLE_MAP metadata block is {len(meta)} bytes but the column types use {pos}"
        )
    return real_types, metas


def _name(raw: bytes, what: str) -> str:
    """Names are logged in the server's system character set, utf8mb3 (``Table_map_log_event``
    writes ``m_dbnam``/``m_tblnam`` and column names as stored in the data dictionary): bytes
    that are not UTF-8 mean the event is damaged."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(f"TABLE_MAP {what} {raw[:64]!r} is not valid UTF-8") from exc


def _read_charset_pairs(value: bytes) -> tuple[int, dict[int, int]]:
    default, pos = read_lenenc(value, 0)
    overrides: dict[int, int] = {}
    while pos < len(value):
        index, pos = read_lenenc(value, pos)
        collation, pos = read_lenenc(value, pos)
        overrides[index] = collation
    return default, overrides


def _read_lenenc_list(value: bytes) -> list[int]:
    out: list[int] = []
    pos = 0
    while pos < len(value):
        item, pos = read_lenenc(value, pos)
        out.append(item)
    return out


def _read_label_lists(value: bytes) -> list[tuple[bytes, ...]]:
    out: list[tuple[bytes, ...]] = []
    pos = 0
    while pos < len(value):
        count, pos = read_lenenc(value, pos)
        labels: list[bytes] = []
        for _ in range(count):
            raw, pos = read_lenenc_bytes(value, pos)
            labels.append(raw)
        out.append(tuple(labels))
    return out


def _decode_labels(labels: tuple[bytes, ...] | None, codec: str | None) -> tuple[str, ...] | None:
    """ENUM/SET labels are logged in the column's character set; a label that is not valid
    text there means a damaged event (labels land as strings, so they must be text)."""
    if labels is None:
        return None
    if codec is None or codec == "binary":
        codec = "utf-8"
    decode = text_decoder(codec)
    try:
        return tuple(decode(label) for label in labels)
    except UnicodeDecodeError as exc:
        raise DecodeError(
            f"TABLE_MAP ENUM/SET label {exc.object[:64]!r} is not valid {codec} text"
        ) from exc


def _read_optional_metadata(
    buf: bytes, pos: int, real_types: list[int], nullable_count: int
) -> _OptionalMetadata:
    md = _OptionalMetadata()
    numeric_count = sum(1 for t in real_types if t in _NUMERIC)
    while pos < len(buf):
        md.present = True
        kind = buf[pos]
        length, pos = read_lenenc(buf, pos + 1)
        value, pos = take(buf, pos, length)
        if kind == SIGNEDNESS:
            md.signedness = bitmap_bits_msb(value, numeric_count)
        elif kind == DEFAULT_CHARSET:
            md.default_charset = _read_charset_pairs(value)
        elif kind == COLUMN_CHARSET:
            md.column_charsets = _read_lenenc_list(value)
        elif kind == COLUMN_NAME:
            names: list[str] = []
            p = 0
            while p < len(value):
                raw, p = read_lenenc_bytes(value, p)
                names.append(_name(raw, "column name"))
            md.names = names
        elif kind == SET_STR_VALUE:
            md.set_values = _read_label_lists(value)
        elif kind == ENUM_STR_VALUE:
            md.enum_values = _read_label_lists(value)
        elif kind == GEOMETRY_TYPE:
            md.geometry_types = _read_lenenc_list(value)
        elif kind == SIMPLE_PRIMARY_KEY:
            md.primary_key = _read_lenenc_list(value)
        elif kind == PRIMARY_KEY_WITH_PREFIX:
            pairs = _read_lenenc_list(value)
            md.primary_key = pairs[0::2]
        elif kind == ENUM_AND_SET_DEFAULT_CHARSET:
            md.enum_set_default_charset = _read_charset_pairs(value)
        elif kind == ENUM_AND_SET_COLUMN_CHARSET:
            md.enum_set_column_charsets = _read_lenenc_list(value)
        elif kind == COLUMN_VISIBILITY:
            md.visibility = bitmap_bits_msb(value, nullable_count)
        elif kind == VECTOR_DIMENSIONALITY:
            md.vector_dimensions = _read_lenenc_list(value)
        # Unknown field types are skipped: the format is extensible by design and each field
        # carries its own length, so newer servers stay readable.
    return md


def _charset_per_column(
    indexes: list[int],
    default: tuple[int, dict[int, int]] | None,
    per_column: list[int] | None,
) -> dict[int, int]:
    """Collation id for each column in ``indexes`` (the n-th character column gets the
    n-th entry), from either the default-with-exceptions or the per-column form."""
    out: dict[int, int] = {}
    if per_column is not None:
        for n, col in enumerate(indexes):
            if n < len(per_column):
                out[col] = per_column[n]
    elif default is not None:
        collation, overrides = default
        for n, col in enumerate(indexes):
            out[col] = overrides.get(n, collation)
    return out


# information_schema DATA_TYPE families, to tell whether a looked-up schema still lines up with
# a TABLE_MAP's column types (the types always come from the binlog; the schema gives names,
# labels and, for old MariaDB temporals, precision)
_FAMILY_OF_TYPE: dict[int, str] = {
    **dict.fromkeys((_T.TINY, _T.SHORT, _T.INT24, _T.LONG, _T.LONGLONG, _T.BOOL), "integer"),
    **dict.fromkeys((_T.FLOAT, _T.DOUBLE, _T.DECIMAL, _T.NEWDECIMAL), "number"),
    **dict.fromkeys((_T.DATE, _T.NEWDATE), "date"),
    **dict.fromkeys((_T.TIME, _T.TIME2), "time"),
    **dict.fromkeys((_T.DATETIME, _T.DATETIME2, _T.TIMESTAMP, _T.TIMESTAMP2), "datetime"),
    _T.YEAR: "year",
    _T.BIT: "bit",
    _T.ENUM: "enum",
    _T.SET: "set",
    _T.JSON: "json",
    _T.GEOMETRY: "geometry",
}
_FAMILY_OF_DATA_TYPE: dict[str, str] = {
    **dict.fromkeys(("tinyint", "smallint", "mediumint", "int", "integer", "bigint"), "integer"),
    **dict.fromkeys(("float", "double", "real", "decimal", "numeric"), "number"),
    "date": "date",
    "time": "time",
    **dict.fromkeys(("datetime", "timestamp"), "datetime"),
    "year": "year",
    "bit": "bit",
    "enum": "enum",
    "set": "set",
    "json": "json",
}


def _long_unique_hashes(types: list[int], names: list[str] | None, mariadb: bool) -> int:
    """Where the trailing run of columns that are MariaDB long UNIQUE hash fields by their
    logged name and type begins (see the module doc); without logged names none can be told,
    and the run is empty (``len(types)``)."""
    first = len(types)
    if not mariadb or names is None or len(names) != len(types):
        return first
    while (
        first > 0
        and types[first - 1] == _T.LONGLONG
        and _LONG_UNIQUE_HASH_NAME.fullmatch(names[first - 1])
    ):
        first -= 1
    return first


def _check_alignment(
    schema_name: str, table_name: str, types: list[int], known: TableSchema
) -> None:
    """Refuse a looked-up schema that does not line up with the TABLE_MAP: never misalign.

    information_schema shows the table as it is now, which may be after DDL the stream has not
    reached yet. Two changes keep names by position and are accepted: columns added at the end
    (the TABLE_MAP is a prefix of the schema) and columns whose type was modified within its
    family (INT to BIGINT, VARCHAR(10) to VARCHAR(40)). Anything else (a column dropped, moved,
    or added in the middle) shows up as a count or type-family mismatch and stops the stream.
    ``types`` leaves out long UNIQUE hash fields recognized by name (``_long_unique_hashes``).
    """
    count = len(types)
    hint = (
        "the table changed after these events were written (a dropped or moved "
        "column) and binlog_row_metadata=MINIMAL does not log names: set "
        "binlog_row_metadata=FULL on the source, or resume from a position after the change"
    )
    if count > len(known.columns):
        problem = f"has {count} columns but the table now has {len(known.columns)}"
        hint += f"; or {_LONG_UNIQUE_HINT}"
    else:
        problem = ""
        for i, (code, column) in enumerate(zip(types, known.columns, strict=False)):
            logged = _FAMILY_OF_TYPE.get(code, "other")
            current = _FAMILY_OF_DATA_TYPE.get(column.data_type, "other")
            if logged != current and "geometry" not in (logged, column.data_type):
                problem = (
                    f"column {i + 1} is logged as {logged} but {column.name!r} is now "
                    f"{column.data_type}"
                )
                break
    if problem:
        raise SchemaMismatchError(
            f"TABLE_MAP for {schema_name}.{table_name} {problem}; refusing to misalign columns",
            hint=hint,
        )


def _check_exact(
    schema_name: str,
    table_name: str,
    types: list[int],
    names: list[str] | None,
    known: TableSchema,
    *,
    mariadb: bool,
) -> None:
    """A schema history describes the table as of this event: same columns, same order,
    same type families, and the same names where the event logs them. Anything else means
    the history went wrong, and decoding on would put values under the wrong names.
    ``types`` leaves out long UNIQUE hash fields recognized by name (``_long_unique_hashes``)."""
    problem = ""
    hint = (
        "the schema history does not match the binlog here (a DDL statement it did "
        "not see or did not understand): report this with `replicator schema show`; "
        "re-seed the history by starting a new landing zone from this position"
    )
    if len(types) != len(known.columns):
        problem = f"has {len(types)} columns but the schema history has {len(known.columns)}"
        if mariadb and names is None and len(types) > len(known.columns):
            hint = f"{_LONG_UNIQUE_HINT}; otherwise {hint}"
    else:
        for i, (code, column) in enumerate(zip(types, known.columns, strict=True)):
            logged = _FAMILY_OF_TYPE.get(code, "other")
            current = _FAMILY_OF_DATA_TYPE.get(column.data_type, "other")
            if logged != current and "geometry" not in (logged, column.data_type):
                problem = (
                    f"logs column {i + 1} as {logged} but the schema history has "
                    f"{column.name!r} as {column.data_type}"
                )
                break
            if (
                names is not None
                and i < len(names)
                and names[i].casefold() != (column.name.casefold())
            ):
                problem = (
                    f"names column {i + 1} {names[i]!r} but the schema history has {column.name!r}"
                )
                break
    if problem:
        raise SchemaMismatchError(
            f"TABLE_MAP for {schema_name}.{table_name} {problem}; refusing to misalign columns",
            hint=hint,
        )


def _history_key(
    schema_name: str,
    table_name: str,
    logged: tuple[int, ...],
    known: TableSchema,
    *,
    logs_keys: bool,
) -> tuple[int, ...]:
    """The schema history's primary key (``known.key``, in key order), which a snapshot of
    the table reads by too. A TABLE_MAP that logs its metadata (binlog_row_metadata=FULL:
    ``logs_keys``, when it names the columns) logs the table's key: the same columns, or one
    where the history has none: a table without a PRIMARY KEY logs its first UNIQUE index on
    NOT NULL columns as its key (the server takes it for one), which the history does not
    count (``source.catalog``): such a table lands without a key, as its snapshot does. A
    key of other columns, or none where the history has one (a key the history learned from
    such a TABLE_MAP, whose index was dropped since), means the history went wrong."""
    names = [c.name.casefold() for c in known.columns]
    wanted = [k.casefold() for k in known.key or ()]
    key = tuple(names.index(k) for k in wanted if k in names)
    if (
        len(key) != len(wanted)
        or (logged and key and set(logged) != set(key))
        or (logs_keys and key and not logged)
    ):
        shown = ", ".join(known.columns[i].name for i in logged if i < len(names))
        logs = f"the primary key ({shown})" if logged else "no primary key"
        raise SchemaMismatchError(
            f"TABLE_MAP for {schema_name}.{table_name} logs {logs} but the schema history has "
            f"({', '.join(known.key or ())}); refusing to land rows under another key",
            hint="the schema history does not match the binlog here (a DDL statement it did "
            "not see or did not understand): report this with `replicator schema show`; "
            "re-seed the history by starting a new landing zone from this position",
        )
    return key


def decode_table_map(
    body: bytes,
    post_header_length: int,
    schema_lookup: SchemaLookup | None,
    *,
    mariadb: bool = False,
    exact: bool = False,
) -> TableMapBody:
    """Decode a TABLE_MAP body (after the common header, without checksum).

    ``exact``: ``schema_lookup`` describes the table as of this event (a schema history), so it
    is asked for every table, not only when the event lacks names or signedness: it also gives
    column ids and the text form of MariaDB's UUID/INET columns, and must agree with logged
    names."""
    id_width = 4 if post_header_length == 6 else 6
    table_id, pos = uint(body, 0, id_width)
    flags, pos = uint(body, pos, 2)
    pos = max(pos, post_header_length)
    schema_len, pos = uint(body, pos, 1)
    schema_raw, pos = take(body, pos, schema_len)
    pos += 1  # NUL
    table_len, pos = uint(body, pos, 1)
    table_raw, pos = take(body, pos, table_len)
    pos += 1
    column_count, pos = read_lenenc(body, pos)
    types_raw, pos = take(body, pos, column_count)
    meta_raw, pos = read_lenenc_bytes(body, pos)
    null_raw, pos = take(body, pos, (column_count + 7) // 8)
    types = list(types_raw)
    real_types, metas = _read_metadata(types, meta_raw)
    nullable = bitmap_bits(null_raw, column_count)
    md = _read_optional_metadata(body, pos, real_types, column_count)

    schema_name = _name(schema_raw, "database name")
    table_name = _name(table_raw, "table name")
    looked_up: TableSchema | None = None
    # MariaDB logs its pre-10.0 high-resolution TIME/DATETIME/TIMESTAMP (mysql56_temporal_format
    # =OFF) with the legacy type codes and no metadata: only the schema knows their precision
    legacy_temporal = mariadb and any(
        t in _MAYBE_ONE_BYTE_META and m == 0 for t, m in zip(real_types, metas, strict=True)
    )
    needs_lookup = (
        md.names is None
        or (md.signedness is None and any(t in _NUMERIC for t in real_types))
        or legacy_temporal
    )

    # columns from ``own`` on are long UNIQUE hash fields: those past the columns of the schema
    # looked up (see the module doc), all of them of that name and type
    own = column_count
    hashes = _long_unique_hashes(real_types, md.names, mariadb)
    # (trailing columns named as hash fields: only a schema tells them from the table's own)
    if schema_lookup is not None and (needs_lookup or exact or hashes < column_count):
        looked_up = schema_lookup(schema_name, table_name)
        if looked_up is None:
            if exact:  # a history without the table (one it may learn from this event)
                own = hashes
        elif looked_up.exact:
            if hashes <= len(looked_up.columns) < column_count:
                own = len(looked_up.columns)
        else:  # the table as it is now: it may have more columns, but not of those names
            own = hashes
            while (
                md.names is not None
                and own < min(column_count, len(looked_up.columns))
                and md.names[own].casefold() == looked_up.columns[own].name.casefold()
            ):
                own += 1
        if looked_up is not None and looked_up.exact:
            _check_exact(
                schema_name, table_name, real_types[:own], md.names, looked_up, mariadb=mariadb
            )
        elif looked_up is not None:
            _check_alignment(schema_name, table_name, real_types[:own], looked_up)

    numeric_idx = [i for i, t in enumerate(real_types) if t in _NUMERIC]
    character = _CHARACTER_MARIADB if mariadb else _CHARACTER
    char_idx = [i for i, t in enumerate(real_types) if t in character]
    enum_set_idx = [i for i, t in enumerate(real_types) if t in _ENUM_SET]
    enum_idx = [i for i, t in enumerate(real_types) if t == _T.ENUM]
    set_idx = [i for i, t in enumerate(real_types) if t == _T.SET]
    geometry_idx = [i for i, t in enumerate(real_types) if t == _T.GEOMETRY]
    vector_idx = [i for i, t in enumerate(real_types) if t == _T.VECTOR]

    unsigned: dict[int, bool] = {}
    if md.signedness is not None:
        unsigned = dict(zip(numeric_idx, md.signedness, strict=False))
    collations = _charset_per_column(char_idx, md.default_charset, md.column_charsets)
    collations.update(
        _charset_per_column(enum_set_idx, md.enum_set_default_charset, md.enum_set_column_charsets)
    )
    enum_labels = dict(zip(enum_idx, md.enum_values or [], strict=False))
    set_labels = dict(zip(set_idx, md.set_values or [], strict=False))
    geometry = dict(zip(geometry_idx, md.geometry_types or [], strict=False))
    vectors = dict(zip(vector_idx, md.vector_dimensions or [], strict=False))

    columns: list[ColumnDef] = []
    for i in range(column_count):
        known = looked_up.columns[i] if looked_up is not None and i < own else None
        if (
            legacy_temporal
            and real_types[i] in _MAYBE_ONE_BYTE_META
            and metas[i] == 0
            and known is not None
            and known.precision
        ):
            metas[i] = known.precision
        collation = collations.get(i)
        charset: str | None
        if collation is not None:
            charset = codec_for_collation(collation)
        elif known is not None and known.charset is not None:
            charset = codec_for_charset(known.charset)
        elif real_types[i] in _CHARACTER and known is not None and known.data_type in (
            "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob",
        ):  # fmt: skip
            charset = "binary"
        else:
            charset = None
        columns.append(
            ColumnDef(
                index=i,
                type=real_types[i],
                meta=metas[i],
                nullable=nullable[i],
                name=md.names[i]
                if md.names and i < len(md.names)
                else (known.name if known else None),
                unsigned=unsigned.get(i, known.unsigned if known else False),
                charset=charset,
                collation_id=collation,
                enum_values=_decode_labels(enum_labels.get(i), charset)
                if i in enum_labels
                else (known.enum_values if known else None),
                set_values=_decode_labels(set_labels.get(i), charset)
                if i in set_labels
                else (known.set_values if known else None),
                geometry_type=geometry.get(i),
                vector_dimensions=vectors.get(i),
                visible=md.visibility[i] if md.visibility is not None else True,
                column_id=known.column_id if known else None,
                text_form=known.text_form if known else None,
                fill=known.fill if known else None,
                long_unique_hash=i >= own,
            )
        )
    primary_key = tuple(md.primary_key)
    if looked_up is not None and looked_up.exact and looked_up.key is not None:
        primary_key = _history_key(
            schema_name, table_name, primary_key, looked_up, logs_keys=md.names is not None
        )
    elif not primary_key and looked_up is not None:
        primary_key = tuple(i for i, c in enumerate(looked_up.columns) if c.primary_key)
    return TableMapBody(
        table_id=table_id,
        flags=flags,
        schema=schema_name,
        table=table_name,
        columns=tuple(columns),
        primary_key=primary_key,
        has_metadata=md.present,
    )
