"""The container's health probe finds the daemon's port as the daemon does (environment, then
the config file, then 9108) and asks /healthz there; the Dockerfile uses it."""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from replicator.healthcheck import DEFAULT_PORT, configured_host, configured_port, main
from tests.harness import free_tcp_port

ROOT = Path(__file__).resolve().parents[2]


class _Healthz(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/healthz" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def port() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_tcp_port()), _Healthz)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_the_port_comes_from_the_environment_then_the_config_then_the_default(
    tmp_path: Path,
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("source:\n  password_env: NOT_SET_ANYWHERE\nservice:\n  http_port: 9200\n")
    assert configured_port(config, {"REPLICATOR_SERVICE__HTTP_PORT": "9300"}) == 9300
    assert configured_port(config, {}) == 9200
    assert configured_port(tmp_path / "missing.yaml", {}) == DEFAULT_PORT
    assert configured_port(None, {}) == DEFAULT_PORT


def test_the_host_comes_from_the_environment_then_the_config_then_the_default(
    tmp_path: Path,
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("service:\n  http_host: 10.1.2.3\n")
    assert configured_host(config, {"REPLICATOR_SERVICE__HTTP_HOST": "::1"}) == "[::1]"
    assert configured_host(config, {}) == "10.1.2.3"
    assert configured_host(None, {}) == "127.0.0.1"
    for everywhere in ("0.0.0.0", "::"):  # listening on all addresses includes 127.0.0.1
        assert configured_host(None, {"REPLICATOR_SERVICE__HTTP_HOST": everywhere}) == "127.0.0.1"


class _Ipv6Server(http.server.ThreadingHTTPServer):
    address_family = socket.AF_INET6


def test_healthy_where_the_daemon_listens_on_one_address_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REPLICATOR_SERVICE__HTTP_PORT", raising=False)
    monkeypatch.delenv("REPLICATOR_SERVICE__HTTP_HOST", raising=False)
    server = _Ipv6Server(("::1", 0), _Healthz)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        config = tmp_path / "c.yaml"
        config.write_text(
            f"service:\n  http_host: '::1'\n  http_port: {server.server_address[1]}\n"
        )
        assert main(["--config", str(config)]) == 0
    finally:
        server.shutdown()
        server.server_close()


def test_healthy_on_the_configured_port_only(
    tmp_path: Path, port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REPLICATOR_SERVICE__HTTP_PORT", raising=False)
    config = tmp_path / "c.yaml"
    config.write_text(f"service:\n  http_port: {port}\n")
    assert main(["--config", str(config)]) == 0
    monkeypatch.setenv("REPLICATOR_SERVICE__HTTP_PORT", str(free_tcp_port()))  # nobody there
    assert main(["--config", str(config), "--timeout", "1"]) == 1
    monkeypatch.setenv("REPLICATOR_SERVICE__HTTP_PORT", str(port))
    assert main([]) == 0
    monkeypatch.setenv("REPLICATOR_SERVICE__HTTP_PORT", "0")
    assert main([]) == 1


def test_the_image_probes_through_it() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert '"-m", "replicator.healthcheck"' in dockerfile
    assert "127.0.0.1:9108" not in dockerfile
