"""Regenerate the small binlog captures under tests/data from a throwaway MariaDB.

Run: .venv/bin/python -m tests.data.make_samples
The captures are our own server's output (no third-party data), used by unit tests that feed
real event bytes whole, one byte at a time, and with trailing garbage.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.harness.mariadb import MariaDBServer

HERE = Path(__file__).resolve().parent

WORKLOAD = [
    "CREATE DATABASE shop",
    "CREATE TABLE shop.items (id INT UNSIGNED PRIMARY KEY, name VARCHAR(40) CHARACTER SET utf8mb4,"
    " price DECIMAL(10,2), kind ENUM('a','b'), tags SET('x','y','z'), seen DATETIME(3),"
    " note TEXT CHARACTER SET latin1, blob_col BLOB)",
    "INSERT INTO shop.items VALUES (1, 'caf\u00e9 \U0001f600', 12.50, 'a', 'x,z',"
    " '2026-01-02 03:04:05.678', 'na\u00efve \u20ac', x'00ff00')",
    "INSERT INTO shop.items VALUES (2, NULL, -0.01, 'b', '', '1000-01-01 00:00:00', NULL, '')",
    "UPDATE shop.items SET price = price + 1, tags = 'y' WHERE id = 1",
    "DELETE FROM shop.items WHERE id = 2",
]


def capture(name: str, extra_args: list[str]) -> None:
    server = MariaDBServer(extra_args=extra_args).start()
    try:
        for sql in WORKLOAD:
            server.execute(sql)
        status = server.binlog_status()
        server.flush_binlogs()
        shutil.copy(server.binlog_path(status.file), HERE / name)
    finally:
        server.stop()


def main() -> None:
    capture("mariadb-full-metadata.000001", ["--binlog-row-metadata=FULL"])
    capture(
        "mariadb-compressed.000001",
        ["--binlog-row-metadata=FULL", "--log-bin-compress=ON", "--log-bin-compress-min-len=10"],
    )


if __name__ == "__main__":
    main()
