"""``captured_log``: what a module's structlog logger writes during a test.

structlog's ``capture_logs`` misses a logger that an earlier ``configure()`` in the same
process (a command run in-process, with ``cache_logger_on_first_use``) has cached: which tests
ran before decides. Replacing the module's ``log`` for the test does not depend on that."""

from __future__ import annotations

import pytest
import structlog
from structlog.testing import LogCapture


def captured_log(monkeypatch: pytest.MonkeyPatch, module: object) -> LogCapture:
    """The entries ``module.log`` writes from here on, at every level."""
    capture = LogCapture()
    captured = structlog.wrap_logger(
        None, processors=[capture], wrapper_class=structlog.make_filtering_bound_logger(0)
    )
    monkeypatch.setattr(module, "log", captured)
    return capture
