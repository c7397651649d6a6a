"""Command line: ``replicator dump|run|check|status|checkpoint|compact|materialize|verify``.

Exit codes (docs/operations.md, Exit codes): 0 done, 2 bad config or arguments, 3 server
refused, 4 data integrity stop, 1 anything else. Every error message says what to do next.

``check`` exits 0 when the source is fit (warnings allowed), 3 when the stream cannot work (an
error finding, or the server refused the login, a privilege or the TLS certificate), 2 for bad
options, and 1 when the server cannot be reached at all: that one is transient (retry later)
rather than something to fix on the server, so scripts can tell the two apart.

``status``, ``checkpoint show`` and ``check`` need no hand-written config: ``--landing DIR``,
or the embedded demo's settings when given nothing (``targets``).

``run`` takes SIGTERM from its first moment: while it is still starting (before the daemon's
own handlers, ``service``) a SIGTERM ends it with exit 0 and a log line, not by the signal.
"""

from __future__ import annotations

import os
import signal
import sys
import time


def _stopped_while_starting(signum: int, frame: object) -> None:
    """SIGTERM to ``run`` before the daemon's own handlers are in place (imports, config): it
    has taken no lock and written nothing, so it ends cleanly, exit 0, and says so. Raised as
    SystemExit, what was started (the embedded demo's server) is stopped on the way out."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    line = (
        f'{{"reason": "signal", "event": "stopped while starting", "level": "info", '
        f'"timestamp": "{stamp}"}}'
        if not sys.stderr.isatty()
        else f"{stamp} [info     ] stopped while starting         reason=signal"
    )
    print(line, file=sys.stderr, flush=True)
    raise SystemExit(0)


if sys.argv[1:2] == ["run"]:  # first thing: the imports below take a while
    signal.signal(signal.SIGTERM, _stopped_while_starting)

# Arrow's buffers come from the system allocator (``runtime``); the pool is fixed when pyarrow
# is first imported, so this comes before every other import
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
# pyarrow imports numpy, whose OpenBLAS starts a thread a core that spins for about a tenth of a
# second of CPU; nothing here multiplies matrices, and on two cores that tenth is the
# daemon's (docs/performance.md, Start-up)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import contextlib
import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click
from click.core import ParameterSource

from .errors import ConfigError, IntegrityError, ReplicatorError, SinkError
from .spark.cli import materialize

# Each command imports what it needs when it runs (hence the ``noqa: PLC0415`` lines): the
# config's models, the source (pymysql), pyarrow, sqlglot and the daemon's pipeline take most
# of a second to import, and ``replicator --help``, ``status`` or ``dump`` must not pay for
# what only ``run`` uses. tests/unit/test_startup.py keeps ``--help`` free of them.
if TYPE_CHECKING:
    from .binlog.position import StreamPosition
    from .config import Config
    from .service import RunOptions
    from .storage import Store

MAX_SERVER_ID = 2**32 - 1
# ``SourceConfig().server_id``, written out so that ``check --help`` need not build the config
# models (tests/unit/test_startup.py checks that the two agree)
DEFAULT_SERVER_ID = 65000


@click.group()
@click.version_option(package_name="replicator")
def main() -> None:
    """Stream a MySQL/MariaDB binary log into Parquet landing zones."""


@main.command()
@click.option(
    "--binlog-file",
    "binlog_files",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Binlog file on disk (repeat for several, read in the order given).",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(path_type=Path),
    help="YAML config naming the live source (see config/replicator.example.yaml).",
)
@click.option("--start-gtid", help="Live: start after these GTIDs (MariaDB D-S-N or MySQL set).")
@click.option("--start-file", help="Live: start in this binlog file...")
@click.option("--start-pos", type=int, default=4, show_default=True, help="...at this position.")
@click.option("--stop-at-end", is_flag=True, help="Live: stop at the end of the binlog at start.")
@click.option(
    "--server-id",
    type=click.IntRange(1, MAX_SERVER_ID),
    help="Live: register with this server_id instead of the config's (required while a daemon "
    "runs on the same config: two replicas with one id drop each other).",
)
@click.option("--no-verify-checksum", is_flag=True, help="Skip CRC32 verification (not advised).")
def dump(
    binlog_files: tuple[Path, ...],
    config_file: Path | None,
    start_gtid: str | None,
    start_file: str | None,
    start_pos: int,
    stop_at_end: bool,
    server_id: int | None,
    no_verify_checksum: bool,
) -> None:
    """Decode row changes to JSON lines on stdout, one change per line.

    From binlog files on disk (--binlog-file), or from a live server (--config) starting at
    --start-gtid, --start-file/--start-pos, the config's start, or now. Next to a daemon
    running on the same config, give --server-id: the source drops one of two replicas that
    register with one id.
    """
    from .dump import RowChangeFormatter, json_lines  # noqa: PLC0415 - see the imports
    from .runtime import tune_gc  # noqa: PLC0415
    from .source.binlog_file import read_binlog_files  # noqa: PLC0415

    formatter = RowChangeFormatter()
    out = sys.stdout.buffer  # the lines come as UTF-8 bytes
    try:
        if binlog_files and config_file is not None:
            raise ConfigError(
                "dump reads either binlog files or a live server, not both",
                hint="drop --binlog-file or --config",
            )
        if binlog_files and server_id is not None:
            raise ConfigError(
                "--server-id is for a live dump (--config): binlog files are read from disk",
                hint="drop --server-id",
            )
        if binlog_files:
            tune_gc()  # after the imports: they are start-up, frozen out of collection
            events = read_binlog_files(
                list(binlog_files),
                verify_checksum=not no_verify_checksum,
                buffers=False,
                text_values=True,  # the decimals and dates as the lines write them
            )
            for lines in json_lines(events, formatter):
                out.write(lines)
            out.flush()
        elif config_file is not None:
            import asyncio  # noqa: PLC0415 - see the imports

            from .binlog.position import start_position  # noqa: PLC0415
            from .config import load_config  # noqa: PLC0415
            from .dump import dump_live  # noqa: PLC0415
            from .logs import configure as configure_logging  # noqa: PLC0415

            # warnings (reconnects) go to stderr: stdout carries the JSON lines (files are
            # read without logging, and without importing the logging library)
            configure_logging()
            tune_gc()
            config = load_config(config_file)
            _configure_logging(config)  # service.log_level/log_format, as for run
            if server_id is not None:
                config = dataclasses.replace(
                    config, source=dataclasses.replace(config.source, server_id=server_id)
                )
            _refuse_the_daemons_server_id(config, config_file, given=server_id is not None)
            start = (
                start_position(start_gtid, start_file, start_pos)
                if (start_gtid or start_file)
                else start_position(config.start.gtid, config.start.file, config.start.position)
            )
            with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C ends a live dump cleanly
                asyncio.run(
                    dump_live(
                        config.source,
                        start,
                        stop_at_end=stop_at_end,
                        formatter=formatter,
                        out=out,
                    )
                )
        else:
            raise ConfigError(
                "dump needs a source",
                hint="pass --binlog-file PATH for files, or --config FILE for a live server",
            )
    except ReplicatorError as exc:
        out.flush()
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    finally:
        stats = formatter.stats
        click.echo(
            f"dump: {stats.events} events, {stats.transactions} transactions, "
            f"{stats.row_changes} row changes, {stats.invalid_temporals} invalid dates as null",
            err=True,
        )


def _refuse_the_daemons_server_id(config: Config, config_file: Path, *, given: bool) -> None:
    """A live dump registers as a replica with ``source.server_id``: when the landing zone's
    lock records a running daemon registered with the same id (``sink.lock``), the source
    would keep dropping one of the two (error 4052), and the dump would miss rows."""
    from .sink.lock import read_record  # noqa: PLC0415 - see the imports
    from .sink.stores import landing_store  # noqa: PLC0415

    server_id = config.source.server_id
    try:
        record = read_record(landing_store(config.sink))
    except (OSError, ReplicatorError):  # an object store that cannot be asked: nothing known
        return
    if record is None or record.running is False or record.facts.get("server_id") != server_id:
        return
    where = "--server-id" if given else f"source.server_id in {config_file}"
    state = "runs" if record.running else "is recorded as running (on another host)"
    raise ConfigError(
        f"a replicator daemon {state} on this config's landing zone ({record.describe()}) and "
        f"is registered with the source as server_id {server_id}, which {where} gives this "
        "dump too: the source would keep dropping one of the two (error 4052)",
        hint=f"pass --server-id with an id no other replica of the source uses, e.g. "
        f"--server-id {server_id + 1 if server_id < MAX_SERVER_ID else server_id - 1}",
    )


_CONNECTION_OPTIONS = (
    "host",
    "port",
    "user",
    "password_env",
    "password_file",
    "server_id",
    "tls_ca",
    "get_server_public_key",
)


@main.command()
@click.option(
    "--config",
    "config_file",
    type=click.Path(path_type=Path),
    help="The config `run` uses: its source, server_id and landing zone (the daemon running on "
    "it is not taken for a server_id clash). Instead of the connection options.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Source server host.")
@click.option(
    "--port", type=click.IntRange(1, 65535), default=3306, show_default=True, help="TCP port."
)
@click.option("--user", default="repl", show_default=True, help="Replication account.")
@click.option("--password-env", metavar="VAR", help="Read the password from this variable.")
@click.option(
    "--password-file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Read the password from this file (trailing newline ignored).",
)
@click.option(
    "--server-id",
    type=click.IntRange(1, MAX_SERVER_ID),
    default=DEFAULT_SERVER_ID,
    show_default=True,
    help="The server_id replicator will use as a replica.",
)
@click.option(
    "--tls-ca",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Use TLS and verify the server certificate against this CA file (PEM).",
)
@click.option(
    "--get-server-public-key",
    is_flag=True,
    help="Without TLS: take the RSA key the server sends for caching_sha2_password (a "
    "trusted network only).",
)
@click.pass_context
def check(
    ctx: click.Context,
    *,
    config_file: Path | None,
    host: str,
    port: int,
    user: str,
    password_env: str | None,
    password_file: Path | None,
    server_id: int,
    tls_ca: Path | None,
    get_server_public_key: bool,
) -> None:
    """Check the source's binlog settings and privileges; print the exact fix for each problem.

    The source: --config FILE, or the connection options; with neither, the environment's
    settings when REPLICATOR_SOURCE__HOST is set (as for `run`), else the embedded demo's
    server when the current directory holds the demo's landing zone, else 127.0.0.1:3306.

    Exit 0 ok (warnings allowed), 3 the stream cannot work (fix the printed errors, or the
    server refused login/privileges/TLS), 2 bad options, 1 the server cannot be reached.
    """
    import dataclasses  # noqa: PLC0415 - see the imports

    from .config import Secret, SourceConfig, TlsConfig  # noqa: PLC0415
    from .sink.stores import landing_store  # noqa: PLC0415
    from .source.preflight import check_continuity, format_report, run_preflight  # noqa: PLC0415
    from .targets import demo_target, environment_target, resolve  # noqa: PLC0415

    try:
        given = [
            name
            for name in _CONNECTION_OPTIONS
            if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE
        ]
        if config_file is not None and given:
            shown = ", ".join("--" + name.replace("_", "-") for name in given)
            raise ConfigError(
                f"check takes --config or connection options, not both ({shown})",
                hint="the config names the source; drop the other options",
            )
        target = None
        if config_file is not None:
            target = resolve(config_file, None, "check")
        elif not given:
            target = environment_target()
            if target is not None:
                click.echo(f"check: the source configured in {target.origin}", err=True)
            else:
                target = demo_target()
                if target is not None:
                    click.echo(
                        f"check: {target.origin}, whose server runs while the demo does; "
                        "--config or --host for another source",
                        err=True,
                    )
        if target is not None:
            cfg = target.config.source
            own = _own_replica_host(landing_store(target.config.sink), cfg.server_id)
        else:
            cfg = SourceConfig(
                host=host,
                port=port,
                user=user,
                password=Secret.resolve(env=password_env, file=password_file),
                server_id=server_id,
                tls=TlsConfig(enabled=True, ca_file=str(tls_ca)) if tls_ca else TlsConfig(),
                get_server_public_key=get_server_public_key,
            )
            own = None
        filters = None if target is None else target.config.filters
        report = run_preflight(cfg, own_replica_host=own, filters=filters)
        if target is not None:  # the landing zone's history: does this server continue it?
            found = check_continuity(target.config, landing_store(target.config.sink))
            if found.severity == "error":
                named = _whose_landing(target.config)
                action = f"{named}; {found.action}" if found.action else named
                found = dataclasses.replace(found, action=action)
            report = dataclasses.replace(report, findings=(*report.findings, found))
    except ReplicatorError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    click.echo(format_report(report), nl=False)
    sys.exit(0 if report.ok else 3)


def _whose_landing(config: Config) -> str:
    """The landing zone a refused continuity check is about, by its absolute path, and
    whether it is the embedded demo's (its record names it)."""
    from .embedded.demo import DEMO_SERVER_DIR, RECORD, read_record  # noqa: PLC0415
    from .storage import is_url, redact_url  # noqa: PLC0415

    root = config.sink.root
    if is_url(root):
        return f"the landing zone is {redact_url(root)} (sink.root)"
    path = Path(root).absolute()
    named = f"the landing zone is {path} (sink.root {root})"
    if read_record(Path(root)) is not None:
        named += (
            f": the embedded demo's ({path.parent / DEMO_SERVER_DIR / RECORD} names it); "
            "give your source a sink.root of its own"
        )
    return named


def _own_replica_host(root: Store, server_id: int) -> str | None:
    """The name the landing zone's daemon registered with, when its lock records one for
    ``server_id`` (``sink.lock``; ``check_replica_clash`` says why this hides no clash)."""
    from .sink.lock import read_record  # noqa: PLC0415 - see the imports

    record = read_record(root)
    if record is None or record.facts.get("server_id") != server_id:
        return None
    name = record.facts.get("replica_host")
    return name if isinstance(name, str) and name else None


def _configure_logging(config: Config) -> None:
    import logging  # noqa: PLC0415 - see the imports

    from .logs import configure as configure_logging  # noqa: PLC0415

    service = config.service
    json_output = {"json": True, "console": False}.get(service.log_format)
    configure_logging(json_output=json_output, level=getattr(logging, service.log_level.upper()))


def _fail(exc: ReplicatorError) -> NoReturn:
    click.echo(f"error: {exc}", err=True)
    sys.exit(exc.exit_code)


@main.command()
@click.option(
    "--config",
    "config_file",
    type=click.Path(path_type=Path),
    help="YAML config (see config/replicator.example.yaml). Without it, and without "
    "REPLICATOR_SOURCE__HOST, the embedded demo runs: a local MariaDB with a sample workload.",
)
@click.option(
    "--stop-at-end",
    is_flag=True,
    help="Stop once everything up to the end of the binlog at start is committed.",
)
@click.option(
    "--for",
    "run_for",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help="Stop (as on SIGTERM: commit, exit 0) after this many seconds.",
)
@click.option(
    "--landing",
    type=click.Path(path_type=Path),
    default=Path("landing"),
    show_default=True,
    help="Demo only: the landing zone (the demo server lives next to it).",
)
@click.option(
    "--demo-reset",
    is_flag=True,
    help="Demo only: start it over. First removes the demo's landing zone, its MariaDB "
    "(.replicator-demo) and the tables materialized from it (current), each only when it is "
    "the demo's own; never a landing zone named by a config.",
)
def run(
    config_file: Path | None,
    stop_at_end: bool,
    run_for: float | None,
    landing: Path,
    demo_reset: bool,
) -> None:
    """Replicate into the landing zone until stopped (SIGTERM: commit, then exit 0).

    With no --config and no REPLICATOR_SOURCE__HOST: the embedded demo. It starts a local
    MariaDB (kept in .replicator-demo next to the landing zone) with a sample shop workload and
    lands it into ./landing; Ctrl-C stops it. --demo-reset starts it over.
    """
    from .runtime import held_gc  # noqa: PLC0415 - see the imports

    with held_gc():  # start-up: then frozen out of collection, and collection tuned
        import asyncio  # noqa: PLC0415

        from .config import load_config  # noqa: PLC0415
        from .logs import configure as configure_logging  # noqa: PLC0415
        from .service import RunOptions, Service  # noqa: PLC0415

        configure_logging()
        options = RunOptions(stop_at_end=stop_at_end, run_for=run_for, watchdog=True)
    try:
        demo = config_file is None and "REPLICATOR_SOURCE__HOST" not in os.environ
        if demo_reset and not demo:
            raise ConfigError(
                "--demo-reset starts the embedded demo over; it never removes a landing zone "
                "named by a config (--config or REPLICATOR_SOURCE__HOST)",
                hint="drop --demo-reset; to start a configured landing zone over, stop its "
                "daemon and remove its sink.root yourself",
            )
        if demo_reset:
            from .embedded.reset import reset_demo  # noqa: PLC0415 - see the imports

            for line in reset_demo(landing):
                click.echo(f"demo reset: {line}", err=True)
        if demo:
            code = _run_demo(landing, options)
        else:
            config = load_config(config_file)
            _configure_logging(config)
            code = asyncio.run(Service(config, options).run())
    except ReplicatorError as exc:
        _fail(exc)
    sys.exit(code)


def _run_demo(landing: Path, options: RunOptions) -> int:
    import asyncio  # noqa: PLC0415 - see the imports

    from .config import load_config  # noqa: PLC0415
    from .embedded.demo import default_output, start_demo  # noqa: PLC0415
    from .service import Service  # noqa: PLC0415

    # the environment's service.log_level/log_format apply to the demo as to a config,
    # from its first line on (the demo's config is made once its server runs)
    _configure_logging(load_config(None, sections=("service",)))
    with start_demo(landing) as demo:
        code = asyncio.run(Service(demo.config, options).run())
        stats = demo.stop()
    output = default_output(landing)
    with contextlib.suppress(ValueError):
        output = output.relative_to(Path.cwd())
    click.echo(
        f"demo: {stats.transactions} transactions written to the local MariaDB; landing zone "
        f"in {landing}/ (try: replicator materialize --landing {landing} --out {output}; "
        "start over: replicator run --demo-reset)",
        err=True,
    )
    return code


_LANDING_HELP = "Read this landing zone without a config (the source is not asked)."


@main.command()
@click.option(
    "--config",
    "config_file",
    type=click.Path(path_type=Path),
    help="The config `run` uses (landing zone, HTTP port, source).",
)
@click.option("--landing", type=click.Path(path_type=Path), help=_LANDING_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--no-source", is_flag=True, help="Do not connect to the source server.")
def status(config_file: Path | None, landing: Path | None, as_json: bool, no_source: bool) -> None:
    """Position, lag, last batch and checkpoint: from the landing zone, the running daemon's
    HTTP port and the source (each optional but the landing zone). Without --config or
    --landing: the environment's config when REPLICATOR_SOURCE__HOST is set (as for `run`),
    else the embedded demo's, when the current directory holds its landing zone."""
    from .status import format_text, gather  # noqa: PLC0415 - see the imports
    from .targets import landing_at, resolve  # noqa: PLC0415

    try:
        not_asked = None
        try:
            target = resolve(config_file, landing, "status", source=not no_source)
        except ConfigError as exc:
            if no_source or not str(exc).startswith("source.password"):
                raise
            # the source's password cannot be read: report the landing zone and the daemon,
            # and say why the source was not asked
            target = resolve(config_file, landing, "status", source=False)
            not_asked = (
                f"{exc.args[0]}; set it to ask the source, or pass --no-source to leave it out"
            )
        landing_at(target)
        report = gather(
            target.config,
            probe_source=target.source_known and not no_source,
            source_not_asked=not_asked,
        )
    except ReplicatorError as exc:
        _fail(exc)
    if as_json:
        click.echo(json.dumps(report, indent=2, sort_keys=True))
    else:
        click.echo(format_text(report), nl=False)


_WRITE_LANDING_HELP = "This landing zone (a directory) instead of a config's sink.root."
_WRITE_CONFIG_HELP = "The config `run` uses: only its sink section is read."


@main.command()
@click.option("--config", "config_file", type=click.Path(path_type=Path), help=_WRITE_CONFIG_HELP)
@click.option("--landing", type=click.Path(path_type=Path), help=_WRITE_LANDING_HELP)
@click.option(
    "--tables",
    "patterns",
    multiple=True,
    required=True,
    help="db.table, globs allowed (shop.*); repeat for more.",
)
def snapshot(config_file: Path | None, landing: Path | None, patterns: tuple[str, ...]) -> None:
    """Ask for a snapshot of these tables: the running daemon takes it within seconds (or
    the next `run` at its start) and lands their rows, chunk by chunk, beside the stream.
    The landing zone must exist (`run` makes it). Without --config or --landing: as for
    `status`."""
    from .snapshot.requests import (  # noqa: PLC0415 - see the imports
        REQUESTS,
        is_table_pattern,
        write_request,
    )
    from .targets import landing_at, resolve  # noqa: PLC0415

    where = "the landing zone"  # named in the error: the request's folder once it is known
    try:
        for pattern in patterns:
            if not is_table_pattern(pattern):
                raise ConfigError(
                    f"--tables {pattern!r} must be database.table (globs allowed)",
                    hint='e.g. --tables "shop.orders" or --tables "shop.*"',
                )
        # it never connects; a request where no landing zone is would never be taken
        target = resolve(config_file, landing, "snapshot", source=False)
        store = landing_at(target)
        where = store.uri(REQUESTS.as_posix())
        key = write_request(store, patterns)
    except ReplicatorError as exc:
        _fail(exc)
    except OSError as exc:
        # the file the OS names (the request's, or a folder above it), else its folder: a
        # write or an fsync that fails on a full disk names none
        path = where if exc.filename is None else exc.filename
        _fail(
            SinkError(
                f"cannot write the snapshot request ({path}): {exc.strerror or exc}",
                hint="check free space and permissions of the landing zone (sink.root)",
            )
        )
    click.echo(f"snapshot requested: {', '.join(patterns)} ({key.rpartition('/')[2]})")


@main.group()
def checkpoint() -> None:
    """Show or set where `run` resumes."""


@checkpoint.command("show")
@click.option("--config", "config_file", type=click.Path(path_type=Path))
@click.option("--landing", type=click.Path(path_type=Path), help=_LANDING_HELP)
def checkpoint_show(config_file: Path | None, landing: Path | None) -> None:
    """Print the checkpoint as JSON. Without --config or --landing: the embedded demo's, when
    the current directory holds its landing zone."""
    from .checkpoint import CheckpointStore  # noqa: PLC0415 - see the imports
    from .targets import landing_at, resolve  # noqa: PLC0415

    try:
        target = resolve(config_file, landing, "checkpoint show", source=False)
        current = CheckpointStore(landing_at(target)).load()
    except ReplicatorError as exc:
        _fail(exc)
    click.echo(json.dumps(current.to_json(), indent=2, sort_keys=True))


@main.command()
@click.option(
    "--config",
    "config_file",
    type=click.Path(path_type=Path),
    help="The config `run` uses: only its sink section is read (the source's password is not "
    "needed).",
)
@click.option(
    "--landing",
    type=click.Path(path_type=Path),
    help="Check this landing zone (a directory) without a config.",
)
@click.option("--deep", is_flag=True, help="Hash every committed file too (reads every byte).")
def verify(config_file: Path | None, landing: Path | None, deep: bool) -> None:
    """Check a landing zone against its commit records, offline (the source is not asked):
    the manifests and their chain, the compaction records, every committed file's size (with
    --deep its hash), the schema history's pin. One line per bad file; exit 4 if any."""
    from .config import load_config  # noqa: PLC0415 - see the imports
    from .sink.verify import verify_landing  # noqa: PLC0415
    from .targets import Target, landing_at, resolve  # noqa: PLC0415

    try:
        if config_file is not None and landing is None:
            config = load_config(config_file, sections=("sink",))
            target = Target(config, f"--config {config_file}", source_known=False)
        else:
            target = resolve(config_file, landing, "verify")
        report = verify_landing(landing_at(target), deep=deep)
    except ReplicatorError as exc:
        _fail(exc)
    except OSError as exc:
        _fail(SinkError(f"cannot read the landing zone: {exc}", hint="check sink.root"))
    for line in report.lines():
        click.echo(f"bad: {line}")
    click.echo(report.summary())
    if not report.ok:
        sys.exit(IntegrityError.exit_code)


@checkpoint.command("set")
@click.option("--config", "config_file", type=click.Path(path_type=Path), help=_WRITE_CONFIG_HELP)
@click.option("--landing", type=click.Path(path_type=Path), help=_WRITE_LANDING_HELP)
@click.option("--gtid", help="Resume after these GTIDs (MariaDB D-S-N,... or a MySQL set).")
@click.option("--file", "binlog_file", help="Resume at this binlog file...")
@click.option("--pos", type=int, help="...and position (default 4, the file's first event).")
def checkpoint_set(
    config_file: Path | None,
    landing: Path | None,
    gtid: str | None,
    binlog_file: str | None,
    pos: int | None,
) -> None:
    """Move the resume position (replay or skip). `_seq` keeps increasing, so a replay adds
    rows with higher `_seq` that Spark's latest-by-key dedup folds into the same state.
    The landing zone must exist (`run` makes it; a new one starts at the config's `start`),
    and its daemon must be stopped. Without --config or --landing: as for `status`."""
    from .checkpoint import now_iso  # noqa: PLC0415 - see the imports
    from .sink.landing import LandingZone  # noqa: PLC0415
    from .sink.lock import LandingZoneBusyError, writer_lock  # noqa: PLC0415
    from .targets import landing_at, resolve  # noqa: PLC0415

    try:
        position = _moved_to(gtid, binlog_file, pos)
        target = resolve(config_file, landing, "checkpoint set", source=False)  # never connects
        landing_at(target)  # an existing landing zone, never a new one at a mistaken path
        config = target.config
        zone = LandingZone(config.sink)
        lease = config.sink.object_store.lease_seconds
        try:
            lock = writer_lock(zone.store, lease).acquire("checkpoint set")  # never under a daemon
        except LandingZoneBusyError as exc:
            exc.hint = (
                "stop the daemon first (SIGTERM: it commits and exits), then move the "
                "checkpoint; the next `replicator run` resumes from it"
            )
            raise
        with lock:
            # finish a half-done commit first, or its roll-forward would undo this move
            current = zone.recover()
            if current.position is not None:
                _check_same_kind(current.position, position)
            if current.snapshot.active:
                # its queue names tables as the stream stands at the checkpoint: a replay
                # re-takes the renames before it (a swap followed twice reads the wrong table)
                # and rewinds the schema history they are looked up in (a table renamed
                # since is not found there, and its snapshot ends early)
                left = ", ".join(current.snapshot.tables[:5])
                raise ConfigError(
                    f"a snapshot is under way ({len(current.snapshot.tables)} tables to read: "
                    f"{left}{', ...' if len(current.snapshot.tables) > 5 else ''}): its "
                    "tables are named as of the checkpoint, which moving it would undo",
                    hint="let the snapshot finish first (`replicator status` shows it), "
                    "then move the checkpoint; ask for the tables again afterwards with "
                    "`replicator snapshot` if they need it",
                )
            _check_no_skip_undone(zone.store, position)
            # the rest stays: prepared XA still waits for its outcome (and the filters the
            # last run took are still compared at the next start)
            zone.checkpoints.save(
                dataclasses.replace(
                    current,
                    position=position,
                    committed_at=now_iso(),
                    moved=True,
                    # what lands again before the old position is marked as a replay
                    replay_until=current.replay_until or current.position,
                )
            )
    except ReplicatorError as exc:
        _fail(exc)
    click.echo(f"checkpoint set to {position.describe()}")  # position is set once here
    for name in current.xa_pending:
        click.echo(f"prepared XA transaction still held (lands at its XA COMMIT): {name}")


def _check_no_skip_undone(store: Store, position: StreamPosition) -> None:
    """Refuse a move back over transactions an earlier move forward skipped: they would land
    for the first time after later changes of the same rows had landed, with higher ``_seq``,
    and readers (who apply changes in ``_seq`` order, dropping what lands again) would apply
    them over the later ones."""
    from itertools import pairwise  # noqa: PLC0415 - see the imports

    from .binlog.position import is_past  # noqa: PLC0415
    from .checkpoint import position_from_json  # noqa: PLC0415
    from .landed.committed import read_manifests  # noqa: PLC0415

    for before, after in pairwise(read_manifests(store, unpublished=True).manifests):
        if not after.start_moved or after.data.get("start") is None:
            continue
        end = position_from_json(before.data["end"], str(before.path))
        start = position_from_json(after.data["start"], str(after.path))
        if is_past(start, end) and not is_past(end, start) and not is_past(position, start):
            raise ConfigError(
                f"{position.describe()} is before {start.describe()}, where batch "
                f"{after.batch} went on after a `checkpoint set` skipped the transactions from "
                f"{end.describe()} on: moved back, they would land after later changes of the "
                "same rows, and readers would apply them out of order",
                hint=f"move it to {start.describe()} or later; to land the skipped "
                "transactions, start a new landing zone (another sink.root) before them",
            )


def _moved_to(gtid: str | None, binlog_file: str | None, pos: int | None) -> StreamPosition:
    """``checkpoint set``'s options as a position, refused as the config's ``start`` would
    refuse them: an empty file name (an unset shell variable) is not "the first binlog". An
    empty GTID state is a position: none had yet, so from the server's first transaction."""
    from .binlog.position import start_position  # noqa: PLC0415 - see the imports

    if binlog_file is not None and not binlog_file.strip():
        raise ConfigError("--file is empty", hint="name a binlog file, e.g. mysql-bin.000001")
    if pos is not None and binlog_file is None:
        raise ConfigError(
            f"--pos {pos} is given without --file",
            hint="a position counts within one binlog file: give --file too",
        )
    if gtid is not None and binlog_file is not None:
        raise ConfigError("give either --gtid or --file/--pos, not both")
    found = start_position(gtid, binlog_file, 4 if pos is None else pos)
    if found is None:
        raise ConfigError("checkpoint set needs --gtid or --file/--pos")
    return found


def _check_same_kind(current: StreamPosition, moved: StreamPosition) -> None:
    """A MariaDB GTID position where the checkpoint holds a MySQL GTID set (or the other
    way round) names transactions of another kind of server: the next start could never
    find them."""
    had, given = _gtid_kind(current), _gtid_kind(moved)
    if had is not None and given is not None and had != given:
        raise ConfigError(
            f"the checkpoint holds {had} ({current.describe()}); --gtid gave {given}",
            hint="give the GTIDs in the source's own form, as `checkpoint show` prints them",
        )


def _gtid_kind(position: StreamPosition) -> str | None:
    if position.mariadb_gtid is not None:
        return "a MariaDB GTID position"
    return "a MySQL GTID set" if position.mysql_gtid is not None else None


@main.group()
def schema() -> None:
    """The schema history the landing zone keeps (every version of every table)."""


@schema.command("show")
@click.option("--config", "config_file", type=click.Path(path_type=Path), help=_WRITE_CONFIG_HELP)
@click.option("--landing", type=click.Path(path_type=Path), help=_LANDING_HELP)
@click.option("--table", help="Only tables matching this glob (db.table, e.g. 'shop.*').")
@click.option("--at", "at_gtid", help="Show the tables as of this GTID position.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def schema_show(
    config_file: Path | None,
    landing: Path | None,
    table: str | None,
    at_gtid: str | None,
    as_json: bool,
) -> None:
    """Print each table's versions: columns, and the statement and position that made them.
    Without --config or --landing: as for `status`."""
    from .binlog.position import covers, start_position  # noqa: PLC0415 - see the imports
    from .schema.show import format_text as format_schema  # noqa: PLC0415
    from .schema.show import report as schema_report  # noqa: PLC0415
    from .sink.committed_history import load_committed_history  # noqa: PLC0415
    from .targets import landing_at, resolve  # noqa: PLC0415

    try:
        target = resolve(config_file, landing, "schema show", source=False)  # never connects
        root = landing_at(target)
        history = load_committed_history(root)
        covered = None
        if at_gtid is not None:
            at = start_position(at_gtid, None)
            assert at is not None
            covered = lambda point: covers(at, point.file, point.position, point.gtid)  # noqa: E731
        data = schema_report(history, table=table, covered=covered)
    except ReplicatorError as exc:
        _fail(exc)
    click.echo(json.dumps(data, indent=2) if as_json else format_schema(data), nl=not as_json)
    if table is not None and not data["tables"]:
        names = sorted(schema_report(history, covered=covered)["tables"])
        known = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
        click.echo(
            f"no table in the schema history matches --table {table!r} (db.table, globs "
            f"allowed, case matters){f'; it has {known}' if names else ''}",
            err=True,
        )


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_SIZES = {"": 1, "b": 1, "kb": 1024, "mb": 1024**2, "gb": 1024**3}


def _seconds(text: str, option: str) -> float:
    """``90s``, ``15m``, ``12h``, ``1d``, ``2w`` or plain seconds."""
    raw = text.strip().lower()
    unit = raw[-1:] if raw[-1:] in _UNITS else "s"
    number = raw[:-1] if raw[-1:] in _UNITS else raw
    try:
        value = float(number) * _UNITS[unit]
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise ConfigError(
            f"{option} {text!r} is not a duration", hint="write e.g. 1d, 12h, 30m, 0s"
        )
    return value


def _bytes(text: str, option: str) -> int:
    """``128MB``, ``1GB``, ``512kb`` or plain bytes."""
    raw = text.strip().lower()
    number = raw.rstrip("bkmg")
    unit = raw[len(number) :]
    try:
        value = int(float(number) * _SIZES[unit])
    except (ValueError, KeyError):
        value = 0
    if value < 1024:
        raise ConfigError(
            f"{option} {text!r} is not a size of 1kb or more", hint="write e.g. 128MB, 1GB"
        )
    return value


@main.command()
@click.option("--config", "config_file", type=click.Path(path_type=Path), help=_WRITE_CONFIG_HELP)
@click.option("--landing", type=click.Path(path_type=Path), help=_WRITE_LANDING_HELP)
@click.option("--older-than", help="Only batches committed this long ago (default: config, 1d).")
@click.option("--target-size", help="Merged files grow to about this size (default: 128MB).")
@click.option("--retention", help="Delete superseded files this long after (default: 1d).")
def compact(
    config_file: Path | None,
    landing: Path | None,
    older_than: str | None,
    target_size: str | None,
    retention: str | None,
) -> None:
    """Merge small committed files of each table into few large ones (docs/operations.md).
    Without --config or --landing: as for `status`."""
    from .sink.compaction import Settings, run_compaction  # noqa: PLC0415 - see the imports
    from .sink.landing import FaultInjector  # noqa: PLC0415
    from .sink.stores import landing_store  # noqa: PLC0415
    from .targets import landing_at, resolve  # noqa: PLC0415

    try:
        target = resolve(config_file, landing, "compact", source=False)  # it never connects
        landing_at(target)  # an existing landing zone, never a new one at a mistaken path
        config = target.config
        chosen = config.sink.compaction
        settings = Settings(
            older_than=chosen.older_than
            if older_than is None
            else _seconds(older_than, "--older-than"),
            target_bytes=chosen.target_bytes
            if target_size is None
            else _bytes(target_size, "--target-size"),
            retention=chosen.retention if retention is None else _seconds(retention, "--retention"),
            compression=config.sink.compression,
            row_group_rows=config.sink.row_group_rows,
        )
        store = landing_store(config.sink)
        result = run_compaction(
            store,
            settings,
            FaultInjector.from_env(),
            lease_seconds=config.sink.object_store.lease_seconds,
        )
    except ReplicatorError as exc:
        _fail(exc)
    except OSError as exc:
        _fail(
            SinkError(
                f"compaction of {config.sink.root} failed: {exc}",
                hint="nothing half-done is committed; run it again",
            )
        )
    click.echo(result.describe())


main.add_command(materialize)


if __name__ == "__main__":  # pragma: no cover
    main()
