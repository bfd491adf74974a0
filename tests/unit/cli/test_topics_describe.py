"""``rillet topics --describe`` lines for partitions in states a healthy one-node broker never
shows: eligible leader replicas (KIP-966), offline replicas, and a reassignment in progress
(Kafka's "Adding Replicas" / "Removing Replicas")."""

from __future__ import annotations

import argparse
import uuid
from collections.abc import Sequence

import pytest

from rillet.cli import topics
from rillet.client.admin import ConfigResource, PartitionInfo, TopicDescription
from rillet.controller.reassignment import OngoingReassignment
from rillet.types import TopicPartition


class FakeAdmin:
    def describe_topics(self, names: Sequence[str] | None = None) -> list[TopicDescription]:
        parts = (
            PartitionInfo(0, 1, 3, (1, 2, 3), (1,), (3,), None, elr=(2,)),
            PartitionInfo(1, 4, 2, (4, 5, 1, 2), (4, 5, 1, 2), (), None),
        )
        return [TopicDescription("t", uuid.UUID(int=1), False, parts, None)]

    def describe_configs(
        self, resources: Sequence[ConfigResource]
    ) -> dict[tuple[int, str], dict[str, tuple[str | None, str]]]:
        return {}

    def list_partition_reassignments(
        self, partitions: Sequence[TopicPartition] | None = None
    ) -> dict[TopicPartition, OngoingReassignment]:
        return {TopicPartition("t", 1): OngoingReassignment((4, 5, 1, 2), (4, 5), (1, 2))}


def test_elr_offline_and_moving_replicas_are_shown(capsys: pytest.CaptureFixture[str]) -> None:
    args = argparse.Namespace(
        topic=None,
        exclude_internal=False,
        under_replicated_partitions=False,
        under_min_isr_partitions=False,
        at_min_isr_partitions=False,
        unavailable_partitions=False,
    )
    assert topics._describe(FakeAdmin(), args) == 0  # type: ignore[arg-type]
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == (
        "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1\tElr: 2\tOffline: 3"
    )
    assert lines[2] == (
        "\tTopic: t\tPartition: 1\tLeader: 4\tReplicas: 4,5,1,2\tIsr: 4,5,1,2"
        "\tAdding Replicas: 4,5\tRemoving Replicas: 1,2"
    )
