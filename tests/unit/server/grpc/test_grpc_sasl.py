"""SASL on gRPC listeners: the SaslService exchange and its session tokens
(:mod:`rillet.server.grpc.sasl`), and, over a real gRPC server, the gate that refuses calls
without a token and the client's call credentials (:mod:`rillet.client.grpc_sasl`)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest

from rillet.client.sasl import ClientSasl
from rillet.client.security import open_channel, refusal
from rillet.errors import (
    IllegalSaslStateError,
    SaslAuthenticationFailedError,
)
from rillet.protocol.gen.v1 import sasl_pb2, sasl_pb2_grpc
from rillet.security.principal import KafkaPrincipal
from rillet.security.sasl import PLAIN_LOGIN_MODULE, ListenerSasl
from rillet.security.scram import SCRAM_MECHANISMS, ScramClient, make_credential
from rillet.server.grpc import sasl as grpc_sasl
from rillet.server.grpc.authorization import CallGate, call_principal
from rillet.server.grpc.sasl import GrpcSasl, SaslServicer, SessionTokens

JAAS = f'{PLAIN_LOGIN_MODULE} required user_alice="alice-secret" user_bob="bob-secret";'
CREDENTIALS = {(m, "carol"): make_credential(m, "carol-secret", 4096) for m in SCRAM_MECHANISMS}


def _listener(name: str = "SASL") -> ListenerSasl:
    return ListenerSasl(
        name,
        ["PLAIN", *SCRAM_MECHANISMS],
        {"PLAIN": JAAS},
        scram_credentials=lambda mechanism, user: CREDENTIALS.get((mechanism, user)),
    )


def _request(mechanism: str, token: bytes, exchange_id: bytes = b"") -> Any:
    return sasl_pb2.SaslAuthenticateRequest(
        mechanism=mechanism, auth_bytes=token, exchange_id=exchange_id
    )


def _bearer(token: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {token}")]


# ---------------------------------------------------------------------------------------------
# the exchange


def test_plain_ends_with_a_token_naming_the_principal() -> None:
    sasl = GrpcSasl(_listener())
    answer = sasl.authenticate(_request("PLAIN", b"\x00alice\x00alice-secret"))
    assert answer.error_code == 0 and answer.session_token and not answer.exchange_id
    assert sasl.principal(_bearer(answer.session_token)) == KafkaPrincipal("User", "alice")

    wrong = sasl.authenticate(_request("PLAIN", b"\x00alice\x00bob-secret"))
    assert wrong.error_code == 58 and not wrong.session_token  # SASL_AUTHENTICATION_FAILED
    assert wrong.error_message == "Authentication failed: Invalid username or password"


def test_an_unsupported_mechanism_is_answered_with_the_enabled_ones() -> None:
    answer = GrpcSasl(_listener()).authenticate(_request("GSSAPI", b"x"))
    assert answer.error_code == 33  # UNSUPPORTED_SASL_MECHANISM
    assert list(answer.mechanisms) == ["PLAIN", *SCRAM_MECHANISMS]
    assert "listener SASL enables PLAIN, SCRAM-SHA-256, SCRAM-SHA-512" in answer.error_message


@pytest.mark.parametrize("mechanism", SCRAM_MECHANISMS)
def test_scram_takes_two_rounds_joined_by_the_exchange_id(mechanism: str) -> None:
    sasl = GrpcSasl(_listener())
    client = ScramClient(mechanism, "carol", "carol-secret")
    first = sasl.authenticate(_request(mechanism, client.first_message()))
    assert first.error_code == 0 and first.exchange_id and not first.session_token
    final = sasl.authenticate(
        _request(mechanism, client.final_message(first.auth_bytes), first.exchange_id)
    )
    assert final.error_code == 0 and final.session_token and not final.exchange_id
    client.verify_server_final(final.auth_bytes)
    assert sasl.principal(_bearer(final.session_token)) == KafkaPrincipal("User", "carol")
    # The exchange is over: its id names nothing now.
    again = sasl.authenticate(_request(mechanism, b"c=biws,r=x,p=y", first.exchange_id))
    assert again.error_code == 34  # ILLEGAL_SASL_STATE


def test_a_wrong_scram_password_fails_in_the_second_round() -> None:
    sasl = GrpcSasl(_listener())
    client = ScramClient("SCRAM-SHA-256", "carol", "wrong")
    first = sasl.authenticate(_request("SCRAM-SHA-256", client.first_message()))
    final = sasl.authenticate(
        _request("SCRAM-SHA-256", client.final_message(first.auth_bytes), first.exchange_id)
    )
    assert final.error_code == 58 and not final.session_token
    assert final.error_message == "Authentication failed: Invalid user credentials"


def test_a_round_must_keep_the_mechanism_it_started_with() -> None:
    sasl = GrpcSasl(_listener())
    client = ScramClient("SCRAM-SHA-256", "carol", "carol-secret")
    first = sasl.authenticate(_request("SCRAM-SHA-256", client.first_message()))
    other = sasl.authenticate(_request("SCRAM-SHA-512", b"x", first.exchange_id))
    assert other.error_code == 34
    assert "started with SCRAM-SHA-256, not SCRAM-SHA-512" in other.error_message


def test_unfinished_exchanges_expire_and_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [0.0]
    sasl = GrpcSasl(_listener(), now=lambda: now[0])
    client = ScramClient("SCRAM-SHA-256", "carol", "carol-secret")
    first = sasl.authenticate(_request("SCRAM-SHA-256", client.first_message()))
    now[0] += grpc_sasl.EXCHANGE_TIMEOUT_S + 1
    late = sasl.authenticate(
        _request("SCRAM-SHA-256", client.final_message(first.auth_bytes), first.exchange_id)
    )
    assert late.error_code == 34 and "timed out" in late.error_message

    monkeypatch.setattr(grpc_sasl, "MAX_PENDING", 3)
    ids = [
        sasl.authenticate(
            _request("SCRAM-SHA-256", ScramClient("SCRAM-SHA-256", "carol", "x").first_message())
        ).exchange_id
        for _ in range(5)
    ]
    kept = [i for i in ids if sasl.authenticate(_request("SCRAM-SHA-256", b"", i)).error_code != 34]
    assert kept == ids[2:]  # the oldest two were dropped


def test_tokens_are_good_only_where_they_were_issued() -> None:
    sasl = GrpcSasl(_listener())
    token = sasl.authenticate(_request("PLAIN", b"\x00alice\x00alice-secret")).session_token
    payload, _, mac = token.partition(".")
    forged = SessionTokens("SASL").issue(KafkaPrincipal("User", "alice"))  # another key
    elsewhere = GrpcSasl(_listener("OTHER"), tokens=SessionTokens("OTHER", b"k" * 32))
    same_key = SessionTokens("SASL", b"k" * 32).issue(KafkaPrincipal("User", "alice"))
    for bad in (forged, f"{payload}.{mac[:-2]}AA", "not-a-token", f"{payload}x.{mac}", "a.!!"):
        refused = sasl.principal(_bearer(bad))
        assert isinstance(refused, str) and refused.startswith("SASL_AUTHENTICATION_FAILED")
    # The listener's name is signed too: the same key on another listener takes no token.
    assert isinstance(elsewhere.principal(_bearer(same_key)), str)
    missing = sasl.principal([("client-id", "x")])
    assert isinstance(missing, str) and "authenticate with SaslService.Authenticate" in missing
    assert isinstance(sasl.principal([("authorization", f"Basic {token}")]), str)


# ---------------------------------------------------------------------------------------------
# over gRPC: the gate and the client's call credentials

WHOAMI = "/test.Who/Am"


class _Server:
    """A SASL gRPC listener in a thread of its own, serving SaslService and ``WHOAMI``
    (answering the caller's principal) behind :class:`CallGate`."""

    def __init__(self) -> None:
        self.port = 0
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.server: grpc.aio.Server | None = None

    def start(self, port: int = 0) -> None:
        asyncio.run_coroutine_threadsafe(self._start(port), self.loop).result(10)

    async def _start(self, port: int) -> None:
        sasl = GrpcSasl(_listener())
        server = grpc.aio.server(interceptors=[CallGate(None, None, sasl)])
        sasl_pb2_grpc.add_SaslServiceServicer_to_server(SaslServicer(sasl, 0), server)

        async def whoami(request: bytes, context: Any) -> bytes:
            return str(call_principal()).encode()

        server.add_generic_rpc_handlers(
            (
                grpc.method_handlers_generic_handler(
                    "test.Who", {"Am": grpc.unary_unary_rpc_method_handler(whoami)}
                ),
            )
        )
        self.port = server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        self.server = server

    def stop(self) -> None:
        if self.server is not None:
            asyncio.run_coroutine_threadsafe(self.server.stop(None), self.loop).result(10)

    def close(self) -> None:
        self.stop()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


@pytest.fixture
def server() -> Iterator[_Server]:
    s = _Server()
    s.start()
    yield s
    s.close()


def _whoami(channel: grpc.Channel) -> Any:
    return channel.unary_unary(WHOAMI)


@pytest.mark.parametrize(
    ("mechanism", "user", "password"),
    [("PLAIN", "alice", "alice-secret"), *[(m, "carol", "carol-secret") for m in SCRAM_MECHANISMS]],
)
def test_calls_carry_the_session_of_their_channel(
    server: _Server, mechanism: str, user: str, password: str
) -> None:
    address = f"127.0.0.1:{server.port}"
    with open_channel(address, None, sasl=ClientSasl(mechanism, user, password)) as channel:
        assert _whoami(channel)(b"", timeout=10) == f"User:{user}".encode()
        assert _whoami(channel).future(b"", timeout=10).result() == f"User:{user}".encode()


def test_a_call_without_a_session_is_refused(server: _Server) -> None:
    with (
        open_channel(f"127.0.0.1:{server.port}", None) as channel,
        pytest.raises(grpc.RpcError) as info,
    ):
        _whoami(channel)(b"", timeout=10)
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
    error = refusal(info.value)
    assert isinstance(error, SaslAuthenticationFailedError)
    assert "listener SASL is a SASL listener" in error.message


@pytest.mark.parametrize(
    ("sasl", "error", "message"),
    [
        (
            ClientSasl("PLAIN", "alice", "wrong"),
            SaslAuthenticationFailedError,
            "Invalid username or password",
        ),
        (
            ClientSasl("SCRAM-SHA-512", "carol", "wrong"),
            SaslAuthenticationFailedError,
            "Invalid user credentials",
        ),
    ],
)
def test_a_refused_exchange_raises_the_brokers_error(
    server: _Server, sasl: ClientSasl, error: type[Exception], message: str
) -> None:
    with open_channel(f"127.0.0.1:{server.port}", None, sasl=sasl) as channel:
        with pytest.raises(error, match=message):
            _whoami(channel)(b"", timeout=10)
        # A future reports it as its exception.
        future = _whoami(channel).future(b"", timeout=10)
        assert isinstance(refusal(future), error)


def test_a_restarted_broker_is_authenticated_with_again(server: _Server) -> None:
    address = f"127.0.0.1:{server.port}"
    with open_channel(address, None, sasl=ClientSasl("PLAIN", "bob", "bob-secret")) as channel:
        assert _whoami(channel)(b"", timeout=10) == b"User:bob"
        server.stop()
        server.start(server.port)  # a new key: the token it issued before is no good
        assert _whoami(channel)(b"", timeout=10, wait_for_ready=True) == b"User:bob"


def test_a_listener_without_sasl_is_named(server: _Server) -> None:
    plain = grpc.server(thread_pool=ThreadPoolExecutor(1))
    port = plain.add_insecure_port("127.0.0.1:0")
    plain.start()
    try:
        sasl = ClientSasl("PLAIN", "alice", "alice-secret")
        with (
            open_channel(f"127.0.0.1:{port}", None, sasl=sasl) as channel,
            pytest.raises(IllegalSaslStateError, match="is not a SASL listener"),
        ):
            _whoami(channel)(b"", timeout=10)
    finally:
        plain.stop(None)
