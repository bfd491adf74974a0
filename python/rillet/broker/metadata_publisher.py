"""The broker's side of the metadata log (Kafka's BrokerMetadataPublisher): committed records
become the next :class:`~rillet.metadata.image.MetadataImage`, and each change becomes the
action it needs: new topic configs for the logs, become-leader / become-follower / delete
for the ReplicaManager. Runs on the event loop; ``image`` is replaced, never mutated."""

from __future__ import annotations

from collections.abc import Sequence

from rillet.broker.replica_manager import ReplicaManager
from rillet.metadata.image import MetadataDelta, MetadataImage
from rillet.metadata.records import ConfigResourceType, MetadataRecord
from rillet.metadata.snapshot import image_from_records
from rillet.storage.log_manager import LogManager

__all__ = ["MetadataPublisher"]


class MetadataPublisher:
    def __init__(self, replicas: ReplicaManager | None, log_manager: LogManager | None) -> None:
        self.image = MetadataImage()
        self.replicas = replicas
        self.log_manager = log_manager

    def publish(self, records: Sequence[tuple[int, MetadataRecord]]) -> None:
        """Apply one run of committed ``(offset, record)`` pairs, in offset order."""
        delta = MetadataDelta(self.image)
        for offset, record in records:
            delta.replay(offset, record)
        self._apply(delta)

    def load_snapshot(
        self, records: Sequence[MetadataRecord], end_offset: int, *, skipped: bool = False
    ) -> None:
        """Replace the image with a snapshot's (at start-up, or fetched from the leader when
        this node fell behind the leader's log start): partitions and topics it lacks are
        removed, the rest created or changed, as for any delta. ``skipped`` says that the
        snapshot jumps over records this node never applied: local logs the new image does
        not place here (topics deleted or recreated, partitions moved away meanwhile) are
        then deleted as strays."""
        _, delta = image_from_records(records, end_offset, self.image)
        self._apply(delta)
        if skipped and self.replicas is not None:
            self.replicas.remove_stray_logs(self.image)

    def _apply(self, delta: MetadataDelta) -> None:
        old, new = self.image, delta.apply()
        self.image = new
        if self.log_manager is not None:
            for rtype, name in {**old.configs, **new.configs}:
                if (
                    rtype == ConfigResourceType.TOPIC
                    and new.topic(name) is not None
                    and old.topic_config(name) != new.topic_config(name)
                ):
                    self.log_manager.update_topic_config(name, dict(new.topic_config(name)))
        if self.replicas is not None:
            self.replicas.apply_partition_changes(delta.partition_changes(), new)
