"""The client's security configs: ``security_protocol``, TLS and SASL, with kafka-python's
names (``ssl_cafile``, ``ssl_certfile``, ``ssl_keyfile``, ``ssl_password``,
``ssl_check_hostname``; ``sasl_mechanism``, ``sasl_plain_username``, ``sasl_plain_password``)
or the Java client's (``ssl.truststore.location``, ``ssl.keystore.location``,
``ssl.key.password``, ... with ``ssl.*.type`` PEM or PKCS12; ``sasl.jaas.config``), so a
Kafka ``client.properties`` works as it is (``--command-config`` in the tools).

Both transports speak TLS: gRPC through its channel credentials, Kafka's protocol through
:class:`~rillet.client.tls_socket.TlsSocket`. Only Kafka's protocol speaks SASL
(``SASL_PLAINTEXT``, ``SASL_SSL``; :mod:`rillet.client.sasl`): a broker's gRPC listeners
take no SASL, and its SASL listeners relay no gRPC, so SASL needs ``transport="kafka"``
(``auto`` settles on it), and is refused for a client that speaks gRPC only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import grpc

from rillet.client.configs import merge_configs
from rillet.client.sasl import SASL_MECHANISMS, ClientSasl
from rillet.errors import (
    InvalidConfigurationError,
    KafkaError,
    KafkaTimeoutError,
    SslAuthenticationError,
)
from rillet.security.sasl import PLAIN_LOGIN_MODULE, parse_jaas
from rillet.security.tls import ClientTls, load_key_material

__all__ = [
    "SECURITY_CONFIG_TYPES",
    "SECURITY_DEFAULTS",
    "client_sasl",
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
    # SASL, by kafka-python's names (the username and password serve SCRAM too), or the
    # Java client's sasl.jaas.config (a PlainLoginModule or ScramLoginModule with username
    # and password options).
    "sasl_mechanism": None,
    "sasl_plain_username": None,
    "sasl_plain_password": None,
    "sasl_jaas_config": None,
}

# The same configs by their dotted names, as a client.properties file has them (for the
# tools, which check every key they are given), with their types.
SECURITY_CONFIG_TYPES: Mapping[str, str] = {
    name.replace("_", "."): "boolean" if isinstance(default, bool) else "string"
    for name, default in SECURITY_DEFAULTS.items()
}

_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_JAVA_STORE_KEYS = (
    "ssl_truststore_location",
    "ssl_truststore_certificates",
    "ssl_keystore_location",
    "ssl_keystore_key",
)


def _protocol(config: Mapping[str, Any]) -> str:
    protocol = str(config.get("security_protocol") or "PLAINTEXT").upper()
    if protocol not in _PROTOCOLS:
        raise InvalidConfigurationError(
            f"Invalid value {config['security_protocol']} for configuration security.protocol: "
            f"String must be one of: {', '.join(_PROTOCOLS)}"
        )
    return protocol


def client_sasl(config: Mapping[str, Any]) -> ClientSasl | None:
    """The SASL credentials a client with ``config`` authenticates with (None: not a SASL
    protocol); raise InvalidConfigurationError for an unknown mechanism, missing credentials,
    a client on gRPC (``transport`` "grpc", or no ``transport`` config: a client that speaks
    gRPC only), or a transactional id or group id (their calls go over gRPC)."""
    protocol = _protocol(config)
    if not protocol.startswith("SASL_"):
        return None
    transport = str(config.get("transport") or "grpc")
    if transport == "grpc":
        speaks = "transport=grpc" if "transport" in config else "this client speaks gRPC only"
        raise InvalidConfigurationError(
            f"Invalid value {protocol} for configuration security.protocol: SASL is spoken "
            f"over Kafka's protocol only (transport=kafka), and {speaks}: gRPC listeners take "
            "no SASL"
        )
    for name, what in (("transactional_id", "transactions"), ("group_id", "consumer groups")):
        if config.get(name) is not None:
            raise InvalidConfigurationError(
                f"{name.replace('_', '.')} with security.protocol={protocol}: Rillet's client "
                f"sends {what} over gRPC (relayed by a Kafka listener), and a SASL listener "
                "relays no gRPC; over SASL it produces and fetches (assign() and seek()) only"
            )
    mechanism = str(config.get("sasl_mechanism") or "").upper()
    if mechanism not in SASL_MECHANISMS:
        given = config.get("sasl_mechanism")
        raise InvalidConfigurationError(
            (
                f"Invalid value {given} for configuration sasl.mechanism"
                if given
                else f"security.protocol={protocol} needs sasl.mechanism"
            )
            + f": String must be one of: {', '.join(SASL_MECHANISMS)}"
        )
    username, password = config.get("sasl_plain_username"), config.get("sasl_plain_password")
    jaas = config.get("sasl_jaas_config")
    if jaas:
        module = PLAIN_LOGIN_MODULE if mechanism == "PLAIN" else _SCRAM_LOGIN_MODULE
        entry = parse_jaas(str(jaas))
        if entry.login_module != module:
            raise InvalidConfigurationError(
                f"Invalid value for configuration sasl.jaas.config: sasl.mechanism={mechanism} "
                f"takes {module}, not {entry.login_module}"
            )
        username = username or entry.options.get("username")
        password = password or entry.options.get("password")
    if not username or not password:
        credentials = (("sasl_plain_username", username), ("sasl_plain_password", password))
        missing = " and ".join(name for name, value in credentials if not value)
        raise InvalidConfigurationError(
            f"security.protocol={protocol} with sasl.mechanism={mechanism} needs {missing} "
            "(or username and password in sasl.jaas.config)"
        )
    return ClientSasl(mechanism, str(username), str(password))


def client_tls(config: Mapping[str, Any]) -> ClientTls | None:
    """The TLS a client with ``config`` connects with (None: PLAINTEXT or SASL_PLAINTEXT);
    raise InvalidConfigurationError for a protocol it cannot speak (SASL on gRPC too: see
    :func:`client_sasl`) or material that does not load."""
    protocol = _protocol(config)
    client_sasl(config)
    if protocol in ("PLAINTEXT", "SASL_PLAINTEXT"):
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
