"""The client's SASL configs (kafka-python's ``security_protocol``, ``sasl_mechanism``,
``sasl_plain_username``, ``sasl_plain_password``; the Java client's ``sasl.jaas.config``),
checked when a client is made, and the mechanisms' token exchanges
(:mod:`rillet.client.sasl`) run against the broker's side of them."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from rillet import Consumer, Producer
from rillet.client.admin import AdminClient
from rillet.client.sasl import ClientSasl
from rillet.client.security import client_sasl, client_tls, tls_from_properties
from rillet.errors import InvalidConfigurationError, SaslAuthenticationFailedError
from rillet.security.certs import make_ca, make_cert
from rillet.security.sasl import PLAIN_LOGIN_MODULE, ListenerSasl
from rillet.security.scram import ScramServer, make_credential

PLAIN = {
    "security_protocol": "SASL_PLAINTEXT",
    "sasl_mechanism": "PLAIN",
    "sasl_plain_username": "alice",
    "sasl_plain_password": "alice-secret",
    "transport": "kafka",
}
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


def refused(config: dict[str, Any]) -> str:
    """The message config is refused with, after its error's name."""
    with pytest.raises(InvalidConfigurationError) as e:
        client_sasl(config)
    name, _, message = str(e.value).partition(" ")
    assert name == "[INVALID_CONFIG]"
    return message


def test_sasl_plaintext_and_plaintext_protocols() -> None:
    assert client_sasl(PLAIN) == ClientSasl("PLAIN", "alice", "alice-secret")
    assert client_tls(PLAIN) is None
    assert client_sasl({**PLAIN, "security_protocol": "PLAINTEXT"}) is None
    assert client_sasl({"transport": "kafka"}) is None
    # kafka-python's names serve SCRAM too; the mechanism's case does not matter.
    scram = client_sasl({**PLAIN, "sasl_mechanism": "scram-sha-512", "transport": "auto"})
    assert scram == ClientSasl("SCRAM-SHA-512", "alice", "alice-secret")


def test_sasl_ssl_gives_tls_and_sasl(tmp_path: Path) -> None:
    certs = make_cert(make_ca(tmp_path), tmp_path, "node")
    config = {**PLAIN, "security_protocol": "SASL_SSL", "ssl_cafile": str(certs.ca)}
    assert client_tls(config) is not None
    assert client_sasl(config) == ClientSasl("PLAIN", "alice", "alice-secret")


def test_an_unknown_or_missing_mechanism_is_refused() -> None:
    assert refused({**PLAIN, "sasl_mechanism": "GSSAPI"}) == (
        "Invalid value GSSAPI for configuration sasl.mechanism: String must be one of: "
        "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"
    )
    assert refused({**PLAIN, "sasl_mechanism": None}) == (
        "security.protocol=SASL_PLAINTEXT needs sasl.mechanism: String must be one of: "
        "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"
    )


def test_sasl_without_credentials_is_refused() -> None:
    assert refused({**PLAIN, "sasl_plain_password": None}) == (
        "security.protocol=SASL_PLAINTEXT with sasl.mechanism=PLAIN needs sasl_plain_password "
        "(or username and password in sasl.jaas.config)"
    )
    message = refused({**PLAIN, "sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": ""})
    assert "needs sasl_plain_username (or" in message
    both = refused({**PLAIN, "sasl_plain_username": None, "sasl_plain_password": None})
    assert "needs sasl_plain_username and sasl_plain_password" in both


def test_sasl_is_spoken_over_both_transports() -> None:
    """gRPC listeners authenticate calls with session tokens, and a Kafka SASL listener
    relays gRPC to a SASL gRPC listener: no transport, group or transaction is refused."""
    expected = ClientSasl("PLAIN", PLAIN["sasl_plain_username"], PLAIN["sasl_plain_password"])
    no_transport = {k: v for k, v in PLAIN.items() if k != "transport"}
    for config in (
        {**PLAIN, "transport": "grpc"},
        no_transport,
        {**PLAIN, "transactional_id": "tx", "group_id": "g"},
    ):
        assert client_sasl(config) == expected
    assert client_tls({**PLAIN, "transport": "grpc"}) is None
    AdminClient(bootstrap_servers="localhost:1", **no_transport).close()
    with Producer(bootstrap_servers="localhost:1", **{**PLAIN, "transport": "grpc"}) as p:
        assert p.transport == "grpc"


def test_the_clients_check_their_sasl_configs_when_made() -> None:
    with pytest.raises(InvalidConfigurationError, match=r"sasl\.mechanism"):
        Consumer(bootstrap_servers="localhost:1", **{**PLAIN, "sasl_mechanism": "OAUTHBEARER"})
    with pytest.raises(InvalidConfigurationError, match=r"sasl\.mechanism"):
        tls_from_properties({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"})
    # Kafka's dotted names work too.
    dotted = {k.replace("_", "."): v for k, v in PLAIN.items() if k != "transport"}
    with Producer(dotted, bootstrap_servers="localhost:1", enable_idempotence=False) as p:
        assert p.transport == "auto"


def test_credentials_from_sasl_jaas_config() -> None:
    jaas = {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_jaas_config": f'{SCRAM_MODULE} required username="bob" password="b\\"pw";',
        "transport": "kafka",
    }
    assert client_sasl(jaas) == ClientSasl("SCRAM-SHA-256", "bob", 'b"pw')
    # kafka-python's names win over the JAAS options.
    assert client_sasl({**jaas, "sasl_plain_username": "carol"}) == ClientSasl(
        "SCRAM-SHA-256", "carol", 'b"pw'
    )
    assert refused({**jaas, "sasl_mechanism": "PLAIN"}) == (
        "Invalid value for configuration sasl.jaas.config: sasl.mechanism=PLAIN takes "
        f"{PLAIN_LOGIN_MODULE}, not {SCRAM_MODULE}"
    )
    assert "sasl.jaas.config" in refused({**jaas, "sasl_jaas_config": "not jaas"})


def test_the_password_stays_out_of_repr() -> None:
    sasl = ClientSasl("PLAIN", "alice", "alice-secret")
    assert "alice-secret" not in repr(sasl)
    assert "alice" in repr(sasl)


def test_plain_sends_its_one_token_as_the_broker_reads_it() -> None:
    exchange = ClientSasl("PLAIN", "alice", "alice-secret").exchange()
    token = next(exchange)
    assert token == b"\x00alice\x00alice-secret"
    broker = ListenerSasl(
        "SASL", ["PLAIN"], {"PLAIN": f'{PLAIN_LOGIN_MODULE} required user_alice="alice-secret";'}
    ).connection()
    assert broker.handshake("PLAIN").body["error_code"] == 0
    assert broker.authenticate(token).body["error_code"] == 0
    assert broker.principal is not None and broker.principal.name == "alice"
    with pytest.raises(StopIteration):
        exchange.send(b"")


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_runs_two_rounds_with_the_brokers_server(mechanism: str) -> None:
    credential = make_credential(mechanism, "s3cret")
    server = ScramServer(mechanism, lambda user: credential if user == "scrammer" else None)
    exchange = ClientSasl(mechanism, "scrammer", "s3cret").exchange()
    client_final = exchange.send(server.step(next(exchange)))
    server_final = server.step(client_final)
    assert server.username == "scrammer"
    with pytest.raises(StopIteration):
        exchange.send(server_final)


def test_a_server_signature_that_does_not_match_fails_authentication() -> None:
    """The broker proves it holds the credential by its signature: a server-final message
    with another signature (a broker that does not hold it) fails the exchange."""
    credential = make_credential("SCRAM-SHA-256", "s3cret")
    server = ScramServer("SCRAM-SHA-256", lambda user: credential)
    exchange = ClientSasl("SCRAM-SHA-256", "scrammer", "s3cret").exchange()
    server.step(exchange.send(server.step(next(exchange))))
    forged = b"v=" + base64.b64encode(bytes(32))
    with pytest.raises(SaslAuthenticationFailedError, match="Invalid SCRAM server signature"):
        exchange.send(forged)


def test_a_scram_server_error_fails_authentication() -> None:
    exchange = ClientSasl("SCRAM-SHA-512", "scrammer", "s3cret").exchange()
    next(exchange)
    with pytest.raises(SaslAuthenticationFailedError, match="SCRAM server error: other-error"):
        exchange.send(b"e=other-error")
