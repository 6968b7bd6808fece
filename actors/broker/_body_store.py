"""Where a paged queue keeps the bodies it dropped from RAM: a narrow store, used only from jobs.

A ``BodyStore`` maps an entry's seq to its body. The queue never calls it from a handler: each
``PageBatch`` (writes, then reads, then deletes) runs in one job (``run_page_batch``), and the
bodies read come back in the job's ``JobDone``. One batch at a time per queue, so a read always
sees every write before it and the store needs no lock. ``DiskBodyStore`` (``_disk_body_store``)
keeps the bodies on disk by seq; ``MemoryBodyStore`` keeps them in a dict (tests, and a simulator
without a disk of its own).
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from typing import Protocol, final

import attrs

from conveyor.actors.storage import note_bytes_handled

from ._values import Message


class BodyStore(Protocol):
    """Bytes by int key (an entry's seq, or a delta chunk's negative key); blocking, so called only from a job."""

    def write(self, bodies: Sequence[tuple[int, bytes]]) -> None:
        """Keep each (seq, body); a seq is written at most once."""

    def read(self, seqs: Sequence[int]) -> Sequence[bytes | None]:
        """The bodies of ``seqs``, in that order (each written before; a durable store: None if lost)."""

    def delete(self, seqs: Sequence[int]) -> None:
        """Forget the bodies of ``seqs`` (each written before)."""

    def forget_from(self, seq: int) -> None:
        """Forget every body keyed ``seq`` or above (a durable queue's recovery: publishes its journal lost)."""


DeltaRecord = tuple[int, Message, int]
"""An entry of a delta chunk as the store keeps it: (seq, message without its body, size)."""


@final
@attrs.frozen
class PageBatch:
    """One job's work for a queue's body store, run in this order: writes, reads, deletes.

    Bodies are keyed by their entry's seq (> 0); delta chunks (``chunk_writes``: key and records)
    by their chunk key (< 0), pickled in the job.
    """

    writes: tuple[tuple[int, bytes], ...] = ()
    reads: tuple[int, ...] = ()
    deletes: tuple[int, ...] = ()
    chunk_writes: tuple[tuple[int, tuple[DeltaRecord, ...]], ...] = ()
    chunk_reads: tuple[int, ...] = ()
    chunk_deletes: tuple[int, ...] = ()
    forget_from: int | None = None
    """A durable queue's first batch after recovery: first forget the bodies of seqs the journal does not
    have (published, their body synced, but their journal write lost), as new publishes reuse the seqs."""
    generation: int = 0
    """A durable store's generation when the batch was made: a batch of an instance that died (its store
    recovered since by a new one) does nothing, so it cannot undo the new instance's work."""


@final
@attrs.frozen
class PageDone:
    """What a batch read: bodies as (seq, body), delta chunks as (key, records)."""

    bodies: tuple[tuple[int, bytes | None], ...] = ()
    """None: a durable store lost the body (a publish never confirmed, see ``DiskBodyStore``)."""
    chunks: tuple[tuple[int, tuple[DeltaRecord, ...]], ...] = ()


def run_page_batch(store: BodyStore, batch: PageBatch) -> PageDone:
    """Carry out ``batch`` on ``store`` (in a job); returns what it read (nothing, if the batch is stale)."""
    if batch.generation != getattr(store, "generation", 0):
        return PageDone()
    if batch.forget_from is not None:
        store.forget_from(batch.forget_from)
    writes = batch.writes
    if batch.chunk_writes:
        writes += tuple((key, pickle.dumps(records, pickle.HIGHEST_PROTOCOL)) for key, records in batch.chunk_writes)
    if writes:
        store.write(writes)
    keys = batch.reads + batch.chunk_reads
    values = store.read(keys) if keys else []
    deletes = batch.deletes + batch.chunk_deletes
    if deletes:
        store.delete(deletes)
    split = len(batch.reads)
    note_bytes_handled(sum(len(body) for _, body in writes) + sum(len(value) for value in values if value is not None))
    return PageDone(
        tuple(zip(batch.reads, values[:split], strict=True)),
        tuple((key, _chunk(key, value)) for key, value in zip(batch.chunk_reads, values[split:], strict=True)),
    )


def _chunk(key: int, value: bytes | None) -> tuple[DeltaRecord, ...]:
    """A delta chunk's records (deltas are a transient queue's, whose store never loses a value)."""
    if value is None:
        msg = f"delta chunk {key} is missing from the body store"
        raise KeyError(msg)
    records: tuple[DeltaRecord, ...] = pickle.loads(value)
    return records


@final
class MemoryBodyStore:
    """Bodies in a dict: the store's behaviour without a disk (it saves no RAM).

    ``durable``: the store of a durable queue whose journal is in memory (kept beside the journal, so
    it outlives the queue's instances): a body written twice is replaced, a lost one reads as None and
    deleting it does nothing, as ``DiskBodyStore(durable=True)``.
    """

    def __init__(self, durable: bool = False) -> None:
        self.bodies: dict[int, bytes] = {}
        self.durable = durable
        self.generation = 0  # bumped by each queue instance that recovers with this store (``PageBatch``)

    def write(self, bodies: Sequence[tuple[int, bytes]]) -> None:
        """Keep each (seq, body)."""
        for seq, body in bodies:
            if seq in self.bodies and not self.durable:
                msg = f"body of entry {seq} is stored already"
                raise ValueError(msg)
            self.bodies[seq] = body

    def read(self, seqs: Sequence[int]) -> list[bytes | None]:
        """The bodies of ``seqs``."""
        if self.durable:
            return [self.bodies.get(seq) for seq in seqs]
        return [self.bodies[seq] for seq in seqs]

    def delete(self, seqs: Sequence[int]) -> None:
        """Forget the bodies of ``seqs``."""
        for seq in seqs:
            if self.durable:
                self.bodies.pop(seq, None)
            else:
                del self.bodies[seq]

    def forget_from(self, seq: int) -> None:
        """Forget every body keyed ``seq`` or above."""
        for key in [key for key in list(self.bodies) if key >= seq]:  # a copy: a dead instance's job may pop one
            self.bodies.pop(key, None)
