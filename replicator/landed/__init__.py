"""The landing zone as its readers see it, without Spark: one reader shared by the Parquet
output (``replicator.spark``), the Delta output (``replicator.delta``) and the tools.

* ``contract`` — the names and footer keys the daemon writes (copied: readers import nothing
  of ``sink``, ``source``, ``binlog`` or the C core).
* ``committed`` — which files are committed (the manifests), their lifecycle records and
  replay flags, and what the footers say (schema version, primary key); plain pyarrow.
* ``compacted`` — the compaction records: which output holds which committed file's rows.
* ``lineage`` — the lifecycle records applied: which landed rows make up each table
  (truncate, drop, create, renames); plain Python.
* ``columns`` — column ids and fills from the footers: which column of an older schema
  version holds each column of the newest.
* ``batches`` — the committed batches a run applies, and which tables a batch rebuilds;
  ``versions`` — a table's files grouped by schema version, and the key they record.
* ``options`` — what a materialize run is asked to do and what it reports; ``outputs`` —
  the lock that keeps one writer per output directory.

pyarrow is all they need; ``tests/unit/test_layers.py`` keeps pyspark out.
"""
