"""Fail closed: the faults a fault-injection run found, each reproduced against the real
daemon and a throwaway MariaDB, with the exit code, the message, and the landing zone checked
against the source afterwards.

* statement-logged DML: a server logging statements is refused at start (exit 3); a session or
  a global switch to STATEMENT/MIXED in mid-stream stops the stream before the statement
  (exit 4) with every transaction before it committed and nothing after it;
* two daemons on one landing zone: the second exits 2 naming the first, the first is unharmed;
* mutated manifests and checkpoints: each stops the next start (exit 4), changes nothing, and
  the restored landing zone goes on to equal the source;
* a landing zone removed under an idle daemon stops it (exit 1);
* a batch commit that fails (a full disk, injected) stops the run with its error, counted once
  as a failed commit, and the batches before it stay committed;
* a replica that shares our server_id is named in the log, and every reconnect is logged with
  its cause;
* a black-holed connection to the source's catalog is retried (each attempt logged), /readyz
  says not ready meanwhile, and the daemon lands everything once the link is back.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from replicator.config import load_config
from replicator.service import RunOptions, Service
from replicator.sink.landing import FAIL_ENV
from tests.harness import free_tcp_port
from tests.harness.mariadb import MariaDBServer
from tests.harness.proxy import FaultProxy
from tests.live.daemon import (
    ROOT,
    Daemon,
    daemon_config,
    new_http_port,
    published_entries,
    run_to_end,
)

pytestmark = [pytest.mark.live]


def _prepare(server: MariaDBServer) -> str:
    server.execute("CREATE DATABASE shop")
    server.execute("CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(40))")
    return server.binlog_status().gtid_binlog_pos


def _run(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "replicator.cli", "run", "--config", str(config), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def landed_state(root: Path, table: str = "shop.t") -> dict[int, str | None]:
    """The table as the committed changes build it: latest change per ``id`` by ``_seq``."""
    changes: list[tuple[int, str, int, str | None]] = []
    for entry in published_entries(root):
        if entry["table"] == table:
            data = pq.read_table(root / entry["path"], columns=["_seq", "_op", "id", "v"])
            columns = (data[c].to_pylist() for c in ("_seq", "_op", "id", "v"))
            changes += zip(*columns, strict=True)
    state: dict[int, str | None] = {}
    for _, op, key, value in sorted(changes):
        if op == "d":
            state.pop(key, None)
        else:
            state[key] = value
    return state


def source_state(server: MariaDBServer) -> dict[int, str | None]:
    return {int(r[0]): r[1] for r in server.query("SELECT id, v FROM shop.t")}


def _snapshot(root: Path) -> dict[str, bytes]:
    """Every file of a landing zone but the writer lock's record (who held it last)."""
    files = (p for p in root.rglob("*") if p.is_file() and p != root / "_state" / "lock")
    return {str(p.relative_to(root)): p.read_bytes() for p in files}


def test_a_server_logging_statements_is_refused_at_start(tmp_path: Path) -> None:
    with MariaDBServer(["--binlog-row-metadata=FULL"]) as server:
        start = _prepare(server)
        server.execute("INSERT INTO shop.t VALUES (1, 'a')")
        server.execute("SET GLOBAL binlog_format = 'MIXED'")
        root = tmp_path / "landing"
        config = daemon_config(
            tmp_path / "c.yaml", server, root, start_gtid=start, http_port=new_http_port()
        )
        refused = _run(config, "--stop-at-end")
        assert refused.returncode == 3, refused.stderr
        assert "binlog_format=MIXED" in refused.stderr
        assert "SET GLOBAL binlog_format = 'ROW'" in refused.stderr
        assert not list(root.glob("_manifests/*.json"))
        server.execute("SET GLOBAL binlog_format = 'ROW'")
        run_to_end(config, tmp_path / "run.log", new_http_port())
        assert landed_state(root) == source_state(server) == {1: "a"}


def test_statement_logged_dml_stops_right_before_the_statement(tmp_path: Path) -> None:
    with MariaDBServer(["--binlog-row-metadata=FULL"]) as server:
        start = _prepare(server)
        for n in range(1, 6):
            server.execute("INSERT INTO shop.t VALUES (%s, %s)", (n, f"row {n}"))
        before = source_state(server)
        statement_at = server.binlog_status()
        conn = server.connect("shop")
        with conn.cursor() as cur:  # one session switches to statement logging
            cur.execute("SET SESSION binlog_format = 'STATEMENT'")
            cur.execute("INSERT INTO t VALUES (6, 'logged as SQL')")
        conn.close()
        for n in range(7, 10):
            server.execute("INSERT INTO shop.t VALUES (%s, %s)", (n, f"row {n}"))
        root = tmp_path / "landing"
        config = daemon_config(
            tmp_path / "c.yaml", server, root, start_gtid=start, http_port=new_http_port()
        )
        stopped = _run(config, "--stop-at-end")
        assert stopped.returncode == 4, stopped.stderr
        # named at the statement's own event, inside the transaction that starts at
        # statement_at (where the checkpoint stops)
        named = re.search(rf"statement-logged change at {statement_at.file}:(\d+) ", stopped.stderr)
        assert named is not None, stopped.stderr
        assert statement_at.position < int(named[1]) < statement_at.position + 200
        assert "to shop.t: 'INSERT INTO t VALUES (6, 'logged as SQL')'" in stopped.stderr
        assert "set binlog_format=ROW" in stopped.stderr
        # every transaction before the statement landed, nothing after it
        assert landed_state(root) == before
        checkpoint = json.loads((root / "_state" / "checkpoint.json").read_text())
        assert checkpoint["position"]["position"] == statement_at.position
        again = _run(config, "--stop-at-end")  # a restart stops at the same place
        assert again.returncode == 4
        assert landed_state(root) == before


def test_a_global_switch_to_mixed_mid_stream_stops_the_running_daemon(tmp_path: Path) -> None:
    with MariaDBServer(["--binlog-row-metadata=FULL"]) as server:
        start = _prepare(server)
        root = tmp_path / "landing"
        port = new_http_port()
        config = daemon_config(tmp_path / "c.yaml", server, root, start_gtid=start, http_port=port)
        daemon = Daemon(config, tmp_path / "run.log", port).start()
        try:
            daemon.wait_for("ready", lambda: daemon.get("/readyz")[0] == 200)
            server.execute("INSERT INTO shop.t VALUES (1, 'row')")
            daemon.wait_for(
                "a batch", lambda: daemon.metric("replicator_batches_committed_total") >= 1
            )
            server.execute("SET GLOBAL binlog_format = 'MIXED'")
            server.execute("INSERT INTO shop.t VALUES (2, 'statement')")  # a new session
            code = daemon.wait(30)
        finally:
            daemon.kill()
        assert code == 4, daemon.log_tail()
        assert "statement-logged change at" in daemon.log_tail()
        assert landed_state(root) == {1: "row"}


def test_a_second_daemon_on_one_landing_zone_is_refused(tmp_path: Path) -> None:
    with MariaDBServer(["--binlog-row-metadata=FULL"]) as server:
        start = _prepare(server)
        root = tmp_path / "landing"
        port = new_http_port()
        config = daemon_config(tmp_path / "a.yaml", server, root, start_gtid=start, http_port=port)
        other = daemon_config(
            tmp_path / "b.yaml",
            server,
            root,
            start_gtid=start,
            http_port=new_http_port(),
            batch_max_rows=7,
        )
        first = Daemon(config, tmp_path / "a.log", port).start()
        try:
            first.wait_for("ready", lambda: first.get("/readyz")[0] == 200)
            for n in range(1, 51):
                server.execute("INSERT INTO shop.t VALUES (%s, 'x')", (n,))
            second = _run(other)
            assert second.returncode == 2, second.stderr
            assert first.proc is not None
            assert f"is in use by another replicator process (pid {first.proc.pid}" in (
                second.stderr
            )
            assert "one writer per landing zone" in second.stderr
            first.wait_for("everything", lambda: len(landed_state(root)) == 50)
            first.signal(signal.SIGTERM)
            assert first.wait(30) == 0
        finally:
            first.kill()
        run_to_end(config, tmp_path / "end.log", port)
        assert landed_state(root) == source_state(server)


def _drop_middle_manifest(root: Path) -> str:
    (root / "_manifests" / f"{2:020d}.json").unlink()
    return "batch 2 is missing"


def _drop_last_manifest(root: Path) -> str:
    last = sorted((root / "_manifests").glob("*.json"))[-1]
    last.unlink()
    return "but the last manifest is batch"


def _truncate_manifest(root: Path) -> str:
    path = root / "_manifests" / f"{2:020d}.json"
    path.write_bytes(path.read_bytes()[:50])
    return "is not valid JSON"


def _empty_manifest(root: Path) -> str:
    (root / "_manifests" / f"{2:020d}.json").write_text("{}")
    return "has no integer 'batch'"


def _stray_manifest(root: Path) -> str:
    shutil.copy(root / "_manifests" / f"{2:020d}.json", root / "_manifests" / "44 (copy).json")
    return "are not commit records: '44 (copy).json'"


def _lower_next_seq(root: Path) -> str:
    path = root / "_state" / "checkpoint.json"
    data = json.loads(path.read_text())
    data["next_seq"] = 3
    path.write_text(json.dumps(data))
    return "says the next _seq is 3"


def _garble_checkpoint(root: Path) -> str:
    (root / "_state" / "checkpoint.json").write_text('{"batch": 3, "next_')
    return "is unreadable"


MUTATIONS = [
    _drop_middle_manifest,
    _drop_last_manifest,
    _truncate_manifest,
    _empty_manifest,
    _stray_manifest,
    _lower_next_seq,
    _garble_checkpoint,
]


def test_mutated_manifests_and_checkpoints_stop_and_change_nothing(tmp_path: Path) -> None:
    with MariaDBServer(["--binlog-row-metadata=FULL"]) as server:
        start = _prepare(server)
        for n in range(1, 41):
            server.execute("INSERT INTO shop.t VALUES (%s, 'x')", (n,))
        root = tmp_path / "landing"
        port = new_http_port()
        config = daemon_config(
            tmp_path / "c.yaml", server, root, start_gtid=start, http_port=port, batch_max_rows=9
        )
        run_to_end(config, tmp_path / "first.log", port)
        assert len(list((root / "_manifests").glob("*.json"))) >= 3
        pristine = tmp_path / "pristine"
        shutil.copytree(root, pristine)
        for mutate in MUTATIONS:
            expected = mutate(root)
            before = _snapshot(root)
            result = _run(config, "--stop-at-end")
            assert result.returncode == 4, (mutate.__name__, result.stderr)
            assert expected in result.stderr, (mutate.__name__, result.stderr)
            assert _snapshot(root) == before, mutate.__name__  # nothing deleted or rewritten
            shutil.rmtree(root)
            shutil.copytree(pristine, root)
        for n in range(41, 61):
            server.execute("INSERT INTO shop.t VALUES (%s, 'y')", (n,))
        server.execute("UPDATE shop.t SET v = 'z' WHERE id < 10")
        run_to_end(config, tmp_path / "last.log", port)
        assert landed_state(root) == source_state(server)


def test_a_landing_zone_removed_under_an_idle_daemon_stops_it(tmp_path: Path) -> None:
    with MariaDBServer(["--binlog-row-metadata=FULL"]) as server:
        start = _prepare(server)
        server.execute("INSERT INTO shop.t VALUES (1, 'x')")
        root = tmp_path / "landing"
        port = new_http_port()
        config = daemon_config(tmp_path / "c.yaml", server, root, start_gtid=start, http_port=port)
        daemon = Daemon(config, tmp_path / "run.log", port).start()
        try:
            daemon.wait_for("the row", lambda: landed_state(root) == {1: "x"})
            shutil.rmtree(root)
            code = daemon.wait(30)
        finally:
            daemon.kill()
        assert code == 1, daemon.log_tail()
        assert "was removed or replaced while this process was writing it" in daemon.log_tail()
        assert not root.exists()  # nothing was written into a new directory there


async def test_a_failing_commit_is_counted_once_and_stops_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second batch's commit fails as on a full disk (injected by the landing zone's fault
    injector): the run stops with that error, the failure is counted once, the service turns
    fatal, and the first batch stays committed."""
    monkeypatch.setenv(FAIL_ENV, "data:2")
    with MariaDBServer(["--binlog-row-metadata=FULL"]) as server:
        start = _prepare(server)
        for n in range(1, 4):
            server.execute("INSERT INTO shop.t VALUES (%s, 'x')", (n,))
        root = tmp_path / "landing"
        path = daemon_config(
            tmp_path / "c.yaml", server, root, start_gtid=start, http_port=0, batch_max_rows=1
        )
        service = Service(load_config(path), RunOptions(stop_at_end=True))
        with pytest.raises(OSError, match="No space left on device"):
            await service.run()

    metrics = service.metrics
    assert metrics.registry.get_sample_value("replicator_commit_failures_total") == 1
    assert metrics.registry.get_sample_value("replicator_batches_committed_total") == 1
    assert not metrics.health().ok
    assert not metrics.readiness().ok
    assert landed_state(root) == {1: "x"}


def _events(daemon: Daemon, name: str) -> list[dict[str, Any]]:
    return [line for line in daemon.log_lines() if line.get("event") == name]


def test_a_server_id_clash_is_named_and_reconnects_are_logged(tmp_path: Path) -> None:
    with MariaDBServer(["--binlog-row-metadata=FULL"]) as server:
        start = _prepare(server)
        port_a, port_b = new_http_port(), new_http_port()
        same_id = "  server_id: 4242\n"
        configs = []
        for name, port in (("a", port_a), ("b", port_b)):
            path = daemon_config(
                tmp_path / f"{name}.yaml",
                server,
                tmp_path / name,
                start_gtid=start,
                http_port=port,
            )
            text = path.read_text().replace(f"  server_id: {4000 + port % 1000}\n", same_id)
            path.write_text(text)
            configs.append(path)
        first = Daemon(configs[0], tmp_path / "a.log", port_a).start()
        second = Daemon(configs[1], tmp_path / "b.log", port_b).start()
        try:
            deadline = time.monotonic() + 90
            while not (_events(first, "another replica uses our server_id") or
                       _events(second, "another replica uses our server_id")):  # fmt: skip
                assert time.monotonic() < deadline, first.log_tail() + second.log_tail()
                time.sleep(0.5)
            named = _events(first, "another replica uses our server_id") + _events(
                second, "another replica uses our server_id"
            )
            assert named[0]["server_id"] == 4242
            assert named[0]["level"] == "error"
            lost = _events(first, "source connection lost, reconnecting") + _events(
                second, "source connection lost, reconnecting"
            )
            assert lost
            assert "same server_uuid/server_id" in lost[0]["cause"]
            assert lost[0]["level"] == "warning"
            second.signal(signal.SIGTERM)
            second.wait(30)
            for n in range(1, 21):
                server.execute("INSERT INTO shop.t VALUES (%s, 'x')", (n,))
            first.wait_for("all rows", lambda: len(landed_state(tmp_path / "a")) == 20, 120)
            first.signal(signal.SIGTERM)
            assert first.wait(30) == 0
        finally:
            first.kill()
            second.kill()
        assert landed_state(tmp_path / "a") == source_state(server)


def test_an_unreachable_source_is_logged_on_every_attempt(tmp_path: Path) -> None:
    port = new_http_port()
    closed = free_tcp_port()
    config = tmp_path / "c.yaml"
    config.write_text(
        f"source:\n  host: 127.0.0.1\n  port: {closed}\n  password: x\n"
        "  reconnect_initial_delay: 0.1\n  reconnect_max_delay: 0.4\n"
        f"sink:\n  root: {tmp_path / 'landing'}\n"
        f"service:\n  http_port: {port}\n"
    )
    daemon = Daemon(config, tmp_path / "run.log", port).start()
    try:
        # a first start reads the source's tables before it streams
        retrying = "cannot read the source's tables, retrying"
        daemon.wait_for("three attempts", lambda: len(_events(daemon, retrying)) >= 3)
        status, body = daemon.get("/readyz")
        assert status == 503
        assert "not streaming" in body
    finally:
        daemon.signal(signal.SIGTERM)
        code = daemon.wait(30)
        daemon.kill()
    assert code == 0, daemon.log_tail()  # the first SIGTERM exits 0 (operations.md, Signals)
    assert _events(daemon, "stopped")
    attempts = _events(daemon, "cannot read the source's tables, retrying")
    assert f"127.0.0.1:{closed}" in attempts[0]["source"]
    assert "Connection refused" in attempts[0]["cause"] or "cannot reach" in attempts[0]["cause"]
    assert [a["attempt"] for a in attempts[:3]] == [1, 2, 3]


def test_a_black_holed_lookup_connection_is_retried_and_not_ready(tmp_path: Path) -> None:
    """The connection that reads the source's tables stalls (accepted, then silent): every
    attempt times out and is logged, /readyz says not ready, and once the link is back the
    daemon streams and the landing zone equals the source."""
    with MariaDBServer() as server, FaultProxy(server.host, server.port) as proxy:
        start = _prepare(server)
        for n in range(1, 4):
            server.execute("INSERT INTO shop.t VALUES (%s, %s)", (n, f"row {n}"))
        proxy.set_blackhole(True)
        port = new_http_port()
        root = tmp_path / "landing"
        config = tmp_path / "c.yaml"
        config.write_text(
            f"source:\n  host: {proxy.host}\n  port: {proxy.port}\n  user: repl\n"
            "  password: replpass\n  connect_timeout: 1\n  heartbeat_seconds: 1\n"
            "  reconnect_initial_delay: 0.1\n  reconnect_max_delay: 0.4\n"
            f"start:\n  gtid: '{start}'\n"
            f"sink:\n  root: {root}\n  batch_max_seconds: 0.2\n"
            f"service:\n  http_port: {port}\n"
        )
        daemon = Daemon(config, tmp_path / "run.log", port).start()
        try:
            retrying = "cannot read the source's tables, retrying"
            daemon.wait_for("two attempts", lambda: len(_events(daemon, retrying)) >= 2)
            status, body = daemon.get("/readyz")
            assert status == 503, body
            assert "not streaming" in body
            proxy.set_blackhole(False)
            server.execute("INSERT INTO shop.t VALUES (4, 'after the stall')")
            expected = source_state(server)
            daemon.wait_for("everything landed", lambda: landed_state(root) == expected)
            daemon.wait_for("ready", lambda: daemon.get("/readyz")[0] == 200)
        finally:
            daemon.signal(signal.SIGTERM)
            code = daemon.wait(30)
            daemon.kill()
        assert code == 0, daemon.log_tail()
        attempts = _events(daemon, retrying)
        assert "timed out" in attempts[0]["cause"] or "Lost connection" in attempts[0]["cause"]
        assert landed_state(root) == source_state(server)
