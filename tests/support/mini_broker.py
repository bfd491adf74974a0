"""An in-process broker for client tests: the real server (the process's composition root,
:class:`~rillet.server.process.RilletServer`) in combined mode on free loopback ports, on an
asyncio loop in a background thread, with topics created through its controller."""

from __future__ import annotations

import asyncio
import threading
import uuid
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from rillet.config import BrokerConfig
from rillet.controller import CreatableTopic
from rillet.server.process import RilletServer


class MiniBroker:
    def __init__(
        self, data_dir: Path, topics: dict[str, int], overrides: dict[str, str] | None = None
    ) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        config = BrokerConfig.embedded_default(
            data_dir,
            {
                "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
                "advertised.listeners": "PLAINTEXT://127.0.0.1:0",
                "log.dirs": str(data_dir),
                **(overrides or {}),
            },
        )
        self.server = RilletServer(config, str(uuid.uuid4()))
        self._call(self._start(topics))

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.server.bound['PLAINTEXT']}"

    def _call(self, coro: Any) -> Any:
        fut: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return fut.result(30)

    async def _start(self, topics: dict[str, int]) -> None:
        await self.server.start()
        await self.server.wait_until_ready()
        if topics:
            await self.server.controller.create_topics(
                [CreatableTopic(name, n) for name, n in topics.items()]
            )

    def log(self, topic: str, partition: int) -> Any:
        assert self.server.log_manager is not None
        return self.server.log_manager.get_log(topic, partition)

    def close(self) -> None:
        self._call(self.server.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()
