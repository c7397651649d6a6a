"""Process plumbing for the servers replicator starts itself (the embedded demo, the tests).

Finding executables (daemons live in sbin, often missing from PATH), choosing free ports,
stopping a child by pid (SIGTERM, then SIGKILL), and two safety nets so a crashed parent never
leaves a server behind: an exit registry run at interpreter exit, and a Linux parent-death
signal set in the child before exec. ``EmbeddedServerError`` is the one error this package
raises: a server we start could not be started, reached or stopped.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

from ..errors import ReplicatorError

__all__ = [
    "EmbeddedServerError",
    "child_preexec",
    "find_executable",
    "free_tcp_port",
    "kill_process",
    "log_tail",
    "port_is_open",
    "register_for_exit",
    "terminate_process",
    "unregister_for_exit",
]

# Debian and most distributions install server daemons in sbin, which is often missing from a
# non-root user's PATH; search these after PATH.
_EXTRA_BIN_DIRS = ("/usr/sbin", "/usr/local/sbin", "/sbin", "/usr/local/mysql/bin")

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


class EmbeddedServerError(ReplicatorError):
    """A server replicator starts itself could not be started, reached or stopped.

    Not a configuration mistake (exit 2) nor a refusal by the user's server (exit 3): the
    local machine lacks something (binaries, disk, a free directory), so exit 1. The message
    says what failed (with the server's error log when there is one), the hint what to do.
    """

    exit_code = 1


def find_executable(name: str) -> str | None:
    """Return the absolute path of ``name`` from PATH or the usual sbin directories."""
    found = shutil.which(name)
    if found is not None:
        return found
    extra = os.pathsep.join(_EXTRA_BIN_DIRS)
    return shutil.which(name, path=extra)


def free_tcp_port(host: str = "127.0.0.1") -> int:
    """Ask the kernel for a currently free TCP port on ``host``.

    There is a window between closing this probe socket and the server binding the port; the
    server helpers retry with a new port when the bind fails.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def port_is_open(host: str, port: int, timeout: float = 0.2) -> bool:
    """True when something accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def log_tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a log file, or a note that it does not exist."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:])


def terminate_process(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """Stop a child by pid: SIGTERM, wait up to ``timeout`` seconds, then SIGKILL and reap."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_process(proc)


def kill_process(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL a child by pid and reap it (a simulated crash, or the end of patience)."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def _set_parent_death_signal() -> None:
    """In the child, before exec: ask Linux to SIGKILL us when the parent thread dies."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: rely on the atexit hook alone
        pass


def child_preexec() -> Callable[[], None] | None:
    """The ``preexec_fn`` for server children, or None when it would do harm.

    The parent-death signal fires when the *thread* that forked exits, so it is only safe for
    children started from the main thread (where pytest runs fixtures and the CLI runs).
    """
    if threading.current_thread() is threading.main_thread():
        return _set_parent_death_signal
    return None


_live: list[tuple[object, Callable[[], None]]] = []
_live_lock = threading.Lock()


def register_for_exit(owner: object, cleanup: Callable[[], None]) -> None:
    """Run ``cleanup`` at interpreter exit unless ``owner`` unregisters first."""
    with _live_lock:
        if not any(o is owner for o, _ in _live):
            _live.append((owner, cleanup))


def unregister_for_exit(owner: object) -> None:
    """Forget ``owner``: it has been stopped and cleaned up."""
    with _live_lock:
        _live[:] = [(o, c) for o, c in _live if o is not owner]


@atexit.register
def _stop_all_at_exit() -> None:
    with _live_lock:
        cleanups = [cleanup for _, cleanup in reversed(_live)]
    for cleanup in cleanups:
        with contextlib.suppress(Exception):
            cleanup()
