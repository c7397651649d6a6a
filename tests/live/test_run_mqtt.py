"""``replicator run`` publishes one MQTT notification per committed batch."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import aiomqtt
import pytest

from tests.harness.mariadb import MariaDBServer
from tests.harness.mosquitto import MosquittoBroker

pytestmark = [pytest.mark.live, pytest.mark.mqtt]


async def test_each_commit_is_notified(tmp_path: Path, mosquitto: MosquittoBroker) -> None:
    with MariaDBServer(["--binlog-row-metadata=FULL"]) as server:
        server.execute("CREATE DATABASE shop")
        server.execute("CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(20))")
        status = server.binlog_status()
        for i in range(60):
            server.execute("INSERT INTO shop.t VALUES (%s, 'x')", (i,))
        root = tmp_path / "landing"
        config = tmp_path / "replicator.yaml"
        config.write_text(
            f"source:\n  host: {server.host}\n  port: {server.port}\n  user: repl\n"
            "  password: replpass\n  server_id: 4343\n"
            f"start:\n  gtid: '{status.gtid_binlog_pos}'\n"
            f"sink:\n  root: {root}\n  batch_max_rows: 10\n"
            f"mqtt:\n  enabled: true\n  host: {mosquitto.host}\n  port: {mosquitto.port}\n"
            "  topic_prefix: shoptest\n"
            "service:\n  http_port: 0\n"  # 9108 may be another worker's daemon's
        )
        received: list[dict[str, object]] = []
        async with aiomqtt.Client(mosquitto.host, mosquitto.port) as client:
            await client.subscribe("shoptest/commits", qos=1)
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "replicator.cli", "run", "--config", str(config),
                "--stop-at-end", env=dict(os.environ), stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            _, stderr = await asyncio.wait_for(proc.communicate(), 120)
            assert proc.returncode == 0, stderr.decode()[-2000:]
            manifests = sorted((root / "_manifests").glob("*.json"))

            async def take() -> None:
                async for message in client.messages:
                    assert isinstance(message.payload, bytes)
                    received.append(json.loads(message.payload))
                    if len(received) == len(manifests):
                        return

            await asyncio.wait_for(take(), 30)
    assert len(manifests) >= 6
    assert [m["batch"] for m in received] == [json.loads(p.read_text())["batch"] for p in manifests]
    assert sum(int(m["rows"]) for m in received) == 60  # type: ignore[call-overload]
    assert all("shop.t" in m["tables"] for m in received)  # type: ignore[operator]
