"""Spark's side of the output state: writing a merged state, reading an earlier one.

``state`` keeps the versions, links and JSON; this module runs the Spark jobs in between:
``write_state`` writes the merge (and turns a merge that cannot apply a change exactly into
its IntegrityError), ``read_state`` reads an earlier state back in a table model's columns.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
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
    "state_schema",
    "write_settings",
    "write_state",
]

# Session settings while the state is written: microsecond timestamps (not INT96), and
# dates before 1582 written as they are (proleptic Gregorian, as the landing zone's).
WRITE_CONF = {
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.parquet.datetimeRebaseModeInWrite": "CORRECTED",
    "spark.sql.parquet.int96RebaseModeInWrite": "CORRECTED",
}


# the sessions some thread of this process writes a state with: how many write, and the
# values WRITE_CONF's settings had before the first of them (``write_settings``)
_writing: dict[int, tuple[int, dict[str, str | None]]] = {}
_writing_lock = threading.Lock()


@contextlib.contextmanager
def write_settings(spark: SparkSession) -> Iterator[None]:
    """``WRITE_CONF`` set on ``spark`` while a state is written, then the values before it
    put back. Threads share a session's settings: tables written at once
    (``MaterializeOptions.parallel``) and the streaming queries of several tables. So the
    first writer of a session sets them and the last to finish restores them: a writer that
    saved and restored them on its own would restore them under another one still writing."""
    key = id(spark)
    with _writing_lock:
        writers, saved = _writing.get(key, (0, {}))
        if not writers:
            saved = {k: spark.conf.get(k, None) for k in WRITE_CONF}
            for k, v in WRITE_CONF.items():
                spark.conf.set(k, v)
        _writing[key] = (writers + 1, saved)
    try:
        yield
    finally:
        with _writing_lock:
            writers, saved = _writing.pop(key)
            if writers > 1:
                _writing[key] = (writers - 1, saved)
            else:
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
