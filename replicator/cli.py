"""Command line: ``replicator dump|run|check|status|checkpoint|materialize``.

Exit codes (DESIGN.md): 0 done, 2 bad config or arguments, 3 server refused, 4 data integrity
stop, 1 anything else. Every error message says what to do next.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .dump import RowChangeFormatter, json_lines
from .errors import ConfigError, ReplicatorError
from .source.binlog_file import read_binlog_files


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
@click.option("--no-verify-checksum", is_flag=True, help="Skip CRC32 verification (not advised).")
def dump(binlog_files: tuple[Path, ...], no_verify_checksum: bool) -> None:
    """Decode row changes to JSON lines on stdout, one change per line."""
    formatter = RowChangeFormatter()
    try:
        if not binlog_files:
            raise ConfigError(
                "dump needs a source",
                hint="pass --binlog-file PATH (live servers: --config, coming with the stream)",
            )
        events = read_binlog_files(list(binlog_files), verify_checksum=not no_verify_checksum)
        out = sys.stdout
        for line in json_lines(events, formatter):
            out.write(line)
            out.write("\n")
        out.flush()
    except ReplicatorError as exc:
        sys.stdout.flush()
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    finally:
        stats = formatter.stats
        click.echo(
            f"dump: {stats.events} events, {stats.transactions} transactions, "
            f"{stats.row_changes} row changes, {stats.invalid_temporals} invalid dates as null",
            err=True,
        )


if __name__ == "__main__":  # pragma: no cover
    main()
