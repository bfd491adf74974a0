"""The client's security configs: ``security_protocol``, TLS and SASL, with kafka-python's
names (``ssl_cafile``, ``ssl_certfile``, ``ssl_keyfile``, ``ssl_password``,
``ssl_check_hostname``; ``sasl_mechanism``, ``sasl_plain_username``, ``sasl_plain_password``)
or the Java client's (``ssl.truststore.location``, ``ssl.keystore.location``,
``ssl.key.password``, ... with ``ssl.*.type`` PEM or PKCS12; ``sasl.jaas.config``), so a
Kafka ``client.properties`` works as it is (``--command-config`` in the tools).

Both transports speak TLS and SASL (``SASL_PLAINTEXT``, ``SASL_SSL``): gRPC through its
channel credentials and :class:`~rillet.client.grpc_sasl.SaslCallCredentials` (a session
token on every call), Kafka's protocol through
:class:`~rillet.client.tls_socket.TlsSocket` and SaslHandshake/SaslAuthenticate
(:mod:`rillet.client.sasl`). A call a broker refuses for who the caller is raises Kafka's
error for it (SASL_AUTHENTICATION_FAILED, TOPIC_AUTHORIZATION_FAILED, ...).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import grpc

from rillet.client.configs import merge_configs
from rillet.client.grpc_sasl import SaslCallCredentials
from rillet.client.sasl import SASL_MECHANISMS, ClientSasl
from rillet.errors import (
    ClusterAuthorizationFailedError,
    InvalidConfigurationError,
    KafkaError,
    KafkaTimeoutError,
    SaslAuthenticationFailedError,
    SslAuthenticationError,
    UnknownServerError,
    error_for_name,
)
from rillet.security.sasl import PLAIN_LOGIN_MODULE, parse_jaas
from rillet.security.tls import ClientTls, load_key_material

__all__ = [
    "SECURITY_CONFIG_TYPES",
    "SECURITY_DEFAULTS",
    "client_sasl",
    "client_tls",
    "open_channel",
    "refusal",
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
    protocol); raise InvalidConfigurationError for an unknown mechanism or missing
    credentials."""
    protocol = _protocol(config)
    if not protocol.startswith("SASL_"):
        return None
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
    raise InvalidConfigurationError for a protocol it cannot speak, SASL settings that
    :func:`client_sasl` refuses, or material that does not load."""
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
    address: str,
    tls: ClientTls | None,
    options: Sequence[tuple[str, Any]] = (),
    sasl: ClientSasl | None = None,
) -> grpc.Channel:
    """A channel to ``address``: over TLS when ``tls`` is given, else plaintext; with
    ``sasl``, every call carries a session token (:mod:`rillet.client.grpc_sasl`)."""
    if tls is None:
        channel = grpc.insecure_channel(address, options=options)
    else:
        channel = grpc.secure_channel(address, tls.grpc_credentials(), options=options)
    if sasl is None:
        return channel
    return grpc.intercept_channel(channel, SaslCallCredentials(channel, sasl, address))


# How a broker names the refusal of a call for who the caller is: "ERROR_NAME: message".
# A refusal saying this is not final: the session token is stale, and the next call
# authenticates again (:mod:`rillet.client.grpc_sasl`).
STALE_SESSION = "session token is not one"
_REFUSALS = (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED)


def refusal(error: grpc.RpcError) -> KafkaError | None:
    """The Kafka error of a call the broker refused for who the caller is (its status
    UNAUTHENTICATED or PERMISSION_DENIED, with Kafka's error name in the details), or that
    the client's SASL exchange failed before it was sent; None for any other failure, and
    for a stale session token (the call can be retried)."""
    cause = error.exception() if isinstance(error, grpc.Future) else None
    if isinstance(cause, KafkaError):
        return cause
    if not isinstance(error, grpc.Call) or error.code() not in _REFUSALS:
        return None
    details = str(error.details() or "")
    if STALE_SESSION in details:
        return None  # the call credentials authenticate again: a retry is served
    name, colon, message = details.partition(": ")
    kind = error_for_name(name) if colon else UnknownServerError
    if kind is UnknownServerError:
        kind = (
            SaslAuthenticationFailedError
            if error.code() == grpc.StatusCode.UNAUTHENTICATED
            else ClusterAuthorizationFailedError
        )
        message = details
    return kind(message)


# What gRPC's error details say when TLS is what failed.
_TLS_FAILURES = ("handshake", "certificate", "ssl", "tls")


def unreachable(address: str, error: grpc.RpcError, tls: ClientTls | None) -> KafkaError:
    """The error for a call to ``address`` that failed with ``error``: the broker's refusal
    (:func:`refusal`); SslAuthenticationError
    when TLS is what failed (the broker's certificate not trusted, or ours refused: a TLS
    broker closes the connection on a client it does not accept), else a timeout naming the
    cause."""
    refused = refusal(error)
    if refused is not None:
        return refused
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
