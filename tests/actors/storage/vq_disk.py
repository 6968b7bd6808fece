"""An in-memory disk for the variable queue's tests: it carries out the core's effects as a shell would.

It keeps a message store and a queue index as dicts, executes effects in the order the core gave
them, and hands read results straight back to the core. It refuses what a correct core never asks
for (a record written twice, a read of a record that is not there), so a bookkeeping slip in the
core shows up as a failure here rather than as a silently wrong answer.
"""

from __future__ import annotations

import attrs

from conveyor.actors.storage import (
    AckIndex,
    Effect,
    Fetched,
    IndexEntry,
    MarkDelivered,
    ReadIndex,
    ReadMessage,
    RemoveMessages,
    Sync,
    VariableQueue,
    WriteIndex,
    WriteMessage,
)


@attrs.frozen
class IndexRead:
    """What a ``ReadIndex`` found."""

    entries: list[IndexEntry]


@attrs.frozen
class BodyRead:
    """What a ``ReadMessage`` found."""

    seq_id: int
    body: bytes


@attrs.define
class FakeDisk:
    """The files of one queue, in memory, and what running the core's effects produced."""

    store: dict[int, bytes] = attrs.Factory(dict)
    index: dict[int, IndexEntry] = attrs.Factory(dict)
    fetched: list[Fetched] = attrs.Factory(list)
    """Fetches completed by ``loaded_message``, in order."""
    confirmed: list[str] = attrs.Factory(list)
    """Message ids confirmed by syncs, in order."""
    log: list[Effect] = attrs.Factory(list)
    hold_reads: bool = False
    """Keep read results back until ``deliver``: the disk read at once, its answer is late (a slow I/O actor)."""
    held: list[IndexRead | BodyRead] = attrs.Factory(list)

    def run(self, queue: VariableQueue, *, rounds: int | None = None) -> None:
        """Carry out the queue's effects (and those its answers cause) until none are left, or ``rounds`` batches."""
        done = 0
        while rounds is None or done < rounds:
            effects = queue.take_effects()
            if not effects:
                return
            for effect in effects:
                self.apply(queue, effect)
            done += 1

    def apply(self, queue: VariableQueue, effect: Effect) -> None:
        """Carry out one effect, giving a read's result back to the queue."""
        self.log.append(effect)
        match effect:
            case WriteMessage(seq_id=seq_id, body=body):
                assert seq_id not in self.store, f"body of {seq_id} written twice"
                self.store[seq_id] = body
            case WriteIndex(entry=entry):
                assert entry.seq_id not in self.index, f"index record of {entry.seq_id} written twice"
                self.index[entry.seq_id] = entry
            case MarkDelivered(seq_ids=seq_ids):
                for seq_id in seq_ids:
                    self.index[seq_id] = attrs.evolve(self.index[seq_id], delivered=True)
            case AckIndex(seq_ids=seq_ids):
                for seq_id in seq_ids:
                    del self.index[seq_id]
            case RemoveMessages(seq_ids=seq_ids):
                for seq_id in seq_ids:
                    del self.store[seq_id]
            case ReadIndex(start=start, end=end):
                self._answer(queue, IndexRead([self.index[s] for s in sorted(self.index) if start <= s < end]))
            case ReadMessage(seq_id=seq_id, embedded=embedded):
                read: bytes | None = self.index[seq_id].body if embedded else self.store[seq_id]
                assert read is not None, f"embedded body of {seq_id} missing from its index record"
                self._answer(queue, BodyRead(seq_id, read))
            case Sync(token=token):
                self.confirmed.extend(queue.synced(token))

    def deliver(self, queue: VariableQueue) -> None:
        """Hand the queue every read result held back, in the order the reads ran."""
        held, self.held = self.held, []
        for answer in held:
            self._give(queue, answer)

    def _answer(self, queue: VariableQueue, answer: IndexRead | BodyRead) -> None:
        if self.hold_reads:
            self.held.append(answer)
        else:
            self._give(queue, answer)

    def _give(self, queue: VariableQueue, answer: IndexRead | BodyRead) -> None:
        match answer:
            case IndexRead(entries=entries):
                queue.loaded_index(entries)
            case BodyRead(seq_id=seq_id, body=body):
                self.fetched.append(queue.loaded_message(seq_id, body))
