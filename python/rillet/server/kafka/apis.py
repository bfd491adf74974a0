"""Kafka's API keys over the schema-driven codec: a request frame in, its response frame
out (Kafka's ``KafkaApis``, the transport half: the work is done by the transport-agnostic
:class:`~rillet.broker.apis.BrokerApis`).

Bodies are dicts keyed by the snake_case of the schema's field names
(:func:`rillet._core.kafka_decode_request`). Records and metadata are served here; groups,
transactions and admin requests by the services passed in (each a
:class:`~rillet.server.kafka.request.KafkaService` listing its keys).

Versions are negotiated as in Kafka: ApiVersions lists the keys served (each key's range
within what the schemas know), and answers a version it does not know with
UNSUPPORTED_VERSION in a v0 response (KIP-511). Another key or version not served is
answered UNSUPPORTED_VERSION when its response has a top-level error code; otherwise, as
Kafka's broker does for an api key it does not serve, the connection is closed (and the
reason logged). A frame the codec cannot read is answered the same way with
INVALID_REQUEST.
"""

from __future__ import annotations

import logging
import struct
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rillet import _core
from rillet._core import FileRegion
from rillet.broker.apis import BrokerApis, MetadataResult
from rillet.broker.authorizer import BrokerAuthorizer
from rillet.broker.metrics import BrokerMetrics
from rillet.errors import (
    InvalidRequestError,
    KafkaError,
    TopicAuthorizationFailedError,
    UnknownServerError,
    UnsupportedVersionError,
)
from rillet.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from rillet.security.principal import ANONYMOUS, KafkaPrincipal
from rillet.server.kafka import records
from rillet.server.kafka.fetch_sessions import FetchSessionCache
from rillet.server.kafka.request import Body, KafkaRequest, KafkaService, Served, Throttle

__all__ = [
    "API_VERSIONS",
    "REQUEST_HEADER_MIN_BYTES",
    "KafkaApis",
    "SplicedResponse",
    "peek_header",
]

_log = logging.getLogger(__name__)

PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS = 0, 1, 2, 3, 18
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
_ILLEGAL_SASL_STATE = 34
_FETCH_VERSIONS = (4, 16)

# api key, api version, correlation id: the first bytes of every request header.
_HEADER_START = struct.Struct(">hhi")
REQUEST_HEADER_MIN_BYTES = _HEADER_START.size

_ZERO_UUID = uuid.UUID(int=0)


# Versions Kafka 4.0 made stable that the vendored schemas (trunk after 3.9) still mark
# unstable, so kafka_api_versions() leaves them out; the codec reads them all the same.
# ConsumerGroupHeartbeat v1 (KIP-848's regex subscriptions) is the version librdkafka 2.x
# and Kafka 4's Java client send.
_STABLE_SINCE_KAFKA_4 = {68: 1}


def _schema_versions() -> dict[int, tuple[int, int]]:
    return {
        k: (lo, max(hi, _STABLE_SINCE_KAFKA_4.get(k, hi)))
        for k, lo, hi in _core.kafka_api_versions()
    }


def _throttled(throttle: Throttle | None, ms: int) -> int:
    """``ms`` (a quota's throttle time), after holding the connection back as long."""
    if throttle is not None and ms > 0:
        throttle.hold(ms)
    return ms


def peek_header(frame: bytes) -> tuple[int, int, int]:
    """A request frame's api key, api version and correlation id."""
    api_key, version, correlation_id = _HEADER_START.unpack_from(frame)
    return api_key, version, correlation_id


@dataclass(frozen=True)
class SplicedResponse:
    """A response frame with record sets to send from files: each ``(offset, regions)``
    goes before ``frame[offset]``, in order (the frame's size prefix counts them)."""

    frame: bytes
    splices: list[tuple[int, list[FileRegion]]]


class KafkaApis:
    """See the module doc."""

    def __init__(
        self,
        apis: BrokerApis,
        services: Sequence[KafkaService] = (),
        *,
        fetch_session_cache_slots: int = 1000,  # max.incremental.fetch.session.cache.slots
        authorizer: BrokerAuthorizer | None = None,
        metrics: BrokerMetrics | None = None,
    ) -> None:
        self.apis = apis
        self.authorizer = authorizer
        self.metrics = metrics
        self.fetch_sessions = FetchSessionCache(fetch_session_cache_slots)
        # What the schemas know of every key (the versions an error can be answered at).
        self.schemas = schemas = _schema_versions()
        handlers: dict[int, Served] = {
            PRODUCE: Served(3, 11, self.produce),
            LIST_OFFSETS: Served(1, 7, self.list_offsets),
            METADATA: Served(0, 12, self.metadata),
            API_VERSIONS: Served(0, 4, self.api_versions),
            # Answered here only out of turn (a listener without SASL, or a connection
            # already authenticated): a SASL listener's exchange is the connection's own.
            SASL_HANDSHAKE: Served(0, 1, self._sasl_out_of_turn),
            SASL_AUTHENTICATE: Served(0, 2, self._sasl_out_of_turn),
        }
        for service in services:
            for key, served in service.served().items():
                if key in handlers:
                    raise ValueError(f"api key {key} is served twice")
                handlers[key] = served
        self.handlers: Mapping[int, Served] = handlers
        # Each served key's versions: what its handler reads, within what the schemas know.
        # Fetch is answered by _fetch, whose record sets go out with sendfile.
        versions = {key: (h.min_version, h.max_version) for key, h in handlers.items()}
        versions[FETCH] = _FETCH_VERSIONS
        self.supported: dict[int, tuple[int, int]] = {
            key: (max(lo, schemas[key][0]), min(hi, schemas[key][1]))
            for key, (lo, hi) in versions.items()
        }

    async def handle(
        self,
        frame: bytes,
        listener_name: str,
        peer_host: str = "",
        principal: KafkaPrincipal = ANONYMOUS,
        throttle: Throttle | None = None,
    ) -> bytes | SplicedResponse | None:
        """The response frame to ``frame`` (a request without its size prefix) from
        ``principal``: empty when the request takes no answer, None to close the connection;
        a Fetch answer comes with the record sets to send from the segment files. Each
        request is counted and timed in :attr:`metrics`. A produce or fetch over its
        client's quota is answered with ``throttle_time_ms``, and ``throttle`` (the
        connection's) says until when the connection is not to be read from."""
        if self.metrics is None:
            return await self._handle(frame, listener_name, peer_host, principal, throttle)
        started = time.perf_counter()
        try:
            return await self._handle(frame, listener_name, peer_host, principal, throttle)
        finally:
            elapsed_ms = (time.perf_counter() - started) * 1000
            self.metrics.record_request(_HEADER_START.unpack_from(frame)[0], elapsed_ms)

    async def _handle(
        self,
        frame: bytes,
        listener_name: str,
        peer_host: str,
        principal: KafkaPrincipal,
        throttle: Throttle | None,
    ) -> bytes | SplicedResponse | None:
        api_key, version, correlation_id = _HEADER_START.unpack_from(frame)
        served = self.supported.get(api_key)
        if served is None or not served[0] <= version <= served[1]:
            return self._unsupported(api_key, version, correlation_id)
        try:
            # A produced record set stays where it is in the frame (a memoryview of it).
            _, _, _, client_id, body = _core.kafka_decode_request(frame, records_in_place=True)
        except (InvalidRequestError, UnsupportedVersionError) as e:
            _log.warning("request %d v%d on %s: %s", api_key, version, listener_name, e)
            return self._error_response(api_key, version, correlation_id, e)
        req = KafkaRequest(
            api_key,
            version,
            correlation_id,
            client_id or "",
            body,
            listener_name,
            peer_host,
            principal,
            self.authorizer,
        )
        try:
            if api_key == FETCH:
                return await self._fetch(req, throttle)
            response = await self.handlers[api_key].handler(req)
            quotas = self.apis.quotas
            if api_key == PRODUCE and quotas is not None:
                # As Kafka: the request's size counts, answered or not (acks=0).
                throttled = _throttled(
                    throttle, quotas.record_produce(principal.name, req.client_id, len(frame))
                )
                if response is not None:
                    response["throttle_time_ms"] = throttled
            if response is None:
                return b""  # a request Kafka does not answer (Produce with acks=0)
            return _core.kafka_encode_response(api_key, version, correlation_id, response)
        except Exception as e:  # a bug: answer it as Kafka would, and keep serving
            _log.exception("request %d v%d on %s failed", api_key, version, listener_name)
            return self._error_response(
                api_key, version, correlation_id, UnknownServerError(f"{type(e).__name__}: {e}")
            )

    # -- answering what is not served --------------------------------------------------------

    def _unsupported(self, api_key: int, version: int, correlation_id: int) -> bytes | None:
        served = self.supported.get(api_key)
        err = UnsupportedVersionError(
            f"api key {api_key} version {version} is not supported"
            + (f" (versions {served[0]}-{served[1]} are)" if served else "")
        )
        if api_key == API_VERSIONS:
            # KIP-511: answered at v0, which every client reads, listing what is served.
            return _core.kafka_encode_response(
                API_VERSIONS,
                0,
                correlation_id,
                {"error_code": err.code, "api_keys": self._api_keys()},
            )
        _log.info("%s", err.message)
        return self._error_response(api_key, version, correlation_id, err)

    def _error_response(
        self, api_key: int, version: int, correlation_id: int, err: KafkaError
    ) -> bytes | None:
        """``err`` as the response's top-level error code, at ``version`` (or the nearest
        version the schemas have); None when the response has no top-level error code."""
        schemas = self.schemas
        if api_key not in schemas:
            _log.warning("closing a connection: unknown api key %d", api_key)
            return None
        lo, hi = schemas[api_key]
        at = min(max(version, lo), hi)
        try:
            return _core.kafka_encode_response(
                api_key, at, correlation_id, {"error_code": err.code}
            )
        except ValueError:
            _log.warning(
                "closing a connection: api key %d v%d (%s) has no error code to answer with",
                api_key,
                version,
                err.name,
            )
            return None

    # -- ApiVersions --------------------------------------------------------------------------

    def _api_keys(self) -> list[Body]:
        return [
            {"api_key": k, "min_version": lo, "max_version": hi}
            for k, (lo, hi) in sorted(self.supported.items())
        ]

    async def _sasl_out_of_turn(self, req: KafkaRequest) -> Body:
        if req.api_key == SASL_HANDSHAKE:
            return {"error_code": _ILLEGAL_SASL_STATE, "mechanisms": []}
        return {
            "error_code": _ILLEGAL_SASL_STATE,
            "error_message": f"listener {req.listener_name} is not authenticating this connection",
            "auth_bytes": b"",
            "session_lifetime_ms": 0,
        }

    async def api_versions(self, req: KafkaRequest) -> Body:
        return {"error_code": 0, "api_keys": self._api_keys()}

    async def _fetch(self, req: KafkaRequest, throttle: Throttle | None) -> SplicedResponse:
        quotas = self.apis.quotas
        body = req.body
        from_client = (
            body.get("replica_id", -1) < 0
            and (body.get("replica_state") or {}).get("replica_id", -1) < 0
        )
        user = req.principal.name
        if quotas is not None and from_client:
            # As Kafka: one fetch takes at most the quota of all but one of its windows.
            cap = quotas.fetch.max_bytes_in_window(user, req.client_id)
            if cap is not None:
                body["max_bytes"] = min(body.get("max_bytes", cap), cap)
        response, record_sets = await records.fetch(
            self.apis, req.version, body, self.fetch_sessions, req
        )
        if quotas is not None and from_client:
            size = sum(region.length for regions in record_sets for region in regions)
            response["throttle_time_ms"] = _throttled(
                throttle, quotas.record_fetch(user, req.client_id, size)
            )
        frame, splices = _core.kafka_encode_response_spliced(
            FETCH, req.version, req.correlation_id, response
        )
        return SplicedResponse(
            frame,
            [(offset, regions) for (offset, _), regions in zip(splices, record_sets, strict=True)],
        )

    # -- records --------------------------------------------------------------------------

    async def produce(self, req: KafkaRequest) -> Body | None:
        return await records.produce(self.apis, req)

    async def list_offsets(self, req: KafkaRequest) -> Body:
        return records.list_offsets(self.apis, req)

    # -- Metadata -----------------------------------------------------------------------------

    async def metadata(self, req: KafkaRequest) -> Body:
        """Topics named (or, since v10, given by id), or every topic for a null list (v1+)
        or an empty one (v0); brokers with their endpoint on this listener. With an
        authorizer, only topics the sender may DESCRIBE, and auto-creation only for one
        allowed CREATE (on the cluster or the topics)."""
        version, body, listener_name = req.version, req.body, req.listener_name
        wanted = body.get("topics")
        image = self.apis.image()
        names: list[str] = []
        unknown_ids: list[uuid.UUID] = []
        for t in wanted or ():
            name = t.get("name")
            topic_id = t.get("topic_id") or _ZERO_UUID
            if not name and topic_id != _ZERO_UUID:
                topic = image.topics_by_id.get(topic_id)
                if topic is None:
                    unknown_ids.append(topic_id)
                    continue
                name = topic.name
            if name is not None:
                names.append(name)
        # Topics named that the sender may not describe are answered
        # TOPIC_AUTHORIZATION_FAILED; with every topic asked for, they are left out.
        denied = [n for n in names if not req.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, n)]
        names = [n for n in names if n not in denied]
        missing = [n for n in names if image.topic(n) is None]
        allow_auto_create = bool(body.get("allow_auto_topic_creation", True)) and (
            not missing
            or req.allowed_quietly(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)
            or all(req.allowed(AclOperation.CREATE, ResourceType.TOPIC, n) for n in missing)
        )
        if wanted is not None and not names and (version > 0 or unknown_ids or denied):
            # A list naming no (known) topic: no topics, only the brokers. (handle_metadata
            # reads no names as every topic, which Metadata v0 means by an empty list.)
            cluster = self.apis.handle_describe_cluster(listener_name)
            brokers = [b for b in cluster.brokers if not b.is_fenced and b.port >= 0]
            result = MetadataResult(cluster.cluster_id, cluster.controller_id, brokers, [])
        else:
            result = await self.apis.handle_metadata(names, allow_auto_create, listener_name)
        shown = result.topics
        if not names:
            shown = [
                t
                for t in shown
                if req.allowed_quietly(AclOperation.DESCRIBE, ResourceType.TOPIC, t.name)
            ]
        topics = [_metadata_topic(t) for t in shown]
        topics += [
            {
                "error_code": TopicAuthorizationFailedError.code,
                "name": n,
                "topic_id": _ZERO_UUID,
                "partitions": [],
            }
            for n in denied
        ]
        topics += [
            {"error_code": 100, "name": None, "topic_id": i, "partitions": []}  # UNKNOWN_TOPIC_ID
            for i in unknown_ids
        ]
        return {
            "brokers": [
                {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                for b in result.brokers
            ],
            "cluster_id": result.cluster_id,
            "controller_id": result.controller_id,
            "topics": topics,
        }


def _metadata_topic(t: Any) -> Body:
    out: Body = {
        "error_code": t.error.code if t.error else 0,
        "name": t.name,
        "topic_id": t.topic.topic_id if t.topic is not None else _ZERO_UUID,
        "is_internal": t.topic.is_internal if t.topic is not None else False,
        "partitions": [
            {
                "error_code": p.error.code if p.error else 0,
                "partition_index": p.partition,
                "leader_id": p.leader_id,
                "leader_epoch": p.leader_epoch,
                "replica_nodes": list(p.replicas),
                "isr_nodes": list(p.isr),
                "offline_replicas": list(p.offline_replicas),
            }
            for p in t.partitions
        ],
    }
    return out
