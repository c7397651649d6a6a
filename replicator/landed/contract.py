"""The landing zone as the Spark side reads it: names and keys the daemon writes.

``spark/`` reads the landing zone the daemon writes (``sink.landing``, ``sink.parquet_writer``,
``sink.arrow_types``) but must not import the daemon's packages (``sink``, ``source``,
``binlog``, the C core): PySpark jobs run where only pyspark and pyarrow are installed, and a
change inside the daemon must not silently change how Spark reads. The few literals both sides
share are therefore copied here; ``tests/spark`` checks them against the daemon's.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "ABSENT",
    "AUX",
    "BEFORE",
    "BEFORE_KEY",
    "COMPACTIONS",
    "FIELD_FILL_KEY",
    "FIELD_ID_KEY",
    "LANDING_ID_KEY",
    "LIFECYCLE_OPS",
    "MANIFESTS",
    "META",
    "PRIMARY_KEY_KEY",
    "RECORD_SCHEMA_KEY",
    "STATE_SEQ",
    "UNKNOWN",
    "safe_part",
    "table_rel",
]

MANIFESTS = "_manifests"  # <root>/_manifests/<20-digit batch>.json: the commit records
COMPACTIONS = "_compactions"  # <root>/_compactions/<20-digit id>.json: compaction records
LANDING_ID_KEY = "landing_id"  # in each manifest: the landing zone's id (sink.identity)
PRIMARY_KEY_KEY = b"replicator.primary_key"  # footer: JSON list of the key's column names
FIELD_ID_KEY = b"PARQUET:field_id"  # field metadata: the column's stable id
FIELD_FILL_KEY = b"replicator.fill"  # field metadata: what rows older than the column hold
LIFECYCLE_OPS = frozenset({"create", "alter", "truncate", "drop", "rename"})
# a create or alter record's schema of the table's files from then on (Arrow IPC, base64;
# pipeline.lifecycle): a table without rows yet has no file to show its columns
RECORD_SCHEMA_KEY = "schema"

# the columns of a change row besides the table's own (``sink.changes``, ``sink.parquet_writer``)
META = ("_op", "_seq", "_gtid", "_ts", "_server_id", "_binlog_file", "_binlog_pos")
ABSENT = "_absent"  # the columns a row image left out
BEFORE = "_before"  # an update's whole before image (``sink.keep_before_image``)
BEFORE_KEY = "_before_key"  # an update's before-image identity columns
AUX = frozenset({*META, ABSENT, BEFORE, BEFORE_KEY})
# what both materialize outputs' readers add: columns absent because ALTER TABLE added them
# with a fill the binlog does not carry (``columns``), and the ``_seq`` an earlier state's
# rows take (older than every change)
UNKNOWN = "__replicator_unknown"
STATE_SEQ = -(2**63)


def safe_part(name: str) -> str:
    """A database or table name as the landing zone's directory name (``sink.landing._safe``)."""
    cleaned = name.replace("/", "%2F").replace("\0", "%00")
    return f"%2E{cleaned[1:]}" if cleaned.startswith(".") else cleaned


def table_rel(name: str) -> Path:
    """``db.t`` as ``<db>/<t>`` under the landing root (and the output directory)."""
    database, _, table = name.partition(".")
    return Path(safe_part(database), safe_part(table))
