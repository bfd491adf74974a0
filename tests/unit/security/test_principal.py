"""ssl.principal.mapping.rules: Kafka's SslPrincipalMapper cases."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from rillet.errors import InvalidConfigurationError, SslAuthenticationError
from rillet.security.certs import make_ca, make_cert
from rillet.security.principal import ANONYMOUS, SslPrincipalMapper, distinguished_name


@pytest.mark.parametrize(
    "rules",
    [
        "DEFAULT",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
        "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
        "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
        "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
    ],
)
def test_kafkas_valid_rules_parse(rules: str) -> None:
    assert SslPrincipalMapper(rules).rules


@pytest.mark.parametrize(
    "rules",
    [
        "default",
        "DEFAUL",
        "DEFAULT/L",
        "DEFAULT/U",
        "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
        "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
    ],
)
def test_kafkas_invalid_rules_are_refused_naming_the_key(rules: str) -> None:
    with pytest.raises(InvalidConfigurationError, match=r"ssl\.principal\.mapping\.rules"):
        SslPrincipalMapper(rules)


def test_rules_apply_in_order_with_group_references_and_case() -> None:
    mapper = SslPrincipalMapper(
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U,"
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U,"
        "DEFAULT"
    )
    assert mapper.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "Duke"
    assert mapper.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name("cn=duke,ou=JavaSoft,dc=mycp,dc=US") == "DUKE@JAVASOFT"
    assert mapper.name("cn=duke,OU=JavaSoft,O=mycp,C=US") == "DUKE"
    assert mapper.name("OU=JavaSoft,O=mycp,C=US") == "OU=JavaSoft,O=mycp,C=US"


def test_a_reference_past_the_last_group_is_literal_as_in_kafka() -> None:
    mapper = SslPrincipalMapper("RULE:^CN=(.*?),OU=(.*?)$/$1@$3 $12/")
    assert mapper.name("CN=a,OU=b") == "a@$3 a2"


def test_a_name_no_rule_applies_to_fails_authentication() -> None:
    mapper = SslPrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/")
    with pytest.raises(SslAuthenticationError, match="No rules apply to CN=x,OU=Other"):
        mapper.name("CN=x,OU=Other")


def test_a_certificates_principal_comes_from_its_subject_in_rfc2253_order(
    tmp_path: Path,
) -> None:
    ca = make_ca(tmp_path)
    files = make_cert(ca, tmp_path, "alice", subject="CN=alice,OU=eng,O=Rillet")
    pem = files.cert.read_bytes()
    assert distinguished_name(pem) == "CN=alice,OU=eng,O=Rillet"
    mapper = SslPrincipalMapper("RULE:^CN=(.*?),OU=eng.*$/$1/U,DEFAULT")
    der = x509.load_pem_x509_certificate(pem).public_bytes(serialization.Encoding.DER)
    assert str(mapper.principal(der)) == "User:ALICE"
    assert mapper.principal(None) is ANONYMOUS
    assert str(ANONYMOUS) == "User:ANONYMOUS"
