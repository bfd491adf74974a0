"""SCRAM credentials (Kafka's ScramControlManager): AlterUserScramCredentials as metadata
records.

The client sends, per user and mechanism, a salt, an iteration count and the salted password
(never the password); the controller derives the stored and server keys of RFC 5802 and
writes them as a :class:`UserScramCredentialRecord`. A deletion writes a
:class:`RemoveUserScramCredentialRecord`. Results are per user, as in Kafka: a user whose
alterations are not all valid gets none of them. Pure functions over a
:class:`~rillet.metadata.image.MetadataImage`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rillet import errors
from rillet.controller.results import ControllerResult
from rillet.errors import KafkaError
from rillet.metadata.image import MetadataImage
from rillet.metadata.records import (
    MetadataRecord,
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)
from rillet.security.scram import MAX_ITERATIONS, MIN_ITERATIONS, ScramMechanism, derive_keys

__all__ = ["ScramDeletion", "ScramUpsertion", "alter_user_scram_credentials", "users_named"]


@dataclass(frozen=True)
class ScramDeletion:
    name: str
    mechanism: int


@dataclass(frozen=True)
class ScramUpsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


def users_named(
    deletions: Sequence[ScramDeletion], upsertions: Sequence[ScramUpsertion]
) -> list[str]:
    """The users an AlterUserScramCredentials request names, in the order first named (its
    results' order)."""
    return list(dict.fromkeys([*(d.name for d in deletions), *(u.name for u in upsertions)]))


def alter_user_scram_credentials(
    image: MetadataImage,
    deletions: Sequence[ScramDeletion],
    upsertions: Sequence[ScramUpsertion],
) -> ControllerResult[list[tuple[str, KafkaError | None]]]:
    """One result per user named, in the order first named."""
    users: dict[str, list[ScramDeletion | ScramUpsertion]] = {
        name: [] for name in users_named(deletions, upsertions)
    }
    for deletion in deletions:
        users[deletion.name].append(deletion)
    for upsertion in upsertions:
        users[upsertion.name].append(upsertion)
    records: list[MetadataRecord] = []
    results: list[tuple[str, KafkaError | None]] = []
    for name, changes in users.items():
        try:
            recs = _alter_user(image, name, changes)
        except KafkaError as e:
            results.append((name, e))
            continue
        records.extend(recs)
        results.append((name, None))
    return ControllerResult(records, results)


def _alter_user(
    image: MetadataImage, name: str, changes: Sequence[ScramDeletion | ScramUpsertion]
) -> list[MetadataRecord]:
    if not name:
        raise errors.UnacceptableCredentialError("Username must not be empty")
    mechanisms = [change.mechanism for change in changes]
    for code in set(mechanisms):
        if mechanisms.count(code) > 1:
            raise errors.DuplicateResourceError(
                f"A user credential cannot be altered twice in the same request: {name} "
                f"{_mechanism(name, code).mechanism_name}"
            )
    records: list[MetadataRecord] = []
    for change in changes:
        mechanism = _mechanism(name, change.mechanism)
        if isinstance(change, ScramDeletion):
            if (name, change.mechanism) not in image.scram_credentials:
                raise errors.ResourceNotFoundError(
                    f"Attempt to delete a user credential that does not exist: {name} "
                    f"{mechanism.mechanism_name}"
                )
            records.append(RemoveUserScramCredentialRecord(name, change.mechanism))
            continue
        if not MIN_ITERATIONS <= change.iterations <= MAX_ITERATIONS:
            raise errors.UnacceptableCredentialError(
                f"Iterations {change.iterations} for {mechanism.mechanism_name} must be at "
                f"least {MIN_ITERATIONS} and at most {MAX_ITERATIONS}"
            )
        if not change.salt or not change.salted_password:
            raise errors.UnacceptableCredentialError(
                f"Credential for {name} {mechanism.mechanism_name} has an empty salt or "
                "salted password"
            )
        stored_key, server_key = derive_keys(mechanism, change.salted_password)
        records.append(
            UserScramCredentialRecord(
                name, change.mechanism, change.salt, stored_key, server_key, change.iterations
            )
        )
    return records


def _mechanism(user: str, code: int) -> ScramMechanism:
    try:
        mechanism = ScramMechanism(code)
    except ValueError:
        mechanism = ScramMechanism.UNKNOWN
    if mechanism == ScramMechanism.UNKNOWN:
        raise errors.UnsupportedSaslMechanismError(
            f"Unknown SCRAM mechanism {code} for user {user}"
        )
    return mechanism
