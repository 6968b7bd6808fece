"""A queue index on a segment log: one entry per queued message, keyed and ordered by its sequence id.

Publishing writes the entry (the message's id and properties, or the whole message when it is small
enough to embed: the caller decides what the bytes hold), acking deletes it. Reading goes in
sequence order from any id, which is how the front of the on-disk part of a queue comes back into RAM.
"""

from __future__ import annotations

import bisect
from typing import Final, final

from ._segment_log import Collected, Recovery, SegmentLog, Synced

_ID_BYTES: Final = 8


def _key(seq_id: int) -> bytes:
    if not isinstance(seq_id, int) or not 0 <= seq_id < 1 << 64:
        msg = f"seq_id must be an int in 0..2**64-1, got {seq_id!r}"
        raise ValueError(msg)
    return seq_id.to_bytes(_ID_BYTES, "big")


@final
class QueueIndex:
    """A queue's entries by sequence id, kept in ``log`` (a ``SegmentLog`` of its own: the index owns it)."""

    def __init__(self, log: SegmentLog) -> None:
        self._log = log
        self._ids = sorted(int.from_bytes(key, "big") for key in self._log)
        """Ascending ids, possibly with acked ones among them (skipped on read, dropped now and then)."""

    @property
    def recovery(self) -> Recovery:
        """What opening the index found and repaired."""
        return self._log.recovery

    def publish(self, seq_id: int, entry: bytes) -> int:
        """Record ``entry`` under ``seq_id`` (durable after the next sync). Returns the write's number."""
        written = self._log.put(_key(seq_id), entry)
        ids = self._ids
        if not ids or seq_id > ids[-1]:
            ids.append(seq_id)
        else:
            position = bisect.bisect_left(ids, seq_id)
            if position == len(ids) or ids[position] != seq_id:  # an id acked earlier is still listed
                ids.insert(position, seq_id)
        return written

    def ack(self, seq_id: int) -> int:
        """Delete ``seq_id``'s entry (durable after the next sync). Returns the write's number."""
        written = self._log.delete(_key(seq_id))
        if len(self._ids) > 64 and len(self._ids) > 2 * len(self._log):
            self._ids = [i for i in self._ids if _key(i) in self._log]
        return written

    def read(self, seq_id: int) -> bytes:
        """The entry of ``seq_id``. Raises KeyError if there is none."""
        return self._log.get(_key(seq_id))

    def seq_ids(self, start: int = 0, limit: int | None = None) -> list[int]:
        """Up to ``limit`` live ids from ``start`` on, ascending."""
        found: list[int] = []
        ids = self._ids
        for position in range(bisect.bisect_left(ids, start), len(ids)):  # no copy of the tail per read
            if limit is not None and len(found) >= limit:
                break
            seq_id = ids[position]
            if _key(seq_id) in self._log:
                found.append(seq_id)
        return found

    def span(self) -> tuple[int, int] | None:
        """The first live id and one past the last (what a recovered queue's delta covers); None when empty."""
        ids = self._ids
        first = next((i for i in ids if _key(i) in self._log), None)
        if first is None:
            return None
        last = next(i for i in reversed(ids) if _key(i) in self._log)
        return first, last + 1

    def read_from(self, start: int, limit: int) -> list[tuple[int, bytes]]:
        """Up to ``limit`` (seq_id, entry) pairs from ``start`` on, ascending."""
        return [(seq_id, self.read(seq_id)) for seq_id in self.seq_ids(start, limit)]

    def __contains__(self, seq_id: object) -> bool:
        return isinstance(seq_id, int) and 0 <= seq_id < 1 << 64 and _key(seq_id) in self._log

    def __len__(self) -> int:
        return len(self._log)

    def sync(self) -> Synced:
        """Group commit: make every publish and ack since the last sync durable at once."""
        return self._log.sync()

    def collect_garbage(self, threshold: float = 0.5) -> Collected:
        """Compact segments whose live fraction is under ``threshold``."""
        return self._log.collect_garbage(threshold)

    def close(self) -> None:
        """Sync and close."""
        self._log.close()
