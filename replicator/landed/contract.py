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
    "CHECKPOINT",
    "COMPACTIONS",
    "DATA_FILE",
    "DATA_BYTES_KEY",
    "DIGEST_KEY",
    "FIELD_FILL_KEY",
    "FIELD_ID_KEY",
    "FIELD_TYPE_KEY",
    "HELD_DIGESTS_KEY",
    "PREVIOUS_DIGEST_KEY",
    "HISTORY_DIGEST_KEY",
    "LANDING_ID_KEY",
    "LIFECYCLE_OPS",
    "MANIFESTS",
    "META",
    "PRIMARY_KEY_KEY",
    "RECORD_SCHEMA_KEY",
    "SNAPSHOT_RESET",
    "STATE_SEQ",
    "UNKNOWN",
    "WORKING_COLUMNS",
    "is_digest",
    "is_landing_id",
    "safe_part",
    "table_rel",
]

# the statement of the ``truncate`` record a snapshot writes before a table's rows (a table
# read whole, or taken in again): no replay lands it again, so it is never a replayed copy
SNAPSHOT_RESET = "snapshot: the table's rows as of this point follow"

MANIFESTS = "_manifests"  # <root>/_manifests/<20-digit batch>.json: the commit records
COMPACTIONS = "_compactions"  # <root>/_compactions/<20-digit id>.json: compaction records
CHECKPOINT = "_state/checkpoint.json"  # the daemon's checkpoint (``checkpoint.CHECKPOINT_KEY``)
# a data file under its final name (``sink.landing``): <db>/<table>/part-<first _seq>.parquet
DATA_FILE = re.compile(r"[^/]+/[^/]+/part-[^/]*\.parquet")
LANDING_ID_KEY = "landing_id"  # in each manifest: the landing zone's id (sink.identity)
DIGEST_KEY = "sha256"  # a file's hash in manifests, compaction records and the checkpoint
DATA_BYTES_KEY = "data_bytes"  # a compaction output's column chunk bytes (what planning sizes)
HISTORY_DIGEST_KEY = "schema_history_sha256"  # a manifest's pin of its schema history file
HELD_DIGESTS_KEY = "xa_pending_sha256"  # a manifest's pins of its held XA files, by name
PREVIOUS_DIGEST_KEY = "previous_sha256"  # a manifest's pin of the one before it
PRIMARY_KEY_KEY = b"replicator.primary_key"  # footer: JSON list of the key's column names
FIELD_ID_KEY = b"PARQUET:field_id"  # field metadata: the column's stable id
FIELD_FILL_KEY = b"replicator.fill"  # field metadata: what rows older than the column hold
FIELD_TYPE_KEY = b"replicator.mysql_type"  # field metadata: the source type, "DECIMAL(40,4)"
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


# the escapes of ``safe_part``: anywhere in a name, at its start, and every code there is
_ESCAPED = {"/": "~2F", "\\": "~5C", "\0": "~00", "%": "~25", ":": "~3A"}
_LEADING = {".": "~2E", "_": "~5F"}
_CODES = frozenset({"7E", "2F", "5C", "00", "25", "3A", "2E", "5F"})


def safe_part(name: str) -> str:
    """A database or table name as its directory name in the landing zone and the outputs.

    It holds no path separator (``/``, ``\\``), NUL, ``%`` (URL readers decode ``%``
    escapes, delta-rs twice) or ``:`` (Hadoop reads a relative path with a ``:`` before its
    first ``/`` as a URL: the Spark output's link to ``.<name>.v-<id>`` could not be read),
    and does not start with ``.`` or ``_``: readers pass over such names as hidden (Spark,
    pyarrow, this package's own readers), and the landing zone keeps its records under ``_``
    names. Those characters become ``~2F``, ``~5C``, ``~00``, ``~25``, ``~3A``, ``~2E`` and
    ``~5F``, and a ``~`` that the name itself follows with one of these codes (or ``7E``)
    becomes ``~7E``: two names never share a directory. Other names are
    their own directory names. A table is known by the name its commit records give, never
    by its directory's."""
    if not any(ch in name for ch in "/\\\0%:~") and not name.startswith((".", "_")):
        return name
    out = []
    for at, ch in enumerate(name):
        if ch == "~" and name[at + 1 : at + 3] in _CODES:
            out.append("~7E")
        elif ch in _ESCAPED:
            out.append(_ESCAPED[ch])
        elif at == 0 and ch in _LEADING:
            out.append(_LEADING[ch])
        else:
            out.append(ch)
    return "".join(out)


def table_rel(name: str) -> Path:
    """``db.t`` as ``<db>/<t>`` under the landing root (and the output directory)."""
    database, _, table = name.partition(".")
    return Path(safe_part(database), safe_part(table))
