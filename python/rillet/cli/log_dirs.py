"""``rillet log-dirs``: Kafka's ``kafka-log-dirs.sh --describe``. Asks every broker (or those
of ``--broker-list``) for its log directories and the replicas in them (of ``--topic-list``
only, when given), and prints Kafka's two progress lines and its JSON."""

from __future__ import annotations

import argparse
import json
import sys

from rillet.broker.apis import LogDirDescription
from rillet.cli.common import add_admin_config, add_bootstrap, admin_client
from rillet.errors import InvalidRequestError

HELP = "Describe the log directories of brokers (kafka-log-dirs.sh)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bootstrap(p)
    add_admin_config(p)
    p.add_argument("--describe", action="store_true", required=True, help="describe log dirs")
    p.add_argument(
        "--broker-list",
        metavar="1,2,3",
        help="the brokers to ask (default: every broker in the cluster)",
    )
    p.add_argument(
        "--topic-list",
        metavar="t1,t2",
        help="the topics whose replicas to list (default: every topic)",
    )


def _ids(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InvalidRequestError(f"--broker-list takes broker ids, not {text!r}") from None


def run(args: argparse.Namespace) -> int:
    topics = [t for t in (args.topic_list or "").split(",") if t] or None
    with admin_client(args.bootstrap_server, args.admin_config) as admin:
        existing = sorted(b["node_id"] for b in admin.describe_cluster()["brokers"])
        wanted = _ids(args.broker_list) if args.broker_list else existing
        missing = [b for b in wanted if b not in existing]
        if missing:
            print(
                "ERROR: The given brokers do not exist from --broker-list: "
                f"{','.join(map(str, missing))}. Current existent brokers: "
                f"{','.join(map(str, existing))}",
                file=sys.stderr,
            )
            return 1
        print("Querying brokers for log directories information")
        dirs = admin.describe_log_dirs(wanted)
    print(f"Received log directory information from brokers {','.join(map(str, sorted(dirs)))}")
    print(json.dumps(to_json(dirs, topics), separators=(",", ":")))
    return 0


def to_json(
    dirs: dict[int, dict[str, LogDirDescription]], topics: list[str] | None = None
) -> dict[str, object]:
    """Kafka's structure: version 1, then per broker its log dirs with error and replicas
    (of ``topics`` only, when given, as Kafka's tool filters them)."""
    return {
        "version": 1,
        "brokers": [
            {
                "broker": broker,
                "logDirs": [
                    {
                        "logDir": d.path,
                        "error": None if d.error is None else type(d.error).__name__,
                        "partitions": [
                            {
                                "partition": f"{r.topic}-{r.partition}",
                                "size": r.size,
                                "offsetLag": r.offset_lag,
                                "isFuture": r.is_future,
                            }
                            for r in d.replicas
                            if topics is None or r.topic in topics
                        ],
                    }
                    for d in by_path.values()
                ],
            }
            for broker, by_path in sorted(dirs.items())
        ],
    }
