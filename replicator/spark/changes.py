"""Reading a table's committed row changes with Spark, in one schema, ready to merge.

Files are read one schema version at a time (``file_versions``: files with the same columns,
ids, fills and source types; Spark cannot merge INT with BIGINT itself) and each version is
brought to the newest one's columns in two steps:

1. ``align``: the newest version's columns, each taken from the older version's column with
   the same id (a renamed column carries its values), or by name when either side has no ids
   (files of older writers), or else filled: the fill's exact value, null, or — for an
   expression default the binlog does not carry — null listed in ``_absent`` (and in
   ``UNKNOWN``, so that a table without key can tell it from a partial row image). ``_absent``
   and the before image (``_before_key``, or ``_before`` from older writers) are renamed and
   filled the same way.
2. ``normalize``: the types widened over every version (``schema.unify``) and cast. A
   DECIMAL shown as text (widened past 38 digits) is written at the scale of the column's
   newest version, older values padded with zeros, in the row images and the before image
   (``rescale``, the rules of ``landed.decimal_text``): the ALTER rewrote the stored values
   at that scale, so that is what the source shows, and a key stays one key across it.

``read_lineage`` reads what a table's lineage (``lineage``) is made of: the rows of its data
segments only (other rows of the same files belong to other tables, or to the state before a
truncate), without the row changes a replay landed a second time (``replayed``: a change
counts only from the lowest batch that holds its source identity, ``_gtid`` or else
``_binlog_file`` and ``_binlog_pos``, among the files of the same landed name); a lineage
without any file yet is an empty read in the columns of its newest create or alter record
(``Record.schema``). ``read_files`` reads given files whole, as an incremental run and
``read_changes`` do. Every path goes to Spark through ``spark_uri`` (taken literally).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..errors import IntegrityError
from ..landed.columns import Source, match, resolve_key, table_columns
from ..landed.committed import CommittedFile, file_key, spark_uri
from ..landed.compacted import reads
from ..landed.contract import AUX
from ..landed.decimal_text import (
    FOREIGN_FILES_HINT,
    refused_text,
    rescaled,
    text_pattern,
    text_scales,
    zeros,
)
from ..landed.lineage import Lineage, Segment
from ..landed.options import MaterializeOptions
from ..landed.versions import FileVersion, file_versions, identity_columns
from .fills import fill_literal
from .merge import ABSENT, BEFORE, BEFORE_KEY, META, UNKNOWN, TableModel, fail
from .schema import conform, conform_frame, decimal_text, find_field, unify
from .type_map import spark_schema

__all__ = [
    "AUX",
    "FileVersion",
    "TableChanges",
    "align",
    "file_versions",
    "normalize",
    "read_committed",
    "read_files",
    "read_lineage",
    "replayed",
    "rescale",
    "table_model",
    "union_all",
]

# working columns of the replay dedup
_FILE, _ID, _TABLE, _BATCH, _FIRST, _AGAIN, _LOW, _HIGH = (
    "__replicator_file",
    "__replicator_id",
    "__replicator_table",
    "__replicator_batch",
    "__replicator_first",
    "__replicator_again",
    "__replicator_low",
    "__replicator_high",
)
_ID_SCHEMA = T.StructType(
    [
        T.StructField("_op", T.StringType()),
        T.StructField("_gtid", T.StringType()),
        T.StructField("_binlog_file", T.StringType()),
        T.StructField("_binlog_pos", T.LongType()),
    ]
)


@dataclass(frozen=True, slots=True)
class TableChanges:
    """A table's changes in the merge layout (``merge`` module doc) and its model."""

    model: TableModel
    changes: DataFrame


def union_all(frames: Sequence[DataFrame]) -> DataFrame:
    out = frames[0]
    for frame in frames[1:]:
        out = out.union(frame)
    return out


def _col(name: str) -> Column:
    return F.col("`" + name.replace("`", "``") + "`")


def _table_columns(schema: T.StructType) -> T.StructType:
    return T.StructType([f for f in schema.fields if f.name not in AUX and f.name != UNKNOWN])


# ------------------------------------------------------------------------------ alignment


def _filled(source: Source, types: T.StructType) -> tuple[Column, bool]:
    """A missing column's value in an older version's rows, and whether it is known."""
    target = find_field(types, source.name)
    dtype = T.NullType() if target is None else target.dataType
    fill = source.fill
    if fill is None or fill.kind == "null":
        return F.lit(None).cast(dtype), True
    if fill.kind == "value":
        value = fill_literal(fill.value, dtype)
        if value is not None:
            return value, True
    return F.lit(None).cast(dtype), False


def _renamed(absent: Column, sources: Sequence[Source]) -> Column:
    """``_absent`` with the older version's names of renamed columns made the newest's."""
    renames = [(s.old, s.name) for s in sources if s.old is not None and s.old != s.name]
    if not renames:
        return absent

    def rename(x: Column) -> Column:
        out = F.when(F.lower(x) == F.lit(renames[0][0].lower()), F.lit(renames[0][1]))
        for old, new in renames[1:]:
            out = out.when(F.lower(x) == F.lit(old.lower()), F.lit(new))
        return out.otherwise(x)

    return F.transform(absent, rename)


def _before(frame: DataFrame, sources: Sequence[Source], types: T.StructType) -> Column:
    """The before image (key columns, or the whole row of a table without key) with the
    newest names, and fills for the columns the older version lacks."""
    field = find_field(frame.schema, BEFORE_KEY) or find_field(frame.schema, BEFORE)
    if field is None or not isinstance(field.dataType, T.StructType):
        return F.lit(None).cast(T.StructType([]))
    image = _col(field.name)
    parts: list[Column] = []
    for source in sources:
        if source.old is not None:
            have = find_field(field.dataType, source.old)
            if have is not None:
                parts.append(image.getField(have.name).alias(source.name))
        else:
            parts.append(_filled(source, types)[0].alias(source.name))
    if not parts:
        return F.lit(None).cast(T.StructType([]))
    return F.when(image.isNull(), F.lit(None)).otherwise(F.struct(*parts))


def align(frame: DataFrame, schema: pa.Schema, newest: pa.Schema, types: T.StructType) -> DataFrame:
    """``frame`` (files of schema ``schema``) with the columns of the ``newest`` version
    (``types``: Spark's view of it), matched by column id (see the module doc)."""
    sources = match(table_columns(schema, AUX), table_columns(newest, AUX))
    columns: list[Column] = []
    unknown: list[str] = []
    for source in sources:
        if source.old is not None:
            columns.append(_col(source.old).alias(source.name))
            continue
        value, known = _filled(source, types)
        columns.append(value.alias(source.name))
        if not known:
            unknown.append(source.name)
    missing = F.array(*[F.lit(n) for n in unknown]).cast("array<string>")
    absent = (
        _renamed(F.coalesce(F.col(ABSENT), F.array().cast("array<string>")), sources)
        if find_field(frame.schema, ABSENT) is not None
        else F.array().cast("array<string>")
    )
    columns.extend(F.col(m) for m in META)
    columns.append(F.concat(absent, missing).alias(ABSENT))
    columns.append(missing.alias(UNKNOWN))
    columns.append(_before(frame, sources, types).alias(BEFORE_KEY))
    return frame.select(*columns)


# ------------------------------------------------------------------------------ the model


def table_model(
    table: str,
    frames: Sequence[DataFrame],
    key: Sequence[str],
    options: MaterializeOptions,
    previous: T.StructType | None = None,
) -> TableModel:
    versions = [_table_columns(f.schema) for f in frames]
    if previous is not None:
        versions.insert(0, _table_columns(previous))
    columns = unify(versions)
    return TableModel(
        name=table,
        columns=columns,
        key=resolve_key(table, columns.names, key),
        keep_metadata=options.keep_metadata,
        allow_unknown=options.allow_unknown,
        assume_stable_keys=options.assume_stable_keys,
    )


def rescale(
    table: str, schema: pa.Schema, newest: pa.Schema, columns: T.StructType
) -> dict[str, tuple[int, int]]:
    """The columns (newest names) shown as text (``columns``: the unified ones) whose newest
    version is a DECIMAL and whose values the version of ``schema`` holds as decimals of
    another scale (integers: 0): name -> (that scale, the newest's), which ``normalize``
    writes them at (``landed.decimal_text``). A newest scale below the version's, or unknown
    where it holds decimals, raises IntegrityError naming the table and column."""
    texts = [f.name for f in columns.fields if isinstance(f.dataType, T.StringType)]
    sources = {s.name: s for s in match(table_columns(schema, AUX), table_columns(newest, AUX))}
    out: dict[str, tuple[int, int]] = {}
    for name, scale in text_scales(texts, newest):
        source = sources.get(name)
        if source is None or source.old is None:  # a fill: of the newest's type already
            continue
        own = rescaled(table, name, schema.field(source.old), scale)
        if own is not None and scale is not None:
            out[name] = (own, scale)
    return out


def normalize(
    frame: DataFrame, model: TableModel, scales: Mapping[str, tuple[int, int]] | None = None
) -> DataFrame:
    """One aligned schema version's changes in the merge layout (``merge`` module doc);
    ``scales``: its columns whose decimals are written as text at another scale than their
    own (``rescale``)."""
    if scales:
        frame = _decimals_as_text(frame, model.name, scales)
    identity = model.identity_type
    source = find_field(frame.schema, BEFORE_KEY) or find_field(frame.schema, BEFORE)
    before_key = (
        F.lit(None).cast(identity)
        if source is None or not isinstance(source.dataType, T.StructType)
        else conform(F.col(source.name), source.dataType, identity)
    )
    empty = F.array().cast("array<string>")
    absent = F.col(ABSENT) if find_field(frame.schema, ABSENT) is not None else empty
    unknown = F.col(UNKNOWN) if find_field(frame.schema, UNKNOWN) is not None else empty
    extra = {m: F.col(m) for m in META}
    extra[ABSENT] = absent
    extra[BEFORE_KEY] = before_key
    extra[UNKNOWN] = unknown
    return conform_frame(frame, model.columns, extra=extra)


def _decimals_as_text(
    frame: DataFrame, table: str, scales: Mapping[str, tuple[int, int]]
) -> DataFrame:
    """``frame`` (one aligned version) with the columns of ``scales`` written as text at
    the newest version's scale, in the row images and the before image (``rescale``)."""
    wanted = {name.lower(): scale for name, scale in scales.items()}
    columns: list[Column] = []
    for field in frame.schema.fields:
        found = wanted.get(field.name.lower())
        column = _col(field.name)
        if found is not None:
            column = _as_text(column, field.dataType, *found, table, field.name)
        elif field.name == BEFORE_KEY and isinstance(field.dataType, T.StructType):
            column = _image_as_text(column, field.dataType, wanted, table)
        columns.append(column.alias(field.name))
    return frame.select(*columns)


def _image_as_text(
    image: Column, kind: T.StructType, wanted: Mapping[str, tuple[int, int]], table: str
) -> Column:
    """The before image ``image`` with its fields of ``wanted`` as text (``_as_text``)."""
    if not any(f.name.lower() in wanted for f in kind.fields):
        return image
    parts: list[Column] = []
    for field in kind.fields:
        part = image.getField(field.name)
        found = wanted.get(field.name.lower())
        if found is not None:
            part = _as_text(part, field.dataType, *found, table, field.name)
        parts.append(part.alias(field.name))
    return F.when(image.isNull(), F.lit(None)).otherwise(F.struct(*parts))


def _as_text(
    value: Column, kind: T.DataType, own: int, scale: int, table: str, name: str
) -> Column:
    """``value`` (of Spark type ``kind``: a decimal, an integer, or the landing zone's text
    of a DECIMAL with ``own`` decimals) as text with ``scale`` decimals, exactly (the
    digits without exponent or grouping, ``schema.decimal_text``). Text of
    another form stops the job rather than be padded wrong."""
    if isinstance(kind, T.DecimalType):
        return decimal_text(value, scale)
    text = value.cast(T.StringType())
    if isinstance(kind, T.StringType):
        bad = F.concat(F.lit("'"), value, F.lit("'" + refused_text(own)))
        text = F.when(value.isNull() | value.rlike(text_pattern(own)), value).otherwise(
            fail(table, bad, FOREIGN_FILES_HINT, column=name)
        )
    return F.concat(text, F.lit(zeros(own, scale)))


def _assemble(
    table: str,
    versions: Sequence[FileVersion],
    frames: Sequence[DataFrame],
    keyed: Sequence[FileVersion],
    options: MaterializeOptions,
    *,
    previous_key: tuple[str, ...] | None = None,
    previous_schema: T.StructType | None = None,
) -> TableChanges:
    newest = versions[-1].schema
    types = frames[-1].schema
    aligned = [align(f, v.schema, newest, types) for v, f in zip(versions, frames, strict=True)]
    key = identity_columns(table, keyed, newest, options, previous_key)
    model = table_model(table, aligned, key, options, previous_schema)
    return TableChanges(
        model,
        union_all(
            [
                normalize(f, model, rescale(table, v.schema, newest, model.columns))
                for v, f in zip(versions, aligned, strict=True)
            ]
        ),
    )


# ------------------------------------------------------------------------------- reading


def read_files(
    spark: SparkSession,
    table: str,
    files: Sequence[CommittedFile],
    options: MaterializeOptions,
    *,
    previous_key: tuple[str, ...] | None = None,
    previous_schema: T.StructType | None = None,
) -> TableChanges:
    """Every row change of ``files`` (of one table), in one schema."""
    versions = file_versions(files)
    frames = [read_committed(spark, v.files, spark_schema(v.schema)) for v in versions]
    return _assemble(
        table,
        versions,
        frames,
        versions,
        options,
        previous_key=previous_key,
        previous_schema=previous_schema,
    )


def _file_name() -> Column:
    return F.element_at(F.split(F.input_file_name(), "/"), -1)


def _identity() -> Column:
    """A row change's source identity (``delta.changes._identities``): none for a snapshot
    row, which a replay never lands again."""
    return (
        F.when(F.col("_op") == "r", F.lit(None))
        .when(F.col("_gtid").isNotNull(), F.concat(F.lit("g:"), F.col("_gtid")))
        .when(
            F.col("_binlog_file").isNotNull() & F.col("_binlog_pos").isNotNull(),
            F.concat(
                F.lit("p:"), F.col("_binlog_file"), F.lit(":"), F.col("_binlog_pos").cast("string")
            ),
        )
    )


def replayed(
    spark: SparkSession, files: Sequence[CommittedFile], rereading: Collection[int]
) -> DataFrame | None:
    """The ``_seq`` of the row changes in ``files`` to leave out: those a replay batch
    (``rereading``) landed again, i.e. rows of such a batch whose identity a lower batch of
    the same landed table holds too. None when no file is of a replay batch. ``files``:
    every committed file of the landed tables concerned (the first copies may be in any of
    them). A row's batch is its file's, or for a slice of a compaction output (``compacted``)
    the slice's whose ``_seq`` range holds it."""
    again = [f for f in files if f.batch in rereading]
    if not again:
        return None
    names: dict[str, Path | str] = {}
    for item in files:
        other = names.setdefault(item.name, item.path)
        if other != item.path:
            raise IntegrityError(
                f"committed files {other} and {item.path} have the same name",
                hint="the landing zone names data files after their first _seq, which is "
                "unique: restore the manifests and files from one backup",
            )
    every_seq = (0, 2**63 - 1)
    batches = spark.createDataFrame(
        [(f.name, f.table, f.batch, f.batch in rereading, *(f.within or every_seq)) for f in files],
        f"{_FILE} string, {_TABLE} string, {_BATCH} long, {_AGAIN} boolean, {_LOW} long, "
        f"{_HIGH} long",
    )
    frame = read_committed(spark, files, _ID_SCHEMA)
    tagged = frame.select(_file_name().alias(_FILE), F.col("_seq"), _identity().alias(_ID)).where(
        F.col(_ID).isNotNull()
    )
    within = (
        (tagged[_FILE] == batches[_FILE])
        & (tagged["_seq"] >= batches[_LOW])
        & (tagged["_seq"] <= batches[_HIGH])
    )
    every = tagged.join(F.broadcast(batches), within).select(
        tagged["_seq"], batches[_TABLE], batches[_BATCH], batches[_AGAIN], tagged[_ID]
    )
    # one pass over the identities: per (table, identity), its lowest batch; a row of a
    # replay batch in a higher one is a copy (a batch that does not re-read lands each row
    # once, even one with the identity of an earlier row: snapshot chunks read at one point)
    same = Window.partitionBy(_TABLE, _ID)
    return (
        every.select(
            "_seq",
            _BATCH,
            F.min(_BATCH).over(same).alias(_FIRST),
            _AGAIN,
        )
        .where((F.col(_BATCH) > F.col(_FIRST)) & F.col(_AGAIN))
        .select("_seq")
        .distinct()
    )


def read_committed(
    spark: SparkSession, files: Sequence[CommittedFile], schema: T.StructType
) -> DataFrame:
    """The rows of ``files`` (of one schema), each once: whole files read together, slices of
    a compaction output read from it by their ``_seq`` ranges (``compacted.reads``).
    ``schema``: the files' Spark schema (``type_map.spark_schema``: the reader then reads no
    footer to find it), or only the columns to read (``_seq`` is added)."""
    if "_seq" not in schema.names:
        schema = T.StructType([*schema.fields, T.StructField("_seq", T.LongType())])
    reader = spark.read.schema(schema)
    for item in files:
        item.check_size()
    planned = reads(files)
    frames: list[DataFrame] = []
    whole = [spark_uri(str(r.path)) for r in planned if r.ranges is None]
    if whole:
        frames.append(reader.parquet(*whole))
    for read in planned:
        if read.ranges is not None:
            test: Column | None = None
            for low, high in read.ranges:
                inside = F.col("_seq").between(F.lit(low), F.lit(high))
                test = inside if test is None else test | inside
            assert test is not None
            frames.append(reader.parquet(spark_uri(str(read.path))).where(test))
    return union_all(frames)


def _within(segments: Sequence[Segment]) -> Column:
    """Rows whose ``_seq`` lies in one of ``segments`` (of one landed table)."""
    out: Column | None = None
    for segment in segments:
        test = F.col("_seq") > F.lit(segment.after)
        if segment.before is not None:
            test = test & (F.col("_seq") < F.lit(segment.before))
        out = test if out is None else out | test
    return F.lit(False) if out is None else out


def read_lineage(
    spark: SparkSession,
    lineage: Lineage,
    files: Sequence[CommittedFile],
    rereading: Collection[int],
    options: MaterializeOptions,
) -> tuple[TableChanges, list[CommittedFile]] | None:
    """The row changes of ``lineage``'s current state (``files``: every committed file of
    the landing zone, or of its landed tables), each once; and the files they come from.
    A lineage without a file yet has no rows: its columns are those its newest create or
    alter record gives (``Record.schema``); None when none does (no schema to show)."""
    schema_files = lineage.files(files)
    if not schema_files:
        return _no_rows(spark, lineage, options)
    data_files = lineage.files(files, data=True)
    wanted = {f.path for f in data_files}
    drop = (
        replayed(spark, [f for f in files if f.table in lineage.tables], rereading)
        if data_files
        else None
    )
    data = lineage.data()
    versions = file_versions(schema_files)
    frames: list[DataFrame] = []
    for version in versions:
        rows = [f for f in version.files if f.path in wanted]
        if not rows:  # only for the schema (rows before a truncate)
            frames.append(spark.createDataFrame([], spark_schema(version.schema)))
            continue
        frame = read_committed(spark, rows, spark_schema(version.schema))
        frame = frame.where(_within([s for s in data if s.table == version.table]))
        if drop is not None:
            frame = frame.join(drop, "_seq", "left_anti").select(*[_col(c) for c in frame.columns])
        frames.append(frame)
    keyed = [
        FileVersion(v.table, v.schema, tuple(f for f in v.files if f.path in wanted), v.newest)
        for v in versions
    ]
    keyed = [v for v in keyed if v.files] or [versions[-1]]
    read = _assemble(lineage.name, versions, frames, keyed, options)
    return read, data_files


def _no_rows(
    spark: SparkSession, lineage: Lineage, options: MaterializeOptions
) -> tuple[TableChanges, list[CommittedFile]] | None:
    """A table without any row yet, in the columns its newest record with a schema gives: an
    empty read of a file of that schema, aligned and keyed as the files will be."""
    schema = next((r.schema for r in reversed(lineage.records) if r.schema is not None), None)
    if schema is None:
        return None
    frame = spark.createDataFrame([], spark_schema(schema))
    aligned = align(frame, schema, schema, frame.schema)
    override = options.keys.get(lineage.name)
    key = tuple(override) if override is not None else (file_key(schema) or ())
    model = table_model(lineage.name, [aligned], key, options)
    return TableChanges(model, normalize(aligned, model)), []
