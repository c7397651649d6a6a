"""Process-wide settings of the long-running commands (``replicator.runtime``)."""

from __future__ import annotations

import pytest


def test_the_daemon_gives_arrow_the_system_allocator_unless_the_environment_chose(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import pyarrow as pa

    from replicator.runtime import use_system_allocator

    before = pa.default_memory_pool()
    try:
        monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", "mimalloc")
        pa.set_memory_pool(pa.mimalloc_memory_pool())
        use_system_allocator()
        assert pa.default_memory_pool().backend_name == "mimalloc"
        monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL")
        use_system_allocator()
        assert pa.default_memory_pool().backend_name == "system"
    finally:
        pa.set_memory_pool(before)
