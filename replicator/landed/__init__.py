"""The landing zone's commit records and its reading, without Spark: one reader shared by
the daemon (``sink``: recovery, ``verify``, ``compact``), the Parquet output
(``replicator.spark``), the Delta output (``replicator.delta``) and the tools.

* ``contract`` — the names and keys of the format (the commit records' fields are defined
  here and the daemon imports them; readers import nothing of ``sink``, ``source``,
  ``binlog`` or the C core).
* ``manifests`` — the manifests (``_manifests/``): their one parser, checked one by one and
  as a chain, with each batch's files and lifecycle records.
* ``committed`` — which files a reader may read (published batches, in order) and what the
  footers say (schema version, primary key); plain pyarrow.
* ``checkpointed`` — the batch the checkpoint names, which the manifests a reader lists after
  reading it must reach (removed manifests are refused, as the daemon's start refuses them).
* ``compacted`` — the compaction records (``_compactions/``): their format and reading, and
  which output holds which committed file's rows.
* ``lineage`` — the lifecycle records applied: which landed rows make up each table
  (truncate, drop, create, renames); plain Python.
* ``columns`` — column ids and fills from the footers: which column of an older schema
  version holds each column of the newest.
* ``decimal_text`` — a DECIMAL shown as text (past 38 digits): every version's values at
  the scale of the column's newest version, and when that cannot be done exactly.
* ``batches`` — the committed batches a run applies, and which tables a batch rebuilds;
  ``versions`` — a table's files grouped by schema version, and the key they record.
* ``options`` — what a materialize run is asked to do and what it reports; ``outputs`` —
  the lock that keeps one writer per output directory.

pyarrow is all they need; ``tests/unit/test_layers.py`` keeps pyspark out.
"""
