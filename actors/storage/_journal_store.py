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

The store keeps no value in RAM once it is written: a journal reads its snapshot and events back
from the log (``read_snapshot``, ``read_events``), and RAM holds only each journal's live record
numbers (one per batch, not per event) and the refs its values name (few: consumers, dead-letter
targets). A read sees every write made before it: with the writer thread running it is served by
the writer, in queue order, after the writes queued before it (the writer is the log's only
user, so no lock is needed); without it (the simulator, or before ``start``) the caller owns the
log and reads the queued writes it has not written yet beside it.
"""

from __future__ import annotations

import copyreg
import io
import itertools
import logging
import os
import pickle
import queue
import threading
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from itertools import count
from typing import Any, Final, TypeAlias, final
from urllib.parse import quote

import attrs

from conveyor.runtime import ActorRef, JournalSynced
from conveyor.runtime.lowlevel import Backend, WriteKind

from ._heap_trim import note_bytes_handled
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
READ_CHUNK_BYTES: Final = 1024 * 1024
"""A read of a journal's events hands over records of about this many bytes at a time."""


# What handlers queue for the writer, as plain tuples told apart by their length (one is built per
# publish): a write, (path, number, kind, encoded value); a sync request, (ref, path, through); a
# read, (reply queue, (path, after)): ``after`` -1 asks for the snapshot, else for the event records
# numbered above it; and the empty tuple, which stops the writer.
_Item: TypeAlias = "tuple[Any, ...]"

_STOP: Final = ()
_NO_REFS: Final[Sequence[ActorRef]] = ()


def _ref_from_disk(path: str, uid: int | None = None) -> ActorRef:
    """Stands in the pickle for an ``ActorRef`` (its path and the actor's id in its process); the store's
    unpickler maps it back to that actor if this store wrote it, else to ``Backend.gone_ref``."""
    msg = f"a journal's ref to {path} is read only through DiskJournalStore"
    raise RuntimeError(msg)


def _reduce_ref(ref: ActorRef) -> tuple[Callable[[str, int], ActorRef], tuple[str, int]]:
    _encoders.refs.append(ref)  # the store remembers it: read back in this process, it is this ref again
    return _ref_from_disk, (ref.path, ref.cell.uid)


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
        self.refs: list[ActorRef] = []  # the refs the value being encoded names


_encoders: Final = _Encoders()


def encode_value(value: object) -> bytes:
    """Pickle ``value``; each ``ActorRef`` in it is kept as its path and its actor's id in this process (the
    actor will not outlive the process: another process reads it as a gone ref)."""
    return _encode(value)[0]


def _encode(value: object) -> tuple[bytes, Sequence[ActorRef]]:
    """``encode_value``'s bytes and the refs they name."""
    encoders = _encoders
    if encoders.refs:
        encoders.refs = []
    buffer = encoders.buffer
    pickler = encoders.pickler
    try:
        pickler.dump(value)
    except BaseException:
        encoders.fresh()  # a failed value leaves nothing behind
        raise
    data = buffer.getvalue()
    if len(data) > REUSE_PICKLER_BYTES:
        refs = encoders.refs
        encoders.fresh()
        return data, refs
    pickler.clear_memo()  # each value is pickled alone, as by a fresh pickler
    buffer.seek(0)
    buffer.truncate()
    return data, encoders.refs


RefResolver: TypeAlias = "Callable[..., ActorRef]"
"""Makes a stored ref an ``ActorRef`` again: called with its path and (if it was stored with one) the
actor's id in the process that wrote it."""


class _Unpickler(pickle.Unpickler):
    """Reads ``encode_value``'s bytes: a stored ref becomes ``gone(path, uid)``."""

    def __init__(self, data: bytes | io.BytesIO, gone: RefResolver) -> None:
        super().__init__(data if isinstance(data, io.BytesIO) else io.BytesIO(data))
        self._gone = gone

    def find_class(self, module: str, name: str) -> Any:
        if module == __name__ and name == "_ref_from_disk":
            return self._gone
        return super().find_class(module, name)


def decode_value(data: bytes, gone: RefResolver) -> Any:
    """The value ``encode_value`` wrote, its refs made by ``gone``."""
    return _Unpickler(data, gone).load()


def decode_events(data: bytes, gone: RefResolver) -> list[object]:
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


@final
@attrs.frozen
class RecoveredJournal:
    """Where a journal's records lie in the log as recovered: no value, only write numbers."""

    snapshot: int | None
    """The number of its snapshot's record (None: no snapshot): the first of its live records."""
    stale: tuple[int, ...]
    """Records before its latest snapshot or clear that a crash kept: deleted with the next one."""


def recover_journals(log: SegmentLog) -> tuple[dict[str, RecoveredJournal], dict[str, list[int]]]:
    """Each path's snapshot record and stale records, and the numbers of its live records (the snapshot's
    first, then its events' in order): the latest ``S`` or ``C`` and what follows it.

    Only each record's kind is kept while the log is read, never its value: a journal is read back from
    the log when it is replayed.
    """
    records: dict[str, list[tuple[int, bytes]]] = {}
    for key, value in log.items():
        path, seq = _parse_key(key)
        records.setdefault(path, []).append((seq, value[:1]))
    journals: dict[str, RecoveredJournal] = {}
    live: dict[str, list[int]] = {}
    for path, writes in records.items():
        writes.sort(key=lambda write: write[0])
        base = max((i for i, (_, kind) in enumerate(writes) if kind in (SNAPSHOT, CLEARED)), default=-1)
        has_snapshot = base >= 0 and writes[base][1] == SNAPSHOT
        first = base if has_snapshot else base + 1
        live[path] = [seq for seq, _ in writes[first:]]
        journals[path] = RecoveredJournal(writes[base][0] if has_snapshot else None,
                                          tuple(seq for seq, _ in writes[:first]))
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
        heads, self._live = recover_journals(self._log)
        # The log's owner's (the writer's, or the caller's without one): each journal's live records
        # (its snapshot's first), those a crash left before them, and its snapshot's record number.
        self._snapshot_at = {path: head.snapshot for path, head in heads.items() if head.snapshot is not None}
        self._stale = {path: list(head.stale) for path, head in heads.items() if head.stale}
        self._next_seq = {path: max([*self._live[path], *head.stale]) + 1 for path, head in heads.items()}
        self._recovered = {path: (head.snapshot is not None, len(self._live[path]) > (head.snapshot is not None))
                           for path, head in heads.items()}
        self._refs: dict[str, dict[int, ActorRef]] = {}  # each journal's refs written by this store, by actor id
        self._numbers = count(first_write)
        self._threaded = threaded
        self._gc_every = gc_every
        self._queue: queue.SimpleQueue[_Item] = queue.SimpleQueue()
        self._held: list[_Item] = []  # taken from the queue by a read without the writer, not yet written
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
        return tuple(path for path, (snapshot, events) in self._recovered.items() if snapshot or events)

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
        thread = threading.Thread(target=self._run, name="conveyor-journal-store", daemon=True)
        thread.start()
        self._thread = thread

    def recovered(self, path: str) -> tuple[bool, bool]:
        """Whether the log held a snapshot for ``path`` when the store opened, and events after it (once:
        later opens get ``(False, False)``). A journal reads them with ``read_snapshot`` / ``read_events``."""
        return self._recovered.pop(path, (False, False))

    def read_snapshot(self, path: str) -> object:
        """The latest snapshot written for ``path`` (None: none since it was created or cleared), written
        or still queued. Refs in it name the actors this store's writes named, or, written by an
        earlier process, the system's ``gone_ref``."""
        data = self._request(path, -1) if self._thread is not None else self._read_direct(path)[0]
        return None if data is None else decode_value(data, self._resolver(path))  # type: ignore[arg-type]

    def read_events(self, path: str) -> Iterator[object]:
        """The events written for ``path`` after its latest snapshot, written or still queued, oldest first.

        Read a record (about ``READ_CHUNK_BYTES`` of them with the writer thread) at a time: iterate it
        inside the handler that asked, before the journal writes again.
        """
        resolve = self._resolver(path)
        for data in self._event_records(path):
            yield from decode_events(data, resolve)

    def _event_records(self, path: str) -> Iterator[bytes]:
        if self._thread is None:
            yield from self._read_direct(path)[1]
            return
        after = 0
        while True:
            answer: tuple[list[bytes], int] = self._request(path, after)  # type: ignore[assignment]
            values, after = answer
            if not values:
                return
            yield from values

    def _request(self, path: str, after: int) -> object:
        """Have the writer serve a read once it has put every write queued before it; its answer."""
        reply: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._queue.put((reply, (path, after)))
        while True:
            try:
                answer = reply.get(timeout=1.0)
                break
            except queue.Empty:
                thread = self._thread
                if thread is None or not thread.is_alive():
                    msg = f"journal store {self.directory} stopped before it answered a read of {path}"
                    raise RuntimeError(msg) from None
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def _read_direct(self, path: str) -> tuple[bytes | None, Iterator[bytes]]:
        """Without a writer thread: the snapshot and event records of ``path``, what is queued included."""
        held = self._held
        held.extend(self._drain(None))
        snapshot: bytes | None = None
        from_log = True
        queued: list[bytes] = []
        for item in held:
            if len(item) == 4 and item[0] == path:
                kind = item[2]
                if kind == EVENTS:
                    queued.append(item[3])
                else:
                    from_log = False
                    snapshot = item[3] if kind == SNAPSHOT else None
                    queued.clear()
        if from_log:
            records = (value for _, value in self._records_after(path, 0))
            return self._snapshot_record(path), itertools.chain(records, queued)
        return snapshot, iter(queued)

    def _snapshot_record(self, path: str) -> bytes | None:
        seq = self._snapshot_at.get(path)
        return None if seq is None else self._log.get(journal_key(path, seq))[1:]

    def _records_after(self, path: str, after: int) -> Iterator[tuple[int, bytes]]:
        """Each event record of ``path`` numbered above ``after``: its number and value, read from the log."""
        live = self._live.get(path, ())
        start = max(bisect_right(live, after), 1 if path in self._snapshot_at else 0)
        for seq in itertools.islice(live, start, None):
            yield seq, self._log.get(journal_key(path, seq))[1:]

    def _serve(self, path: str, after: int) -> object:
        """The writer's answer to a read: the snapshot's bytes, or the next event records and the last one's number."""
        if after < 0:
            return self._snapshot_record(path)
        values: list[bytes] = []
        size = 0
        last = after
        for last, value in self._records_after(path, after):  # noqa: B007 - the last one read is the answer's
            values.append(value)
            size += len(value)
            if size >= READ_CHUNK_BYTES:
                break
        return values, last

    def _resolver(self, path: str) -> RefResolver:
        """Makes the refs of ``path``'s values: those this store wrote are the same refs again, others gone."""
        written = self._refs.get(path)

        def resolve(ref_path: str, uid: int | None = None) -> ActorRef:
            if written is not None and uid is not None:
                ref = written.get(uid)
                if ref is not None and ref.path == ref_path:
                    return ref
            return self._gone_ref(ref_path)

        return resolve

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
        if kind == "clear":
            data, refs = b"", _NO_REFS
        else:
            data, refs = _encode(value)
        if refs or kind != "events":  # a snapshot or a clear replaces every value before it, and their refs
            self._note_refs(path, kind, refs)
        number = next(self._numbers)
        self._queue.put((path, number, _KINDS[kind], data))
        return number

    def _note_refs(self, path: str, kind: WriteKind, refs: Sequence[ActorRef]) -> None:
        """Remember the refs ``path``'s values name while one of them does: reads give back the same refs."""
        by_uid = {ref.cell.uid: ref for ref in refs}
        if kind == "events":
            self._refs.setdefault(path, {}).update(by_uid)
        elif by_uid:
            self._refs[path] = by_uid
        else:
            self._refs.pop(path, None)

    def notify_when_synced(self, ref: ActorRef, path: str, through: int) -> None:
        """Queue the request behind the writes it waits for: the batch that syncs them answers it.

        The answer names the journal's highest write synced by then (``>= through``), so one
        request can confirm writes made after it; a request whose writes an earlier batch synced
        is answered as soon as the writer takes it, before it writes anything.
        """
        self._queue.put((ref, path, through))

    def close(self) -> None:
        """Write and sync what is queued, stop the writer and close the log (a clean stop)."""
        thread = self._thread
        if thread is not None:
            self._queue.put(_STOP)
            thread.join()
            self._thread = None  # only now: until the writer stops, a read must go through it
        elif not self._threaded:
            self.write_queued()
        self._log.close()

    @property
    def queued(self) -> bool:
        """Whether writes or sync requests wait for ``write_queued`` (or the writer thread)."""
        return bool(self._held) or not self._queue.empty()

    def write_queued(self) -> None:
        """Without a writer thread: write what is queued as one batch, sync once, answer (one group commit).

        A disk error is kept in ``failure`` (nothing is confirmed after it), as the thread keeps it.
        """
        if self._threaded:
            msg = f"journal store {self.directory} has a writer thread: it writes the queue itself"
            raise RuntimeError(msg)
        batch, self._held = self._held, []
        batch.extend(self._drain(None))
        self._write_drained(batch)

    def _drain(self, first: _Item | None) -> list[_Item]:
        """``first`` and every item queued after it (None: whatever is queued, perhaps nothing)."""
        batch = [] if first is None else [first]
        while True:
            try:
                batch.append(self._queue.get_nowait())
            except queue.Empty:
                return batch

    def _write_drained(self, batch: list[_Item]) -> None:
        if self.failure is not None:  # the disk failed: nothing more is confirmed (the process must reopen the store)
            self._refuse_reads(batch)
            return
        if not batch:
            return
        try:
            self._write_batch(batch)
        except Exception as error:
            self.failure = error
            self._refuse_reads(batch)
            if self._threaded:  # a driver without the thread reads ``failure`` and decides
                logger.exception("journal store %s: writing failed; no write is confirmed from now on",
                                 self.directory)

    def _refuse_reads(self, batch: list[_Item]) -> None:
        """Answer the reads of a batch the failed disk will not serve (one already answered ignores it)."""
        for item in batch:
            if len(item) == 2:
                msg = f"journal store {self.directory} failed ({self.failure!r}): its journals cannot be read back"
                item[0].put(RuntimeError(msg))

    # -- the writer thread -------------------------------------------------------------------

    def _run(self) -> None:
        stopping = False
        batch, self._held = self._held, []  # queued and read before the thread started
        while not stopping:
            batch.extend(self._drain(self._queue.get()) if not batch else self._drain(None))
            stopping = _STOP in batch
            self._write_drained(batch)
            batch = []

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
            elif size == 2:
                reply, (path, after) = item
                held_bytes.pop(path, None)
                before = events.pop(path, None)
                if before is not None:  # the read sees them: put them now (this batch still syncs them)
                    self._put_events(path, before)
                try:
                    answer = self._serve(path, after)
                except Exception as error:  # noqa: BLE001 - the reader raises it
                    answer = error
                reply.put(answer)
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
        record = EVENTS + b"".join(values)
        self._log.put(journal_key(path, seq), record)
        self._live.setdefault(path, []).append(seq)
        note_bytes_handled(len(record))

    def _apply(self, path: str, kind: bytes, value: bytes) -> None:
        """Put a snapshot or a clear, then delete the records it replaces."""
        log = self._log
        seq = self._next_seq.get(path, 1)
        self._next_seq[path] = seq + 1
        live = self._live.setdefault(path, [])
        log.put(journal_key(path, seq), kind + value)
        for old in [*self._stale.pop(path, ()), *live]:  # after it: a crash keeps a prefix of these
            log.delete(journal_key(path, old))
        live.clear()
        if kind == SNAPSHOT:
            live.append(seq)
            self._snapshot_at[path] = seq
        else:
            self._snapshot_at.pop(path, None)
            log.delete(journal_key(path, seq))  # nothing is left to describe
