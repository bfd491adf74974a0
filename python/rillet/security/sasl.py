"""SASL on a Kafka-protocol listener (``SASL_PLAINTEXT``, ``SASL_SSL``): Kafka's
SaslHandshake and SaslAuthenticate exchange, as a state machine of one connection, and the
JAAS configuration its credentials come from.

A connection to a SASL listener may send ApiVersions, then SaslHandshake naming a mechanism
the listener enables (``sasl.enabled.mechanisms``), then SaslAuthenticate with the
mechanism's bytes; anything else before it is authenticated closes it, as Kafka does. PLAIN
(RFC 4616) checks ``authzid NUL username NUL password`` against the ``user_<name>="<password>"``
options of the listener's ``org.apache.kafka.common.security.plain.PlainLoginModule``
(``listener.name.<listener>.plain.sasl.jaas.config``, else ``sasl.jaas.config``).
SCRAM-SHA-256 and SCRAM-SHA-512 (:mod:`rillet.security.scram`) take two SaslAuthenticate
round trips and check the client's proof against the credentials of the metadata log
(``UserScramCredentialRecord``, set with ``rillet configs --entity-type users``). A failed
authentication is answered SASL_AUTHENTICATION_FAILED, and the connection is closed.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from rillet.errors import InvalidConfigurationError
from rillet.security.principal import KafkaPrincipal
from rillet.security.scram import (
    SCRAM_MECHANISMS,
    ScramAuthenticationError,
    ScramCredential,
    ScramServer,
)

__all__ = [
    "PLAIN_LOGIN_MODULE",
    "SASL_AUTHENTICATE",
    "SASL_HANDSHAKE",
    "SUPPORTED_MECHANISMS",
    "JaasEntry",
    "ListenerSasl",
    "SaslConnection",
    "parse_jaas",
]

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
SUPPORTED_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"

# Kafka's error codes of the exchange.
_NONE, _UNSUPPORTED_SASL_MECHANISM, _ILLEGAL_SASL_STATE, _SASL_AUTHENTICATION_FAILED = 0, 33, 34, 58

_ENTRY = re.compile(
    r"\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\s*(.*?)\s*;\s*$", re.S
)
_OPTION = re.compile(r'\s*([\w.-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s";]+))')


@dataclass(frozen=True)
class JaasEntry:
    """One login module of a ``sasl.jaas.config``: its class and options."""

    login_module: str
    options: Mapping[str, str] = field(default_factory=dict)


def parse_jaas(text: str, key: str = "sasl.jaas.config") -> JaasEntry:
    """``org.apache...PlainLoginModule required username="a" password="b";`` as a
    :class:`JaasEntry`; InvalidConfigurationError naming ``key`` when it does not parse."""
    m = _ENTRY.fullmatch(text)
    if m is None:
        raise InvalidConfigurationError(
            f"Invalid value for configuration {key}: expected 'LoginModuleClass required "
            'option="value" ...;\''
        )
    options: dict[str, str] = {}
    rest = m.group(3)
    at = 0
    while at < len(rest):
        option = _OPTION.match(rest, at)
        if option is None:
            raise InvalidConfigurationError(
                f"Invalid value for configuration {key}: cannot read the options from "
                f"'{rest[at : at + 20]}'"
            )
        value = option.group(2) if option.group(2) is not None else option.group(3)
        options[option.group(1)] = re.sub(r"\\(.)", r"\1", value)
        at = option.end()
        while at < len(rest) and rest[at].isspace():
            at += 1
    return JaasEntry(m.group(1), options)


class ListenerSasl:
    """A SASL listener's mechanisms and credentials (checked when it is made, so that a bad
    configuration stops the start)."""

    def __init__(
        self,
        listener_name: str,
        mechanisms: Sequence[str],
        jaas: Mapping[str, str | None],
        scram_credentials: Callable[[str, str], ScramCredential | None] | None = None,
    ) -> None:
        """``scram_credentials(mechanism, user)`` is a user's SCRAM credential (None: none),
        needed when a SCRAM mechanism is enabled (InvalidConfigurationError without). SCRAM
        needs no JAAS configuration on the broker: one there (the inter-broker client's own
        ``ScramLoginModule`` user) is ignored."""
        self.listener_name = listener_name
        unsupported = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
        if unsupported or not mechanisms:
            raise InvalidConfigurationError(
                f"Invalid value {','.join(mechanisms)} for configuration "
                f"sasl.enabled.mechanisms (listener {listener_name}): "
                + (f"{', '.join(unsupported)} not supported yet; " if unsupported else "")
                + f"the mechanisms served are {', '.join(SUPPORTED_MECHANISMS)}"
            )
        self.mechanisms = tuple(mechanisms)
        if scram_credentials is None and set(mechanisms) & set(SCRAM_MECHANISMS):
            raise InvalidConfigurationError(
                f"Listener {listener_name} enables SCRAM but no credential store was given"
            )
        self.scram_credentials = scram_credentials
        self.plain_users: dict[str, str] = {}
        if "PLAIN" in self.mechanisms:
            text = jaas.get("PLAIN")
            where = f"listener.name.{listener_name.lower()}.plain.sasl.jaas.config"
            if not text:
                raise InvalidConfigurationError(
                    f"Listener {listener_name} enables SASL PLAIN but has no JAAS "
                    f"configuration: set {where} (or sasl.jaas.config) to {PLAIN_LOGIN_MODULE} "
                    'required user_<name>="<password>" ...;'
                )
            entry = parse_jaas(text, where)
            if entry.login_module != PLAIN_LOGIN_MODULE:
                raise InvalidConfigurationError(
                    f"Invalid value for configuration {where}: PLAIN takes "
                    f"{PLAIN_LOGIN_MODULE}, not {entry.login_module}"
                )
            self.plain_users = {
                k.removeprefix("user_"): v
                for k, v in entry.options.items()
                if k.startswith("user_")
            }

    def connection(self) -> SaslConnection:
        return SaslConnection(self)


@dataclass
class Answer:
    """What the connection answers a SASL request: the response body, and whether the
    connection is to be closed once it is sent."""

    body: dict[str, object]
    close: bool = False


class SaslConnection:
    """One connection's SASL exchange (see the module doc): feed it the SASL requests, in
    order; :attr:`principal` is set once it is authenticated."""

    def __init__(self, listener: ListenerSasl) -> None:
        self.listener = listener
        self.mechanism: str | None = None
        self.principal: KafkaPrincipal | None = None
        # After a SaslHandshake v0 the client sends the mechanism's bytes as they are (a
        # size-prefixed frame, no request header), not in a SaslAuthenticate request.
        self.raw_tokens = False
        self._scram: ScramServer | None = None

    @property
    def authenticated(self) -> bool:
        return self.principal is not None

    def handshake(self, mechanism: str, version: int = 1) -> Answer:
        mechanisms = list(self.listener.mechanisms)
        if self.mechanism is not None or self.authenticated:
            return Answer({"error_code": _ILLEGAL_SASL_STATE, "mechanisms": mechanisms}, True)
        if mechanism not in mechanisms:
            return Answer(
                {"error_code": _UNSUPPORTED_SASL_MECHANISM, "mechanisms": mechanisms}, True
            )
        self.mechanism = mechanism
        self.raw_tokens = version == 0
        lookup = self.listener.scram_credentials
        if mechanism in SCRAM_MECHANISMS and lookup is not None:
            self._scram = ScramServer(mechanism, lambda user: lookup(mechanism, user))
        return Answer({"error_code": _NONE, "mechanisms": mechanisms})

    def authenticate(self, auth_bytes: bytes) -> Answer:
        """Answer a SaslAuthenticate (or, after a v0 handshake, a raw token): PLAIN in one
        step; SCRAM in two, the first answered the server-first message in ``auth_bytes``
        (not authenticated yet), the second the server-final message, with
        :attr:`principal` set."""
        if self.mechanism is None or self.authenticated:
            return self._failed(_ILLEGAL_SASL_STATE, "Unexpected SaslAuthenticate request")
        if self._scram is not None:
            return self._scram_step(self._scram, auth_bytes)
        # PLAIN: [authzid] NUL authcid NUL passwd (RFC 4616).
        parts = bytes(auth_bytes).split(b"\x00")
        if len(parts) != 3:
            return self._failed(
                _SASL_AUTHENTICATION_FAILED, "Authentication failed: invalid SASL/PLAIN request"
            )
        authzid, username, password = (p.decode("utf-8", "replace") for p in parts)
        expected = self.listener.plain_users.get(username)
        if (
            not username
            or expected is None
            or not hmac.compare_digest(expected.encode(), password.encode())
        ):
            return self._failed(
                _SASL_AUTHENTICATION_FAILED, "Authentication failed: Invalid username or password"
            )
        if authzid and authzid != username:
            return self._failed(
                _SASL_AUTHENTICATION_FAILED,
                "Authentication failed: Client requested an authorization id that is "
                "different from username",
            )
        self.principal = KafkaPrincipal("User", username)
        return Answer(
            {
                "error_code": _NONE,
                "error_message": None,
                "auth_bytes": b"",
                "session_lifetime_ms": 0,
            }
        )

    def _scram_step(self, scram: ScramServer, auth_bytes: bytes) -> Answer:
        try:
            token = scram.step(auth_bytes)
        except ScramAuthenticationError as e:
            return self._failed(_SASL_AUTHENTICATION_FAILED, str(e))
        if scram.username is not None:
            self.principal = KafkaPrincipal("User", scram.username)
        return Answer(
            {
                "error_code": _NONE,
                "error_message": None,
                "auth_bytes": token,
                "session_lifetime_ms": 0,
            }
        )

    @staticmethod
    def _failed(code: int, message: str) -> Answer:
        return Answer(
            {
                "error_code": code,
                "error_message": message,
                "auth_bytes": b"",
                "session_lifetime_ms": 0,
            },
            close=True,
        )
