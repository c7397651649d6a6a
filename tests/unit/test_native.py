"""The native core (``replicator/binlog/_rowcore.c``) is built, used by default, and can be
turned off.

Without a C compiler the package installs without it and the generated Python decoders run
instead; that skips the native tests here, and with REPLICATOR_REQUIRE_NATIVE=1 (CI sets it)
the skip is a failure, so CI always tests the native path.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from replicator.binlog import native, rows

REQUIRE_NATIVE_ENV = "REPLICATOR_REQUIRE_NATIVE"


def require_native() -> None:
    """Skip without the native core; fail instead when REPLICATOR_REQUIRE_NATIVE=1."""
    if native.available():
        return
    reason = f"the native core is not built: {native.unavailable()}"
    if os.environ.get(REQUIRE_NATIVE_ENV) == "1":
        pytest.fail(f"{reason} ({REQUIRE_NATIVE_ENV}=1 forbids skipping)", pytrace=False)
    pytest.skip(reason)


def test_native_core_is_the_default() -> None:
    require_native()
    assert rows.default_decoders() == "native"


def _defaults(env: dict[str, str]) -> str:
    code = (
        "from replicator.binlog import native, rows; "
        "print(native.available(), rows.default_decoders())"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_replicator_native_0_turns_it_off() -> None:
    require_native()
    env = {k: v for k, v in os.environ.items() if k != "REPLICATOR_NATIVE"}
    assert _defaults(env) == "True native"
    assert _defaults({**env, "REPLICATOR_NATIVE": "0"}) == "False reference"
