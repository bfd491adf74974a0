"""SASL/SCRAM (RFC 5802, with SHA-256 and SHA-512 as RFC 7677 and Kafka's
``org.apache.kafka.common.security.scram`` use them): credentials, the server's side of the
exchange and a client's.

A credential (:class:`ScramCredential`, Kafka's ``ScramCredential``) is what the metadata log
keeps of a password (``UserScramCredentialRecord``): a random salt, the PBKDF2 iteration count
(at least 4096 and at most 16384, as Kafka requires), and the two keys derived from the salted
password ``SaltedPassword = Hi(password, salt, i)``::

    StoredKey = H(HMAC(SaltedPassword, "Client Key"))
    ServerKey = HMAC(SaltedPassword, "Server Key")

The password itself is never stored, nor sent to the broker (Kafka's admin client sends the
salted password and the controller derives the keys). As in Kafka, the password is used as its
UTF-8 bytes, without SASLprep.

The exchange, two SaslAuthenticate round trips (``r`` the nonce, ``s`` the base64 salt, ``i``
the iteration count, ``c`` the base64 GS2 header, ``p`` the proof, ``v`` the signature)::

    client-first   n,,n=alice,r=<client nonce>
    server-first   r=<client nonce><server nonce>,s=<salt>,i=<iterations>
    client-final   c=biws,r=<client nonce><server nonce>,p=<ClientProof>
    server-final   v=<ServerSignature>

where, with ``AuthMessage`` the client-first message without its GS2 header, the
server-first message and the client-final message without its proof, joined by commas::

    ClientSignature = HMAC(StoredKey, AuthMessage)
    ClientProof     = ClientKey XOR ClientSignature
    ServerSignature = HMAC(ServerKey, AuthMessage)

The server recovers ``ClientKey`` from the proof and checks that its hash is the stored key,
in constant time; the client checks the server's signature in turn, which proves the server
holds the credential. A user name escapes ``,`` as ``=2C`` and ``=`` as ``=3D``. An
authorization id (``n,a=alice,``) other than the user's own is refused, as Kafka does.

Unlike Kafka, a user without a credential is not refused at the first message: it is answered
a server-first message all the same, with a salt derived from the name and a secret of the
process (the same one every time, so that asking twice tells nothing) and the default
iteration count, and fails at the proof exactly as a wrong password does. Channel binding
(``p=``) and delegation tokens (the ``tokenauth`` extension) are not supported and are
refused; other extensions are ignored, as Kafka ignores them.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum

from rillet.errors import UnacceptableCredentialError, UnsupportedSaslMechanismError

__all__ = [
    "DEFAULT_ITERATIONS",
    "MAX_ITERATIONS",
    "MIN_ITERATIONS",
    "SCRAM_MECHANISMS",
    "ScramAuthenticationError",
    "ScramClient",
    "ScramCredential",
    "ScramMechanism",
    "ScramServer",
    "derive_keys",
    "make_credential",
    "salted_password",
]

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
# Kafka's bounds on the iteration count (ScramMechanism.minIterations, and the maximum its
# controller accepts), and its default.
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384
DEFAULT_ITERATIONS = 4096
# Bytes of a random salt (and of the stand-in salt of an unknown user).
_SALT_BYTES = 32

_INVALID_CREDENTIALS = "Authentication failed: Invalid user credentials"

# RFC 5802's grammar: saslname, printable (the nonce), an attribute's name (Kafka allows
# extension names of several letters).
_SASLNAME = re.compile(r"(?:[^=,\x00]|=2C|=3D)+")
_PRINTABLE = re.compile(r"[\x21-\x2b\x2d-\x7e]+")
_ATTRIBUTE = re.compile(r"[A-Za-z]+")

# The secret the stand-in credentials of unknown users derive from: random per process, so
# that one cannot compute them to tell a stand-in from a real credential.
_STAND_IN_KEY = secrets.token_bytes(32)


class ScramMechanism(IntEnum):
    """Kafka's codes of the SCRAM mechanisms, as DescribeUserScramCredentials,
    AlterUserScramCredentials and ``UserScramCredentialRecord`` carry them."""

    UNKNOWN = 0
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def mechanism_name(self) -> str:
        """The SASL name, ``SCRAM-SHA-256`` (``UNKNOWN`` for UNKNOWN)."""
        return self.name.replace("_", "-")

    @property
    def hash_name(self) -> str:
        """The :mod:`hashlib` name of the mechanism's hash; ValueError for UNKNOWN."""
        if self == ScramMechanism.SCRAM_SHA_256:
            return "sha256"
        if self == ScramMechanism.SCRAM_SHA_512:
            return "sha512"
        raise ValueError(f"{self.mechanism_name} is not a SCRAM mechanism")

    @classmethod
    def from_name(cls, name: str) -> ScramMechanism:
        """The mechanism SASL calls ``name`` (``SCRAM-SHA-256``); UnsupportedSaslMechanismError
        for any other name."""
        for m in (cls.SCRAM_SHA_256, cls.SCRAM_SHA_512):
            if m.mechanism_name == name.upper():
                return m
        raise UnsupportedSaslMechanismError(
            f"Unsupported SCRAM mechanism {name}: the mechanisms are {', '.join(SCRAM_MECHANISMS)}"
        )


class ScramAuthenticationError(Exception):
    """The exchange failed; the message is what the client is told."""


@dataclass(frozen=True)
class ScramCredential:
    """What is kept of a user's password for one mechanism (never the password)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hmac(hash_name: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hash_name).digest()


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ScramAuthenticationError(f"Invalid SCRAM message: {what} is not base64") from None


def salted_password(
    mechanism: ScramMechanism, password: str, salt: bytes, iterations: int
) -> bytes:
    """``Hi(password, salt, i)`` of RFC 5802: PBKDF2 with the mechanism's HMAC."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode("utf-8"), salt, iterations)


def derive_keys(mechanism: ScramMechanism, salted: bytes) -> tuple[bytes, bytes]:
    """``(StoredKey, ServerKey)`` of a salted password."""
    h = mechanism.hash_name
    client_key = _hmac(h, salted, b"Client Key")
    return hashlib.new(h, client_key).digest(), _hmac(h, salted, b"Server Key")


def make_credential(
    mechanism: str,
    password: str,
    iterations: int = DEFAULT_ITERATIONS,
    salt: bytes | None = None,
) -> ScramCredential:
    """The credential of ``password`` for ``mechanism`` (``SCRAM-SHA-256``), with ``salt``
    or else 32 random bytes. UnsupportedSaslMechanismError for another mechanism,
    UnacceptableCredentialError (Kafka's UNACCEPTABLE_CREDENTIAL) for an iteration count out
    of Kafka's range or an empty salt."""
    m = ScramMechanism.from_name(mechanism)
    if isinstance(iterations, bool) or not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise UnacceptableCredentialError(
            f"Iterations {iterations} for {m.mechanism_name} must be at least "
            f"{MIN_ITERATIONS} and at most {MAX_ITERATIONS}"
        )
    if salt is None:
        salt = secrets.token_bytes(_SALT_BYTES)
    elif not salt:
        raise UnacceptableCredentialError(f"The salt of a {m.mechanism_name} credential is empty")
    stored_key, server_key = derive_keys(m, salted_password(m, password, salt, iterations))
    return ScramCredential(salt, stored_key, server_key, iterations)


def _stand_in(mechanism: ScramMechanism, username: str) -> ScramCredential:
    """The credential an unknown user is checked against: the same salt for the same name
    (in this process), keys no password gives."""

    def derive(label: str) -> bytes:
        data = f"{label}\x00{mechanism.mechanism_name}\x00{username}".encode()
        return _hmac(mechanism.hash_name, _STAND_IN_KEY, data)

    return ScramCredential(
        derive("salt")[:_SALT_BYTES], derive("stored"), derive("server"), DEFAULT_ITERATIONS
    )


def _new_nonce() -> str:
    # 24 random bytes in [A-Za-z0-9_-]: printable, no comma.
    return secrets.token_urlsafe(24)


def _check_nonce(nonce: str) -> str:
    if not _PRINTABLE.fullmatch(nonce):
        raise ValueError(f"A SCRAM nonce is printable ASCII without commas, not {nonce!r}")
    return nonce


def _encode_name(name: str) -> str:
    """A name as RFC 5802's ``saslname``: ``=`` is ``=3D`` and ``,`` is ``=2C``."""
    return name.replace("=", "=3D").replace(",", "=2C")


def _decode_name(saslname: str) -> str:
    if not _SASLNAME.fullmatch(saslname):
        raise ScramAuthenticationError(
            "Invalid SCRAM message: a user name must escape '=' and ',' as =3D and =2C"
        )
    return saslname.replace("=2C", ",").replace("=3D", "=")


def _attributes(message: str, what: str) -> list[tuple[str, str]]:
    """``a=1,b=2`` as ``[("a", "1"), ("b", "2")]``; ScramAuthenticationError for a malformed
    message (``what`` names it)."""
    if "\x00" in message:
        raise ScramAuthenticationError(f"Invalid SCRAM {what} message: NUL character")
    out: list[tuple[str, str]] = []
    for part in message.split(","):
        name, eq, value = part.partition("=")
        if not eq or not _ATTRIBUTE.fullmatch(name) or not value:
            raise ScramAuthenticationError(
                f"Invalid SCRAM {what} message: expected name=value, not {part[:40]!r}"
            )
        out.append((name, value))
    return out


def _expect(attributes: list[tuple[str, str]], names: str, what: str) -> list[str]:
    """The values of the first attributes, which must be named ``names`` in order (one letter
    each)."""
    if [name for name, _ in attributes[: len(names)]] != list(names):
        expected = ",".join(f"{n}=..." for n in names)
        raise ScramAuthenticationError(f"Invalid SCRAM {what} message: expected {expected}")
    return [value for _, value in attributes[: len(names)]]


def _decode(message: bytes, what: str) -> str:
    try:
        return bytes(message).decode("utf-8")
    except UnicodeDecodeError:
        raise ScramAuthenticationError(f"Invalid SCRAM {what} message: not UTF-8") from None


class ScramServer:
    """The broker's side of one exchange (see the module doc): :meth:`step` answers the
    client-first message, then the client-final message; a ScramAuthenticationError ends the
    exchange, failed. ``lookup(username)`` is the user's credential for this mechanism (None:
    none); ``nonce`` fixes the server's part of the nonce (tests), random otherwise."""

    def __init__(
        self,
        mechanism: str,
        lookup: Callable[[str], ScramCredential | None],
        *,
        nonce: str | None = None,
    ) -> None:
        self.mechanism = ScramMechanism.from_name(mechanism)
        self._lookup = lookup
        self._server_nonce = _check_nonce(nonce) if nonce is not None else _new_nonce()
        self._state = "client-first"
        self._user = ""
        self._known = False
        self._credential: ScramCredential | None = None
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self.username: str | None = None
        """The authenticated user, once the exchange is complete."""

    @property
    def complete(self) -> bool:
        """Whether the client was authenticated (the server-final message was made)."""
        return self._state == "complete"

    def step(self, client_message: bytes) -> bytes:
        """The answer to the client's next message; ScramAuthenticationError if it fails (and
        for any message after that, or after the exchange completed)."""
        state, self._state = self._state, "failed"
        if state == "client-first":
            answer = self._client_first(_decode(client_message, "client-first"))
            self._state = "client-final"
        elif state == "client-final":
            answer = self._client_final(_decode(client_message, "client-final"))
            self._state = "complete"
        else:
            raise ScramAuthenticationError(
                "Authentication failed: unexpected SCRAM message after the exchange ended"
            )
        return answer.encode("utf-8")

    def _client_first(self, text: str) -> str:
        # gs2-header: cbind-flag "," [ "a=" saslname ] ","
        parts = text.split(",", 2)
        if len(parts) != 3:
            raise ScramAuthenticationError("Invalid SCRAM client-first message: no GS2 header")
        flag, authzid, bare = parts
        if flag.startswith("p="):
            raise ScramAuthenticationError(
                "Authentication failed: SCRAM channel binding is not supported"
            )
        # "y": the client could bind the channel but thinks the server cannot; it cannot.
        if flag not in ("n", "y"):
            raise ScramAuthenticationError(
                f"Invalid SCRAM client-first message: unknown GS2 flag {flag[:20]!r}"
            )
        if authzid and not authzid.startswith("a="):
            raise ScramAuthenticationError(
                "Invalid SCRAM client-first message: the authorization id is not a=..."
            )
        attributes = _attributes(bare, "client-first")
        if attributes[0][0] == "m":
            raise ScramAuthenticationError(
                "Authentication failed: unsupported SCRAM mandatory extension"
            )
        saslname, client_nonce = _expect(attributes, "nr", "client-first")
        username = _decode_name(saslname)
        if not _PRINTABLE.fullmatch(client_nonce):
            raise ScramAuthenticationError("Invalid SCRAM client-first message: bad nonce")
        extensions = dict(attributes[2:])
        if extensions.get("tokenauth", "").lower() == "true":
            raise ScramAuthenticationError(
                "Authentication failed: delegation tokens (tokenauth) are not supported"
            )
        if authzid and _decode_name(authzid[2:]) != username:
            raise ScramAuthenticationError(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        credential = self._lookup(username)
        self._known = credential is not None
        if credential is None:
            credential = _stand_in(self.mechanism, username)
        elif credential.iterations < MIN_ITERATIONS:
            raise ScramAuthenticationError(
                f"Authentication failed: Iterations {credential.iterations} is less than the "
                f"minimum {MIN_ITERATIONS} for {self.mechanism.mechanism_name}"
            )
        self._user = username
        self._credential = credential
        self._gs2_header = f"{flag},{authzid},"
        self._client_first_bare = bare
        self._nonce = client_nonce + self._server_nonce
        self._server_first = f"r={self._nonce},s={_b64(credential.salt)},i={credential.iterations}"
        return self._server_first

    def _client_final(self, text: str) -> str:
        without_proof, sep, proof_b64 = text.rpartition(",p=")
        if not sep:
            raise ScramAuthenticationError("Invalid SCRAM client-final message: no proof")
        attributes = _attributes(without_proof, "client-final")
        channel_binding, nonce = _expect(attributes, "cr", "client-final")
        if not hmac.compare_digest(nonce.encode(), self._nonce.encode()):
            raise ScramAuthenticationError("Authentication failed: Invalid nonce")
        if channel_binding != _b64(self._gs2_header.encode()):
            raise ScramAuthenticationError(
                "Authentication failed: the channel binding does not repeat the GS2 header"
            )
        proof = _unb64(proof_b64, "the proof")
        credential = self._credential
        assert credential is not None
        h = self.mechanism.hash_name
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}"
        signature = _hmac(h, credential.stored_key, auth_message.encode())
        if len(proof) != len(signature):
            raise ScramAuthenticationError(_INVALID_CREDENTIALS)
        client_key = _xor(proof, signature)
        matches = hmac.compare_digest(hashlib.new(h, client_key).digest(), credential.stored_key)
        if not (matches and self._known):
            raise ScramAuthenticationError(_INVALID_CREDENTIALS)
        self.username = self._user
        return "v=" + _b64(_hmac(h, credential.server_key, auth_message.encode()))


class ScramClient:
    """A client's side of one exchange: :meth:`first_message`, then :meth:`final_message`
    with the server's first message, then :meth:`verify_server_final` with its final one.
    ``authzid`` is sent as the authorization id (a broker only accepts the user's own);
    ``nonce`` fixes the client nonce (tests), random otherwise."""

    def __init__(
        self,
        mechanism: str,
        username: str,
        password: str,
        *,
        authzid: str | None = None,
        nonce: str | None = None,
    ) -> None:
        self.mechanism = ScramMechanism.from_name(mechanism)
        self.username = username
        self._password = password
        self._nonce = _check_nonce(nonce) if nonce is not None else _new_nonce()
        self._gs2_header = f"n,{'a=' + _encode_name(authzid) if authzid else ''},"
        self._first_bare = f"n={_encode_name(username)},r={self._nonce}"
        self._server_signature: bytes | None = None
        self.complete = False
        """Whether the server proved it holds the credential."""

    def first_message(self) -> bytes:
        """The client-first message."""
        return (self._gs2_header + self._first_bare).encode("utf-8")

    def final_message(self, server_first: bytes) -> bytes:
        """The client-final message answering ``server_first``; ScramAuthenticationError
        for an error, a nonce that does not extend the client's, or too few iterations."""
        text = _decode(server_first, "server-first")
        attributes = _attributes(text, "server-first")
        if attributes[0][0] == "e":
            raise ScramAuthenticationError(f"SCRAM server error: {attributes[0][1]}")
        if attributes[0][0] == "m":
            raise ScramAuthenticationError("Unsupported SCRAM mandatory extension")
        nonce, salt_b64, iterations_text = _expect(attributes, "rsi", "server-first")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise ScramAuthenticationError("Invalid SCRAM server nonce")
        if not _PRINTABLE.fullmatch(nonce):
            raise ScramAuthenticationError("Invalid SCRAM server-first message: bad nonce")
        salt = _unb64(salt_b64, "the salt")
        if not iterations_text.isascii() or not iterations_text.isdigit():
            raise ScramAuthenticationError("Invalid SCRAM server-first message: bad iterations")
        iterations = int(iterations_text)
        if iterations < MIN_ITERATIONS:
            raise ScramAuthenticationError(
                f"Requested iterations {iterations} is less than the minimum "
                f"{MIN_ITERATIONS} for {self.mechanism.mechanism_name}"
            )
        h = self.mechanism.hash_name
        salted = salted_password(self.mechanism, self._password, salt, iterations)
        without_proof = f"c={_b64(self._gs2_header.encode())},r={nonce}"
        auth_message = f"{self._first_bare},{text},{without_proof}".encode()
        client_key = _hmac(h, salted, b"Client Key")
        stored_key, server_key = derive_keys(self.mechanism, salted)
        proof = _xor(client_key, _hmac(h, stored_key, auth_message))
        self._server_signature = _hmac(h, server_key, auth_message)
        return f"{without_proof},p={_b64(proof)}".encode()

    def verify_server_final(self, server_final: bytes) -> None:
        """Check the server's signature; ScramAuthenticationError when it does not match or
        the server answered an error (``e=``)."""
        if self._server_signature is None:
            raise ScramAuthenticationError("SCRAM server-final message before client-final")
        attributes = _attributes(_decode(server_final, "server-final"), "server-final")
        name, value = attributes[0]
        if name == "e":
            raise ScramAuthenticationError(f"SCRAM server error: {value}")
        if name != "v":
            raise ScramAuthenticationError("Invalid SCRAM server-final message: expected v=...")
        if not hmac.compare_digest(_unb64(value, "the signature"), self._server_signature):
            raise ScramAuthenticationError("Invalid SCRAM server signature")
        self.complete = True
