"""A throwaway MariaDB server with the binary log on, for live tests.

The server lives in the product, ``replicator.embedded.mariadb`` (the embedded demo uses it
too); this module re-exports it under the names the tests import. Each ``MariaDBServer`` gets
a fresh datadir in its own temp dir (``base_dir=`` keeps it elsewhere), runs on a free
127.0.0.1 port with ROW/CRC32/GTID binlogs and a ``repl``/``replpass`` replication account.
"""

from __future__ import annotations

from replicator.embedded.mariadb import (
    BASE_SERVER_ARGS,
    LOG_BASENAME,
    REPL_PASSWORD,
    REPL_USER,
    ROOT_PASSWORD,
    ROOT_USER,
    BinlogStatus,
    MariaDBServer,
    mariadb_available,
    mariadbd_version,
    replication_privileges,
)

__all__ = [
    "BASE_SERVER_ARGS",
    "LOG_BASENAME",
    "REPL_PASSWORD",
    "REPL_USER",
    "ROOT_PASSWORD",
    "ROOT_USER",
    "BinlogStatus",
    "MariaDBServer",
    "mariadb_available",
    "mariadbd_version",
    "replication_privileges",
]
