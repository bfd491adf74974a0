"""Kafka's errors, by name and code.

Every error that crosses the wire carries one of Kafka's error names (``OFFSET_OUT_OF_RANGE``,
``CORRUPT_MESSAGE``, ...) and code; in Python each is a subclass of :class:`KafkaError` with
the ``code``, ``name`` and ``retriable`` of Kafka's table (the protocol guide's "Error Codes",
``org.apache.kafka.common.protocol.Errors``), one class per code from -1 to 133. ``NONE`` (0)
is the absence of an error and has no class. The same names and numbers make up the
``rillet.v1.ErrorCode`` enum in ``proto/rillet/v1/common.proto``; ``rillet.protocol.errors``
converts between the two. The native core raises these classes directly
(``rust/py/src/errors.rs`` maps its one error enum onto them).

Class names follow the Java client's exception where Rillet already used it
(``CorruptRecordError`` for ``CORRUPT_MESSAGE``, ``RecordTooLargeError`` for
``MESSAGE_TOO_LARGE``), otherwise Kafka's error name in CamelCase with ``Error``; kafka-python's
names are kept as aliases where they differ.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "CLIENT_SIDE_ERRORS",
    "LOCAL_ERRORS",
    "SERVER_SIDE_ERRORS",
    "BrokerIdNotRegisteredError",
    "BrokerNotAvailableError",
    "ClusterAuthorizationFailedError",
    "ConcurrentTransactionsError",
    "CoordinatorLoadInProgressError",
    "CoordinatorNotAvailableError",
    "CorruptRecordError",
    "DelegationTokenAuthDisabledError",
    "DelegationTokenAuthorizationFailedError",
    "DelegationTokenExpiredError",
    "DelegationTokenNotFoundError",
    "DelegationTokenOwnerMismatchError",
    "DelegationTokenRequestNotAllowedError",
    "DuplicateBrokerRegistrationError",
    "DuplicateResourceError",
    "DuplicateSequenceNumberError",
    "DuplicateVoterError",
    "ElectionNotNeededError",
    "EligibleLeadersNotAvailableError",
    "FeatureUpdateFailedError",
    "FencedInstanceIdError",
    "FencedLeaderEpochError",
    "FencedMemberEpochError",
    "FencedStateEpochError",
    "FetchSessionIdNotFoundError",
    "FetchSessionTopicIdError",
    "GroupAuthorizationFailedError",
    "GroupIdNotFoundError",
    "GroupMaxSizeReachedError",
    "GroupSubscribedToTopicError",
    "IllegalGenerationError",
    "IllegalSaslStateError",
    "IllegalStateError",
    "InconsistentClusterIdError",
    "InconsistentGroupProtocolError",
    "InconsistentTopicIdError",
    "InconsistentVoterSetError",
    "IneligibleReplicaError",
    "InvalidCommitOffsetSizeError",
    "InvalidConfigurationError",
    "InvalidFetchRequestError",
    "InvalidFetchSessionEpochError",
    "InvalidFetchSizeError",
    "InvalidGroupIdError",
    "InvalidPartitionsError",
    "InvalidPrincipalTypeError",
    "InvalidProducerEpochError",
    "InvalidProducerIdMappingError",
    "InvalidRecordError",
    "InvalidRecordStateError",
    "InvalidRegistrationError",
    "InvalidRegularExpressionError",
    "InvalidReplicaAssignmentError",
    "InvalidReplicationAssignmentError",
    "InvalidReplicationFactorError",
    "InvalidRequestError",
    "InvalidRequiredAcksError",
    "InvalidSessionTimeoutError",
    "InvalidShareSessionEpochError",
    "InvalidTimestampError",
    "InvalidTopicError",
    "InvalidTransactionTimeoutError",
    "InvalidTxnStateError",
    "InvalidUpdateVersionError",
    "InvalidVoterKeyError",
    "KafkaError",
    "KafkaStorageError",
    "KafkaTimeoutError",
    "LeaderNotAvailableError",
    "ListenerNotFoundError",
    "LogDirNotFoundError",
    "MemberIdRequiredError",
    "MessageSizeTooLargeError",
    "MismatchedEndpointTypeError",
    "NetworkError",
    "NetworkExceptionError",
    "NewLeaderElectedError",
    "NoOffsetForPartitionError",
    "NoReassignmentInProgressError",
    "NonEmptyGroupError",
    "NotControllerError",
    "NotCoordinatorError",
    "NotEnoughReplicasAfterAppendError",
    "NotEnoughReplicasError",
    "NotLeaderError",
    "NotLeaderForPartitionError",
    "NotLeaderOrFollowerError",
    "OffsetMetadataTooLargeError",
    "OffsetMovedToTieredStorageError",
    "OffsetNotAvailableError",
    "OffsetOutOfRangeError",
    "OperationNotAttemptedError",
    "OutOfOrderSequenceNumberError",
    "PolicyViolationError",
    "PositionOutOfRangeError",
    "PreferredLeaderNotAvailableError",
    "PrincipalDeserializationFailureError",
    "ProducerFencedError",
    "ReassignmentInProgressError",
    "RebalanceInProgressError",
    "RebootstrapRequiredError",
    "RecordBatchTooLargeError",
    "RecordListTooLargeError",
    "RecordTooLargeError",
    "ReplicaNotAvailableError",
    "RequestTimedOutError",
    "ResourceNotFoundError",
    "SaslAuthenticationFailedError",
    "SecurityDisabledError",
    "ShareSessionLimitReachedError",
    "ShareSessionNotFoundError",
    "SnapshotNotFoundError",
    "SslAuthenticationError",
    "StaleBrokerEpochError",
    "StaleControllerEpochError",
    "StaleMemberEpochError",
    "StreamsInvalidTopologyEpochError",
    "StreamsInvalidTopologyError",
    "StreamsTopologyFencedError",
    "TelemetryTooLargeError",
    "ThrottlingQuotaExceededError",
    "TopicAlreadyExistsError",
    "TopicAuthorizationFailedError",
    "TopicDeletionDisabledError",
    "TransactionAbortableError",
    "TransactionCoordinatorFencedError",
    "TransactionalIdAuthorizationFailedError",
    "TransactionalIdNotFoundError",
    "UnacceptableCredentialError",
    "UnknownControllerIdError",
    "UnknownLeaderEpochError",
    "UnknownMemberIdError",
    "UnknownProducerIdError",
    "UnknownServerError",
    "UnknownSubscriptionIdError",
    "UnknownTopicIdError",
    "UnknownTopicOrPartitionError",
    "UnreleasedInstanceIdError",
    "UnstableOffsetCommitError",
    "UnsupportedAssignorError",
    "UnsupportedCompressionTypeError",
    "UnsupportedEndpointTypeError",
    "UnsupportedForMessageFormatError",
    "UnsupportedSaslMechanismError",
    "UnsupportedVersionError",
    "VoterNotFoundError",
    "error_for_code",
    "error_for_name",
]


class KafkaError(Exception):
    """Base of every Rillet error that has a Kafka error name."""

    code: ClassVar[int] = -1
    name: ClassVar[str] = "UNKNOWN_SERVER_ERROR"
    retriable: ClassVar[bool] = False

    def __init__(self, message: str = "") -> None:
        super().__init__(message or self.name)
        self.message = message

    def __str__(self) -> str:
        return f"[{self.name}] {self.message}" if self.message else self.name


class UnknownServerError(KafkaError):
    """The server experienced an unexpected error when processing the request."""

    code = -1
    name = "UNKNOWN_SERVER_ERROR"
    retriable = False


class OffsetOutOfRangeError(KafkaError):
    """The requested offset is not within the range of offsets maintained by the server."""

    code = 1
    name = "OFFSET_OUT_OF_RANGE"
    retriable = False


class CorruptRecordError(KafkaError):
    """The record failed its CRC check, exceeds the valid size, has a null key for a
    compacted topic, or is otherwise corrupt."""

    code = 2
    name = "CORRUPT_MESSAGE"
    retriable = True


class UnknownTopicOrPartitionError(KafkaError):
    """This server does not host this topic-partition."""

    code = 3
    name = "UNKNOWN_TOPIC_OR_PARTITION"
    retriable = True


class InvalidFetchSizeError(KafkaError):
    """The requested fetch size is invalid."""

    code = 4
    name = "INVALID_FETCH_SIZE"
    retriable = False


class LeaderNotAvailableError(KafkaError):
    """There is no leader for this topic-partition as we are in the middle of a leadership
    election."""

    code = 5
    name = "LEADER_NOT_AVAILABLE"
    retriable = True


class NotLeaderOrFollowerError(KafkaError):
    """For requests intended only for the leader, this broker is not the current leader; for
    requests intended for any replica, this broker is not a replica of the partition."""

    code = 6
    name = "NOT_LEADER_OR_FOLLOWER"
    retriable = True


class NotLeaderError(NotLeaderOrFollowerError):
    """A proposal reached a metadata quorum replica that is not the leader (the Raft core
    raises it); ``leader_id`` is the leader it knows of (None if none) in ``leader_epoch``.
    On the wire it is NOT_LEADER_OR_FOLLOWER."""

    def __init__(self, message: str, *, leader_id: int | None, leader_epoch: int) -> None:
        super().__init__(message)
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch


class RequestTimedOutError(KafkaError):
    """The request timed out."""

    code = 7
    name = "REQUEST_TIMED_OUT"
    retriable = True


class KafkaTimeoutError(RequestTimedOutError):
    """A client-side wait ran out (kafka-python's ``KafkaTimeoutError``): metadata that never
    came, buffer memory that was not freed in ``max_block_ms``, a ``get()`` that timed out, a
    batch not delivered within ``delivery_timeout_ms``. On the wire it is REQUEST_TIMED_OUT."""


class NoOffsetForPartitionError(OffsetOutOfRangeError):
    """The consumer has no position for a partition and ``auto_offset_reset`` is ``none``
    (kafka-python's ``NoOffsetForPartitionError``). Raised by the client only."""


class IllegalStateError(KafkaError):
    """The client was used in a way its state does not allow, e.g. ``position()`` of a
    partition that is not assigned (kafka-python's ``IllegalStateError``). Raised by the
    client only; on the wire it would be UNKNOWN_SERVER_ERROR."""


class SslAuthenticationError(KafkaError):
    """A TLS handshake failed, or its certificate names no principal (Kafka's
    SslAuthenticationException): a certificate the peer does not trust, an expired one, a
    missing client certificate, plaintext to a TLS port. It has no error code: the connection
    is closed, and each side reports it locally."""

    name = "SslAuthenticationException"


class BrokerNotAvailableError(KafkaError):
    """The broker is not available."""

    code = 8
    name = "BROKER_NOT_AVAILABLE"
    retriable = False


class ReplicaNotAvailableError(KafkaError):
    """The replica is not available for the requested topic-partition. Requests intended only for
    the leader or a follower get NOT_LEADER_OR_FOLLOWER instead when the broker is not a
    replica."""

    code = 9
    name = "REPLICA_NOT_AVAILABLE"
    retriable = True


class RecordTooLargeError(KafkaError):
    """The request included a message larger than the max message size the server will
    accept."""

    code = 10
    name = "MESSAGE_TOO_LARGE"
    retriable = False


class StaleControllerEpochError(KafkaError):
    """The controller moved to another broker."""

    code = 11
    name = "STALE_CONTROLLER_EPOCH"
    retriable = False


class OffsetMetadataTooLargeError(KafkaError):
    """The metadata field of the offset request was too large."""

    code = 12
    name = "OFFSET_METADATA_TOO_LARGE"
    retriable = False


class NetworkError(KafkaError):
    """The server disconnected before a response was received."""

    code = 13
    name = "NETWORK_EXCEPTION"
    retriable = True


class CoordinatorLoadInProgressError(KafkaError):
    """The coordinator is loading and hence can't process requests."""

    code = 14
    name = "COORDINATOR_LOAD_IN_PROGRESS"
    retriable = True


class CoordinatorNotAvailableError(KafkaError):
    """The coordinator is not available."""

    code = 15
    name = "COORDINATOR_NOT_AVAILABLE"
    retriable = True


class NotCoordinatorError(KafkaError):
    """This is not the correct coordinator."""

    code = 16
    name = "NOT_COORDINATOR"
    retriable = True


class InvalidTopicError(KafkaError):
    """The request attempted to perform an operation on an invalid topic."""

    code = 17
    name = "INVALID_TOPIC_EXCEPTION"
    retriable = False


class RecordBatchTooLargeError(KafkaError):
    """The request included message batch larger than the configured segment size on the
    server."""

    code = 18
    name = "RECORD_LIST_TOO_LARGE"
    retriable = False


class NotEnoughReplicasError(KafkaError):
    """Messages are rejected since there are fewer in-sync replicas than required."""

    code = 19
    name = "NOT_ENOUGH_REPLICAS"
    retriable = True


class NotEnoughReplicasAfterAppendError(KafkaError):
    """Messages are written to the log, but to fewer in-sync replicas than required."""

    code = 20
    name = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
    retriable = True


class InvalidRequiredAcksError(KafkaError):
    """Produce request specified an invalid value for required acks."""

    code = 21
    name = "INVALID_REQUIRED_ACKS"
    retriable = False


class IllegalGenerationError(KafkaError):
    """Specified group generation id is not valid."""

    code = 22
    name = "ILLEGAL_GENERATION"
    retriable = False


class InconsistentGroupProtocolError(KafkaError):
    """The group member's supported protocols are incompatible with those of existing members, or
    the first member joined with an empty protocol type or protocol list."""

    code = 23
    name = "INCONSISTENT_GROUP_PROTOCOL"
    retriable = False


class InvalidGroupIdError(KafkaError):
    """The group id is invalid."""

    code = 24
    name = "INVALID_GROUP_ID"
    retriable = False


class UnknownMemberIdError(KafkaError):
    """The coordinator is not aware of this member."""

    code = 25
    name = "UNKNOWN_MEMBER_ID"
    retriable = False


class InvalidSessionTimeoutError(KafkaError):
    """The session timeout is not within the range allowed by the broker
    (group.min.session.timeout.ms and group.max.session.timeout.ms)."""

    code = 26
    name = "INVALID_SESSION_TIMEOUT"
    retriable = False


class RebalanceInProgressError(KafkaError):
    """The group is rebalancing, so a rejoin is needed."""

    code = 27
    name = "REBALANCE_IN_PROGRESS"
    retriable = False


class InvalidCommitOffsetSizeError(KafkaError):
    """The committing offset data size is not valid."""

    code = 28
    name = "INVALID_COMMIT_OFFSET_SIZE"
    retriable = False


class TopicAuthorizationFailedError(KafkaError):
    """Topic authorization failed."""

    code = 29
    name = "TOPIC_AUTHORIZATION_FAILED"
    retriable = False


class GroupAuthorizationFailedError(KafkaError):
    """Group authorization failed."""

    code = 30
    name = "GROUP_AUTHORIZATION_FAILED"
    retriable = False


class ClusterAuthorizationFailedError(KafkaError):
    """Cluster authorization failed."""

    code = 31
    name = "CLUSTER_AUTHORIZATION_FAILED"
    retriable = False


class InvalidTimestampError(KafkaError):
    """The timestamp of the message is out of acceptable range."""

    code = 32
    name = "INVALID_TIMESTAMP"
    retriable = False


class UnsupportedSaslMechanismError(KafkaError):
    """The broker does not support the requested SASL mechanism."""

    code = 33
    name = "UNSUPPORTED_SASL_MECHANISM"
    retriable = False


class IllegalSaslStateError(KafkaError):
    """Request is not valid given the current SASL state."""

    code = 34
    name = "ILLEGAL_SASL_STATE"
    retriable = False


class UnsupportedVersionError(KafkaError):
    """The version of API is not supported."""

    code = 35
    name = "UNSUPPORTED_VERSION"
    retriable = False


class TopicAlreadyExistsError(KafkaError):
    """Topic with this name already exists."""

    code = 36
    name = "TOPIC_ALREADY_EXISTS"
    retriable = False


class InvalidPartitionsError(KafkaError):
    """Number of partitions is below 1."""

    code = 37
    name = "INVALID_PARTITIONS"
    retriable = False


class InvalidReplicationFactorError(KafkaError):
    """Replication factor is below 1 or larger than the number of available brokers."""

    code = 38
    name = "INVALID_REPLICATION_FACTOR"
    retriable = False


class InvalidReplicaAssignmentError(KafkaError):
    """Replica assignment is invalid."""

    code = 39
    name = "INVALID_REPLICA_ASSIGNMENT"
    retriable = False


class InvalidConfigurationError(KafkaError):
    """Configuration is invalid."""

    code = 40
    name = "INVALID_CONFIG"
    retriable = False


class NotControllerError(KafkaError):
    """This is not the correct controller for this cluster."""

    code = 41
    name = "NOT_CONTROLLER"
    retriable = True


class InvalidRequestError(KafkaError):
    """This most likely occurs because of a request being malformed by the client library or
    the message was sent to an incompatible broker."""

    code = 42
    name = "INVALID_REQUEST"
    retriable = False


class UnsupportedForMessageFormatError(KafkaError):
    """The message format version on the broker does not support the request."""

    code = 43
    name = "UNSUPPORTED_FOR_MESSAGE_FORMAT"
    retriable = False


class PolicyViolationError(KafkaError):
    """Request parameters do not satisfy the configured policy."""

    code = 44
    name = "POLICY_VIOLATION"
    retriable = False


class OutOfOrderSequenceNumberError(KafkaError):
    """The broker received an out of order sequence number."""

    code = 45
    name = "OUT_OF_ORDER_SEQUENCE_NUMBER"
    retriable = False


class DuplicateSequenceNumberError(KafkaError):
    """The broker received a duplicate sequence number."""

    code = 46
    name = "DUPLICATE_SEQUENCE_NUMBER"
    retriable = False


class InvalidProducerEpochError(KafkaError):
    """Producer attempted to produce with an old epoch."""

    code = 47
    name = "INVALID_PRODUCER_EPOCH"
    retriable = False


class InvalidTxnStateError(KafkaError):
    """The producer attempted a transactional operation in an invalid state."""

    code = 48
    name = "INVALID_TXN_STATE"
    retriable = False


class InvalidProducerIdMappingError(KafkaError):
    """The producer attempted to use a producer id which is not currently assigned to its
    transactional id."""

    code = 49
    name = "INVALID_PRODUCER_ID_MAPPING"
    retriable = False


class InvalidTransactionTimeoutError(KafkaError):
    """The transaction timeout is larger than the maximum value allowed by the broker
    (transaction.max.timeout.ms)."""

    code = 50
    name = "INVALID_TRANSACTION_TIMEOUT"
    retriable = False


class ConcurrentTransactionsError(KafkaError):
    """The producer attempted to update a transaction while another concurrent operation on the
    same transaction was ongoing."""

    code = 51
    name = "CONCURRENT_TRANSACTIONS"
    retriable = True


class TransactionCoordinatorFencedError(KafkaError):
    """The transaction coordinator sending a WriteTxnMarker is no longer the current coordinator
    for the producer."""

    code = 52
    name = "TRANSACTION_COORDINATOR_FENCED"
    retriable = False


class TransactionalIdAuthorizationFailedError(KafkaError):
    """Transactional Id authorization failed."""

    code = 53
    name = "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    retriable = False


class SecurityDisabledError(KafkaError):
    """Security features are disabled."""

    code = 54
    name = "SECURITY_DISABLED"
    retriable = False


class OperationNotAttemptedError(KafkaError):
    """The broker did not attempt to execute this operation, because other operations in the same
    batched request failed."""

    code = 55
    name = "OPERATION_NOT_ATTEMPTED"
    retriable = False


class KafkaStorageError(KafkaError):
    """Disk error when trying to access log file on the disk."""

    code = 56
    name = "KAFKA_STORAGE_ERROR"
    retriable = True


class LogDirNotFoundError(KafkaError):
    """The user-specified log directory is not found in the broker config."""

    code = 57
    name = "LOG_DIR_NOT_FOUND"
    retriable = False


class SaslAuthenticationFailedError(KafkaError):
    """SASL Authentication failed."""

    code = 58
    name = "SASL_AUTHENTICATION_FAILED"
    retriable = False


class UnknownProducerIdError(KafkaError):
    """The broker could not locate the producer metadata for the producer id in question, for
    instance because its records were deleted when their retention time elapsed."""

    code = 59
    name = "UNKNOWN_PRODUCER_ID"
    retriable = False


class ReassignmentInProgressError(KafkaError):
    """A partition reassignment is in progress."""

    code = 60
    name = "REASSIGNMENT_IN_PROGRESS"
    retriable = False


class DelegationTokenAuthDisabledError(KafkaError):
    """Delegation Token feature is not enabled."""

    code = 61
    name = "DELEGATION_TOKEN_AUTH_DISABLED"
    retriable = False


class DelegationTokenNotFoundError(KafkaError):
    """Delegation Token is not found on server."""

    code = 62
    name = "DELEGATION_TOKEN_NOT_FOUND"
    retriable = False


class DelegationTokenOwnerMismatchError(KafkaError):
    """Specified Principal is not valid Owner/Renewer."""

    code = 63
    name = "DELEGATION_TOKEN_OWNER_MISMATCH"
    retriable = False


class DelegationTokenRequestNotAllowedError(KafkaError):
    """Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on delegation
    token authenticated channels."""

    code = 64
    name = "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED"
    retriable = False


class DelegationTokenAuthorizationFailedError(KafkaError):
    """Delegation Token authorization failed."""

    code = 65
    name = "DELEGATION_TOKEN_AUTHORIZATION_FAILED"
    retriable = False


class DelegationTokenExpiredError(KafkaError):
    """Delegation Token is expired."""

    code = 66
    name = "DELEGATION_TOKEN_EXPIRED"
    retriable = False


class InvalidPrincipalTypeError(KafkaError):
    """Supplied principalType is not supported."""

    code = 67
    name = "INVALID_PRINCIPAL_TYPE"
    retriable = False


class NonEmptyGroupError(KafkaError):
    """The group is not empty."""

    code = 68
    name = "NON_EMPTY_GROUP"
    retriable = False


class GroupIdNotFoundError(KafkaError):
    """The group id does not exist."""

    code = 69
    name = "GROUP_ID_NOT_FOUND"
    retriable = False


class FetchSessionIdNotFoundError(KafkaError):
    """The fetch session ID was not found."""

    code = 70
    name = "FETCH_SESSION_ID_NOT_FOUND"
    retriable = True


class InvalidFetchSessionEpochError(KafkaError):
    """The fetch session epoch is invalid."""

    code = 71
    name = "INVALID_FETCH_SESSION_EPOCH"
    retriable = True


class ListenerNotFoundError(KafkaError):
    """There is no listener on the leader broker that matches the listener on which the metadata
    request was processed."""

    code = 72
    name = "LISTENER_NOT_FOUND"
    retriable = True


class TopicDeletionDisabledError(KafkaError):
    """Topic deletion is disabled."""

    code = 73
    name = "TOPIC_DELETION_DISABLED"
    retriable = False


class FencedLeaderEpochError(KafkaError):
    """The leader epoch in the request is older than the epoch on the broker."""

    code = 74
    name = "FENCED_LEADER_EPOCH"
    retriable = True


class UnknownLeaderEpochError(KafkaError):
    """The leader epoch in the request is newer than the epoch on the broker."""

    code = 75
    name = "UNKNOWN_LEADER_EPOCH"
    retriable = True


class UnsupportedCompressionTypeError(KafkaError):
    """The requesting client does not support the compression type of given partition."""

    code = 76
    name = "UNSUPPORTED_COMPRESSION_TYPE"
    retriable = False


class StaleBrokerEpochError(KafkaError):
    """Broker epoch has changed."""

    code = 77
    name = "STALE_BROKER_EPOCH"
    retriable = False


class OffsetNotAvailableError(KafkaError):
    """The leader high watermark has not caught up from a recent leader election so the offsets
    cannot be guaranteed to be monotonically increasing."""

    code = 78
    name = "OFFSET_NOT_AVAILABLE"
    retriable = True


class MemberIdRequiredError(KafkaError):
    """The group member needs to have a valid member id before actually entering a consumer
    group."""

    code = 79
    name = "MEMBER_ID_REQUIRED"
    retriable = False


class PreferredLeaderNotAvailableError(KafkaError):
    """The preferred leader was not available."""

    code = 80
    name = "PREFERRED_LEADER_NOT_AVAILABLE"
    retriable = True


class GroupMaxSizeReachedError(KafkaError):
    """The group has reached its maximum size."""

    code = 81
    name = "GROUP_MAX_SIZE_REACHED"
    retriable = False


class FencedInstanceIdError(KafkaError):
    """The broker rejected this static consumer since another consumer with the same
    group.instance.id has registered with a different member.id."""

    code = 82
    name = "FENCED_INSTANCE_ID"
    retriable = False


class EligibleLeadersNotAvailableError(KafkaError):
    """Eligible topic partition leaders are not available."""

    code = 83
    name = "ELIGIBLE_LEADERS_NOT_AVAILABLE"
    retriable = True


class ElectionNotNeededError(KafkaError):
    """Leader election not needed for topic partition."""

    code = 84
    name = "ELECTION_NOT_NEEDED"
    retriable = True


class NoReassignmentInProgressError(KafkaError):
    """No partition reassignment is in progress."""

    code = 85
    name = "NO_REASSIGNMENT_IN_PROGRESS"
    retriable = False


class GroupSubscribedToTopicError(KafkaError):
    """Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to
    it."""

    code = 86
    name = "GROUP_SUBSCRIBED_TO_TOPIC"
    retriable = False


class InvalidRecordError(KafkaError):
    """This record has failed the validation on broker and hence will be rejected."""

    code = 87
    name = "INVALID_RECORD"
    retriable = False


class UnstableOffsetCommitError(KafkaError):
    """There are unstable offsets that need to be cleared."""

    code = 88
    name = "UNSTABLE_OFFSET_COMMIT"
    retriable = True


class ThrottlingQuotaExceededError(KafkaError):
    """The throttling quota has been exceeded."""

    code = 89
    name = "THROTTLING_QUOTA_EXCEEDED"
    retriable = True


class ProducerFencedError(KafkaError):
    """There is a newer producer with the same transactionalId which fences the current one."""

    code = 90
    name = "PRODUCER_FENCED"
    retriable = False


class ResourceNotFoundError(KafkaError):
    """A request illegally referred to a resource that does not exist."""

    code = 91
    name = "RESOURCE_NOT_FOUND"
    retriable = False


class DuplicateResourceError(KafkaError):
    """A request illegally referred to the same resource twice."""

    code = 92
    name = "DUPLICATE_RESOURCE"
    retriable = False


class UnacceptableCredentialError(KafkaError):
    """Requested credential would not meet criteria for acceptability."""

    code = 93
    name = "UNACCEPTABLE_CREDENTIAL"
    retriable = False


class InconsistentVoterSetError(KafkaError):
    """Either the sender or the recipient of a voter-only request is not one of the expected
    voters."""

    code = 94
    name = "INCONSISTENT_VOTER_SET"
    retriable = False


class InvalidUpdateVersionError(KafkaError):
    """The given update version was invalid."""

    code = 95
    name = "INVALID_UPDATE_VERSION"
    retriable = False


class FeatureUpdateFailedError(KafkaError):
    """Unable to update finalized features due to an unexpected server error."""

    code = 96
    name = "FEATURE_UPDATE_FAILED"
    retriable = False


class PrincipalDeserializationFailureError(KafkaError):
    """Request principal deserialization failed during forwarding: an internal error in the
    cluster's security setup."""

    code = 97
    name = "PRINCIPAL_DESERIALIZATION_FAILURE"
    retriable = False


class SnapshotNotFoundError(KafkaError):
    """Requested snapshot was not found."""

    code = 98
    name = "SNAPSHOT_NOT_FOUND"
    retriable = False


class PositionOutOfRangeError(KafkaError):
    """Requested position is not greater than or equal to zero, and less than the size of the
    snapshot."""

    code = 99
    name = "POSITION_OUT_OF_RANGE"
    retriable = False


class UnknownTopicIdError(KafkaError):
    """This server does not host this topic ID."""

    code = 100
    name = "UNKNOWN_TOPIC_ID"
    retriable = True


class DuplicateBrokerRegistrationError(KafkaError):
    """This broker ID is already in use."""

    code = 101
    name = "DUPLICATE_BROKER_REGISTRATION"
    retriable = False


class BrokerIdNotRegisteredError(KafkaError):
    """The given broker ID was not registered."""

    code = 102
    name = "BROKER_ID_NOT_REGISTERED"
    retriable = False


class InconsistentTopicIdError(KafkaError):
    """The log's topic ID did not match the topic ID in the request."""

    code = 103
    name = "INCONSISTENT_TOPIC_ID"
    retriable = True


class InconsistentClusterIdError(KafkaError):
    """The clusterId in the request does not match that found on the server."""

    code = 104
    name = "INCONSISTENT_CLUSTER_ID"
    retriable = False


class TransactionalIdNotFoundError(KafkaError):
    """The transactionalId could not be found."""

    code = 105
    name = "TRANSACTIONAL_ID_NOT_FOUND"
    retriable = False


class FetchSessionTopicIdError(KafkaError):
    """The fetch session encountered inconsistent topic ID usage."""

    code = 106
    name = "FETCH_SESSION_TOPIC_ID_ERROR"
    retriable = True


class IneligibleReplicaError(KafkaError):
    """The new ISR contains at least one ineligible replica."""

    code = 107
    name = "INELIGIBLE_REPLICA"
    retriable = False


class NewLeaderElectedError(KafkaError):
    """The AlterPartition request successfully updated the partition state but the leader has
    changed."""

    code = 108
    name = "NEW_LEADER_ELECTED"
    retriable = False


class OffsetMovedToTieredStorageError(KafkaError):
    """The requested offset is moved to tiered storage."""

    code = 109
    name = "OFFSET_MOVED_TO_TIERED_STORAGE"
    retriable = False


class FencedMemberEpochError(KafkaError):
    """The member epoch is fenced by the group coordinator. The member must abandon all its
    partitions and rejoin."""

    code = 110
    name = "FENCED_MEMBER_EPOCH"
    retriable = False


class UnreleasedInstanceIdError(KafkaError):
    """The instance ID is still used by another member in the consumer group. That member must
    leave first."""

    code = 111
    name = "UNRELEASED_INSTANCE_ID"
    retriable = False


class UnsupportedAssignorError(KafkaError):
    """The assignor or its version range is not supported by the consumer group."""

    code = 112
    name = "UNSUPPORTED_ASSIGNOR"
    retriable = False


class StaleMemberEpochError(KafkaError):
    """The member epoch is stale. The member must retry after receiving its updated member epoch
    via the ConsumerGroupHeartbeat API."""

    code = 113
    name = "STALE_MEMBER_EPOCH"
    retriable = False


class MismatchedEndpointTypeError(KafkaError):
    """The request was sent to an endpoint of the wrong type."""

    code = 114
    name = "MISMATCHED_ENDPOINT_TYPE"
    retriable = False


class UnsupportedEndpointTypeError(KafkaError):
    """This endpoint type is not supported yet."""

    code = 115
    name = "UNSUPPORTED_ENDPOINT_TYPE"
    retriable = False


class UnknownControllerIdError(KafkaError):
    """This controller ID is not known."""

    code = 116
    name = "UNKNOWN_CONTROLLER_ID"
    retriable = False


class UnknownSubscriptionIdError(KafkaError):
    """Client sent a push telemetry request with an invalid or outdated subscription ID."""

    code = 117
    name = "UNKNOWN_SUBSCRIPTION_ID"
    retriable = False


class TelemetryTooLargeError(KafkaError):
    """Client sent a push telemetry request larger than the maximum size the broker will accept."""

    code = 118
    name = "TELEMETRY_TOO_LARGE"
    retriable = False


class InvalidRegistrationError(KafkaError):
    """The controller has considered the broker registration to be invalid."""

    code = 119
    name = "INVALID_REGISTRATION"
    retriable = False


class TransactionAbortableError(KafkaError):
    """The server encountered an error with the transaction. The client can abort the transaction
    to continue using this transactional ID."""

    code = 120
    name = "TRANSACTION_ABORTABLE"
    retriable = False


class InvalidRecordStateError(KafkaError):
    """The record state is invalid. The acknowledgement of delivery could not be completed."""

    code = 121
    name = "INVALID_RECORD_STATE"
    retriable = False


class ShareSessionNotFoundError(KafkaError):
    """The share session was not found."""

    code = 122
    name = "SHARE_SESSION_NOT_FOUND"
    retriable = True


class InvalidShareSessionEpochError(KafkaError):
    """The share session epoch is invalid."""

    code = 123
    name = "INVALID_SHARE_SESSION_EPOCH"
    retriable = True


class FencedStateEpochError(KafkaError):
    """The share coordinator rejected the request because the share-group state epoch did not
    match."""

    code = 124
    name = "FENCED_STATE_EPOCH"
    retriable = False


class InvalidVoterKeyError(KafkaError):
    """The voter key doesn't match the receiving replica's key."""

    code = 125
    name = "INVALID_VOTER_KEY"
    retriable = False


class DuplicateVoterError(KafkaError):
    """The voter is already part of the set of voters."""

    code = 126
    name = "DUPLICATE_VOTER"
    retriable = False


class VoterNotFoundError(KafkaError):
    """The voter is not part of the set of voters."""

    code = 127
    name = "VOTER_NOT_FOUND"
    retriable = False


class InvalidRegularExpressionError(KafkaError):
    """The regular expression is not valid."""

    code = 128
    name = "INVALID_REGULAR_EXPRESSION"
    retriable = False


class RebootstrapRequiredError(KafkaError):
    """Client metadata is stale. The client should rebootstrap to obtain new metadata."""

    code = 129
    name = "REBOOTSTRAP_REQUIRED"
    retriable = False


class StreamsInvalidTopologyError(KafkaError):
    """The supplied topology is invalid."""

    code = 130
    name = "STREAMS_INVALID_TOPOLOGY"
    retriable = False


class StreamsInvalidTopologyEpochError(KafkaError):
    """The supplied topology epoch is invalid."""

    code = 131
    name = "STREAMS_INVALID_TOPOLOGY_EPOCH"
    retriable = False


class StreamsTopologyFencedError(KafkaError):
    """The supplied topology epoch is outdated."""

    code = 132
    name = "STREAMS_TOPOLOGY_FENCED"
    retriable = False


class ShareSessionLimitReachedError(KafkaError):
    """The limit of share sessions has been reached."""

    code = 133
    name = "SHARE_SESSION_LIMIT_REACHED"
    retriable = True


# Aliases under kafka-python's names, so code ports by renaming imports.
MessageSizeTooLargeError = RecordTooLargeError
RecordListTooLargeError = RecordBatchTooLargeError
NotLeaderForPartitionError = NotLeaderOrFollowerError
InvalidFetchRequestError = InvalidFetchSizeError
NetworkExceptionError = NetworkError
InvalidReplicationAssignmentError = InvalidReplicaAssignmentError

_ALL_ERRORS: tuple[type[KafkaError], ...] = (
    UnknownServerError,
    OffsetOutOfRangeError,
    CorruptRecordError,
    UnknownTopicOrPartitionError,
    InvalidFetchSizeError,
    LeaderNotAvailableError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
    BrokerNotAvailableError,
    ReplicaNotAvailableError,
    RecordTooLargeError,
    StaleControllerEpochError,
    OffsetMetadataTooLargeError,
    NetworkError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    NotCoordinatorError,
    InvalidTopicError,
    RecordBatchTooLargeError,
    NotEnoughReplicasError,
    NotEnoughReplicasAfterAppendError,
    InvalidRequiredAcksError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidGroupIdError,
    UnknownMemberIdError,
    InvalidSessionTimeoutError,
    RebalanceInProgressError,
    InvalidCommitOffsetSizeError,
    TopicAuthorizationFailedError,
    GroupAuthorizationFailedError,
    ClusterAuthorizationFailedError,
    InvalidTimestampError,
    UnsupportedSaslMechanismError,
    IllegalSaslStateError,
    UnsupportedVersionError,
    TopicAlreadyExistsError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidReplicaAssignmentError,
    InvalidConfigurationError,
    NotControllerError,
    InvalidRequestError,
    UnsupportedForMessageFormatError,
    PolicyViolationError,
    OutOfOrderSequenceNumberError,
    DuplicateSequenceNumberError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    InvalidProducerIdMappingError,
    InvalidTransactionTimeoutError,
    ConcurrentTransactionsError,
    TransactionCoordinatorFencedError,
    TransactionalIdAuthorizationFailedError,
    SecurityDisabledError,
    OperationNotAttemptedError,
    KafkaStorageError,
    LogDirNotFoundError,
    SaslAuthenticationFailedError,
    UnknownProducerIdError,
    ReassignmentInProgressError,
    DelegationTokenAuthDisabledError,
    DelegationTokenNotFoundError,
    DelegationTokenOwnerMismatchError,
    DelegationTokenRequestNotAllowedError,
    DelegationTokenAuthorizationFailedError,
    DelegationTokenExpiredError,
    InvalidPrincipalTypeError,
    NonEmptyGroupError,
    GroupIdNotFoundError,
    FetchSessionIdNotFoundError,
    InvalidFetchSessionEpochError,
    ListenerNotFoundError,
    TopicDeletionDisabledError,
    FencedLeaderEpochError,
    UnknownLeaderEpochError,
    UnsupportedCompressionTypeError,
    StaleBrokerEpochError,
    OffsetNotAvailableError,
    MemberIdRequiredError,
    PreferredLeaderNotAvailableError,
    GroupMaxSizeReachedError,
    FencedInstanceIdError,
    EligibleLeadersNotAvailableError,
    ElectionNotNeededError,
    NoReassignmentInProgressError,
    GroupSubscribedToTopicError,
    InvalidRecordError,
    UnstableOffsetCommitError,
    ThrottlingQuotaExceededError,
    ProducerFencedError,
    ResourceNotFoundError,
    DuplicateResourceError,
    UnacceptableCredentialError,
    InconsistentVoterSetError,
    InvalidUpdateVersionError,
    FeatureUpdateFailedError,
    PrincipalDeserializationFailureError,
    SnapshotNotFoundError,
    PositionOutOfRangeError,
    UnknownTopicIdError,
    DuplicateBrokerRegistrationError,
    BrokerIdNotRegisteredError,
    InconsistentTopicIdError,
    InconsistentClusterIdError,
    TransactionalIdNotFoundError,
    FetchSessionTopicIdError,
    IneligibleReplicaError,
    NewLeaderElectedError,
    OffsetMovedToTieredStorageError,
    FencedMemberEpochError,
    UnreleasedInstanceIdError,
    UnsupportedAssignorError,
    StaleMemberEpochError,
    MismatchedEndpointTypeError,
    UnsupportedEndpointTypeError,
    UnknownControllerIdError,
    UnknownSubscriptionIdError,
    TelemetryTooLargeError,
    InvalidRegistrationError,
    TransactionAbortableError,
    InvalidRecordStateError,
    ShareSessionNotFoundError,
    InvalidShareSessionEpochError,
    FencedStateEpochError,
    InvalidVoterKeyError,
    DuplicateVoterError,
    VoterNotFoundError,
    InvalidRegularExpressionError,
    RebootstrapRequiredError,
    StreamsInvalidTopologyError,
    StreamsInvalidTopologyEpochError,
    StreamsTopologyFencedError,
    ShareSessionLimitReachedError,
)
# Raised by the client only; on the wire they travel as their base class's code.
CLIENT_SIDE_ERRORS: tuple[type[KafkaError], ...] = (
    KafkaTimeoutError,
    NoOffsetForPartitionError,
    IllegalStateError,
    SslAuthenticationError,
)
# Raised inside a server only, with more detail than the wire carries; on the wire they
# travel as their base class's code.
SERVER_SIDE_ERRORS: tuple[type[KafkaError], ...] = (NotLeaderError,)
# Every class that is not decoded from the wire: error_for_code never returns one.
LOCAL_ERRORS = CLIENT_SIDE_ERRORS + SERVER_SIDE_ERRORS

_BY_CODE: dict[int, type[KafkaError]] = {cls.code: cls for cls in _ALL_ERRORS}
_BY_NAME: dict[str, type[KafkaError]] = {cls.name: cls for cls in _ALL_ERRORS}


def error_for_code(code: int) -> type[KafkaError]:
    """The error class for a Kafka error code (UnknownServerError if unknown)."""
    return _BY_CODE.get(code, UnknownServerError)


def error_for_name(name: str) -> type[KafkaError]:
    """The error class for a Kafka error name such as ``OFFSET_OUT_OF_RANGE``."""
    return _BY_NAME.get(name, UnknownServerError)
