"""The broker's gRPC channel to the active controller: a call in flight to a controller that
stops being the active one is abandoned when the quorum names another, instead of waiting out
its request timeout (a paused controller would otherwise hold a broker's heartbeats until a
new controller fences that live broker)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest

from rillet.controller.requests import BrokerHeartbeatRequest
from rillet.errors import NotControllerError
from rillet.protocol.gen.v1 import quorum_pb2, quorum_pb2_grpc
from rillet.server.grpc.controller_channel import GrpcControllerChannel

REQUEST = BrokerHeartbeatRequest(broker_id=4, broker_epoch=7, current_metadata_offset=10)


class _Controller(quorum_pb2_grpc.QuorumServiceServicer):
    """Answers heartbeats after ``delay_s`` (a paused controller when that is long)."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.heartbeats = 0

    async def BrokerHeartbeat(
        self, request: quorum_pb2.BrokerHeartbeatRequest, context: grpc.aio.ServicerContext
    ) -> quorum_pb2.BrokerHeartbeatResponse:
        self.heartbeats += 1
        await asyncio.sleep(self.delay_s)
        return quorum_pb2.BrokerHeartbeatResponse(is_caught_up=True, is_fenced=False)


async def _serve(servicer: _Controller) -> tuple[grpc.aio.Server, str]:
    server = grpc.aio.server()
    quorum_pb2_grpc.add_QuorumServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"


@pytest.fixture
async def controllers() -> AsyncIterator[dict[int, tuple[_Controller, str]]]:
    paused, live = _Controller(delay_s=3600), _Controller(delay_s=0)
    (s1, a1), (s2, a2) = await _serve(paused), await _serve(live)
    try:
        yield {1: (paused, a1), 2: (live, a2)}
    finally:
        await s1.stop(None)
        await s2.stop(None)


async def test_a_heartbeat_to_a_controller_that_lost_leadership_fails_at_once(
    controllers: dict[int, tuple[_Controller, str]],
) -> None:
    leader = {"id": 1}
    channel = GrpcControllerChannel(
        {i: addr for i, (_, addr) in controllers.items()},
        "cluster",
        lambda: leader["id"],
        lambda: 0,
        request_timeout_ms=3_600_000,
    )
    try:
        call = asyncio.create_task(channel.broker_heartbeat(REQUEST))
        while controllers[1][0].heartbeats == 0:
            await asyncio.sleep(0.01)
        # The same leader re-announced (an epoch bump it kept) does not abandon the call.
        channel.leader_changed()
        await asyncio.sleep(0.05)
        assert not call.done()
        leader["id"] = 2
        channel.leader_changed()
        with pytest.raises(NotControllerError, match="moved from 1 to 2"):
            await asyncio.wait_for(call, timeout=60)
        # The lifecycle's next heartbeat reaches the new controller.
        result = await channel.broker_heartbeat(REQUEST)
        assert result.is_caught_up and not result.is_fenced
        assert controllers[2][0].heartbeats == 1
    finally:
        await channel.close()
