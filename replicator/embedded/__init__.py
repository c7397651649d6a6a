"""Servers replicator starts itself: the embedded demo source, also the live tests' harness.

``process`` holds the child-process plumbing (find a binary, a free port, stop by pid, exit
and parent-death safety nets); ``mariadb`` a MariaDB server with the binlog settings replicator
needs and a replication account, in a temp dir or a kept directory; ``workload`` a seeded
sample shop workload; ``demo`` puts them together for ``replicator run`` without a source.
Every failure is an ``EmbeddedServerError`` (exit code 1) with a hint.
"""

from __future__ import annotations

from .mariadb import BinlogStatus, MariaDBServer, mariadb_available, mariadbd_version
from .process import EmbeddedServerError
from .workload import TableCounts, Workload, WorkloadStats

__all__ = [
    "BinlogStatus",
    "EmbeddedServerError",
    "MariaDBServer",
    "TableCounts",
    "Workload",
    "WorkloadStats",
    "mariadb_available",
    "mariadbd_version",
]
