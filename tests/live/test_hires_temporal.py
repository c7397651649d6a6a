"""MariaDB's pre-10.0 high-resolution temporal formats (``mysql56_temporal_format=OFF``).

MariaDB logs these columns with the legacy TIME/DATETIME/TIMESTAMP type codes and no
metadata, so their precision comes from the schema (information_schema DATETIME_PRECISION).
"""

from __future__ import annotations

import datetime as dt

import pytest

from replicator.binlog import events as ev
from replicator.config import Secret, SourceConfig
from replicator.source.binlog_file import read_binlog_file
from replicator.source.schema import InformationSchemaLookup
from tests.harness.mariadb import MariaDBServer

pytestmark = pytest.mark.live

VALUES = (
    "'-838:59:59'",
    "'-12:34:56.789'",
    "'838:59:59.999999'",
    "'1000-01-01 00:00:00'",
    "'2026-11-22 01:02:03.45'",
    "'9999-12-31 23:59:59.999999'",
    "'1970-01-01 00:00:01'",
    "'2026-01-01 00:00:00.5'",
    "'2038-01-19 03:14:07.999999'",
)
EXPECTED = (
    -dt.timedelta(hours=838, minutes=59, seconds=59),
    -dt.timedelta(hours=12, minutes=34, seconds=56, milliseconds=789),
    dt.timedelta(hours=838, minutes=59, seconds=59, microseconds=999999),
    dt.datetime(1000, 1, 1),
    dt.datetime(2026, 11, 22, 1, 2, 3, 450000),
    dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
    dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC),
    dt.datetime(2026, 1, 1, 0, 0, 0, 500000, tzinfo=dt.UTC),
    dt.datetime(2038, 1, 19, 3, 14, 7, 999999, tzinfo=dt.UTC),
)


@pytest.mark.parametrize("metadata", ["FULL", "MINIMAL"])
def test_hires_temporals_decode_with_schema_precision(metadata: str) -> None:
    args = [f"--binlog-row-metadata={metadata}", "--mysql56-temporal-format=OFF"]
    with MariaDBServer(args) as server:
        server.execute("SET GLOBAL time_zone = '+00:00'")
        server.execute("CREATE DATABASE d")
        server.execute(
            "CREATE TABLE d.t (id INT PRIMARY KEY, t0 TIME, t3 TIME(3), t6 TIME(6), "
            "d0 DATETIME, d2 DATETIME(2), d6 DATETIME(6), s0 TIMESTAMP NULL, "
            "s1 TIMESTAMP(1) NULL, s6 TIMESTAMP(6) NULL)"
        )
        start = server.binlog_status()
        server.execute(f"INSERT INTO d.t VALUES (1, {', '.join(VALUES)})")
        server.execute("UPDATE d.t SET t3 = '00:00:00.001', d2 = '2000-01-01 00:00:00.99'")
        server.flush_binlogs()
        lookup = InformationSchemaLookup(
            SourceConfig(
                host=server.host, port=server.port, user="repl", password=Secret("replpass")
            )
        )
        try:
            rows = [
                e
                for e in read_binlog_file(server.binlog_path(start.file), schema_lookup=lookup)
                if isinstance(e, ev.RowsEvent)
            ]
        finally:
            lookup.close()
    table = rows[0].table
    assert [c.meta for c in table.columns[1:]] == [0, 3, 6, 0, 2, 6, 0, 1, 6]
    assert rows[0].rows == ((1, *EXPECTED),)
    after = rows[1].after[0]
    assert after[2] == dt.timedelta(milliseconds=1)
    assert after[5] == dt.datetime(2000, 1, 1, 0, 0, 0, 990000)
