"""A planted bug in a durable queue's recovery that breaks only its order (``found_order``, issue 17 item 1).

``StackedSnapshotRestore``: restoring a journal snapshot, each priority level's backlog of messages
never delivered is rebuilt as a stack, newest first, as a restore that pushes each entry onto the
front of its level would. Every message is still there, with its state, lease and counts: only the
order of those never given to a client is reversed, so only ``found_order`` can tell (the queue's own
notes do not survive a process crash, and its clients never saw these messages).

Found only when a recovery restores a snapshot that holds two or more undelivered messages of one
priority, which stay undelivered to the end: ``durable-crash`` draws a deep-backlog mode for that.
"""

from __future__ import annotations

from typing import Any

import attrs

from conveyor.actors.broker import EntryList, EntryState


class StackedSnapshotRestore(EntryList):
    """Broken: a restored snapshot's undelivered messages come back per level newest first."""

    def restore(self, snapshot: Any) -> None:  # an EntryListSnapshot
        entries = [list(entry) for entry in snapshot.entries]
        by_rank: dict[int, list[list[Any]]] = {}
        for entry in entries:  # (seq, rank, key, message, state, ..., delivery count at 8, ...)
            if entry[4] is EntryState.AVAILABLE and entry[8] == 0:
                by_rank.setdefault(entry[1], []).append(entry)
        for backlog in by_rank.values():
            backlog.sort(key=lambda entry: entry[2])  # by position: the level's order
            keys = [entry[2] for entry in backlog]
            # Each message keeps its seq (and so its body, which a paged queue's store keys by seq);
            # only the places are handed out in reverse.
            for entry, key in zip(backlog, reversed(keys), strict=True):
                entry[2] = key
        super().restore(attrs.evolve(snapshot, entries=tuple(tuple(entry) for entry in entries)))
