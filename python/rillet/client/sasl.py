"""The client's side of SASL on a Kafka-protocol connection (``SASL_PLAINTEXT``,
``SASL_SSL``), as Kafka's ``SaslClientAuthenticator`` runs it after ApiVersions:
SaslHandshake v1 names the mechanism, then SaslAuthenticate requests carry the mechanism's
tokens until it is done.

PLAIN (RFC 4616) sends ``NUL username NUL password`` in one round. SCRAM-SHA-256 and
SCRAM-SHA-512 (RFC 5802, :class:`~rillet.security.scram.ScramClient`) take two rounds, the
client-first and client-final messages, and check the server's signature in its final
message, which proves the broker holds the credential. A broker that refuses answers
SASL_AUTHENTICATION_FAILED with its reason; a server signature that does not match fails
the same way here.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field

from rillet.errors import SaslAuthenticationFailedError
from rillet.security.scram import SCRAM_MECHANISMS, ScramAuthenticationError, ScramClient

__all__ = ["SASL_AUTHENTICATE", "SASL_HANDSHAKE", "SASL_MECHANISMS", "ClientSasl"]

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
SASL_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)

# The tokens of one exchange: each value yielded is the client's next token; what is sent
# back in is the broker's answer to it. It returns once the client has nothing more to say
# (the broker's last answer checked).
Exchange = Generator[bytes, bytes, None]


@dataclass(frozen=True)
class ClientSasl:
    """A client's SASL credentials for one mechanism (the password never in its repr)."""

    mechanism: str
    username: str
    password: str = field(repr=False)

    def exchange(self) -> Exchange:
        """A new exchange of this mechanism's tokens, for one connection."""
        if self.mechanism == "PLAIN":
            return self._plain()
        return self._scram()

    def _plain(self) -> Exchange:
        # [authzid] NUL authcid NUL passwd, without an authorization id (RFC 4616).
        yield b"\x00" + self.username.encode() + b"\x00" + self.password.encode()

    def _scram(self) -> Exchange:
        client = ScramClient(self.mechanism, self.username, self.password)
        try:
            server_first = yield client.first_message()
            server_final = yield client.final_message(server_first)
            client.verify_server_final(server_final)
        except ScramAuthenticationError as e:
            raise SaslAuthenticationFailedError(
                f"{self.mechanism} authentication of {self.username} failed: {e}"
            ) from None
