"""Which landing zone, and which source, a command that only reads them looks at.

``status``, ``checkpoint show|set``, ``schema show``, ``snapshot``, ``compact`` and ``verify``
take ``--config FILE`` (the daemon's config) or ``--landing DIR`` (the landing zone alone: no
config needed; the source is unknown then); ``check`` takes ``--config FILE`` or connection
options. Given none of them, each reads its config from the environment when
``REPLICATOR_SOURCE__HOST`` is set, as ``replicator run`` does (``environment_target``); else
it uses the embedded demo's settings when the current directory holds the demo's landing zone
(``embedded.demo.demo_settings``: ``landing/``, named by ``.replicator-demo/demo.json``), which
is what someone who just ran the demo expects.

A landing zone is there when ``replicator run`` has started (``_state/``) or committed
(``_manifests/``) in the directory. Anything else (a relative ``sink.root`` read from another
directory, a typo) is an error naming the absolute path looked at, never an empty report.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path

from .config import Config, ServiceConfig, SinkConfig, load_config
from .errors import ConfigError
from .landed.contract import MANIFESTS
from .sink.stores import landing_store
from .storage import LocalStore, Store, is_url

__all__ = [
    "ENVIRONMENT_SOURCE",
    "Target",
    "environment_target",
    "landing_at",
    "landing_root",
    "resolve",
]

# with no --config, this variable in the environment means "configured from the environment"
# (``replicator run`` takes its whole config from there then, and so do the other commands)
ENVIRONMENT_SOURCE = "REPLICATOR_SOURCE__HOST"


@dataclass(frozen=True, slots=True)
class Target:
    config: Config
    origin: str  # how it was chosen, for messages: "--config c.yaml", "--landing DIR", ...
    source_known: bool  # False for --landing: nothing says where the source is
    root_named_by: str = "sink.root"  # what names the landing zone, for hints


def demo_target() -> Target | None:
    """The embedded demo's settings, when the current directory holds its landing zone."""
    # the demo's module (its server, workload and structlog) only when no config names the
    # target: ``status --config`` must not pay for it (tests/unit/test_startup.py)
    from .embedded.demo import DEMO_LANDING, demo_settings  # noqa: PLC0415

    config = demo_settings(DEMO_LANDING)
    if config is None:
        return None
    return Target(config, f"the embedded demo's settings ({DEMO_LANDING}/)", source_known=True)


def _sections(source: bool) -> list[str]:
    """The sections a command reads: a command that does not connect reads only the sink
    and service sections; none reads the mqtt section (nor its password)."""
    if not source:
        return ["sink", "service"]
    return [f.name for f in fields(Config) if f.name != "mqtt"]


def environment_target(*, source: bool = True) -> Target | None:
    """The config ``replicator run`` takes from the environment when it is given no file:
    when ``REPLICATOR_SOURCE__HOST`` is set (None otherwise)."""
    if ENVIRONMENT_SOURCE not in os.environ:
        return None
    return Target(
        load_config(None, sections=_sections(source)),
        f"the environment ({ENVIRONMENT_SOURCE}, no --config)",
        source_known=source,
        root_named_by="sink.root (REPLICATOR_SINK__ROOT)",
    )


def resolve(
    config_file: Path | None,
    landing: Path | None,
    command: str,
    *,
    source: bool = True,
) -> Target:
    """The target of ``command`` from its ``--config``/``--landing`` (at most one).
    ``source``: whether the command connects to the source; a command that does not reads
    only the sink and service sections of the config, so it never needs the source's
    password (nor its variable) set; none reads the mqtt section (nor its password)."""
    if config_file is not None and landing is not None:
        raise ConfigError(
            f"{command} reads either --config or --landing, not both",
            hint="--landing DIR reads a landing zone without a config",
        )
    if config_file is not None:
        # the commands that read a target never publish: the broker's password is not needed
        return Target(
            load_config(config_file, sections=_sections(source)),
            f"--config {config_file}",
            source_known=source,
        )
    if landing is not None:
        # no config: no source, and no HTTP port but the one the running daemon records
        config = Config(
            sink=SinkConfig(root=str(landing)), service=ServiceConfig(http_enabled=False)
        )
        return Target(config, f"--landing {landing}", source_known=False, root_named_by="--landing")
    environment = environment_target(source=source)
    if environment is not None:
        return environment
    demo = demo_target()
    if demo is None:
        from .embedded.demo import DEMO_LANDING, DEMO_SERVER_DIR, RECORD  # noqa: PLC0415

        raise ConfigError(
            f"{command} needs --config FILE or --landing DIR",
            hint=f"{Path.cwd()} holds no demo landing zone either ({DEMO_LANDING}/ named by "
            f"{DEMO_SERVER_DIR}/{RECORD}), and {ENVIRONMENT_SOURCE} is not set",
        )
    return demo


def landing_at(target: Target) -> Store:
    """The target's landing zone as a store: ``landing_root``'s directory, or the object
    store ``sink.root`` names (ConfigError when nothing was landed there)."""
    if not is_url(target.config.sink.root):
        return LocalStore(landing_root(target))
    store = landing_store(target.config.sink)
    try:
        found = bool(store.list("_state") or store.list(MANIFESTS))
    except OSError as exc:
        raise ConfigError(
            f"cannot list the landing zone {store.location} ({target.origin}): {exc}",
            hint="check sink.root, sink.object_store and the credentials",
        ) from exc
    if not found:
        raise ConfigError(
            f"no landing zone at {store.location} ({target.origin})",
            hint="check the URL; `replicator run` makes the landing zone when it first starts",
        )
    return store


def landing_root(target: Target) -> Path:
    """The target's landing zone directory; ConfigError naming the absolute path looked at
    when no landing zone is there."""
    root = Path(target.config.sink.root)
    if (root / "_state").is_dir() or (root / MANIFESTS).is_dir():
        return root
    if root.is_absolute():
        raise ConfigError(
            f"no landing zone at {root} ({target.origin})",
            hint="check the path; `replicator run` makes the landing zone when it first starts",
        )
    raise ConfigError(
        f"no landing zone at {root.absolute()} ({target.origin}: {root} is a relative path, "
        f"taken from the current directory {Path.cwd()})",
        hint="run this from the directory `replicator run` runs in, or make "
        f"{target.root_named_by} an absolute path",
    )
