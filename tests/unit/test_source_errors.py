"""``source.errors``: pymysql errors sorted into the error tree; what is retryable.

The errors are the exception values pymysql raises (built here by hand with the server's error
numbers and messages); the live tests produce the same ones from a real server.
"""

from __future__ import annotations

import ssl

import pymysql
import pytest

from replicator.errors import ConfigError, ReplicatorError, ServerRefusedError
from replicator.source.errors import SourceUnavailableError, is_retryable, translate_error

WHERE = "db.example:3306"


def _translate(exc: BaseException) -> ReplicatorError:
    return translate_error(exc, where=WHERE, account="repl")


@pytest.mark.parametrize(
    ("code", "message"),
    [
        (1045, "Access denied for user 'repl'@'10.0.0.9' (using password: YES)"),
        (1698, "Access denied for user 'root'@'localhost'"),  # a unix_socket account over TCP
        (1130, "Host '10.0.0.9' is not allowed to connect to this MariaDB server"),
        (1129, "Host '10.0.0.9' is blocked because of many connection errors"),
        (1227, "Access denied; you need (at least one of) the BINLOG MONITOR privilege(s)"),
        (1044, "Access denied for user 'repl'@'%' to database 'x'"),
        (3118, "Access denied for user 'repl'@'%'. Account is locked."),
        (4151, "Access denied, this account is locked"),
        (1820, "You must reset your password using ALTER USER"),
    ],
)
def test_refusals_are_server_refused(code: int, message: str) -> None:
    error = _translate(pymysql.err.OperationalError(code, message))
    assert isinstance(error, ServerRefusedError)
    assert error.exit_code == 3
    assert error.hint
    assert not is_retryable(error)


def test_a_login_refused_names_tls_as_a_cause() -> None:
    error = _translate(pymysql.err.OperationalError(1045, "Access denied for user 'repl'@'h'"))
    assert "REQUIRE SSL" in (error.hint or "") and "tls.enabled" in (error.hint or "")


def test_access_denied_names_what_to_check() -> None:
    error = _translate(pymysql.err.OperationalError(1045, "Access denied for user 'repl'@'h'"))
    assert "refused the login of 'repl'" in str(error)
    assert "--password-env" in error.hint and "mysql.user" in error.hint


@pytest.mark.parametrize(
    "code", [2003, 2002, 2005, 2006, 2013, 2055, 1040, 1053, 1203, 1226, 1927, 1317]
)
def test_unavailability_is_retryable(code: int) -> None:
    raw = pymysql.err.OperationalError(code, "Can't connect to MySQL server on 'x'")
    assert is_retryable(raw)
    error = _translate(raw)
    assert isinstance(error, SourceUnavailableError)
    assert error.exit_code == 1
    assert is_retryable(error)


def test_plain_os_errors_are_retryable() -> None:
    assert is_retryable(ConnectionResetError())
    assert is_retryable(TimeoutError())
    assert isinstance(_translate(ConnectionRefusedError(111, "refused")), SourceUnavailableError)
    assert not is_retryable(ValueError())


def test_tls_verification_failure_under_a_connect_error() -> None:
    verify = ssl.SSLCertVerificationError(1, "certificate verify failed")
    verify.verify_message = "unable to get local issuer certificate"
    raw = pymysql.err.OperationalError(2003, f"Can't connect to MySQL server on 'x' ({verify})")
    raw.original_exception = verify  # as pymysql sets it
    error = _translate(raw)
    assert isinstance(error, ServerRefusedError)
    assert "TLS verification failed" in str(error)
    assert "unable to get local issuer certificate" in str(error)
    assert not is_retryable(raw) and not is_retryable(error)


def test_tls_required_but_not_offered() -> None:
    raw = pymysql.err.OperationalError(2026, "SSL is required but the server doesn't support it")
    error = _translate(raw)
    assert isinstance(error, ServerRefusedError)
    assert "enable TLS on the server" in error.hint


def test_unknown_database_is_config_error() -> None:
    error = _translate(pymysql.err.OperationalError(1049, "Unknown database 'nope'"))
    assert isinstance(error, ConfigError)


def test_other_server_errors_keep_their_number() -> None:
    error = _translate(pymysql.err.InternalError(1236, "Could not find first log file name"))
    assert type(error) is ReplicatorError
    assert "error 1236" in str(error)
    assert not is_retryable(error)


def test_our_errors_pass_through() -> None:
    original = ConfigError("bad")
    assert _translate(original) is original
