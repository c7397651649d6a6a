"""What the replica stream logs when it loses the source and tries again.

One warning per lost connection (an outage: the first failure since the stream last ran) and
one per further failed attempt, each with its cause, the position it resumes from and the
delay before the next attempt. Repeated same-id refusals mean another replica registered with
our ``server_id``: the two take the dump from each other in turn, which no retry fixes, so that
is said once it happens ``CLASH_COUNT`` times within ``CLASH_WINDOW`` seconds.
"""

from __future__ import annotations

import re
import time

import structlog

from ..binlog.position import StreamPosition
from ..config import SourceConfig
from .connection import describe_source
from .stream_stats import StreamStats

__all__ = ["CLASH_COUNT", "CLASH_WINDOW", "ReconnectLog"]

log = structlog.get_logger("replicator")
# MariaDB ER_SLAVE_SAME_ID (4052) "A slave with the same server_uuid/server_id is already
# connected"; MySQL sends 1236 "A slave with the same server_uuid/server_id as this slave has
# connected to the master" to the replica it drops
_SAME_ID = re.compile(r"same server_uuid/server_id|\b4052\b")
CLASH_COUNT = 3  # same-id refusals within CLASH_WINDOW seconds before we say so
CLASH_WINDOW = 120.0


class ReconnectLog:
    """The reconnect warnings of one stream, and the same-id refusals it has seen."""

    def __init__(self, cfg: SourceConfig) -> None:
        self._cfg = cfg
        self._clashes: list[float] = []  # monotonic times of same-server_id refusals

    def failed(
        self,
        stats: StreamStats,
        position: StreamPosition | None,
        delay: float,
        *,
        outage: bool,
    ) -> None:
        """One warning per lost connection (``outage``: the first failure since the stream
        last ran) and one per further failed attempt, with its cause (``stats.last_error``);
        repeated same-id refusals (another replica registered with our ``server_id``) say
        so."""
        cause = stats.last_error
        now = time.monotonic()
        if _SAME_ID.search(cause):
            self._clashes = [t for t in self._clashes if now - t < CLASH_WINDOW] + [now]
        if not stats.streaming_seen:
            event = "cannot stream from the source, retrying"
        elif outage:
            event = "source connection lost, reconnecting"
        else:
            event = "source still unreachable, retrying"
        log.warning(
            event,
            cause=cause,
            source=describe_source(self._cfg),
            resume=None if position is None else position.describe(),
            outage=stats.reconnects + outage,
            attempt=stats.reconnect_attempts + 1,
            retry_in_s=round(delay, 2),
        )
        if len(self._clashes) >= CLASH_COUNT:
            log.error(
                "another replica uses our server_id",
                server_id=self._cfg.server_id,
                refusals=len(self._clashes),
                window_s=CLASH_WINDOW,
                hint="two replicas with one server_id take the binlog dump from each other in "
                "turn: give this replicator (source.server_id) or the other replica its own id; "
                "`replicator check` lists the replicas connected to the source",
            )
            self._clashes.clear()
