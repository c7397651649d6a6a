"""``replicator run --demo-reset``: start the embedded demo over, removing only what it made.

Three directories make up a demo, all next to each other: the landing zone (``landing/``),
the demo's MariaDB (``.replicator-demo/``) and, once ``replicator materialize`` ran as the demo
suggests, the current-state tables (``current/``). ``reset_demo`` removes each only when it
can tell it is the demo's own:

* the landing zone: the demo's record (``.replicator-demo/demo.json``, ``demo``) names its
  absolute path and its landing zone id, no process holds its lock (no daemon writes it), and
  it holds nothing but the landing zone's own files (``_landing_strays``);
* the server directory: the demo's record is in it, the datadir marker says the server was
  set up there, and no server runs on it;
* the output: the demo's record exists, the output has a materialize lock file, every table
  in it was built from the demo's landing zone (its path or its id), and it holds nothing but
  those tables' links, versions and tombstones (``_output_strays``); otherwise it is kept, and
  said so.

A landing zone the record does not name (a config's ``sink.root`` at the same path, a copy,
one from an older demo without a record) stops the reset before anything is removed. So does
a file in it that is not the landing zone's (a user's own, put there), and a directory that
holds the current directory (``--landing .``). So does the CLI when a config is given: the
reset is for the demo only.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError, ReplicatorError, SinkError
from ..landed.contract import COMPACTIONS, MANIFESTS
from ..landed.manifests import manifest_files
from ..sink.identity import read_identity
from ..sink.landing import HISTORY_DIR
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
        for path in (landing, server_dir, default_output(landing)):
            _not_around_cwd(path)
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
        done = [f"removed {_shown(r.path)} ({r.what})" for r in removals]
        for removal in removals:
            _remove(removal.path)
    finally:
        if lock is not None:
            lock.release()
    return done + lines or [f"nothing to remove: no demo at {_shown(landing)}"]


def _not_around_cwd(path: Path) -> None:
    """Refuse to remove the current directory or one that holds it."""
    cwd = Path.cwd().resolve()
    if cwd == path.resolve() or path.resolve() in cwd.parents:
        raise _refuse(
            f"{path} holds the current directory",
            hint="run the reset from another directory (the one that holds the demo's "
            "landing zone, with --landing naming it)",
        )


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
    strays = sorted(_landing_strays(landing))
    if strays:
        raise _refuse(
            f"{landing} holds what is not the landing zone's: {_listed(strays)}",
            hint="move those away first (or remove the landing zone by hand)",
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
    if record is None or record.landing != str(landing):
        return "no demo record names the landing zone it would be materialized from"
    if output.is_symlink() or not (output / outputs.LOCK_FILE).is_file():
        return "not written by replicator materialize"
    for _, state in outputs.outputs(output):
        if Path(state.landing) != landing.resolve() or state.landing_id not in {
            None,
            record.landing_id,
        }:
            return f"{state.table} in it was built from another landing zone ({state.landing})"
    strays = sorted(_output_strays(output))
    if strays:
        return f"it holds what materialize did not write: {_listed(strays)}"
    return None


# what the landing zone's own folders hold (docs/landing-zone.md "Layout"), written or staged
_RECORD = re.compile(r"\.?\d{20}\.json(?:\.tmp)?")
_COMPACTION = re.compile(r"\.?\d{20}(?:\.intent)?\.json(?:\.tmp)?")  # a crash leaves intents
_HISTORY = re.compile(r"\.?history-\d{20}\.json(?:\.tmp)?")
_TABLE_FILE = re.compile(r"\.?(?:part|compact)-[^/]*\.parquet(?:\.tmp)?")
_OWN_FOLDERS = {MANIFESTS: _RECORD, COMPACTIONS: _COMPACTION, HISTORY_DIR: _HISTORY}


def _landing_strays(landing: Path) -> Iterator[str]:
    """What in ``landing`` the layout does not place there (relative paths): ``_state/`` is
    the daemon's whole; the record folders hold records; ``<db>/<table>/`` holds row files."""
    for entry in _entries(landing):
        name = entry.name
        if name == "_state" and _plain_dir(entry):
            continue
        pattern = _OWN_FOLDERS.get(name)
        if pattern is not None and _plain_dir(entry):
            yield from _unmatched(landing, entry, pattern)
        elif _plain_dir(entry) and not name.startswith(("_", ".")):
            for table in _entries(entry):
                if _plain_dir(table):
                    yield from _unmatched(landing, table, _TABLE_FILE)
                else:
                    yield _relative(landing, table)
        else:
            yield _relative(landing, entry)


def _output_strays(output: Path) -> Iterator[str]:
    """What in ``output`` materialize's Parquet output does not hold (relative paths): its
    lock file, and in each database directory the tables' links with their hidden versions,
    temporary links and tombstones (``spark.state``)."""
    for entry in _entries(output):
        if entry.name == outputs.LOCK_FILE and entry.is_file() and not entry.is_symlink():
            continue
        if not _plain_dir(entry) or entry.name.startswith((".", "_")):
            yield _relative(output, entry)
            continue
        tables = {link.name for link in _entries(entry) if _is_table_link(link)}
        for item in _entries(entry):
            if item.name in tables or _beside_a_table(item.name, tables):
                continue
            yield _relative(output, item)


def _is_table_link(entry: Path) -> bool:
    return not entry.name.startswith(".") and entry.is_symlink()


def _beside_a_table(name: str, tables: set[str]) -> bool:
    """A version directory, temporary link or tombstone of one of ``tables`` (or a
    tombstone of a table without a link: a removed one)."""
    found = re.fullmatch(r"\.(.+)\.(?:(?:v|link)-[0-9a-f]{12}|gone\.json)", name)
    return found is not None and (found[1] in tables or name.endswith(".gone.json"))


def _unmatched(root: Path, folder: Path, pattern: re.Pattern[str]) -> Iterator[str]:
    for entry in _entries(folder):
        if entry.is_symlink() or not entry.is_file() or not pattern.fullmatch(entry.name):
            yield _relative(root, entry)


def _entries(folder: Path) -> list[Path]:
    return sorted(folder.iterdir())


def _plain_dir(entry: Path) -> bool:
    return entry.is_dir() and not entry.is_symlink()


def _relative(root: Path, entry: Path) -> str:
    return os.path.relpath(entry, root) + ("/" if _plain_dir(entry) else "")


def _listed(strays: list[str], shown: int = 5) -> str:
    more = len(strays) - shown
    return ", ".join(strays[:shown]) + (f" and {more} more" if more > 0 else "")
