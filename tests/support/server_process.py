"""Start real ``rillet server start`` processes for integration tests."""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import grpc

from rillet import Record, decode_batches
from rillet.protocol import admin_pb2, admin_pb2_grpc, common_pb2, fetch_pb2, fetch_pb2_grpc

# With a KAFKA listener beside PLAINTEXT: PLAINTEXT serves gRPC (and replication).
KAFKA_LISTENER = {
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,KAFKA:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "grpc.listener.names": "PLAINTEXT",
}


# Ports for test servers come from a block of ports that this process alone hands out,
# below the kernel's ephemeral range. The kernel's own choice (binding port 0) is not safe
# when several test processes run at once (pytest-xdist workers, or a developer's run beside
# CI): the port is free only until the socket that found it closes, so two workers can be
# handed the same one, and a port in the ephemeral range can be taken as the local port of
# any outgoing connection before the server binds it, or while a killed node restarts.
# Each process claims its block with an exclusive lock on a file (released when it exits),
# so no two processes, in this run or another, hand out the same ports.
PORT_BLOCK = 1000
_LOWEST_PORT = 10_000
_LOCK_DIR = Path(tempfile.gettempdir()) / "rillet-test-ports"


class _PortBlock:
    def __init__(self) -> None:
        self.first = 0
        self.next = 0
        self.lock: IO[bytes] | None = None
        self.pid = 0

    def claim(self) -> bool:
        """Lock a block of its own for this process; False when there is none to take."""
        try:
            with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
                ephemeral = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            ephemeral = 32768
        blocks = max(0, (ephemeral - _LOWEST_PORT) // PORT_BLOCK)
        worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
        start = int(worker) if worker.isdigit() else 0
        _LOCK_DIR.mkdir(exist_ok=True)
        for i in range(blocks):
            block = (start + i) % blocks
            lock = open(_LOCK_DIR / f"block-{block}.lock", "wb")  # noqa: SIM115 - held open
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                lock.close()
                continue
            self.lock, self.pid = lock, os.getpid()
            self.first = self.next = _LOWEST_PORT + block * PORT_BLOCK
            return True
        return False

    def take(self) -> int | None:
        """The block's next port that nothing is bound to, or None without a block."""
        if self.pid != os.getpid() and not self.claim():  # a fork holds no lock of its own
            return None
        for _ in range(PORT_BLOCK):
            port = self.next
            self.next = self.first + (self.next + 1 - self.first) % PORT_BLOCK
            if _bindable(port):
                return port
        return None


def _bindable(port: int) -> bool:
    """Nothing holds ``port`` on the loopback address (no SO_REUSEADDR: a port with
    connections still in TIME_WAIT is skipped too)."""
    try:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))
    except OSError:
        return False
    return True


_ports = _PortBlock()


def free_port() -> int:
    """A loopback port for a test server that no other test process is handed (see
    :data:`PORT_BLOCK`); a port the kernel picks when no block is left."""
    port = _ports.take()
    if port is not None:
        return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """The embedded default on free ports, with its data under ``data_dir``: gRPC on
    ``port`` (listener PLAINTEXT); with ``kafka``, Kafka's protocol on ``kport`` too
    (listener KAFKA). ``overrides`` replace any config key."""

    def __init__(
        self,
        data_dir: Path,
        *,
        port: int | None = None,
        cport: int | None = None,
        kafka: bool = False,
        overrides: dict[str, str] | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.overrides = overrides or {}
        self.port = port or free_port()
        self.cport = cport or free_port()
        self.kport = free_port() if kafka else None
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir.parent / f"{data_dir.name}-server.log"

    @property
    def bootstrap(self) -> str:
        return f"localhost:{self.port}"

    @property
    def kafka_bootstrap(self) -> str:
        assert self.kport is not None, "started without a Kafka listener"
        return f"localhost:{self.kport}"

    def argv(self) -> list[str]:
        listeners = [f"PLAINTEXT://localhost:{self.port}"]
        if self.kport is not None:
            listeners.append(f"KAFKA://localhost:{self.kport}")
        overrides = {
            "listeners": ",".join([*listeners, f"CONTROLLER://localhost:{self.cport}"]),
            "advertised.listeners": ",".join(listeners),
            "controller.quorum.voters": f"1@localhost:{self.cport}",
        }
        if self.kport is not None:
            overrides.update(KAFKA_LISTENER)
        overrides.update(self.overrides)
        return [
            sys.executable,
            "-m",
            "rillet.cli.main",
            "server",
            "start",
            "--data-dir",
            str(self.data_dir),
            *[arg for k, v in overrides.items() for arg in ("--override", f"{k}={v}")],
        ]

    def start(self, timeout: float = 60) -> None:
        self.wait_started(self.launch(), timeout)

    def launch(self) -> int:
        """Start the process without waiting; returns the log's length before it."""
        already = len(self.output())
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child writes to it
        self.proc = subprocess.Popen(self.argv(), stdout=log, stderr=subprocess.STDOUT)
        log.close()
        return already

    def wait_started(self, since: int, timeout: float = 60) -> None:
        """Wait for the start-up line the server prints once it is ready (after ``since``
        characters of its log)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"server exited {self.proc.returncode}:\n{self.output()[since:]}"
                )
            if "started (cluster id" in self.output()[since:]:
                return
            time.sleep(0.05)
        raise RuntimeError(f"server did not start:\n{self.output()[since:]}")

    def output(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(60)

    def create_topic(self, name: str, partitions: int = 1, **configs: str) -> None:
        with grpc.insecure_channel(self.bootstrap) as ch:
            r = admin_pb2_grpc.AdminServiceStub(ch).CreateTopics(
                admin_pb2.CreateTopicsRequest(
                    topics=[
                        admin_pb2.CreateTopicsRequest.Topic(
                            name=name, num_partitions=partitions, configs=configs
                        )
                    ]
                ),
                timeout=30,
            )
        if r.topics[0].error_code:
            raise RuntimeError(r.topics[0].error_message)


@contextmanager
def serving(data_dir: Path, **kwargs: Any) -> Iterator[ServerProcess]:
    """A started :class:`ServerProcess` (``kwargs`` as it takes them), stopped on exit,
    whose log must hold no traceback."""
    s = ServerProcess(data_dir, **kwargs)
    s.start()
    try:
        yield s
    finally:
        s.stop()
    assert "Traceback" not in s.output(), s.output()[-5000:]


def fetch_all(bootstrap: str, topic: str, partition: int) -> list[Record]:
    """Every record of one partition, read with plain Fetch requests from offset 0 and
    decoded from the batch bytes (independent of the Python Consumer)."""
    out: list[Record] = []
    with grpc.insecure_channel(bootstrap) as ch:
        stub = fetch_pb2_grpc.FetchServiceStub(ch)
        while True:
            offset = out[-1].offset + 1 if out else 0
            request = fetch_pb2.FetchRequest()
            request.topics.add(name=topic).partitions.add(partition=partition, fetch_offset=offset)
            p = stub.Fetch(request, timeout=30).topics[0].partitions[0]
            assert p.error_code == common_pb2.NONE, p.error_message
            records = [
                r for b in decode_batches(p.record_batches) for r in b.records if r.offset >= offset
            ]
            if not records:
                return out
            out += records


def env_without_pythonwarnings() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
