"""Which landing zone, and which source, a command that only reads them looks at.

``status`` and ``checkpoint show`` take ``--config FILE`` (the daemon's config) or
``--landing DIR`` (the landing zone alone: no config needed; the source is unknown then);
``check`` takes ``--config FILE`` or connection options. Given none of them, each uses the
embedded demo's settings when the current directory holds the demo's landing zone
(``embedded.demo.demo_settings``: ``landing/``, named by ``.replicator-demo/demo.json``), which
is what someone who just ran the demo expects.

A landing zone is there when ``replicator run`` has started (``_state/``) or committed
(``_manifests/``) in the directory. Anything else (a relative ``sink.root`` read from another
directory, a typo) is an error naming the absolute path looked at, never an empty report.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

from .config import Config, ServiceConfig, SinkConfig, load_config
from .errors import ConfigError
from .landed.contract import MANIFESTS
from .sink.stores import landing_store
from .storage import LocalStore, Store, is_url

__all__ = ["Target", "landing_at", "landing_root", "resolve"]


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
        if not source:
            config = load_config(config_file, sections=("sink", "service"))
            return Target(config, f"--config {config_file}", source_known=False)
        # the commands that read a target never publish: the broker's password is not needed
        everything_but_mqtt = [f.name for f in fields(Config) if f.name != "mqtt"]
        return Target(
            load_config(config_file, sections=everything_but_mqtt),
            f"--config {config_file}",
            source_known=True,
        )
    if landing is not None:
        # no config: no source, and no HTTP port but the one the running daemon records
        config = Config(
            sink=SinkConfig(root=str(landing)), service=ServiceConfig(http_enabled=False)
        )
        return Target(config, f"--landing {landing}", source_known=False, root_named_by="--landing")
    demo = demo_target()
    if demo is None:
        from .embedded.demo import DEMO_LANDING, DEMO_SERVER_DIR, RECORD  # noqa: PLC0415

        raise ConfigError(
            f"{command} needs --config FILE or --landing DIR",
            hint=f"{Path.cwd()} holds no demo landing zone either ({DEMO_LANDING}/ named by "
            f"{DEMO_SERVER_DIR}/{RECORD})",
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
