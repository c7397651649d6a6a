"""Process-wide settings of the long-running commands (``replicator.runtime``)."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import pytest

from replicator.runtime import GC_THRESHOLDS, held_gc, tune_gc

_POOL = "import replicator.cli, pyarrow as pa; print(pa.default_memory_pool().backend_name)"


@pytest.mark.parametrize(("chosen", "expected"), [(None, "system"), ("mimalloc", "mimalloc")])
def test_the_program_gives_arrow_the_system_allocator_unless_the_environment_chose(
    chosen: str | None, expected: str
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if chosen is not None:
        env["ARROW_DEFAULT_MEMORY_POOL"] = chosen
    out = subprocess.run(
        [sys.executable, "-c", _POOL], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == expected


_RUN = """
import gc, sys
import replicator.service as service

async def report(self):
    print(gc.isenabled(), gc.get_threshold(), gc.get_freeze_count() > 20_000)
    return 0

service.Service.run = report
sys.argv = ["replicator", "run", "--config", sys.argv[1]]
from replicator.cli import main
main()
"""


def test_the_daemon_runs_with_the_collector_on_after_its_start_up(tmp_path: Path) -> None:
    """``run`` holds the cycle collector through its imports (``held_gc``): the daemon itself
    must run with it on again, tuned, and what start-up made frozen out of it."""
    config = tmp_path / "replicator.yaml"
    config.write_text(
        "source:\n  host: 127.0.0.1\n  port: 1\n  user: repl\n"
        f"sink:\n  root: {tmp_path / 'landing'}\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", _RUN, str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[0] == f"True {GC_THRESHOLDS} True"


def test_a_start_up_that_fails_leaves_the_collector_on() -> None:
    thresholds = gc.get_threshold()
    try:
        with pytest.raises(ImportError), held_gc():
            import replicator.no_such_module  # type: ignore[import-not-found]  # noqa: F401
        assert gc.isenabled()
        assert gc.get_threshold() == GC_THRESHOLDS
    finally:  # this process's own settings back
        gc.enable()
        gc.unfreeze()
        gc.set_threshold(*thresholds)


def test_start_up_ends_without_a_full_collection() -> None:
    """The imports leave little garbage; a full collection of all they allocated would cost
    a tenth of ``run``'s way to its first binlog request, so ``held_gc`` freezes without
    one (``tune_gc`` of a command without ``held_gc`` still collects first)."""
    thresholds = gc.get_threshold()
    seen: list[int] = []

    def watch(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    gc.callbacks.append(watch)
    try:
        with held_gc():
            pass
        assert seen == []
        assert gc.isenabled() and gc.get_threshold() == GC_THRESHOLDS
        gc.unfreeze()
        tune_gc()
        assert seen == [2]
    finally:
        gc.callbacks.remove(watch)
        gc.enable()
        gc.unfreeze()
        gc.set_threshold(*thresholds)
