"""Kafka's SASL keys (BrokerSecurityConfigs), with Kafka's types and defaults. A SASL listener
takes them from ``listener.name.<name>.`` first, and its JAAS configuration from
``listener.name.<name>.<mechanism>.sasl.jaas.config`` (the mechanism in lower case)."""

from __future__ import annotations

from rillet.config.keys import ConfigKey, at_least

__all__ = ["SASL_CONFIGS", "SASL_MECHANISMS"]

# Kafka's mechanisms (what a listener may name, served or not).
SASL_MECHANISMS = ("GSSAPI", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")

SASL_CONFIGS: dict[str, ConfigKey] = {
    k.name: k
    for k in [
        ConfigKey(
            "sasl.enabled.mechanisms",
            "list",
            ["GSSAPI"],
            "The SASL mechanisms a SASL listener enables",
        ),
        ConfigKey(
            "sasl.jaas.config",
            "password",
            None,
            "The JAAS login module of a SASL listener, with its options (PLAIN: user_<name>)",
        ),
        ConfigKey(
            "sasl.mechanism.inter.broker.protocol",
            "string",
            "GSSAPI",
            "The SASL mechanism between brokers",
        ),
        ConfigKey(
            "connection.failed.authentication.delay.ms",
            "int",
            100,
            "How long a connection that failed authentication waits before it is closed",
            at_least(0),
        ),
    ]
}
