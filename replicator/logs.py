"""Logging, configured once: JSON lines when stderr is not a terminal, console otherwise.

Libraries log through the standard ``logging`` module (paho-mqtt under aiomqtt as ``mqtt``,
botocore, asyncio): a handler on the root logger hands their records of WARNING and above to
structlog, so they come out as the same JSON lines (with ``logger``: the library's logger
name), never as the plain text of ``logging.lastResort``. Their DEBUG and INFO records stay
out whatever ``level`` says: botocore's debug output holds request headers and signatures.
"""

from __future__ import annotations

import logging
import sys
from typing import Final

import structlog

__all__ = ["configure"]

# The lowest level of a library's record that is written.
_LIBRARY_LEVEL: Final = logging.WARNING
_LEVELS: Final = (logging.CRITICAL, logging.ERROR, logging.WARNING, logging.INFO, logging.DEBUG)

_log = structlog.get_logger("replicator.logs")


class _LibraryRecords(logging.Handler):
    """Writes the standard library's log records through structlog."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            # structlog knows the standard levels only (a custom level between two: the lower)
            level = next((n for n in _LEVELS if record.levelno >= n), logging.DEBUG)
            _log.log(level, record.getMessage(), logger=record.name, exc_info=record.exc_info)
        except Exception:
            self.handleError(record)


def configure(*, json_output: bool | None = None, level: int = logging.INFO) -> None:
    if json_output is None:
        json_output = not sys.stderr.isatty()
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if json_output
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _LibraryRecords)]:
        root.removeHandler(handler)  # configured again: one handler, not two
    library_level = max(level, _LIBRARY_LEVEL)
    handler = _LibraryRecords(library_level)
    root.addHandler(handler)
    root.setLevel(library_level)
