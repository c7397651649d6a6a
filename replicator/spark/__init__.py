"""The Spark side: turn the landing zone's change files into current-state tables.

* ``contract`` — the names and footer keys the daemon writes (copied: ``spark`` imports
  nothing of ``sink``, ``source``, ``binlog`` or the C core); ``durable`` — atomic writes.
* ``committed`` — which files are committed (the manifests), their lifecycle records and
  replay flags, and what the footers say (schema version, primary key); plain pyarrow.
* ``lineage`` — the lifecycle records applied: which landed rows make up each table
  (truncate, drop, create, renames); plain Python.
* ``columns`` — column ids and fills from the footers: which column of an older schema
  version holds each column of the newest; ``fills`` — a fill's value as a Spark literal.
* ``type_map`` — what Spark 3.5 shows for each Arrow type the landing zone writes.
* ``schema`` — one Spark schema for all versions of a table (ALTER TABLE widening), and the
  casts that bring each version to it.
* ``changes`` — reading a table's changes with Spark: versions aligned by column id, replayed
  copies left out, only the rows of its lineage.
* ``merge`` — the current-state algebra: latest change per primary key, or the multiset of
  rows of a table without one.
* ``state`` — the output directory: versioned state, swapped in atomically, tombstones of
  removed tables; ``output`` — the Spark jobs that write and read it.
* ``identity`` — an output goes on only from the landing zone it was built from (ids).
* ``table_job`` — one table brought up to date: unchanged, merged, rebuilt or removed.
* ``materialize`` — the batch job and its Python API; ``options`` its options and results;
  ``cli`` its ``replicator materialize``.
* ``streaming`` — a Structured Streaming helper driven by the manifests, sharing
  ``table_job``.

pyspark is an optional dependency (``pip install 'replicator[spark]'``): nothing here is
imported by the rest of replicator but ``cli`` (which imports pyspark only when the command
runs) and ``state`` (plain Python: the demo reset reads which landing zone an output is of).
"""
