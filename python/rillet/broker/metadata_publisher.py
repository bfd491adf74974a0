"""The broker's side of the metadata log (Kafka's BrokerMetadataPublisher): committed records
become the next :class:`~rillet.metadata.image.MetadataImage`, and each change becomes the
action it needs: new topic configs for the logs, become-leader / become-follower / delete
for the ReplicaManager. Runs on the event loop; ``image`` is replaced, never mutated.

A starting broker's publisher is *held* (Kafka's broker installs its publishers only once the
controller says it has caught up): the image follows the log, but nothing is acted on, so a
broker that restarts with less than it had (a power loss took what was never fsynced) never
leads a partition on the strength of an image from before it went down. :meth:`release`
acts on everything at once, and deletes the stray logs the caught-up image does not place on
this broker.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rillet.broker.replica_manager import ReplicaManager
from rillet.metadata.image import MetadataDelta, MetadataImage
from rillet.metadata.records import ConfigResourceType, MetadataRecord
from rillet.metadata.snapshot import image_from_records, image_records
from rillet.storage.log_manager import LogManager

__all__ = ["MetadataPublisher"]


class MetadataPublisher:
    def __init__(
        self,
        replicas: ReplicaManager | None,
        log_manager: LogManager | None,
        *,
        held: bool = False,
    ) -> None:
        self.image = MetadataImage()
        self.replicas = replicas
        self.log_manager = log_manager
        self.held = held
        self._acted = self.image  # the image the logs and replicas were last brought to
        # Told of each image acted on, after the ReplicaManager (the group coordinator).
        self.listeners: list[Callable[[MetadataImage], None]] = []

    def release(self) -> None:
        """Stop holding: act on the whole image, then delete stray logs."""
        if not self.held:
            return
        self.held = False
        end = self.image.offset + 1
        _, delta = image_from_records(image_records(self.image), end, self._acted)
        self._apply(delta)
        if self.replicas is not None:
            self.replicas.remove_stray_logs(self.image)

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
        if skipped and not self.held and self.replicas is not None:
            self.replicas.remove_stray_logs(self.image)

    def _apply(self, delta: MetadataDelta) -> None:
        new = delta.apply()
        self.image = new
        if self.held:
            return
        old, self._acted = self._acted, new
        if self.log_manager is not None:
            for rtype, name in {**old.configs, **new.configs}:
                if (
                    rtype == ConfigResourceType.TOPIC
                    and new.topic(name) is not None
                    and old.topic_config(name) != new.topic_config(name)
                ):
                    self.log_manager.update_topic_config(name, dict(new.topic_config(name)))
                    if self.replicas is not None:
                        self.replicas.topic_config_changed(name)
        if self.replicas is not None:
            self.replicas.apply_partition_changes(delta.partition_changes(), new)
        for listener in self.listeners:
            listener(new)
