"""``replicator dump --binlog-file``: JSON lines out, exit codes by cause."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data"
SAMPLE = DATA / "mariadb-full-metadata.000001"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "replicator.cli", "dump", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_dump_sample_file() -> None:
    result = _run("--binlog-file", str(SAMPLE))
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [c["op"] for c in lines] == ["c", "c", "u", "d"]
    first = lines[0]
    assert first["database"] == "shop" and first["table"] == "items"
    assert first["gtid"] == "0-1-3"
    assert first["file"] == SAMPLE.name
    assert first["before"] is None
    assert first["after"] == {
        "id": 1,
        "name": "caf\u00e9 \U0001f600",
        "price": "12.50",
        "kind": "a",
        "tags": "x,z",
        "seen": "2026-01-02 03:04:05.678000",
        "note": "na\u00efve \u20ac",
        "blob_col": {"base64": "AP8A"},
    }
    update = lines[2]
    assert update["before"]["price"] == "12.50" and update["after"]["price"] == "13.50"
    assert update["after"]["tags"] == "y"
    assert lines[3]["after"] is None and lines[3]["before"]["id"] == 2
    assert "4 row changes" in result.stderr


def test_dump_corrupt_file_exits_4_naming_the_position(tmp_path: Path) -> None:
    raw = bytearray(SAMPLE.read_bytes())
    raw[1000] ^= 0x10
    bad = tmp_path / "mysql-bin.000009"
    bad.write_bytes(bytes(raw))
    result = _run("--binlog-file", str(bad))
    assert result.returncode == 4
    assert "mysql-bin.000009:" in result.stderr
    assert "CRC32 mismatch" in result.stderr


def test_dump_without_source_exits_2() -> None:
    result = _run()
    assert result.returncode == 2
    assert "--binlog-file" in result.stderr


def test_dump_missing_file_exits_2(tmp_path: Path) -> None:
    result = _run("--binlog-file", str(tmp_path / "nope.000001"))
    assert result.returncode == 2
    assert "cannot open binlog file" in result.stderr


def test_a_live_dump_logs_at_the_configured_level(tmp_path: Path) -> None:
    """``service.log_level: error`` hides the reconnect warnings of a source that does not
    answer (a live dump logs to stderr as ``run`` does; its JSON lines go to stdout)."""
    logged = {}
    for level in ("warning", "error"):
        config = tmp_path / f"{level}.yaml"
        config.write_text(
            "source:\n  host: 127.0.0.1\n  port: 1\n  password: x\n"
            "  reconnect_initial_delay: 0.05\n  reconnect_max_delay: 0.1\n"
            f"sink:\n  root: {tmp_path / 'landing'}\n"
            f"service:\n  log_level: {level}\n  log_format: json\n"
        )
        dump = subprocess.Popen(
            [sys.executable, "-m", "replicator.cli", "dump", "--config", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(2.0)  # start-up, then a few refused attempts
        dump.send_signal(signal.SIGINT)
        _, err = dump.communicate(timeout=30)
        logged[level] = "cannot stream from the source, retrying" in err
    assert logged == {"warning": True, "error": False}
