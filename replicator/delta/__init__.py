"""``replicator materialize --format delta``: tables' current state as Delta Lake tables,
with pyarrow and delta-rs only (no Spark, no JVM).

* ``changes`` — a table's committed row changes in one schema, as the Spark path
  (``replicator.spark.changes``) reads them, with the types Spark shows, so that both formats
  hold the same values; ``layout`` — the change layout.
* ``fold`` — the current-state algebra (``spark.merge``'s) with Arrow.
* ``build`` — a table's state from its whole lineage, range by range in bounded memory;
  ``files`` — its files written in key order and committed whole.
* ``rewrite`` — an incremental batch over large files applied file by file (the MERGE's
  copy-on-write, in the memory of one file).
* ``materialize`` — the runs: one-shot, ``--follow``, ``--optimize``.

The landing zone is read through ``replicator.landed``; nothing here imports ``spark`` or
pyspark (``tests/unit/test_layers.py``).
"""
