"""What the shard's handlers share: its state, timers, settings and view of the topics."""

from __future__ import annotations

import base64
import random
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from rillet.coordinator.group.config import GroupCoordinatorConfig
from rillet.coordinator.group.consumer_group import TopicInfo
from rillet.coordinator.group.state import ShardState
from rillet.coordinator.group.timers import Timers

__all__ = ["ShardContext"]


@dataclass
class ShardContext:
    """One shard's parts, passed to each protocol's handlers.

    ``topics`` is the cluster's topics as the driver last gave them (name -> id and
    partition count); it feeds subscriptions and is never persisted. ``rng`` makes member
    ids; it is injected so that a seeded run is reproducible.
    """

    config: GroupCoordinatorConfig
    rng: random.Random
    state: ShardState = field(default_factory=ShardState)
    timers: Timers = field(default_factory=Timers)
    topics: dict[str, TopicInfo] = field(default_factory=dict)
    _names_by_id: dict[uuid.UUID, str] = field(default_factory=dict)

    def set_topics(self, topics: Mapping[str, TopicInfo | tuple[uuid.UUID, int]]) -> None:
        self.topics = {name: TopicInfo(*info) for name, info in sorted(topics.items())}
        self._names_by_id = {info.topic_id: name for name, info in self.topics.items()}

    def random_uuid(self) -> uuid.UUID:
        return uuid.UUID(int=self.rng.getrandbits(128), version=4)

    def new_consumer_member_id(self) -> str:
        """A member id as Kafka's ``Uuid.randomUuid().toString()``: 22 URL-safe base64
        characters."""
        return base64.urlsafe_b64encode(self.random_uuid().bytes).rstrip(b"=").decode()

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self._names_by_id.get(topic_id)
