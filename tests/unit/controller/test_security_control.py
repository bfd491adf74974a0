"""The controller's ACLs and SCRAM credentials: CreateAcls, DeleteAcls and
AlterUserScramCredentials as records, replayed into the image the authorizer and the SCRAM
listeners read."""

from __future__ import annotations

import hashlib
import hmac
import random

from rillet.controller.acls import binding_of, create_acls, delete_acls
from rillet.controller.scram import ScramDeletion, ScramUpsertion, alter_user_scram_credentials
from rillet.errors import (
    DuplicateResourceError,
    InvalidRequestError,
    ResourceNotFoundError,
    UnacceptableCredentialError,
    UnsupportedSaslMechanismError,
)
from rillet.metadata.image import MetadataImage
from rillet.metadata.records import MetadataRecord
from rillet.security.acls import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)


def acl(name: str, op: AclOperation, principal: str = "User:alice", **kw: object) -> AclBinding:
    return AclBinding(
        kw.get("rtype", ResourceType.TOPIC),  # type: ignore[arg-type]
        name,
        kw.get("pattern", PatternType.LITERAL),  # type: ignore[arg-type]
        principal,
        "*",
        op,
        kw.get("permission", AclPermissionType.ALLOW),  # type: ignore[arg-type]
    )


def applied(image: MetadataImage, records: list[MetadataRecord]) -> MetadataImage:
    return image.replay(enumerate(records, image.offset + 1))


def test_created_acls_are_records_with_ids_and_a_duplicate_is_not_written_twice() -> None:
    rng = random.Random(1)
    a, b = (
        acl("orders", AclOperation.READ),
        acl("pay-", AclOperation.WRITE, pattern=PatternType.PREFIXED),
    )
    result = create_acls(MetadataImage(), rng, [a, b, a])
    assert result.response == [None, None, None]
    assert len(result.records) == 2
    image = applied(MetadataImage(), result.records)
    assert sorted(map(str, (binding_of(r) for r in image.acls.values()))) == sorted(
        [str(a), str(b)]
    )
    again = create_acls(image, rng, [a])
    assert again.records == [] and again.response == [None]


def test_a_malformed_acl_is_refused_alone() -> None:
    bad = acl("orders", AclOperation.ANY)
    result = create_acls(MetadataImage(), random.Random(2), [bad, acl("t", AclOperation.READ)])
    assert isinstance(result.response[0], InvalidRequestError)
    assert result.response[1] is None and len(result.records) == 1


def test_delete_removes_what_each_filter_matches_once() -> None:
    rng = random.Random(3)
    acls = [
        acl("orders", AclOperation.READ),
        acl("orders", AclOperation.WRITE, "User:bob"),
        acl("audit", AclOperation.READ, "User:bob"),
    ]
    image = applied(MetadataImage(), create_acls(MetadataImage(), rng, acls).records)
    orders = AclBindingFilter(ResourceType.TOPIC, "orders", PatternType.LITERAL, None, None,
                              AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip
    bobs = AclBindingFilter(ResourceType.ANY, None, PatternType.ANY, "User:bob", None,
                            AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip
    result = delete_acls(image, [orders, bobs])
    first, second = result.response
    assert isinstance(first, list) and isinstance(second, list)
    assert {str(a) for a in first} == {str(acls[0]), str(acls[1])}
    assert {str(a) for a in second} == {str(acls[1]), str(acls[2])}
    assert len(result.records) == 3  # bob's orders ACL is removed once
    assert applied(image, result.records).acls == {}


def _salted(password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)


def test_scram_credentials_are_stored_as_keys_never_the_password() -> None:
    salted = _salted("alice-secret", b"salt", 4096)
    result = alter_user_scram_credentials(
        MetadataImage(), [], [ScramUpsertion("alice", 1, 4096, b"salt", salted)]
    )
    assert result.response == [("alice", None)]
    image = applied(MetadataImage(), result.records)
    record = image.scram_credentials[("alice", 1)]
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    assert record.stored_key == hashlib.sha256(client_key).digest()
    assert record.server_key == hmac.new(salted, b"Server Key", "sha256").digest()
    assert record.iterations == 4096 and record.salt == b"salt"
    gone = alter_user_scram_credentials(image, [ScramDeletion("alice", 1)], [])
    assert applied(image, gone.records).scram_credentials == {}


def test_scram_alterations_are_checked_per_user() -> None:
    salted = _salted("pw", b"s", 4096)
    ok = ScramUpsertion("carol", 2, 4096, b"s", salted)
    result = alter_user_scram_credentials(
        MetadataImage(),
        [ScramDeletion("bob", 1), ScramDeletion("dave", 1)],
        [
            ok,
            ScramUpsertion("erin", 1, 100, b"s", salted),
            ScramUpsertion("frank", 9, 4096, b"s", salted),
            ScramUpsertion("dave", 1, 4096, b"s", salted),
        ],
    )
    errors = dict(result.response)
    assert isinstance(errors["bob"], ResourceNotFoundError)
    assert isinstance(errors["dave"], DuplicateResourceError)
    assert isinstance(errors["erin"], UnacceptableCredentialError)
    assert isinstance(errors["frank"], UnsupportedSaslMechanismError)
    assert errors["carol"] is None
    assert [r.name for r in result.records] == ["carol"]  # type: ignore[union-attr]
