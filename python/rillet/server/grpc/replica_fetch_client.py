""":class:`~rillet.broker.replica_fetcher.ReplicaFetchClient` over gRPC: a follower's
connection to one source broker's inter-broker listener. The response's bytes are read in
place (``decode_fetch_response``); the batches reach the follower's log without a copy."""

from __future__ import annotations

import grpc

from rillet.broker.replica_fetcher import LeaderFetchResult, ReplicaFetchRequest
from rillet.errors import KafkaError, NetworkError
from rillet.protocol.fetch import replica_fetch_request_to_pb, replica_fetch_results_from_bytes
from rillet.protocol.gen.v1 import fetch_pb2
from rillet.security.tls import ClientTls, grpc_channel
from rillet.types import TopicPartition

__all__ = ["GrpcReplicaFetchClient"]


def _raw(data: bytes) -> bytes:
    return data


class GrpcReplicaFetchClient:
    def __init__(self, source_broker: int, address: str, tls: ClientTls | None = None) -> None:
        self.source_broker = source_broker
        self.address = address
        self._channel = grpc_channel(address, tls)
        self._fetch = self._channel.unary_unary(
            "/rillet.v1.FetchService/Fetch",
            request_serializer=fetch_pb2.FetchRequest.SerializeToString,
            response_deserializer=_raw,
        )

    async def fetch(
        self, request: ReplicaFetchRequest, timeout_ms: int
    ) -> dict[TopicPartition, LeaderFetchResult]:
        try:
            data = await self._fetch(
                replica_fetch_request_to_pb(request), timeout=timeout_ms / 1000
            )
        except grpc.RpcError as e:
            code = e.code() if isinstance(e, grpc.aio.AioRpcError) else None
            raise NetworkError(
                f"broker {self.source_broker} at {self.address} did not answer a fetch"
                f" ({code.name if code else e})"
            ) from None
        results = replica_fetch_results_from_bytes(data)
        if isinstance(results, KafkaError):
            raise results
        return results

    async def close(self) -> None:
        await self._channel.close()
