"""Without TLS or a unix socket nothing proves that whoever answers at the source's address is
the server. An impostor there (a spoofed name, a hijacked route) plays the handshake here: the
password must never reach it in a form it can read, as the stock ``mysql`` client refuses.

The impostor is a socket server in a thread that speaks the handshake's packets (the MySQL
client/server protocol: Handshake v10, AuthSwitchRequest, AuthMoreData), since a real server
cannot be made to misbehave this way."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from replicator.config import Secret, SourceConfig
from replicator.errors import ConfigError, ServerRefusedError
from replicator.source.connection import open_connection

PASSWORD = "Prod-Secret-Pw-8812"
_OAEP = padding.OAEP(mgf=padding.MGF1(hashes.SHA1()), algorithm=hashes.SHA1(), label=None)
# CLIENT_LONG_PASSWORD, CONNECT_WITH_DB, PROTOCOL_41, TRANSACTIONS, SECURE_CONNECTION,
# MULTI_RESULTS, PLUGIN_AUTH, PLUGIN_AUTH_LENENC_CLIENT_DATA; no CLIENT_SSL
_CAPABILITIES = 0x1 | 0x8 | 0x200 | 0x2000 | 0x8000 | 0x20000 | 0x80000 | 0x200000
_OK = b"\x00\x00\x00\x02\x00\x00\x00"
_DENIED = b"\xff" + struct.pack("<H", 1045) + b"#28000Access denied"


def _packet(seq: int, body: bytes) -> bytes:
    return struct.pack("<I", len(body))[:3] + bytes([seq]) + body


def _read(sock: socket.socket) -> tuple[int, bytes]:
    head = _exactly(sock, 4)
    return head[3], _exactly(sock, int.from_bytes(head[:3], "little"))


def _exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        more = sock.recv(size - len(data))
        if not more:
            raise ConnectionError("the client closed the connection")
        data += more
    return data


def _greeting(salt: bytes, plugin: bytes) -> bytes:
    return (
        b"\x0a8.0.36-impostor\x00" + struct.pack("<I", 7) + salt[:8] + b"\x00"
        + struct.pack("<H", _CAPABILITIES & 0xFFFF) + b"\x2d" + struct.pack("<H", 2)
        + struct.pack("<H", _CAPABILITIES >> 16) + bytes([21]) + b"\x00" * 10 + salt[8:]
        + b"\x00" + plugin + b"\x00"
    )  # fmt: skip


class Impostor:
    """Answers at an address as ``mode`` says; ``heard`` holds every password it could read."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.heard: list[bytes] = []
        self.unreadable = 0  # encrypted passwords its own key could not open
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def close(self) -> None:
        self.listener.close()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn, contextlib.suppress(OSError, ValueError):
                self._one(conn)

    def _one(self, conn: socket.socket) -> None:
        salt = os.urandom(20).replace(b"\x00", b"\x01")
        mode = self.mode
        if mode in ("clear", "dialog"):
            conn.sendall(_packet(0, _greeting(salt, b"mysql_native_password")))
            seq, _ = _read(conn)
            switch = b"mysql_clear_password\x00" if mode == "clear" else b"dialog\x00\x04Password: "
            conn.sendall(_packet(seq + 1, b"\xfe" + switch))
            seq, body = _read(conn)
            self.heard.append(body.rstrip(b"\x00"))
            conn.sendall(_packet(seq + 1, _DENIED))
            return
        if mode == "sha256":  # the client's first answer asks for the key
            conn.sendall(_packet(0, _greeting(salt, b"sha256_password")))
            seq, _ = _read(conn)
            conn.sendall(_packet(seq + 1, b"\x01" + self._pem()))
            seq, body = _read(conn)
            self._open(body, salt)
            conn.sendall(_packet(seq + 1, _DENIED))
            return
        if mode == "switch_to_sha2":  # the account's plugin is not the server's default
            conn.sendall(_packet(0, _greeting(salt, b"mysql_native_password")))
            seq, _ = _read(conn)
            conn.sendall(_packet(seq + 1, b"\xfecaching_sha2_password\x00" + salt + b"\x00"))
        else:
            conn.sendall(_packet(0, _greeting(salt, b"caching_sha2_password")))
        seq, _ = _read(conn)  # the scramble: it reveals nothing
        if mode == "sha2_fast":
            conn.sendall(_packet(seq + 1, b"\x01\x03") + _packet(seq + 2, _OK))
            while True:  # the queries a connection sends once logged in
                seq, _ = _read(conn)
                conn.sendall(_packet(seq + 1, _OK))
        conn.sendall(_packet(seq + 1, b"\x01\x04"))  # perform full authentication
        seq, body = _read(conn)
        if body == b"\x02":  # the client asks for the public key: ours
            conn.sendall(_packet(seq + 1, b"\x01" + self._pem()))
            seq, body = _read(conn)
        self._open(body, salt)
        conn.sendall(_packet(seq + 1, _DENIED))

    def _pem(self) -> bytes:
        return self.key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def _open(self, encrypted: bytes, salt: bytes) -> None:
        """Read the password from what the client encrypted, if its own key opens it."""
        try:
            plain = self.key.decrypt(encrypted, _OAEP)
        except ValueError:
            self.unreadable += 1
        else:
            xored = bytes(b ^ salt[i % len(salt)] for i, b in enumerate(plain))
            self.heard.append(xored.rstrip(b"\x00"))


@pytest.fixture
def impostor(request: pytest.FixtureRequest) -> Iterator[Impostor]:
    found = Impostor(request.param)
    yield found
    found.close()


def _config(port: int, **changes: object) -> SourceConfig:
    cfg = SourceConfig(
        host="127.0.0.1", port=port, user="repl", password=Secret(PASSWORD), connect_timeout=5
    )
    return dataclasses.replace(cfg, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("impostor", "asked"),
    [
        ("clear", "the password in clear text"),
        ("dialog", "the password in clear text"),
        ("sha2_full", "caching_sha2_password full authentication with its own RSA key"),
        ("switch_to_sha2", "caching_sha2_password full authentication with its own RSA key"),
        ("sha256", "sha256_password with its own RSA key"),
    ],
    indirect=["impostor"],
)
def test_the_password_is_not_handed_to_whoever_answers(impostor: Impostor, asked: str) -> None:
    with pytest.raises(ServerRefusedError) as refused:
        open_connection(_config(impostor.port))
    assert f"the server asked for {asked} on a connection without TLS" in str(refused.value)
    assert "source.tls" in str(refused.value)
    assert impostor.heard == []


@pytest.mark.parametrize("impostor", ["sha2_full"], indirect=True)
def test_a_pinned_key_keeps_the_password_from_an_impostor(
    impostor: Impostor, tmp_path: Path
) -> None:
    """With the server's own key given, the password goes encrypted to that key: the
    impostor, holding another, reads nothing (and is refused the login it cannot check)."""
    server = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pinned = tmp_path / "server.pem"
    pinned.write_bytes(
        server.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    with pytest.raises(ServerRefusedError, match="Access denied"):
        open_connection(_config(impostor.port, server_public_key_file=str(pinned)))
    assert impostor.heard == []
    assert impostor.unreadable >= 1  # (a second login follows: the anonymous account's probe)


@pytest.mark.parametrize("impostor", ["sha2_full"], indirect=True)
def test_taking_the_key_the_server_sends_is_a_choice(impostor: Impostor) -> None:
    """``get_server_public_key: true`` is what the docs warn of: whoever answers reads it."""
    with pytest.raises(ServerRefusedError, match="Access denied"):
        open_connection(_config(impostor.port, get_server_public_key=True))
    assert impostor.heard == [PASSWORD.encode()]


@pytest.mark.parametrize("impostor", ["sha2_fast"], indirect=True)
def test_a_login_the_server_answers_from_its_cache_goes_on_with_a_warning(
    impostor: Impostor, caplog: pytest.LogCaptureFixture
) -> None:
    """It works until the server's cache is emptied (a restart): that is said in advance,
    once, not at the outage."""
    for _ in range(2):
        open_connection(_config(impostor.port)).close()
    open_connection(_config(impostor.port, get_server_public_key=True)).close()
    assert impostor.heard == []
    warned = [r.getMessage() for r in caplog.records if r.name == "replicator.source"]
    assert len(warned) == 1
    assert "needs full authentication, refused without TLS" in warned[0]


def test_an_unreadable_key_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        open_connection(_config(1, server_public_key_file=str(tmp_path / "missing.pem")))
    assert "cannot read source.server_public_key_file" in str(caught.value)
