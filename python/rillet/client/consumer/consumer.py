"""Consumer, shaped like kafka-python's ``KafkaConsumer``: manual assignment, or a
subscription, alone or in a consumer group (``group_id``; Kafka 4's server-driven protocol of
KIP-848, :mod:`rillet.client.consumer.group`).

Positions live in the client (:class:`~rillet.client.consumer.subscription.SubscriptionState`);
the :class:`~rillet.client.consumer.fetcher.Fetcher` fetches from the partition leaders one
response ahead and decodes in Rust. ``poll()`` hands out buffered records first, then waits
for fetches. A partition without a position is reset by ``auto_offset_reset`` (``earliest``,
``latest``, or ``none``: :class:`~rillet.errors.NoOffsetForPartitionError`).

``isolation_level="read_committed"`` reads transactional topics as Kafka's consumer does:
fetches stop at the last stable offset, and the records of aborted transactions are dropped
(in Rust, as batches are decoded); control records are never returned. The default,
``read_uncommitted``, returns every record but control records.

Not thread safe, like kafka-python's consumer: use one thread per consumer (``wakeup()`` is
the exception: it may be called from another thread).
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Literal, NamedTuple, overload

from rillet._core import ConsumerRecord
from rillet.client.cluster import ClusterMetadata
from rillet.client.configs import merge_configs, parse_bootstrap
from rillet.client.consumer.classic import ClassicGroupMember
from rillet.client.consumer.fetcher import Deserializer, Fetcher
from rillet.client.consumer.group import ConsumerGroupMember
from rillet.client.consumer.listener import ConsumerRebalanceListener
from rillet.client.consumer.member_base import CommitCallback, GroupMemberBase
from rillet.client.consumer.metrics import ConsumerCoordinatorMetrics, FetchManagerMetrics
from rillet.client.consumer.subscription import EARLIEST, LATEST, SubscriptionState
from rillet.client.metrics import METRICS_DEFAULTS, KafkaMetric, MetricName, metrics_from_config
from rillet.client.security import SECURITY_DEFAULTS, client_sasl, client_tls
from rillet.errors import (
    IllegalStateError,
    InvalidConfigurationError,
    KafkaError,
    KafkaTimeoutError,
    SslAuthenticationError,
)
from rillet.protocol import fetch_pb2
from rillet.types import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition

__all__ = ["Consumer", "ConsumerRecord", "OffsetAndTimestamp"]

_RESET = {"earliest": EARLIEST, "smallest": EARLIEST, "latest": LATEST, "largest": LATEST}

_BUILTIN_DESERIALIZERS: dict[str, Deserializer] = {
    "bytes": lambda v: v,
    "str": lambda v: None if v is None else v.decode(),
    "string": lambda v: None if v is None else v.decode(),
}


class OffsetAndTimestamp(NamedTuple):
    """The answer of :meth:`Consumer.offsets_for_times` for one partition."""

    offset: int
    timestamp: int
    leader_epoch: int | None = None


class Consumer:
    """Read records from Rillet by manual assignment, or by subscribing with no group
    (every partition of the subscribed topics). Call :meth:`close` when done."""

    DEFAULT_CONFIG: Mapping[str, Any] = {
        "bootstrap_servers": "localhost:9092",
        "client_id": "rillet-consumer",
        "group_id": None,
        "group_protocol": "consumer",
        "group_instance_id": None,
        "group_remote_assignor": None,
        "partition_assignment_strategy": ("range", "cooperative-sticky"),
        "session_timeout_ms": 45000,
        "heartbeat_interval_ms": 3000,
        "max_poll_interval_ms": 300000,
        "auto_commit_interval_ms": 5000,
        "default_api_timeout_ms": 60000,
        "key_deserializer": None,
        "value_deserializer": None,
        "fetch_min_bytes": 1,
        "fetch_max_wait_ms": 500,
        "fetch_max_bytes": 52428800,
        "max_partition_fetch_bytes": 1048576,
        "request_timeout_ms": 30500,
        "retry_backoff_ms": 100,
        "auto_offset_reset": "latest",
        "enable_auto_commit": None,  # Kafka's default: on with a group_id, off without
        "check_crcs": True,
        "max_poll_records": 500,
        "consumer_timeout_ms": float("inf"),
        "metadata_max_age_ms": 300000,
        "isolation_level": "read_uncommitted",
        "client_rack": "",
        # How records travel (Rillet's own config): "auto" speaks whatever bootstrap_servers
        # serve, Kafka's protocol on a Kafka listener and gRPC on a gRPC listener; "kafka" or
        # "grpc" insist on one. Group and offset calls go over gRPC either way (through a
        # Kafka listener's relay).
        "transport": "auto",
        # metrics(): metrics_enabled, metrics_num_samples, metrics_sample_window_ms.
        **METRICS_DEFAULTS,
        **SECURITY_DEFAULTS,
    }

    def __init__(self, *topics: str | Mapping[str, Any], **kwargs: Any) -> None:
        """``Consumer("t1", "t2", bootstrap_servers=...)`` as in kafka-python; a dict of
        Kafka's dotted names may come first: ``Consumer({"bootstrap.servers": ...}, "t1")``."""
        configs: Mapping[str, Any] | None = None
        if topics and isinstance(topics[0], Mapping):
            configs, topics = topics[0], topics[1:]
        names: list[str] = []
        for t in topics:
            if not isinstance(t, str):
                raise TypeError(f"topics must be strings, got {t!r}")
            names.append(t)
        c = merge_configs(self.DEFAULT_CONFIG, configs, kwargs, "consumer")
        self.config = c
        group_id = c["group_id"]
        if group_id is not None and (not isinstance(group_id, str) or not group_id):
            raise InvalidConfigurationError(
                f"Invalid value {group_id!r} for configuration group.id: a non-empty string"
            )
        if c["enable_auto_commit"] is None:
            c["enable_auto_commit"] = group_id is not None
        elif c["enable_auto_commit"] and group_id is None:
            raise InvalidConfigurationError(
                "enable.auto.commit cannot be set to true when default group id (null) is used."
            )
        protocol = str(c["group_protocol"]).lower()
        if protocol not in ("consumer", "classic"):
            raise InvalidConfigurationError(
                f"Invalid value {c['group_protocol']} for configuration group.protocol: "
                "String must be one of (case insensitive): CLASSIC, CONSUMER"
            )
        reset = str(c["auto_offset_reset"]).lower()
        if reset not in (*_RESET, "none"):
            raise InvalidConfigurationError(
                f"Invalid value {c['auto_offset_reset']} for configuration auto.offset.reset: "
                "String must be one of: latest, earliest, none"
            )
        isolation = str(c["isolation_level"]).lower()
        if isolation not in ("read_uncommitted", "read_committed"):
            raise InvalidConfigurationError(
                f"Invalid value {c['isolation_level']} for configuration isolation.level: "
                "String must be one of: read_uncommitted, read_committed"
            )
        for name in (
            "fetch_min_bytes",
            "fetch_max_wait_ms",
            "fetch_max_bytes",
            "max_partition_fetch_bytes",
            "max_poll_records",
            "request_timeout_ms",
            "max_poll_interval_ms",
            "auto_commit_interval_ms",
            "session_timeout_ms",
            "heartbeat_interval_ms",
            "default_api_timeout_ms",
        ):
            value = c[name]
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise InvalidConfigurationError(
                    f"Invalid value {value!r} for configuration {name.replace('_', '.')}: "
                    "must be a non-negative integer"
                )
        if c["max_poll_records"] < 1:
            raise InvalidConfigurationError("max.poll.records must be at least 1")
        key_deserializer = self._deserializer(c["key_deserializer"], "key_deserializer")
        value_deserializer = self._deserializer(c["value_deserializer"], "value_deserializer")
        self._cluster = ClusterMetadata(
            parse_bootstrap(c["bootstrap_servers"]),
            int(c["request_timeout_ms"]),
            str(c["transport"]),
            str(c["client_id"]),
            client_tls(c),
            client_sasl(c),
        )
        self._subscriptions = SubscriptionState()
        self._metrics = metrics_from_config(c)
        self._fetcher = Fetcher(
            c,
            self._cluster,
            self._subscriptions,
            isolation_level=(
                fetch_pb2.ISOLATION_LEVEL_READ_COMMITTED
                if isolation == "read_committed"
                else fetch_pb2.ISOLATION_LEVEL_READ_UNCOMMITTED
            ),
            reset_default=_RESET.get(reset),
            key_deserializer=key_deserializer,
            value_deserializer=value_deserializer,
            metrics=None if self._metrics is None else FetchManagerMetrics(self._metrics),
        )
        self._wakeup = threading.Event()
        self._closed = False
        self._group: GroupMemberBase | None = None
        if group_id is not None:
            member = ClassicGroupMember if protocol == "classic" else ConsumerGroupMember
            subscriptions = self._subscriptions  # not self: the consumer stays acyclic
            sensors = (
                None
                if self._metrics is None
                else ConsumerCoordinatorMetrics(
                    self._metrics, lambda: len(subscriptions.assignment)
                )
            )
            self._group = member(c, self._cluster, self._subscriptions, self._wakeup, sensors)
        if names:
            self.subscribe(names)

    @staticmethod
    def _deserializer(value: Any, name: str) -> Deserializer | None:
        if value is None or callable(value):
            return value  # type: ignore[no-any-return]
        if isinstance(value, str) and value.lower() in _BUILTIN_DESERIALIZERS:
            return _BUILTIN_DESERIALIZERS[value.lower()]
        raise InvalidConfigurationError(
            f"Invalid value {value!r} for configuration {name}: a callable or one of "
            f"{sorted(_BUILTIN_DESERIALIZERS)}"
        )

    # -- assignment ------------------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly these partitions (replacing any earlier assignment)."""
        self._subscriptions.assign(partitions)

    def subscribe(
        self,
        topics: Iterable[str] = (),
        pattern: str | None = None,
        listener: ConsumerRebalanceListener | None = None,
    ) -> None:
        """Subscribe to ``topics``, or to every topic whose whole name matches the regular
        expression ``pattern``. In a group (``group_id``) the coordinator shares their
        partitions out among the members and ``listener`` hears of each change; without one
        this consumer reads every partition, picking up new ones on metadata refresh."""
        names = [topics] if isinstance(topics, str) else list(topics)
        if bool(names) == (pattern is not None):
            raise IllegalStateError("Subscription requires either topics or pattern, not both")
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as e:
                raise InvalidConfigurationError(
                    f"Invalid subscription pattern {pattern!r}: {e}"
                ) from None
        if listener is not None and not isinstance(listener, ConsumerRebalanceListener):
            raise TypeError("listener must be a ConsumerRebalanceListener")
        self._subscriptions.subscribe(names, pattern)
        if self._group is not None:
            self._group.subscribe(names or None, pattern, listener)
        else:
            self._update_subscribed_assignment(force=True)

    def unsubscribe(self) -> None:
        """Drop every subscription and assignment (and leave the group)."""
        if self._group is not None and self._subscriptions.subscribed:
            self._group.unsubscribe()
        self._subscriptions.unsubscribe()

    def subscription(self) -> set[str] | None:
        topics = self._subscriptions.subscription
        return set(topics) if topics else None

    def assignment(self) -> set[TopicPartition]:
        return set(self._subscriptions.assignment)

    def _update_subscribed_assignment(self, force: bool = False) -> None:
        """Without a group: every partition of the subscribed topics."""
        if self._group is not None or not self._subscriptions.subscribed:
            return
        if not force and self._cluster.age_ms() < self.config["metadata_max_age_ms"]:
            return
        pattern = self._subscriptions.pattern
        with contextlib.suppress(KafkaError):
            self._cluster.refresh(None if pattern is not None else self._subscriptions.subscription)
        topics = (
            {t for t in self._cluster.topics() if re.fullmatch(pattern, t)}
            if pattern is not None
            else self._subscriptions.subscription
        )
        self._subscriptions.set_assignment(
            TopicPartition(topic, p)
            for topic in sorted(topics)
            for p in self._cluster.partitions_for(topic) or []
        )

    # -- positions -------------------------------------------------------------------------

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Read ``partition`` from ``offset`` on the next poll."""
        if not isinstance(offset, int) or offset < 0:
            raise ValueError(f"seek offset must be a non-negative integer, got {offset!r}")
        self._subscriptions.state(partition).move(offset, None)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Read these (default: all assigned) partitions from their log start offset."""
        for tp in partitions or tuple(self._subscriptions.assignment):
            self._subscriptions.state(tp).move(None, EARLIEST)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        """Read these (default: all assigned) partitions from their high watermark."""
        for tp in partitions or tuple(self._subscriptions.assignment):
            self._subscriptions.state(tp).move(None, LATEST)

    def position(self, partition: TopicPartition) -> int:
        """The offset of the next record that will be returned for ``partition``."""
        state = self._subscriptions.state(partition)
        if state.position is None:
            self._fetcher.reset_positions([partition])
        assert state.position is not None
        return state.position

    def highwater(self, partition: TopicPartition) -> int | None:
        """The high watermark last seen in a fetch of ``partition`` (None before one)."""
        hw = self._subscriptions.state(partition).high_watermark
        return hw if hw >= 0 else None

    def pause(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            self._subscriptions.state(tp).paused = True

    def resume(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            self._subscriptions.state(tp).paused = False

    def paused(self) -> set[TopicPartition]:
        return self._subscriptions.paused()

    # -- offsets lookups -------------------------------------------------------------------

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The log start offset of each partition."""
        found = self._fetcher.list_offsets({TopicPartition(*tp): EARLIEST for tp in partitions})
        return {tp: r[0] for tp, r in found.items()}

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The high watermark (the offset after the last committed record) of each; with
        ``isolation_level="read_committed"``, the last stable offset (Kafka's
        ``endOffsets``: below it no transaction is open)."""
        found = self._fetcher.list_offsets({TopicPartition(*tp): LATEST for tp in partitions})
        return {tp: r[0] for tp, r in found.items()}

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """For each partition, the first offset whose timestamp is at or after the given
        milliseconds, or None when every record is older."""
        for tp, ts in timestamps.items():
            if not isinstance(ts, int) or ts < 0:
                raise ValueError(f"The target time for partition {tp} is {ts}. It must be >= 0")
        found = self._fetcher.list_offsets(
            {TopicPartition(*tp): ts for tp, ts in timestamps.items()}
        )
        return {
            tp: None if offset < 0 else OffsetAndTimestamp(offset, ts, epoch)
            for tp, (offset, ts, epoch) in found.items()
        }

    # -- metadata --------------------------------------------------------------------------

    def topics(self) -> set[str]:
        """Every topic the cluster has."""
        self._cluster.refresh(None)
        return set(self._cluster.topics())

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        """The partition numbers of ``topic``, or None when it does not exist. No broker to
        ask (none reachable, or TLS refused) raises, rather than look like no topic."""
        try:
            self._cluster.refresh([topic])
        except KafkaError as e:
            # Any other failure leaves the cached metadata to answer.
            if isinstance(e, KafkaTimeoutError | SslAuthenticationError):
                raise
        parts = self._cluster.partitions_for(topic)
        return set(parts) if parts is not None else None

    # -- polling ---------------------------------------------------------------------------

    def poll(
        self, timeout_ms: int = 0, max_records: int | None = None, update_offsets: bool = True
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records from the assigned partitions, at most ``max_records`` (default
        ``max_poll_records``), waiting up to ``timeout_ms`` for some to arrive."""
        if self._closed:
            raise IllegalStateError("This consumer has already been closed.")
        if not self._subscriptions.assignment and not self._subscriptions.subscribed:
            raise IllegalStateError(
                "Consumer is not subscribed to any topics or assigned any partitions"
            )
        limit = int(max_records or self.config["max_poll_records"])
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        self._wakeup.clear()
        fetcher = self._fetcher
        while True:
            if self._group is not None:
                self._group.poll()
            self._update_subscribed_assignment()
            fetcher.reset_positions(self._subscriptions.needing_reset())
            out = fetcher.collect(limit)
            if out:
                fetcher.send_fetches()  # prefetch while the caller works on these
                return out
            fetcher.send_fetches()
            remaining = deadline - time.monotonic()
            if not fetcher.await_fetches(remaining, self._wakeup):
                return {}
            if self._wakeup.is_set():
                return {}

    def __iter__(self) -> Iterator[ConsumerRecord]:
        return self

    def __next__(self) -> ConsumerRecord:
        """The next record; StopIteration after ``consumer_timeout_ms`` without one."""
        timeout = self.config["consumer_timeout_ms"]
        deadline = time.monotonic() + timeout / 1000 if timeout != float("inf") else None
        while True:
            records = self.poll(
                timeout_ms=int(min(1000, max((deadline - time.monotonic()) * 1000, 0)))
                if deadline is not None
                else 1000,
                max_records=1,
            )
            for batch in records.values():
                return batch[0]
            if deadline is not None and time.monotonic() >= deadline:
                raise StopIteration

    def wakeup(self) -> None:
        """Make a blocked :meth:`poll` return early (from another thread)."""
        self._wakeup.set()

    # -- committed offsets (a group's) --------------------------------------------------------

    def _member(self) -> GroupMemberBase:
        if self._group is None:
            raise IllegalStateError(
                "To use the group management or offset commit APIs, you must provide a valid "
                "group.id in the consumer configuration."
            )
        return self._group

    def group_metadata(self) -> ConsumerGroupMetadata:
        """This member's group id, generation (or member epoch), member id and instance id,
        for a transactional producer's ``send_offsets_to_transaction`` (Kafka's
        ``groupMetadata()``)."""
        member = self._member()
        member_id, epoch, instance_id = member.identity()
        return ConsumerGroupMetadata(member.group_id, epoch, member_id, instance_id)

    def commit(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None
    ) -> None:
        """Commit ``offsets`` (default: the position of every assigned partition) to the
        group, waiting until the coordinator has them."""
        self._member().commit(_offsets(offsets))

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
        callback: CommitCallback | None = None,
    ) -> None:
        """Commit without waiting; ``callback(offsets, exception_or_None)`` runs in a later
        ``poll()``."""
        self._member().commit_async(_offsets(offsets), callback)

    def committed(self, partition: TopicPartition, metadata: bool = False) -> Any:
        """The group's committed offset of ``partition`` (None if there is none); with
        ``metadata``, the whole OffsetAndMetadata."""
        found = self._member().committed([TopicPartition(*partition)]).get(partition)
        if found is None:
            return None
        return found if metadata else found.offset

    # -- metrics ---------------------------------------------------------------------------

    @overload
    def metrics(self, raw: Literal[False] = False) -> dict[str, dict[str, float]] | None: ...
    @overload
    def metrics(self, raw: Literal[True]) -> dict[MetricName, KafkaMetric] | None: ...
    def metrics(self, raw: bool = False) -> Any:
        """The consumer's metrics now, as kafka-python's ``metrics()``: by group
        (``consumer-fetch-manager-metrics``, and ``consumer-coordinator-metrics`` with a
        ``group_id``) and name (Kafka's: ``records-consumed-total``, ``records-lag-max``,
        ``fetch-latency-avg``, ``commit-rate``, ...; :mod:`rillet.client.consumer.metrics`
        lists them). Rates are per second over ``metrics_num_samples`` windows of
        ``metrics_sample_window_ms``. With ``raw``, each metric object by name; None with
        ``metrics_enabled=False``."""
        if self._metrics is None:
            return None
        return self._metrics.metrics if raw else self._metrics.snapshot()

    # -- lifecycle -------------------------------------------------------------------------

    def close(self, autocommit: bool = True) -> None:
        """Commit (with auto-commit on), leave the group, stop fetching, release
        connections."""
        if self._closed:
            return
        self._closed = True
        if self._group is not None:
            self._group.close(autocommit, self.config["request_timeout_ms"] / 1000)
        self._fetcher.close()
        self._cluster.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _offsets(
    offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None,
) -> dict[TopicPartition, OffsetAndMetadata] | None:
    """Accept kafka-python's OffsetAndMetadata values, or bare offsets."""
    if offsets is None:
        return None
    out = {}
    for tp, om in offsets.items():
        if isinstance(om, int):
            om = OffsetAndMetadata(om)
        if not isinstance(om.offset, int) or om.offset < 0:
            raise ValueError(f"invalid offset to commit for {tp}: {om.offset!r}")
        out[TopicPartition(*tp)] = OffsetAndMetadata(*om)
    return out
