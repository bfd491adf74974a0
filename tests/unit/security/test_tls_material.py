"""TLS key material from Kafka's ssl.* settings, listeners' contexts, and reloading."""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import threading
import time
from pathlib import Path
from typing import Any

import grpc
import pytest

from rillet.config import BrokerConfig
from rillet.errors import InvalidConfigurationError
from rillet.security.certs import CertFiles, make_ca, make_cert
from rillet.security.principal import distinguished_name
from rillet.security.tls import ClientTls, ListenerTls, load_key_material


@pytest.fixture
def ca(tmp_path: Path) -> Path:
    return make_ca(tmp_path / "ca")


def _settings(**overrides: Any) -> dict[str, Any]:
    base = BrokerConfig.embedded_default("/nonexistent").listener_config("SSL", "ssl.")
    base.update({k.replace("_", "."): v for k, v in overrides.items()})
    return base


def _pem(files: CertFiles, **more: Any) -> dict[str, Any]:
    """A PEM keystore and truststore of ``files``, with ``more`` over them."""
    pem = {
        "ssl_keystore_type": "PEM",
        "ssl_keystore_location": str(files.keystore),
        "ssl_truststore_type": "PEM",
        "ssl_truststore_location": str(files.ca),
    }
    return _settings(**{**pem, **more})


def test_a_pem_keystore_file_an_inline_one_and_pkcs12_give_the_same_material(
    ca: Path, tmp_path: Path
) -> None:
    files = make_cert(ca, tmp_path, "node1", pkcs12_password="secret")
    from_file = load_key_material(_pem(files), keystore=True)
    inline = load_key_material(
        _settings(
            ssl_keystore_type="PEM",
            ssl_keystore_key=files.key.read_text(),
            ssl_keystore_certificate_chain=files.cert.read_text(),
            ssl_truststore_type="PEM",
            ssl_truststore_certificates=files.ca.read_text(),
        ),
        keystore=True,
    )
    assert files.pkcs12 is not None
    p12 = load_key_material(
        _settings(
            ssl_keystore_type="PKCS12",
            ssl_keystore_location=str(files.pkcs12),
            ssl_keystore_password="secret",
            ssl_truststore_type="PKCS12",
            ssl_truststore_location=str(files.pkcs12),
            ssl_truststore_password="secret",
        ),
        keystore=True,
    )
    assert from_file.key == inline.key == p12.key
    assert from_file.chain == inline.chain
    assert from_file.trusted == inline.trusted
    assert p12.chain is not None and distinguished_name(p12.chain) == "CN=node1"


def test_an_encrypted_key_needs_ssl_key_password(ca: Path, tmp_path: Path) -> None:
    files = make_cert(ca, tmp_path, "node1", key_password="pw")
    assert load_key_material(_pem(files, ssl_key_password="pw"), keystore=True).key
    with pytest.raises(InvalidConfigurationError, match="Failed to load SSL keystore"):
        load_key_material(_pem(files, ssl_key_password="wrong"), keystore=True)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"ssl_keystore_type": "JKS"}, "Java keystores cannot be read outside the JVM"),
        ({"ssl_keystore_location": "/nonexistent/ks.pem"}, "Failed to load SSL keystore"),
        ({"ssl_keystore_location": None}, "ssl.keystore.location is required"),
        ({"ssl_truststore_location": "/etc/hostname"}, "Failed to load SSL truststore"),
        ({"ssl_keystore_key": "x"}, "cannot both be set"),
    ],
)
def test_bad_material_is_refused_naming_what_failed(
    ca: Path, tmp_path: Path, overrides: dict[str, Any], message: str
) -> None:
    files = make_cert(ca, tmp_path, "node1")
    with pytest.raises(InvalidConfigurationError, match=message):
        ListenerTls("SSL", _pem(files, **overrides))


def test_client_auth_required_needs_a_truststore(ca: Path, tmp_path: Path) -> None:
    files = make_cert(ca, tmp_path, "node1")
    settings = _pem(files, ssl_client_auth="required", ssl_truststore_location=None)
    with pytest.raises(InvalidConfigurationError, match="no truststore"):
        ListenerTls("SSL", settings)


def test_listener_prefixed_keys_override_the_broker_wide_ones() -> None:
    config = BrokerConfig.embedded_default(
        "/nonexistent",
        {
            "ssl.keystore.location": "/a.pem",
            "listener.name.internal.ssl.keystore.location": "/b.pem",
            "listener.name.internal.ssl.client.auth": "required",
            "ssl.keystore.password": "secret",
        },
    )
    assert config.listener_config("INTERNAL", "ssl.")["ssl.keystore.location"] == "/b.pem"
    assert config.listener_config("INTERNAL", "ssl.")["ssl.client.auth"] == "required"
    assert config.listener_config("EXTERNAL", "ssl.")["ssl.keystore.location"] == "/a.pem"
    assert not config.unknown
    # Passwords are sensitive: described as null, as Kafka does.
    described = {e.name: e.value for e in config.describe()}
    assert described["ssl.keystore.password"] is None
    assert described["ssl.keystore.location"] == "/a.pem"
    with pytest.raises(InvalidConfigurationError, match=r"ssl\.client\.auth"):
        BrokerConfig.embedded_default(
            "/nonexistent", {"listener.name.internal.ssl.client.auth": "sometimes"}
        )


def _serve_once(ctx: ssl.SSLContext) -> tuple[int, threading.Thread, list[str]]:
    """A one-connection TLS server on localhost; the list gets the peer's DN or an error."""
    listener = socket.create_server(("127.0.0.1", 0))
    seen: list[str] = []

    def serve() -> None:
        conn, _ = listener.accept()
        try:
            with ctx.wrap_socket(conn, server_side=True) as tls:
                der = tls.getpeercert(binary_form=True)
                seen.append(distinguished_name(der) if der else "none")
                tls.sendall(b"ok")
        except (ssl.SSLError, OSError) as e:
            seen.append(f"error: {e}")
        finally:
            listener.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener.getsockname()[1], thread, seen


def _connect(port: int, client: ClientTls) -> str:
    """The server's DN, over a TLS connection checked against ``localhost``."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=5)
    with client.ssl_context().wrap_socket(raw, server_hostname="localhost") as tls:
        tls.recv(2)
        der = tls.getpeercert(binary_form=True)
        assert der is not None
        return distinguished_name(der)


def test_mutual_tls_names_the_client_and_refuses_a_client_without_a_certificate(
    ca: Path, tmp_path: Path
) -> None:
    node = make_cert(ca, tmp_path, "node1")
    alice = make_cert(ca, tmp_path, "alice")
    listener = ListenerTls("SSL", _pem(node, ssl_client_auth="required"))
    port, thread, seen = _serve_once(listener.ssl_context())
    client = ClientTls.from_files(str(alice.ca), str(alice.cert), str(alice.key))
    assert _connect(port, client) == "CN=node1"
    thread.join(5)
    assert seen == ["CN=alice"]

    port, thread, seen = _serve_once(listener.ssl_context())
    with pytest.raises((ssl.SSLError, OSError)):
        _connect(port, ClientTls.from_files(str(alice.ca)))
    thread.join(5)
    assert seen and seen[0].startswith("error:")


def test_a_client_refuses_a_server_of_another_ca(ca: Path, tmp_path: Path) -> None:
    node = make_cert(ca, tmp_path, "node1")
    other_ca = make_ca(tmp_path / "other")
    port, thread, _ = _serve_once(ListenerTls("SSL", _pem(node)).ssl_context())
    with pytest.raises(ssl.SSLCertVerificationError):
        _connect(port, ClientTls.from_files(str(other_ca)))
    thread.join(5)


def test_a_listener_serves_a_replaced_keystore_without_a_restart(ca: Path, tmp_path: Path) -> None:
    node = make_cert(ca, tmp_path, "node1")
    listener = ListenerTls("SSL", _pem(node))
    ctx = listener.ssl_context()
    client = ClientTls.from_files(str(node.ca))
    port, thread, _ = _serve_once(ctx)
    assert _connect(port, client) == "CN=node1"
    thread.join(5)

    renewed = make_cert(ca, tmp_path / "renewed", "node1", common_name="node1-renewed")
    os.replace(renewed.keystore, node.keystore)
    time.sleep(1.1)  # a handshake looks at the files at most once a second
    port, thread, _ = _serve_once(ctx)
    assert _connect(port, client) == "CN=node1-renewed"
    thread.join(5)

    # A file that no longer loads keeps the material before it.
    node.keystore.write_text("not a keystore")
    time.sleep(1.1)
    port, thread, _ = _serve_once(ctx)
    assert _connect(port, client) == "CN=node1-renewed"
    thread.join(5)


def _served_subject(port: int) -> str:
    """The subject of the certificate a TLS server on ``port`` presents (not verified)."""
    return distinguished_name(ssl.get_server_certificate(("127.0.0.1", port)).encode())


async def test_a_grpc_listener_serves_a_replaced_keystore_without_a_restart(
    ca: Path, tmp_path: Path
) -> None:
    node = make_cert(ca, tmp_path, "node1")
    listener = ListenerTls("SSL", _pem(node))
    server = grpc.aio.server()
    port = server.add_secure_port("127.0.0.1:0", listener.grpc_credentials())
    await server.start()
    try:
        assert await asyncio.to_thread(_served_subject, port) == "CN=node1"
        renewed = make_cert(ca, tmp_path / "renewed", "node1", common_name="node1-renewed")
        os.replace(renewed.keystore, node.keystore)
        await asyncio.sleep(1.1)  # a handshake looks at the files at most once a second
        assert await asyncio.to_thread(_served_subject, port) == "CN=node1-renewed"
    finally:
        await server.stop(None)
