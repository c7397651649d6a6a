"""The container's health probe: GET /healthz on the port the daemon was configured with.

``python -m replicator.healthcheck [--config FILE]`` exits 0 when the daemon's ``/healthz``
answers 200, else 1. The port is found as the daemon finds it: ``REPLICATOR_SERVICE__HTTP_PORT``
first, then ``service.http_port`` of the config file, then the default (9108); the host the
same way (``service.http_host``), where an all-addresses host (``0.0.0.0``, ``::``) is asked
at 127.0.0.1. It reads only those keys (the file is not validated and no secret is
resolved) and imports nothing heavy (it runs every few seconds). A port of 0 (any free port)
cannot be probed from outside the process: it exits 1 saying so.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

DEFAULT_PORT = 9108
DEFAULT_HOST = "127.0.0.1"
PORT_ENV = "REPLICATOR_SERVICE__HTTP_PORT"
HOST_ENV = "REPLICATOR_SERVICE__HTTP_HOST"
ALL_ADDRESSES = ("", "0.0.0.0", "::")  # listening there includes 127.0.0.1


def _setting(key: str, env_name: str, config: Path | None, environ: Mapping[str, str]) -> object:
    """``service.<key>`` as ``replicator run`` would take it: the environment, then the file;
    None when neither sets it."""
    if environ.get(env_name):
        return environ[env_name]
    if config is not None and config.is_file():
        import yaml  # noqa: PLC0415 - only when a file is named

        data = yaml.safe_load(config.read_text()) or {}
        service = data.get("service") if isinstance(data, dict) else None
        if isinstance(service, dict):
            return service.get(key)
    return None


def configured_port(config: Path | None, environ: Mapping[str, str] | None = None) -> int:
    """The daemon's HTTP port as ``replicator run`` would take it (see the module doc)."""
    found = _setting("http_port", PORT_ENV, config, os.environ if environ is None else environ)
    return DEFAULT_PORT if found is None else int(str(found))


def configured_host(config: Path | None, environ: Mapping[str, str] | None = None) -> str:
    """Where to ask the daemon (see the module doc), ready for a URL."""
    found = _setting("http_host", HOST_ENV, config, os.environ if environ is None else environ)
    host = DEFAULT_HOST if found is None or str(found) in ALL_ADDRESSES else str(found)
    return f"[{host}]" if ":" in host else host


def main(argv: list[str] | None = None) -> int:
    # here, not at the top: `status` imports this module for ALL_ADDRESSES alone
    import argparse  # noqa: PLC0415
    import urllib.error  # noqa: PLC0415
    import urllib.request  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog="python -m replicator.healthcheck")
    parser.add_argument("--config", type=Path, help="the daemon's config file")
    parser.add_argument("--timeout", type=float, default=4.0)
    args = parser.parse_args(argv)
    try:
        port = configured_port(args.config)
        host = configured_host(args.config)
    except (ValueError, OSError) as exc:
        print(f"healthcheck: cannot tell the daemon's HTTP address: {exc}", file=sys.stderr)
        return 1
    if port == 0:
        print("healthcheck: service.http_port is 0 (any free port): set a port", file=sys.stderr)
        return 1
    url = f"http://{host}:{port}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=args.timeout) as answer:
            return 0 if answer.status == 200 else 1
    except (urllib.error.URLError, OSError) as exc:
        print(f"healthcheck: {url}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
