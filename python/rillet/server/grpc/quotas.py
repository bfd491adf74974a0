"""Client quotas on gRPC listeners: who a call counts against, and how it is held back.

A call counts against its client id (the ``client-id`` metadata the Rillet client sends)
and its user: the principal the listener's gate authenticated it as (a SASL session or a
client certificate; :func:`~rillet.server.grpc.authorization.call_principal`), else
``ANONYMOUS``.
A call over its quota is answered at once with ``throttle_time_ms``, and the client's next
calls wait that long before they are served: Kafka mutes a throttled client's connection,
and a gRPC channel, which multiplexes calls, is held back per client this way instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import grpc

from rillet.server.grpc.authorization import call_principal

__all__ = ["caller", "hold"]


def caller(context: grpc.aio.ServicerContext[Any, Any]) -> tuple[str, str]:
    """The (user, client id) a call's bytes are recorded for."""
    client_id = ""
    for key, value in context.invocation_metadata() or ():
        if key == "client-id":
            client_id = str(value)
    return call_principal().name, client_id


async def hold(wait_s: Callable[[], float]) -> None:
    """Wait out earlier calls' throttle time before serving this one: ``wait_s`` says how
    long is left, asked again after each wait (calls held together are let go together,
    and the first of them may throttle the rest again)."""
    while (left := wait_s()) > 0:
        await asyncio.sleep(left)
