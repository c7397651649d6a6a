"""How far behind the source we are, in binlog bytes, and when we will have caught up.

The source's ``SHOW BINARY LOGS`` lists every binlog file with its size; our position is a file
and an offset. Bytes behind is the rest of our file plus every later file. The rate is the
drop in bytes behind per second, smoothed over the last few readings, so the ETA is about the
gap actually closing (the source keeps writing while we read), not about our raw read speed.
Pure arithmetic: the service feeds it readings and prints what it says.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from .source.server_info import BinlogFile


def bytes_behind(files: Sequence[BinlogFile], file: str, position: int) -> int | None:
    """Bytes from ``file:position`` to the end of the last binlog file; None if ``file`` is
    not listed (purged, or the listing is from another server)."""
    total = 0
    found = False
    for entry in files:
        if found:
            total += entry.size
        elif entry.name == file:
            found = True
            total += max(0, entry.size - position)
    return total if found else None


def heard_at(file: str, position: int, heard_file: str, heard_position: int) -> tuple[str, int]:
    """Where a heartbeat (``heard_file``, ``heard_position``) puts a stream whose last
    transaction ended at ``file:position``. A HEARTBEAT (v1: MariaDB, MySQL before 8.0.26)
    logs its position in 4 bytes, so in a file past 4 GiB it is the offset modulo 2**32; it
    is at or after the transaction's end, which gives the bits it lost."""
    if heard_file != file:
        return heard_file, heard_position  # a later file (a new file is small)
    return file, position + (heard_position - position) % 2**32


def position_missing(files: Sequence[BinlogFile], file: str, position: int) -> str | None:
    """Why the server's binlog (``SHOW BINARY LOGS``) does not hold ``file:position``, a
    committed position (``replicator status``'s checkpoint); None when it does. Unlike
    ``bytes_behind``'s reading of the stream's own position, a committed position past its
    file's listed size is no race: that server never wrote it (another server, or a binlog
    reset)."""
    for entry in files:
        if entry.name == file:
            if position > entry.size:
                return f"{file}:{position} is past that file's end on this server ({entry.size})"
            return None
    return f"this server has no binlog file {file} (it has {_span(files)})"


def _span(files: Sequence[BinlogFile]) -> str:
    if not files:
        return "none"
    if len(files) == 1:
        return files[0].name
    return f"{files[0].name} to {files[-1].name}"


@dataclass(frozen=True, slots=True)
class Progress:
    behind_bytes: int
    rate_bytes_per_second: float | None  # how fast the gap closes; None: not known yet
    eta_seconds: float | None  # None: not closing (or not known yet)

    @property
    def caught_up(self) -> bool:
        return self.behind_bytes == 0

    def describe(self) -> str:
        text = f"{_size(self.behind_bytes)} behind"
        if self.rate_bytes_per_second is not None:
            text += f", closing at {_size(self.rate_bytes_per_second)}/s"
        if self.eta_seconds is not None:
            text += f", ETA {_duration(self.eta_seconds)}"
        return text


class CatchUpTracker:
    """Readings of (monotonic time, bytes behind) in; progress with rate and ETA out."""

    def __init__(self, window: int = 6) -> None:
        self._readings: deque[tuple[float, int]] = deque(maxlen=window)

    def observe(self, now: float, behind: int) -> Progress:
        self._readings.append((now, behind))
        first_time, first_behind = self._readings[0]
        elapsed = now - first_time
        if elapsed <= 0:
            return Progress(behind, None, None)
        rate = (first_behind - behind) / elapsed
        eta = behind / rate if rate > 0 else None
        return Progress(behind, rate, eta)


def _size(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(count) < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"
