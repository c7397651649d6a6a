"""The landing zone's names and keys: what the daemon writes and every reader reads.

The commit records' fields (manifests, compaction records) are defined here, and the daemon's
writers (``sink.landing``, ``sink.compaction``) import them from here. The readers
(``landed``, ``spark/``, ``delta/``) must not import the daemon's packages (``sink``,
``source``, ``binlog``, the C core): PySpark jobs run where only pyspark and pyarrow are
installed. The few literals of the data files' footers and fields that ``sink`` defines are
copied here; ``tests/spark`` checks them against the daemon's.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = [
    "ABSENT",
    "AUX",
    "BEFORE",
    "BEFORE_KEY",
    "COMPACTIONS",
    "DATA_BYTES_KEY",
    "DIGEST_KEY",
    "FIELD_FILL_KEY",
    "FIELD_ID_KEY",
    "HISTORY_DIGEST_KEY",
    "LANDING_ID_KEY",
    "LIFECYCLE_OPS",
    "MANIFESTS",
    "META",
    "PRIMARY_KEY_KEY",
    "RECORD_SCHEMA_KEY",
    "STATE_SEQ",
    "UNKNOWN",
    "WORKING_COLUMNS",
    "is_digest",
    "is_landing_id",
    "safe_part",
    "table_rel",
]

MANIFESTS = "_manifests"  # <root>/_manifests/<20-digit batch>.json: the commit records
COMPACTIONS = "_compactions"  # <root>/_compactions/<20-digit id>.json: compaction records
LANDING_ID_KEY = "landing_id"  # in each manifest: the landing zone's id (sink.identity)
DIGEST_KEY = "sha256"  # a file's hash in manifests, compaction records and the checkpoint
DATA_BYTES_KEY = "data_bytes"  # a compaction output's column chunk bytes (what planning sizes)
HISTORY_DIGEST_KEY = "schema_history_sha256"  # a manifest's pin of its schema history file
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
# the working columns of the Spark merge (``spark.merge``), beside a table's own: a table
# column of one of these names (in any case) is refused by both materialize outputs, so that
# both accept the same tables
WORKING_COLUMNS = frozenset(
    {
        "__replicator_meta",
        "__replicator_before_key",
        "__replicator_event",
        "__replicator_absent_lower",
        "__replicator_unknown_lower",
        UNKNOWN,
    }
)


_DIGEST = re.compile(r"[0-9a-f]{64}")
_LANDING_ID = re.compile(r"[0-9a-f]{32}")


def is_digest(value: object) -> bool:
    """True for a hash as the daemon writes them (SHA-256, 64 lowercase hex digits)."""
    return isinstance(value, str) and _DIGEST.fullmatch(value) is not None


def is_landing_id(value: object) -> bool:
    """True for a landing zone id (``sink.identity``: 32 lowercase hex digits)."""
    return isinstance(value, str) and _LANDING_ID.fullmatch(value) is not None


def safe_part(name: str) -> str:
    """A database or table name as the landing zone's directory name (``sink.landing._safe``)."""
    cleaned = name.replace("/", "%2F").replace("\0", "%00")
    return f"%2E{cleaned[1:]}" if cleaned.startswith(".") else cleaned


def table_rel(name: str) -> Path:
    """``db.t`` as ``<db>/<t>`` under the landing root (and the output directory)."""
    database, _, table = name.partition(".")
    return Path(safe_part(database), safe_part(table))
