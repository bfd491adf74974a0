"""``rillet server start [config/server.properties] [--daemon] [--override k=v]`` and
``rillet server stop`` (``kafka-server-start.sh`` / ``kafka-server-stop.sh``), and
``rillet server status`` (:mod:`rillet.cli.server_status`: a node's health from its metrics).

With no config file the embedded default runs: one node in combined mode (broker and
controller), Kafka's protocol on localhost:9092, Rillet's gRPC API on :9094, the controller
on :9093, data in a per-user directory, formatted on first start. With a config file the
log dirs must already be formatted (``rillet storage format``).
SIGTERM or Ctrl-C shuts down cleanly; ``kill -9`` is recovered from at the next start.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from rillet.cli import server_status
from rillet.config import BrokerConfig, default_data_dir, parse_properties
from rillet.errors import InvalidConfigurationError, KafkaError
from rillet.server.process import RilletServer
from rillet.storage.meta_properties import check_log_dirs, ensure_formatted

HELP = (
    "Start or stop a Rillet server (kafka-server-start.sh / kafka-server-stop.sh), or show "
    "a node's health"
)
PID_FILE = "rillet-server.pid"


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    start = sub.add_parser("start", help="start a server (the embedded default without CONFIG)")
    start.add_argument("config", nargs="?", help="server.properties (optional)")
    start.add_argument("--daemon", action="store_true", help="run in the background")
    start.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key (repeatable)",
    )
    start.add_argument(
        "--data-dir", help="data directory of the embedded default (default: per-user dir)"
    )
    stop = sub.add_parser("stop", help="stop running servers (SIGTERM, then wait)")
    stop.add_argument("config", nargs="?", help="server.properties of the server to stop")
    stop.add_argument("--data-dir", help="data directory of an embedded server")
    status = sub.add_parser(
        "status",
        help="one screen of a node's health from its metrics; exit status 1 when unhealthy",
    )
    server_status.add_arguments(status)


def _overrides(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InvalidConfigurationError(f"--override needs KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def _load(args: argparse.Namespace) -> tuple[BrokerConfig, bool]:
    overrides = _overrides(getattr(args, "override", []) or [])
    if args.config:
        text = Path(args.config).read_text()
        props = {**parse_properties(text), **overrides}
        return BrokerConfig(props, source_path=Path(args.config)), False
    data_dir = Path(args.data_dir) if args.data_dir else default_data_dir()
    return BrokerConfig.embedded_default(data_dir, overrides), True


def _pid_path(config: BrokerConfig) -> Path:
    return Path(config.metadata_log_dir) / PID_FILE


def run(args: argparse.Namespace) -> int:
    if args.action == "status":
        return server_status.run(args)
    try:
        config, embedded = _load(args)
    except FileNotFoundError as e:
        print(f"Error: cannot read {e.filename}", file=sys.stderr)
        return 1
    if args.action == "stop":
        return _stop(config)
    if args.daemon:
        return _daemonize(args, config)
    logging.basicConfig(
        level=logging.INFO, format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)"
    )
    checked = ensure_formatted(config) if embedded else check_log_dirs(config)
    return asyncio.run(_serve(config, checked.cluster_id, embedded))


async def _serve(config: BrokerConfig, cluster_id: str, embedded: bool) -> int:
    server = RilletServer(config, cluster_id)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    pid_path = _pid_path(config)
    try:
        await server.start()
        if config.is_broker:
            await server.wait_until_ready()
        pid_path.write_text(f"{os.getpid()}\n")
        kafka = set(config.kafka_listeners)
        for ep in config.listeners:
            port = server.bound.get(ep.listener_name, ep.port)
            if ep.listener_name in config.controller_listener_names:
                api = "the controller quorum, gRPC"
            else:
                api = "Kafka's protocol" if ep in kafka else "the client API, gRPC"
            if ep.security_protocol == "SSL":
                api += ", TLS"
            print(
                f"Listening on {ep.listener_name}://{ep.host or '0.0.0.0'}:{port} ({api})",
                flush=True,
            )
        print(f"Data in {', '.join(str(d) for d in config.all_log_dirs)}", flush=True)
        print(
            f"[RilletServer id={config.node_id}] started (cluster id {cluster_id}"
            f"{', embedded default' if embedded else ''})",
            flush=True,
        )
        await stop.wait()
        print(f"[RilletServer id={config.node_id}] shutting down", flush=True)
    except KafkaError as e:
        print(f"Error: {e}", file=sys.stderr, flush=True)
        return 1
    finally:
        await server.stop()
        with contextlib.suppress(FileNotFoundError):
            pid_path.unlink()
    print(f"[RilletServer id={config.node_id}] shut down completed", flush=True)
    return 0


def _daemonize(args: argparse.Namespace, config: BrokerConfig) -> int:
    argv = [sys.executable, "-m", "rillet.cli.main", "server", "start"]
    if args.config:
        argv.append(args.config)
    if args.data_dir:
        argv += ["--data-dir", args.data_dir]
    for o in args.override:
        argv += ["--override", o]
    log_dir = Path(config.metadata_log_dir).parent
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / "server.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            print(
                f"Error: the server exited with {proc.returncode}; see {log_path}", file=sys.stderr
            )
            return 1
        if _pid_path(config).exists():
            print(f"Rillet server started in the background (pid {proc.pid}), log in {log_path}")
            return 0
        time.sleep(0.1)
    print(f"Error: the server did not start within 60 s; see {log_path}", file=sys.stderr)
    return 1


def _stop(config: BrokerConfig) -> int:
    path = _pid_path(config)
    try:
        pid = int(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        print("No rillet server to stop", file=sys.stderr)
        return 1
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        path.unlink(missing_ok=True)
        print("No rillet server to stop", file=sys.stderr)
        return 1
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            print(f"Stopped rillet server (pid {pid})")
            return 0
        time.sleep(0.1)
    print(f"Error: rillet server (pid {pid}) did not stop within 60 s", file=sys.stderr)
    return 1
