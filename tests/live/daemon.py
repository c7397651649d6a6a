"""Running the real ``replicator run`` process in tests: config, start, HTTP probes, stop."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.harness import child_preexec, free_tcp_port
from tests.harness.mariadb import MariaDBServer

ROOT = Path(__file__).resolve().parents[2]


def daemon_config(
    path: Path,
    server: MariaDBServer,
    root: Path,
    *,
    start_gtid: str,
    http_port: int,
    user: str = "repl",
    password_line: str = "password: replpass",
    batch_max_rows: int = 50,
    batch_max_seconds: float = 0.5,
    extra: str = "",
) -> Path:
    path.write_text(
        f"source:\n  host: {server.host}\n  port: {server.port}\n  user: {user}\n"
        f"  {password_line}\n  server_id: {4000 + http_port % 1000}\n  heartbeat_seconds: 1\n"
        f"start:\n  gtid: '{start_gtid}'\n"
        f"sink:\n  root: {root}\n  batch_max_rows: {batch_max_rows}\n"
        f"  batch_max_seconds: {batch_max_seconds}\n"
        f"service:\n  http_port: {http_port}\n  shutdown_timeout: 20\n  progress_seconds: 1\n"
        + extra
    )
    return path


@dataclass
class Daemon:
    """One ``replicator run`` child process; its stderr (JSON log lines) goes to a file."""

    config: Path
    log: Path
    http_port: int
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Daemon:
        with self.log.open("ab") as err:
            command = [sys.executable, "-m", "replicator.cli", "run", "--config"]
            self.proc = subprocess.Popen(
                [*command, str(self.config), *self.args],
                cwd=ROOT,
                env={**os.environ, **self.env},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                preexec_fn=child_preexec(),  # noqa: PLW1509 - only the parent-death signal
            )
        return self

    def get(self, path: str, timeout: float = 5.0) -> tuple[int, str]:
        """(status, body) of GET http://127.0.0.1:<port><path>; (0, error) if unreachable."""
        url = f"http://127.0.0.1:{self.http_port}{path}"
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(url, timeout=timeout) as response:
                return int(response.status), response.read().decode()
        except urllib.error.HTTPError as exc:
            return int(exc.code), exc.read().decode()
        except OSError as exc:
            return 0, str(exc)

    def metric(self, name: str, **labels: str) -> float:
        """One sample's value from /metrics (0.0 when the series does not exist yet)."""
        from prometheus_client.parser import text_string_to_metric_families

        status, body = self.get("/metrics")
        assert status == 200, body
        total = 0.0
        for family in text_string_to_metric_families(body):
            for sample in family.samples:
                wanted = all(sample.labels.get(k) == v for k, v in labels.items())
                if sample.name == name and wanted:
                    total += sample.value
        return total

    def wait_for(self, what: str, predicate: Callable[[], bool], timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"daemon exited {self.proc.returncode} waiting for {what}:\n"
                                     f"{self.log_tail()}")  # fmt: skip
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}:\n{self.log_tail()}")
            time.sleep(0.1)

    def signal(self, sig: signal.Signals) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, sig)

    def wait(self, timeout: float = 60) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def log_tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:]

    def log_lines(self) -> list[dict[str, Any]]:
        out = []
        for line in self.log.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                out.append(json.loads(line))
        return out


def run_to_end(config: Path, log: Path, port: int, env: dict[str, str] | None = None) -> Daemon:
    """``replicator run --stop-at-end`` to its end (``env``: more environment); it must exit
    0. The daemon, for its log."""
    daemon = Daemon(config, log, port, args=("--stop-at-end",), env=env or {}).start()
    try:
        code = daemon.wait(120)
    finally:
        daemon.kill()
    assert code == 0, daemon.log_tail()
    return daemon


def new_http_port() -> int:
    return free_tcp_port()


class Writer:
    """Inserts rows ``shop.t`` one transaction each, in a thread, until stopped."""

    def __init__(self, server: MariaDBServer, *, per_second: float = 200.0) -> None:
        self.server = server
        self.per_second = per_second
        self.written = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Writer:
        self._thread.start()
        return self

    def _run(self) -> None:
        conn = self.server.connect("shop")
        try:
            with conn.cursor() as cur:
                while not self._stop.is_set():
                    cur.execute(
                        "INSERT INTO t (id, v) VALUES (%s, %s)", (self.written + 1, "x" * 30)
                    )
                    self.written += 1
                    time.sleep(1 / self.per_second)
        finally:
            conn.close()

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(30)
        return self.written


def published_entries(root: Path) -> Iterator[dict[str, Any]]:
    """The file entries of the committed manifests, in order. Read while a daemon runs, it
    stops before a commit still being published (its manifest written, its files not all
    renamed into place yet), as the landing zone's readers do (``replicator.landed``)."""
    for manifest in sorted((root / "_manifests").glob("*.json")):
        entries: list[dict[str, Any]] = json.loads(manifest.read_text())["files"]
        if not all((root / entry["path"]).is_file() for entry in entries):
            return
        yield from entries


def landed_ids(root: Path, table: str = "shop.t") -> list[int]:
    """Every ``id`` in the committed files of ``table`` (files named in manifests only)."""
    import pyarrow.parquet as pq

    ids: list[int] = []
    for entry in published_entries(root):
        if entry["table"] == table:
            ids.extend(pq.read_table(root / entry["path"], columns=["id"])["id"].to_pylist())
    return ids
