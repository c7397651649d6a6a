"""A throwaway Mosquitto MQTT broker for notification tests.

``MosquittoBroker`` writes a minimal config into its own temp dir (one listener on a free
127.0.0.1 port, anonymous clients allowed, persistence off, then any ``extra_config`` lines,
e.g. ``max_packet_size 4096``) and runs ``mosquitto -c`` as a child process, so tests never
touch the system broker on 1883. ``stop()`` and ``start()`` can be called repeatedly on the
same port to simulate a broker outage; ``close()`` stops it for good and deletes the temp dir.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from tests.harness import (
    HarnessError,
    child_preexec,
    find_executable,
    free_tcp_port,
    log_tail,
    port_is_open,
    register_for_exit,
    terminate_process,
    unregister_for_exit,
)

__all__ = ["MosquittoBroker", "mosquitto_available"]

_DEBIAN_PACKAGE = "mosquitto"


def mosquitto_available() -> tuple[bool, str]:
    """(True, "") when the mosquitto broker is installed, else (False, reason)."""
    if find_executable("mosquitto") is None:
        return False, f"mosquitto not found (Debian: apt-get install {_DEBIAN_PACKAGE})"
    return True, ""


class MosquittoBroker:
    """One throwaway broker. ``start()``/``stop()`` any number of times, ``close()`` at the end."""

    def __init__(self, *, startup_timeout: float = 10.0, extra_config: Sequence[str] = ()) -> None:
        self._startup_timeout = startup_timeout
        self._extra_config = tuple(extra_config)
        self._root: Path | None = None
        self._port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> MosquittoBroker:
        """Start the broker (on the same port as before, after a ``stop()``) and wait for it."""
        if self.is_running:
            raise HarnessError(f"{self!r} is already running")
        ok, reason = mosquitto_available()
        if not ok:
            raise HarnessError(reason)
        if self._root is None:
            register_for_exit(self, self.close)
            self._root = Path(tempfile.mkdtemp(prefix="replicator-mosquitto-"))
            self._port = free_tcp_port()
        self._write_config()
        mosquitto = find_executable("mosquitto")
        assert mosquitto is not None
        with self.log_path.open("ab") as out:
            self._proc = subprocess.Popen(
                [mosquitto, "-c", str(self.config_path)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=child_preexec(),  # noqa: PLW1509 - sets only the parent-death signal
            )
        try:
            self._wait_until_listening()
        except BaseException:
            self.close()
            raise
        return self

    def stop(self) -> None:
        """Stop the broker process (SIGTERM, then SIGKILL); keep port and temp dir. Idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None:
            terminate_process(proc, timeout=10)
        # Wait for the kernel to release the listener so a restart can bind it again.
        deadline = time.monotonic() + 5
        while self._port is not None and time.monotonic() < deadline:
            if not port_is_open(self.host, self._port):
                break
            time.sleep(0.02)

    def close(self) -> None:
        """Stop the broker and delete its temp dir; the object cannot be restarted after."""
        try:
            self.stop()
        finally:
            if self._root is not None:
                shutil.rmtree(self._root, ignore_errors=True)
            self._root = None
            self._port = None
            unregister_for_exit(self)

    @property
    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def port(self) -> int:
        if self._port is None:
            raise HarnessError("the broker has not been started")
        return self._port

    @property
    def base_dir(self) -> Path:
        if self._root is None:
            raise HarnessError("the broker has not been started")
        return self._root

    @property
    def config_path(self) -> Path:
        return self.base_dir / "mosquitto.conf"

    @property
    def log_path(self) -> Path:
        return self.base_dir / "mosquitto.log"

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise HarnessError("the broker is not running")
        return self._proc.pid

    def __enter__(self) -> MosquittoBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        where = f"127.0.0.1:{self._port}" if self._port is not None else "not started"
        return f"MosquittoBroker({where})"

    def _write_config(self) -> None:
        # Started as root, mosquitto 2 drops to the 'mosquitto' user unless told to stay;
        # naming the current user keeps it (and is ignored when not root).
        user = pwd.getpwuid(os.geteuid()).pw_name
        self.config_path.write_text(
            "\n".join(
                [
                    f"listener {self.port} {self.host}",
                    "allow_anonymous true",
                    "persistence false",
                    f"user {user}",
                    "log_dest stdout",
                    "log_type error",
                    "log_type warning",
                    "log_type notice",
                    "log_type information",
                    *self._extra_config,
                    "",
                ]
            ),
            encoding="utf-8",
        )

    def _wait_until_listening(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self._startup_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise HarnessError(
                    f"mosquitto exited with {self._proc.returncode} during startup; "
                    f"log tail:\n{log_tail(self.log_path)}"
                )
            if port_is_open(self.host, self.port):
                return
            time.sleep(0.02)
        raise HarnessError(
            f"mosquitto did not listen on {self.host}:{self.port} within "
            f"{self._startup_timeout:.0f} s; log tail:\n{log_tail(self.log_path)}"
        )
