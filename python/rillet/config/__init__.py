"""Configuration with Kafka's keys, defaults and validation.

    properties.py    Java ``.properties`` files
    keys.py          ConfigKey, parse_value, validators, Kafka's string form of a value
    topic.py         topic-level configs and their resolution against the broker's synonyms
    listeners.py     listeners, security protocols, the quorum's voters
    broker_keys.py   Kafka's broker keys (KafkaConfig) with their types and defaults
    broker.py        BrokerConfig: a broker's static configuration, checked as Kafka checks it

Client configs are the client's own (:mod:`rillet.client.configs`).
"""

from rillet.config.broker import (
    DEFAULT_CONFIG,
    STATIC_BROKER_CONFIG,
    BrokerConfig,
    ConfigEntry,
    default_data_dir,
)
from rillet.config.broker_keys import BROKER_CONFIGS
from rillet.config.keys import (
    ConfigKey,
    at_least,
    between,
    config_value_to_string,
    one_of,
    parse_value,
)
from rillet.config.listeners import (
    Endpoint,
    HostPort,
    parse_listener,
    parse_quorum_voters,
    parse_security_protocol_map,
)
from rillet.config.properties import format_properties, load_properties, parse_properties
from rillet.config.topic import TOPIC_CONFIGS, TopicConfig, resolve_topic_config

__all__ = [
    "BROKER_CONFIGS",
    "DEFAULT_CONFIG",
    "STATIC_BROKER_CONFIG",
    "TOPIC_CONFIGS",
    "BrokerConfig",
    "ConfigEntry",
    "ConfigKey",
    "Endpoint",
    "HostPort",
    "TopicConfig",
    "at_least",
    "between",
    "config_value_to_string",
    "default_data_dir",
    "format_properties",
    "load_properties",
    "one_of",
    "parse_listener",
    "parse_properties",
    "parse_quorum_voters",
    "parse_security_protocol_map",
    "parse_value",
    "resolve_topic_config",
]
