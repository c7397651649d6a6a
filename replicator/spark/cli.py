"""``replicator materialize``: the landing zone's change files to current-state Parquet tables.

``materialize`` is a ``click.Command`` for ``replicator.cli`` to register. It imports pyspark
only when it runs, so the rest of replicator works without it; without pyspark it exits 2
saying ``pip install 'replicator[spark]'``. Exit codes (docs/spark.md): 0 done, 2 bad arguments
(landing zone missing, a malformed ``--key``, options that do not match the existing output,
pyspark or Java missing), 4 the changes cannot be applied exactly (the error names the row
and the fix) or the output was built from another landing zone (one made again at the same
path: both ids are named), 1 anything else (a Spark failure, another run holding the output
directory).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..errors import ConfigError, ReplicatorError
from ..landed.contract import MANIFESTS
from ..storage import is_url

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ..landed.options import MaterializeOptions, TableResult

__all__ = ["materialize", "parse_keys"]

_INSTALL_HINT = "pip install 'replicator[spark]' (Spark also needs Java 17)"
_DELTA_HINT = "pip install 'replicator[delta]'"


def parse_keys(values: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """``--key db.t=a,b`` options to ``{"db.t": ("a", "b")}``; ``db.t=`` means no key."""
    keys: dict[str, tuple[str, ...]] = {}
    for value in values:
        table, sep, columns = value.partition("=")
        names = tuple(c.strip() for c in columns.split(",") if c.strip())
        if not sep or "." not in table.strip():
            raise ConfigError(
                f"--key {value!r} is not DB.TABLE=COLUMN[,COLUMN...]",
                hint="e.g. --key shop.orders=id, or --key shop.log= for whole-row identity",
            )
        keys[table.strip()] = names
    return keys


@contextlib.contextmanager
def _session(master: str) -> Iterator[SparkSession]:
    """The active SparkSession (e.g. under spark-submit), or a new one stopped at the end."""
    try:
        from pyspark.sql import SparkSession  # noqa: PLC0415 - pyspark is optional
    except ImportError as exc:
        raise ConfigError("pyspark is not installed", hint=_INSTALL_HINT) from exc
    active = SparkSession.getActiveSession()
    if active is not None:
        yield active
        return
    try:
        spark = (
            SparkSession.builder.master(master)
            .appName("replicator-materialize")
            .config("spark.ui.showConsoleProgress", "false")
            .getOrCreate()
        )
    except Exception as exc:  # the JVM did not start: no Java, bad --master
        raise ConfigError(
            f"cannot start Spark (--master {master}): {str(exc).splitlines()[0]}",
            hint="install Java 17 (or set JAVA_HOME) and check --master",
        ) from exc
    spark.sparkContext.setLogLevel("ERROR")
    try:
        yield spark
    finally:
        spark.stop()


def _describe(result: TableResult) -> str:
    text = (
        f"{result.table}: {result.action}, {result.batches} batches, "
        f"{result.changes} changes -> {result.rows} rows (up to batch {result.last_batch})"
    )
    if result.detail:
        text += f"; {result.detail}"
    if result.unmatched:
        text += f"; {result.unmatched} deletes of rows not in the state ignored"
    if result.waiting is not None:
        text += f"; batch {result.waiting} is committed but not yet published (next run)"
    return text


_S3A_MISSING = (
    'No FileSystem for scheme "s3a"',
    "org.apache.hadoop.fs.s3a.S3AFileSystem not found",
)


def spark_failure(exc: BaseException) -> tuple[str, str]:
    """What a failed Spark job says, as one line and a hint. A Py4J error's own text is
    "An error occurred while calling o27.parquet" and a Java stack: the line shown is the
    innermost Java cause (class and message), which names what went wrong, and a missing
    S3A connector (the commonest cause on an ``s3://`` landing zone) gets its fix."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    cause = _java_root_cause(exc)
    message = first if cause is None or cause in first else f"{first}: {cause}"
    if any(marker in (cause or text) for marker in _S3A_MISSING):
        return message, (
            "Spark has no S3A connector: start it with the hadoop-aws package of its Hadoop "
            "version (Spark 3.5: --packages org.apache.hadoop:hadoop-aws:3.3.4, or "
            "spark.jars.packages) and the fs.s3a settings for the store (docs/spark.md, "
            "Reading an S3 landing zone)"
        )
    return message, ""


def _java_root_cause(exc: BaseException) -> str | None:
    """``Class: message`` of the innermost cause of a Py4JJavaError; None for others."""
    java = getattr(exc, "java_exception", None)
    if java is None:
        return None
    try:
        while java.getCause() is not None and java.getCause() != java:
            java = java.getCause()
        return f"{java.getClass().getName()}: {java.getMessage()}"
    except Exception:  # the JVM is gone: the Python text is all there is
        return None


def _notes(exc: BaseException) -> None:
    """What ``materialize`` adds to a table's failure: the table, and the others' fate."""
    for note in getattr(exc, "__notes__", ()):
        click.echo(f"error: {note}", err=True)


def _delta() -> Any:
    try:
        from ..delta import materialize as delta  # noqa: PLC0415 - optional
    except ImportError as exc:
        raise ConfigError(f"deltalake is not installed ({exc})", hint=_DELTA_HINT) from exc
    return delta


def _optimize(out: Path | str, tables: Sequence[str], retention_hours: float) -> None:
    for done in _delta().optimize_delta(
        out, tables=tables or None, retention_hours=retention_hours
    ):
        click.echo(
            f"{done.table}: optimized, {done.files_removed} files -> {done.files_added}; "
            f"{done.vacuumed} files of old versions vacuumed"
        )


def _follow(
    landing: Path | str,
    out: Path | str,
    tables: Sequence[str],
    options: MaterializeOptions,
    interval: float,
) -> None:
    """``--follow`` until SIGTERM or SIGINT: the commit under way ends first."""
    stop = threading.Event()
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda *_: stop.set())
    _delta().follow_delta(
        landing,
        out,
        tables=list(tables) or None,
        options=options,
        interval=interval,
        stop=stop,
        report=lambda result: click.echo(_describe(result)),
    )


def _run(
    landing: Path | str,
    out: Path | str,
    tables: Sequence[str],
    master: str,
    options: MaterializeOptions,
    output_format: str = "parquet",
) -> list[TableResult]:
    if output_format == "delta":
        found: list[TableResult] = _delta().materialize_delta(
            landing, out, tables=list(tables) or None, options=options
        )
        return found
    with _session(master) as spark:
        from .materialize import materialize as run  # noqa: PLC0415 - imports pyspark

        return run(spark, landing, out, tables=list(tables) or None, options=options)


@click.command("materialize")
@click.option(
    "--landing",
    required=True,
    help="The landing zone (sink.root of `replicator run`): a directory, or s3://bucket/prefix "
    "(credentials and endpoint from AWS_* variables, the profile or the role; Spark needs "
    "hadoop-aws: docs/spark.md).",
)
@click.option(
    "--out",
    "out_arg",
    required=True,
    help="Output directory: <out>/<db>/<table>/ current-state Parquet or Delta tables; "
    "--format delta also takes s3://bucket/prefix.",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["parquet", "delta"]),
    default="parquet",
    show_default=True,
    help="parquet: a Spark job writes Parquet directories; delta: Delta Lake tables, kept "
    "up to date by MERGE with delta-rs (no Spark, no Java).",
)
@click.option(
    "--tables",
    multiple=True,
    metavar="DB.T",
    help="Tables (names or globs; repeat or comma-separate). Default: all.",
)
@click.option(
    "--master", default="local[*]", show_default=True, help="Spark master URL (--format parquet)."
)
@click.option(
    "--key",
    "keys",
    multiple=True,
    metavar="DB.T=COL[,COL]",
    help="Identity columns of a table whose files do not record its primary key "
    "(DB.T= for whole rows).",
)
@click.option("--keep-metadata", is_flag=True, help="Keep _op, _seq, _gtid, _ts, ... per row.")
@click.option(
    "--allow-unknown",
    is_flag=True,
    help="Columns no row image carried (MINIMAL images) become null, listed in _absent.",
)
@click.option(
    "--assume-stable-keys",
    is_flag=True,
    help="Files without _before_key: assume updates never change the primary key.",
)
@click.option("--full-refresh", is_flag=True, help="Rebuild from every manifest.")
@click.option(
    "--parallel",
    type=click.IntRange(min=1),
    default=None,
    help="--format parquet: tables brought up to date at once, each submitting its own Spark "
    "jobs (1: one after another).  [default: 4]",
)
@click.option(
    "--follow",
    is_flag=True,
    help="--format delta: keep running, applying each batch as it lands, until SIGTERM.",
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.05),
    default=0.5,
    show_default=True,
    help="--follow: seconds between looks for new batches.",
)
@click.option(
    "--deletion-vectors/--no-deletion-vectors",
    default=None,
    help="--format delta: apply a keyed table's batches by marking replaced rows deleted "
    "(Delta deletion vectors) instead of rewriting their files. Default: on for tables built "
    "from now on. Off for readers that cannot apply them (delta-rs's to_pyarrow_table, "
    "pandas); a table that has them keeps them.",
)
@click.option(
    "--optimize",
    is_flag=True,
    help="--format delta: compact each table's files (Z-ordered by key) and vacuum old "
    "versions, instead of applying batches.",
)
@click.option(
    "--retention-hours",
    type=click.FloatRange(min=0),
    default=168.0,
    show_default=True,
    help="--optimize: keep the files older versions need for this long.",
)
def materialize(
    landing: str,
    out_arg: str,
    output_format: str,
    tables: tuple[str, ...],
    master: str,
    keys: tuple[str, ...],
    keep_metadata: bool,
    allow_unknown: bool,
    assume_stable_keys: bool,
    full_refresh: bool,
    parallel: int | None,
    follow: bool,
    interval: float,
    deletion_vectors: bool | None,
    optimize: bool,
    retention_hours: float,
) -> None:
    """Turn the landing zone into current-state tables (Parquet with PySpark, or Delta).

    Incremental: a re-run applies only the batches committed since the last one.
    """
    try:
        parsed = parse_keys(keys)
        root: Path | str = landing if is_url(landing) else Path(landing)
        if isinstance(root, Path) and not root.is_dir():
            raise ConfigError(
                f"landing zone {landing} is not a directory",
                hint="pass --landing the sink.root directory that `replicator run` writes",
            )
        if output_format == "parquet":
            try:
                import pyspark  # noqa: F401, PLC0415 - optional
            except ImportError as exc:
                raise ConfigError("pyspark is not installed", hint=_INSTALL_HINT) from exc
        if isinstance(root, Path) and not any((root / d).is_dir() for d in ("_state", MANIFESTS)):
            raise ConfigError(
                f"no landing zone at {root.absolute()} (no _state/ or {MANIFESTS}/ there)",
                hint="pass --landing the sink.root directory that `replicator run` writes",
            )
        from ..landed.options import MaterializeOptions  # noqa: PLC0415 - as the others: lazily

        options = MaterializeOptions(
            keep_metadata=keep_metadata,
            allow_unknown=allow_unknown,
            assume_stable_keys=assume_stable_keys,
            keys=parsed,
            full_refresh=full_refresh,
            deletion_vectors=deletion_vectors,
            **({} if parallel is None else {"parallel": parallel}),
        )
        names = [n.strip() for value in tables for n in value.split(",") if n.strip()]
        out: Path | str = out_arg if is_url(out_arg) else Path(out_arg)
        if isinstance(out, str) and output_format != "delta":
            raise ConfigError(
                f"--out {out} is not a directory: the Parquet output is written to one",
                hint="pass a directory, or --format delta for an object store",
            )
        if deletion_vectors is not None and output_format != "delta":
            raise ConfigError(
                "--[no-]deletion-vectors needs --format delta", hint="add --format delta"
            )
        if parallel is not None and output_format != "parquet":
            raise ConfigError(
                "--parallel needs --format parquet",
                hint="the Delta output brings its tables up to date one after another",
            )
        if (follow or optimize) and output_format != "delta":
            raise ConfigError(
                f"--{'follow' if follow else 'optimize'} needs --format delta",
                hint="the Parquet output has the Structured Streaming helper (docs/spark.md)",
            )
        if follow and optimize:
            raise ConfigError("--follow and --optimize are separate runs", hint="pick one")
        if optimize:
            _optimize(out, names, retention_hours)
            return
        if follow:
            _follow(root, out, names, options, interval)
            return
        results = _run(root, out, names, master, options, output_format)
    except ReplicatorError as exc:
        click.echo(f"error: {exc}", err=True)
        _notes(exc)
        sys.exit(exc.exit_code)
    except Exception as exc:  # a Spark job failed (Py4JJavaError and friends)
        message, hint = spark_failure(exc)
        click.echo(f"error: materialize failed: {message}", err=True)
        _notes(exc)
        if hint:
            click.echo(f"hint: {hint}", err=True)
        sys.exit(1)
    for result in results:
        click.echo(_describe(result))
    if not results:
        click.echo("no tables selected: the landing zone has none yet, or --tables matched none")
