"""The preflight rules: facts about a source in, findings with exact fixes out. No I/O.

``evaluate`` runs one function per concern over ``PreflightFacts`` (gathered by
``source.preflight``) and returns findings in a fixed order. Each finding says what was found,
what it costs the landing zone (what Spark sees), and the fix: the SQL to run now and the
``[mysqld]`` line that keeps it across restarts, or another action when no setting cures it.

Settings and their meaning (MySQL 8.4 "Binary Logging Options and Variables",
https://dev.mysql.com/doc/refman/8.4/en/replication-options-binary-log.html; MariaDB
"Replication and Binary Log System Variables",
https://mariadb.com/kb/en/replication-and-binary-log-system-variables/):

* ``binlog_format``: only ROW writes row events; STATEMENT and MIXED log SQL text.
* ``binlog_row_image``: FULL logs every column in both images; MINIMAL logs the key in the
  before image and only changed columns in the after image; NOBLOB leaves out unchanged
  BLOB/TEXT/JSON columns; MariaDB 11.4's FULL_NODUP logs a full before image and only the
  changed columns after it.
* ``binlog_row_metadata`` (MySQL 8.0.1+, MariaDB 10.5+): FULL puts column names, ENUM/SET
  labels, primary keys and charsets in each TABLE_MAP; MINIMAL only signedness, charsets and
  geometry types; NO_LOG (MariaDB's default) none.
* ``binlog_row_value_options=PARTIAL_JSON`` (MySQL 8.0.3+): JSON updates are logged as diffs
  (PARTIAL_UPDATE_ROWS) against the before image.
* privileges: COM_BINLOG_DUMP and COM_REGISTER_SLAVE need REPLICATION SLAVE; SHOW BINARY LOGS and
  SHOW MASTER/BINLOG STATUS need REPLICATION CLIENT (MariaDB 10.5+: BINLOG MONITOR, of which
  REPLICATION CLIENT became an alias); SHOW SLAVE HOSTS needs REPLICATION MASTER ADMIN on MariaDB
  10.5.2+ (https://mariadb.com/kb/en/grant/#global-privileges) and REPLICATION SLAVE elsewhere.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal

from .binlog_probe import ProbeResult
from .grants import Grants
from .server_info import ServerInfo

__all__ = [
    "Finding",
    "PreflightFacts",
    "ReplicaHost",
    "Severity",
    "evaluate",
    "human_duration",
]

Severity = Literal["error", "warning", "ok"]

DAY: Final = 86400.0
MAX_SERVER_ID: Final = 2**32 - 1
SHORT_RETENTION: Final = DAY  # less than this: warn that an outage can outlive the binlogs
RECOMMENDED_RETENTION_DAYS: Final = 7


@dataclass(frozen=True, slots=True)
class Finding:
    """One check's result. ``sql`` and ``config`` are exact text to run / paste."""

    severity: Severity
    check: str
    found: str
    sql: str = ""  # statements that fix it now, each ending in ';'
    config: str = ""  # lines for the [mysqld] section of my.cnf, keeping the fix
    action: str = ""  # any other step: restart, replicator option, upgrade


@dataclass(frozen=True, slots=True)
class ReplicaHost:
    """One row of SHOW SLAVE HOSTS / SHOW REPLICAS."""

    server_id: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class PreflightFacts:
    """Everything the rules look at, gathered once from the server."""

    server: ServerInfo
    grants: Grants
    replicas: tuple[ReplicaHost, ...] | None  # None: listing them failed
    replica_statement: str  # the statement that lists them on this server
    replicas_denied: bool  # ... failed for lack of a privilege
    dump_threads: tuple[str, ...]  # client hosts of Binlog Dump threads we can see
    oldest_binlog: ProbeResult | None  # None: not probed (binlog off)
    server_now: float  # UNIX_TIMESTAMP() on the server
    our_server_id: int
    checkpoint_age_seconds: float | None
    # the name our own running daemon registered with (its landing zone's lock); None: unknown
    own_replica_host: str | None = None
    # (database, table) of replicated tables whose database name holds a "." (cannot land)
    unlandable: tuple[tuple[str, str], ...] = ()


def human_duration(seconds: float) -> str:
    """``3 d 4 h``, ``2 h 5 min``, ``40 s``."""
    seconds = max(0.0, seconds)
    if seconds >= DAY:
        days, rest = divmod(int(seconds), int(DAY))
        hours = rest // 3600
        return f"{days} d {hours} h" if hours else f"{days} d"
    if seconds >= 3600:
        hours, rest = divmod(int(seconds), 3600)
        minutes = rest // 60
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    if seconds >= 60:
        return f"{int(seconds) // 60} min"
    return f"{seconds:.0f} s"


def _set_global(name: str, value: str) -> str:
    return f"SET GLOBAL {name} = '{value}';"


def check_log_bin(facts: PreflightFacts) -> Finding:
    server = facts.server
    if server.log_bin:
        end = f", ends at {server.binlog_end}" if server.binlog_end else ""
        files = server.binlog_files
        count = f", {len(files)} file(s) of {_size(sum(f.size for f in files))}" if files else ""
        return Finding("ok", "log_bin", f"binary log is on{end}{count}")
    return Finding(
        "error",
        "log_bin",
        "the binary log is off: there is nothing to replicate",
        config="log_bin = mysql-bin",
        action="the binary log cannot be switched on at run time: add the line (and remove "
        "skip-log-bin / disable-log-bin if present), then restart the server",
    )


def check_binlog_format(facts: PreflightFacts) -> Finding:
    value = facts.server.binlog_format
    if value == "ROW":
        return Finding("ok", "binlog_format", "binlog_format is ROW")
    what = f"binlog_format is {value}" if value else "binlog_format is unknown"
    return Finding(
        "error",
        "binlog_format",
        f"{what}: changes are logged as SQL statements, which cannot be decoded into row "
        "changes; only ROW format writes row events",
        sql=_set_global("binlog_format", "ROW"),
        config="binlog_format = ROW",
        action="SET GLOBAL applies to new connections only: reconnect (or restart) the "
        "applications so their sessions log rows",
    )


def check_row_image(facts: PreflightFacts) -> Finding:
    value = facts.server.binlog_row_image
    if value == "FULL":
        return Finding("ok", "binlog_row_image", "binlog_row_image is FULL")
    lost = {
        "MINIMAL": "updates log only the changed columns and deletes only the primary key, "
        "so in the landing zone unchanged columns of updates and the non-key columns of "
        "deletes are null and named in the row's _absent list, and _before holds only the "
        "key; Spark must merge with earlier changes to rebuild rows (a column no change "
        "carried stays unknown), and cannot apply changes of tables without a primary key",
        "NOBLOB": "unchanged BLOB/TEXT/JSON columns are left out of updates and deletes, so "
        "Spark sees them as null in those rows (named in the row's _absent list)",
        "FULL_NODUP": "after images hold only the changed columns, so update rows in the "
        "landing zone carry null for every unchanged column (named in the row's _absent list)",
    }.get(value or "", "the row images may be incomplete")
    return Finding(
        "warning",
        "binlog_row_image",
        f"binlog_row_image is {value or 'unknown'}: {lost}",
        sql=_set_global("binlog_row_image", "FULL"),
        config="binlog_row_image = FULL",
    )


def check_row_metadata(facts: PreflightFacts) -> Finding:
    value = facts.server.binlog_row_metadata
    if value == "FULL":
        return Finding(
            "ok",
            "binlog_row_metadata",
            "binlog_row_metadata is FULL: column names, ENUM/SET labels and keys travel in "
            "the binlog",
        )
    if value is None:
        return Finding(
            "warning",
            "binlog_row_metadata",
            f"{facts.server.label} cannot log row metadata: column names and ENUM/SET labels "
            "come from information_schema (today's schema, not the one the event was "
            "written with)",
            action="upgrade to MySQL 8.0 or MariaDB 10.5 or later for binlog_row_metadata",
        )
    extra = " (NO_LOG: signedness and charsets too)" if value == "NO_LOG" else ""
    return Finding(
        "warning",
        "binlog_row_metadata",
        f"binlog_row_metadata is {value}: column names and ENUM/SET labels{extra} come from "
        "information_schema when replicator reads the event, so binlog written before an "
        "ALTER TABLE is labelled with today's names, and the account needs SELECT on the tables",
        sql=_set_global("binlog_row_metadata", "FULL"),
        config="binlog_row_metadata = FULL",
    )


def check_row_value_options(facts: PreflightFacts) -> Finding | None:
    server = facts.server
    if server.is_mariadb or server.binlog_row_value_options is None:
        return None  # MySQL 8.0.3+ only
    if "PARTIAL_JSON" not in server.binlog_row_value_options:
        return Finding(
            "ok", "binlog_row_value_options", "binlog_row_value_options is empty (whole JSON)"
        )
    if server.binlog_row_image == "FULL":
        return Finding(
            "ok",
            "binlog_row_value_options",
            "PARTIAL_JSON with a FULL row image: JSON updates arrive as diffs and are applied "
            "to the full before image",
        )
    return Finding(
        "error",
        "binlog_row_value_options",
        f"binlog_row_value_options is PARTIAL_JSON with binlog_row_image "
        f"{server.binlog_row_image}: JSON updates are logged as diffs against a before image "
        "the binlog does not hold, so the updated documents cannot be reconstructed",
        sql="SET GLOBAL binlog_row_value_options = '';",
        config="binlog_row_value_options = ''",
        action="or set binlog_row_image = FULL; SET GLOBAL affects new connections only",
    )


def check_gtid(facts: PreflightFacts) -> Finding:
    server = facts.server
    if server.is_mariadb:
        strict = {True: "ON", False: "OFF", None: "unknown"}[server.gtid_strict_mode]
        return Finding(
            "ok",
            "gtid",
            f"MariaDB GTIDs are always on: gtid_binlog_pos = {server.gtid_binlog_pos or '(empty)'}"
            f", gtid_strict_mode = {strict}",
        )
    mode = server.gtid_mode
    if mode == "ON":
        return Finding(
            "ok", "gtid", f"gtid_mode is ON: gtid_executed = {server.gtid_executed or '(empty)'}"
        )
    if mode is None:
        return Finding(
            "warning",
            "gtid",
            f"{server.label} has no GTIDs: _gtid is null and resume works from file/position only",
            action="upgrade to MySQL 5.7 or later and turn gtid_mode ON",
        )
    return Finding(
        "warning",
        "gtid",
        f"gtid_mode is {mode}: _gtid is null for anonymous transactions and resume works from "
        "file/position only, which does not survive a failover to another source",
        sql="\n".join(
            (
                "SET GLOBAL enforce_gtid_consistency = ON;",
                "SET GLOBAL gtid_mode = OFF_PERMISSIVE;",
                "SET GLOBAL gtid_mode = ON_PERMISSIVE;",
                "-- wait until SHOW STATUS LIKE 'Ongoing_anonymous_transaction_count' shows 0",
                "SET GLOBAL gtid_mode = ON;",
            )
        ),
        config="gtid_mode = ON\nenforce_gtid_consistency = ON",
    )


def check_checksum(facts: PreflightFacts) -> Finding:
    value = facts.server.binlog_checksum
    if value == "CRC32":
        return Finding("ok", "binlog_checksum", "binlog_checksum is CRC32: every event verified")
    if value is None:
        return Finding(
            "warning",
            "binlog_checksum",
            f"{facts.server.label} writes no event checksums: only the TCP checksum protects "
            "the stream",
            action="upgrade to a server with binlog_checksum (MySQL 5.6, MariaDB 5.3 or later)",
        )
    return Finding(
        "warning",
        "binlog_checksum",
        f"binlog_checksum is {value}: events carry no CRC32, so only the TCP checksum "
        "(16 bits) protects the stream against corruption",
        sql=_set_global("binlog_checksum", "CRC32"),
        config="binlog_checksum = CRC32",
    )


def check_filters(facts: PreflightFacts) -> Finding:
    server = facts.server
    if not server.binlog_do_db and not server.binlog_ignore_db:
        return Finding("ok", "binlog_filters", "no binlog_do_db / binlog_ignore_db filters")
    parts = []
    if server.binlog_do_db:
        parts.append(f"binlog_do_db = {server.binlog_do_db}")
    if server.binlog_ignore_db:
        parts.append(f"binlog_ignore_db = {server.binlog_ignore_db}")
    return Finding(
        "warning",
        "binlog_filters",
        f"the source filters its binary log ({'; '.join(parts)}): changes it filters out "
        "never reach the binlog, so no replica can see them",
        action="remove binlog_do_db / binlog_ignore_db from [mysqld] and restart the server "
        "if those databases should land too",
    )


def check_table_names(facts: PreflightFacts) -> Finding | None:
    """Replicated tables in a database whose name holds a ``.``: the landing zone names a
    table ``database.table``, and readers split that at its first ``.``, so ``run`` stops
    at the first of their statements or rows (``pipeline.lifecycle.check_name``)."""
    found = facts.unlandable
    if not found:
        return None
    shown = ", ".join(f"`{db}`.`{t}`" for db, t in found[:5])
    more = f" and {len(found) - 5} more" if len(found) > 5 else ""
    globs = ", ".join(f"'{db.replace('.', '?')}.*'" for db in sorted({db for db, _ in found}))
    return Finding(
        "error",
        "table_names",
        f"replicated tables in a database whose name holds a '.' ({shown}{more}): the landing "
        "zone names a table database.table, read back at the first '.', so `replicator run` "
        "stops (exit 4) at the first of their statements or rows",
        action=f"leave them out with filters.exclude: [{globs}] (a '?' matches the '.'), or "
        "rename the database",
    )


def _free_server_id(facts: PreflightFacts) -> int:
    used = {facts.server.server_id, *(r.server_id for r in facts.replicas or ())}
    candidate = facts.our_server_id if facts.our_server_id > 0 else 65000
    while candidate in used:
        candidate = candidate + 1 if candidate < MAX_SERVER_ID else 1
    return candidate


def check_server_ids(facts: PreflightFacts) -> Finding:
    source_id = facts.server.server_id
    ours = facts.our_server_id
    if source_id == 0:
        return Finding(
            "error",
            "server_id",
            "the source's server_id is 0: the server refuses replicas",
            sql="SET GLOBAL server_id = 1;",
            config="server_id = 1",
            action="use any id not taken by another server or replica of this topology",
        )
    if ours == 0 or ours > MAX_SERVER_ID:
        return Finding(
            "error",
            "server_id",
            f"replicator's server_id {ours} is not a valid replica id (1 .. {MAX_SERVER_ID})",
            action=f"--server-id {_free_server_id(facts)} (server_id in the config)",
        )
    if ours == source_id:
        return Finding(
            "error",
            "server_id",
            f"replicator's server_id {ours} equals the source's: a replica must have an id of "
            "its own",
            action=f"--server-id {_free_server_id(facts)} (server_id in the config)",
        )
    return Finding("ok", "server_id", f"source server_id {source_id}, replicator's {ours}")


def check_replica_clash(facts: PreflightFacts) -> Finding:
    ours = facts.our_server_id
    visible = (
        f"; {len(facts.dump_threads)} binlog dump connection(s) visible"
        if facts.dump_threads
        else ""
    )
    if facts.replicas is None:
        return Finding(
            "warning",
            "replica_server_id",
            f"cannot list connected replicas ({facts.replica_statement} failed), so a clash "
            f"with another replica using server_id {ours} goes unnoticed{visible}",
            action="grant the privilege shown under privileges to enable this check",
        )
    clash = [r for r in facts.replicas if r.server_id == ours]
    # Our own daemon is excused by its registration alone: it registers under a name with a
    # random token that only that process sends, and writes the name into its landing zone's
    # lock (``sink.lock``). The source keeps one registration per server_id (a newer replica
    # with the id replaces the older one's), so another replica with our id shows under its
    # own name, never under ours: this cannot hide a real clash. (Going by client host or
    # user could: a second replicator on the same machine is the most common clash.)
    own = [r for r in clash if facts.own_replica_host and r.host == facts.own_replica_host]
    others = [r for r in clash if r not in own]
    if others:
        where = ", ".join(f"{r.host or '?'}:{r.port}" for r in others)
        unknown_own = (
            ""
            if facts.own_replica_host
            else "; if it is this replicator's own running daemon, nothing to do (`replicator "
            "check --config` with its config tells)"
        )
        return Finding(
            "error",
            "replica_server_id",
            f"a replica with server_id {ours} is connected ({where}): two replicas with one id "
            "disconnect each other in a loop (the source drops the older one's dump when the "
            f"newer connects){unknown_own}",
            action=f"--server-id {_free_server_id(facts)} (server_id in the config)",
        )
    if own:
        return Finding(
            "ok",
            "replica_server_id",
            f"server_id {ours} is in use by this landing zone's own running replicator "
            f"(registered as {own[0].host}); no other replica uses it{visible}",
        )
    ids = ", ".join(str(r.server_id) for r in facts.replicas) or "none"
    return Finding(
        "ok",
        "replica_server_id",
        f"no connected replica uses server_id {ours} (registered replicas: {ids}){visible}",
    )


@dataclass(frozen=True, slots=True)
class _Privilege:
    name: str  # what to GRANT
    accepted: frozenset[str]  # any of these on *.* is enough
    purpose: str
    severity: Severity  # when missing
    evidence: bool | None  # what using it showed: True worked, False refused, None not tried


def _privileges(facts: PreflightFacts) -> list[_Privilege]:
    server = facts.server
    probe = facts.oldest_binlog
    slave_evidence: bool | None = None
    if probe is not None and probe.denied:
        slave_evidence = False
    elif probe is not None and probe.timestamp is not None:
        slave_evidence = True
    monitor_evidence: bool | None = None
    if server.denied:
        monitor_evidence = False
    elif server.log_bin and server.binlog_files is not None:
        monitor_evidence = True
    new_mariadb = server.is_mariadb and server.version >= (10, 5, 2)
    monitor = "BINLOG MONITOR" if new_mariadb else "REPLICATION CLIENT"
    specs = [
        _Privilege(
            "REPLICATION SLAVE",
            frozenset({"REPLICATION SLAVE"}),
            "to read the binary log (COM_BINLOG_DUMP) and register as a replica",
            "error",
            slave_evidence,
        ),
        _Privilege(
            monitor,
            frozenset({"REPLICATION CLIENT", "BINLOG MONITOR", "SUPER"}),
            "for SHOW BINARY LOGS and the binlog status (end of binlog, retention, lag)",
            "error",
            monitor_evidence,
        ),
    ]
    if new_mariadb:
        listed: bool | None = None
        if facts.replicas is not None:
            listed = True
        elif facts.replicas_denied:
            listed = False
        specs.append(
            _Privilege(
                "REPLICATION MASTER ADMIN",
                frozenset({"REPLICATION MASTER ADMIN"}),
                "for SHOW SLAVE HOSTS (the replica server_id clash check)",
                "warning",
                listed,
            )
        )
    return specs


def check_privileges(facts: PreflightFacts) -> list[Finding]:
    grants = facts.grants
    findings: list[Finding] = []
    via_roles = (
        f"; roles granted: {', '.join(grants.roles)} (make the one holding it the default "
        "role, or grant it directly)"
        if grants.roles
        else ""
    )
    for spec in _privileges(facts):
        held = spec.evidence if spec.evidence is not None else grants.has_any(spec.accepted)
        check = f"privilege {spec.name}"
        if held:
            findings.append(Finding("ok", check, f"{grants.account} has {spec.name}"))
            continue
        findings.append(
            Finding(
                spec.severity,
                check,
                f"{grants.account} lacks {spec.name}, needed {spec.purpose}{via_roles}",
                sql=f"GRANT {spec.name} ON *.* TO {grants.grantee};",
            )
        )
    findings.append(_check_select(facts, via_roles))
    return findings


def _check_select(facts: PreflightFacts, via_roles: str) -> Finding:
    grants = facts.grants
    check = "privilege SELECT"
    if grants.has_any({"SELECT"}):
        return Finding("ok", check, f"{grants.account} has SELECT on *.* for schema lookups")
    names_in_binlog = facts.server.binlog_row_metadata == "FULL"
    if grants.select_scopes:
        return Finding(
            "warning",
            check,
            f"{grants.account} has SELECT only on {', '.join(grants.select_scopes)}: schema "
            "lookups (information_schema) and snapshots see only those tables",
            sql=f"GRANT SELECT ON *.* TO {grants.grantee};",
            action="or grant SELECT on each replicated database: GRANT SELECT ON `db`.* TO "
            f"{grants.grantee};",
        )
    return Finding(
        "warning" if names_in_binlog else "error",
        check,
        f"{grants.account} has no SELECT: information_schema shows it no tables, so "
        + (
            "snapshots cannot read them"
            if names_in_binlog
            else "column names and ENUM/SET labels cannot be looked up (binlog_row_metadata is "
            f"{facts.server.binlog_row_metadata or 'not FULL'})"
        )
        + via_roles,
        sql=f"GRANT SELECT ON *.* TO {grants.grantee};",
        action="or grant SELECT on each replicated database: GRANT SELECT ON `db`.* TO "
        f"{grants.grantee};",
    )


def _retention_fix(facts: PreflightFacts, wanted_seconds: float) -> tuple[str, str]:
    days = max(RECOMMENDED_RETENTION_DAYS, math.ceil(wanted_seconds / DAY))
    if facts.server.binlog_expire_logs_seconds is not None:
        seconds = int(days * DAY)
        return (
            f"SET GLOBAL binlog_expire_logs_seconds = {seconds};",
            f"binlog_expire_logs_seconds = {seconds}",
        )
    return (f"SET GLOBAL expire_logs_days = {days};", f"expire_logs_days = {days}")


def check_retention(facts: PreflightFacts) -> Finding | None:
    server = facts.server
    if not server.log_bin:
        return None
    expire = server.binlog_expire_seconds
    keeps = f"binlogs expire after {human_duration(expire)}" if expire else "binlogs never expire"
    probe = facts.oldest_binlog
    oldest_age: float | None = None
    if probe is not None and probe.timestamp is not None:
        oldest_age = max(0.0, facts.server_now - probe.timestamp)
        keeps += f"; the oldest ({probe.file}) starts {human_duration(oldest_age)} ago"
    elif probe is not None:
        unknown = f"{keeps}; the start of the oldest binlog is unknown"
        return Finding(
            "warning",
            "retention",
            f"{unknown} ({probe.problem or 'no answer'}): how far back the server still has "
            "the binlog cannot be told",
            action="grant REPLICATION SLAVE (see the privilege findings)"
            if probe.denied
            else "run check again; the retention is checked from the oldest binlog's first event",
        )
    age = facts.checkpoint_age_seconds
    if age is None:
        if expire is not None and expire < SHORT_RETENTION:
            sql, config = _retention_fix(facts, RECOMMENDED_RETENTION_DAYS * DAY)
            return Finding(
                "warning",
                "retention",
                f"{keeps}: a replicator outage longer than {human_duration(expire)} loses its "
                "position for good",
                sql=sql,
                config=config,
            )
        return Finding("ok", "retention", keeps)
    checkpoint = f"the checkpoint is {human_duration(age)} old"
    if oldest_age is not None and oldest_age < age:
        sql, config = _retention_fix(facts, 2 * age)
        return Finding(
            "error",
            "retention",
            f"{checkpoint} but {keeps}: the server has purged binlogs written after the "
            "checkpoint, so resuming would skip transactions",
            sql=sql,
            config=config,
            action="start over from a new snapshot and reset the checkpoint; then raise the "
            "retention so it cannot happen again",
        )
    if expire is not None and age >= expire:
        sql, config = _retention_fix(facts, 2 * age)
        return Finding(
            "error",
            "retention",
            f"{checkpoint} and {keeps}: the server purges the binlog holding the checkpoint "
            "at its next rotation; raise the retention now and resume",
            sql=sql,
            config=config,
        )
    return Finding("ok", "retention", f"{checkpoint}; {keeps}")


CHECKS: Final[tuple[Callable[[PreflightFacts], Finding | list[Finding] | None], ...]] = (
    check_log_bin,
    check_binlog_format,
    check_row_image,
    check_row_metadata,
    check_row_value_options,
    check_gtid,
    check_checksum,
    check_filters,
    check_table_names,
    check_server_ids,
    check_replica_clash,
    check_privileges,
    check_retention,
)


def evaluate(facts: PreflightFacts) -> tuple[Finding, ...]:
    """Every check's findings, in a fixed order."""
    findings: list[Finding] = []
    for check in CHECKS:
        result = check(facts)
        if result is None:
            continue
        if isinstance(result, Finding):
            findings.append(result)
        else:
            findings.extend(result)
    return tuple(findings)


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"
