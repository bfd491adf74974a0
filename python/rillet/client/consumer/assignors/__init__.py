"""Client-side partition assignment for Kafka's CLASSIC group protocol.

protocol.py            ConsumerProtocolSubscription / ConsumerProtocolAssignment bytes (v0-3),
                       StickyAssignorUserData, the cooperative-sticky user data
abstract.py            ConsumerPartitionAssignor, GroupMember, RebalanceProtocol, and the
                       coordinator's part: join_group_protocols, choose_rebalance_protocol,
                       lookup_assignor, perform_assignment, validate_cooperative_assignment
range.py               RangeAssignor             ``range``
roundrobin.py          RoundRobinAssignor        ``roundrobin``
sticky.py              StickyAssignor            ``sticky`` (and the sticky algorithm)
cooperative_sticky.py  CooperativeStickyAssignor ``cooperative-sticky`` (KIP-429)

:func:`create_assignors` turns ``partition_assignment_strategy`` into assignor instances.
"""

from __future__ import annotations

from collections.abc import Iterable

from rillet.client.consumer.assignors.abstract import (
    ConsumerPartitionAssignor,
    GroupMember,
    JoinGroupProtocol,
    RebalanceProtocol,
    all_subscribed_topics,
    choose_rebalance_protocol,
    join_group_protocols,
    lookup_assignor,
    perform_assignment,
    validate_cooperative_assignment,
)
from rillet.client.consumer.assignors.cooperative_sticky import CooperativeStickyAssignor
from rillet.client.consumer.assignors.protocol import (
    CONSUMER_PROTOCOL_TYPE,
    DEFAULT_GENERATION,
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from rillet.client.consumer.assignors.range import RangeAssignor
from rillet.client.consumer.assignors.roundrobin import RoundRobinAssignor
from rillet.client.consumer.assignors.sticky import StickyAssignor
from rillet.errors import InvalidConfigurationError

__all__ = [
    "ASSIGNORS",
    "CONSUMER_PROTOCOL_TYPE",
    "DEFAULT_GENERATION",
    "Assignment",
    "ConsumerPartitionAssignor",
    "CooperativeStickyAssignor",
    "GroupMember",
    "JoinGroupProtocol",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "StickyAssignor",
    "Subscription",
    "all_subscribed_topics",
    "choose_rebalance_protocol",
    "create_assignors",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
    "join_group_protocols",
    "lookup_assignor",
    "perform_assignment",
    "validate_cooperative_assignment",
]

#: The built-in assignors by Kafka's name.
ASSIGNORS: dict[str, type[ConsumerPartitionAssignor]] = {
    cls.name: cls
    for cls in (RangeAssignor, RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor)
}

# Kafka's class names, as a Java client's partition.assignment.strategy spells them.
_JAVA_CLASS_NAMES = {
    "org.apache.kafka.clients.consumer.RangeAssignor": RangeAssignor,
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": RoundRobinAssignor,
    "org.apache.kafka.clients.consumer.StickyAssignor": StickyAssignor,
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": CooperativeStickyAssignor,
}


def create_assignors(
    strategies: Iterable[str | type[ConsumerPartitionAssignor] | ConsumerPartitionAssignor],
) -> list[ConsumerPartitionAssignor]:
    """``partition.assignment.strategy`` to assignor instances, in order of preference (Kafka's
    ``ConsumerPartitionAssignor.getAssignorInstances``). Each entry is an assignor name
    (``range``), Kafka's class name (``org.apache.kafka.clients.consumer.RangeAssignor``), an
    assignor class or an instance. An unknown name, or two assignors of one name, is an
    :class:`InvalidConfigurationError`."""
    out: list[ConsumerPartitionAssignor] = []
    for strategy in strategies:
        if isinstance(strategy, ConsumerPartitionAssignor):
            assignor = strategy
        elif isinstance(strategy, type) and issubclass(strategy, ConsumerPartitionAssignor):
            assignor = strategy()
        elif isinstance(strategy, str):
            cls = ASSIGNORS.get(strategy) or _JAVA_CLASS_NAMES.get(strategy)
            if cls is None:
                raise InvalidConfigurationError(
                    f"partition.assignment.strategy: unknown assignor {strategy!r}; "
                    f"known: {sorted(ASSIGNORS)}"
                )
            assignor = cls()
        else:
            raise InvalidConfigurationError(
                f"partition.assignment.strategy: {strategy!r} is not an assignor name or class"
            )
        if any(a.name == assignor.name for a in out):
            raise InvalidConfigurationError(
                f"The assignor name: {assignor.name!r} is used in more than one assignor"
            )
        out.append(assignor)
    return out
