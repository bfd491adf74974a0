"""The consumer's line to its group coordinator (Kafka's CoordinatorRequestManager), and a
transactional producer's to its transaction coordinator (``key_type`` 1): finds
the coordinator with FindCoordinator through any broker, sends every group request to it, and
forgets it when it answers NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE or cannot be reached,
so that the next request finds it again. Thread safe: the heartbeat thread and the
application's thread (commits) share it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import grpc

from rillet.client.cluster import ClusterMetadata
from rillet.client.security import refusal
from rillet.errors import (
    CoordinatorNotAvailableError,
    KafkaError,
    NotCoordinatorError,
    error_for_code,
)
from rillet.protocol.gen.v1 import group_pb2, group_pb2_grpc

__all__ = ["COORDINATOR_GROUP", "GroupClient"]

COORDINATOR_GROUP = 0

R = TypeVar("R")


class GroupClient:
    def __init__(
        self,
        cluster: ClusterMetadata,
        group_id: str,
        request_timeout_ms: int,
        client_id: str = "",
        key_type: int = COORDINATOR_GROUP,
    ) -> None:
        self.cluster = cluster
        # The group id, or a transactional id with key_type 1 (TRANSACTION).
        self.group_id = group_id
        self.key_type = key_type
        # Sent with every request: the coordinator shows it as the member's CLIENT-ID.
        self.metadata = (("client-id", client_id),)
        self.timeout_s = request_timeout_ms / 1000
        self._lock = threading.Lock()
        self._coordinator: tuple[int, str] | None = None

    @property
    def coordinator_id(self) -> int | None:
        c = self._coordinator
        return None if c is None else c[0]

    def forget_coordinator(self) -> None:
        with self._lock:
            self._coordinator = None

    def find_coordinator(self) -> tuple[int, str]:
        """(node id, address) of the group's coordinator, asked of the known brokers in turn
        (COORDINATOR_NOT_AVAILABLE while __consumer_offsets is being created)."""
        with self._lock:
            if self._coordinator is not None:
                return self._coordinator
        request = group_pb2.FindCoordinatorRequest(
            key_type=self.key_type, coordinator_keys=[self.group_id]
        )
        last: Exception | None = None
        for address in [*self.cluster.brokers().values(), *self.cluster.bootstrap]:
            stub = group_pb2_grpc.GroupServiceStub(self.cluster.channel(address))
            try:
                response = stub.FindCoordinator(request, timeout=self.timeout_s)
            except grpc.RpcError as e:
                refused = refusal(e)
                if refused is not None:
                    raise refused from None
                last = e
                continue
            (found,) = response.coordinators
            if found.error_code:
                raise error_for_code(found.error_code)(found.error_message)
            coordinator = (found.node_id, f"{found.host}:{found.port}")
            with self._lock:
                self._coordinator = coordinator
            return coordinator
        raise CoordinatorNotAvailableError(
            f"no broker of {self.cluster.bootstrap} answered FindCoordinator: {last}"
        )

    def call(
        self,
        send: Callable[[group_pb2_grpc.GroupServiceStub, float, Any], R],
        error_of: Callable[[R], KafkaError | None] | None = None,
    ) -> R:
        """One request to the coordinator, made by ``send(stub, timeout, metadata)``;
        ``error_of`` picks the response's top-level error, whose coordinator errors make the
        coordinator be found again next time. Transport failures raise
        CoordinatorNotAvailableError and forget the coordinator too."""
        _, address = self.find_coordinator()
        stub = group_pb2_grpc.GroupServiceStub(self.cluster.channel(address))
        try:
            response = send(stub, self.timeout_s, self.metadata)
        except grpc.RpcError as e:
            refused = refusal(e)
            if refused is not None:
                raise refused from None
            self.forget_coordinator()
            code = e.code() if isinstance(e, grpc.Call) else None
            raise CoordinatorNotAvailableError(
                f"the group coordinator at {address} did not answer ({code.name if code else e})"
            ) from None
        err = error_of(response) if error_of is not None else None
        if isinstance(err, NotCoordinatorError | CoordinatorNotAvailableError):
            self.forget_coordinator()
        return response


def top_level_error(response: Any) -> KafkaError | None:
    """The ``error_code`` / ``error_message`` of a response, as a KafkaError (None if NONE)."""
    code = response.error_code
    return error_for_code(code)(response.error_message) if code else None
