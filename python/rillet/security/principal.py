"""Who a connection is: Kafka's principals (``User:alice``), and the name a TLS client
certificate gives one through ``ssl.principal.mapping.rules`` (Kafka's SslPrincipalMapper).

A rule is ``RULE:pattern/replacement/`` with an optional ``L`` or ``U`` after the last slash
(lower or upper case the result), or ``DEFAULT`` (the distinguished name as it is); rules are
separated by commas and tried in order. A rule applies when its pattern matches the whole
distinguished name (RFC 2253 form, ``CN=alice,OU=eng,O=Rillet``), and the name is the
distinguished name with the pattern replaced, ``$1`` naming the first group. A certificate
no rule applies to is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cryptography import x509

from rillet.errors import InvalidConfigurationError, SslAuthenticationError

__all__ = [
    "ANONYMOUS",
    "KafkaPrincipal",
    "SslPrincipalMapper",
    "distinguished_name",
]


@dataclass(frozen=True)
class KafkaPrincipal:
    """A principal as Kafka writes it: ``User:alice``."""

    type: str
    name: str

    def __str__(self) -> str:
        return f"{self.type}:{self.name}"


# Who a connection without credentials is (a PLAINTEXT listener, or TLS without a client
# certificate).
ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")

_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_RULE_PARSER = re.compile(_RULE)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "L", "U" or ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        groups = self.pattern.groups
        name = self.pattern.sub(lambda m: _expand(self.replacement, m, groups), dn)
        return name.lower() if self.case == "L" else name.upper() if self.case == "U" else name

    def __str__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        return f"RULE:{self.pattern.pattern}/{self.replacement}/{self.case}"


def _expand(replacement: str, match: re.Match[str], groups: int) -> str:
    """``replacement`` with Java's ``$n`` group references filled in; a reference past the
    last group keeps as many of its digits as name a group, the rest literal (as Kafka)."""

    def group(ref: re.Match[str]) -> str:
        digits = ref.group(1)
        while len(digits) > 1 and int(digits) > groups:
            digits = digits[:-1]
        n = int(digits)
        if n > groups:
            return ref.group(0)
        rest = ref.group(1)[len(digits) :]
        return (match.group(n) or "") + rest

    return _BACK_REFERENCE.sub(group, replacement)


class SslPrincipalMapper:
    """``ssl.principal.mapping.rules``, parsed (see the module doc)."""

    def __init__(self, rules: str = "DEFAULT") -> None:
        self.rules: list[_Rule] = []
        for text in [m.group(1) for m in _RULE_SPLITTER.finditer(rules.strip())]:
            m = _RULE_PARSER.match(text)
            if m is None or m.end() != len(text):
                raise InvalidConfigurationError(
                    f"Invalid value {rules} for configuration ssl.principal.mapping.rules: "
                    f"invalid rule `{text}`"
                )
            if m.group(1) is not None:
                self.rules.append(_Rule(None))
            elif m.group(2) is not None:
                try:
                    pattern = re.compile(m.group(2))
                except re.error as e:
                    raise InvalidConfigurationError(
                        f"Invalid value {rules} for configuration ssl.principal.mapping.rules: "
                        f"invalid pattern {m.group(2)!r}: {e}"
                    ) from None
                self.rules.append(_Rule(pattern, m.group(4), m.group(6) or ""))

    def name(self, dn: str) -> str:
        """The principal name of the distinguished name ``dn``; SslAuthenticationError when
        no rule applies."""
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise SslAuthenticationError(
            f"No rules apply to {dn}, rules [{', '.join(str(r) for r in self.rules)}]"
        )

    def principal(self, certificate_der: bytes | None) -> KafkaPrincipal:
        """The principal of a peer that presented ``certificate_der`` (None: no
        certificate, :data:`ANONYMOUS`)."""
        if certificate_der is None:
            return ANONYMOUS
        return KafkaPrincipal("User", self.name(distinguished_name(certificate_der)))


def distinguished_name(certificate: bytes) -> str:
    """A certificate's (DER or PEM) subject in RFC 2253 form, as Java's X500Principal
    writes it: ``CN=alice,OU=eng,O=Rillet``."""
    if certificate.lstrip().startswith(b"-----BEGIN"):
        cert = x509.load_pem_x509_certificate(certificate)
    else:
        cert = x509.load_der_x509_certificate(certificate)
    return cert.subject.rfc4514_string()
