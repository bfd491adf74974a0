"""Producer ids over gRPC in one process: the broker's channel asks the active controller for
a block (retrying NOT_CONTROLLER at the next one), and a combined-mode server answers
InitProducerId on its broker listener with distinct ids across blocks."""

from __future__ import annotations

import uuid
from pathlib import Path

import grpc
import pytest

from rillet.controller import ProducerIdsBlock
from rillet.errors import NotControllerError, StaleBrokerEpochError
from rillet.protocol.controller import allocate_producer_ids_response
from rillet.protocol.gen.v1 import controller_pb2, controller_pb2_grpc, transaction_pb2_grpc
from rillet.protocol.transaction import init_producer_id_request, read_init_producer_id_response
from rillet.server.grpc.controller_channel import GrpcControllerChannel
from rillet.server.process import RilletServer
from tests.unit.server.test_process import local_config


class _Controller(controller_pb2_grpc.ControllerServiceServicer):
    def __init__(self, answer: ProducerIdsBlock | Exception) -> None:
        self.answer = answer
        self.asked: list[tuple[int, int]] = []

    async def AllocateProducerIds(
        self, request: controller_pb2.AllocateProducerIdsRequest, context: grpc.aio.ServicerContext
    ) -> controller_pb2.AllocateProducerIdsResponse:
        self.asked.append((request.broker_id, request.broker_epoch))
        return allocate_producer_ids_response(self.answer)


async def _serve(servicer: _Controller) -> tuple[grpc.aio.Server, str]:
    server = grpc.aio.server()
    controller_pb2_grpc.add_ControllerServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"


async def test_the_channel_asks_the_active_controller_and_follows_it() -> None:
    old = _Controller(NotControllerError("not me"))
    new = _Controller(ProducerIdsBlock(4, 3000, 1000))
    (s1, a1), (s2, a2) = await _serve(old), await _serve(new)
    leader = {"id": 1}

    def current() -> int:
        # The quorum learns of the new leader once the old one refused.
        if old.asked:
            leader["id"] = 2
        return leader["id"]

    channel = GrpcControllerChannel({1: a1, 2: a2}, "c", current, lambda: 0, retry_backoff_ms=1)
    try:
        assert await channel.allocate_producer_ids(4, 9) == ProducerIdsBlock(4, 3000, 1000)
        assert old.asked == [(4, 9)] and new.asked == [(4, 9)]
        new.answer = StaleBrokerEpochError("Expected broker epoch 10")
        with pytest.raises(StaleBrokerEpochError, match="Expected broker epoch 10"):
            await channel.allocate_producer_ids(4, 9)
    finally:
        await channel.close()
        await s1.stop(None)
        await s2.stop(None)


async def test_a_broker_answers_init_producer_id_with_distinct_ids(tmp_path: Path) -> None:
    server = RilletServer(local_config(tmp_path), str(uuid.uuid4()))
    await server.start()
    try:
        await server.wait_until_ready()
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.bound['PLAINTEXT']}") as ch:
            stub = transaction_pb2_grpc.TransactionServiceStub(ch)
            request = init_producer_id_request()
            answers = [
                read_init_producer_id_response(await stub.InitProducerId(request))
                for _ in range(1100)
            ]
        assert answers == [(i, 0) for i in range(1100)]  # over two blocks, in order
        image = server.controller.controller.committed
        assert image.producer_ids.next_producer_id == 2000
    finally:
        await server.stop()
