"""The TLS contexts of source (and MQTT) connections: made once per configuration while the
files they were made from stay as they are (``source.connection.tls_context``)."""

from __future__ import annotations

import os
import ssl
from pathlib import Path

import pytest

from replicator.config import TlsConfig
from replicator.errors import ConfigError
from replicator.source.connection import tls_context

pytestmark = pytest.mark.unit

# any PEM certificate serves as a CA file here: the system's bundle, or Python's test one
BUNDLE = Path(ssl.get_default_verify_paths().cafile or "/etc/ssl/certs/ca-certificates.crt")


def test_two_configurations_keep_their_own_context() -> None:
    """The source's and the MQTT broker's settings differ: asking for one must not throw the
    other's context away."""
    source = TlsConfig(enabled=True, verify_server_cert=False)
    broker = TlsConfig(enabled=True, verify_server_cert=False, verify_hostname=False)
    first = (tls_context(source), tls_context(broker))
    again = (tls_context(source), tls_context(broker), tls_context(source))

    assert first[0] is not first[1]
    assert again == (first[0], first[1], first[0])
    assert first[0].verify_mode == ssl.CERT_NONE
    assert not first[0].check_hostname


@pytest.mark.skipif(not BUNDLE.is_file(), reason="no CA bundle on this machine to copy")
def test_a_changed_ca_file_makes_a_new_context_and_a_missing_one_is_named(
    tmp_path: Path,
) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_bytes(BUNDLE.read_bytes())
    tls = TlsConfig(enabled=True, ca_file=str(ca))
    first = tls_context(tls)
    same = tls_context(tls)
    stamp = ca.stat().st_mtime_ns + 1_000_000_000
    os.utime(ca, ns=(stamp, stamp))
    renewed = tls_context(tls)
    ca.unlink()
    with pytest.raises(ConfigError, match="does not exist"):
        tls_context(tls)

    assert same is first
    assert renewed is not first
    assert renewed.verify_mode == ssl.CERT_REQUIRED
