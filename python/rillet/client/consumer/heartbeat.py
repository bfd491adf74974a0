"""The consumer's background heartbeat thread for a KIP-848 group (Kafka's
HeartbeatRequestManager): sends :class:`~rillet.client.consumer.membership.ConsumerMembership`'s
heartbeats when they are due, whether or not the application is polling, and wakes the
application's ``poll()`` when an answer brings something to reconcile.

The membership is shared with the consumer's thread under ``lock``; the thread never runs
application code (the rebalance listener runs in ``poll()``)."""

from __future__ import annotations

import threading
import time
from typing import Any

from rillet.client.consumer.group_client import GroupClient, top_level_error
from rillet.client.consumer.membership import ConsumerMembership, HeartbeatResponse
from rillet.client.consumer.metrics import ConsumerCoordinatorMetrics
from rillet.errors import KafkaError
from rillet.protocol.gen.v1 import group_pb2, group_pb2_grpc
from rillet.protocol.group import heartbeat_request_to_pb, heartbeat_response_from_pb

__all__ = ["HeartbeatThread", "monotonic_ms"]


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class HeartbeatThread(threading.Thread):
    def __init__(
        self,
        membership: ConsumerMembership,
        client: GroupClient,
        lock: threading.Condition,
        retry_backoff_ms: int,
        on_change: threading.Event,
        sensors: ConsumerCoordinatorMetrics | None = None,
    ) -> None:
        super().__init__(name=f"rillet-heartbeat-{membership.group_id}", daemon=True)
        self.membership = membership
        self.client = client
        self.lock = lock
        self.retry_backoff_ms = retry_backoff_ms
        self.on_change = on_change
        self.sensors = sensors
        self._stopping = False

    def stop(self, timeout_s: float) -> None:
        with self.lock:
            self._stopping = True
            self.lock.notify_all()
        self.join(timeout_s)

    def run(self) -> None:
        m = self.membership
        while True:
            with self.lock:
                while not self._stopping and not m.heartbeat_due(monotonic_ms()):
                    due = m.next_heartbeat_ms()
                    wait = None if due is None else max(due - monotonic_ms(), 1) / 1000
                    self.lock.wait(wait)
                if self._stopping and not m.heartbeat_due(monotonic_ms()):
                    return
                request = heartbeat_request_to_pb(m.heartbeat_request())
            response: HeartbeatResponse | None = None
            sensors = self.sensors
            sent_ms = sensors.heartbeat_sent() if sensors is not None else 0.0
            try:
                response = self._send(request)
            except KafkaError as e:
                # A refusal (GROUP_AUTHORIZATION_FAILED, ...) is the group's answer: fatal, as
                # an error in a response is; an unreachable coordinator is retried.
                response = None if e.retriable else HeartbeatResponse(e)
            if response is not None and sensors is not None:
                sensors.record_latency(sensors.heartbeat_latency, sent_ms)
            with self.lock:
                now = monotonic_ms()
                if response is None:
                    m.on_heartbeat_failure(now, self.retry_backoff_ms)
                else:
                    m.on_heartbeat_response(response, now, self.retry_backoff_ms)
                self.lock.notify_all()
            self.on_change.set()

    def _send(self, request: group_pb2.ConsumerGroupHeartbeatRequest) -> HeartbeatResponse:
        def send(stub: group_pb2_grpc.GroupServiceStub, timeout_s: float, metadata: Any) -> Any:
            return stub.ConsumerGroupHeartbeat(request, timeout=timeout_s, metadata=metadata)

        pb = self.client.call(send, top_level_error)
        return heartbeat_response_from_pb(pb)

    def poke(self) -> None:
        """Something to say (an acknowledgement, a new subscription, leaving): send now."""
        with self.lock:
            self.lock.notify_all()
