"""SASL on Kafka-protocol listeners: JAAS configurations and a connection's exchange."""

from __future__ import annotations

import pytest

from rillet.config import BrokerConfig
from rillet.errors import InvalidConfigurationError
from rillet.security.sasl import PLAIN_LOGIN_MODULE, ListenerSasl, parse_jaas
from rillet.security.scram import SCRAM_MECHANISMS, ScramClient, make_credential

JAAS = f'{PLAIN_LOGIN_MODULE} required username="admin" password="a\\"b" user_alice="alice-secret";'


def _listener() -> ListenerSasl:
    return ListenerSasl("SASL", ["PLAIN"], {"PLAIN": JAAS})


def test_jaas_options_are_read_with_quotes_and_escapes() -> None:
    entry = parse_jaas(JAAS)
    assert entry.login_module == PLAIN_LOGIN_MODULE
    assert entry.options == {"username": "admin", "password": 'a"b', "user_alice": "alice-secret"}
    with pytest.raises(InvalidConfigurationError, match=r"sasl\.jaas\.config"):
        parse_jaas("PlainLoginModule username=x;")  # no control flag
    with pytest.raises(InvalidConfigurationError, match=r"sasl\.jaas\.config"):
        parse_jaas(f'{PLAIN_LOGIN_MODULE} required user_alice="x"')  # no closing semicolon


def test_plain_authenticates_the_configured_users_only() -> None:
    conn = _listener().connection()
    assert conn.handshake("PLAIN").body["error_code"] == 0
    assert not conn.authenticated
    ok = conn.authenticate(b"\x00alice\x00alice-secret")
    assert ok.body["error_code"] == 0 and not ok.close
    assert str(conn.principal) == "User:alice"

    for token in (b"\x00alice\x00wrong", b"\x00mallory\x00alice-secret", b"alice-secret"):
        conn = _listener().connection()
        conn.handshake("PLAIN")
        failed = conn.authenticate(token)
        assert failed.close and failed.body["error_code"] == 58  # SASL_AUTHENTICATION_FAILED
        assert conn.principal is None
    # An authorization id that is not the user's own is refused.
    conn = _listener().connection()
    conn.handshake("PLAIN")
    assert conn.authenticate(b"admin\x00alice\x00alice-secret").close


def test_the_exchange_goes_in_order() -> None:
    conn = _listener().connection()
    refused = conn.handshake("SCRAM-SHA-256")
    assert refused.close and refused.body == {"error_code": 33, "mechanisms": ["PLAIN"]}
    conn = _listener().connection()
    assert conn.authenticate(b"\x00alice\x00alice-secret").body["error_code"] == 34
    conn = _listener().connection()
    conn.handshake("PLAIN", version=0)
    assert conn.raw_tokens
    assert conn.handshake("PLAIN").body["error_code"] == 34  # ILLEGAL_SASL_STATE


@pytest.mark.parametrize(
    ("mechanisms", "jaas", "message"),
    [
        (["GSSAPI"], {"PLAIN": JAAS}, "GSSAPI not supported yet"),
        (["PLAIN"], {"PLAIN": None}, "has no JAAS configuration"),
        (["PLAIN"], {"PLAIN": "com.example.Other required;"}, "PLAIN takes"),
    ],
)
def test_a_listener_refuses_what_it_cannot_serve(
    mechanisms: list[str], jaas: dict[str, str | None], message: str
) -> None:
    with pytest.raises(InvalidConfigurationError, match=message):
        ListenerSasl("SASL", mechanisms, jaas)


def test_jaas_configs_per_listener_and_mechanism() -> None:
    config = BrokerConfig.embedded_default(
        "/nonexistent",
        {
            "listeners": "PLAINTEXT://:9092,SASL://:9095,GRPC://:9094,CONTROLLER://:9093",
            "grpc.listener.names": "GRPC",
            "inter.broker.listener.name": "GRPC",
            "listener.security.protocol.map": (
                "PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT,GRPC:PLAINTEXT,CONTROLLER:PLAINTEXT"
            ),
            "sasl.jaas.config": "broker-wide",
            "listener.name.sasl.plain.sasl.jaas.config": JAAS,
            "listener.name.sasl.sasl.enabled.mechanisms": "PLAIN",
        },
    )
    assert not config.unknown
    assert config.jaas_config("SASL", "PLAIN") == JAAS
    assert config.jaas_config("PLAINTEXT", "PLAIN") == "broker-wide"
    assert config.listener_config("SASL", "sasl.")["sasl.enabled.mechanisms"] == ["PLAIN"]
    described = {e.name: e.value for e in config.describe()}
    assert described["sasl.jaas.config"] is None  # a password: never shown


def _scram_listener(mechanisms: list[str]) -> ListenerSasl:
    credentials = {(m, "alice"): make_credential(m, "alice-secret", 8192) for m in SCRAM_MECHANISMS}
    return ListenerSasl(
        "SASL",
        mechanisms,
        {"PLAIN": JAAS},
        scram_credentials=lambda mechanism, user: credentials.get((mechanism, user)),
    )


@pytest.mark.parametrize("mechanism", SCRAM_MECHANISMS)
@pytest.mark.parametrize("version", [1, 0])
def test_scram_takes_two_round_trips(mechanism: str, version: int) -> None:
    conn = _scram_listener(["PLAIN", *SCRAM_MECHANISMS]).connection()
    assert conn.handshake(mechanism, version).body["error_code"] == 0
    assert conn.raw_tokens == (version == 0)
    client = ScramClient(mechanism, "alice", "alice-secret")

    first = conn.authenticate(client.first_message())
    assert first.body["error_code"] == 0 and not first.close
    assert not conn.authenticated and conn.principal is None
    server_first = first.body["auth_bytes"]
    assert isinstance(server_first, bytes) and server_first.endswith(b",i=8192")

    final = conn.authenticate(client.final_message(server_first))
    assert final.body["error_code"] == 0 and not final.close
    assert conn.authenticated and str(conn.principal) == "User:alice"
    server_final = final.body["auth_bytes"]
    assert isinstance(server_final, bytes)
    client.verify_server_final(server_final)
    # Once authenticated, there is nothing more to authenticate.
    assert conn.authenticate(b"n,,n=alice,r=x").body["error_code"] == 34


@pytest.mark.parametrize("mechanism", SCRAM_MECHANISMS)
@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("mallory", "alice-secret")])
def test_scram_failures_close_the_connection(mechanism: str, user: str, password: str) -> None:
    conn = _scram_listener([mechanism]).connection()
    conn.handshake(mechanism)
    client = ScramClient(mechanism, user, password)
    first = conn.authenticate(client.first_message())
    assert first.body["error_code"] == 0  # an unknown user is not told apart yet
    server_first = first.body["auth_bytes"]
    assert isinstance(server_first, bytes)
    failed = conn.authenticate(client.final_message(server_first))
    assert failed.close and failed.body["error_code"] == 58  # SASL_AUTHENTICATION_FAILED
    assert failed.body["error_message"] == "Authentication failed: Invalid user credentials"
    assert conn.principal is None
    # A malformed first message fails at once; so does a PLAIN token.
    for token in (b"p=tls-unique,,n=alice,r=x", b"\x00alice\x00alice-secret"):
        conn = _scram_listener([mechanism]).connection()
        conn.handshake(mechanism)
        failed = conn.authenticate(token)
        assert failed.close and failed.body["error_code"] == 58


def test_a_scram_listener_needs_credentials_not_jaas() -> None:
    with pytest.raises(InvalidConfigurationError, match="SCRAM"):
        ListenerSasl("SASL", ["SCRAM-SHA-256"], {})
    # No JAAS for SCRAM is needed; the inter-broker client's own entry is ignored.
    scram_jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="broker" password="broker-secret";'
    )
    for jaas in ({}, {"SCRAM-SHA-512": scram_jaas}):
        listener = ListenerSasl(
            "SASL", ["SCRAM-SHA-512"], jaas, scram_credentials=lambda m, u: None
        )
        assert listener.mechanisms == ("SCRAM-SHA-512",) and listener.plain_users == {}
    refused = _scram_listener(["SCRAM-SHA-256"]).connection().handshake("PLAIN")
    assert refused.close and refused.body == {"error_code": 33, "mechanisms": ["SCRAM-SHA-256"]}
