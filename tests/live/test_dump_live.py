"""``replicator dump --config`` against a live server equals ``dump --binlog-file``."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest

from replicator.source.binlog_file import read_binlog_files
from tests.harness.dump_reference import reference_output
from tests.harness.mariadb import MariaDBServer, mariadbd_version
from tests.live import test_all_types as all_types

pytestmark = pytest.mark.live


def _dump(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "replicator.cli", "dump", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )


def test_live_dump_equals_file_dump(tmp_path: Path) -> None:
    # FULL metadata: names and labels are in the binlog, so the file dump has them too and
    # the two outputs must agree to the byte position
    with MariaDBServer(["--binlog-row-metadata=FULL"]) as server:
        server.execute("CREATE DATABASE shop")
        server.execute(
            "CREATE TABLE shop.items (id INT PRIMARY KEY, name VARCHAR(20) CHARACTER SET utf8mb4,"
            " price DECIMAL(10,2), kind ENUM('a','b'), at DATETIME(6))"
        )
        status = server.binlog_status()
        for i in range(30):
            server.execute(
                "INSERT INTO shop.items VALUES (%s, %s, %s, 'b', '2026-01-01 00:00:00.5')",
                (i, f"n\u00e9{i}", i * 1.25),
            )
        server.execute("UPDATE shop.items SET price = price + 1 WHERE id < 10")
        server.execute("DELETE FROM shop.items WHERE id >= 25")
        config = tmp_path / "replicator.yaml"
        config.write_text(
            f"source:\n  host: {server.host}\n  port: {server.port}\n  user: repl\n"
            "  password_env: TEST_REPL_PASSWORD\n  server_id: 777\n  heartbeat_seconds: 1\n"
        )
        env = {"TEST_REPL_PASSWORD": "replpass", "PATH": "/usr/bin:/bin"}
        live = _dump(
            "--config",
            str(config),
            "--start-gtid",
            status.gtid_binlog_pos,
            "--stop-at-end",
            env=env,
        )
        assert live.returncode == 0, live.stderr
        server.flush_binlogs()
        from_file = _dump("--binlog-file", str(server.binlog_path(status.file)))
        assert from_file.returncode == 0, from_file.stderr
    live_rows = [json.loads(line) for line in live.stdout.splitlines()]
    file_rows = [json.loads(line) for line in from_file.stdout.splitlines()]
    after_start = [r for r in file_rows if r["position"] >= status.position]
    assert len(live_rows) == 30 + 10 + 5
    assert live_rows == after_start
    assert live_rows[0]["after"] == {
        "id": 0,
        "name": "n\u00e90",
        "price": "0.00",
        "kind": "b",
        "at": "2026-01-01 00:00:00.500000",
    }
    assert "replpass" not in live.stderr + live.stdout


def test_live_dump_bad_password_exits_3(tmp_path: Path, mariadb: MariaDBServer) -> None:
    config = tmp_path / "replicator.yaml"
    config.write_text(
        f"source:\n  host: {mariadb.host}\n  port: {mariadb.port}\n  user: repl\n"
        "  password: wrong-secret-42\n"
    )
    result = _dump("--config", str(config), "--stop-at-end")
    assert result.returncode == 3
    assert "wrong-secret-42" not in result.stderr + result.stdout


def test_live_dump_across_a_dropped_column_stops_at_once_naming_the_change(
    tmp_path: Path,
) -> None:
    """MINIMAL metadata logs no names, so dump takes them from the catalog as it is now; after
    a DROP COLUMN the older events no longer line up. That is a schema change, said at once
    (exit 4), not a lost connection retried and then blamed on a corrupt stream."""
    with MariaDBServer(["--binlog-row-metadata=MINIMAL"]) as server:
        server.execute("CREATE DATABASE shop")
        server.execute("CREATE TABLE shop.items (id INT PRIMARY KEY, gone INT, name TEXT)")
        status = server.binlog_status()
        server.execute("INSERT INTO shop.items VALUES (1, 2, 'x')")
        server.execute("ALTER TABLE shop.items DROP COLUMN gone")
        config = tmp_path / "replicator.yaml"
        config.write_text(
            f"source:\n  host: {server.host}\n  port: {server.port}\n  user: repl\n"
            "  password: replpass\n  server_id: 778\n  heartbeat_seconds: 1\n"
            "  reconnect_initial_delay: 0.1\n"
        )
        dumped = _dump("--config", str(config), "--start-gtid", status.gtid_binlog_pos,
                       "--stop-at-end")  # fmt: skip
    assert dumped.returncode == 4, dumped.stderr
    assert "TABLE_MAP for shop.items has 3 columns but the table now has 2" in dumped.stderr
    assert "binlog_row_metadata=FULL" in dumped.stderr
    assert "lost" not in dumped.stderr and "mysqlbinlog" not in dumped.stderr
    assert "failed 1 times" not in dumped.stderr and "retry" not in dumped.stderr.lower()


EARLY_DATES = [
    # (id, DATE, DATETIME(6)) as written; SELECT shows them the same way
    (1, "0018-04-01", "0018-04-01 12:34:56"),
    (2, "0001-01-01", "0001-01-01 00:00:00"),
    (3, "0999-12-31", "0999-12-31 23:59:59.999999"),
    (4, "0000-01-21", "0000-01-21 10:11:12.500000"),  # year 0 with a real month and day
    (5, "0000-02-29", "0000-12-31 23:59:59"),  # MariaDB stores this DATE as 0000-00-00
    (6, "0000-00-00", "0000-00-00 00:00:00"),  # no calendar holds these: null, counted
]


def _same_instant(text: str | None) -> str | None:
    """A DATETIME's text with its fraction's trailing zeros dropped (dump prints no fraction
    for whole seconds, SELECT prints the column's digits)."""
    return None if text is None else text.rstrip("0").rstrip(".") if "." in text else text


def _dated(text: str | None) -> str | None:
    """What dump prints for what SELECT shows: a zero date ('0000-00-00...') is null."""
    return None if text is None or text.startswith("0000-00-00") else text


def test_early_years_and_year_zero_print_as_select_shows_them(tmp_path: Path) -> None:
    with MariaDBServer(["--binlog-row-metadata=FULL"]) as server:
        server.execute("CREATE DATABASE shop")
        server.execute("CREATE TABLE shop.d (id INT PRIMARY KEY, d DATE, dt DATETIME(6))")
        server.execute("CREATE TABLE shop.g (id INT PRIMARY KEY, shape GEOMETRY)")
        status = server.binlog_status()
        conn = server.connect("shop")
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = ''")  # zero dates allowed
            cur.executemany("INSERT INTO d VALUES (%s, %s, %s)", EARLY_DATES)
            cur.execute("INSERT INTO g VALUES (1, ST_GeomFromText('POINT(1 2)', 4326))")
            cur.execute("INSERT INTO g VALUES (2, ST_GeomFromText('POINT(3 4)'))")
            cur.execute("SELECT id, ST_AsBinary(shape), ST_SRID(shape) FROM g")
            shapes = {
                int(r[0]): {"base64": base64.b64encode(r[1]).decode(), "srid": int(r[2])}
                for r in cur.fetchall()
            }
            cur.execute("SELECT id, CAST(d AS CHAR), CAST(dt AS CHAR) FROM d ORDER BY id")
            shown = {int(r[0]): (_dated(r[1]), _dated(_same_instant(r[2]))) for r in cur.fetchall()}
        conn.close()
        config = tmp_path / "replicator.yaml"
        config.write_text(
            f"source:\n  host: {server.host}\n  port: {server.port}\n  user: repl\n"
            "  password: replpass\n  server_id: 778\n  heartbeat_seconds: 1\n"
        )
        live = _dump(
            "--config", str(config), "--start-gtid", status.gtid_binlog_pos, "--stop-at-end"
        )
        server.flush_binlogs()
        from_file = _dump("--binlog-file", str(server.binlog_path(status.file)))
    assert live.returncode == 0, live.stderr
    assert from_file.returncode == 0, from_file.stderr
    for output in (live.stdout, from_file.stdout):
        rows = [json.loads(line) for line in output.splitlines()]
        printed = {
            r["after"]["id"]: (r["after"]["d"], _same_instant(r["after"]["dt"]))
            for r in rows
            if r.get("table") == "d"
        }
        assert printed == shown
        assert shown[6] == (None, None)  # '0000-00-00' has no date: null, counted
        geometry = {r["after"]["id"]: r["after"]["shape"] for r in rows if r.get("table") == "g"}
        assert geometry == shapes
        assert shapes[1]["srid"] == 4326
        assert printed[1] == ("0018-04-01", "0018-04-01 12:34:56")
        assert printed[4] == ("0000-01-21", "0000-01-21 10:11:12.5")


@pytest.mark.parametrize("metadata", ["mariadb_full_metadata", "mariadb"])
def test_every_column_type_prints_as_the_reference(
    request: pytest.FixtureRequest, metadata: str
) -> None:
    """The all-types workload (every MariaDB column type, NULL, minimum, maximum and edge
    values, inserted, updated and deleted): ``dump --binlog-file`` prints byte for byte what
    the plain formatter and ``json.dumps`` print. Without FULL metadata (the ``mariadb``
    server) columns are keyed by ordinal, integers come signed and text as bytes: checked too."""
    if mariadbd_version() < (10, 10):
        pytest.skip("INET4 needs MariaDB 10.10+")
    server: MariaDBServer = request.getfixturevalue(metadata)
    db = all_types.DB
    server.execute(f"DROP DATABASE IF EXISTS {db}")
    server.execute(f"CREATE DATABASE {db}")
    try:
        for table in all_types.TABLES:
            server.execute(all_types._create_sql(table), database=db)
        files = all_types._workload_files(server, lambda: all_types._run_statements(server))
        paths = [server.binlog_path(name) for name in files]
        printed = subprocess.run(
            [sys.executable, "-m", "replicator.cli", "dump"]
            + [arg for path in paths for arg in ("--binlog-file", str(path))],
            capture_output=True,
            timeout=120,
            check=False,
        )
    finally:
        server.execute(f"DROP DATABASE IF EXISTS {db}")
    assert printed.returncode == 0, printed.stderr
    expected, reference = reference_output(read_binlog_files(paths))
    assert printed.stdout.splitlines() == expected.splitlines()
    assert printed.stdout == expected
    assert reference.invalid_temporals > 0  # the zero dates are in the workload
    assert (
        f"{reference.row_changes} row changes, {reference.invalid_temporals} invalid dates"
    ) in printed.stderr.decode()
