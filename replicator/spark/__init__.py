"""The Spark side: turn the landing zone's change files into current-state tables.

* ``committed`` — which files are committed (the manifests), and what their footers say
  (schema version, primary key); plain pyarrow, no Spark.
* ``type_map`` — what Spark 3.5 shows for each Arrow type the landing zone writes.
* ``schema`` — one Spark schema for all versions of a table (ALTER TABLE widening), and the
  casts that bring each version to it.
* ``merge`` — the current-state algebra: latest change per primary key, or the multiset of
  rows of a table without one.
* ``state`` — the output directory: versioned state, swapped in atomically, incremental.
* ``materialize`` — the batch job and its Python API; ``cli`` its ``replicator materialize``.
* ``streaming`` — a Structured Streaming example that merges micro-batches the same way.

pyspark is an optional dependency (``pip install 'replicator[spark]'``): nothing here is
imported by the rest of replicator, and ``cli`` imports pyspark only when the command runs.
"""
