"""What loads the system's CA store during a test: building a verifying TLS context from it
costs tens of milliseconds, so connections that need none must not."""

from __future__ import annotations

import ssl
from typing import Any

import pytest


def ca_store_loads(monkeypatch: pytest.MonkeyPatch) -> list[ssl.SSLContext]:
    """From now on, every context that loads the system's CA store
    (``ssl.SSLContext.load_default_certs``), in order."""
    loads: list[ssl.SSLContext] = []
    original = ssl.SSLContext.load_default_certs

    def counted(context: ssl.SSLContext, *args: Any) -> None:
        loads.append(context)
        original(context, *args)

    monkeypatch.setattr(ssl.SSLContext, "load_default_certs", counted)
    return loads
