"""The replay property: after any sequence of operations, a shard rebuilt from the records
the live shard emitted shows the same groups, members, epochs, assignments and offsets
(rillet.coordinator.group.state and every handler that writes)."""

from __future__ import annotations

from typing import Any

from group_harness import (
    TOPICS,
    Log,
    assert_replay_matches,
    beat,
    commit,
    join,
    join_classic,
    new_shard,
    sync,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rillet.coordinator.group import (
    GroupCoordinatorShard,
    HeartbeatRequest,
    LeaveGroupRequest,
    MemberIdentity,
    OffsetDeleteRequest,
    OwnedTopicPartitions,
    TopicInfo,
    TopicPartitionIndexes,
)
from rillet.errors import MemberIdRequiredError

CONSUMERS = ["m0", "m1", "m2", "s3"]  # s3 is static (instance id "i3")
CLASSICS = ["c0", "c1", "c2"]

ops = st.one_of(
    st.tuples(
        st.just("heartbeat"),
        st.sampled_from(CONSUMERS),
        st.sampled_from(["good", "good", "good", "join", "leave", "pause", "stale", "regex"]),
    ),
    st.tuples(
        st.just("classic"),
        st.sampled_from(CLASSICS),
        st.sampled_from(["join", "join", "sync", "heartbeat", "leave", "static-join"]),
    ),
    st.tuples(
        st.just("commit"),
        st.sampled_from(["cg", "kg", "simple"]),
        st.sampled_from(CONSUMERS + CLASSICS + [""]),
        st.integers(0, 5),
    ),
    st.tuples(st.just("classic-round"), st.sets(st.sampled_from(CLASSICS), min_size=1)),
    st.tuples(st.just("tick"), st.sampled_from([1, 500, 3_000, 20_000, 50_000, 700_000])),
    st.tuples(st.just("metadata"), st.integers(4, 8)),
    st.tuples(st.just("delete"), st.sampled_from(["cg", "kg", "simple"]), st.booleans()),
)


class World:
    """The shard, its log, and what each client knows (its classic member id, generation)."""

    def __init__(self) -> None:
        self.shard: GroupCoordinatorShard = new_shard()
        self.log = Log()
        self.now = 0
        self.classic_ids: dict[str, str] = {}
        self.generation: dict[str, int] = {}
        self.offset = 0
        self.handles = 0

    def record(self, result: Any) -> Any:
        self.log.append(result)
        for c in result.completions:
            client = c.handle[0]
            response = c.response
            if getattr(response, "member_id", None) and (
                response.error is None or isinstance(response.error, MemberIdRequiredError)
            ):
                self.classic_ids[client] = response.member_id
            if getattr(response, "generation_id", -1) >= 0 and response.error is None:
                self.generation[client] = response.generation_id
        return result

    def handle(self, client: str) -> tuple[str, int]:
        self.handles += 1
        return (client, self.handles)

    def run(self, op: tuple[Any, ...]) -> None:
        shard = self.shard
        self.now += 7
        kind = op[0]
        if kind == "heartbeat":
            self.heartbeat(op[1], op[2])
        elif kind == "classic":
            self.classic(op[1], op[2])
        elif kind == "classic-round":
            self.classic_round(sorted(op[1]))
        elif kind == "commit":
            _, group, client, partition = op
            self.offset += 1
            member = self.classic_ids.get(client, client)
            generation = self._generation(group, client)
            request = commit(
                group, {("foo", partition): self.offset}, member_id=member, generation=generation
            )
            self.record(shard.commit_offsets(request, self.now))
        elif kind == "tick":
            self.now += op[1]
            self.record(shard.tick(self.now))
        elif kind == "metadata":
            shard.on_metadata({**TOPICS, "foo": TopicInfo(TOPICS["foo"].topic_id, op[1])})
        elif kind == "delete":
            if op[2]:
                self.record(shard.delete_groups([op[1]]))
            else:
                deletion = OffsetDeleteRequest(op[1], (TopicPartitionIndexes("foo", (0, 1, 2)),))
                self.record(shard.delete_offsets(deletion))

    def _generation(self, group: str, client: str) -> int:
        if group == "cg":
            g = self.shard.state.consumer_group("cg")
            member = None if g is None else g.members.get(client)
            return -1 if member is None else member.member_epoch
        if group == "kg":
            return self.generation.get(client, -1)
        return -1

    def heartbeat(self, member: str, mode: str) -> None:
        shard = self.shard
        instance = "i3" if member == "s3" else None
        group = shard.state.consumer_group("cg")
        known = None if group is None else group.members.get(member)
        if mode in ("join", "regex") or known is None:
            regex = "f.o" if mode == "regex" else None
            request = join("cg", member, ("foo", "bar"), instance_id=instance, regex=regex)
        elif mode == "leave":
            request = beat("cg", member, -1, instance_id=instance)
        elif mode == "pause":
            request = beat("cg", member, -2 if instance else -1, instance_id=instance)
        else:
            epoch = known.member_epoch - (1 if mode == "stale" else 0)
            owned = tuple(
                OwnedTopicPartitions(t, tuple(sorted(ps)))
                for t, ps in known.assigned_partitions.items()
            )
            request = beat("cg", member, epoch, owned, instance)
        self.record(shard.consumer_group_heartbeat(request, self.now))

    def classic_round(self, clients: list[str]) -> None:
        """Well-behaved classic clients through a whole rebalance: join (twice when a member
        id is handed out), let the join phase end, sync (the leader with assignments)."""
        for client in clients:
            if client not in self.classic_ids:
                self.classic(client, "join")
            self.classic(client, "join")
        self.now += 6_500  # past the initial delay (extended once), within sessions
        self.record(self.shard.tick(self.now))
        group = self.shard.state.classic_group("kg")
        leader = None if group is None else group.leader_id
        for client in sorted(clients, key=lambda c: self.classic_ids.get(c) != leader):
            self.classic(client, "sync")

    def classic(self, client: str, mode: str) -> None:
        shard = self.shard
        member_id = self.classic_ids.get(client, "")
        generation = self.generation.get(client, -1)
        if mode in ("join", "static-join"):
            instance = client if mode == "static-join" else None
            request = join_classic("kg", "" if instance else member_id, instance_id=instance)
            self.record(shard.join_group(request, self.handle(client), self.now))
        elif mode == "sync":
            group = shard.state.classic_group("kg")
            plan = None
            if group is not None and group.leader_id == member_id:
                plan = {m: b"assignment of " + m.encode() for m in group.members}
            syncing = sync("kg", member_id, generation, plan)
            self.record(shard.sync_group(syncing, self.handle(client), self.now))
        elif mode == "heartbeat":
            self.record(shard.heartbeat(HeartbeatRequest("kg", generation, member_id), self.now))
        else:
            leave = LeaveGroupRequest("kg", (MemberIdentity(member_id),))
            self.record(shard.leave_group(leave, self.now))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, min_size=10, max_size=60))
def test_a_shard_rebuilt_from_its_records_shows_the_same_state(operations: list[Any]) -> None:
    world = World()
    for i, op in enumerate(operations):
        world.run(op)
        if i % 5 == 4:
            assert_replay_matches(world.shard, world.log)
    assert_replay_matches(world.shard, world.log)
