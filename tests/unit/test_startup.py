"""Start-up: a command imports only what it uses (``replicator.cli``, the comment on imports).

Each case runs the command in a fresh interpreter and lists which of the heavy libraries it
loaded: pyarrow (and numpy under it), pymysql (and cryptography under it), sqlglot, aiohttp,
aiomqtt and pydantic take most of a second to import, and ``--help`` needs none of them. The
check is on the modules loaded, not on time (the times are in docs/performance.md, Start-up, from
benchmarks/startup.py).

``run`` gets to its first binlog request without pyarrow, sqlglot, aiohttp or aiomqtt: the
landing zone imports pyarrow with its first file, the DDL reader sqlglot with its first
statement, the notifier aiomqtt when it talks to a broker, and the HTTP port listens at once
but imports aiohttp to answer only once the stream has begun.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from replicator.cli import DEFAULT_SERVER_ID, main
from replicator.config import SinkConfig, SourceConfig
from replicator.metrics import Metrics, MetricsServer
from replicator.sink.landing import LandingZone

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "tests" / "data" / "mariadb-full-metadata.000001"

HEAVY = (
    "pyarrow", "numpy", "pymysql", "cryptography", "sqlglot", "aiohttp", "aiomqtt", "pydantic"
)  # fmt: skip

# runs the command as the installed script does, then prints the heavy modules it loaded
_PROBE = """
import json, sys
from replicator.cli import main
try:
    main(sys.argv[1:], prog_name="replicator")
except SystemExit:
    pass
print(json.dumps(sorted(name for name in {heavy} if name in sys.modules)))
"""


def loaded(*args: str) -> list[str]:
    """The heavy modules a fresh ``replicator ARGS`` process has imported when it ends."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE.format(heavy=HEAVY), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    found: list[str] = json.loads(done.stdout.splitlines()[-1])
    return found


def loaded_by(code: str, *args: str) -> list[str]:
    """The heavy modules a fresh interpreter has imported once it has run ``code``."""
    probe = f"{textwrap.dedent(code)}\nimport json, sys\n" + (
        f"print(json.dumps(sorted(name for name in {HEAVY} if name in sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, *args], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    found: list[str] = json.loads(done.stdout.splitlines()[-1])
    return found


def test_help_imports_none_of_the_heavy_libraries() -> None:
    assert loaded("--help") == []


@pytest.mark.parametrize("command", sorted(main.commands))
def test_each_commands_help_imports_none_of_them(command: str) -> None:
    assert loaded(command, "--help") == []


def test_dump_of_binlog_files_needs_no_source_arrow_or_config_models() -> None:
    assert loaded("dump", "--binlog-file", str(SAMPLE)) == []
    # nor the logging library (with asyncio under it): nothing logs while files are read,
    # and a line logged to stdout would land among the JSON lines
    probe = _PROBE.format(heavy=("structlog", "asyncio"))
    done = subprocess.run(
        [sys.executable, "-c", probe, "dump", "--binlog-file", str(SAMPLE)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout.splitlines()[-1]) == []


def test_status_without_the_source_reads_the_landing_zone_without_arrow(tmp_path: Path) -> None:
    root = tmp_path / "landing"
    LandingZone(SinkConfig(root=str(root))).recover()  # an empty landing zone, with its id
    config = tmp_path / "c.yaml"
    config.write_text(
        f"source:\n  password: x\nsink:\n  root: {root}\nservice:\n  http_enabled: false\n"
    )
    assert loaded("status", "--config", str(config), "--no-source") == ["pydantic"]
    # nor the logging library (the lock logs only when a store lacks conditional writes), nor
    # the embedded demo's modules (only when no config names the landing zone), nor the
    # decoder's events (about 19 ms here, where the GTID and position types need only errors),
    # nor the manifests' parser (status reads one manifest as JSON)
    heavy = (
        "structlog",
        "asyncio",
        "replicator.embedded.demo",
        "replicator.binlog.events",
        "replicator.landed.manifests",
    )
    probe = _PROBE.format(heavy=heavy)
    done = subprocess.run(
        [sys.executable, "-c", probe, "status", "--config", str(config), "--no-source"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout.splitlines()[-1]) == []


def test_check_shows_the_default_server_id_of_the_config() -> None:
    # written out in cli.py so that `check --help` need not build the config models
    assert SourceConfig().server_id == DEFAULT_SERVER_ID


def test_run_reaches_its_stream_without_arrow_sqlglot_or_aiohttp(tmp_path: Path) -> None:
    # what `replicator run` imports, then its start up to the stream: the landing zone
    # recovered (compaction's recovery too), the HTTP port listening, the pipeline made
    code = """
        import asyncio, sys
        from replicator.cli import main
        from replicator.config import Config, ServiceConfig, SinkConfig
        from replicator.service import RunOptions, Service

        async def start():
            config = Config(
                sink=SinkConfig(root=sys.argv[1]), service=ServiceConfig(http_port=0)
            )
            service = Service(config, RunOptions())
            await service._start_http()
            service._new_pipeline(service.zone.recover(), None)
            assert service.http is not None
            await service.http.close()

        asyncio.run(start())
    """
    # the config's models and the source's client only
    assert loaded_by(code, str(tmp_path / "landing")) == ["cryptography", "pydantic", "pymysql"]


def test_the_ddl_reader_imports_sqlglot_with_its_first_statement() -> None:
    code = """
        import sys
        from replicator.schema import ddl
        from replicator.schema.model import Catalog, ServerTraits

        assert "sqlglot" not in sys.modules
        context = ddl.Context(default_db="shop", server_charset="utf8mb4")
        catalog = Catalog(ServerTraits("mariadb", (10, 11, 6), 0))
        catalog, _ = ddl.apply_ddl(catalog, "CREATE DATABASE shop", context)
        statement = "CREATE TABLE t (id INT PRIMARY KEY, name TEXT CHARACTER SET latin1)"
        catalog, effects = ddl.apply_ddl(catalog, statement, context)
        assert [type(e).__name__ for e in effects] == ["TableCreated"]
    """
    assert loaded_by(code) == ["sqlglot"]


def test_a_landing_zone_recovers_without_arrow(tmp_path: Path) -> None:
    code = """
        import sys
        from replicator.config import SinkConfig
        from replicator.sink.landing import LandingZone

        LandingZone(SinkConfig(root=sys.argv[1])).recover()
    """
    assert loaded_by(code, str(tmp_path / "landing")) == ["pydantic"]


def test_the_http_port_listens_without_aiohttp() -> None:
    code = """
        import asyncio
        from replicator.metrics import Metrics, MetricsServer

        async def listen():
            server = MetricsServer(Metrics(), host="127.0.0.1", port=0)
            await server.listen()
            assert server.port > 0
            await server.close()

        asyncio.run(listen())
    """
    assert loaded_by(code) == []


async def test_a_probe_made_while_listening_is_answered_once_serving() -> None:
    server = MetricsServer(Metrics(), host="127.0.0.1", port=0)
    await server.listen()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        await writer.drain()
        await server.serve()
        reply = await asyncio.wait_for(reader.read(), 10)
        writer.close()
    finally:
        await server.close()
    assert reply.startswith(b"HTTP/1.1 200 ")
    assert reply.endswith(b"\r\n\r\nok\n")
