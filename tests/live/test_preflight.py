"""``replicator check`` and the source connection against real MariaDB servers.

Two servers at most: the shared ``mariadb`` fixture (configured as the replicator requires; only
read here) and one module-scoped server of our own that is wrong on purpose
(``--binlog-format=STATEMENT``) and also has TLS on, with a throwaway CA made here with the
``cryptography`` package, and the accounts these tests create (no replication privileges,
ed25519, X.509, a non-ASCII password). The CLI runs as a real subprocess.

The unreachable-server case exits 1, not 3: ``SourceUnavailableError`` is transient (the
daemon retries it), unlike a refusal that someone has to fix (see ``replicator.cli``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import ipaddress
import os
import ssl
import struct
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from replicator.config import FilterConfig, Secret, SourceConfig, TlsConfig
from replicator.errors import ServerRefusedError
from replicator.source.connection import open_connection, server_info
from replicator.source.errors import SourceUnavailableError, is_retryable
from replicator.source.preflight import run_preflight
from tests.harness import free_tcp_port
from tests.harness.certificates import ca_store_loads
from tests.harness.containers import DockerServer
from tests.harness.mariadb import MariaDBServer, mariadb_available, mariadbd_version

pytestmark = pytest.mark.live

GOOD_SERVER_ID = 4242001  # not 65000: keep clear of other tests' replicas on the shared server
NO_REPL_USER = "norepl"
NO_REPL_PASSWORD = "norepl-Pw-71"
ED_USER = "edrepl"
ED_PASSWORD = "ed25519-Pw-Secret-93"
X509_USER = "certrepl"
X509_PASSWORD = "x509-Pw-44"
UNICODE_USER = "unirepl"
UNICODE_PASSWORD = "p\u00e4ss-w\u00f6rd-\u20ac-\U0001f511"
WRONG_PASSWORD = "Wrong-Horse-Battery-Staple-517"


# ---------------------------------------------------------------- certificates


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path  # a CA that signed nothing the server uses


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _make_ca(common_name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _issue(
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    common_name: str,
    *,
    server: bool,
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .add_extension(
            x509.ExtendedKeyUsage(
                [x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]
                if server
                else [x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
    )
    if server:
        # IP only: connecting to 127.0.0.1 verifies, "localhost" must fail the host name check.
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
    return key, builder.sign(ca_key, hashes.SHA256())


def _make_pki(directory: Path) -> Pki:
    def pem(cert: x509.Certificate, name: str) -> Path:
        path = directory / name
        path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return path

    ca_key, ca_cert = _make_ca("replicator test CA")
    server_key, server_cert = _issue(ca_key, ca_cert, "127.0.0.1", server=True)
    client_key, client_cert = _issue(ca_key, ca_cert, X509_USER, server=False)
    _, other_ca_cert = _make_ca("some other CA")
    pki = Pki(
        ca=pem(ca_cert, "ca.pem"),
        server_cert=pem(server_cert, "server-cert.pem"),
        server_key=directory / "server-key.pem",
        client_cert=pem(client_cert, "client-cert.pem"),
        client_key=directory / "client-key.pem",
        other_ca=pem(other_ca_cert, "other-ca.pem"),
    )
    _write_key(server_key, pki.server_key)
    _write_key(client_key, pki.client_key)
    return pki


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return _make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def odd_server(pki: Pki) -> Iterator[MariaDBServer]:
    """STATEMENT binlog format (wrong on purpose), TLS on, and the test accounts."""
    ok, reason = mariadb_available()
    if not ok:
        pytest.skip(reason)
    server = MariaDBServer(
        [
            "--binlog-format=STATEMENT",
            f"--ssl-ca={pki.ca}",
            f"--ssl-cert={pki.server_cert}",
            f"--ssl-key={pki.server_key}",
        ]
    )
    server.start()
    try:
        with contextlib.closing(server.connect()) as conn, conn.cursor() as cur:
            cur.execute("SET SESSION sql_log_bin = 0")
            cur.execute("INSTALL SONAME 'auth_ed25519'")
            cur.execute("CREATE USER %s@'%%' IDENTIFIED BY %s", (NO_REPL_USER, NO_REPL_PASSWORD))
            cur.execute(
                "CREATE USER %s@'%%' IDENTIFIED VIA ed25519 USING PASSWORD(%s)",
                (ED_USER, ED_PASSWORD),
            )
            cur.execute(
                "CREATE USER %s@'%%' IDENTIFIED BY %s REQUIRE X509", (X509_USER, X509_PASSWORD)
            )
            cur.execute("CREATE USER %s@'%%' IDENTIFIED BY %s", (UNICODE_USER, UNICODE_PASSWORD))
            for user in (ED_USER, X509_USER, UNICODE_USER):
                cur.execute("GRANT REPLICATION SLAVE, SELECT ON *.* TO %s@'%%'", (user,))
        yield server
    finally:
        server.stop()


def _cfg(server: MariaDBServer, **overrides: object) -> SourceConfig:
    params: dict[str, object] = {
        "host": server.host,
        "port": server.port,
        "user": server.user,
        "password": Secret(server.password),
        "server_id": GOOD_SERVER_ID,
        "connect_timeout": 5.0,
    }
    params.update(overrides)
    return SourceConfig(**params)  # type: ignore[arg-type]


def _check(
    *args: str, password: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environ = dict(os.environ, **(env or {}))
    if password is not None:
        environ["REPLICATOR_TEST_PW"] = password
        args = (*args, "--password-env", "REPLICATOR_TEST_PW")
    return subprocess.run(
        [sys.executable, "-m", "replicator.cli", "check", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=environ,
    )


def _binlog_monitor_name() -> str:
    return "BINLOG MONITOR" if mariadbd_version() >= (10, 5) else "REPLICATION CLIENT"


# ---------------------------------------------------------------- the CLI


def test_check_passes_on_a_well_configured_server(mariadb: MariaDBServer) -> None:
    result = _check(
        "--host",
        mariadb.host,
        "--port",
        str(mariadb.port),
        "--user",
        mariadb.user,
        "--server-id",
        str(GOOD_SERVER_ID),
        password=mariadb.password,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ERROR" not in result.stdout
    assert "ok        binlog_format: binlog_format is ROW" in result.stdout
    assert f"{mariadb.user}@% has REPLICATION SLAVE" in result.stdout
    assert "the stream can start" in result.stdout
    assert mariadb.password not in result.stdout + result.stderr


def test_check_prints_exact_fixes_for_a_misconfigured_server(
    odd_server: MariaDBServer, tmp_path: Path
) -> None:
    password_file = tmp_path / "pw"
    password_file.write_text(NO_REPL_PASSWORD + "\n")
    result = _check(
        "--port",
        str(odd_server.port),
        "--user",
        NO_REPL_USER,
        "--password-file",
        str(password_file),
        "--server-id",
        str(GOOD_SERVER_ID),
    )
    out = result.stdout
    assert result.returncode == 3, out + result.stderr
    assert "ERROR     binlog_format: binlog_format is STATEMENT" in out
    assert "fix now:          SET GLOBAL binlog_format = 'ROW';" in out
    assert "my.cnf [mysqld]:  binlog_format = ROW" in out
    assert "ERROR     privilege REPLICATION SLAVE:" in out
    assert f"GRANT REPLICATION SLAVE ON *.* TO '{NO_REPL_USER}'@'%';" in out
    assert f"GRANT {_binlog_monitor_name()} ON *.* TO '{NO_REPL_USER}'@'%';" in out
    assert f"GRANT SELECT ON *.* TO '{NO_REPL_USER}'@'%';" in out
    assert "the stream cannot work until the errors are fixed" in out
    # SHOW GRANTS lines carry the password hash: nothing of them may surface.
    assert "IDENTIFIED" not in out
    assert NO_REPL_PASSWORD not in out + result.stderr


def test_check_wrong_password_exits_3_and_never_shows_it(odd_server: MariaDBServer) -> None:
    result = _check(
        "--port", str(odd_server.port), "--user", odd_server.user, password=WRONG_PASSWORD
    )
    assert result.returncode == 3
    assert "refused the login of 'repl'" in result.stderr
    assert "Access denied" in result.stderr
    assert "--password-env" in result.stderr  # the hint says where the password came from
    assert WRONG_PASSWORD not in result.stdout + result.stderr


def test_check_unreachable_server_exits_1() -> None:
    port = free_tcp_port()  # nothing listens here
    result = _check("--port", str(port), password=WRONG_PASSWORD)
    assert result.returncode == 1, result.stderr
    assert f"cannot reach 127.0.0.1:{port}" in result.stderr
    assert WRONG_PASSWORD not in result.stdout + result.stderr


def test_check_conflicting_password_options_exit_2(tmp_path: Path) -> None:
    password_file = tmp_path / "pw"
    password_file.write_text(WRONG_PASSWORD)
    result = _check("--password-file", str(password_file), password=WRONG_PASSWORD)
    assert result.returncode == 2
    assert "give only one of" in result.stderr
    assert WRONG_PASSWORD not in result.stdout + result.stderr


def test_check_bad_option_exits_2() -> None:
    result = _check("--port", "not-a-port")
    assert result.returncode == 2


# ---------------------------------------------------------------- the library


def test_server_info_on_mariadb(mariadb: MariaDBServer) -> None:
    conn = open_connection(_cfg(mariadb))
    with contextlib.closing(conn):
        info = server_info(conn)
    status = mariadb.binlog_status()
    assert info.flavor == "mariadb" and info.is_mariadb
    assert info.version[:2] == mariadbd_version()
    assert info.server_id == 1 and info.server_uuid is None
    assert info.log_bin and info.binlog_format == "ROW" and info.binlog_row_image == "FULL"
    assert info.binlog_checksum == "CRC32"
    assert info.binlog_row_metadata == "MINIMAL"
    assert info.binlog_row_value_options is None and info.gtid_mode is None  # MySQL only
    assert info.gtid_strict_mode is not None and info.gtid_domain_id == 0
    assert info.gtid_binlog_pos is not None and info.gtid_current_pos is not None
    assert info.gtid_executed is None and info.gtid_purged is None
    assert info.binlog_end is not None and info.binlog_end.file == status.file
    assert info.binlog_end.position >= status.position or info.binlog_end.file != status.file
    assert info.binlog_files is not None
    assert [f.name for f in info.binlog_files] == mariadb.binlog_files()
    assert all(f.size > 0 for f in info.binlog_files)
    assert info.denied == ()
    assert info.binlog_expire_seconds is None  # the harness keeps binlogs forever


def test_check_finds_replicated_tables_whose_database_name_holds_a_dot(
    mariadb: MariaDBServer,
) -> None:
    # `run` would stop at the first statement or rows of these tables (exit 4): say so first
    mariadb.execute("CREATE DATABASE `pc_dots.d`")
    try:
        mariadb.execute("CREATE TABLE `pc_dots.d`.`t` (id INT PRIMARY KEY)")
        result = _check(
            "--host", mariadb.host, "--port", str(mariadb.port), "--user", mariadb.user,
            "--server-id", str(GOOD_SERVER_ID), password=mariadb.password,
        )  # fmt: skip
        assert result.returncode == 3, result.stdout + result.stderr
        assert "table_names: replicated tables in a database whose name holds a '.' " in (
            result.stdout
        )
        assert "(`pc_dots.d`.`t`)" in result.stdout
        assert "filters.exclude: ['pc_dots?d.*']" in result.stdout

        left_out = FilterConfig(exclude=("pc_dots?d.*",))
        report = run_preflight(_cfg(mariadb), filters=left_out)
        assert [f for f in report.findings if f.check == "table_names"] == []
        everything = run_preflight(_cfg(mariadb))
        (named,) = [f for f in everything.findings if f.check == "table_names"]
        assert named.severity == "error" and not everything.ok
    finally:
        mariadb.execute("DROP DATABASE `pc_dots.d`")


def test_preflight_reports_purged_position_for_an_old_checkpoint(mariadb: MariaDBServer) -> None:
    cfg = _cfg(mariadb)
    fresh = run_preflight(cfg, checkpoint_age_seconds=0.0)
    (fresh_retention,) = [f for f in fresh.findings if f.check == "retention"]
    assert fresh_retention.severity == "ok"
    ten_years = 10 * 365 * 86400.0  # older than any binlog this server has
    old = run_preflight(cfg, checkpoint_age_seconds=ten_years)
    (retention,) = [f for f in old.findings if f.check == "retention"]
    assert retention.severity == "error" and not old.ok
    assert "purged" in retention.found
    assert retention.sql.startswith("SET GLOBAL binlog_expire_logs_seconds = ")


def test_ed25519_account_connects(odd_server: MariaDBServer) -> None:
    cfg = _cfg(odd_server, user=ED_USER, password=Secret(ED_PASSWORD))
    conn = open_connection(cfg)
    with contextlib.closing(conn), conn.cursor() as cur:
        cur.execute("SELECT CURRENT_USER()")
        assert cur.fetchone() == (f"{ED_USER}@%",)
    (plugin,) = odd_server.query("SELECT plugin FROM mysql.user WHERE user = %s", (ED_USER,))
    assert plugin == ("ed25519",)
    with pytest.raises(ServerRefusedError) as refused:
        open_connection(_cfg(odd_server, user=ED_USER, password=Secret(WRONG_PASSWORD)))
    assert refused.value.exit_code == 3
    assert WRONG_PASSWORD not in str(refused.value)


def test_non_ascii_password_is_sent_as_utf8(odd_server: MariaDBServer) -> None:
    conn = open_connection(_cfg(odd_server, user=UNICODE_USER, password=Secret(UNICODE_PASSWORD)))
    with contextlib.closing(conn), conn.cursor() as cur:
        cur.execute("SELECT CURRENT_USER()")
        assert cur.fetchone() == (f"{UNICODE_USER}@%",)


def test_unix_socket_connection(odd_server: MariaDBServer) -> None:
    cfg = _cfg(odd_server, unix_socket=str(odd_server.socket), host="ignored.invalid")
    conn = open_connection(cfg)
    with contextlib.closing(conn):
        assert server_info(conn).binlog_format == "STATEMENT"


def test_unreachable_server_is_retryable() -> None:
    cfg = SourceConfig(port=free_tcp_port(), password=Secret(WRONG_PASSWORD), connect_timeout=2)
    with pytest.raises(SourceUnavailableError) as unavailable:
        open_connection(cfg)
    assert unavailable.value.exit_code == 1
    assert is_retryable(unavailable.value)
    assert WRONG_PASSWORD not in str(unavailable.value)


# ---------------------------------------------------------------- TLS


def _ssl_cipher(conn: object) -> str:
    with conn.cursor() as cur:  # type: ignore[attr-defined]
        cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        row = cur.fetchone()
    return str(row[1])


def test_tls_with_verification_succeeds(odd_server: MariaDBServer, pki: Pki) -> None:
    cfg = _cfg(odd_server, tls=TlsConfig(enabled=True, ca_file=str(pki.ca)))
    conn = open_connection(cfg)
    with contextlib.closing(conn):
        assert _ssl_cipher(conn) != ""


def test_tls_with_a_wrong_ca_is_refused(odd_server: MariaDBServer, pki: Pki) -> None:
    cfg = _cfg(odd_server, tls=TlsConfig(enabled=True, ca_file=str(pki.other_ca)))
    with pytest.raises(ServerRefusedError) as refused:
        open_connection(cfg)
    assert "TLS verification failed" in str(refused.value)
    assert refused.value.exit_code == 3
    assert not is_retryable(refused.value)


def test_tls_wrong_ca_through_the_cli_exits_3(odd_server: MariaDBServer, pki: Pki) -> None:
    result = _check(
        "--port", str(odd_server.port), "--tls-ca", str(pki.other_ca), password=WRONG_PASSWORD
    )
    assert result.returncode == 3
    assert "TLS verification failed" in result.stderr
    assert WRONG_PASSWORD not in result.stdout + result.stderr


def test_tls_host_name_must_match_the_certificate(odd_server: MariaDBServer, pki: Pki) -> None:
    # The certificate names only 127.0.0.1; "localhost" reaches the same server.
    strict = TlsConfig(enabled=True, ca_file=str(pki.ca))
    with pytest.raises(ServerRefusedError) as refused:
        open_connection(_cfg(odd_server, host="localhost", tls=strict))
    assert "TLS verification failed" in str(refused.value)
    lenient = TlsConfig(enabled=True, ca_file=str(pki.ca), verify_hostname=False)
    conn = open_connection(_cfg(odd_server, host="localhost", tls=lenient))
    with contextlib.closing(conn):
        assert _ssl_cipher(conn) != ""


def test_tls_client_certificate(odd_server: MariaDBServer, pki: Pki) -> None:
    with_cert = TlsConfig(
        enabled=True,
        ca_file=str(pki.ca),
        cert_file=str(pki.client_cert),
        key_file=str(pki.client_key),
    )
    conn = open_connection(
        _cfg(odd_server, user=X509_USER, password=Secret(X509_PASSWORD), tls=with_cert)
    )
    with contextlib.closing(conn):
        assert _ssl_cipher(conn) != ""
    without_cert = TlsConfig(enabled=True, ca_file=str(pki.ca))
    with pytest.raises(ServerRefusedError):  # REQUIRE X509: access denied without one
        open_connection(
            _cfg(odd_server, user=X509_USER, password=Secret(X509_PASSWORD), tls=without_cert)
        )


def test_a_tls_context_is_made_once_while_its_files_stay(
    odd_server: MariaDBServer, pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Connections share the context their CA file made; a CA file changed on disk is read
    again at the next connection (a renewed CA is trusted, a replaced one refuses)."""
    loads: list[object] = []
    original = ssl.SSLContext.load_verify_locations

    def counted(context: ssl.SSLContext, *args: Any, **kwargs: Any) -> None:
        loads.append(args or kwargs)
        original(context, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    ca = tmp_path / "ca.pem"
    ca.write_bytes(pki.ca.read_bytes())
    cfg = _cfg(odd_server, tls=TlsConfig(enabled=True, ca_file=str(ca)))
    ciphers = []
    for _ in range(3):
        with contextlib.closing(open_connection(cfg)) as conn:
            ciphers.append(_ssl_cipher(conn))
    once = len(loads)
    renewed = ca.stat().st_mtime_ns + 1_000_000_000
    ca.write_bytes(pki.ca.read_bytes())  # the same CA, written again
    os.utime(ca, ns=(renewed, renewed))
    with contextlib.closing(open_connection(cfg)) as conn:
        ciphers.append(_ssl_cipher(conn))
    again = len(loads)
    ca.write_bytes(pki.other_ca.read_bytes())  # another CA under the same name
    os.utime(ca, ns=(renewed + 1_000_000_000,) * 2)
    with pytest.raises(ServerRefusedError) as refused:
        open_connection(cfg)

    assert all(ciphers), ciphers
    assert once == 1
    assert again == 2
    assert len(loads) == 3
    assert "TLS verification failed" in str(refused.value)


def test_tls_without_verification_loads_no_ca_store(
    odd_server: MariaDBServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads = ca_store_loads(monkeypatch)
    cfg = _cfg(odd_server, tls=TlsConfig(enabled=True, verify_server_cert=False))
    with contextlib.closing(open_connection(cfg)) as conn:
        cipher = _ssl_cipher(conn)

    assert cipher != ""
    assert loads == []


def test_tls_off_means_plaintext(odd_server: MariaDBServer) -> None:
    """With tls disabled we never start an (unverified) opportunistic TLS handshake."""
    conn = open_connection(_cfg(odd_server))
    with contextlib.closing(conn):
        assert _ssl_cipher(conn) == ""


# ---------------------------------------------------------------- replica server_id clash


def _register_replica(server: MariaDBServer, server_id: int) -> object:
    """A connection that registered as a replica (COM_REGISTER_SLAVE, 0x15) and stays open.

    Payload: server_id:4, host/user/password as length-prefixed strings, port:2, rank:4,
    master_id:4 (https://mariadb.com/kb/en/com_register_slave/).
    """
    conn = server.connect()
    host = b"clash-test"
    payload = (
        struct.pack("<I", server_id)
        + bytes([len(host)])
        + host
        + b"\x00\x00"
        + struct.pack("<HII", 3306, 0, 0)
    )
    conn._execute_command(0x15, payload)
    conn._read_packet()  # OK, or raises the server's error
    return conn


def test_preflight_flags_a_replica_with_our_server_id(odd_server: MariaDBServer) -> None:
    clashing_id = 777001
    registered = _register_replica(odd_server, clashing_id)
    try:
        report = run_preflight(_cfg(odd_server, server_id=clashing_id))
        (clash,) = [f for f in report.findings if f.check == "replica_server_id"]
        assert clash.severity == "error" and not report.ok
        assert f"server_id {clashing_id} is connected (clash-test:3306)" in clash.found
        assert clash.action.startswith(f"--server-id {clashing_id + 1} ")
        other = run_preflight(_cfg(odd_server, server_id=clashing_id + 5))
        (fine,) = [f for f in other.findings if f.check == "replica_server_id"]
        assert fine.severity == "ok"
        assert str(clashing_id) in fine.found  # listed among the registered replicas
    finally:
        registered.close()  # type: ignore[attr-defined]


# ---------------------------------------------------------------- MySQL (Docker only)

SHA2_USER = "sha2repl"
SHA2_PASSWORD = "sha2-Pw-\u00e9-28"


@pytest.mark.docker
def test_mysql84_caching_sha2_full_auth_and_preflight(docker_mysql84: DockerServer) -> None:
    """caching_sha2_password full authentication without TLS (RSA key from the server), then
    server_info and preflight on MySQL 8.4 (SHOW BINARY LOG STATUS, SHOW REPLICAS, gtid_mode)."""
    server = docker_mysql84
    server.execute(f"DROP USER IF EXISTS '{SHA2_USER}'@'%'")
    server.execute(
        f"CREATE USER '{SHA2_USER}'@'%' IDENTIFIED WITH caching_sha2_password BY %s",
        (SHA2_PASSWORD,),
    )
    server.execute(
        f"GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO '{SHA2_USER}'@'%'"
    )
    server.execute("FLUSH PRIVILEGES")  # empties the sha2 cache: the next login is a full one
    cfg = SourceConfig(
        host=server.host,
        port=server.port,
        user=SHA2_USER,
        password=Secret(SHA2_PASSWORD),
        server_id=GOOD_SERVER_ID,
        get_server_public_key=True,  # no TLS: the key the server sends (refused without this)
    )
    with pytest.raises(ServerRefusedError, match="caching_sha2_password full authentication"):
        open_connection(dataclasses.replace(cfg, get_server_public_key=False))
    conn = open_connection(cfg)
    with contextlib.closing(conn):
        info = server_info(conn)
    assert info.flavor == "mysql" and info.version[:2] == (8, 4)
    assert info.server_uuid and info.gtid_mode == "ON" and info.gtid_executed is not None
    assert info.binlog_end is not None and info.binlog_files
    assert info.binlog_row_value_options is not None and info.gtid_strict_mode is None
    report = run_preflight(cfg)
    assert report.ok, [f for f in report.findings if f.severity == "error"]
    with pytest.raises(ServerRefusedError):
        open_connection(dataclasses.replace(cfg, password=Secret(WRONG_PASSWORD)))


def test_check_names_an_anonymous_account_that_shadows_the_user() -> None:
    """The docs' GRANTs on a server that still has an anonymous account for the client's host
    (as a fresh mariadb-install-db leaves ''@'localhost'): the login is refused, and check
    says which account the server took instead, and how to remove it."""
    ok, reason = mariadb_available()
    if not ok:
        pytest.skip(reason)
    server = MariaDBServer()
    server.start()
    try:
        with contextlib.closing(server.connect()) as conn, conn.cursor() as cur:
            cur.execute("CREATE USER ''@'127.0.0.1'")  # what TCP clients here come from
            cur.execute("CREATE USER 'docrepl'@'%' IDENTIFIED BY 'doc-Pw-18'")
            cur.execute("GRANT REPLICATION SLAVE, SELECT ON *.* TO 'docrepl'@'%'")
        args = ("--port", str(server.port), "--user", "docrepl")
        shadowed = _check(*args, password="doc-Pw-18")
        assert shadowed.returncode == 3, shadowed.stderr
        assert "anonymous account ''@'127.0.0.1'" in shadowed.stderr
        assert "DROP USER ''@'127.0.0.1'" in shadowed.stderr
        assert "doc-Pw-18" not in shadowed.stdout + shadowed.stderr

        server.execute("DROP USER ''@'127.0.0.1'")
        fixed = _check(*args, password="doc-Pw-18")
        assert "refused the login" not in fixed.stderr
        assert "anonymous" not in fixed.stdout + fixed.stderr
    finally:
        server.stop()
