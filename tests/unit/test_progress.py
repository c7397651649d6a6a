"""Catch-up progress: bytes behind across binlog files, the closing rate and the ETA."""

from __future__ import annotations

from replicator.progress import CatchUpTracker, Progress, bytes_behind, heard_at
from replicator.source.server_info import BinlogFile

FILES = [BinlogFile("b.000001", 1000), BinlogFile("b.000002", 5000), BinlogFile("b.000003", 300)]


def test_bytes_behind_spans_later_files() -> None:
    assert bytes_behind(FILES, "b.000001", 400) == 600 + 5000 + 300
    assert bytes_behind(FILES, "b.000003", 300) == 0
    assert bytes_behind(FILES, "b.000003", 4) == 296


def test_position_past_the_listed_size_is_not_negative() -> None:
    # the listing was taken a moment before we read further
    assert bytes_behind(FILES, "b.000003", 900) == 0


def test_unknown_file_is_none() -> None:
    assert bytes_behind(FILES, "b.000009", 4) is None
    assert bytes_behind([], "b.000001", 4) is None


def test_rate_and_eta_follow_the_gap_closing() -> None:
    tracker = CatchUpTracker()
    first = tracker.observe(100.0, 10_000)
    assert (first.rate_bytes_per_second, first.eta_seconds) == (None, None)
    second = tracker.observe(102.0, 8_000)
    assert second == Progress(8_000, 1_000.0, 8.0)
    assert second.describe() == "7.8 KiB behind, closing at 1000 B/s, ETA 8s"


def test_a_gap_that_grows_has_no_eta() -> None:
    tracker = CatchUpTracker()
    tracker.observe(0.0, 1000)
    growing = tracker.observe(10.0, 5000)
    assert growing.rate_bytes_per_second == -400.0
    assert growing.eta_seconds is None
    assert "ETA" not in growing.describe()


def test_window_forgets_old_readings() -> None:
    tracker = CatchUpTracker(window=2)
    tracker.observe(0.0, 100_000)  # a fast start, then it slows down
    tracker.observe(1.0, 10_000)
    slow = tracker.observe(2.0, 9_000)
    assert slow.rate_bytes_per_second == 1_000.0
    assert slow.eta_seconds == 9.0


def test_caught_up_and_long_eta_wording() -> None:
    tracker = CatchUpTracker()
    tracker.observe(0.0, 2 * 1024**3 + 7200)
    late = tracker.observe(1.0, 2 * 1024**3)
    assert late.describe() == "2.0 GiB behind, closing at 7.0 KiB/s, ETA 82h51m"
    assert tracker.observe(2.0, 0).caught_up


def test_a_heartbeat_puts_the_stream_at_its_position_past_4_gib_too() -> None:
    end = 5_000_000_123  # a file past 4 GiB, read to its end
    assert heard_at("b.7", end, "b.7", end % 2**32) == ("b.7", end)  # v1: 4 bytes
    assert heard_at("b.7", end, "b.7", end) == ("b.7", end)  # v2: 8 bytes
    assert heard_at("b.7", 100, "b.7", 432) == ("b.7", 432)  # past events of no transaction
    assert heard_at("b.7", end, "b.8", 385) == ("b.8", 385)  # the next file's preamble
    files = [BinlogFile("b.7", end)]
    assert bytes_behind(files, *heard_at("b.7", end, "b.7", end % 2**32)) == 0
