"""The embedded demo: ``replicator run`` with no source configured shows the product working.

``start_demo(landing)`` does, in order:

1. Starts a MariaDB server of our own (``mariadbd`` from the ``mariadb-server-core`` package;
   nothing is downloaded) on a free 127.0.0.1 port, with the binlog settings replicator needs
   (ROW, FULL row image, CRC32, GTID domain 0) and ``binlog_row_metadata=FULL`` where the
   server has it (MariaDB 10.5+), so column names and ENUM/SET labels travel in the binlog.
2. Creates the ``shop`` database (customers, products, orders, order_items; every column type
   the landing zone maps) and seeds it, unless a kept server already has it.
3. Starts the sample workload (``workload.py``) in a thread: about ``rate`` transactions per
   second of orders, payments, cancellations, price changes, primary-key changes, some
   rolled back, an ``ADD COLUMN`` now and then.
4. Returns a ``Demo`` handle whose ``config`` points replicator at that server: the ``repl``
   account, only ``shop.*``, small batches (a commit about every second), landing in
   ``landing``, and, when the landing zone has no checkpoint yet, a start at the beginning of
   the server's binary log, so the landing zone holds every row from the first INSERT on.

Run ``Service(demo.config, ...)`` while the handle is open; closing it stops the workload
after its current transaction, then the server (clean shutdown)::

    with start_demo(Path("landing")) as demo:
        asyncio.run(Service(demo.config, RunOptions()).run())

Where the server lives: ``<landing>/../.replicator-demo`` (next to the landing zone, not in
it, so Spark never lists it), kept across runs. The next run continues the same datadir and
binary log, and replicator resumes from the landing zone's checkpoint: the two stay
consistent. To start over: ``replicator run --demo-reset`` (``reset``). A new server next to a
landing zone that already has a checkpoint is refused (the checkpoint names transactions the
new server never had). ``server_dir=`` puts the server elsewhere; ``temporary=True`` uses a
temp dir deleted at stop (tests). The server listens on 127.0.0.1 only; its root account has
no password.

The server directory also holds ``demo.json``, the demo's record of itself: the landing zone
it fills (absolute path and landing zone id) and the server's address. The commands that read
a landing zone take the demo's settings from it when given none (``demo_settings``), and the
reset removes a landing zone only when the record names it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

import structlog

from ..durable import write_atomic
from .mariadb import (
    DEBIAN_PACKAGES,
    REPL_PASSWORD,
    REPL_USER,
    MariaDBServer,
    mariadb_available,
    mariadbd_version,
    running_server_pid,
)
from .process import EmbeddedServerError
from .workload import Workload, WorkloadStats

# The commands that read a landing zone ask ``demo_settings`` whether the current directory
# holds the demo's: the config models and the landing zone's readers (pyarrow) are imported
# where they are used, so that asking costs nothing when the answer is no.
if TYPE_CHECKING:
    from ..config import Config

__all__ = [
    "DEMO_DATABASE",
    "DEMO_LANDING",
    "DEMO_OUTPUT",
    "DEMO_SERVER_DIR",
    "Demo",
    "DemoRecord",
    "default_output",
    "default_server_dir",
    "demo_config",
    "demo_server_args",
    "demo_settings",
    "read_record",
    "start_demo",
]

log = structlog.get_logger("replicator")

DEMO_DATABASE = "shop"
DEMO_LANDING = Path("landing")  # `replicator run` (demo): --landing
DEMO_SERVER_DIR = ".replicator-demo"  # next to the landing zone
DEMO_OUTPUT = "current"  # next to the landing zone: where the demo says to materialize
RECORD = "demo.json"  # in the server directory
_CHECKPOINT = Path("_state") / "checkpoint.json"  # checkpoint.py's file under the root


def default_server_dir(landing: Path) -> Path:
    """Where the demo keeps its server by default: ``<landing>/../.replicator-demo``."""
    return landing.absolute().parent / DEMO_SERVER_DIR


def default_output(landing: Path) -> Path:
    """Where the demo says to materialize to: ``<landing>/../current``."""
    return landing.absolute().parent / DEMO_OUTPUT


@dataclass(frozen=True, slots=True)
class DemoRecord:
    """``<server dir>/demo.json``: the landing zone the demo fills and its server's address."""

    landing: str  # absolute path
    landing_id: str
    host: str
    port: int

    @classmethod
    def read(cls, server_dir: Path) -> DemoRecord | None:
        try:
            data = json.loads((server_dir / RECORD).read_text())
            return cls(
                str(data["landing"]), str(data["landing_id"]), str(data["host"]), int(data["port"])
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def write(self, server_dir: Path) -> None:
        data = {
            "landing": self.landing,
            "landing_id": self.landing_id,
            "host": self.host,
            "port": self.port,
        }
        write_atomic(server_dir / RECORD, json.dumps(data, indent=1).encode() + b"\n")


def read_record(landing: Path) -> DemoRecord | None:
    """The record of the demo whose landing zone is ``landing`` (its server directory next to
    it names it); None when ``landing`` is not a demo's landing zone."""
    record = DemoRecord.read(default_server_dir(landing))
    if record is None or record.landing != str(landing.absolute()):
        return None
    return record


def demo_settings(landing: Path = DEMO_LANDING) -> Config | None:
    """The demo's config for the commands that read a landing zone (``status``, ``checkpoint
    show``, ``check``) when they are given none: when ``landing`` is a demo's landing zone.
    Its source is the demo's server as last started (reachable while the demo runs)."""
    record = read_record(landing)
    if record is None or not landing.is_dir():
        return None
    return _config(record.host, record.port, landing, start=None)


def demo_server_args() -> tuple[str, ...]:
    """Server options beyond the base ones: FULL row metadata where the server has it."""
    if mariadbd_version() >= (10, 5):
        return ("--binlog-row-metadata=FULL",)
    return ()


def demo_config(server: MariaDBServer, landing: Path, *, database: str = DEMO_DATABASE) -> Config:
    """The replicator config for a running embedded server: the replication account, only
    ``database``, small batches, landing in ``landing``. With no checkpoint in ``landing`` it
    starts at the beginning of the server's binary log (so nothing the demo wrote is missed);
    otherwise the checkpoint decides."""
    files = server.binlog_files()
    if not files:
        raise EmbeddedServerError(
            f"{server!r} has no binary log", hint="do not pass --skip-log-bin to the server"
        )
    return _config(server.host, server.port, landing, start=files[0], database=database)


def _config(
    host: str, port: int, landing: Path, *, start: str | None, database: str = DEMO_DATABASE
) -> Config:
    from ..config import load_config  # noqa: PLC0415 - see the imports

    # every setting from the environment applies over the demo's defaults (as over a config
    # file), except where its server and landing zone are: those are the demo's own
    return load_config(
        None,
        defaults={
            "source": {"heartbeat_seconds": 1.0, "reconnect_max_delay": 5.0},
            "sink": {
                "batch_max_rows": 10_000,
                "batch_max_bytes": 8 * 1024 * 1024,
                "batch_max_seconds": 1.0,
            },
            "filters": {"include": [f"{database}.*"]},
        },
        fixed={
            "source": {
                "host": host,
                "port": port,
                "user": REPL_USER,
                "password": REPL_PASSWORD,
                "unix_socket": None,
            },
            "start": {"file": start, "position": 4} if start else {},
            "sink": {"root": str(landing)},
        },
    )


class Demo:
    """A running demo: ``server``, ``workload`` and the ``config`` to replicate from them.

    ``stop()`` (or leaving ``with``) stops the workload, then the server; idempotent."""

    def __init__(
        self, server: MariaDBServer, workload: Workload, config: Config, landing: Path
    ) -> None:
        self.server = server
        self.workload = workload
        self.config = config
        self.landing = landing
        self._stopped = False

    def stop(self) -> WorkloadStats:
        """Stop the workload after its current transaction, then shut the server down."""
        try:
            stats = self.workload.stop()
        finally:
            self.server.stop()
        if not self._stopped:
            self._stopped = True
            log.info(
                "demo source stopped",
                transactions=stats.transactions,
                rolled_back=stats.rolled_back,
                ddl=stats.ddl,
                rows_changed=stats.rows_changed,
            )
        return stats

    def __enter__(self) -> Demo:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _workload_failed(exc: BaseException) -> None:
    log.error(
        "demo workload stopped",
        error=str(exc),
        hint="replication continues with what was written; restart to resume the workload",
    )


def start_demo(
    landing: Path = Path("landing"),
    *,
    server_dir: Path | None = None,
    temporary: bool = False,
    rate: float = 5.0,
    seed: int = 42,
    duration: float | None = None,
    startup_timeout: float = 60.0,
) -> Demo:
    """Start the server, prepare ``shop``, start the workload thread; return the handle.

    ``server_dir``: where the server keeps its files (default ``default_server_dir(landing)``);
    ``temporary``: a temp dir instead, deleted at stop. ``rate``: workload transactions per
    second; ``seed``: its random seed; ``duration``: seconds until the workload stops by
    itself (None: until ``stop()``)."""
    from ..landed.manifests import read_chain  # noqa: PLC0415 - see the imports
    from ..sink.identity import establish  # noqa: PLC0415

    ok, reason = mariadb_available()
    if not ok:
        raise EmbeddedServerError(
            f"the demo needs a local MariaDB: {reason}",
            hint=f"apt-get install {DEBIAN_PACKAGES} (Debian/Ubuntu), or point replicator at "
            "your own server: replicator run --config FILE",
        )
    base_dir = None if temporary else (server_dir or default_server_dir(landing))
    running = None if base_dir is None else running_server_pid(base_dir)
    if base_dir is not None and running is not None:
        from ..sink.lock import read_record as read_lock  # noqa: PLC0415 - see the imports

        holder = read_lock(landing) if landing.is_dir() else None
        daemon = (
            f"; `replicator run` is pid {holder.pid}"
            if holder is not None and holder.running
            else ""
        )
        raise EmbeddedServerError(
            f"the demo is already running: its MariaDB (pid {running}, recorded in "
            f"{base_dir / 'mariadbd.pid'}) serves the landing zone {landing}{daemon}",
            hint="read that landing zone while it runs (replicator status, replicator "
            "checkpoint show, from the same directory), or stop that demo first (Ctrl-C in "
            "its terminal, or SIGTERM to its pid), then start again",
        )
    server = MariaDBServer(demo_server_args(), base_dir=base_dir, startup_timeout=startup_timeout)
    checkpoint = landing / _CHECKPOINT
    if not server.has_datadir and checkpoint.exists():
        where = "a temp dir" if base_dir is None else str(base_dir)
        raise EmbeddedServerError(
            f"{landing} has a checkpoint, but the demo server in {where} would be new: the "
            "checkpoint names transactions that server never had",
            hint=f"remove {landing} to start the demo over (its server directory, which "
            "recorded it for --demo-reset, is gone), or bring back the server directory the "
            "landing zone was filled from",
        )
    server.start()
    try:
        config = demo_config(server, landing)
        if not temporary:
            # the landing zone's id now (the daemon keeps it), so the record can name it
            manifests = read_chain(landing) if landing.is_dir() else []
            landing_id, _ = establish(landing, manifests[-1].landing_id if manifests else None)
            DemoRecord(str(landing.absolute()), landing_id, server.host, server.port).write(
                server.base_dir
            )
        workload = Workload(
            server.connect,
            database=DEMO_DATABASE,
            seed=seed,
            rate=rate,
            on_error=_workload_failed,
        )
        workload.prepare()
        workload.start(duration=duration)
    except BaseException:
        server.stop()
        raise
    log.info(
        "demo source started",
        server=f"{server.host}:{server.port}",
        version=server.version,
        server_dir=str(server.base_dir),
        database=DEMO_DATABASE,
        rate=rate,
        landing=str(landing),
        hint=f"look inside: mariadb -h {server.host} -P {server.port} -u root {DEMO_DATABASE}",
    )
    return Demo(server, workload, config, landing)
