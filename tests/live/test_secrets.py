"""No secret appears in any log line, metric, health answer, notification or file the daemon
writes: the source password (from a file) and the broker password (from the environment) are
grepped for everywhere, with debug logging on, in a good run and in refused ones."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from replicator.storage import ObjectStoreOptions, open_store
from tests.harness.mariadb import MariaDBServer, replication_privileges
from tests.harness.mosquitto import MosquittoBroker
from tests.harness.s3 import REGION, S3Server
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


OBJECT_KEY_ID = "AKIAOBJECTSTOREKEY42"
OBJECT_SECRET = "Obj-s3cret-5f0c2b7e19"


def test_no_object_store_secret_in_logs_metrics_or_objects(
    tmp_path: Path, s3_server: S3Server
) -> None:
    """The object store's keys, given by ``sink.object_store.*_env``: never in the debug log,
    the metrics, ``status``, the objects written, or the refusal of a URL that carries them."""
    url = f"s3://{s3_server.bucket('secret-landing')}/zone"
    port = new_http_port()
    env = {"LANDING_KEY": OBJECT_KEY_ID, "LANDING_SECRET": OBJECT_SECRET}
    seen: list[bytes] = []
    with MariaDBServer(["--binlog-row-metadata=FULL"]) as server:
        server.execute("CREATE DATABASE shop")
        server.execute("CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(40))")
        start = server.binlog_status().gtid_binlog_pos
        config = daemon_config(
            tmp_path / "s3.yaml", server, tmp_path / "unused", start_gtid=start, http_port=port
        )
        text = config.read_text().replace(
            f"  root: {tmp_path / 'unused'}\n",
            s3_server.sink_yaml(url)
            + "    access_key_env: LANDING_KEY\n    secret_key_env: LANDING_SECRET\n",
        )
        config.write_text(text + "  log_level: debug\n")
        daemon = Daemon(config, tmp_path / "s3.log", port, env=env).start()
        writer = Writer(server, per_second=100).start()
        try:
            daemon.wait_for("http", lambda: daemon.get("/healthz")[0] == 200)
            daemon.wait_for(
                "two batches", lambda: daemon.metric("replicator_batches_committed_total") >= 2
            )
            for path in ("/metrics", "/healthz", "/readyz"):
                seen.append(daemon.get(path)[1].encode())
            status = subprocess.run(
                [sys.executable, "-m", "replicator.cli", "status", "--config", str(config),
                 "--json", "--no-source"],
                cwd=ROOT, env={**os.environ, **env}, capture_output=True, timeout=60, check=False,
            )  # fmt: skip
            daemon.signal(signal.SIGTERM)
            code = daemon.wait(30)
        finally:
            writer.stop()
            daemon.kill()
        assert code == 0, daemon.log_tail()
        assert status.returncode == 0, status.stderr
        assert url.encode() in status.stdout  # the landing zone is shown, its keys are not
        seen += [status.stdout, status.stderr]
        # a URL carrying the keys is refused (exit 2) without being shown
        leaky = tmp_path / "leaky.yaml"
        leaky.write_text(
            text.replace(url, f"s3://{OBJECT_KEY_ID}:{OBJECT_SECRET}@secret-landing/zone")
        )
        refused = subprocess.run(
            [sys.executable, "-m", "replicator.cli", "run", "--config", str(leaky)],
            cwd=ROOT, env={**os.environ, **env}, capture_output=True, timeout=60, check=False,
        )  # fmt: skip
        assert refused.returncode == 2, refused.stderr
        assert b"credentials" in refused.stderr
        seen += [refused.stdout, refused.stderr]
    # read with the daemon's keys: the objects it wrote are its account's
    options = ObjectStoreOptions(
        endpoint=s3_server.endpoint,
        region=REGION,
        access_key=OBJECT_KEY_ID,
        secret_key=OBJECT_SECRET,
    )
    store = open_store(url, options)
    objects = {key: store.read(key) for key in store.list()}
    assert any(key.endswith(".parquet") for key in objects)
    assert "_state/lease.json" in objects and "_state/checkpoint.json" in objects
    log = (tmp_path / "s3.log").read_bytes()
    assert b'"level": "debug"' in log
    found = {
        name: [s for s in (OBJECT_KEY_ID, OBJECT_SECRET) if s.encode() in data]
        for name, data in {**objects, "s3.log": log}.items()
    }
    found.update(
        {f"output {i}": [s for s in (OBJECT_KEY_ID, OBJECT_SECRET) if s.encode() in data]
         for i, data in enumerate(seen)}
    )  # fmt: skip
    assert {name: leaks for name, leaks in found.items() if leaks} == {}
