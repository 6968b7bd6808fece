"""Durable storage (seed 002): the variable queue and the files under it.

``VariableQueue`` is the queue's paging core (q1, q2, delta, q3, q4 under a memory target), sans-IO:
its disk work comes out as effects (``WriteMessage``, ``ReadIndex``, ``Sync``, ...) that a shell
carries out. ``SegmentLog`` is the message store (bodies keyed by message id) and the file layer
under ``QueueIndex`` (a queue's entries by sequence id; ``SeqRangeIndex`` is the index whose RAM is per
segment of ids, not per message): append-only segments with a CRC per record,
group commit, GC and recovery. Both files block on the disk: call them from a job or an I/O actor,
never from a handler. The record codec (``frame``, ``unframe``, ``scan``) is pure.
``DiskJournalStore`` keeps the runtime's actor journals in a ``SegmentLog`` (``journal_store=`` on a system).
"""

from ._heap_trim import TRIM_EVERY_BYTES as TRIM_EVERY_BYTES
from ._heap_trim import note_bytes_handled as note_bytes_handled
from ._index import QueueIndex as QueueIndex
from ._journal_store import DiskJournalStore as DiskJournalStore
from ._journal_store import RecoveredJournal as RecoveredJournal
from ._journal_store import journal_key as journal_key
from ._journal_store import recover_journals as recover_journals
from ._segment_codec import Compacted as Compacted
from ._segment_codec import CorruptRecord as CorruptRecord
from ._segment_codec import Damage as Damage
from ._segment_codec import Delete as Delete
from ._segment_codec import Heads as Heads
from ._segment_codec import Put as Put
from ._segment_codec import Scan as Scan
from ._segment_codec import decode_entry as decode_entry
from ._segment_codec import encode_entry as encode_entry
from ._segment_codec import encode_records as encode_records
from ._segment_codec import frame as frame
from ._segment_codec import put_record as put_record
from ._segment_codec import read_heads as read_heads
from ._segment_codec import scan as scan
from ._segment_codec import unframe as unframe
from ._segment_files import FileSystem as FileSystem
from ._segment_files import OsFileSystem as OsFileSystem
from ._segment_log import SNAPSHOT_NAME as SNAPSHOT_NAME
from ._segment_log import Collected as Collected
from ._segment_log import Recovery as Recovery
from ._segment_log import SegmentLog as SegmentLog
from ._segment_log import StorageFailed as StorageFailed
from ._segment_log import Synced as Synced
from ._segment_log import Truncation as Truncation
from ._segment_table import RecordLocation as RecordLocation
from ._segment_table import SegmentTable as SegmentTable
from ._segment_table import TableBuilder as TableBuilder
from ._segment_table import TableStats as TableStats
from ._seq_range_index import DEFAULT_IDS_PER_SEGMENT as DEFAULT_IDS_PER_SEGMENT
from ._seq_range_index import IndexRecord as IndexRecord
from ._seq_range_index import SeqRangeIndex as SeqRangeIndex
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
    "TRIM_EVERY_BYTES",
    "note_bytes_handled",
    "DEFAULT_EMBED_BELOW",
    "DEFAULT_IDS_PER_SEGMENT",
    "DEFAULT_SEGMENT_ENTRIES",
    "SNAPSHOT_NAME",
    "AckIndex",
    "Collected",
    "Compacted",
    "CorruptRecord",
    "Damage",
    "Delete",
    "DeltaRange",
    "DiskJournalStore",
    "Effect",
    "Fetched",
    "FileSystem",
    "Heads",
    "IndexEntry",
    "IndexRecord",
    "LoadPending",
    "MarkDelivered",
    "OsFileSystem",
    "Put",
    "QueueIndex",
    "ReadIndex",
    "ReadMessage",
    "ReadPending",
    "RecordLocation",
    "RecoveredJournal",
    "Recovery",
    "RemoveMessages",
    "Scan",
    "SegmentLog",
    "SegmentTable",
    "SeqRangeIndex",
    "StorageFailed",
    "Sync",
    "Synced",
    "TableBuilder",
    "TableStats",
    "Truncation",
    "VariableQueue",
    "VariableQueueError",
    "VariableQueueLayout",
    "VariableQueueStatus",
    "WriteIndex",
    "WriteMessage",
    "decode_entry",
    "encode_entry",
    "encode_records",
    "frame",
    "journal_key",
    "put_record",
    "read_heads",
    "recover_journals",
    "scan",
    "unframe",
]
