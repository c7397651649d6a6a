"""The container files: docker-compose.yml validates, the image runs as non-root with a
healthcheck and the daemon as its entrypoint, and the compose stack has what docs/kubernetes.md
says."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def _compose_command() -> list[str]:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    docker = shutil.which("docker")
    if (
        docker
        and subprocess.run(
            [docker, "compose", "version"], capture_output=True, check=False
        ).returncode
        == 0
    ):
        return [docker, "compose"]
    pytest.fail("neither `docker compose` nor `docker-compose` is installed (scripts/bootstrap.sh "
                "installs docker-compose)")  # fmt: skip


@pytest.mark.tools
def test_compose_file_validates() -> None:
    done = subprocess.run(
        [*_compose_command(), "-f", str(ROOT / "docker-compose.yml"), "config", "-q"],
        capture_output=True, text=True, timeout=60, check=False, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_compose_stack_has_every_part() -> None:
    stack = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = stack["services"]
    assert {
        "mariadb",
        "mysql",
        "mosquitto",
        "replicator-mariadb",
        "replicator-mysql",
        "spark",
    } <= set(services)
    assert services["mysql"]["image"].startswith("mysql:8.4")
    assert "--gtid-mode=ON" in services["mysql"]["command"]
    assert "--binlog-format=ROW" in services["mariadb"]["command"]
    for name in ("replicator-mariadb", "replicator-mysql"):
        env = services[name]["environment"]
        assert env["REPLICATOR_SOURCE__HOST"] in services
        assert "PASSWORD" not in " ".join(k for k in env if k.startswith("REPLICATOR_SOURCE__"))
    assert "replicator materialize" in " ".join(services["spark"]["command"])
    for path in (ROOT / "docker").iterdir():
        assert path.read_text().strip()


def test_dockerfile_runs_the_daemon_as_non_root_with_a_healthcheck() -> None:
    text = (ROOT / "Dockerfile").read_text()
    daemon = text[text.rindex("FROM ") :]  # the last stage is the default target
    assert "USER replicator" in daemon
    assert "HEALTHCHECK" in daemon and "/healthz" in daemon
    assert 'ENTRYPOINT ["replicator"]' in daemon
    assert 'CMD ["run", "--config", "/etc/replicator/replicator.yaml"]' in daemon
    assert "python:3.11-slim" in daemon
