"""The quorum controller: a pure state machine over the metadata image that turns requests
into metadata records (:class:`QuorumController`, the dispatcher), one module per concern
(``topics``, ``configs``, ``cluster``, ``elections``, ``isr``, ``placement``,
``producer_ids``), and ``service``, which runs it on the event loop over the metadata
quorum."""

from rillet.controller.cluster import HeartbeatResult
from rillet.controller.configs import AlterConfigOp
from rillet.controller.elections import ElectionResults, ElectionType
from rillet.controller.isr import AlterPartitionResult, AlterPartitionState
from rillet.controller.producer_ids import PRODUCER_ID_BLOCK_SIZE, ProducerIdsBlock
from rillet.controller.quorum_controller import ControllerConfig, QuorumController
from rillet.controller.results import ControllerResult
from rillet.controller.topics import CreatableTopic, TopicResult

__all__ = [
    "PRODUCER_ID_BLOCK_SIZE",
    "AlterConfigOp",
    "AlterPartitionResult",
    "AlterPartitionState",
    "ControllerConfig",
    "ControllerResult",
    "CreatableTopic",
    "ElectionResults",
    "ElectionType",
    "HeartbeatResult",
    "ProducerIdsBlock",
    "QuorumController",
    "TopicResult",
]
