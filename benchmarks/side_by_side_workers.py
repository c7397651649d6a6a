"""The measured clients of ``side_by_side.py``, one per process.

``side_by_side.py`` runs each of these as a child process (``python side_by_side_workers.py
KIND SPEC_JSON``) so that its peak RSS (``wait4`` ``ru_maxrss``) is its own and no import or
cache of one client warms up another. Each prints one JSON line: row images seen, values
touched, seconds (timed inside the process, from connecting to the last row; interpreter and
import start-up excluded).

Kinds:

* ``pymysqlrepl`` -- python-mysql-replication's ``BinLogStreamReader`` over the replication
  protocol from the workload's start position, non-blocking (the server says EOF at the end of
  its binlog), touching every value of every row image. Its defaults otherwise (it does not
  verify CRC32 unless asked; we do).
* ``stream`` -- our ``ReplicaStream`` over the same range (``stop_at_end``), every event
  CRC32-checked and decoded into typed values, transactions (small ones in runs, as the daemon
  takes them) handed to an asyncio consumer that touches every value and drops them (a null
  sink).
* ``file`` -- our decoder on the binlog files on disk (``read_binlog_files``), same touching.

Each kind imports only what its client needs (inside its function), so the peak RSS measured
is that client's.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MISSING_PYMYSQLREPL = (
    "python-mysql-replication is not installed in this environment; install it with\n"
    "    .venv/bin/pip install 'mysql-replication>=1.0.17'"
)


def pymysqlrepl(spec: dict[str, Any]) -> dict[str, Any]:
    try:
        from pymysqlreplication import BinLogStreamReader  # noqa: PLC0415 - see module doc
        from pymysqlreplication.row_event import (  # noqa: PLC0415
            DeleteRowsEvent,
            UpdateRowsEvent,
            WriteRowsEvent,
        )
    except ImportError:
        sys.exit(MISSING_PYMYSQLREPL)

    images = values = 0
    began = time.perf_counter()
    stream = BinLogStreamReader(
        connection_settings={
            "host": spec["host"],
            "port": spec["port"],
            "user": spec["user"],
            "passwd": spec["password"],
        },
        server_id=spec["server_id"],
        log_file=spec["file"],
        log_pos=spec["position"],
        resume_stream=True,
        blocking=False,
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
        enable_logging=False,
    )
    try:
        for event in stream:
            if isinstance(event, UpdateRowsEvent):
                for row in event.rows:
                    for value in row["before_values"].values():
                        values += value is not None
                    for value in row["after_values"].values():
                        values += value is not None
                    images += 2
            else:
                for row in event.rows:
                    for value in row["values"].values():
                        values += value is not None
                    images += 1
    finally:
        stream.close()
    return {"images": images, "values": values, "seconds": time.perf_counter() - began}


def _touch(events: Any) -> tuple[int, int]:
    """Row images and non-NULL values of the rows events in ``events``, read from their
    blocks as the daemon reads them: native buffers by their set bytes, other columns value
    by value."""
    from replicator.binlog.events import RowsEvent  # noqa: PLC0415 - see module doc

    return _touch_blocks(event.block for event in events if type(event) is RowsEvent)


def _touch_blocks(blocks: Any) -> tuple[int, int]:
    images = values = 0
    for block in blocks:
        for vectors in (block.columns, block.after or ()):
            for vector in vectors:
                if vector is None:
                    continue
                if type(vector) is list:
                    for value in vector:
                        values += value is not None
                else:
                    values += vector[0].count(1)
        images += block.count * (1 if block.after is None else 2)
    return images, values


def stream(spec: dict[str, Any]) -> dict[str, Any]:
    from replicator.binlog.position import StreamPosition  # noqa: PLC0415
    from replicator.binlog.runs import TransactionRun  # noqa: PLC0415
    from replicator.binlog.transaction import (  # noqa: PLC0415 - see module doc
        Transaction,
        TransactionPart,
    )
    from replicator.config import Secret, SourceConfig  # noqa: PLC0415
    from replicator.runtime import tune_gc  # noqa: PLC0415
    from replicator.source.stream import ReplicaStream  # noqa: PLC0415

    tune_gc()  # as `replicator dump` and `replicator run` do
    cfg = SourceConfig(
        host=spec["host"],
        port=spec["port"],
        user=spec["user"],
        password=Secret(spec["password"]),
        server_id=spec["server_id"],
    )
    start = StreamPosition(spec["file"], spec["position"])

    async def consume() -> dict[str, Any]:
        images = values = 0
        began = time.perf_counter()
        async with ReplicaStream(cfg, start, stop_at_end=True, runs=True) as replica:
            async for item in replica:
                if isinstance(item, TransactionRun):  # as the daemon takes them
                    seen, touched = _touch_blocks(s.block for s in item.taken.segments)
                    images += seen
                    values += touched
                    item = item.last  # noqa: PLW2901 - a run ends with a transaction
                if isinstance(item, (Transaction, TransactionPart)):
                    seen, touched = _touch(item.events)
                    images += seen
                    values += touched
        return {"images": images, "values": values, "seconds": time.perf_counter() - began}

    return asyncio.run(consume())


def file(spec: dict[str, Any]) -> dict[str, Any]:
    from replicator.runtime import tune_gc  # noqa: PLC0415
    from replicator.source.binlog_file import read_binlog_files  # noqa: PLC0415

    tune_gc()  # as `replicator dump` does
    began = time.perf_counter()
    images, values = _touch(read_binlog_files([Path(p) for p in spec["paths"]]))
    return {"images": images, "values": values, "seconds": time.perf_counter() - began}


WORKERS = {"pymysqlrepl": pymysqlrepl, "stream": stream, "file": file}


def main() -> None:
    kind, spec = sys.argv[1], json.loads(sys.argv[2])
    result = WORKERS[kind](spec)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
