"""A table's columns learned from a TABLE_MAP with full metadata (``binlog_row_metadata=FULL``).

A stream started at an old position has its history seeded from the server's catalog as it
is now (``source.seeding``): a table that DDL changed between the start and then is taken
out of the seed, its columns at the start not known (``Catalog.unknown``). The first
TABLE_MAP of such a table that logs full metadata tells them: names, types with their
lengths and precision, signedness, character sets, ENUM/SET labels, geometry types,
nullability, visibility and the primary key. ``learned_table`` turns it into the history's
``Table`` (recorded as a ``history.Learned`` effect), so later DDL applies to it as to any
other table and later TABLE_MAPs are checked against it.

What a TABLE_MAP does not carry is not guessed:

* MariaDB's UUID, INET6 and INET4 columns are logged as BINARY(16), BINARY(16) and
  BINARY(4). Such a column is taken as UUID/INET6/INET4 when the table of the same name in
  the catalog read at the seed (``SchemaHistory.seen_later``) has a column of the same name
  of that type; otherwise it is the BINARY(n) it is logged as (its bytes land unchanged).
* Defaults, AUTO_INCREMENT, generation expressions, collations and the table's default
  character set are not logged: the learned table has none. They matter only to a column
  that DDL adds later, whose own definition the statement gives.

A column whose logged type and metadata no learned definition gives back exactly (a type
this module does not know, a byte length that is no whole number of characters) stops the
stream rather than land under a definition that is not the table's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..binlog import text_forms
from ..binlog.charsets import charset_for_collation
from ..binlog.constants import ColumnType as T
from ..binlog.schema import ColumnDef
from ..errors import IntegrityError
from .ddl import _MAXLEN
from .model import Column, Table

_INTEGERS: dict[int, str] = {
    T.TINY: "tinyint",
    T.SHORT: "smallint",
    T.INT24: "mediumint",
    T.LONG: "int",
    T.LONGLONG: "bigint",
}
_TEMPORALS: dict[int, str] = {
    T.DATETIME2: "datetime",
    T.TIMESTAMP2: "timestamp",
    T.TIME2: "time",
    # MariaDB's pre-10.0 formats: their metadata byte (when logged) is the precision
    T.DATETIME: "datetime",
    T.TIMESTAMP: "timestamp",
    T.TIME: "time",
}
_LEGACY_TEMPORALS: frozenset[int] = frozenset({T.DATETIME, T.TIMESTAMP, T.TIME})
_BLOBS = {1: "tiny", 2: "", 3: "medium", 4: "long"}
# GEOMETRY_TYPE optional metadata (sql/spatial.h Geometry::wkbType; 0 is any geometry)
_GEOMETRY_TYPES = {
    0: "geometry", 1: "point", 2: "linestring", 3: "polygon", 4: "multipoint",
    5: "multilinestring", 6: "multipolygon", 7: "geometrycollection",
}  # fmt: skip


def has_full_metadata(columns: Sequence[ColumnDef]) -> bool:
    """A TABLE_MAP that logs every column's name (``binlog_row_metadata=FULL``)."""
    return all(c.name is not None for c in columns)


def learned_table(
    schema: str,
    name: str,
    columns: Sequence[ColumnDef],
    primary_key: Sequence[int],
    *,
    first_id: int,
    seen_later: Table | None,
    at: str,
) -> Table:
    """The table a full-metadata TABLE_MAP at ``at`` describes, its columns numbered from
    ``first_id``; ``seen_later``: the same table in the catalog read at the seed, for the
    column types the binlog cannot show (see the module doc). Raises ``IntegrityError`` for
    a column that cannot be described exactly."""
    out: list[Column] = []
    for i, logged in enumerate(columns):
        hint = None if seen_later is None else seen_later.column(logged.name or "")
        if logged.long_unique_hash and hint is None:
            # named and typed as a MariaDB long UNIQUE hash field (binlog.tablemap), which no
            # catalog shows: a column of that name in the catalog is the table's own
            if seen_later is None:
                raise IntegrityError(
                    f"column {logged.name!r} of {schema}.{name} in the TABLE_MAP at {at}: "
                    "named and typed as a MariaDB long UNIQUE hash field, which cannot be "
                    "told from a column of the table of that name without the table in the "
                    "catalog read at the seed",
                    hint="start the landing zone at a position after the statement that "
                    "changed the table (start.gtid), or start it now with a snapshot "
                    "(snapshot.mode: initial), or leave the table out (filters.exclude)",
                )
            continue  # not a column of the table
        column = _column(logged, hint, first_id + i, f"{schema}.{name}", at)
        out.append(column)
    if any(i >= len(out) for i in primary_key):  # (hash fields come after every column)
        raise IntegrityError(
            f"the TABLE_MAP of {schema}.{name} at {at} names a key column past its last"
        )
    key = tuple(out[i].name for i in primary_key)
    return Table(schema, name, tuple(out), primary_key=key)


def _column(logged: ColumnDef, hint: Column | None, column_id: int, table: str, at: str) -> Column:
    where = f"column {logged.name!r} of {table} in the TABLE_MAP at {at}"
    if logged.name is None:
        raise IntegrityError(f"{where}: the TABLE_MAP does not log the column's name")
    return _described(logged, hint, column_id, where)


def _not_exact(where: str, what: str) -> IntegrityError:
    return IntegrityError(
        f"{where}: {what}",
        hint="start the landing zone at a position after the DDL that changed the table "
        "(start.gtid), or start it now with a snapshot (snapshot.mode: initial), or leave the "
        "table out (filters.exclude); report the column type",
    )


def _described(logged: ColumnDef, hint: Column | None, column_id: int, where: str) -> Column:
    code, meta = logged.real_type, logged.meta
    charset = None if logged.collation_id is None else charset_for_collation(logged.collation_id)
    common = Column(
        name=logged.name or "",
        data_type="",
        column_type="",
        nullable=logged.nullable,
        invisible=not logged.visible,
        id=column_id,
    )
    sign = " unsigned" if logged.unsigned else ""
    if code in _INTEGERS:
        kind = _INTEGERS[code]
        return replace(common, data_type=kind, column_type=kind + sign, unsigned=logged.unsigned)
    if code == T.YEAR:
        return replace(common, data_type="year", column_type="year(4)")
    if code in (T.FLOAT, T.DOUBLE):
        kind = "float" if code == T.FLOAT else "double"
        return replace(common, data_type=kind, column_type=kind + sign, unsigned=logged.unsigned)
    if code == T.NEWDECIMAL:
        precision, scale = meta >> 8, meta & 0xFF
        return replace(
            common,
            data_type="decimal",
            column_type=f"decimal({precision},{scale}){sign}",
            unsigned=logged.unsigned,
            precision=precision,
            scale=scale,
        )
    if code in (T.DATE, T.NEWDATE):
        return replace(common, data_type="date", column_type="date")
    if code in _TEMPORALS:
        kind, fsp = _TEMPORALS[code], max(meta, 0)
        text = f"{kind}({fsp})" if fsp else kind
        return replace(common, data_type=kind, column_type=text, fsp=fsp)
    if code == T.BIT:
        bits = (meta >> 8) * 8 + (meta & 0xFF)
        return replace(common, data_type="bit", column_type=f"bit({bits})", length=bits)
    if code == T.JSON:
        return replace(common, data_type="json", column_type="json")
    if code == T.GEOMETRY:
        kind = _GEOMETRY_TYPES.get(logged.geometry_type or 0, "geometry")
        return replace(common, data_type=kind, column_type=kind)
    if code == T.VECTOR:
        text = f"vector({logged.vector_dimensions})" if logged.vector_dimensions else "vector"
        return replace(common, data_type="vector", column_type=text)
    if code in (T.ENUM, T.SET):
        kind = "enum" if code == T.ENUM else "set"
        labels = logged.enum_values if code == T.ENUM else logged.set_values
        if labels is None or charset is None:
            raise IntegrityError(f"{where}: the TABLE_MAP does not log its labels and charset")
        quoted = ",".join("'" + label.replace("'", "''") + "'" for label in labels)
        return replace(
            common,
            data_type=kind,
            column_type=f"{kind}({quoted})",
            charset=charset,
            labels=labels,
        )
    if code in (T.VARCHAR, T.STRING, T.BLOB):
        if charset is None:
            raise IntegrityError(f"{where}: the TABLE_MAP does not log its character set")
        return _string(code, meta, logged, charset, hint, common, where)
    raise _not_exact(where, f"binlog type {code} cannot be learned from a TABLE_MAP")


def _string(
    code: int,
    meta: int,
    logged: ColumnDef,
    charset: str,
    hint: Column | None,
    common: Column,
    where: str,
) -> Column:
    binary = charset == "binary"
    if code == T.BLOB:
        prefix = _BLOBS.get(meta)
        if prefix is None:
            raise _not_exact(where, f"BLOB/TEXT length bytes {meta} are not 1 to 4")
        kind = f"{prefix}blob" if binary else f"{prefix}text"
        return replace(
            common,
            data_type=kind,
            column_type=kind,
            charset=charset,
        )
    size = meta if code == T.VARCHAR else logged.string_length
    if binary and code == T.STRING and hint is not None:
        form = hint.data_type
        if text_forms.SIZES.get(form) == size:  # MariaDB UUID/INET: BINARY(n) in the binlog
            return replace(
                common,
                data_type=form,
                column_type=form,
                charset="binary",
            )
    per_char = 1 if binary else _MAXLEN.get(charset, 1)
    length, left = divmod(size, per_char)
    if left:
        raise _not_exact(where, f"{size} bytes are not whole {charset} characters")
    if binary:
        kind = "varbinary" if code == T.VARCHAR else "binary"
    else:
        kind = "varchar" if code == T.VARCHAR else "char"
    return replace(
        common,
        data_type=kind,
        column_type=f"{kind}({length})",
        length=length,
        charset=charset,
    )
