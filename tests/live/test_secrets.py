"""No secret appears in any log line, metric, health answer, notification or file the daemon
writes: the source password (from a file) and the broker password (from the environment) are
grepped for everywhere, with debug logging on, in a good run and in refused ones."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.mariadb import MariaDBServer, replication_privileges
from tests.harness.mosquitto import MosquittoBroker
from tests.live.daemon import ROOT, Daemon, Writer, daemon_config, new_http_port
from tests.live.test_notify import _listen

pytestmark = [pytest.mark.live, pytest.mark.mqtt]

SOURCE_SECRET = "Src-s3cret-7c1e9a"
WRONG_SECRET = "Wrong-s3cret-41b2f0"
BROKER_SECRET = "Mqtt-s3cret-d95a03"
SECRETS = (SOURCE_SECRET, WRONG_SECRET, BROKER_SECRET)


def _leaks(text: bytes) -> list[str]:
    return [s for s in SECRETS if s.encode() in text]


def test_no_secret_in_logs_metrics_payloads_or_files(
    tmp_path: Path, mosquitto: MosquittoBroker
) -> None:
    asyncio.run(_scenario(tmp_path, mosquitto))


async def _scenario(tmp_path: Path, mosquitto: MosquittoBroker) -> None:
    prefix = "secrets-test"
    seen: list[bytes] = []  # everything the daemon produced that we can read
    with MariaDBServer(["--binlog-row-metadata=FULL"]) as server:
        server.execute("CREATE USER 'secretive'@'%%' IDENTIFIED BY %s", (SOURCE_SECRET,))
        privileges = replication_privileges(server.version)
        server.execute(f"GRANT {privileges} ON *.* TO 'secretive'@'%'")
        server.execute("CREATE DATABASE shop")
        server.execute("CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(40))")
        start = server.binlog_status().gtid_binlog_pos
        secrets_dir = tmp_path / "secrets"
        secrets_dir.mkdir()
        (secrets_dir / "source").write_text(SOURCE_SECRET + "\n")
        (secrets_dir / "wrong").write_text(WRONG_SECRET + "\n")
        root = tmp_path / "landing"
        port = new_http_port()
        mqtt = (
            f"mqtt:\n  enabled: true\n  host: {mosquitto.host}\n  port: {mosquitto.port}\n"
            f"  topic_prefix: {prefix}\n  username: watcher\n  password_env: BROKER_PASSWORD\n"
        )
        config = daemon_config(
            tmp_path / "good.yaml", server, root, start_gtid=start, http_port=port,
            user="secretive", password_line=f"password_file: {secrets_dir / 'source'}",
            extra=mqtt,
        )  # fmt: skip
        debug = config.read_text().replace("  progress_seconds: 1\n", "  progress_seconds: 1\n"
                                           "  log_level: debug\n")  # fmt: skip
        config.write_text(debug)
        env = {"BROKER_PASSWORD": BROKER_SECRET}
        daemon = Daemon(config, tmp_path / "good.log", port, env=env)
        async with _listen(mosquitto.host, mosquitto.port, prefix) as inbox:
            daemon.start()
            writer = Writer(server, per_second=100).start()
            try:
                await asyncio.to_thread(
                    daemon.wait_for, "http", lambda: daemon.get("/healthz")[0] == 200
                )
                await asyncio.to_thread(
                    daemon.wait_for,
                    "two batches",
                    lambda: daemon.metric("replicator_batches_committed_total") >= 2,
                )
                for path in ("/metrics", "/healthz", "/readyz", "/nope"):
                    seen.append(daemon.get(path)[1].encode())
                daemon.signal(signal.SIGTERM)
                code = await asyncio.to_thread(daemon.wait, 30)
            finally:
                writer.stop()
                daemon.kill()
            await inbox.wait_until(lambda: "stopped" in inbox.states(), 10, "stopped")
            seen.extend(bytes(m.payload) for m in inbox.messages if isinstance(m.payload, bytes))
        assert code == 0, daemon.log_tail()
        assert len(inbox.on("commits")) >= 2

        # Refused: a wrong source password (exit 3) must not echo the password it tried.
        wrong = tmp_path / "wrong.yaml"
        wrong.write_text(
            config.read_text().replace(str(secrets_dir / "source"), str(secrets_dir / "wrong"))
        )
        refused = Daemon(wrong, tmp_path / "wrong.log", new_http_port(), env=env).start()
        try:
            assert refused.wait(60) == 3, refused.log_tail()
        finally:
            refused.kill()
        check = subprocess.run(
            [sys.executable, "-m", "replicator.cli", "check", "--host", server.host,
             "--port", str(server.port), "--user", "secretive", "--password-env", "PW"],
            cwd=ROOT, env={**env, "PW": WRONG_SECRET, "PATH": "/usr/bin:/bin"},
            capture_output=True, timeout=60, check=False,
        )  # fmt: skip
        assert check.returncode == 3, check.stderr
        seen += [check.stdout, check.stderr]

    written = [p for p in root.rglob("*") if p.is_file()]
    assert any(p.suffix == ".parquet" for p in written)
    assert any(p.name == "checkpoint.json" for p in written)
    files = {str(p.relative_to(root)): p.read_bytes() for p in written}
    logs = {name: (tmp_path / name).read_bytes() for name in ("good.log", "wrong.log")}
    assert b'"level": "debug"' in logs["good.log"]  # debug lines were written, and checked
    assert b"Access denied" in logs["wrong.log"]  # the refusal is explained...
    leaks = {name: _leaks(data) for name, data in {**files, **logs}.items() if _leaks(data)}
    leaks.update({f"output {i}": _leaks(data) for i, data in enumerate(seen) if _leaks(data)})
    assert leaks == {}  # ...without the password
