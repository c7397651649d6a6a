"""The Spark side: turn the landing zone's change files into current-state tables.

The landing zone is read through ``replicator.landed`` (manifests, compaction records,
lifecycle records, column ids: Spark-free, shared with the Delta output); ``spark`` imports
nothing of ``sink``, ``source``, ``binlog`` or the C core.

* ``fills`` — a fill's value (``landed.columns``) as a Spark literal.
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
* ``materialize`` — the batch job and its Python API (its options and results:
  ``landed.options``); ``cli`` — ``replicator materialize``, both formats (``--format
  delta`` runs ``replicator.delta``, with no Spark).
* ``streaming`` — a Structured Streaming helper driven by the manifests, sharing
  ``table_job``.

pyspark is an optional dependency (``pip install 'replicator[spark]'``): nothing here is
imported by the rest of replicator but ``cli`` (which imports pyspark only when the command
runs) and ``state`` (plain Python: the demo reset reads which landing zone an output is of).
"""
