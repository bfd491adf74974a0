"""Kafka's authorizer and client quota keys, with Kafka's types and defaults.
``authorizer.class.name`` empty means no authorization (every request allowed, as a Kafka
broker without an authorizer); Kafka's KRaft authorizer,
``org.apache.kafka.metadata.authorizer.StandardAuthorizer``, turns on Rillet's, with ACLs kept
in the metadata log."""

from __future__ import annotations

from rillet.config.keys import ConfigKey, at_least, one_of

__all__ = ["AUTHORIZER_CONFIGS", "QUOTA_CONFIGS", "STANDARD_AUTHORIZER"]

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

AUTHORIZER_CONFIGS: dict[str, ConfigKey] = {
    k.name: k
    for k in [
        ConfigKey(
            "authorizer.class.name",
            "string",
            "",
            "The authorizer: empty for none, or Kafka's StandardAuthorizer (ACLs in the "
            "metadata log)",
            one_of("", STANDARD_AUTHORIZER),
        ),
        ConfigKey(
            "super.users",
            "string",
            "",
            "Principals allowed every operation whatever the ACLs say, separated by ';' "
            "(User:admin;User:broker)",
        ),
        ConfigKey(
            "allow.everyone.if.no.acl.found",
            "boolean",
            False,
            "Whether a resource no ACL names is open to everyone",
        ),
    ]
}

# Client quotas' measurement windows (Kafka's defaults); the quotas themselves are metadata
# (``rillet configs --alter --entity-type users|clients --add-config producer_byte_rate=N``).
QUOTA_CONFIGS: dict[str, ConfigKey] = {
    k.name: k
    for k in [
        ConfigKey(
            "quota.window.num",
            "int",
            11,
            "The number of samples a client quota's rate is measured over",
            at_least(1),
        ),
        ConfigKey(
            "quota.window.size.seconds",
            "int",
            1,
            "The time span of each sample of a client quota's rate",
            at_least(1),
        ),
    ]
}
