"""Storage under the queues: the variable queue (seed 002) as a sans-IO core whose disk work is data."""

from ._variable_queue import DEFAULT_EMBED_BELOW as DEFAULT_EMBED_BELOW
from ._variable_queue import DEFAULT_SEGMENT_ENTRIES as DEFAULT_SEGMENT_ENTRIES
from ._variable_queue import VariableQueue as VariableQueue
from ._vq_effects import AckIndex as AckIndex
from ._vq_effects import DeltaRange as DeltaRange
from ._vq_effects import Effect as Effect
from ._vq_effects import Fetched as Fetched
from ._vq_effects import IndexEntry as IndexEntry
from ._vq_effects import LoadPending as LoadPending
from ._vq_effects import MarkDelivered as MarkDelivered
from ._vq_effects import ReadIndex as ReadIndex
from ._vq_effects import ReadMessage as ReadMessage
from ._vq_effects import ReadPending as ReadPending
from ._vq_effects import RemoveMessages as RemoveMessages
from ._vq_effects import Sync as Sync
from ._vq_effects import VariableQueueError as VariableQueueError
from ._vq_effects import VariableQueueLayout as VariableQueueLayout
from ._vq_effects import VariableQueueStatus as VariableQueueStatus
from ._vq_effects import WriteIndex as WriteIndex
from ._vq_effects import WriteMessage as WriteMessage

__all__ = [
    "DEFAULT_EMBED_BELOW",
    "DEFAULT_SEGMENT_ENTRIES",
    "AckIndex",
    "DeltaRange",
    "Effect",
    "Fetched",
    "IndexEntry",
    "LoadPending",
    "MarkDelivered",
    "ReadIndex",
    "ReadMessage",
    "ReadPending",
    "RemoveMessages",
    "Sync",
    "VariableQueue",
    "VariableQueueError",
    "VariableQueueLayout",
    "VariableQueueStatus",
    "WriteIndex",
    "WriteMessage",
]
