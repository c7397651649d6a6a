"""``replicator check --config`` next to the daemon that config runs: the daemon's own
registration with the source is not a server_id clash, and a real clash still is.

A real ``replicator run`` streams from the throwaway MariaDB; ``check`` runs as a subprocess
with the same config. Then another replica registers with the same server_id (as a second
replicator with a copied config would): the source keeps one registration per server_id, the
newer one, so ``check`` must now report the clash (exit 3).
"""

from __future__ import annotations

import contextlib
import signal
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.mariadb import MariaDBServer
from tests.live.daemon import ROOT, Daemon, daemon_config, new_http_port

pytestmark = pytest.mark.live


def _check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "replicator.cli", "check", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def _register(server: MariaDBServer, server_id: int, host: bytes) -> object:
    """A connection registered as a replica (COM_REGISTER_SLAVE), kept open."""
    conn = server.connect()
    payload = struct.pack("<I", server_id) + bytes([len(host)]) + host + b"\x00\x00"
    conn._execute_command(0x15, payload + struct.pack("<HII", 3306, 0, 0))
    conn._read_packet()
    return conn


def _clash_line(output: str) -> str:
    (line,) = [line for line in output.splitlines() if "replica_server_id:" in line]
    return line


def test_check_knows_its_own_daemon_but_not_another_replica(
    tmp_path: Path, mariadb_full_metadata: MariaDBServer
) -> None:
    server = mariadb_full_metadata
    port = new_http_port()
    config = daemon_config(
        tmp_path / "c.yaml",
        server,
        tmp_path / "landing",
        start_gtid=server.binlog_status().gtid_binlog_pos,
        http_port=port,
    )
    server_id = 4000 + port % 1000
    daemon = Daemon(config, tmp_path / "run.log", port).start()
    rogue = None
    try:
        daemon.wait_for("streaming", lambda: daemon.get("/readyz")[0] == 200)
        own = _check("--config", str(config))
        assert own.returncode == 0, own.stdout + own.stderr
        line = _clash_line(own.stdout)
        assert line.startswith("ok ")
        assert f"server_id {server_id} is in use by this landing zone's own running" in line

        # without the config, check cannot tell the daemon from another replica
        bare = _check(
            "--host", server.host, "--port", str(server.port), "--server-id", str(server_id),
            "--password-file", str(_password(tmp_path)),
        )  # fmt: skip
        assert bare.returncode == 3
        assert _clash_line(bare.stdout).startswith("ERROR ")

        rogue = _register(server, server_id, b"copied-config")
        clash = _check("--config", str(config))
        assert clash.returncode == 3, clash.stdout
        assert "copied-config:3306" in clash.stdout
        assert _clash_line(clash.stdout).startswith("ERROR ")
    finally:
        if rogue is not None:
            with contextlib.suppress(Exception):
                rogue.close()  # type: ignore[attr-defined]
        daemon.signal(signal.SIGTERM)
        daemon.wait(30)
        daemon.kill()


def _password(tmp_path: Path) -> Path:
    path = tmp_path / "password"
    path.write_text("replpass\n")
    return path
