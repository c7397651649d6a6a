"""replicator: stream a MySQL/MariaDB binary log into exactly-once Parquet landing zones."""

__version__ = "0.1.0"
