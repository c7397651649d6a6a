"""Reading a Delta table back with DuckDB's delta extension (PyPI ``duckdb-ext-delta``):
a reader independent of the writer (delta-rs), as Trino, Databricks or Spark would be."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import duckdb
import duckdb_ext  # type: ignore[import-untyped]
import pyarrow as pa

EXTENSIONS = Path(next(iter(duckdb_ext.__path__))) / "extensions"


@functools.cache
def connect() -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with the delta extension loaded from the installed package (no
    download: this machine reaches PyPI, not DuckDB's extension repository). One per
    process: loading the extension takes longer than most reads."""
    con = duckdb.connect(config={"extension_directory": str(EXTENSIONS)})
    con.execute("LOAD delta")
    con.execute("SET TimeZone = 'UTC'")  # TIMESTAMP WITH TIME ZONE values shown in UTC
    return con


def read_delta(
    path: Path | str, order_by: str | None = None
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """The table's column names and rows, as DuckDB's delta_scan reads them."""
    sql = "SELECT * FROM delta_scan(?)"
    if order_by:
        sql += f" ORDER BY {order_by}"
    cursor = connect().cursor()
    try:
        cursor.execute(sql, [str(path)])
        names = [d[0] for d in cursor.description]
        return names, cursor.fetchall()
    finally:
        cursor.close()


def read_delta_arrow(path: Path | str) -> pa.Table:
    """The table as DuckDB's delta_scan reads it, handed over as Arrow."""
    cursor = connect().cursor()
    try:
        return cursor.execute("SELECT * FROM delta_scan(?)", [str(path)]).fetch_arrow_table()
    finally:
        cursor.close()
