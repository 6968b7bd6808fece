"""A planted bug in a queue's statistics (``queue_stats``): its work is right, the counters it reports are not.

``AcksCountedAsAsked``: ``QueueStats.acked`` counts every tag an ack names, the ones the consumer
no longer held too (a late ack, after its lease lapsed and the message went to another consumer or
back to the queue). Every message still goes where it should; only the counters stop adding up.
"""

from __future__ import annotations

from collections.abc import Iterable

from conveyor.actors.broker import EntryList


class AcksCountedAsAsked(EntryList):
    """Broken: an ack's tags that were not held count as acked all the same."""

    def ack(self, consumer_id: int, tags: Iterable[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        acked, not_held = super().ack(consumer_id, tags)
        self.acked += len(not_held)
        return acked, not_held
