"""Incremental fetch sessions (KIP-227), as Kafka's broker keeps them (``FetchSession.scala``):
the session cache, each session's partitions, and which partitions an answer carries.

A client fetching many partitions need not name them all in every Fetch. Its first, *full*
request (session epoch 0) creates a session holding each partition's fetch parameters, and
the response's ``session_id`` names it. Each *incremental* request after it (epochs 1, 2, …)
lists only the partitions added or changed since (``topics``) and those to drop
(``forgotten_topics_data``); the broker fetches every partition of the session and answers
only those with something new: records, a moved high watermark, last stable offset or log
start offset, an error, or a diverging epoch.

What a request's session id and epoch mean (:meth:`FetchSessionCache.new_context`):

* epoch -1 (``FINAL_EPOCH``): a sessionless full fetch, answered with session id 0 (also
  what a request before Fetch v7, which has no session fields, means). With a session id,
  that session is closed first.
* epoch 0 (``INITIAL_EPOCH``): a full fetch that closes the named session, if any, and
  creates a new one, answered with its id, or with 0 when the cache has no room (the
  client then fetches sessionless).
* epoch N > 0: incremental. The session must exist (else ``FETCH_SESSION_ID_NOT_FOUND``),
  N must be its next epoch (else ``INVALID_FETCH_SESSION_EPOCH``) and the request must name
  topics as the session does, by id from v13 and by name before
  (else ``FETCH_SESSION_TOPIC_ID_ERROR``). These errors are the response's top-level error
  code, with session id 0 and no partitions. A request that leaves its session empty closes
  it and is answered sessionless. A request answered after another one of the same session
  took the next epoch (a duplicate, e.g. one that waited in a long poll meanwhile) is
  answered ``INVALID_FETCH_SESSION_EPOCH`` with the session's id and no partitions.

The cache holds ``max.incremental.fetch.session.cache.slots`` sessions. When it is full, a
new session takes the slot of the least recently used one if that is *stale* (unused for
more than :data:`EVICTION_MS`), else of the least valuable *evictable* one (unprivileged
before privileged, then fewer partitions, then lower id) if the newcomer is worth more
(privileged over unprivileged, else more partitions). Which sessions are evictable is judged
at each one's last use: for a consumer's newcomer, those then older than
:data:`EVICTION_MS`; for a follower's (``replica_id`` >= 0, *privileged*), those and every
unprivileged session. So a full cache of fresh sessions answers a new consumer sessionless.

Pure code: no sockets and no clock. Times are milliseconds passed in, and session ids come
from an injectable :class:`random.Random`. One Fetch is served by a :class:`FetchContext`:
:meth:`FetchSessionCache.new_context` before the fetch (it checks and updates the session),
:meth:`FetchContext.partitions` for what to fetch, and :meth:`FetchContext.respond` after it,
which picks the partitions to answer (creating a full fetch's session).

Differences from Kafka: one cache, not Kafka's eight shards (KAFKA-9401 shards it against
lock contention between request threads; Rillet serves requests on one event loop), so a
new session may evict any session, not only one of its shard, and
``max.incremental.fetch.session.cache.slots`` is not divided; a changed last stable offset
also makes a partition part of an incremental answer (Kafka's cached partition does not
track it; a read_committed consumer reads up to it); there is no preferred read replica
(KIP-392) to report and no throttled answer (quotas).
"""

from __future__ import annotations

import logging
import random
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from rillet.errors import (
    FetchSessionIdNotFoundError,
    FetchSessionTopicIdError,
    InvalidFetchSessionEpochError,
)

__all__ = [
    "EVICTION_MS",
    "FINAL_EPOCH",
    "INITIAL_EPOCH",
    "INVALID_SESSION_ID",
    "TOPIC_ID_VERSION",
    "CachedPartition",
    "FetchAnswer",
    "FetchContext",
    "FetchSession",
    "FetchSessionCache",
    "FullContext",
    "IncrementalContext",
    "PartitionRequest",
    "PartitionResult",
    "SessionErrorContext",
    "SessionlessContext",
    "TopicIdPartition",
    "next_epoch",
]

_log = logging.getLogger(__name__)

INVALID_SESSION_ID = 0
"""The session id of a request or answer that has no session."""
INITIAL_EPOCH = 0
"""A full request's epoch that asks for a new session."""
FINAL_EPOCH = -1
"""A full request's epoch that asks for no session (and closes the one named)."""
EVICTION_MS = 120_000
"""How long a session must go unused to be stale, and live to be evictable (Kafka's
``MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS``, not configurable there either)."""
TOPIC_ID_VERSION = 13
"""The first Fetch version naming topics by id."""

_ZERO_UUID = uuid.UUID(int=0)
_INT32_MAX = 0x7FFF_FFFF

TopicNames = Callable[[uuid.UUID], str | None]
"""A topic id's name in the current metadata, or None for an unknown id."""


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch``: FINAL_EPOCH stays itself, and the largest int32 wraps to 1
    (Kafka's ``FetchMetadata.nextEpoch``)."""
    if epoch < 0:
        return FINAL_EPOCH
    if epoch == _INT32_MAX:
        return 1
    return epoch + 1


@dataclass(frozen=True, eq=False, slots=True)
class TopicIdPartition:
    """A partition as a Fetch names it: by topic id from v13 (``topic`` is None for an id
    the metadata does not know), by name before (``topic_id`` is zero). Two are equal when
    their partitions and ids are, or, with a zero id, their names: so a partition whose name
    was unknown is the same one once it is known."""

    topic_id: uuid.UUID
    topic: str | None
    partition: int

    def _key(self) -> tuple[uuid.UUID | str | None, int]:
        return (self.topic_id if self.topic_id != _ZERO_UUID else self.topic), self.partition

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TopicIdPartition):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


@dataclass(frozen=True, slots=True)
class PartitionRequest:
    """One partition's fetch parameters, as a request sends them and a session keeps them
    (Kafka's ``FetchRequest.PartitionData``); -1 is "none" for the optional ones."""

    fetch_offset: int
    max_bytes: int
    log_start_offset: int = -1
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1


@dataclass(frozen=True, slots=True)
class PartitionResult:
    """What an incremental answer compares of one fetched partition."""

    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records_size: int = 0
    diverging: bool = False


@dataclass(slots=True)
class CachedPartition:
    """A session's partition: its fetch parameters (the last a request sent) and what the
    last answer carrying it said (Kafka's ``CachedPartition``; ``topic`` is None while the
    partition's topic id is unknown)."""

    topic_id: uuid.UUID
    topic: str | None
    partition: int
    request: PartitionRequest
    high_watermark: int = -1
    last_stable_offset: int = -1
    local_log_start_offset: int = -1

    @classmethod
    def answered(
        cls, tp: TopicIdPartition, request: PartitionRequest, result: PartitionResult
    ) -> CachedPartition:
        """A full fetch's partition, with the answer it got."""
        return cls(
            tp.topic_id,
            tp.topic,
            tp.partition,
            request,
            result.high_watermark,
            result.last_stable_offset,
            result.log_start_offset,
        )

    @property
    def topic_id_partition(self) -> TopicIdPartition:
        return TopicIdPartition(self.topic_id, self.topic, self.partition)

    def must_respond(self, result: PartitionResult) -> bool:
        """Whether an incremental answer carries this partition, remembering what it says:
        records, a diverging epoch and errors always; a moved high watermark, last stable
        offset or log start offset. After an error the cached high watermark is -1, so the
        partition is sent again once the error is gone."""
        must = result.records_size > 0 or result.diverging
        if self.high_watermark != result.high_watermark:
            self.high_watermark = result.high_watermark
            must = True
        if self.last_stable_offset != result.last_stable_offset:
            self.last_stable_offset = result.last_stable_offset
            must = True
        if self.local_log_start_offset != result.log_start_offset:
            self.local_log_start_offset = result.log_start_offset
            must = True
        if result.error_code != 0:
            self.high_watermark = -1
            must = True
        return must


class FetchSession:
    """One session: its partitions in fetch order (a partition that returned records moves
    to the end, so the next fetch reads the others first under its byte limit), its next
    expected epoch, and what the cache keeps to choose what to evict."""

    def __init__(
        self,
        session_id: int,
        privileged: bool,
        partitions: dict[TopicIdPartition, CachedPartition],
        uses_topic_ids: bool,
        creation_ms: int,
    ) -> None:
        self.id = session_id
        self.privileged = privileged
        self.partitions = partitions
        self.uses_topic_ids = uses_topic_ids
        self.creation_ms = creation_ms
        self.last_used_ms = creation_ms
        self.epoch = next_epoch(INITIAL_EPOCH)
        # As of the last touch: the size the cache counted (-1 when not in the cache), and
        # whether a privileged / any newcomer may evict it.
        self.cached_size = -1
        self.evictable_by_privileged = False
        self.evictable_by_all = False

    def __len__(self) -> int:
        return len(self.partitions)

    def __repr__(self) -> str:
        return (
            f"FetchSession(id={self.id}, privileged={self.privileged}, "
            f"partitions={len(self.partitions)}, uses_topic_ids={self.uses_topic_ids}, "
            f"creation_ms={self.creation_ms}, last_used_ms={self.last_used_ms}, "
            f"epoch={self.epoch})"
        )

    def update(
        self,
        fetch_data: Mapping[TopicIdPartition, PartitionRequest],
        to_forget: Iterable[TopicIdPartition],
    ) -> tuple[list[TopicIdPartition], list[TopicIdPartition], list[TopicIdPartition]]:
        """An incremental request's changes: its partitions are added (at the end) or have
        their parameters replaced, then the forgotten ones are removed. Returns the added,
        updated and removed partitions."""
        added, updated, removed = [], [], []
        for tp, request in fetch_data.items():
            cached = self.partitions.get(tp)
            if cached is None:
                self.partitions[tp] = CachedPartition(tp.topic_id, tp.topic, tp.partition, request)
                added.append(tp)
            else:
                cached.request = request
                updated.append(tp)
        for tp in to_forget:
            if self.partitions.pop(tp, None) is not None:
                removed.append(tp)
        return added, updated, removed


@dataclass(frozen=True)
class FetchAnswer:
    """A Fetch response's top-level error code and session id, and the fetched partitions
    it carries, in order."""

    error_code: int
    session_id: int
    partitions: list[TopicIdPartition]


class FetchContext(ABC):
    """How one Fetch is served (Kafka's ``FetchContext``): what to fetch, and what to answer
    once fetched."""

    @abstractmethod
    def partitions(self) -> list[tuple[TopicIdPartition, PartitionRequest]]:
        """The partitions to fetch, in order, with their parameters."""

    @abstractmethod
    def respond(
        self, results: Sequence[tuple[TopicIdPartition, PartitionResult]], now_ms: int
    ) -> FetchAnswer:
        """The answer, given what each of :meth:`partitions` fetched (in that order)."""


class SessionErrorContext(FetchContext):
    """A request whose session could not be used: nothing is fetched, and the answer is the
    error with session id 0."""

    def __init__(self, error_code: int) -> None:
        self.error_code = error_code

    def partitions(self) -> list[tuple[TopicIdPartition, PartitionRequest]]:
        return []

    def respond(
        self, results: Sequence[tuple[TopicIdPartition, PartitionResult]], now_ms: int
    ) -> FetchAnswer:
        return FetchAnswer(self.error_code, INVALID_SESSION_ID, [])


class _FullFetchContext(FetchContext):
    """A full fetch: the request's partitions are fetched, and all of them answered."""

    def __init__(self, fetch_data: Mapping[TopicIdPartition, PartitionRequest]) -> None:
        self.fetch_data = fetch_data

    def partitions(self) -> list[tuple[TopicIdPartition, PartitionRequest]]:
        return list(self.fetch_data.items())


class SessionlessContext(_FullFetchContext):
    """A full fetch without a session: answered with session id 0."""

    def respond(
        self, results: Sequence[tuple[TopicIdPartition, PartitionResult]], now_ms: int
    ) -> FetchAnswer:
        return FetchAnswer(0, INVALID_SESSION_ID, [tp for tp, _ in results])


class FullContext(_FullFetchContext):
    """A full fetch asking for a session, created from its partitions and their answers
    when the cache has (or can make) room: the answer names it, or is sessionless (0)."""

    def __init__(
        self,
        cache: FetchSessionCache,
        fetch_data: Mapping[TopicIdPartition, PartitionRequest],
        privileged: bool,
        uses_topic_ids: bool,
    ) -> None:
        super().__init__(fetch_data)
        self.cache = cache
        self.privileged = privileged
        self.uses_topic_ids = uses_topic_ids

    def respond(
        self, results: Sequence[tuple[TopicIdPartition, PartitionResult]], now_ms: int
    ) -> FetchAnswer:
        def create() -> dict[TopicIdPartition, CachedPartition]:
            return {
                tp: CachedPartition.answered(tp, self.fetch_data[tp], result)
                for tp, result in results
            }

        session_id = self.cache.maybe_create_session(
            now_ms, self.privileged, len(results), self.uses_topic_ids, create
        )
        return FetchAnswer(0, session_id, [tp for tp, _ in results])


class IncrementalContext(FetchContext):
    """An incremental fetch of a session (already updated and given its next epoch): every
    partition of the session is fetched, and only those with news are answered."""

    def __init__(self, session: FetchSession, request_epoch: int, topic_names: TopicNames):
        self.session = session
        self.request_epoch = request_epoch
        self.topic_names = topic_names

    def partitions(self) -> list[tuple[TopicIdPartition, PartitionRequest]]:
        out = []
        for cached in self.session.partitions.values():
            if cached.topic is None and self.session.uses_topic_ids:
                cached.topic = self.topic_names(cached.topic_id)  # it may be known by now
            out.append((cached.topic_id_partition, cached.request))
        return out

    def respond(
        self, results: Sequence[tuple[TopicIdPartition, PartitionResult]], now_ms: int
    ) -> FetchAnswer:
        session = self.session
        if session.epoch != next_epoch(self.request_epoch):
            # Another request of this session was served meanwhile: this one is a duplicate.
            _log.info(
                "fetch session %d expected epoch %d but is at %d: a duplicate request?",
                session.id,
                next_epoch(self.request_epoch),
                session.epoch,
            )
            return FetchAnswer(InvalidFetchSessionEpochError.code, session.id, [])
        included = []
        parts = session.partitions
        for tp, result in results:
            if parts[tp].must_respond(result):
                included.append(tp)
                if result.records_size > 0:
                    parts[tp] = parts.pop(tp)  # to the end: the others are read first next
        return FetchAnswer(0, session.id, included)


class FetchSessionCache:
    """The broker's fetch sessions (Kafka's ``FetchSessionCacheShard`` and
    ``FetchManager``), at most ``max_entries``; see the module doc for the rules.

    Choosing a session to evict scans the sessions, which happens only when the cache is
    full and a full fetch asks for a new session."""

    def __init__(
        self,
        max_entries: int,
        eviction_ms: int = EVICTION_MS,
        rng: random.Random | None = None,
    ) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self._rng = rng if rng is not None else random.Random()
        self._sessions: dict[int, FetchSession] = {}
        self.total_partitions = 0
        """The partitions of every cached session (as of each one's last use)."""
        self.evictions = 0
        """Sessions evicted to make room for new ones (not those closed by their clients)."""

    def __len__(self) -> int:
        return len(self._sessions)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._sessions

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def sessions(self) -> list[FetchSession]:
        """The cached sessions (Kafka shows their count and partitions as metrics)."""
        return list(self._sessions.values())

    # -- serving a request --------------------------------------------------------------------

    def new_context(
        self,
        version: int,
        session_id: int,
        epoch: int,
        privileged: bool,
        fetch_data: Mapping[TopicIdPartition, PartitionRequest],
        to_forget: Sequence[TopicIdPartition],
        topic_names: TopicNames,
        now_ms: int,
    ) -> FetchContext:
        """How to serve a Fetch of ``version`` with these session id and epoch, partitions
        (``fetch_data``) and forgotten partitions, from a follower when ``privileged``.
        An incremental request's session is updated, touched and moved to its next epoch
        here; a full request's session is created by its context's answer."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID and self.remove(session_id) is not None:
                _log.debug("a full fetch closed fetch session %d", session_id)
            if epoch == FINAL_EPOCH:
                return SessionlessContext(fetch_data)
            return FullContext(self, fetch_data, privileged, version >= TOPIC_ID_VERSION)
        session = self._sessions.get(session_id)
        if session is None:
            _log.debug("fetch session %d not found", session_id)
            return SessionErrorContext(FetchSessionIdNotFoundError.code)
        if session.epoch != epoch:
            _log.debug(
                "fetch session %d expected epoch %d, got %d", session_id, session.epoch, epoch
            )
            return SessionErrorContext(InvalidFetchSessionEpochError.code)
        if session.uses_topic_ids != (version >= TOPIC_ID_VERSION):
            _log.debug(
                "fetch session %d %s topic ids, and Fetch v%d %s",
                session_id,
                "uses" if session.uses_topic_ids else "does not use",
                version,
                "does not" if session.uses_topic_ids else "does",
            )
            return SessionErrorContext(FetchSessionTopicIdError.code)
        added, updated, removed = session.update(fetch_data, to_forget)
        if not session.partitions:
            _log.debug("fetch session %d has no partitions left: closed", session_id)
            self._remove(session)
            return SessionlessContext(fetch_data)
        self.touch(session, now_ms)
        session.epoch = next_epoch(session.epoch)
        _log.debug(
            "incremental fetch of session %d, epoch %d: %d added, %d updated, %d removed",
            session_id,
            session.epoch,
            len(added),
            len(updated),
            len(removed),
        )
        return IncrementalContext(session, epoch, topic_names)

    # -- the sessions ---------------------------------------------------------------------

    def new_session_id(self) -> int:
        """A random positive int32 no session has."""
        while True:
            session_id = self._rng.randrange(1, _INT32_MAX)
            if session_id not in self._sessions:
                return session_id

    def maybe_create_session(
        self,
        now_ms: int,
        privileged: bool,
        size: int,
        uses_topic_ids: bool,
        create_partitions: Callable[[], dict[TopicIdPartition, CachedPartition]],
    ) -> int:
        """A new session of ``size`` partitions (made by ``create_partitions``) if there is
        room or a session can be evicted for it: its id, or INVALID_SESSION_ID."""
        if len(self._sessions) >= self.max_entries and not self._try_evict(
            privileged, size, now_ms
        ):
            _log.debug("no fetch session created (privileged=%s, size=%d)", privileged, size)
            return INVALID_SESSION_ID
        session = FetchSession(
            self.new_session_id(), privileged, create_partitions(), uses_topic_ids, now_ms
        )
        self._sessions[session.id] = session
        self.touch(session, now_ms)
        _log.debug("created %r", session)
        return session.id

    def _try_evict(self, privileged: bool, size: int, now_ms: int) -> bool:
        """Evict the least recently used session if it is stale, else the least valuable
        session the newcomer may evict if the newcomer is worth more."""
        if not self._sessions:
            return False
        lru = min(self._sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - lru.last_used_ms > self.eviction_ms:
            _log.debug("evicting stale fetch session %d", lru.id)
            self._remove(lru)
            self.evictions += 1
            return True
        candidates = [
            s
            for s in self._sessions.values()
            if (s.evictable_by_privileged if privileged else s.evictable_by_all)
        ]
        if not candidates:
            return False
        victim = min(candidates, key=_evictable_key)
        # Kafka's EvictableKey order: unprivileged first, then size, then id (a newcomer's is
        # 0, below every session's, so an equal size does not evict).
        if (privileged, size, 0) < _evictable_key(victim):
            return False
        _log.debug("evicting fetch session %d for a new one of %d partitions", victim.id, size)
        self._remove(victim)
        self.evictions += 1
        return True

    def remove(self, session_id: int) -> FetchSession | None:
        """Close a session: the removed session, or None if there was none."""
        session = self._sessions.get(session_id)
        if session is not None:
            self._remove(session)
        return session

    def _remove(self, session: FetchSession) -> None:
        if self._sessions.pop(session.id, None) is not None:
            self.total_partitions -= session.cached_size
            session.cached_size = -1

    def touch(self, session: FetchSession, now_ms: int) -> None:
        """Record a session's use: its last-used time, its size, and (from its age now)
        whether it may be evicted."""
        if session.cached_size != -1:
            self.total_partitions -= session.cached_size
        session.last_used_ms = now_ms
        session.cached_size = len(session)
        self.total_partitions += session.cached_size
        aged = now_ms - session.creation_ms > self.eviction_ms
        session.evictable_by_privileged = aged or not session.privileged
        session.evictable_by_all = aged


def _evictable_key(session: FetchSession) -> tuple[bool, int, int]:
    return session.privileged, session.cached_size, session.id
