"""DiskJournalStore: the runtime's actor journals kept in a ``SegmentLog``, so durable actors outlive the process.

Give it to a system (``TrioSystem(journal_store=DiskJournalStore(data_dir))``): every journal write
(events appended, a snapshot, a clear) is pickled in the handler that makes it and queued; one
writer thread, the store's I/O actor, takes whatever is queued as one batch, appends it to the log
and syncs once (group commit), then sends ``JournalSynced`` to the actors that asked
(``Journal.when_synced``), one answer per actor and journal for the whole batch. Handlers never
touch a file. Opening the store reads the log back, so a journal opened at a path starts with what
that path had written and synced before the process died.

On disk each batch's writes of one journal are records keyed ``path NUL seq``: ``E`` + the pickled
tuples of events (the writer joins a journal's event writes of a batch into one record of up to
``EVENTS_RECORD_BYTES``: one put per journal and batch, not per publish), ``S`` + the pickled
snapshot, or ``C`` (cleared). A snapshot or a clear is written before the deletions of the records
it replaces, and the log keeps a crash's prefix, so recovery (the latest ``S`` or ``C``, then the
``E`` records after it) never sees events without the state they follow.
"""

from __future__ import annotations

import copyreg
import io
import logging
import os
import pickle
import queue
import threading
from collections.abc import Callable, Sequence
from itertools import count
from typing import Any, Final, TypeAlias, final
from urllib.parse import quote

from conveyor.runtime import ActorRef, JournalSynced
from conveyor.runtime.lowlevel import Backend, WriteKind

from ._segment_files import FileSystem
from ._segment_log import DEFAULT_SEGMENT_SIZE, SegmentLog

logger = logging.getLogger("conveyor.storage")

EVENTS: Final = b"E"
SNAPSHOT: Final = b"S"
CLEARED: Final = b"C"
_KINDS: Final = {"events": EVENTS, "snapshot": SNAPSHOT, "clear": CLEARED}
EVENTS_RECORD_BYTES: Final = 1024 * 1024
"""A journal's event writes of one batch are joined into records of about this many bytes at most."""
BODIES_DIRECTORY: Final = "bodies"
"""The subdirectory of the store's directory that holds durable queues' body stores (``body_location``)."""
GC_EVERY_SYNCS: Final = 256
"""The writer collects garbage (compacts sparse segments) once per this many batches."""


# What handlers queue for the writer, as plain tuples told apart by their length (one is built per
# publish): a write, (path, number, kind, encoded value); a sync request, (ref, path, through); and
# the empty tuple, which stops the writer.
_Item: TypeAlias = "tuple[Any, ...]"

_STOP: Final = ()


def _ref_from_disk(path: str) -> ActorRef:
    """Stands in the pickle for an ``ActorRef``; the store's unpickler maps it to ``Backend.gone_ref``."""
    msg = f"a journal's ref to {path} is read only through DiskJournalStore"
    raise RuntimeError(msg)


def _reduce_ref(ref: ActorRef) -> tuple[Callable[[str], ActorRef], tuple[str]]:
    return _ref_from_disk, (ref.path,)


_DISPATCH: Final = {**copyreg.dispatch_table, ActorRef: _reduce_ref}


class _RefPickler(pickle.Pickler):
    dispatch_table = _DISPATCH


REUSE_PICKLER_BYTES: Final = 4096
"""A thread's pickler is reused after values up to this size; a larger one may have grown its memo
table (a snapshot: one entry per object), which ``clear_memo`` would sweep on every later value."""


class _Encoders(threading.local):
    """One pickler and buffer per thread, reused: building them took most of encoding a small event."""

    def __init__(self) -> None:
        self.fresh()

    def fresh(self) -> None:
        self.buffer = io.BytesIO()
        self.pickler = _RefPickler(self.buffer, pickle.HIGHEST_PROTOCOL)


_encoders: Final = _Encoders()


def encode_value(value: object) -> bytes:
    """Pickle ``value``; each ``ActorRef`` in it is kept as its path (the actor will not outlive the process)."""
    encoders = _encoders
    buffer = encoders.buffer
    pickler = encoders.pickler
    try:
        pickler.dump(value)
    except BaseException:
        encoders.fresh()  # a failed value leaves nothing behind
        raise
    data = buffer.getvalue()
    if len(data) > REUSE_PICKLER_BYTES:
        encoders.fresh()
    else:  # each value is pickled alone, as by a fresh pickler
        pickler.clear_memo()
        buffer.seek(0)
        buffer.truncate()
    return data


class _Unpickler(pickle.Unpickler):
    """Reads ``encode_value``'s bytes: a stored ref becomes ``gone(path)``, one object per path."""

    def __init__(self, data: bytes | io.BytesIO, gone: Callable[[str], ActorRef]) -> None:
        super().__init__(data if isinstance(data, io.BytesIO) else io.BytesIO(data))
        self._gone = gone

    def find_class(self, module: str, name: str) -> Any:
        if module == __name__ and name == "_ref_from_disk":
            return self._gone
        return super().find_class(module, name)


def decode_value(data: bytes, gone: Callable[[str], ActorRef]) -> Any:
    """The value ``encode_value`` wrote, its refs made by ``gone``."""
    return _Unpickler(data, gone).load()


def decode_events(data: bytes, gone: Callable[[str], ActorRef]) -> list[object]:
    """The events of one ``E`` record: each ``encode_value``'d tuple joined into it, in order."""
    stream = io.BytesIO(data)
    events: list[object] = []
    while stream.tell() < len(data):
        events.extend(_Unpickler(stream, gone).load())  # a fresh memo per pickle: each was dumped alone
    return events


def journal_key(path: str, seq: int) -> bytes:
    """The log key of write ``seq`` of the journal at ``path``."""
    return path.encode() + b"\0" + seq.to_bytes(8, "big")


def _parse_key(key: bytes) -> tuple[str, int]:
    return key[:-9].decode(), int.from_bytes(key[-8:], "big")


Recovered: TypeAlias = "tuple[bytes | None, list[bytes]]"
"""A journal as read from the log, still encoded: its snapshot's bytes (or None) and its events' batches."""


def recover_journals(log: SegmentLog) -> tuple[dict[str, Recovered], dict[str, list[int]]]:
    """Each path's snapshot and event batches (encoded) as the log holds them, and its live write numbers."""
    records: dict[str, list[tuple[int, bytes]]] = {}
    for key, value in log.items():
        path, seq = _parse_key(key)
        records.setdefault(path, []).append((seq, value))
    journals: dict[str, Recovered] = {}
    live: dict[str, list[int]] = {}
    for path, writes in records.items():
        writes.sort(key=lambda write: write[0])
        live[path] = [seq for seq, _ in writes]
        base = max((i for i, (_, value) in enumerate(writes) if value[:1] in (SNAPSHOT, CLEARED)), default=-1)
        snapshot = writes[base][1][1:] if base >= 0 and writes[base][1][:1] == SNAPSHOT else None
        events = [value[1:] for _, value in writes[base + 1:]]
        if snapshot is not None or events:
            journals[path] = (snapshot, events)
    return journals, live


@final
class DiskJournalStore:
    """A ``JournalStore`` on a segment log in ``directory``: writes queued by handlers, synced by one thread.

    Args:
        directory: where the log's segment files live (created if missing); opening recovers them.
        segment_size: passed to ``SegmentLog``.
        fs: the file operations to use (tests slow them down or fail them; the simulator's disk).
        threaded: False starts no writer thread: whoever drives the store calls ``write_queued``
            (the simulator does, at virtual times, so its syncs come back as messages in its own time).
        first_write: the number of the first write; a store reopened in the same system continues
            the numbers, so an answer to a write of the earlier store never confirms a later one.
        gc_every: batches between garbage collections (the simulator collects often, to test it).
    """

    def __init__(
        self, directory: str | os.PathLike[str], *, segment_size: int = DEFAULT_SEGMENT_SIZE,
        fs: FileSystem | None = None, threaded: bool = True, first_write: int = 1, gc_every: int = GC_EVERY_SYNCS,
    ) -> None:
        if type(gc_every) is not int or gc_every < 1:
            msg = f"gc_every must be a number of batches >= 1, got {gc_every!r}"
            raise ValueError(msg)
        self.directory = os.fspath(directory)
        self.fs = fs
        """The file operations the log uses (None: the real ones); a durable queue's body store uses them too."""
        self._log = SegmentLog(self.directory, segment_size=segment_size, fs=fs)
        recovery = self._log.recovery
        if recovery.truncated or recovery.damaged:
            logger.warning("journal store %s: recovery cut torn tails %s, damaged segments %s",
                           self.directory, recovery.truncated, recovery.damaged)
        self._recovered, self._live = recover_journals(self._log)
        self._next_seq = {path: (seqs[-1] + 1 if seqs else 1) for path, seqs in self._live.items()}
        self._numbers = count(first_write)
        self._threaded = threaded
        self._gc_every = gc_every
        self._queue: queue.SimpleQueue[_Item] = queue.SimpleQueue()
        self._system: Backend | None = None
        self._gone: dict[str, ActorRef] = {}
        self._thread: threading.Thread | None = None
        self._synced: dict[str, int] = {}  # the writer's: each journal's highest write number synced
        self.failure: BaseException | None = None
        """What stopped the writer (a disk error): nothing is synced or confirmed after it."""
        self.batches = 0
        """Batches written and synced (each one fsync)."""

    @property
    def recovered_paths(self) -> tuple[str, ...]:
        """The journals recovered from disk and not yet opened."""
        return tuple(self._recovered)

    def body_location(self, path: str) -> tuple[str, FileSystem | None]:
        """Where the actor at ``path`` keeps data beside its journal (a durable paged queue's bodies): a
        directory of its own under ``bodies/`` (the log ignores it) and the file operations to use."""
        return os.path.join(self.directory, BODIES_DIRECTORY, quote(path, safe="")), self.fs

    def start(self, system: Backend) -> None:
        """Start the writer thread; ``JournalSynced`` answers go through ``system.tell_from_thread``."""
        if self._system is not None:
            msg = f"journal store {self.directory} is already started: give one store to one system"
            raise RuntimeError(msg)
        self._system = system
        if not self._threaded:
            return
        self._thread = threading.Thread(target=self._run, name="conveyor-journal-store", daemon=True)
        self._thread.start()

    def load(self, path: str) -> tuple[object, Sequence[object]]:
        """What the log held for ``path`` when the store opened (once: later opens get nothing).

        Refs in it name actors of the earlier process: they come back as the system's ``gone_ref``.
        """
        recovered = self._recovered.pop(path, None)
        if recovered is None:
            return None, ()
        snapshot, batches = recovered
        events: list[object] = []
        for batch in batches:
            events.extend(decode_events(batch, self._gone_ref))
        return (None if snapshot is None else self._decode(snapshot)), events

    def _decode(self, data: bytes) -> Any:
        return decode_value(data, self._gone_ref)

    def _gone_ref(self, path: str) -> ActorRef:
        ref = self._gone.get(path)
        if ref is None:
            if self._system is None:
                msg = f"journal store {self.directory}: start() it with a system before loading journals"
                raise RuntimeError(msg)
            ref = self._gone[path] = self._system.gone_ref(path)
        return ref

    def write(self, path: str, kind: WriteKind, value: object) -> int:
        """Pickle ``value`` and queue it; returns the write's number (a pickling error queues nothing)."""
        data = b"" if kind == "clear" else encode_value(value)
        number = next(self._numbers)
        self._queue.put((path, number, _KINDS[kind], data))
        return number

    def notify_when_synced(self, ref: ActorRef, path: str, through: int) -> None:
        """Queue the request behind the writes it waits for: the batch that syncs them answers it.

        The answer names the journal's highest write synced by then (``>= through``), so one
        request can confirm writes made after it; a request whose writes an earlier batch synced
        is answered as soon as the writer takes it, before it writes anything.
        """
        self._queue.put((ref, path, through))

    def close(self) -> None:
        """Write and sync what is queued, stop the writer and close the log (a clean stop)."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(_STOP)
            thread.join()
        elif not self._threaded:
            self.write_queued()
        self._log.close()

    @property
    def queued(self) -> bool:
        """Whether writes or sync requests wait for ``write_queued`` (or the writer thread)."""
        return not self._queue.empty()

    def write_queued(self) -> None:
        """Without a writer thread: write what is queued as one batch, sync once, answer (one group commit).

        A disk error is kept in ``failure`` (nothing is confirmed after it), as the thread keeps it.
        """
        if self._threaded:
            msg = f"journal store {self.directory} has a writer thread: it writes the queue itself"
            raise RuntimeError(msg)
        self._write_drained(self._drain(self._queue.get_nowait()) if self.queued else [])

    def _drain(self, first: _Item) -> list[_Item]:
        batch = [first]
        while True:
            try:
                batch.append(self._queue.get_nowait())
            except queue.Empty:
                return batch

    def _write_drained(self, batch: list[_Item]) -> None:
        if self.failure is not None or not batch:
            return  # the disk failed: nothing more is confirmed (the process must reopen the store)
        try:
            self._write_batch(batch)
        except Exception as error:
            self.failure = error
            if self._threaded:  # a driver without the thread reads ``failure`` and decides
                logger.exception("journal store %s: writing failed; no write is confirmed from now on",
                                 self.directory)

    # -- the writer thread -------------------------------------------------------------------

    def _run(self) -> None:
        stopping = False
        while not stopping:
            batch = self._drain(self._queue.get())
            stopping = _STOP in batch
            self._write_drained(batch)

    def _write_batch(self, batch: list[_Item]) -> None:
        # One answer per (actor, journal) and batch, naming the highest write synced: a queue asks
        # after a publish, and one JournalSynced per publish cost a cross-thread wake-up and a
        # message each. A request an earlier batch already covers is answered before this one's fsync.
        system = self._system
        synced = self._synced
        notices: dict[tuple[ActorRef, str], int] = {}
        events: dict[str, list[bytes]] = {}  # each journal's event writes not yet put, in order
        held_bytes: dict[str, int] = {}
        written: dict[str, int] = {}  # each journal's highest write number in this batch
        for item in batch:
            size = len(item)
            if size == 4:
                path, number, kind, value = item
                written[path] = number
                if kind == EVENTS:
                    events.setdefault(path, []).append(value)
                    held = held_bytes[path] = held_bytes.get(path, 0) + len(value)
                    if held >= EVENTS_RECORD_BYTES:
                        self._put_events(path, events.pop(path))
                        del held_bytes[path]
                    continue
                held_bytes.pop(path, None)
                before = events.pop(path, None)
                if before is not None:  # the events before this snapshot or clear go first
                    self._put_events(path, before)
                self._apply(path, kind, value)
            elif size == 3:
                ref, path, through = item
                done = synced.get(path, 0)
                if done >= through:  # its writes came before it: none of them is in this batch
                    if system is not None:  # synced already: no need to wait for this batch's fsync
                        system.tell_from_thread(ref, JournalSynced(path, done))
                elif notices.get((ref, path), 0) < through:
                    notices[ref, path] = through
        for path, values in events.items():
            self._put_events(path, values)
        if written:
            self._log.sync()
            synced.update(written)
            self.batches += 1
            if self.batches % self._gc_every == 0:
                self._log.collect_garbage()
        if system is not None:
            for (ref, path), through in notices.items():
                system.tell_from_thread(ref, JournalSynced(path, max(through, synced.get(path, 0))))

    def _put_events(self, path: str, values: list[bytes]) -> None:
        """One ``E`` record for a journal's event writes of a batch (``decode_events`` splits it again)."""
        seq = self._next_seq.get(path, 1)
        self._next_seq[path] = seq + 1
        self._log.put(journal_key(path, seq), EVENTS + b"".join(values))
        self._live.setdefault(path, []).append(seq)

    def _apply(self, path: str, kind: bytes, value: bytes) -> None:
        """Put a snapshot or a clear, then delete the records it replaces."""
        log = self._log
        seq = self._next_seq.get(path, 1)
        self._next_seq[path] = seq + 1
        live = self._live.setdefault(path, [])
        log.put(journal_key(path, seq), kind + value)
        for old in live:  # the snapshot or clear is written first: a crash keeps a prefix of these
            log.delete(journal_key(path, old))
        live.clear()
        if kind == SNAPSHOT:
            live.append(seq)
        else:
            log.delete(journal_key(path, seq))  # nothing is left to describe
