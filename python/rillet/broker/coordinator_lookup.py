"""FindCoordinator's work, for every transport: which coordinator serves a key type (GROUP
0, TRANSACTION 1), which broker coordinates a key, and that broker's endpoint on the
listener the request came on (clients connect where they asked)."""

from __future__ import annotations

from rillet.broker.group_coordinator import GroupCoordinator
from rillet.broker.transaction_coordinator import TransactionCoordinator
from rillet.errors import InvalidRequestError, KafkaError
from rillet.metadata.records import BrokerEndpoint

__all__ = ["COORDINATOR_GROUP", "COORDINATOR_TRANSACTION", "find_coordinator"]

COORDINATOR_GROUP, COORDINATOR_TRANSACTION = 0, 1


async def find_coordinator(
    groups: GroupCoordinator,
    transactions: TransactionCoordinator | None,
    key_type: int,
    key: str,
    listener_name: str,
) -> tuple[int, BrokerEndpoint] | KafkaError:
    """The coordinator of ``key`` (its node id and ``listener_name`` endpoint), or why not
    (each coordinator creates its topic on first use)."""
    finder: GroupCoordinator | TransactionCoordinator | None = None
    if key_type == COORDINATOR_GROUP:
        finder = groups
    elif key_type == COORDINATOR_TRANSACTION:
        finder = transactions
    if finder is None:
        return InvalidRequestError(
            f"coordinator type {key_type} is not served (0 = GROUP, 1 = TRANSACTION)"
        )
    found = await finder.find_coordinator(key)
    if isinstance(found, KafkaError):
        return found
    broker = finder.image.brokers.get(found)
    endpoint = broker.endpoint(listener_name) if broker is not None else None
    if endpoint is None:
        return InvalidRequestError(f"broker {found} has no {listener_name} listener")
    return found, endpoint
