"""The embedded demo as a new user meets it, through the real command line in a fresh
directory: ``replicator run`` (the demo), then ``status``, ``checkpoint show`` and ``check``
with no options at all (the demo's own settings), and ``run --demo-reset`` to start over.

While the demo runs, ``check`` must not take the demo's own daemon for a server_id clash;
the reset must remove the demo's landing zone, its MariaDB and the tables materialized from
it, say so, and start a new landing zone (another id) whose checkpoint carries GTIDs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from replicator.spark import state
from tests.live.daemon import ROOT

pytestmark = pytest.mark.live


def _cli(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "replicator.cli", *args],
        cwd=cwd,
        env={**_env(), **env},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPLICATOR_")}
    env["PYTHONPATH"] = str(ROOT)  # the worktree's replicator, from any directory
    # any free port: the default 9108 may be another test worker's daemon's (status finds
    # the port the demo's lock records)
    env["REPLICATOR_SERVICE__HTTP_PORT"] = "0"
    return env


def _wait(what: str, predicate: Any, proc: subprocess.Popen[str], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, f"the demo exited {proc.returncode} waiting for {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _materialized(cwd: Path) -> None:
    """An output as `replicator materialize --landing landing --out current` leaves it (one
    table, through spark.state; Spark itself is tested in tests/spark)."""
    landing = cwd / "landing"
    landing_id = json.loads((landing / "_state" / "identity.json").read_text())["landing_id"]

    def write(directory: Path) -> int:
        directory.mkdir(parents=True)
        (directory / "part-0.parquet").write_bytes(b"rows")
        return 1

    table = state.TableState("shop.orders", str(landing.resolve()), "batch", 1, -1, 1, ["id"],
                             False, False, "", 1, lineage=True, landing_id=landing_id)  # fmt: skip
    with state.lock(cwd / "current"):
        state.publish(cwd / "current" / "shop" / "orders", write, table)


def test_the_demo_without_a_config_and_started_over(tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    demo = subprocess.Popen(
        [sys.executable, "-m", "replicator.cli", "run", "--for", "60"],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "demo.log").open("w"),
        text=True,
    )
    try:
        _wait("a batch", lambda: len(list((landing / "_manifests").glob("*.json"))) >= 2, demo)
        landing_id = json.loads((landing / "_state" / "identity.json").read_text())["landing_id"]

        check = _cli(tmp_path, "check")
        assert check.returncode == 0, check.stdout + check.stderr
        assert "check: the embedded demo's settings (landing/)" in check.stderr
        assert "replica_server_id: server_id 65000 is in use by this landing zone's own" in (
            " ".join(check.stdout.split())
        )

        status = _cli(tmp_path, "status", "--json")
        assert status.returncode == 0, status.stderr
        report = json.loads(status.stdout)
        assert report["landing"] == str(landing)
        assert report["landing_id"] == landing_id
        assert report["daemon"]["reachable"] is True
        assert report["source"]["reachable"] is True
        assert report["writer"]["running"] is True

        shown = _cli(tmp_path, "checkpoint", "show")
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["position"]["mariadb_gtid"]

        demo.send_signal(signal.SIGTERM)
        assert demo.wait(60) == 0
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait(30)

    stopped = _cli(tmp_path, "status", "--no-source")
    assert stopped.returncode == 0
    assert "daemon        not running (its last writer has ended" in stopped.stdout
    _materialized(tmp_path)

    # the environment's log settings apply to the demo as over a config
    again = _cli(
        tmp_path,
        "run",
        "--demo-reset",
        "--for",
        "4",
        REPLICATOR_SERVICE__LOG_LEVEL="warning",
        REPLICATOR_SERVICE__LOG_FORMAT="json",
    )

    assert again.returncode == 0, again.stderr[-3000:]
    logged = [json.loads(line) for line in again.stderr.splitlines() if line.startswith("{")]
    assert [e for e in logged if e.get("level") == "info"] == []
    said = [line for line in again.stderr.splitlines() if line.startswith("demo reset:")]
    assert [line.split(" (")[0] for line in said] == [
        "demo reset: removed landing/",
        "demo reset: removed .replicator-demo/",
        "demo reset: removed current/",
    ]
    assert not (tmp_path / "current").exists()
    new_id = json.loads((landing / "_state" / "identity.json").read_text())["landing_id"]
    assert new_id != landing_id
    checkpoint = json.loads((landing / "_state" / "checkpoint.json").read_text())
    assert checkpoint["batch"] >= 1 and checkpoint["position"]["mariadb_gtid"]
    first = json.loads((landing / "_manifests" / f"{1:020d}.json").read_text())
    assert first["landing_id"] == new_id
