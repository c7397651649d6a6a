"""``replicator run --demo-reset``: start the embedded demo over, removing only what it made.

Three directories make up a demo, all next to each other: the landing zone (``landing/``),
the demo's MariaDB (``.replicator-demo/``) and, once ``replicator materialize`` ran as the demo
suggests, the current-state tables (``current/``). ``reset_demo`` removes each only when it
can tell it is the demo's own:

* the landing zone: the demo's record (``.replicator-demo/demo.json``, ``demo``) names its
  absolute path and its landing zone id, and no process holds its lock (no daemon writes it);
* the server directory: the demo's record is in it, the datadir marker says the server was
  set up there, and no server runs on it;
* the output: it has a materialize lock file and every table in it was built from the demo's
  landing zone (its path or its id); otherwise it is kept, and said so.

A landing zone the record does not name (a config's ``sink.root`` at the same path, a copy,
one from an older demo without a record) stops the reset before anything is removed. So does
the CLI when a config is given: the reset is for the demo only.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError, ReplicatorError, SinkError
from ..landed.manifests import manifest_files
from ..sink.identity import read_identity
from ..sink.lock import LandingLock, LandingZoneBusyError
from ..spark import state as outputs
from .demo import DemoRecord, default_output, default_server_dir
from .mariadb import made_here, running_server_pid

__all__ = ["reset_demo"]


@dataclass(frozen=True, slots=True)
class _Removal:
    path: Path
    what: str


def _shown(path: Path) -> str:
    """``path`` relative to the current directory when it is under it, with a slash."""
    try:
        return f"{path.relative_to(Path.cwd())}/"
    except ValueError:
        return f"{path}/"


def _refuse(problem: str, hint: str) -> ConfigError:
    return ConfigError(f"demo reset: {problem}; nothing was removed", hint=hint)


def reset_demo(landing: Path) -> list[str]:
    """Remove the demo whose landing zone is ``landing`` (see the module doc); returns one
    line per directory removed or kept. ConfigError, with nothing removed, when a directory
    cannot be told to be the demo's or is in use."""
    landing = landing.absolute()
    server_dir = default_server_dir(landing)
    record = DemoRecord.read(server_dir)
    removals: list[_Removal] = []
    lines: list[str] = []
    lock: LandingLock | None = None
    try:
        if landing.exists():
            lock = _landing_zone(landing, record)
            batches = len(manifest_files(landing)[0])
            removals.append(_Removal(landing, f"the demo's landing zone, {batches} batches"))
        if server_dir.exists():
            _server_dir(server_dir, record)
            removals.append(_Removal(server_dir, "the demo's MariaDB server and its binlog"))
        output = default_output(landing)
        if output.exists():
            why_not = _not_ours(output, landing, record)
            if why_not is None:
                tables = sum(1 for _ in outputs.outputs(output))
                removals.append(_Removal(output, f"materialized from it, {tables} tables"))
            else:
                lines.append(f"kept {_shown(output)}: {why_not}")
        for removal in removals:
            _remove(removal.path)
    finally:
        if lock is not None:
            lock.release()
    done = [f"removed {_shown(r.path)} ({r.what})" for r in removals]
    return done + lines or [f"nothing to remove: no demo at {_shown(landing)}"]


def _remove(path: Path) -> None:
    try:
        if (path / outputs.LOCK_FILE).is_file():
            with outputs.lock(path):  # never under a materialize writing it
                shutil.rmtree(path)
        else:
            shutil.rmtree(path)
    except OSError as exc:
        raise SinkError(
            f"demo reset: cannot remove {path}: {exc.strerror}",
            hint="check the permissions, then remove it by hand",
        ) from exc


def _landing_zone(landing: Path, record: DemoRecord | None) -> LandingLock:
    """Check that ``landing`` is the demo's landing zone and take its lock."""
    if record is None or record.landing != str(landing):
        where = "has no record" if record is None else f"records {record.landing}"
        raise _refuse(
            f"{landing} is not known as the demo's landing zone ({default_server_dir(landing)} "
            f"{where})",
            hint="it may be a landing zone of your own: remove it by hand if it is the demo's "
            "(a demo from an older replicator has no record)",
        )
    try:
        found = read_identity(landing)
    except ReplicatorError:
        found = None
    if found != record.landing_id:
        raise _refuse(
            f"{landing} is landing zone {found or '(no id)'}, but the demo filled landing "
            f"zone {record.landing_id}",
            hint="another landing zone took the demo's place: remove it by hand if you mean to",
        )
    try:
        return LandingLock(landing).acquire("demo reset")
    except LandingZoneBusyError as exc:
        raise _refuse(str(exc), hint="stop the running demo first (Ctrl-C)") from None


def _server_dir(server_dir: Path, record: DemoRecord | None) -> None:
    if record is None or not made_here(server_dir):
        raise _refuse(
            f"{server_dir} was not made by the demo (no demo record or datadir marker in it)",
            hint="remove it by hand if it is the demo's",
        )
    pid = running_server_pid(server_dir)
    if pid is not None:
        raise _refuse(
            f"the demo's MariaDB server (pid {pid}) still runs on {server_dir}",
            hint="stop the running demo first (Ctrl-C)",
        )


def _not_ours(output: Path, landing: Path, record: DemoRecord | None) -> str | None:
    """Why ``output`` is not the demo's materialized output (None: it is)."""
    if output.is_symlink() or not (output / outputs.LOCK_FILE).is_file():
        return "not written by replicator materialize"
    ids = {None} if record is None else {None, record.landing_id}
    for _, state in outputs.outputs(output):
        if Path(state.landing) != landing.resolve() or state.landing_id not in ids:
            return f"{state.table} in it was built from another landing zone ({state.landing})"
    return None
