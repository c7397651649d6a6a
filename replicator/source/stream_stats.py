"""The replica stream's counters: connects, outages and attempts, checksum failures by
position, transactions, bytes, heartbeats and events by type. The reader thread writes them;
metrics (``replicator.metrics``), the reconnect log and tests read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["StreamStats"]


@dataclass(slots=True)
class StreamStats:
    """Counters for metrics and tests (read from the loop, written by the reader thread)."""

    connects: int = 0
    reconnects: int = 0  # outages: losses of the source, however many attempts each took
    reconnect_attempts: int = 0  # every attempt to connect again, failed or not
    checksum_errors: int = 0
    transactions: int = 0
    transactions_passed_over: int = 0  # of them, by a read of statements only, natively
    transactions_in_runs: int = 0  # of them, taken natively many at a time (binlog.runs)
    bytes_received: int = 0
    heard_at: float = 0.0  # when bytes last came from the source (epoch seconds; 0: never)
    heartbeats: int = 0
    discarded_incomplete: int = 0
    streaming: bool = False  # the dump is under way on the current connection
    streaming_seen: bool = False  # the dump was under way at least once
    last_error: str = ""
    checksum_failures_at: dict[tuple[str, int], int] = field(default_factory=dict)
    events_by_type: dict[int, int] = field(default_factory=dict)  # binlog event type code
