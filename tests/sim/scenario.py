"""A tiny interpreter for Raft scenario scripts (``testdata/*.txt``), in the style of etcd's
datadriven tests: each block is a command, a ``----`` line, and the expected output up to the
next blank line. Lines starting with ``#`` outside blocks are comments.

The world is hand-driven: no message moves and no clock advances unless a command says so.
Each node has its own clock (Raft needs no synchrony), advanced by ``tick`` and ``timeout``.

Commands (node lists are comma-separated ids)::

    cluster voters=1,2,3 [observers=4] [pre_vote=true] [check_quorum=true]
    timeout N           advance N's clock to its next deadline and tick
    tick N[,M] MS       advance the clocks by MS and tick
    stabilize           deliver messages (and the messages they cause) until none is left
    deliver [A->B]      deliver the messages pending now (optionally only A to B), once
    drop [A->B]         drop pending messages (optionally only A to B)
    propose N P [P...]  propose payloads on N
    resign N            graceful shutdown of leader N (EndQuorumEpoch)
    partition A,B | C   cut every link between the two sides (messages are dropped on delivery)
    heal                restore every link
    crash N / restart N lose N's unflushed state / start it again from its stores
    status              one line per node: role, high watermark, log

What a command caused is printed as it happens: delivered messages (``A->B Message(...)``),
role changes (``N: old -> new``), truncations and applied (committed) entries.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from simulator import describe_message

from rillet.raft import (
    Entry,
    MemoryQuorumStateStore,
    MemoryRaftLog,
    Message,
    RaftConfig,
    RaftNode,
)


def format_entries(entries: list[Entry]) -> str:
    return " ".join(
        f"{e.offset}@{e.epoch}:{'*' if e.control else e.payload.decode()}" for e in entries
    )


def _ids(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


@dataclass
class _Node:
    node_id: int
    log: MemoryRaftLog = field(default_factory=MemoryRaftLog)
    store: MemoryQuorumStateStore = field(default_factory=MemoryQuorumStateStore)
    raft: RaftNode | None = None
    clock: int = 0


class World:
    """The nodes, their pending messages and the links between them."""

    def __init__(self, voters: list[int], observers: list[int], config: RaftConfig) -> None:
        self.voters = voters
        self.config = config
        self.nodes = {i: _Node(i) for i in [*voters, *observers]}
        self.pending: list[Message] = []
        self.blocked: set[tuple[int, int]] = set()
        self.output: list[str] = []
        for node in self.nodes.values():
            self._boot(node)

    def _boot(self, node: _Node) -> None:
        node.raft = RaftNode(
            node_id=node.node_id,
            voters=self.voters,
            log=node.log,
            store=node.store,
            rng=random.Random(node.node_id),
            now_ms=node.clock,
            config=self.config,
        )
        self._input(node, lambda raft: raft.tick(node.clock), quiet_start=True)

    def _raft(self, node_id: int) -> RaftNode:
        raft = self.nodes[node_id].raft
        if raft is None:
            raise ValueError(f"node {node_id} is down")
        return raft

    def _input(self, node: _Node, action: object, *, quiet_start: bool = False) -> None:
        raft = node.raft
        assert raft is not None and callable(action)
        before, end_before = repr(raft.state), node.log.end_offset
        action(raft)
        out = raft.poll()
        if out.quorum_state is not None:
            node.store.persist(*out.quorum_state)
        if out.flush_log:
            node.log.flush()
        after = repr(raft.state)
        if after != before and not quiet_start:
            self.output.append(f"{node.node_id}: {before} -> {after}")
        if node.log.end_offset < end_before:
            self.output.append(f"{node.node_id}: truncated log to {node.log.end_offset}")
        if out.committed:
            self.output.append(f"{node.node_id}: applied {format_entries(list(out.committed))}")
        self.pending.extend(out.messages)

    # -- commands --------------------------------------------------------------------------

    def timeout(self, node_id: int) -> None:
        node = self.nodes[node_id]
        deadline = self._raft(node_id).next_deadline_ms()
        if deadline is None:
            raise ValueError(f"node {node_id} has no timer")
        node.clock = max(node.clock, deadline)
        self._input(node, lambda raft: raft.tick(node.clock))

    def tick(self, node_id: int, ms: int) -> None:
        node = self.nodes[node_id]
        node.clock += ms
        self._input(node, lambda raft: raft.tick(node.clock))

    def deliver(self, link: tuple[int, int] | None = None) -> None:
        batch = [m for m in self.pending if link in (None, (m.source_id, m.destination_id))]
        self.pending = [m for m in self.pending if m not in batch]
        for message in batch:
            node = self.nodes[message.destination_id]
            if (message.source_id, message.destination_id) in self.blocked or node.raft is None:
                self.output.append(f"{describe_message(message)} DROPPED")
                continue
            self.output.append(describe_message(message))
            self._input(node, lambda raft, m=message, n=node: raft.step(m, n.clock))

    def stabilize(self) -> None:
        for _ in range(1000):
            if not self.pending:
                return
            self.deliver()
        raise RuntimeError("stabilize did not converge")

    def drop(self, link: tuple[int, int] | None) -> None:
        dropped = [m for m in self.pending if link in (None, (m.source_id, m.destination_id))]
        self.pending = [m for m in self.pending if m not in dropped]
        self.output.extend(f"{describe_message(m)} DROPPED" for m in dropped)

    def propose(self, node_id: int, payloads: list[str]) -> None:
        node = self.nodes[node_id]
        offsets: list[range] = []
        self._input(
            node,
            lambda raft: offsets.append(raft.propose([p.encode() for p in payloads], node.clock)),
        )
        self.output.append(f"{node_id}: proposed at offsets {list(offsets[0])}")

    def resign(self, node_id: int) -> None:
        node = self.nodes[node_id]
        self._input(node, lambda raft: raft.resign(node.clock))

    def crash(self, node_id: int) -> None:
        node = self.nodes[node_id]
        node.raft = None
        node.log.lose_unflushed()
        self.pending = [m for m in self.pending if m.destination_id != node_id]
        self.output.append(f"{node_id}: crashed")

    def restart(self, node_id: int) -> None:
        node = self.nodes[node_id]
        self._boot(node)
        self.output.append(f"{node_id}: restarted as {node.raft!r}")

    def status(self) -> None:
        for node_id, node in sorted(self.nodes.items()):
            if node.raft is None:
                self.output.append(f"{node_id}: down")
                continue
            raft = node.raft
            self.output.append(
                f"{node_id}: {raft.state!r} hw={raft.high_watermark} "
                f"log=[{format_entries(node.log.entries())}]"
            )


def _link(args: list[str]) -> tuple[int, int] | None:
    if not args:
        return None
    source, destination = args[0].split("->")
    return int(source), int(destination)


def execute(world: World | None, command: str) -> tuple[World | None, list[str]]:
    """Run one command line; return the (possibly new) world and what it printed."""
    name, *args = command.split()
    if name == "cluster":
        options = dict(arg.split("=", 1) for arg in args)
        config = RaftConfig(
            pre_vote=options.get("pre_vote", "false") == "true",
            check_quorum=options.get("check_quorum", "false") == "true",
        )
        world = World(_ids(options["voters"]), _ids(options.get("observers", "")), config)
        world.output.append("ok")
    else:
        if world is None:
            raise ValueError("the first command must be 'cluster'")
        world.output = []
        if name == "timeout":
            for node_id in _ids(args[0]):
                world.timeout(node_id)
        elif name == "tick":
            for node_id in _ids(args[0]):
                world.tick(node_id, int(args[1]))
        elif name == "stabilize":
            world.stabilize()
        elif name == "deliver":
            world.deliver(_link(args))
        elif name == "drop":
            world.drop(_link(args))
        elif name == "propose":
            world.propose(int(args[0]), args[1:])
        elif name == "resign":
            world.resign(int(args[0]))
        elif name == "partition":
            bar = args.index("|")
            left, right = (
                {i for a in args[:bar] for i in _ids(a)},
                {i for a in args[bar + 1 :] for i in _ids(a)},
            )
            world.blocked = {(a, b) for a in left for b in right} | {
                (b, a) for a in left for b in right
            }
        elif name == "heal":
            world.blocked = set()
        elif name == "crash":
            world.crash(int(args[0]))
        elif name == "restart":
            world.restart(int(args[0]))
        elif name == "status":
            world.status()
        else:
            raise ValueError(f"unknown command {name!r}")
    assert world is not None
    return world, world.output or ["ok"]


@dataclass
class Block:
    command: str
    expected: list[str]


def parse(text: str) -> list[Block | str]:
    """Blocks and the comment/blank lines between them (kept for rewriting)."""
    items: list[Block | str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.startswith("#"):
            items.append(line)
            i += 1
            continue
        if i + 1 >= len(lines) or lines[i + 1] != "----":
            raise ValueError(f"line {i + 1}: expected '----' after {line!r}")
        i += 2
        expected: list[str] = []
        while i < len(lines) and lines[i].strip():
            expected.append(lines[i])
            i += 1
        items.append(Block(line, expected))
    return items


def run_file(path: Path, *, rewrite: bool = False) -> list[tuple[Block, list[str]]]:
    """Run every block of ``path``; return (block, actual output) pairs. With ``rewrite`` the
    file's expected outputs are replaced by the actual ones."""
    items = parse(path.read_text())
    world: World | None = None
    results: list[tuple[Block, list[str]]] = []
    rendered: list[str] = []
    for item in items:
        if isinstance(item, str):
            rendered.append(item)
            continue
        world, actual = execute(world, item.command)
        results.append((item, actual))
        rendered.extend([item.command, "----", *actual])
    if rewrite:
        path.write_text("\n".join(rendered) + "\n")
    return results
