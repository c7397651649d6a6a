"""Process-wide settings of the long-running commands (``replicator.runtime``)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

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
