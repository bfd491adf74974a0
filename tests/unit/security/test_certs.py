"""The test CA and certificate maker (rillet.security.certs): the chain verifies, the keys and
keystores load in cryptography, Python's ssl and Java's keytool, and a TLS handshake succeeds
with the material and fails with another CA's, an expired certificate or the wrong host."""

from __future__ import annotations

import ipaddress
import shutil
import socket
import ssl
import subprocess
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID
from cryptography.x509.verification import (
    PolicyBuilder,
    ServerVerifier,
    Store,
    VerificationError,
)

from rillet.security.certs import CertFiles, make_ca, make_cert

Y2030 = datetime(2030, 1, 1, tzinfo=UTC)


def load_cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def leaf_of(files: CertFiles) -> x509.Certificate:
    return x509.load_pem_x509_certificates(files.cert.read_bytes())[0]


def server_verifier(ca: Path, name: x509.DNSName | x509.IPAddress) -> ServerVerifier:
    return PolicyBuilder().store(Store([load_cert(ca)])).build_server_verifier(name)


@pytest.fixture
def ca(tmp_path: Path) -> Path:
    return make_ca(tmp_path / "tls")


# ---------------------------------------------------------------------------------------------
# The CA and the certificates


def test_make_ca_writes_a_self_signed_ca(tmp_path: Path) -> None:
    ca = make_ca(tmp_path / "new" / "dir", common_name="My CA", days=10)
    assert ca == tmp_path / "new" / "dir" / "ca.pem"
    cert = load_cert(ca)
    assert cert.subject.rfc4514_string() == "CN=My CA" == cert.issuer.rfc4514_string()
    cert.verify_directly_issued_by(cert)
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert cert.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign
    assert cert.not_valid_after_utc - cert.not_valid_before_utc == timedelta(days=10)
    key = serialization.load_pem_private_key(ca.with_suffix(".key").read_bytes(), password=None)
    assert key.public_key() == cert.public_key()
    assert ca.with_suffix(".key").stat().st_mode & 0o777 == 0o600


def test_the_chain_verifies_for_server_and_client_auth(ca: Path, tmp_path: Path) -> None:
    files = make_cert(ca, tmp_path / "out", "broker")
    assert files == CertFiles(
        cert=tmp_path / "out" / "broker.pem",
        key=tmp_path / "out" / "broker.key",
        ca=ca,
        keystore=tmp_path / "out" / "broker.keystore.pem",
    )
    chain = x509.load_pem_x509_certificates(files.cert.read_bytes())
    assert chain[1] == load_cert(ca)  # leaf then CA
    chain[0].verify_directly_issued_by(chain[1])
    for name in (x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))):
        verified = server_verifier(ca, name).verify(chain[0], [])
        assert verified == [chain[0], chain[1]]
    client = PolicyBuilder().store(Store([load_cert(ca)])).build_client_verifier()
    assert client.verify(chain[0], []).subjects == [
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
    ]


def test_the_leaf_is_an_ec_p256_end_entity_for_server_and_client(ca: Path) -> None:
    leaf = leaf_of(make_cert(ca, ca.parent, "node", hosts=["broker1.example", "::1"]))
    ext = leaf.extensions
    assert not ext.get_extension_for_class(x509.BasicConstraints).value.ca
    assert list(ext.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.SERVER_AUTH,
        ExtendedKeyUsageOID.CLIENT_AUTH,
    ]
    assert list(ext.get_extension_for_class(x509.SubjectAlternativeName).value) == [
        x509.DNSName("broker1.example"),
        x509.IPAddress(ipaddress.ip_address("::1")),
    ]
    key = leaf.public_key()
    assert isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name == "secp256r1"
    assert isinstance(leaf.signature_hash_algorithm, hashes.SHA256)
    assert leaf.subject.rfc4514_string() == "CN=node"
    assert leaf.issuer == load_cert(ca).subject


@pytest.mark.parametrize(
    ("kwargs", "subject"),
    [
        ({"subject": "CN=alice,OU=eng,O=Rillet"}, "CN=alice,OU=eng,O=Rillet"),
        ({"common_name": "Alice"}, "CN=Alice"),
        ({}, "CN=alice"),
    ],
)
def test_subject(ca: Path, kwargs: dict[str, Any], subject: str) -> None:
    leaf = leaf_of(make_cert(ca, ca.parent, "alice", **kwargs))
    assert leaf.subject.rfc4514_string() == subject


def test_an_expired_certificate(ca: Path) -> None:
    not_after = datetime.now(UTC) - timedelta(days=1)
    leaf = leaf_of(make_cert(ca, ca.parent, "old", not_after=not_after, days=30))
    assert leaf.not_valid_after_utc == not_after.replace(microsecond=0)
    assert leaf.not_valid_after_utc < datetime.now(UTC)
    assert leaf.not_valid_before_utc == leaf.not_valid_after_utc - timedelta(days=30)
    with pytest.raises(VerificationError):
        server_verifier(ca, x509.DNSName("localhost")).verify(leaf, [])


def test_not_before_and_not_after_override_days(ca: Path) -> None:
    start = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    leaf = leaf_of(make_cert(ca, ca.parent, "a", not_before=start, days=2))
    assert (leaf.not_valid_before_utc, leaf.not_valid_after_utc) == (
        start,
        start + timedelta(days=2),
    )
    end = start + timedelta(hours=1)
    leaf = leaf_of(make_cert(ca, ca.parent, "b", not_before=start, not_after=end))
    assert (leaf.not_valid_before_utc, leaf.not_valid_after_utc) == (start, end)


# ---------------------------------------------------------------------------------------------
# Keys and keystores


def test_an_encrypted_key_loads_only_with_its_password(ca: Path) -> None:
    files = make_cert(ca, ca.parent, "broker", key_password="s3cret")
    for path in (files.key, files.keystore):
        pem = path.read_bytes()
        assert pem.startswith(b"-----BEGIN ENCRYPTED PRIVATE KEY-----")
        with pytest.raises(TypeError):
            serialization.load_pem_private_key(pem, password=None)
        with pytest.raises(ValueError):
            serialization.load_pem_private_key(pem, password=b"wrong")
        key = serialization.load_pem_private_key(pem, password=b"s3cret")
        assert key.public_key() == leaf_of(files).public_key()
    assert files.key.stat().st_mode & 0o777 == 0o600
    assert files.keystore.stat().st_mode & 0o777 == 0o600


def test_the_pem_keystore_is_the_key_then_the_chain(ca: Path) -> None:
    files = make_cert(ca, ca.parent, "broker")
    assert files.keystore.read_bytes() == files.key.read_bytes() + files.cert.read_bytes()
    assert files.key.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")  # PKCS8


def test_the_pkcs12_keystore_holds_key_leaf_and_ca(ca: Path) -> None:
    files = make_cert(ca, ca.parent, "broker", pkcs12_password="storepass")
    assert files.pkcs12 == ca.parent / "broker.p12"
    assert files.pkcs12.stat().st_mode & 0o777 == 0o600
    key, cert, cas = pkcs12.load_key_and_certificates(files.pkcs12.read_bytes(), b"storepass")
    assert cert == leaf_of(files)
    assert key is not None and key.public_key() == cert.public_key()
    assert cas == [load_cert(ca)]
    entry = pkcs12.load_pkcs12(files.pkcs12.read_bytes(), b"storepass").cert
    assert entry is not None and entry.friendly_name == b"broker"
    with pytest.raises(ValueError):
        pkcs12.load_key_and_certificates(files.pkcs12.read_bytes(), b"wrong")


@pytest.mark.skipif(shutil.which("keytool") is None, reason="needs Java's keytool")
def test_java_keytool_reads_the_pkcs12_keystore(ca: Path) -> None:
    files = make_cert(ca, ca.parent, "broker", pkcs12_password="storepass")
    listing = subprocess.run(
        [
            *("keytool", "-list", "-v", "-storetype", "PKCS12", "-storepass", "storepass"),
            *("-keystore", str(files.pkcs12)),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    assert "Entry type: PrivateKeyEntry" in listing
    assert "Certificate chain length: 2" in listing


@pytest.mark.parametrize("password", [None, "s3cret"])
def test_python_ssl_loads_the_pair_and_the_keystore(ca: Path, password: str | None) -> None:
    files = make_cert(ca, ca.parent, "broker", key_password=password)
    ctx = ssl.create_default_context(cafile=files.ca)
    ctx.load_cert_chain(files.cert, files.key, password=password)
    ctx.load_cert_chain(files.keystore, password=password)
    if password is not None:
        with pytest.raises(ssl.SSLError):
            ctx.load_cert_chain(files.keystore, password="wrong")


# ---------------------------------------------------------------------------------------------
# TLS handshakes: a node's certificate as server, another as client, mutual TLS


def server_context(files: CertFiles) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=files.ca)
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.load_cert_chain(files.keystore)
    return ctx


def client_context(ca: Path, files: CertFiles) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=ca)  # CERT_REQUIRED, check_hostname
    ctx.load_cert_chain(files.cert, files.key)
    return ctx


def _serve(ctx: ssl.SSLContext, sock: socket.socket) -> Any:
    with sock, ctx.wrap_socket(sock, server_side=True) as tls:
        tls.sendall(b"ok")
        return tls.getpeercert()


def handshake(server: ssl.SSLContext, client: ssl.SSLContext, host: str = "localhost") -> Any:
    """A TLS handshake over a socket pair, and a few bytes from server to client; returns the
    client certificate the server saw, or raises the client's ssl.SSLError."""
    server_sock, client_sock = socket.socketpair()
    server_sock.settimeout(10)
    client_sock.settimeout(10)
    with ThreadPoolExecutor(1) as pool:
        served = pool.submit(_serve, server, server_sock)
        with client_sock, client.wrap_socket(client_sock, server_hostname=host) as tls:
            received = tls.recv(2)
        assert received == b"ok"
        return served.result()


def test_mutual_tls_handshake(ca: Path) -> None:
    broker = make_cert(ca, ca.parent, "broker")
    alice = make_cert(ca, ca.parent, "alice", subject="CN=alice,O=Rillet")
    peer = handshake(server_context(broker), client_context(ca, alice))
    assert peer["subject"] == ((("organizationName", "Rillet"),), (("commonName", "alice"),))
    handshake(server_context(broker), client_context(ca, alice), host="127.0.0.1")


def test_handshake_with_an_encrypted_key(ca: Path) -> None:
    broker = make_cert(ca, ca.parent, "broker", key_password="pw")
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=ca)
    server.load_cert_chain(broker.keystore, password="pw")
    client = ssl.create_default_context(cafile=ca)
    assert handshake(server, client) is None  # no client certificate asked for


def test_handshake_fails_with_a_server_certificate_of_another_ca(ca: Path, tmp_path: Path) -> None:
    other = make_ca(tmp_path / "other")
    impostor = make_cert(other, other.parent, "broker")
    alice = make_cert(ca, ca.parent, "alice")
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(server_context(impostor), client_context(ca, alice))


def test_handshake_fails_with_a_client_certificate_of_another_ca(ca: Path, tmp_path: Path) -> None:
    other = make_ca(tmp_path / "other")
    broker = make_cert(ca, ca.parent, "broker")
    mallory = make_cert(other, other.parent, "mallory")
    with pytest.raises(ssl.SSLError):
        handshake(server_context(broker), client_context(ca, mallory))


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"hosts": ["broker1.example"]}, "Hostname mismatch"),
        ({"not_after": datetime.now(UTC) - timedelta(minutes=1)}, "certificate has expired"),
    ],
)
def test_handshake_fails_for_the_wrong_host_or_an_expired_certificate(
    ca: Path, kwargs: dict[str, Any], reason: str
) -> None:
    broker = make_cert(ca, ca.parent, "broker", **kwargs)
    alice = make_cert(ca, ca.parent, "alice")
    with pytest.raises(ssl.SSLCertVerificationError) as e:
        handshake(server_context(broker), client_context(ca, alice))
    assert reason in str(e.value.verify_message)


# ---------------------------------------------------------------------------------------------
# Refusals


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": ""}, "name must not be empty"),
        ({"name": "a/b"}, "path separator"),
        ({"days": 0}, "days must be at least 1"),
        ({"not_before": Y2030, "not_after": Y2030}, "must be after"),
        ({"not_after": datetime(2030, 1, 1)}, "timezone-aware"),
        ({"subject": "garbage"}, "not an RFC 4514 name"),
        ({"subject": ""}, "subject must not be empty"),
        ({"subject": "CN=a", "common_name": "b"}, "not both"),
        ({"common_name": "x" * 65}, "1 to 64 characters"),
        ({"hosts": []}, "at least one"),
        ({"hosts": "localhost"}, "not the string"),
        ({"hosts": ["bad host"]}, "not a host name"),
        ({"hosts": ["bücher.example"]}, "xn--"),
        ({"key_password": ""}, "key_password must not be empty"),
        ({"pkcs12_password": ""}, "pkcs12_password must not be empty"),
    ],
)
def test_make_cert_refuses_bad_input(ca: Path, kwargs: dict[str, Any], message: str) -> None:
    args = {"name": "broker", **kwargs}
    with pytest.raises(ValueError, match=message):
        make_cert(ca, ca.parent, **args)
    assert not (ca.parent / "broker.pem").exists()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": ""}, "name must not be empty"),
        ({"name": "../ca"}, "path separator"),
        ({"days": 0}, "days must be at least 1"),
        ({"common_name": ""}, "1 to 64 characters"),
    ],
)
def test_make_ca_refuses_bad_input(tmp_path: Path, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_ca(tmp_path, **kwargs)
    assert list(tmp_path.iterdir()) == []


def test_existing_files_are_refused_unless_overwrite(ca: Path) -> None:
    before = ca.read_bytes()
    with pytest.raises(FileExistsError, match="overwrite=True"):
        make_ca(ca.parent)
    assert ca.read_bytes() == before
    assert load_cert(make_ca(ca.parent, overwrite=True)) != x509.load_pem_x509_certificate(before)

    (ca.parent / "broker.key").write_text("mine")
    with pytest.raises(FileExistsError) as e:
        make_cert(ca, ca.parent, "broker")
    assert e.value.filename == str(ca.parent / "broker.key")
    assert not (ca.parent / "broker.pem").exists()  # nothing written
    files = make_cert(ca, ca.parent, "broker", overwrite=True)
    assert files.key.stat().st_mode & 0o777 == 0o600


def test_a_certificate_may_not_replace_the_ca(ca: Path) -> None:
    with pytest.raises(ValueError, match="CA's own files"):
        make_cert(ca, ca.parent, "ca", overwrite=True)


def test_the_ca_must_exist_be_a_ca_and_match_its_key(ca: Path, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"CA certificate .* not found"):
        make_cert(tmp_path / "nowhere" / "ca.pem", tmp_path, "broker")
    leaf = make_cert(ca, ca.parent, "leaf")
    with pytest.raises(ValueError, match="not a CA certificate"):
        make_cert(leaf.cert, tmp_path, "broker")  # leaf.key lies beside it
    other = make_ca(tmp_path / "other")
    shutil.copy(ca.with_suffix(".key"), other.with_suffix(".key"))
    with pytest.raises(ValueError, match="does not belong"):
        make_cert(other, tmp_path, "broker")
    other.with_suffix(".key").unlink()
    with pytest.raises(FileNotFoundError, match="CA key"):
        make_cert(other, tmp_path, "broker")
    other.with_suffix(".key").write_text("not a key")
    with pytest.raises(ValueError, match="not a PEM private key"):
        make_cert(other, tmp_path, "broker")
