"""Spark's side of the output state: writing a merged state, reading an earlier one.

``state`` keeps the versions, links and JSON; this module runs the Spark jobs in between:
``write_state`` writes the merge (and turns a merge that cannot apply a change exactly into
its IntegrityError), ``read_state`` reads an earlier state back in a table model's columns.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from pathlib import Path

import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..landed.committed import spark_uri
from . import state as st
from .merge import ABSENT, META, Merged, TableModel, failure
from .schema import conform_frame

__all__ = [
    "WRITE_CONF",
    "count_rows",
    "read_state",
    "session_conf",
    "state_schema",
    "write_state",
]

# Session settings while the state is written: microsecond timestamps (not INT96), and
# dates before 1582 written as they are (proleptic Gregorian, as the landing zone's).
WRITE_CONF = {
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.parquet.datetimeRebaseModeInWrite": "CORRECTED",
    "spark.sql.parquet.int96RebaseModeInWrite": "CORRECTED",
}


@contextlib.contextmanager
def session_conf(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """Set session settings for a while, then put the old values back."""
    saved = {k: spark.conf.get(k, None) for k in settings}
    for k, v in settings.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, old in saved.items():
            if old is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, old)


def count_rows(directory: Path) -> int:
    """Rows in the Parquet files Spark wrote to ``directory`` (from their footers)."""
    return sum(pq.ParquetFile(p).metadata.num_rows for p in directory.glob("part-*"))


def write_state(merged: Merged, directory: Path) -> tuple[int, int]:
    """Run the merge into ``directory``; returns (rows, unmatched). A merge that cannot
    apply a change exactly raises its IntegrityError (``merge.failure``)."""
    groups = merged.groups
    if groups is not None:
        groups.persist()
    try:
        merged.rows.write.option("compression", "zstd").parquet(str(directory))
        unmatched = 0
        if groups is not None:
            total = groups.agg(F.sum("unmatched")).first()
            unmatched = int(total[0] or 0) if total is not None else 0
    except Exception as exc:
        found = failure(exc)
        if found is not None:
            raise found from None
        raise
    finally:
        if groups is not None:
            groups.unpersist()
    return count_rows(directory), unmatched


def state_schema(previous: st.TableState) -> T.StructType:
    """The Spark schema of a state's rows, as recorded with it."""
    schema: T.StructType = T.StructType.fromJson(json.loads(previous.schema))
    return schema


def read_state(
    spark: SparkSession, found: tuple[st.TableState, Path], model: TableModel
) -> DataFrame:
    """An earlier state's rows, cast to ``model``'s columns, with the metadata and
    ``_absent`` columns ``model`` keeps."""
    previous, directory = found
    # read literally (``spark_uri``): the directory is named after the table; Spark's writer
    # above takes its path literally already
    frame = spark.read.schema(state_schema(previous)).parquet(spark_uri(directory))
    extra = {m: F.col(m) for m in META} if model.keep_metadata else {}
    if model.allow_unknown:
        extra[ABSENT] = F.col(ABSENT)
    return conform_frame(frame, model.columns, extra=extra)
