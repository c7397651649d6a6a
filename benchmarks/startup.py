"""Start-up: how long the commands take from exec, and ``run`` until its first binlog request.

Each command runs ``--runs`` times as its own process (the installed ``replicator`` script next
to this Python, else ``python -m replicator.cli``); the table shows the median wall time and
the median CPU time (user + system) of the process. The machine is shared and noisy: CPU time
is the steadier of the two.

* ``--help``, ``status --help``, ``check --help``: click and the command table only;
* ``status --no-source`` and ``status`` on a config whose landing zone is empty (the daemon's
  HTTP port disabled); the source of ``status`` is the throwaway MariaDB with ``--run``, else
  a closed port (connection refused);
* ``dump --binlog-file`` of a small sample file (tests/data) to /dev/null;
* with ``--run``: ``replicator run --config`` against a throwaway MariaDB through a small TCP
  proxy that notes when the client sends its first ``COM_BINLOG_DUMP`` or
  ``COM_BINLOG_DUMP_GTID`` (client packets: 3-byte length, sequence id, then the command byte;
  MariaDB ``sql/sql_parse.cc``). That moment minus the moment before the exec is the figure;
  then SIGTERM. Each run gets a fresh landing zone, so nothing is probed before the dump.

Run: ``.venv/bin/python benchmarks/startup.py [--runs 10] [--run]``. Set ``PYTHONPATH`` to a
copy of the package to measure that copy instead. The package measured is byte-compiled first,
as an installed one is: where ``PYTHONDONTWRITEBYTECODE`` is set, a module changed since its
last compile would otherwise be compiled again in every run.
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import signal
import socket
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SAMPLE = ROOT / "tests" / "data" / "mariadb-full-metadata.000001"
COM_BINLOG_DUMP = 0x12
COM_BINLOG_DUMP_GTID = 0x1E


def command() -> list[str]:
    script = Path(sys.executable).with_name("replicator")
    return [str(script)] if script.exists() else [sys.executable, "-m", "replicator.cli"]


def compile_package() -> Path:
    """Byte-compile the ``replicator`` package the commands import, and the environment's
    packages (an install where ``PYTHONDONTWRITEBYTECODE`` is set has no ``.pyc`` of them);
    returns the package's directory."""
    code = "import os, replicator; print(os.path.dirname(replicator.__file__))"
    where = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tempfile.gettempdir(),  # not this checkout, unless it is the one on the path
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    for package in (sysconfig.get_paths()["purelib"], where):
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", "-j", "0", package],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return Path(where)


def timed(args: Sequence[str], *, expect: int | None = 0) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run of the command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [*command(), *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if expect is not None and done.returncode != expect:
        raise SystemExit(f"{' '.join(args)} exited {done.returncode}: {done.stderr.decode()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


class _DumpScanner:
    """Finds the first command byte of each client packet in the client-to-server bytes."""

    def __init__(self) -> None:
        self._header = b""
        self._left = 0  # payload bytes of the current packet still to come
        self._command_next = False  # the next payload byte is a command (sequence id 0)

    def feed(self, data: bytes) -> bool:
        """True when a binlog dump command is in ``data``."""
        found = False
        at = 0
        while at < len(data):
            if self._left:
                if self._command_next:
                    found |= data[at] in (COM_BINLOG_DUMP, COM_BINLOG_DUMP_GTID)
                    self._command_next = False
                step = min(self._left, len(data) - at)
                self._left -= step
                at += step
                continue
            take = 4 - len(self._header)
            self._header += data[at : at + take]
            at += take
            if len(self._header) == 4:
                self._left = int.from_bytes(self._header[:3], "little")
                self._command_next = self._header[3] == 0
                self._header = b""
        return found


class DumpWatcher:
    """A TCP proxy to ``upstream`` that records when the first binlog dump request passes."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.seen = threading.Event()
        self.seen_at = 0.0
        threading.Thread(target=self._accept, daemon=True).start()

    def reset(self) -> None:
        self.seen.clear()
        self.seen_at = 0.0

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, from_client: bool) -> None:
        scanner = _DumpScanner()
        try:
            with contextlib.suppress(OSError):
                while data := source.recv(65536):
                    if from_client and scanner.feed(data) and not self.seen.is_set():
                        self.seen_at = time.perf_counter()
                        self.seen.set()
                    sink.sendall(data)
        finally:
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.listener.close()


def write_config(path: Path, landing: Path, port: int, *, http: bool) -> Path:
    service = "  http_port: 0\n" if http else "  http_enabled: false\n"
    path.write_text(
        f"source:\n  host: 127.0.0.1\n  port: {port}\n  user: repl\n  password: replpass\n"
        f"sink:\n  root: {landing}\nservice:\n{service}"
    )
    return path


def time_to_dump(watcher: DumpWatcher, work: Path, index: int) -> float:
    """Seconds from exec of ``replicator run`` to its first binlog request."""
    config = write_config(work / f"run{index}.yaml", work / f"run{index}", watcher.port, http=True)
    watcher.reset()
    log = (work / f"run{index}.log").open("wb")
    start = time.perf_counter()
    proc = subprocess.Popen(
        [*command(), "run", "--config", str(config)], stdout=subprocess.DEVNULL, stderr=log
    )
    try:
        if not watcher.seen.wait(60):
            raise SystemExit(f"no binlog request within 60 s; see {log.name}")
        return watcher.seen_at - start
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        log.close()


def table(rows: list[tuple[str, list[float], list[float]]]) -> str:
    lines = ["| command | median wall s | median CPU s |", "|---|---:|---:|"]
    for name, walls, cpus in rows:
        cpu = f"{statistics.median(cpus):.3f}" if cpus else "-"
        lines.append(f"| {name} | {statistics.median(walls):.3f} | {cpu} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="runs of each command")
    parser.add_argument("--run", action="store_true", help="also `run` against a MariaDB")
    args = parser.parse_args()
    package = compile_package()

    with contextlib.ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="replicator-start")))
        with socket.create_server(("127.0.0.1", 0)) as free:  # closed again: refused
            port = int(free.getsockname()[1])
        server = None
        if args.run:
            from tests.harness.mariadb import MariaDBServer  # noqa: PLC0415 - only with --run

            server = stack.enter_context(MariaDBServer())
            port = server.port
        landing = work / "landing"
        subprocess.run(  # an empty landing zone with its id, as a first run leaves it
            [
                sys.executable,
                "-c",
                "import sys; from replicator.config import SinkConfig; "
                "from replicator.sink.landing import LandingZone; "
                "LandingZone(SinkConfig(root=sys.argv[1])).recover()",
                str(landing),
            ],
            check=True,
            capture_output=True,
        )
        config = str(write_config(work / "status.yaml", landing, port, http=False))
        cases: list[tuple[str, list[str]]] = [
            ("--help", ["--help"]),
            ("status --help", ["status", "--help"]),
            ("check --help", ["check", "--help"]),
            ("status --no-source (config)", ["status", "--config", config, "--no-source"]),
            ("status (config)", ["status", "--config", config]),
            ("dump --binlog-file (small file)", ["dump", "--binlog-file", str(SAMPLE)]),
        ]
        rows: list[tuple[str, list[float], list[float]]] = []
        for name, case in cases:
            walls, cpus = [], []
            for _ in range(args.runs):
                wall, cpu = timed(case)
                walls.append(wall)
                cpus.append(cpu)
            rows.append((name, walls, cpus))
        if server is not None:
            watcher = DumpWatcher((server.host, server.port))
            try:
                firsts = [time_to_dump(watcher, work, i) for i in range(args.runs)]
            finally:
                watcher.close()
            rows.append(("run: exec to first binlog request", firsts, []))
        print(f"{args.runs} runs each; {' '.join(command())}; the package in {package}")
        print(table(rows))


if __name__ == "__main__":
    main()
