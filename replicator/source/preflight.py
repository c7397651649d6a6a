"""Preflight: is this server set up so the stream can work, and if not, what exactly to change.

``run_preflight`` connects as the replication account, gathers the facts once (server
variables and binlog state via ``server_info``, the account's grants, connected replicas, the
start time of the oldest binlog via a short binlog-dump probe) and hands them to the pure rules
in ``preflight_checks``. ``format_report`` renders the findings for a terminal; ``replicator
check`` prints it and exits 0 when ``report.ok``, 3 otherwise.

Connection problems are not findings: they raise (``ServerRefusedError`` for a refused login or
an untrusted certificate, ``SourceUnavailableError`` when the server cannot be reached), since
nothing else can be checked then.

Connected replicas: MySQL 8.0.22+ ``SHOW REPLICAS``, else ``SHOW SLAVE HOSTS``
(https://dev.mysql.com/doc/refman/8.4/en/show-replicas.html, https://mariadb.com/kb/en/show-replica-hosts/);
columns Server_id, Host, Port first on every version. Only replicas that registered
(COM_REGISTER_SLAVE) are listed, so binlog dump threads in the process list are counted too;
without the PROCESS privilege the account sees only its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import textwrap
from dataclasses import dataclass
from typing import Any

import pymysql

from ..config import Config, FilterConfig, SourceConfig
from ..errors import IntegrityError
from ..storage import Store
from .binlog_probe import ProbeResult, first_event_time
from .connection import describe_source, open_connection
from .continuity import landed, prove
from .errors import ER_SPECIFIC_ACCESS_DENIED, error_code, translate_error
from .grants import read_grants
from .preflight_checks import Finding, PreflightFacts, ReplicaHost, Severity, evaluate
from .server_info import ServerInfo, server_info

__all__ = [
    "Finding",
    "PreflightReport",
    "Severity",
    "check_continuity",
    "format_report",
    "gather_facts",
    "run_preflight",
]

ER_PARSE_ERROR = 1064
QUERY_TIMEOUT = 30.0
CONTINUITY_TIMEOUT = 120.0


@dataclass(frozen=True, slots=True)
class PreflightReport:
    """The findings about one source, in check order."""

    where: str  # host:port or socket
    account: str  # CURRENT_USER()
    server: ServerInfo
    findings: tuple[Finding, ...]

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "error")

    @property
    def warnings(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "warning")

    @property
    def ok(self) -> bool:
        """True when nothing stops the stream (warnings allowed)."""
        return not self.errors


def run_preflight(
    cfg: SourceConfig,
    *,
    checkpoint_age_seconds: float | None = None,
    own_replica_host: str | None = None,
    filters: FilterConfig | None = None,
) -> PreflightReport:
    """Check the source ``cfg`` names; ``checkpoint_age_seconds``: how old our resume point is;
    ``own_replica_host``: the name our own running daemon registered with (from its landing
    zone's lock), so its registration is not taken for a server_id clash; ``filters``: which
    tables land (None: every one)."""
    facts = gather_facts(
        cfg,
        checkpoint_age_seconds=checkpoint_age_seconds,
        own_replica_host=own_replica_host,
        filters=filters,
    )
    return PreflightReport(
        where=describe_source(cfg),
        account=facts.grants.account,
        server=facts.server,
        findings=evaluate(facts),
    )


def check_continuity(config: Config, landing: Store) -> Finding:
    """``replicator check --config``: does the source continue the history the landing zone
    in ``landing`` (``config.sink``'s store) holds? The proof ``replicator run`` makes at
    start (``source.continuity``), as a finding."""
    try:
        zone = landed(landing)
        verdict = asyncio.run(
            asyncio.wait_for(
                prove(
                    config.source,
                    zone,
                    snapshot_mode=config.snapshot.mode or "",
                ),
                CONTINUITY_TIMEOUT,
            )
        )
    except IntegrityError as exc:
        return Finding("error", "continuity", str(exc.args[0]), action=exc.hint)
    except OSError as exc:
        return Finding(
            "warning",
            "continuity",
            f"the landing zone's last manifest cannot be read: {exc}",
            action="check sink.root; `replicator run` proves continuity at start",
        )
    except TimeoutError:
        return Finding(
            "warning",
            "continuity",
            f"the landing zone's last transaction could not be read back from the server "
            f"within {CONTINUITY_TIMEOUT:g} s",
            action="`replicator run` proves it at start (and stops with exit 4 if the server "
            "does not continue the landing zone's history)",
        )
    severity: Severity = "ok" if verdict.proven or zone.batch == 0 else "warning"
    return Finding(severity, "continuity", verdict.detail)


def gather_facts(
    cfg: SourceConfig,
    *,
    checkpoint_age_seconds: float | None = None,
    own_replica_host: str | None = None,
    filters: FilterConfig | None = None,
) -> PreflightFacts:
    """Read everything the checks need from the server (two connections, read-only)."""
    wants = (filters or FilterConfig()).wants
    conn = open_connection(cfg, read_timeout=QUERY_TIMEOUT)
    with contextlib.closing(conn):
        info = server_info(conn)
        grants = read_grants(conn)
        try:
            with conn.cursor() as cur:
                statement = _replica_statement(info)
                replicas, denied, statement = _replicas(cur, statement)
                dump_threads = _dump_threads(cur)
                cur.execute("SELECT UNIX_TIMESTAMP()")
                row = cur.fetchone()
                server_now = float(row[0]) if row else 0.0
                # the tables this account can see, in databases whose name holds a "."
                cur.execute(
                    "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "
                    "WHERE TABLE_SCHEMA LIKE '%.%' ORDER BY TABLE_SCHEMA, TABLE_NAME"
                )
                dotted = [(_text(db), _text(t)) for db, t in cur.fetchall()]
        except pymysql.err.MySQLError as exc:
            raise translate_error(exc, where=describe_source(cfg), account=cfg.user) from None
    # After the replica listing, so the probe's own dump thread is not counted.
    oldest: ProbeResult | None = first_event_time(cfg) if info.log_bin else None
    return PreflightFacts(
        server=info,
        grants=grants,
        replicas=replicas,
        replica_statement=statement,
        replicas_denied=denied,
        dump_threads=dump_threads,
        oldest_binlog=oldest,
        server_now=server_now,
        our_server_id=cfg.server_id,
        checkpoint_age_seconds=checkpoint_age_seconds,
        own_replica_host=own_replica_host,
        unlandable=tuple((db, t) for db, t in dotted if wants(db, t)),
    )


def _replica_statement(info: ServerInfo) -> str:
    if not info.is_mariadb and info.version >= (8, 0, 22):
        return "SHOW REPLICAS"
    return "SHOW SLAVE HOSTS"


def _replicas(cur: Any, statement: str) -> tuple[tuple[ReplicaHost, ...] | None, bool, str]:
    """(replicas or None, refused for lack of privilege, statement used)."""
    for attempt in (statement, "SHOW SLAVE HOSTS"):
        try:
            cur.execute(attempt)
        except pymysql.err.MySQLError as exc:
            code = error_code(exc)
            if code == ER_PARSE_ERROR and attempt != "SHOW SLAVE HOSTS":
                continue
            return None, code == ER_SPECIFIC_ACCESS_DENIED, attempt
        rows = cur.fetchall()
        return (
            tuple(ReplicaHost(int(r[0]), _text(r[1]), int(r[2] or 0)) for r in rows),
            False,
            attempt,
        )
    return None, False, statement


def _dump_threads(cur: Any) -> tuple[str, ...]:
    try:
        cur.execute(
            "SELECT HOST FROM information_schema.PROCESSLIST "
            "WHERE COMMAND IN ('Binlog Dump', 'Binlog Dump GTID')"
        )
    except pymysql.err.MySQLError:
        return ()
    return tuple(_text(row[0]) for row in cur.fetchall())


def _text(value: object) -> str:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    return "" if value is None else str(value)


_LABELS: dict[str, str] = {"error": "ERROR", "warning": "WARNING", "ok": "ok"}
_INDENT = " " * 10
WIDTH = 100


def _block(label: str, text: str) -> list[str]:
    lines = text.splitlines()
    head = f"{_INDENT}{label:<18}"
    pad = " " * len(head)
    return [f"{head}{lines[0]}", *(f"{pad}{line}" for line in lines[1:])]


def format_report(report: PreflightReport) -> str:
    """The report for humans: one block per finding, problems with their fixes, a verdict."""
    server = report.server
    out = [
        f"replicator check: {server.label} at {report.where} as {report.account} "
        f"(server_id {server.server_id})"
    ]
    for finding in report.findings:
        # Only the description wraps: SQL, my.cnf lines and actions stay whole to copy them.
        head = f"{_LABELS[finding.severity]:<9} {finding.check}: {finding.found}"
        out.extend(
            textwrap.wrap(
                head,
                width=WIDTH,
                subsequent_indent=_INDENT,
                break_long_words=False,
                break_on_hyphens=False,
            )
        )
        if finding.sql:
            out.extend(_block("fix now:", finding.sql))
        if finding.config:
            out.extend(_block("my.cnf [mysqld]:", finding.config))
        if finding.action:
            out.extend(_block("also:" if finding.sql or finding.config else "fix:", finding.action))
    errors, warnings = len(report.errors), len(report.warnings)
    if errors:
        verdict = (
            f"{errors} error(s), {warnings} warning(s): the stream cannot work until the "
            "errors are fixed"
        )
    elif warnings:
        verdict = f"ok with {warnings} warning(s): the stream can start"
    else:
        verdict = "ok: the stream can start"
    out.append(verdict)
    return "\n".join(out) + "\n"
