"""SASL/SCRAM (RFC 5802, RFC 7677): credentials, the server's and the client's side."""

from __future__ import annotations

import base64
from collections.abc import Callable

import pytest

from rillet.errors import UnacceptableCredentialError, UnsupportedSaslMechanismError
from rillet.security.scram import (
    SCRAM_MECHANISMS,
    ScramAuthenticationError,
    ScramClient,
    ScramCredential,
    ScramMechanism,
    ScramServer,
    make_credential,
)

INVALID = "Authentication failed: Invalid user credentials"

# RFC 7677, section 3.
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_NONCE = RFC_CLIENT_NONCE + RFC_SERVER_NONCE
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = f"r={RFC_NONCE},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096".encode()
RFC_CLIENT_FINAL = (f"c=biws,r={RFC_NONCE},p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=").encode()
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _users(mechanism: str, **passwords: str) -> dict[str, ScramCredential]:
    return {user: make_credential(mechanism, pw) for user, pw in passwords.items()}


def _exchange(server: ScramServer, client: ScramClient) -> None:
    client.verify_server_final(
        server.step(client.final_message(server.step(client.first_message())))
    )


def test_rfc7677_vector_from_both_sides() -> None:
    credential = make_credential("SCRAM-SHA-256", "pencil", 4096, RFC_SALT)
    server = ScramServer("SCRAM-SHA-256", {"user": credential}.get, nonce=RFC_SERVER_NONCE)
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=RFC_CLIENT_NONCE)

    assert client.first_message() == RFC_CLIENT_FIRST
    assert server.step(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert not server.complete and server.username is None
    assert client.final_message(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    assert server.step(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.complete and server.username == "user"
    client.verify_server_final(RFC_SERVER_FINAL)
    assert client.complete


@pytest.mark.parametrize("mechanism", SCRAM_MECHANISMS)
def test_round_trip(mechanism: str) -> None:
    users = _users(mechanism, alice="alice-secret", **{"b,o=b": "pw"})
    for user, password in (("alice", "alice-secret"), ("b,o=b", "pw")):
        server = ScramServer(mechanism, users.get)
        client = ScramClient(mechanism, user, password)
        _exchange(server, client)
        assert server.complete and server.username == user and client.complete
    # The user name's ',' and '=' are escaped on the wire.
    assert b"n=b=2Co=3Db," in ScramClient(mechanism, "b,o=b", "pw").first_message()
    # SHA-512's keys are 64 bytes.
    size = 32 if mechanism == "SCRAM-SHA-256" else 64
    assert len(users["alice"].stored_key) == len(users["alice"].server_key) == size


def test_mechanism_codes_and_names() -> None:
    assert ScramMechanism.from_name("SCRAM-SHA-512") is ScramMechanism.SCRAM_SHA_512
    assert int(ScramMechanism.SCRAM_SHA_256) == 1 and int(ScramMechanism.UNKNOWN) == 0
    assert [ScramMechanism(c).mechanism_name for c in (1, 2)] == list(SCRAM_MECHANISMS)
    with pytest.raises(UnsupportedSaslMechanismError, match="SCRAM-SHA-1"):
        ScramMechanism.from_name("SCRAM-SHA-1")


@pytest.mark.parametrize("mechanism", SCRAM_MECHANISMS)
def test_wrong_password_and_unknown_user_fail_alike(mechanism: str) -> None:
    users = _users(mechanism, alice="alice-secret")
    answers: dict[str, bytes] = {}
    for user, password in (("alice", "wrong"), ("mallory", "alice-secret")):
        server = ScramServer(mechanism, users.get)
        client = ScramClient(mechanism, user, password)
        # The first message is answered all the same: the user's existence is not told.
        answers[user] = server_first = server.step(client.first_message())
        with pytest.raises(ScramAuthenticationError) as failed:
            server.step(client.final_message(server_first))
        assert str(failed.value) == INVALID
        assert not server.complete and server.username is None
        with pytest.raises(ScramAuthenticationError):  # the exchange is over
            server.step(b"c=biws,r=x,p=AAAA")
    # An unknown user gets a salt of the same size and the default iterations...
    salt = {u: base64.b64decode(a.decode().split(",")[1][2:]) for u, a in answers.items()}
    assert len(salt["mallory"]) == len(salt["alice"]) and answers["mallory"].endswith(b",i=4096")
    # ...and the same one when asking again.
    again = ScramServer(mechanism, users.get).step(
        ScramClient(mechanism, "mallory", "x").first_message()
    )
    assert again.split(b",")[1:] == answers["mallory"].split(b",")[1:]


def test_tampered_nonce_proof_or_binding_fails() -> None:
    users = _users("SCRAM-SHA-256", alice="alice-secret")

    def flip_proof(final: bytes) -> bytes:
        head, proof = final.split(b",p=")
        flipped = bytearray(base64.b64decode(proof))
        flipped[0] ^= 1
        return head + b",p=" + base64.b64encode(bytes(flipped))

    tampers: list[tuple[Callable[[bytes], bytes], str]] = [
        (lambda final: final.replace(b",r=", b",r=x"), "Invalid nonce"),
        (lambda final: final.replace(b"c=biws", b"c=eSws"), "channel binding"),
        (flip_proof, INVALID),
        (lambda final: final[:-6] + b"AAAA==", INVALID),  # a proof of another length
        (lambda final: final.split(b",p=")[0] + b",p=!!", "base64"),
        (lambda final: final.split(b",p=")[0], "no proof"),
    ]
    for tamper, message in tampers:
        server = ScramServer("SCRAM-SHA-256", users.get)
        client = ScramClient("SCRAM-SHA-256", "alice", "alice-secret")
        final = client.final_message(server.step(client.first_message()))
        with pytest.raises(ScramAuthenticationError, match=message):
            server.step(tamper(final))
        assert server.username is None


@pytest.mark.parametrize(
    ("client_first", "message"),
    [
        (b"p=tls-server-end-point,,n=alice,r=abc", "channel binding is not supported"),
        (b"n,,n=alice,r=abc,tokenauth=true", "delegation tokens"),
        (b"n,,m=ext,n=alice,r=abc", "mandatory extension"),
        (b"n,,r=abc,n=alice", "expected n=...,r=..."),
        (b"n,,n=al=ice,r=abc", "escape"),
        (b"n,,n=alice", "expected n=...,r=..."),
        (b"x,,n=alice,r=abc", "GS2 flag"),
        (b"n,alice,n=alice,r=abc", "authorization id"),
        (b"n,,n=alice,r=a\x00c", "NUL"),
        (b"\xff", "UTF-8"),
        (b"", "GS2 header"),
    ],
)
def test_malformed_or_unsupported_client_first_is_refused(
    client_first: bytes, message: str
) -> None:
    server = ScramServer("SCRAM-SHA-256", _users("SCRAM-SHA-256", alice="pw").get)
    with pytest.raises(ScramAuthenticationError, match=message):
        server.step(client_first)
    with pytest.raises(ScramAuthenticationError):  # and the exchange is over
        server.step(b"n,,n=alice,r=abc")


def test_unknown_extensions_are_ignored_as_kafka_does() -> None:
    server = ScramServer("SCRAM-SHA-256", _users("SCRAM-SHA-256", alice="pw").get)
    assert server.step(b"n,,n=alice,r=abc,tokenauth=false,foo=bar").startswith(b"r=abc")


def test_authorization_id() -> None:
    users = _users("SCRAM-SHA-512", alice="pw", bob="pw")
    server = ScramServer("SCRAM-SHA-512", users.get)
    client = ScramClient("SCRAM-SHA-512", "alice", "pw", authzid="bob")
    assert client.first_message().startswith(b"n,a=bob,n=alice,")
    with pytest.raises(ScramAuthenticationError, match="authorization id that is different"):
        server.step(client.first_message())
    # The user's own is accepted, and the channel binding repeats it.
    server = ScramServer("SCRAM-SHA-512", users.get)
    client = ScramClient("SCRAM-SHA-512", "alice", "pw", authzid="alice")
    final = client.final_message(server.step(client.first_message()))
    assert final.startswith(b"c=" + base64.b64encode(b"n,a=alice,"))
    client.verify_server_final(server.step(final))
    assert server.username == "alice"


def test_credentials_iterations_and_salt() -> None:
    credential = make_credential("SCRAM-SHA-256", "pw")
    assert credential.iterations == 4096 and len(credential.salt) == 32
    assert make_credential("SCRAM-SHA-256", "pw").salt != credential.salt
    assert make_credential("SCRAM-SHA-512", "pw", 16384).iterations == 16384
    for iterations in (4095, 16385, 0):
        with pytest.raises(UnacceptableCredentialError, match="at least 4096 and at most 16384"):
            make_credential("SCRAM-SHA-256", "pw", iterations)
    with pytest.raises(UnacceptableCredentialError, match="salt"):
        make_credential("SCRAM-SHA-256", "pw", salt=b"")
    with pytest.raises(UnsupportedSaslMechanismError):
        make_credential("PLAIN", "pw")
    # A stored credential below the minimum is refused; so is a server asking for fewer.
    weak = ScramCredential(b"salt", b"k" * 32, b"k" * 32, 1024)
    with pytest.raises(ScramAuthenticationError, match="less than the minimum 4096"):
        ScramServer("SCRAM-SHA-256", lambda _: weak).step(b"n,,n=alice,r=abc")
    client = ScramClient("SCRAM-SHA-256", "alice", "pw", nonce="abc")
    with pytest.raises(ScramAuthenticationError, match="less than the minimum 4096"):
        client.final_message(b"r=abcdef,s=c2FsdA==,i=1024")


def test_client_checks_the_server() -> None:
    users = _users("SCRAM-SHA-256", alice="pw")
    server = ScramServer("SCRAM-SHA-256", users.get)
    client = ScramClient("SCRAM-SHA-256", "alice", "pw", nonce="abc")
    with pytest.raises(ScramAuthenticationError, match="before client-final"):
        client.verify_server_final(b"v=")
    with pytest.raises(ScramAuthenticationError, match="server nonce"):
        client.final_message(b"r=xyz,s=c2FsdA==,i=4096")
    with pytest.raises(ScramAuthenticationError, match="server error: other-error"):
        client.final_message(b"e=other-error")
    server_final = server.step(client.final_message(server.step(client.first_message())))
    # A server that does not hold the credential cannot sign.
    with pytest.raises(ScramAuthenticationError, match="server signature"):
        client.verify_server_final(b"v=" + base64.b64encode(b"\x00" * 32))
    with pytest.raises(ScramAuthenticationError, match="server error: invalid-proof"):
        client.verify_server_final(b"e=invalid-proof")
    assert not client.complete
    client.verify_server_final(server_final)
    assert client.complete
