"""The container's health probe: GET /healthz on the port the daemon was configured with.

``python -m replicator.healthcheck [--config FILE]`` exits 0 when the daemon's ``/healthz``
answers 200, else 1. The port is found as the daemon finds it: ``REPLICATOR_SERVICE__HTTP_PORT``
first, then ``service.http_port`` of the config file, then the default (9108). It reads only
that key (the file is not validated and no secret is resolved), imports nothing heavy (it runs
every few seconds), and always asks 127.0.0.1: the daemon listens there whatever
``service.http_host`` says (0.0.0.0 includes it). A port of 0 (any free port) cannot be
probed from outside the process: it exits 1 saying so.
"""

from __future__ import annotations

import argparse
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

DEFAULT_PORT = 9108
PORT_ENV = "REPLICATOR_SERVICE__HTTP_PORT"


def configured_port(config: Path | None, environ: Mapping[str, str] | None = None) -> int:
    """The daemon's HTTP port as ``replicator run`` would take it (see the module doc)."""
    env = os.environ if environ is None else environ
    if env.get(PORT_ENV):
        return int(env[PORT_ENV])
    if config is not None and config.is_file():
        import yaml  # noqa: PLC0415 - only when a file is named

        data = yaml.safe_load(config.read_text()) or {}
        service = data.get("service") if isinstance(data, dict) else None
        if isinstance(service, dict) and service.get("http_port") is not None:
            return int(service["http_port"])
    return DEFAULT_PORT


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m replicator.healthcheck")
    parser.add_argument("--config", type=Path, help="the daemon's config file")
    parser.add_argument("--timeout", type=float, default=4.0)
    args = parser.parse_args(argv)
    try:
        port = configured_port(args.config)
    except (ValueError, OSError) as exc:
        print(f"healthcheck: cannot tell the daemon's HTTP port: {exc}", file=sys.stderr)
        return 1
    if port == 0:
        print("healthcheck: service.http_port is 0 (any free port): set a port", file=sys.stderr)
        return 1
    url = f"http://127.0.0.1:{port}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=args.timeout) as answer:
            return 0 if answer.status == 200 else 1
    except (urllib.error.URLError, OSError) as exc:
        print(f"healthcheck: {url}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
