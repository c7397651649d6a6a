"""The preflight rules on facts built by hand, for what the local MariaDB cannot show.

MySQL-only settings (PARTIAL_JSON, gtid_mode, SHOW GRANTS with dynamic privileges), old servers
and retention arithmetic are checked here as values; the live tests run the same rules on facts
read from real servers. Also: pymysql's caching_sha2_password full authentication without TLS
needs RSA from the ``cryptography`` package; MySQL is not available here, so the RSA step is
checked against a key pair made in the test.
"""

from __future__ import annotations

import dataclasses

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from pymysql import _auth

from replicator.errors import ServerRefusedError
from replicator.source.binlog_probe import ProbeResult
from replicator.source.grants import Grants, parse_grants, quote_account
from replicator.source.preflight import PreflightReport, format_report
from replicator.source.preflight_checks import (
    Finding,
    PreflightFacts,
    ReplicaHost,
    evaluate,
    human_duration,
)
from replicator.source.server_info import BinlogFile, BinlogPosition, ServerInfo, parse_version
from replicator.source.stream import server_facts

NOW = 1_800_000_000.0
DAY = 86400.0

MYSQL = ServerInfo(
    flavor="mysql",
    version=(8, 4, 3),
    version_string="8.4.3",
    server_id=1,
    server_uuid="3e11fa47-71ca-11e1-9e33-c80aa9429562",
    log_bin=True,
    binlog_format="ROW",
    binlog_row_image="FULL",
    binlog_row_metadata="FULL",
    binlog_row_value_options="",
    binlog_checksum="CRC32",
    gtid_mode="ON",
    enforce_gtid_consistency="ON",
    gtid_strict_mode=None,
    gtid_domain_id=None,
    gtid_binlog_pos=None,
    gtid_current_pos=None,
    gtid_executed="3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5",
    gtid_purged="",
    binlog_end=BinlogPosition("binlog.000003", 157),
    binlog_do_db="",
    binlog_ignore_db="",
    binlog_files=(BinlogFile("binlog.000002", 1000), BinlogFile("binlog.000003", 157)),
    binlog_expire_logs_seconds=2592000,
    expire_logs_days=None,
    binlog_expire_logs_auto_purge=True,
    denied=(),
)
MARIADB = dataclasses.replace(
    MYSQL,
    flavor="mariadb",
    version=(10, 11, 6),
    version_string="10.11.6-MariaDB-log",
    server_uuid=None,
    binlog_row_value_options=None,
    gtid_mode=None,
    enforce_gtid_consistency=None,
    gtid_strict_mode=True,
    gtid_domain_id=0,
    gtid_binlog_pos="0-1-5",
    gtid_current_pos="0-1-5",
    gtid_executed=None,
    gtid_purged=None,
    binlog_expire_logs_seconds=0,
    expire_logs_days=0.0,
    binlog_expire_logs_auto_purge=None,
)
MYSQL_GRANTS = [
    "GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `repl`@`%`",
    "GRANT BINLOG_ADMIN,REPLICATION_SLAVE_ADMIN ON *.* TO `repl`@`%`",
]
HASH = "*D98280F03D0F78162EBDBB9C883FC01395DEA2BF"


def facts(
    server: ServerInfo = MYSQL,
    *,
    grants: Grants | None = None,
    replicas: tuple[ReplicaHost, ...] | None = (),
    replicas_denied: bool = False,
    oldest: ProbeResult | None = None,
    ours: int = 65000,
    checkpoint_age: float | None = None,
    own_replica_host: str | None = None,
    unlandable: tuple[tuple[str, str], ...] = (),
) -> PreflightFacts:
    return PreflightFacts(
        server=server,
        grants=grants or parse_grants(MYSQL_GRANTS, "repl@%"),
        replicas=replicas,
        replica_statement="SHOW REPLICAS",
        replicas_denied=replicas_denied,
        dump_threads=(),
        oldest_binlog=oldest or ProbeResult("binlog.000002", int(NOW - 3 * DAY)),
        server_now=NOW,
        our_server_id=ours,
        checkpoint_age_seconds=checkpoint_age,
        own_replica_host=own_replica_host,
        unlandable=unlandable,
    )


def finding(found: tuple[Finding, ...], check: str) -> Finding:
    (match,) = [f for f in found if f.check == check]
    return match


def test_a_good_mysql_server_has_no_problems() -> None:
    found = evaluate(facts())
    assert [f for f in found if f.severity != "ok"] == []
    assert finding(found, "gtid").found.startswith("gtid_mode is ON")
    assert "binlog_row_value_options" in {f.check for f in found}


def test_mariadb_skips_mysql_only_checks() -> None:
    grants = parse_grants(
        ["GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR, REPLICATION MASTER ADMIN ON *.* TO x"],
        "repl@%",
    )
    found = evaluate(facts(MARIADB, grants=grants))
    assert "binlog_row_value_options" not in {f.check for f in found}
    assert finding(found, "gtid").severity == "ok"
    assert "gtid_strict_mode = ON" in finding(found, "gtid").found
    assert finding(found, "privilege BINLOG MONITOR").severity == "ok"
    assert finding(found, "retention").found.startswith("binlogs never expire")


@pytest.mark.parametrize("image", ["MINIMAL", "NOBLOB"])
def test_partial_json_without_full_image_is_an_error(image: str) -> None:
    server = dataclasses.replace(
        MYSQL, binlog_row_image=image, binlog_row_value_options="PARTIAL_JSON"
    )
    found = evaluate(facts(server))
    partial = finding(found, "binlog_row_value_options")
    assert partial.severity == "error"
    assert "cannot be reconstructed" in partial.found
    assert partial.sql == "SET GLOBAL binlog_row_value_options = '';"
    assert finding(found, "binlog_row_image").severity == "warning"


def test_partial_json_with_full_image_is_fine() -> None:
    server = dataclasses.replace(MYSQL, binlog_row_value_options="PARTIAL_JSON")
    assert finding(evaluate(facts(server)), "binlog_row_value_options").severity == "ok"


def test_row_image_minimal_says_what_spark_loses() -> None:
    server = dataclasses.replace(MYSQL, binlog_row_image="MINIMAL")
    image = finding(evaluate(facts(server)), "binlog_row_image")
    assert image.severity == "warning"
    assert "null" in image.found and "Spark" in image.found
    assert "_absent" in image.found  # absent columns are named, not mistaken for NULLs
    assert "indistinguishable" not in image.found
    assert image.sql == "SET GLOBAL binlog_row_image = 'FULL';"
    assert image.config == "binlog_row_image = FULL"


@pytest.mark.parametrize("mode", ["OFF", "OFF_PERMISSIVE", "ON_PERMISSIVE"])
def test_mysql_gtid_mode_off_is_a_warning_with_the_steps(mode: str) -> None:
    gtid = finding(evaluate(facts(dataclasses.replace(MYSQL, gtid_mode=mode))), "gtid")
    assert gtid.severity == "warning"
    assert gtid.sql.splitlines()[0] == "SET GLOBAL enforce_gtid_consistency = ON;"
    assert gtid.sql.splitlines()[-1] == "SET GLOBAL gtid_mode = ON;"
    assert gtid.config == "gtid_mode = ON\nenforce_gtid_consistency = ON"


def test_statement_format_checksum_none_and_binlog_off() -> None:
    server = dataclasses.replace(MYSQL, binlog_format="MIXED", binlog_checksum="NONE")
    found = evaluate(facts(server))
    assert finding(found, "binlog_format").sql == "SET GLOBAL binlog_format = 'ROW';"
    checksum = finding(found, "binlog_checksum")
    assert checksum.severity == "warning" and "TCP checksum" in checksum.found
    off = evaluate(facts(dataclasses.replace(MYSQL, log_bin=False), oldest=None))
    log_bin = finding(off, "log_bin")
    assert log_bin.severity == "error" and log_bin.config == "log_bin = mysql-bin"
    assert "retention" not in {f.check for f in off}


def test_old_servers_without_row_metadata_or_checksums() -> None:
    old = dataclasses.replace(
        MYSQL,
        version=(5, 5, 62),
        binlog_row_metadata=None,
        binlog_row_value_options=None,
        binlog_checksum=None,
        gtid_mode=None,
    )
    found = evaluate(facts(old))
    assert finding(found, "binlog_row_metadata").severity == "warning"
    assert finding(found, "binlog_checksum").severity == "warning"
    assert finding(found, "gtid").severity == "warning"
    assert "binlog_row_value_options" not in {f.check for f in found}


def test_server_id_rules() -> None:
    same = finding(evaluate(facts(ours=1)), "server_id")
    assert same.severity == "error" and same.action.startswith("--server-id 2 ")
    zero = finding(evaluate(facts(dataclasses.replace(MYSQL, server_id=0))), "server_id")
    assert zero.severity == "error" and zero.sql == "SET GLOBAL server_id = 1;"


def test_replica_clash_suggests_a_free_id() -> None:
    replicas = (ReplicaHost(65000, "10.0.0.7", 3306), ReplicaHost(65001, "10.0.0.8", 3306))
    clash = finding(evaluate(facts(replicas=replicas)), "replica_server_id")
    assert clash.severity == "error"
    assert "10.0.0.7:3306" in clash.found
    assert clash.action.startswith("--server-id 65002 ")
    denied = finding(evaluate(facts(replicas=None, replicas_denied=True)), "replica_server_id")
    assert denied.severity == "warning"


def test_our_own_daemon_is_no_clash_but_another_replica_still_is() -> None:
    own = "replicator-0123456789ab"
    ours = (ReplicaHost(65000, own, 0), ReplicaHost(65001, "10.0.0.8", 3306))
    fine = finding(evaluate(facts(replicas=ours, own_replica_host=own)), "replica_server_id")
    assert fine.severity == "ok"
    assert f"own running replicator (registered as {own})" in fine.found
    # the registration of our id is someone else's: a clash, whatever our daemon is called
    other = (ReplicaHost(65000, "replicator", 0),)
    clash = finding(evaluate(facts(replicas=other, own_replica_host=own)), "replica_server_id")
    assert clash.severity == "error" and "replicator:0" in clash.found
    assert "this replicator's own running daemon" not in clash.found  # ours is known: not it
    # without a landing zone to ask, our daemon cannot be told from another replica
    unknown = finding(evaluate(facts(replicas=ours)), "replica_server_id")
    assert unknown.severity == "error" and "check --config" in unknown.found


def test_retention_rules() -> None:
    young = finding(evaluate(facts(checkpoint_age=3600.0)), "retention")
    assert young.severity == "ok"
    purged = finding(evaluate(facts(checkpoint_age=4 * DAY)), "retention")
    assert purged.severity == "error" and "purged" in purged.found
    assert purged.sql == f"SET GLOBAL binlog_expire_logs_seconds = {8 * 86400};"
    # Oldest binlog reaches back far enough, but the checkpoint is past the expiry.
    short = dataclasses.replace(MYSQL, binlog_expire_logs_seconds=int(2 * DAY))
    old_file = ProbeResult("binlog.000001", int(NOW - 10 * DAY))
    expiring = finding(evaluate(facts(short, oldest=old_file, checkpoint_age=3 * DAY)), "retention")
    assert expiring.severity == "error" and "next rotation" in expiring.found
    # MariaDB before 10.6 has only expire_logs_days.
    old_maria = dataclasses.replace(
        MARIADB, version=(10, 4, 30), binlog_expire_logs_seconds=None, expire_logs_days=1.0
    )
    days = finding(evaluate(facts(old_maria, oldest=old_file, checkpoint_age=2 * DAY)), "retention")
    assert days.severity == "error" and days.sql == "SET GLOBAL expire_logs_days = 7;"
    # No checkpoint: a retention under a day is a warning.
    hours = dataclasses.replace(MYSQL, binlog_expire_logs_seconds=3600)
    assert finding(evaluate(facts(hours)), "retention").severity == "warning"
    # MySQL 8.0.29+: auto purge off means binlogs never expire.
    no_purge = dataclasses.replace(MYSQL, binlog_expire_logs_auto_purge=False)
    assert no_purge.binlog_expire_seconds is None


def test_grants_parsing() -> None:
    grants = parse_grants(
        [
            f"GRANT USAGE ON *.* TO `u`@`%` IDENTIFIED BY PASSWORD '{HASH}'",
            "GRANT SELECT (`a`, `b`), INSERT ON `shop`.`items` TO `u`@`%`",
            "GRANT SELECT ON `crm`.* TO `u`@`%`",
            "GRANT EXECUTE ON PROCEDURE `crm`.`p` TO `u`@`%`",
            "GRANT PROXY ON ''@'%' TO 'u'@'%'",
            "GRANT `replication_role` TO `u`@`%`",
        ],
        "u@%",
    )
    assert grants.global_privileges == frozenset({"USAGE"})
    assert grants.select_scopes == ("shop.items", "crm.*")
    assert grants.roles == ("`replication_role`",)
    assert not grants.has_any({"REPLICATION SLAVE"})
    assert HASH not in repr(grants)
    everything = parse_grants(["GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost`"], "root@x")
    assert everything.has_any({"BINLOG MONITOR"})


def test_missing_privileges_give_exact_grants_without_the_hash() -> None:
    grants = parse_grants(
        [f"GRANT USAGE ON *.* TO `app`@`10.%` IDENTIFIED BY PASSWORD '{HASH}'"], "app@10.%"
    )
    refused = ProbeResult("", None, denied=True, problem="Access denied")
    server = dataclasses.replace(MYSQL, denied=("SHOW BINARY LOG STATUS",), binlog_files=None)
    found = evaluate(facts(server, grants=grants, oldest=refused))
    slave = finding(found, "privilege REPLICATION SLAVE")
    assert slave.severity == "error"
    assert slave.sql == "GRANT REPLICATION SLAVE ON *.* TO 'app'@'10.%';"
    client = finding(found, "privilege REPLICATION CLIENT")
    assert client.sql == "GRANT REPLICATION CLIENT ON *.* TO 'app'@'10.%';"
    select = finding(found, "privilege SELECT")
    assert select.severity == "warning"  # names come from the binlog (row metadata FULL)
    report = PreflightReport("db:3306", "app@10.%", server, found)
    text = format_report(report)
    assert HASH not in text and not report.ok
    assert "GRANT REPLICATION SLAVE ON *.* TO 'app'@'10.%';" in text


def test_evidence_beats_grant_parsing() -> None:
    """A privilege held through a role does not show in SHOW GRANTS, but using it works."""
    grants = parse_grants(["GRANT USAGE ON *.* TO `u`@`%`", "GRANT `r` TO `u`@`%`"], "u@%")
    found = evaluate(facts(grants=grants))  # the probe read a timestamp; SHOW BINARY LOGS worked
    assert finding(found, "privilege REPLICATION SLAVE").severity == "ok"
    assert finding(found, "privilege REPLICATION CLIENT").severity == "ok"
    assert "roles granted: `r`" in finding(found, "privilege SELECT").found


def test_format_report_layout() -> None:
    server = dataclasses.replace(MYSQL, binlog_format="STATEMENT")
    found = evaluate(facts(server))
    text = format_report(PreflightReport("db:3306", "repl@%", server, found))
    lines = text.splitlines()
    assert lines[0] == "replicator check: MySQL 8.4.3 at db:3306 as repl@% (server_id 1)"
    assert "          fix now:          SET GLOBAL binlog_format = 'ROW';" in lines
    assert "          my.cnf [mysqld]:  binlog_format = ROW" in lines
    assert lines[-1].startswith("1 error(s), 0 warning(s)")
    assert all(len(line) <= 100 for line in lines if not line.lstrip().startswith(("also", "fix")))


def test_quote_account_and_versions() -> None:
    assert quote_account("repl@%") == "'repl'@'%'"
    assert quote_account("o'neil@10.0.0.%") == "'o''neil'@'10.0.0.%'"
    assert parse_version("5.5.5-10.11.6-MariaDB-log") == (10, 11, 6)
    assert parse_version("8.0.36-0ubuntu0.22.04.1") == (8, 0, 36)
    assert parse_version("9.1") == (9, 1, 0)
    assert human_duration(90061) == "1 d 1 h"
    assert human_duration(3720) == "1 h 2 min"


def test_caching_sha2_full_auth_rsa_step_works() -> None:
    """pymysql's RSA step of caching_sha2_password full auth (no TLS) with ``cryptography``."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    password, scramble = "p\u00e4ss\u20ac".encode(), bytes(range(1, 21))
    sealed = _auth.sha2_rsa_encrypt(password, scramble, public_pem)
    opened = key.decrypt(
        sealed,
        padding.OAEP(
            mgf=padding.MGF1(algorithm=hashes.SHA1()), algorithm=hashes.SHA1(), label=None
        ),
    )
    plain = bytes(b ^ scramble[i % len(scramble)] for i, b in enumerate(opened))
    assert plain == password + b"\0"


def test_an_unreadable_oldest_binlog_is_not_an_ok_retention() -> None:
    refused = ProbeResult("", None, denied=True, problem="Access denied")
    found = finding(evaluate(facts(oldest=refused)), "retention")
    assert found.severity == "warning"
    assert "Access denied" in found.found and "cannot be told" in found.found
    assert "REPLICATION SLAVE" in (found.action or "")


@pytest.mark.parametrize(
    ("server", "grant"),
    [
        (MYSQL, "GRANT REPLICATION CLIENT ON"),
        (MARIADB, "GRANT BINLOG MONITOR ON"),  # MariaDB 10.5.2+
        (dataclasses.replace(MARIADB, version=(10, 4, 30)), "GRANT REPLICATION CLIENT ON"),
    ],
)
def test_the_stream_names_only_the_fix_that_applies(server: ServerInfo, grant: str) -> None:
    with pytest.raises(ServerRefusedError) as off:
        server_facts(dataclasses.replace(server, log_bin=False))
    assert "binary log is off" in str(off.value)
    assert "GRANT" not in (off.value.hint or "")  # no privilege turns a binlog on
    assert "log_bin" in (off.value.hint or "")
    with pytest.raises(ServerRefusedError) as denied:
        server_facts(dataclasses.replace(server, binlog_end=None, denied=("SHOW BINLOG STATUS",)))
    assert "may not read the end of the binary log" in str(denied.value)
    assert grant in (denied.value.hint or "")


def test_tables_in_a_database_whose_name_holds_a_dot_are_an_error() -> None:
    assert [f for f in evaluate(facts()) if f.check == "table_names"] == []
    tables = (("a.b", "t"), ("a.b", "u"), ("x.y.z", "v"))
    named = finding(evaluate(facts(unlandable=tables)), "table_names")
    assert named.severity == "error"
    assert "(`a.b`.`t`, `a.b`.`u`, `x.y.z`.`v`)" in named.found
    assert "filters.exclude: ['a?b.*', 'x?y?z.*']" in named.action
    many = tuple(("a.b", f"t{i}") for i in range(7))
    shown = finding(evaluate(facts(unlandable=many)), "table_names").found
    assert "`a.b`.`t4` and 2 more)" in shown
