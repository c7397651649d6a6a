"""Real-server test harness: throwaway MariaDB, Mosquitto and Docker-backed servers.

The servers are real processes started by the tests themselves, in the manner of asyncpg's
cluster helper, so live tests exercise the same wire protocol a production replica sees.
The process plumbing (finding executables, free ports, stopping a child by pid, the exit
registry and the parent-death signal) lives in the product, ``replicator.embedded.process``,
because the embedded demo starts servers the same way; this module re-exports it.
``HarnessError`` is ``EmbeddedServerError``: every harness server raises the one error.

Import the helpers from their modules: ``tests.harness.mariadb``, ``tests.harness.mosquitto``,
``tests.harness.containers``.
"""

from __future__ import annotations

from replicator.embedded.process import (
    EmbeddedServerError,
    child_preexec,
    find_executable,
    free_tcp_port,
    kill_process,
    log_tail,
    port_is_open,
    register_for_exit,
    terminate_process,
    unregister_for_exit,
)

HarnessError = EmbeddedServerError

__all__ = [
    "HarnessError",
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
