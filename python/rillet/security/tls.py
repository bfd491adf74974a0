"""TLS for listeners and for the connections brokers and clients open: key material read
from Kafka's ``ssl.*`` settings (PEM or PKCS12 keystores and truststores, as files or, for
PEM, in the config itself), reloaded when its files change, and turned into gRPC credentials
or an :class:`ssl.SSLContext` for the Kafka protocol.

A listener reloads its keystore and truststore without a restart: each new handshake
checks the files (at most once a second) and a changed file is read again; connections
already open keep the certificate they were made with. A file that no longer loads is
logged and the material before it is kept.

gRPC's server credentials cannot ask for a client certificate without requiring one, so on
gRPC listeners ``ssl.client.auth=requested`` asks for none (Kafka-protocol listeners honour
it). gRPC clients always check the server's host name against its certificate.
"""

from __future__ import annotations

import logging
import os
import ssl
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from rillet.errors import InvalidConfigurationError
from rillet.security.principal import SslPrincipalMapper

__all__ = [
    "ClientTls",
    "KeyMaterial",
    "ListenerTls",
    "grpc_channel",
    "load_key_material",
]

_log = logging.getLogger(__name__)

# How often a handshake looks at the key material's files.
_RELOAD_CHECK_S = 1.0
_TLS_VERSIONS = {
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}


@dataclass(frozen=True)
class KeyMaterial:
    """PEM bytes: an unencrypted PKCS8 private key and its certificate chain (leaf first),
    and the trusted CA certificates. Each may be absent."""

    key: bytes | None = None
    chain: bytes | None = None
    trusted: bytes | None = None


def _fail(what: str, location: str, store_type: str, reason: object) -> InvalidConfigurationError:
    return InvalidConfigurationError(
        f"Failed to load SSL {what} {location} of type {store_type}: {reason}"
    )


def _pem_certificates(certs: Sequence[x509.Certificate]) -> bytes:
    return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)


def _pem_key(key: Any) -> bytes:
    return bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def _password(value: str | None) -> bytes | None:
    return value.encode() if value else None


def _read(location: str, what: str, store_type: str) -> bytes:
    try:
        with open(location, "rb") as f:
            return f.read()
    except OSError as e:
        raise _fail(what, location, store_type, e.strerror or e) from None


def _refuse_jks(key: str, location: str | None) -> None:
    raise InvalidConfigurationError(
        f"Invalid value JKS for configuration {key}: Java keystores cannot be read outside the "
        f"JVM{f' ({location})' if location else ''}; use PEM (ssl.{key.split('.')[1]}.type=PEM) "
        "or PKCS12 (keytool -importkeystore -deststoretype PKCS12)"
    )


def _load_keystore(s: Mapping[str, Any]) -> tuple[bytes, bytes]:
    """The keystore's (key, chain) from ``ssl.keystore.*`` and ``ssl.key.password``."""
    store_type = s["ssl.keystore.type"]
    location = s.get("ssl.keystore.location")
    key_password = _password(s.get("ssl.key.password"))
    if store_type == "PEM":
        inline_key, inline_chain = (
            s.get("ssl.keystore.key"),
            s.get("ssl.keystore.certificate.chain"),
        )
        if inline_key or inline_chain:
            if location:
                raise InvalidConfigurationError(
                    "ssl.keystore.location and ssl.keystore.key/ssl.keystore.certificate.chain "
                    "cannot both be set"
                )
            if not (inline_key and inline_chain):
                raise InvalidConfigurationError(
                    "ssl.keystore.key and ssl.keystore.certificate.chain must be set together"
                )
            return _parse_pem_keystore(
                inline_key.encode(), inline_chain.encode(), key_password, "(ssl.keystore.key)"
            )
        if not location:
            raise InvalidConfigurationError("ssl.keystore.location is required for an SSL listener")
        data = _read(location, "keystore", store_type)
        return _parse_pem_keystore(data, data, key_password, location)
    if store_type == "JKS":
        _refuse_jks("ssl.keystore.type", location)
    if not location:
        raise InvalidConfigurationError("ssl.keystore.location is required for an SSL listener")
    data = _read(location, "keystore", store_type)
    try:
        p12_key, cert, extra = pkcs12.load_key_and_certificates(
            data, _password(s.get("ssl.keystore.password")) or key_password
        )
    except (ValueError, TypeError) as e:
        raise _fail("keystore", location, store_type, e) from None
    if p12_key is None or cert is None:
        raise _fail("keystore", location, store_type, "it holds no private key and certificate")
    return _pem_key(p12_key), _pem_certificates([cert, *extra])


def _parse_pem_keystore(
    key_pem: bytes, chain_pem: bytes, password: bytes | None, shown: str
) -> tuple[bytes, bytes]:
    """The first private key of ``key_pem`` (decrypted with ``password``) and the
    certificates of ``chain_pem``, as unencrypted PEM."""
    try:
        key = serialization.load_pem_private_key(_pem_block(key_pem, b"PRIVATE KEY"), password)
        chain = x509.load_pem_x509_certificates(chain_pem)
    except (ValueError, TypeError) as e:
        raise _fail("keystore", shown, "PEM", e) from None
    return _pem_key(key), _pem_certificates(chain)


def _load_truststore(s: Mapping[str, Any]) -> bytes | None:
    """The trusted certificates from ``ssl.truststore.*`` (None: none configured)."""
    store_type = s["ssl.truststore.type"]
    location = s.get("ssl.truststore.location")
    inline = s.get("ssl.truststore.certificates")
    if store_type == "PEM" and inline:
        if location:
            raise InvalidConfigurationError(
                "ssl.truststore.location and ssl.truststore.certificates cannot both be set"
            )
        data, shown = inline.encode(), "(ssl.truststore.certificates)"
    elif not location:
        return None
    elif store_type == "JKS":
        _refuse_jks("ssl.truststore.type", location)
        return None
    else:
        data, shown = _read(location, "truststore", store_type), location
    try:
        if store_type == "PEM":
            certs = x509.load_pem_x509_certificates(data)
        else:
            p12 = pkcs12.load_pkcs12(data, _password(s.get("ssl.truststore.password")))
            certs = [c.certificate for c in p12.additional_certs]
            if p12.cert is not None:
                certs.insert(0, p12.cert.certificate)
    except (ValueError, TypeError) as e:
        raise _fail("truststore", shown, store_type, e) from None
    if not certs:
        raise _fail("truststore", shown, store_type, "it holds no certificate")
    return _pem_certificates(certs)


def _pem_block(data: bytes, label: bytes) -> bytes:
    """The first PEM block whose label ends with ``label`` (``PRIVATE KEY`` finds
    ``ENCRYPTED PRIVATE KEY`` and ``EC PRIVATE KEY`` too)."""
    at = 0
    while (begin := data.find(b"-----BEGIN ", at)) >= 0:
        header_end = data.find(b"-----", begin + 11)
        if header_end < 0:
            break
        name = data[begin + 11 : header_end]
        end_marker = b"-----END " + name + b"-----"
        end = data.find(end_marker, header_end)
        if end < 0:
            break
        if name.endswith(label):
            return data[begin : end + len(end_marker)]
        at = end + len(end_marker)
    raise ValueError(f"no {label.decode()} in PEM")


def load_key_material(settings: Mapping[str, Any], *, keystore: bool) -> KeyMaterial:
    """The key material of Kafka's ``ssl.*`` ``settings``; the keystore only when
    ``keystore`` (a listener needs one; a client uses one to present a certificate).
    Raise InvalidConfigurationError naming what failed to load."""
    key = chain = None
    if keystore:
        key, chain = _load_keystore(settings)
    return KeyMaterial(key, chain, _load_truststore(settings))


def _files(settings: Mapping[str, Any]) -> list[str]:
    return [
        settings[k] for k in ("ssl.keystore.location", "ssl.truststore.location") if settings.get(k)
    ]


def _stamp(files: Sequence[str]) -> tuple[tuple[int, int, int], ...]:
    out = []
    for f in files:
        try:
            st = os.stat(f)
            out.append((st.st_mtime_ns, st.st_size, st.st_ino))
        except OSError:
            out.append((0, 0, 0))
    return tuple(out)


def _verify_mode(client_auth: str) -> ssl.VerifyMode:
    return {
        "required": ssl.CERT_REQUIRED,
        "requested": ssl.CERT_OPTIONAL,
    }.get(client_auth, ssl.CERT_NONE)


def _restrict(ctx: ssl.SSLContext, settings: Mapping[str, Any]) -> None:
    """``ssl.enabled.protocols`` and ``ssl.cipher.suites`` on ``ctx``."""
    versions = [
        _TLS_VERSIONS[p] for p in settings.get("ssl.enabled.protocols", []) if p in _TLS_VERSIONS
    ]
    if not versions:
        raise InvalidConfigurationError(
            "Invalid value "
            + ",".join(settings.get("ssl.enabled.protocols", []))
            + " for configuration ssl.enabled.protocols: none of TLSv1.2, TLSv1.3"
        )
    ctx.minimum_version, ctx.maximum_version = min(versions), max(versions)
    ciphers = settings.get("ssl.cipher.suites") or []
    if ciphers:
        try:
            ctx.set_ciphers(":".join(ciphers))
        except ssl.SSLError:
            raise InvalidConfigurationError(
                f"Invalid value {','.join(ciphers)} for configuration ssl.cipher.suites: "
                "no cipher suite named there is available"
            ) from None


def _load_chain(ctx: ssl.SSLContext, key: bytes, chain: bytes) -> None:
    """``ssl`` reads a key and chain only from a file: a private temporary one, removed
    at once."""
    with tempfile.NamedTemporaryFile(prefix="rillet-tls-", suffix=".pem") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(key + chain)
        f.flush()
        ctx.load_cert_chain(f.name)


class ListenerTls:
    """One SSL listener's TLS: its ``ssl.*`` settings (as
    :meth:`BrokerConfig.listener_config` resolves them), the key material, reloaded as the
    module doc says, and the principal mapper of ``ssl.principal.mapping.rules``."""

    def __init__(self, listener_name: str, settings: Mapping[str, Any]) -> None:
        self.listener_name = listener_name
        self.settings = dict(settings)
        self.client_auth: str = settings["ssl.client.auth"]
        self.principal_mapper = SslPrincipalMapper(settings["ssl.principal.mapping.rules"])
        self._files = _files(settings)
        self._lock = threading.Lock()
        self._stamp = _stamp(self._files)
        self._checked_at = time.monotonic()
        self.material = self._load()
        if self.client_auth == "required" and self.material.trusted is None:
            raise InvalidConfigurationError(
                f"Listener {listener_name} has ssl.client.auth=required but no truststore "
                "(ssl.truststore.location or ssl.truststore.certificates) to check clients with"
            )
        self._context = self._build_context()

    def _load(self) -> KeyMaterial:
        try:
            return load_key_material(self.settings, keystore=True)
        except InvalidConfigurationError as e:
            raise InvalidConfigurationError(f"Listener {self.listener_name}: {e.message}") from None

    def refresh(self) -> bool:
        """Read the key material again when its files changed (looked at no more than once a
        second); True when it did change."""
        now = time.monotonic()
        with self._lock:
            if now - self._checked_at < _RELOAD_CHECK_S:
                return False
            self._checked_at = now
            stamp = _stamp(self._files)
            if stamp == self._stamp:
                return False
            self._stamp = stamp
            try:
                material = self._load()
                context = self._build_context(material)
            except (InvalidConfigurationError, ssl.SSLError) as e:
                _log.warning("keeping the TLS material of listener %s: %s", self.listener_name, e)
                return False
            self.material, self._context = material, context
        _log.info("listener %s reloaded its TLS key material", self.listener_name)
        return True

    # -- gRPC ------------------------------------------------------------------------------

    def grpc_credentials(self) -> grpc.ServerCredentials:
        """Server credentials that pick up reloaded material at each handshake."""

        def configuration(m: KeyMaterial) -> grpc.ServerCertificateConfiguration:
            assert m.key is not None and m.chain is not None
            return grpc.ssl_server_certificate_configuration([(m.key, m.chain)], m.trusted)

        def fetch() -> grpc.ServerCertificateConfiguration | None:
            return configuration(self.material) if self.refresh() else None

        return grpc.dynamic_ssl_server_credentials(
            configuration(self.material),
            fetch,  # type: ignore[arg-type]  # gRPC takes None as "unchanged"; its stubs lack it
            require_client_authentication=self.client_auth == "required",
        )

    # -- the Kafka protocol ------------------------------------------------------------------

    def _build_context(self, material: KeyMaterial | None = None) -> ssl.SSLContext:
        m = material or self.material
        assert m.key is not None and m.chain is not None
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        _restrict(ctx, self.settings)
        _load_chain(ctx, m.key, m.chain)
        ctx.verify_mode = _verify_mode(self.client_auth)
        if m.trusted is not None and ctx.verify_mode != ssl.CERT_NONE:
            ctx.load_verify_locations(cadata=m.trusted.decode())
        # gRPC clients relayed through a Kafka listener negotiate HTTP/2; Kafka clients
        # offer no protocol and get none.
        ctx.set_alpn_protocols(["h2"])
        return ctx

    def ssl_context(self) -> ssl.SSLContext:
        """The context to serve the listener with: at each handshake it hands the connection
        to the context of the newest material."""
        front = self._build_context()

        def swap(conn: ssl.SSLObject, server_name: str | None, ctx: ssl.SSLContext) -> None:
            self.refresh()
            if self._context is not ctx:
                conn.context = self._context

        front.sni_callback = swap
        self._context = front
        return front


@dataclass(frozen=True)
class ClientTls:
    """What a client needs to open TLS connections: the CAs it trusts (None: the system's),
    the certificate and key it presents (None: none), and whether it checks the server's host
    name against its certificate."""

    trusted: bytes | None = None
    key: bytes | None = None
    chain: bytes | None = None
    check_hostname: bool = True

    @classmethod
    def from_files(
        cls,
        cafile: str | None = None,
        certfile: str | None = None,
        keyfile: str | None = None,
        password: str | None = None,
        check_hostname: bool = True,
    ) -> ClientTls:
        """kafka-python's ``ssl_cafile``, ``ssl_certfile``, ``ssl_keyfile`` (the key may
        also be in ``ssl_certfile``), ``ssl_password`` and ``ssl_check_hostname``."""
        trusted = None
        if cafile:
            trusted = _load_truststore(
                {"ssl.truststore.type": "PEM", "ssl.truststore.location": cafile}
            )
        key = chain = None
        if certfile:
            certs = _read(certfile, "certificate", "PEM")
            keys = _read(keyfile, "key", "PEM") if keyfile else certs
            key, chain = _parse_pem_keystore(keys, certs, _password(password), keyfile or certfile)
        return cls(trusted, key, chain, check_hostname)

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> ClientTls:
        """A broker's client side of an SSL listener (replication, the controller quorum):
        the listener's truststore, its keystore as the client certificate, and
        ``ssl.endpoint.identification.algorithm``."""
        has_keystore = bool(
            settings.get("ssl.keystore.location") or settings.get("ssl.keystore.key")
        )
        m = load_key_material(settings, keystore=has_keystore)
        check = (settings.get("ssl.endpoint.identification.algorithm") or "").lower() == "https"
        return cls(m.trusted, m.key, m.chain, check)

    def grpc_credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(self.trusted, self.key, self.chain)

    def ssl_context(self) -> ssl.SSLContext:
        """A client context for the Kafka protocol."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = self.check_hostname
        if self.trusted is not None:
            ctx.load_verify_locations(cadata=self.trusted.decode())
        else:
            ctx.load_default_certs()
        if self.key is not None and self.chain is not None:
            _load_chain(ctx, self.key, self.chain)
        return ctx


def grpc_channel(
    address: str, tls: ClientTls | None, options: Sequence[tuple[str, Any]] = ()
) -> grpc.aio.Channel:
    """An asyncio channel to ``address``: over TLS when ``tls`` is given, else plaintext."""
    if tls is None:
        return grpc.aio.insecure_channel(address, options=options)
    return grpc.aio.secure_channel(address, tls.grpc_credentials(), options=options)
