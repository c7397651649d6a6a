"""Start-up: a command imports only what it uses (``replicator.cli``, the comment on imports).

Each case runs the command in a fresh interpreter and lists which of the heavy libraries it
loaded: pyarrow (and numpy under it), pymysql (and cryptography under it), sqlglot, aiohttp and
pydantic take most of a second to import, and ``--help`` needs none of them. The check is on
the modules loaded, not on time (the times are in docs/performance.md, Start-up, from
benchmarks/startup.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from replicator.cli import DEFAULT_SERVER_ID, main
from replicator.config import SinkConfig, SourceConfig
from replicator.sink.landing import LandingZone

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "tests" / "data" / "mariadb-full-metadata.000001"

HEAVY = ("pyarrow", "numpy", "pymysql", "cryptography", "sqlglot", "aiohttp", "pydantic")

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


def test_help_imports_none_of_the_heavy_libraries() -> None:
    assert loaded("--help") == []


@pytest.mark.parametrize("command", sorted(main.commands))
def test_each_commands_help_imports_none_of_them(command: str) -> None:
    assert loaded(command, "--help") == []


def test_dump_of_binlog_files_needs_no_source_arrow_or_config_models() -> None:
    assert loaded("dump", "--binlog-file", str(SAMPLE)) == []


def test_status_without_the_source_reads_the_landing_zone_without_arrow(tmp_path: Path) -> None:
    root = tmp_path / "landing"
    LandingZone(SinkConfig(root=str(root))).recover()  # an empty landing zone, with its id
    config = tmp_path / "c.yaml"
    config.write_text(
        f"source:\n  password: x\nsink:\n  root: {root}\nservice:\n  http_enabled: false\n"
    )
    assert loaded("status", "--config", str(config), "--no-source") == ["pydantic"]


def test_check_shows_the_default_server_id_of_the_config() -> None:
    # written out in cli.py so that `check --help` need not build the config models
    assert SourceConfig().server_id == DEFAULT_SERVER_ID
