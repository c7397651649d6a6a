"""A throwaway S3 API server (moto's standalone server) for the object-store tests.

``S3Server`` runs ``moto_server -p <free port>`` from the virtualenv as a child process (its
own session, the parent-death signal set), waits until it answers, makes buckets with
pyarrow's own S3 client, and stops the process by its pid. Tests talk to it through the real
S3 wire protocol: nothing of the client is mocked. The credentials are dummies (moto accepts
any); ``env()`` gives what a daemon subprocess needs to find them the usual way (the AWS_*
variables).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

import pyarrow.fs as pafs

from tests.harness import (
    HarnessError,
    child_preexec,
    free_tcp_port,
    log_tail,
    port_is_open,
    register_for_exit,
    terminate_process,
    unregister_for_exit,
)

__all__ = ["ACCESS_KEY", "SECRET_KEY", "S3Server", "s3_available"]

ACCESS_KEY = "testing-access-key"
SECRET_KEY = "testing-secret-key-never-shown"
REGION = "us-east-1"


def _moto_server() -> Path | None:
    found = Path(sys.executable).parent / "moto_server"
    return found if found.exists() else None


def s3_available() -> tuple[bool, str]:
    """(True, "") when moto's server is installed beside this Python, else (False, reason)."""
    if _moto_server() is None:
        return False, "moto_server not found beside this Python (pip install 'moto[server]')"
    return True, ""


class S3Server:
    """One moto S3 server on a free port; ``bucket(name)`` makes buckets; ``close()`` stops it."""

    def __init__(self, *, startup_timeout: float = 30.0) -> None:
        self._startup_timeout = startup_timeout
        self._root: Path | None = None
        self._port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> S3Server:
        ok, reason = s3_available()
        if not ok:
            raise HarnessError(reason)
        register_for_exit(self, self.close)
        self._root = Path(tempfile.mkdtemp(prefix="replicator-s3-"))
        self._port = free_tcp_port()
        server = _moto_server()
        assert server is not None
        with (self._root / "moto.log").open("ab") as out:
            self._proc = subprocess.Popen(
                [str(server), "-H", "127.0.0.1", "-p", str(self._port)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=child_preexec(),  # noqa: PLW1509 - sets only the parent-death signal
            )
        deadline = time.monotonic() + self._startup_timeout
        while not port_is_open("127.0.0.1", self._port):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                tail = log_tail(self._root / "moto.log")
                self.close()
                raise HarnessError(f"moto_server did not start: {tail}")
            time.sleep(0.05)
        return self

    @property
    def endpoint(self) -> str:
        if self._port is None:
            raise HarnessError("the S3 server has not been started")
        return f"http://127.0.0.1:{self._port}"

    @property
    def log_path(self) -> Path:
        """The server's output: a line per request, written once it is answered."""
        if self._root is None:
            raise HarnessError("the S3 server has not been started")
        return self._root / "moto.log"

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise HarnessError("the S3 server is not running")
        return self._proc.pid

    def filesystem(self) -> pafs.S3FileSystem:
        """pyarrow's S3 client for this server (path-style addressing)."""
        return pafs.S3FileSystem(
            access_key=ACCESS_KEY,
            secret_key=SECRET_KEY,
            region=REGION,
            scheme="http",
            endpoint_override=f"127.0.0.1:{self._port}",
            force_virtual_addressing=False,
            allow_bucket_creation=True,
            allow_bucket_deletion=True,
        )

    def bucket(self, name: str) -> str:
        """Make the bucket ``name`` (a valid bucket name: lower case, 3-63 characters)."""
        self.filesystem().create_dir(name)
        return name

    def env(self) -> dict[str, str]:
        """The variables a daemon subprocess finds the credentials and region in."""
        return {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_EC2_METADATA_DISABLED": "true",  # no instance-role probe on a test machine
        }

    def sink_yaml(self, root: str, indent: str = "  ") -> str:
        """``sink.root`` and ``sink.object_store`` lines (under ``sink:``) for this server."""
        return (
            f"{indent}root: {root}\n{indent}object_store:\n"
            f"{indent}  endpoint: {self.endpoint}\n{indent}  region: {REGION}\n"
        )

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            terminate_process(proc, timeout=10)
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
        self._root = None
        self._port = None
        unregister_for_exit(self)

    def __enter__(self) -> S3Server:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
