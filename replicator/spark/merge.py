"""The current-state algebra: from row changes (and an earlier state) to a table's rows.

Input: change rows in the layout ``materialize.read_changes`` produces (the table's columns
cast to one schema, the metadata columns, ``_absent``, and ``_before_key``: the identity
columns of an update's before image), and optionally the state an earlier run wrote. The
state's rows count as snapshot reads older than every change. Everything is one shuffle
(keyed) or two (keyless) and is lazy; a row that cannot be applied exactly stops the job with
an error naming it (``raise_error``; ``failure`` turns it back into an exception).

**Tables with a primary key** (the key the files record, or ``--key``). Every change is an
event on the key it concerns:

* insert and snapshot read (``c``, ``r``): the row at its key, replacing whatever was there;
* delete (``d``): the key's row goes;
* update (``u``): the row at its new key. The old key comes from ``_before_key``; when it
  differs from the new one (an UPDATE of the primary key) the update is two events at the
  same ``_seq``: the old key's row goes, and the new key gets the row. Without
  ``_before_key`` (files of older writers) a primary-key change cannot be seen: that is an
  error unless ``assume_stable_keys`` says the application never updates keys.

Per key, the event with the highest ``_seq`` decides whether a row exists. Its columns come,
each on its own, from the latest event since the last insert/delete that carried the column:
a partial row image (``binlog_row_image=MINIMAL``/``NOBLOB``; the missing columns are in
``_absent``) changes only the columns it has. A column no event carried (an update of a row
the stream never saw, an insert whose image left a default out, a key-changing update's
unchanged columns under MINIMAL) is unknown: an error, or with ``allow_unknown`` null and
listed in the state's ``_absent``. Never a made-up value.

**Tables without a primary key** are multisets of whole rows, as the server stores them:
an insert adds one copy of its row, a delete removes one copy of its before image, an update
removes one copy of its before image (``_before_key`` holds the whole row then) and adds its
after image. Counts are applied in ``_seq`` order and never go below zero: a delete of a
row the stream never inserted (it predates the stream) removes nothing and is counted in
``unmatched`` — as a keyed table ignores a delete of an unknown key, but reported, because a
whole-row identity also misses when a row's stored value is not what the binlog says (after
an ALTER TABLE ADD COLUMN, the server fills the new column with its default in rows the
binlog never shows again: they are null in the state). A partial row image cannot identify a
row without a key: an error.

Columns an ALTER TABLE ADD COLUMN added hold, in rows older than the column, the fill the
column's footer records (``columns``; the changes arrive filled). An expression default
(``CURRENT_TIMESTAMP``) is not in the binlog: such a column is absent in those rows, listed in
``_absent`` and in ``UNKNOWN``. A keyed table treats it as any column no row image carried;
a table without key keeps it out of the partial-image check and makes it part of the row's
identity (an unknown value is not a null): a row holding one is an error, or with
``allow_unknown`` null and listed in ``_absent``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..errors import IntegrityError
from ..landed.columns import refuse_working_columns
from ..landed.contract import ABSENT, BEFORE, BEFORE_KEY, META, STATE_SEQ, UNKNOWN
from .schema import find_field

__all__ = [
    "ABSENT",
    "BEFORE",
    "BEFORE_KEY",
    "META",
    "META_TYPES",
    "Merged",
    "TableModel",
    "UNKNOWN",
    "current_state",
    "fail",
    "failure",
]

META_TYPES = T.StructType(
    [
        T.StructField("_op", T.StringType()),
        T.StructField("_seq", T.LongType()),
        T.StructField("_gtid", T.StringType()),
        T.StructField("_ts", T.TimestampType()),
        T.StructField("_server_id", T.LongType()),
        T.StructField("_binlog_file", T.StringType()),
        T.StructField("_binlog_pos", T.LongType()),
    ]
)
# working columns next to the table's own (all named in ``contract.WORKING_COLUMNS``, which
# ``TableModel`` refuses as table column names)
META_COL, BKEY_COL, EVENT_COL = "__replicator_meta", "__replicator_before_key", "__replicator_event"
# the events' ``_absent`` and ``_unknown`` names in lower case, made once a frame, for
# ``_present``/``_partial`` (a lambda a column costs tens of calls into the JVM each)
ABSENT_LOWER, UNKNOWN_LOWER = "__replicator_absent_lower", "__replicator_unknown_lower"
_MARK, _END = "[replicator] ", " [/replicator]"
_FAILURE = re.compile(re.escape(_MARK) + r"(.*?)" + re.escape(_END), re.DOTALL)


@dataclass(frozen=True, slots=True)
class TableModel:
    """What the merge needs to know about a table."""

    name: str  # db.t
    columns: T.StructType  # the table's own columns, unified over its versions
    key: tuple[str, ...]  # primary key (spelled as in ``columns``); () = whole rows
    keep_metadata: bool = False
    allow_unknown: bool = False
    assume_stable_keys: bool = False

    def __post_init__(self) -> None:
        refuse_working_columns(self.name, self.columns.names)

    @property
    def identity(self) -> tuple[str, ...]:
        return self.key or tuple(self.columns.names)

    @property
    def identity_type(self) -> T.StructType:
        """The type of ``_before_key``."""
        return T.StructType(
            [T.StructField(n, self.columns[n].dataType, True) for n in self.identity]
        )

    def output_schema(self) -> T.StructType:
        fields = list(self.columns.fields)
        if self.keep_metadata:
            fields.extend(META_TYPES.fields)
        if self.allow_unknown:
            fields.append(T.StructField(ABSENT, T.ArrayType(T.StringType(), True), True))
        return T.StructType(fields)


@dataclass(frozen=True, slots=True)
class Merged:
    rows: DataFrame  # the new state, in ``TableModel.output_schema()``
    # keyless tables: one row per distinct whole row, ``unmatched`` among its columns (to
    # sum); ``rows`` derives from it, so persisting it first saves a second merge
    groups: DataFrame | None


def failure(exc: BaseException) -> IntegrityError | None:
    """The IntegrityError a merge raised inside a Spark job, or None for another error."""
    found = _FAILURE.search(str(exc))
    if found is None:
        return None
    message, _, hint = found.group(1).partition(" || ")
    return IntegrityError(message, hint=hint or None)


def fail(table: str, what: Column | str, hint: str, *, column: str | None = None) -> Column:
    """Stops the job with an IntegrityError (``failure``) naming ``table`` (and ``column``):
    ``what`` happened, ``hint`` says what to do."""
    where = f"table {table}" + ("" if column is None else f", column {column}")
    parts = [F.lit(f"{_MARK}{where}: "), what if isinstance(what, Column) else F.lit(what)]
    return F.raise_error(F.concat(*parts, F.lit(f" || {hint}{_END}")))


def _at() -> Column:
    return F.concat(
        F.lit(" at "),
        F.col("_binlog_file"),
        F.lit(":"),
        F.col("_binlog_pos").cast("string"),
        F.lit(" (_seq "),
        F.col("_seq").cast("string"),
        F.lit(")"),
    )


def _c(name: str) -> Column:
    return F.col("`" + name.replace("`", "``") + "`")


def _present(name: str) -> Column:
    """The change carried column ``name`` (it is not in ``_absent``, in any case)."""
    return ~F.array_contains(F.col(ABSENT_LOWER), name.lower())


def _partial(name: str) -> Column:
    """The row image left column ``name`` out (absent, and not for an unknown fill)."""
    return ~_present(name) & ~F.array_contains(F.col(UNKNOWN_LOWER), name.lower())


def _lowered(frame: DataFrame) -> DataFrame:
    """``frame`` with ``ABSENT_LOWER`` and ``UNKNOWN_LOWER`` added."""
    return frame.select(
        "*",
        F.transform(F.col(ABSENT), F.lower).alias(ABSENT_LOWER),
        F.transform(F.col(UNKNOWN), F.lower).alias(UNKNOWN_LOWER),
    )


def _events(model: TableModel, changes: DataFrame | None, state: DataFrame | None) -> DataFrame:
    """Changes and state rows in one layout: the columns, ``_op``, ``_seq`` (order),
    ``_m`` (metadata struct), ``_absent``, ``_bk`` (before-image identity), ``_unknown``,
    and the lower-case names of the two (``_lowered``)."""
    names = model.columns.names
    frames: list[DataFrame] = []
    if state is not None:
        has_meta = all(find_field(state.schema, m) is not None for m in META)
        has_absent = find_field(state.schema, ABSENT) is not None
        frames.append(
            state.select(
                *[_c(n) for n in names],
                F.lit("r").alias("_op"),
                F.lit(STATE_SEQ).cast("long").alias("_seq"),
                (
                    F.struct(*[F.col(m) for m in META])
                    if has_meta
                    else F.lit(None).cast(META_TYPES)
                ).alias(META_COL),
                (
                    F.coalesce(F.col(ABSENT), F.array().cast("array<string>"))
                    if has_absent
                    else F.array().cast("array<string>")
                ).alias(ABSENT),
                F.lit(None).cast(model.identity_type).alias(BKEY_COL),
                (
                    F.coalesce(F.col(ABSENT), F.array().cast("array<string>"))
                    if has_absent and not model.key
                    else F.array().cast("array<string>")
                ).alias(UNKNOWN),
                F.lit(None).cast("string").alias("_binlog_file"),
                F.lit(None).cast("long").alias("_binlog_pos"),
            )
        )
    if changes is not None:
        frames.append(
            changes.select(
                *[_c(n) for n in names],
                F.col("_op"),
                F.col("_seq"),
                F.struct(*[F.col(m) for m in META]).alias(META_COL),
                F.col(ABSENT),
                F.col(BEFORE_KEY).alias(BKEY_COL),
                (
                    F.col(UNKNOWN)
                    if find_field(changes.schema, UNKNOWN) is not None
                    else F.array().cast("array<string>")
                ).alias(UNKNOWN),
                F.col("_binlog_file"),
                F.col("_binlog_pos"),
            )
        )
    if not frames:
        raise ValueError("nothing to merge")
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return _lowered(out)


def current_state(
    model: TableModel, changes: DataFrame | None, state: DataFrame | None = None
) -> Merged:
    """The table's rows after ``state`` (an earlier output, or None) and ``changes``."""
    events = _events(model, changes, state)
    if model.key:
        return Merged(_keyed(model, events), None)
    return _keyless(model, events)


# ---------------------------------------------------------------------------- keyed tables


def _key_struct(model: TableModel, values: Sequence[Column]) -> Column:
    return F.struct(*[v.alias(k) for k, v in zip(model.key, values, strict=True)])


def _keyed(model: TableModel, events: DataFrame) -> DataFrame:
    op = F.col("_op")
    is_u, is_d, is_put = op == "u", op == "d", op.isin("c", "r")
    has_bk = F.col(BKEY_COL).isNotNull()
    key_absent = F.lit(False)
    old: list[Column] = []
    new: list[Column] = []
    for k in model.key:
        after, before = _c(k), F.col(BKEY_COL).getField(k)
        key_absent = key_absent | ~_present(k)
        from_after = after if model.assume_stable_keys else F.lit(None)
        old.append(F.when(is_u, F.when(has_bk, before).otherwise(from_after)).when(is_d, after))
        new.append(F.when(is_u, F.when(_present(k), after).otherwise(before)).when(is_put, after))
    same_key = F.lit(True)
    for o, n in zip(old, new, strict=True):
        same_key = same_key & o.eqNullSafe(n)
    moved = is_u & has_bk & ~same_key
    old_key, new_key = _key_struct(model, old), _key_struct(model, new)
    kind = F.when(is_d, "del").when(is_put | moved, "row").otherwise("upd")
    main = F.struct(F.when(is_d, old_key).otherwise(new_key).alias("k"), kind.alias("kind"))
    full = "set binlog_row_image=FULL on the source and replay from before this position"
    null_key = (
        f"NULL identifies no row: pass --key {model.name}=... naming columns that are never "
        f"NULL (--key {model.name}= for whole rows), with --full-refresh"
    )
    refused: list[tuple[Column, Column]] = [
        (  # a nullable --key column
            (F.col("_seq") != F.lit(STATE_SEQ))
            & (
                (_present(k) & _c(k).isNull())
                | (is_u & has_bk & F.col(BKEY_COL).getField(k).isNull())
            ),
            fail(
                model.name,
                F.concat(F.lit(f"key column {k} is NULL in a row change"), _at()),
                null_key,
            ),
        )
        for k in model.key
    ]
    refused += [
        (
            (is_put | is_d) & key_absent,
            fail(model.name, F.concat(F.lit("a row image without its primary key"), _at()), full),
        ),
        (
            is_u & ~has_bk & key_absent,
            fail(
                model.name,
                F.concat(F.lit("an update names neither its old nor its new key"), _at()),
                full,
            ),
        ),
        (
            is_u & ~has_bk & F.lit(not model.assume_stable_keys),
            fail(
                model.name,
                F.concat(F.lit("an update without its before-image key (_before_key)"), _at()),
                "files from an older replicator cannot show a primary-key change: pass "
                "--assume-stable-keys if the application never updates primary keys, "
                "or re-land the changes with this version",
            ),
        ),
    ]
    checked = F.when(*refused[0])
    for condition, error in refused[1:]:
        checked = checked.when(condition, error)
    checked = checked.otherwise(main)
    out_event = F.when(moved, F.struct(old_key.alias("k"), F.lit("del").alias("kind")))
    exploded = events.select(
        "*",
        F.explode(F.filter(F.array(checked, out_event), lambda e: e.isNotNull())).alias(EVENT_COL),
    )

    kind_col, seq = F.col(EVENT_COL).getField("kind"), F.col("_seq")
    is_reset = kind_col != "upd"
    values = [n for n in model.columns.names if n not in model.key]
    aggregates = [
        F.max_by(F.struct(kind_col.alias("kind"), F.col(META_COL).alias("m")), seq).alias("_last")
    ]
    for i, name in enumerate(values):
        present = (kind_col != "del") & _present(name)
        aggregates.append(
            F.max_by(
                F.struct(present.alias("p"), _c(name).alias("v")),
                F.when(present | is_reset, seq),
            ).alias(f"_v{i}")
        )
    grouped = (
        exploded.groupBy(F.col(EVENT_COL).getField("k").alias("_k"))
        .agg(*aggregates)
        .filter(F.col("_last.kind") != "del")
    )
    known = {name: F.coalesce(F.col(f"_v{i}.p"), F.lit(False)) for i, name in enumerate(values)}
    unknown = (
        F.array_compact(F.array(*[F.when(~p, F.lit(n)) for n, p in known.items()]))
        if known
        else F.array().cast("array<string>")
    )
    columns: list[Column] = []
    for name in model.columns.names:
        if name in model.key:
            column = F.col("_k").getField(name)
        else:
            i = values.index(name)
            column = F.when(known[name], F.col(f"_v{i}.v"))
        columns.append(column.alias(name))
    if not model.allow_unknown:
        first = model.columns.names[0]
        columns[0] = (
            F.when(
                F.size(unknown) > 0,
                fail(
                    model.name,
                    F.concat(
                        F.lit("the row with key "),
                        F.to_json(F.col("_k")),
                        F.lit(" has columns no row image carried: "),
                        F.array_join(unknown, ", "),
                    ),
                    "the source logs partial row images (binlog_row_image=MINIMAL or "
                    "NOBLOB), the stream began after the row was written, or ALTER TABLE "
                    "added the column with an expression default (its value in older rows is "
                    "not in the binlog): set binlog_row_image=FULL and replay, or pass "
                    "--allow-unknown to keep such columns as null, listed in _absent",
                ),
            )
            .otherwise(columns[0])
            .alias(first)
        )
    if model.keep_metadata:
        columns.extend(F.col("_last.m").getField(m).alias(m) for m in META)
    if model.allow_unknown:
        columns.append(unknown.alias(ABSENT))
    return grouped.select(*columns)


# --------------------------------------------------------------------------- keyless tables


def _keyless(model: TableModel, events: DataFrame) -> Merged:
    names = model.columns.names
    op = F.col("_op")
    is_u, is_d = op == "u", op == "d"
    any_absent = F.lit(False)
    for name in names:
        any_absent = any_absent | _partial(name)
    # an unknown fill is part of the row: its value is not the null it is shown as
    unknown = F.array_sort(F.col(UNKNOWN)).alias(UNKNOWN)
    row = F.struct(*[_c(n).alias(n) for n in names], unknown)
    before = F.struct(*[F.col(BKEY_COL).getField(n).alias(n) for n in names], unknown)
    after = F.struct(
        *[
            F.when(_present(n), _c(n)).otherwise(F.col(BKEY_COL).getField(n)).alias(n)
            for n in names
        ],
        unknown,
    )

    def delta(sign: int, sub: int, image: Column) -> Column:
        return F.struct(F.lit(sign).alias("sign"), F.lit(sub).alias("sub"), image.alias("r"))

    hint = "a table without primary key is a multiset of whole rows: "
    deltas = (
        F.when(
            ~is_u & any_absent,
            fail(
                model.name,
                F.concat(F.lit("a partial row image of a table without primary key"), _at()),
                hint + "set binlog_row_image=FULL on the source and replay, or name the "
                f"identity columns with --key {model.name}=...",
            ),
        )
        .when(
            is_u & F.col(BKEY_COL).isNull(),
            fail(
                model.name,
                F.concat(
                    F.lit("an update of a table without primary key lacks its before image"), _at()
                ),
                hint + "the update's before image is needed (files from an older replicator "
                "have it only with sink.keep_before_image)",
            ),
        )
        .when(is_u, F.array(delta(-1, 0, before), delta(1, 1, after)))
        .when(is_d, F.array(delta(-1, 0, row)))
        .otherwise(F.array(delta(1, 0, row)))
    )
    exploded = events.select(F.col("_seq"), F.col(META_COL), F.explode(deltas).alias(EVENT_COL))
    running = Window.partitionBy(F.col(EVENT_COL).getField("r")).orderBy(
        F.col("_seq"), F.col(EVENT_COL).getField("sub")
    )
    running = running.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    sign = F.col(EVENT_COL).getField("sign")
    grouped = (
        exploded.withColumn("_p", F.sum(sign).over(running))
        .groupBy(F.col(EVENT_COL).getField("r").alias("_r"))
        .agg(
            F.sum(sign).alias("_total"),
            F.min("_p").alias("_low"),
            F.max_by(F.col(META_COL), F.when(sign > 0, F.col("_seq"))).alias(META_COL),
        )
        .select(
            "_r",
            META_COL,
            (F.col("_total") - F.least(F.lit(0), F.col("_low"))).alias("_n"),
            (-F.least(F.lit(0), F.col("_low"))).alias("unmatched"),
        )
    )
    copies = grouped.filter(F.col("_n") > 0).select(
        F.explode(
            F.array_repeat(
                F.struct(F.col("_r"), F.col(META_COL).alias("_m")), F.col("_n").cast("int")
            )
        ).alias("_x")
    )
    columns = [F.col("_x._r").getField(n).alias(n) for n in names]
    held = F.col("_x._r").getField(UNKNOWN)
    if not model.allow_unknown:
        columns[0] = (
            F.when(
                F.size(held) > 0,
                fail(
                    model.name,
                    F.concat(
                        F.lit("a row holds columns whose value is not in the binlog: "),
                        F.array_join(held, ", "),
                    ),
                    "ALTER TABLE added them with an expression default, so rows older than the "
                    "column hold a value the server computed: pass --allow-unknown to keep "
                    "them as null, listed in _absent",
                ),
            )
            .otherwise(columns[0])
            .alias(names[0])
        )
    if model.keep_metadata:
        columns.extend(F.col("_x._m").getField(m).alias(m) for m in META)
    if model.allow_unknown:
        columns.append(held.alias(ABSENT))
    return Merged(copies.select(*columns), grouped)
