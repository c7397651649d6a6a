"""``replicator materialize --format delta``: tables' current state as Delta Lake tables,
with pyarrow and delta-rs only (no Spark, no JVM).

``changes`` reads a table's committed row changes in one schema, as the Spark path
(``replicator.spark.changes``) does, with the same types Spark shows, so that both formats
hold the same values. It builds on the Spark-free modules of ``replicator.spark``
(``committed``, ``compacted``, ``lineage``, ``columns``, ``contract``, ``options``) and never
imports pyspark.
"""
