"""The client's security configs: ``security_protocol`` and TLS, with kafka-python's names
(``ssl_cafile``, ``ssl_certfile``, ``ssl_keyfile``, ``ssl_password``,
``ssl_check_hostname``) or the Java client's (``ssl.truststore.location``,
``ssl.keystore.location``, ``ssl.key.password``, ... with ``ssl.*.type`` PEM or PKCS12), so
a Kafka ``client.properties`` works as it is (``--command-config`` in the tools).

Both transports speak TLS: gRPC through its channel credentials, Kafka's protocol through
:class:`~rillet.client.tls_socket.TlsSocket`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import grpc

from rillet.client.configs import merge_configs
from rillet.errors import (
    InvalidConfigurationError,
    KafkaError,
    KafkaTimeoutError,
    SslAuthenticationError,
)
from rillet.security.tls import ClientTls, load_key_material

__all__ = [
    "SECURITY_CONFIG_TYPES",
    "SECURITY_DEFAULTS",
    "client_tls",
    "open_channel",
    "tls_from_properties",
    "unreachable",
]

SECURITY_DEFAULTS: Mapping[str, Any] = {
    "security_protocol": "PLAINTEXT",
    # kafka-python's names
    "ssl_cafile": None,
    "ssl_certfile": None,
    "ssl_keyfile": None,
    "ssl_password": None,
    "ssl_check_hostname": True,
    # the Java client's names
    "ssl_truststore_location": None,
    "ssl_truststore_type": "JKS",
    "ssl_truststore_password": None,
    "ssl_truststore_certificates": None,
    "ssl_keystore_location": None,
    "ssl_keystore_type": "JKS",
    "ssl_keystore_password": None,
    "ssl_keystore_key": None,
    "ssl_keystore_certificate_chain": None,
    "ssl_key_password": None,
    "ssl_endpoint_identification_algorithm": "https",
}

# The same configs by their dotted names, as a client.properties file has them (for the
# tools, which check every key they are given), with their types.
SECURITY_CONFIG_TYPES: Mapping[str, str] = {
    name.replace("_", "."): "boolean" if isinstance(default, bool) else "string"
    for name, default in SECURITY_DEFAULTS.items()
}

_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_JAVA_STORE_KEYS = (
    "ssl_truststore_location",
    "ssl_truststore_certificates",
    "ssl_keystore_location",
    "ssl_keystore_key",
)


def client_tls(config: Mapping[str, Any]) -> ClientTls | None:
    """The TLS a client with ``config`` connects with (None: PLAINTEXT); raise
    InvalidConfigurationError for a protocol it cannot speak or material that does not
    load."""
    protocol = str(config.get("security_protocol") or "PLAINTEXT").upper()
    if protocol not in _PROTOCOLS:
        raise InvalidConfigurationError(
            f"Invalid value {config['security_protocol']} for configuration security.protocol: "
            f"String must be one of: {', '.join(_PROTOCOLS)}"
        )
    if protocol.startswith("SASL"):
        raise InvalidConfigurationError(
            f"Invalid value {protocol} for configuration security.protocol: SASL is not "
            "supported yet; use PLAINTEXT or SSL"
        )
    if protocol == "PLAINTEXT":
        return None
    if any(config.get(k) for k in _JAVA_STORE_KEYS):
        settings = {
            "ssl." + k[len("ssl_") :].replace("_", "."): v
            for k, v in config.items()
            if k.startswith("ssl_") and k in SECURITY_DEFAULTS
        }
        has_keystore = bool(config.get("ssl_keystore_location") or config.get("ssl_keystore_key"))
        m = load_key_material(settings, keystore=has_keystore)
        algorithm = str(config.get("ssl_endpoint_identification_algorithm") or "")
        return ClientTls(m.trusted, m.key, m.chain, algorithm.lower() == "https")
    return ClientTls.from_files(
        config.get("ssl_cafile"),
        config.get("ssl_certfile"),
        config.get("ssl_keyfile"),
        config.get("ssl_password"),
        bool(config.get("ssl_check_hostname", True)),
    )


def tls_from_properties(props: Mapping[str, Any]) -> ClientTls | None:
    """:func:`client_tls` of Kafka's dotted names (``security.protocol``, ``ssl.*``)."""
    return client_tls(merge_configs(SECURITY_DEFAULTS, props, {}, "security"))


def open_channel(
    address: str, tls: ClientTls | None, options: Sequence[tuple[str, Any]] = ()
) -> grpc.Channel:
    """A channel to ``address``: over TLS when ``tls`` is given, else plaintext."""
    if tls is None:
        return grpc.insecure_channel(address, options=options)
    return grpc.secure_channel(address, tls.grpc_credentials(), options=options)


# What gRPC's error details say when TLS is what failed.
_TLS_FAILURES = ("handshake", "certificate", "ssl", "tls")


def unreachable(address: str, error: grpc.RpcError, tls: ClientTls | None) -> KafkaError:
    """The error for a call to ``address`` that failed with ``error``: SslAuthenticationError
    when TLS is what failed (the broker's certificate not trusted, or ours refused: a TLS
    broker closes the connection on a client it does not accept), else a timeout naming the
    cause."""
    details = str(error.details() if isinstance(error, grpc.Call) else error) or ""
    lowered = details.lower()
    if tls is not None and any(sign in lowered for sign in _TLS_FAILURES):
        return SslAuthenticationError(f"TLS handshake with {address} failed: {details}")
    if tls is not None and "socket closed" in lowered:
        return SslAuthenticationError(
            f"{address} closed the TLS connection: it does not accept this client's "
            f"certificate (or has none to check it with): {details}"
        )
    if tls is None and "socket closed" in lowered:
        return KafkaTimeoutError(
            f"{address} closed the connection: a TLS listener (security.protocol=SSL) closes "
            f"plaintext ones ({details})"
        )
    code = error.code() if isinstance(error, grpc.Call) else None
    return KafkaTimeoutError(
        f"request to {address} failed: {code.name if code else 'error'} ({details})"
    )
