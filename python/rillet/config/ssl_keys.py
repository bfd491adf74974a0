"""Kafka's SSL keys (``ssl.*``, KafkaConfig's SslConfigs) with Kafka's types and defaults.

A listener whose security protocol is ``SSL`` takes them from ``listener.name.<name>.ssl.*``
first (the listener's name in lower case, as Kafka spells the prefix), then from ``ssl.*``.
"""

from __future__ import annotations

from rillet.config.keys import ConfigKey, one_of

__all__ = ["KEYSTORE_TYPES", "SSL_CONFIGS", "SSL_KEY_PREFIX"]

SSL_KEY_PREFIX = "ssl."
# Kafka's keystore types; JKS is Kafka's default, and Rillet names it in the error that asks
# for one of the others (Java's own format has no Python reader).
KEYSTORE_TYPES = ("JKS", "PKCS12", "PEM")


def _k(name: str, type_: str, default: object, doc: str, *choices: str) -> ConfigKey:
    return ConfigKey(name, type_, default, doc, one_of(*choices) if choices else None)


SSL_CONFIGS: dict[str, ConfigKey] = {
    k.name: k
    for k in [
        _k("ssl.keystore.type", "string", "JKS", "Format of the keystore", *KEYSTORE_TYPES),
        _k("ssl.keystore.location", "string", None, "The keystore file (key and certificate)"),
        _k("ssl.keystore.password", "password", None, "The keystore's password (PKCS12)"),
        _k("ssl.key.password", "password", None, "The private key's password"),
        _k(
            "ssl.keystore.key",
            "password",
            None,
            "The private key in PEM, in the config itself (ssl.keystore.type=PEM)",
        ),
        _k(
            "ssl.keystore.certificate.chain",
            "password",
            None,
            "The certificate chain in PEM, in the config itself (ssl.keystore.type=PEM)",
        ),
        _k("ssl.truststore.type", "string", "JKS", "Format of the truststore", *KEYSTORE_TYPES),
        _k("ssl.truststore.location", "string", None, "The truststore file (trusted CAs)"),
        _k("ssl.truststore.password", "password", None, "The truststore's password (PKCS12)"),
        _k(
            "ssl.truststore.certificates",
            "password",
            None,
            "Trusted certificates in PEM, in the config itself (ssl.truststore.type=PEM)",
        ),
        _k(
            "ssl.client.auth",
            "string",
            "none",
            "Whether clients must present a certificate",
            "required",
            "requested",
            "none",
        ),
        _k(
            "ssl.principal.mapping.rules",
            "string",
            "DEFAULT",
            "Rules mapping a certificate's distinguished name to a principal name",
        ),
        _k(
            "ssl.endpoint.identification.algorithm",
            "string",
            "https",
            "Check the server's host name against its certificate (https) or not (empty)",
        ),
        _k("ssl.protocol", "string", "TLSv1.3", "The TLS protocol of SSLContext"),
        _k(
            "ssl.enabled.protocols",
            "list",
            ["TLSv1.2", "TLSv1.3"],
            "The TLS versions accepted",
        ),
        _k("ssl.cipher.suites", "list", [], "The TLS 1.2 cipher suites accepted (empty: all)"),
    ]
}
