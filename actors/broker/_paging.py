"""BodyPager: which bodies of a queue's entries stay in RAM under a memory target (sans-IO).

The ``EntryList`` keeps every entry, its order and its state exactly; the pager only decides
where each live entry's body is: in RAM, or in the queue's body store with ``entry.paged`` set
(the entry keeps its headers and options, which is all the list's rules read). Its disk work is
data: ``take_batch`` hands the shell a ``PageBatch`` (writes, reads, deletes) to run in a job,
and ``loaded`` takes the bodies the job read. Rules, after every handler (``balance``):

* Over the target, bodies leave RAM: first those of acquired entries, the most recently
  delivered first (their delivery already carries the body; they are needed again only if given
  back, as RabbitMQ pages unacknowledged messages first), then those of available entries deepest
  in the queue (lowest priority level, latest seq): the ones needed last.
* Under the target, the shallowest paged-out available bodies are read back ahead of need
  (read-ahead), as many as fit beside what is held and being read; a shallower paged body may
  push out a deeper one, so what RAM holds tends to be the queue's head.
* A delivery, a browse or a dead letter whose body is paged out asks for it (``need``): the
  shell holds that answer back until ``loaded`` brings the body, and sends in order.

A body is written to the store once, the first time it is paged out, and deleted once its
entry reaches a final state (``EntryList.take_unstored``); reads in a batch run before its
deletes, so a dead letter can still read the body of the entry it settles.

A durable queue's pager (``durable=True``) writes every body as it is published (write-through,
the store syncs it; ``unsynced`` holds the bodies not yet synced, which a snapshot keeps), holds
the deletes of settled entries until their journal write is synced (``hold_deletes`` /
``release_deletes``: the settle must survive a crash before the body goes), keeps the bodies of dead
letters the queue owes until they are sent (``keep`` / ``release_kept``), and reports bodies the
store lost (``lost``: publishes never confirmed) for the queue to drop. Its delta chunks are kept
(``unsynced_chunks``) until their write is synced, then announced (``chunk_stored``) for the queue
to journal the push; a chunk read back is deleted once its journaled load is synced
(``hold_chunk_deletes``).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterable
from typing import final

from ._body_store import DeltaRecord, PageBatch, PageDone
from ._entries import DeltaChunk, Entry, EntryList, EntryState

_AVAILABLE = EntryState.AVAILABLE
_ACQUIRED = EntryState.ACQUIRED


@final
class BodyPager:
    """Keeps the bodies of ``entries`` in RAM within ``target_bytes`` (``Message.size`` counted).

    Args:
        entries: the queue's entry list (the pager swaps bodies in and out of its entries).
        target_bytes: bytes of bodies the queue may hold in RAM, live entries only; 0 pages every body.
            Each body held (or being read) also counts ``entry_bytes``.
        chunk_entries: with delta on, entries move out of RAM (into a level's delta) this many at a
            time; None keeps every entry in RAM.
        keep_entries: available entries kept in RAM: chunks go to delta while more than this and a
            chunk are, and come back once no more than this are.
        durable: a durable queue's: write every body as it is published, see the module.
        entry_bytes: what holding a body costs beside its bytes (its message object, the entry's share
            of the list and the pager's heaps): a target then bounds RAM, not only body bytes
            (``QueueActor.make_pager`` passes ``ENTRY_RAM_BYTES``). 0 counts body bytes only.
    """

    def __init__(
        self, entries: EntryList, target_bytes: int, chunk_entries: int | None = None, keep_entries: int = 0,
        durable: bool = False, entry_bytes: int = 0,
    ) -> None:
        if type(target_bytes) is not int or target_bytes < 0:
            msg = f"BodyPager.target_bytes must be an int >= 0, got {target_bytes!r}"
            raise ValueError(msg)
        if chunk_entries is not None and (type(chunk_entries) is not int or chunk_entries < 1):
            msg = f"BodyPager.chunk_entries must be None or an int >= 1, got {chunk_entries!r}"
            raise ValueError(msg)
        if type(keep_entries) is not int or keep_entries < 0:
            msg = f"BodyPager.keep_entries must be an int >= 0, got {keep_entries!r}"
            raise ValueError(msg)
        if type(entry_bytes) is not int or entry_bytes < 0:
            msg = f"BodyPager.entry_bytes must be an int >= 0, got {entry_bytes!r}"
            raise ValueError(msg)
        self.entry_bytes = entry_bytes
        self.entries = entries
        self.target_bytes = target_bytes
        self.chunk_entries = chunk_entries
        self.keep_entries = keep_entries
        self._chunk_writes: list[tuple[int, tuple[DeltaRecord, ...]]] = []
        self._chunk_reads: list[int] = []
        self._chunk_deletes: list[int] = []
        self.loading: dict[int, int] = {}
        """Delta chunks being read back: key -> level."""
        self._next_chunk = -1  # chunk keys count down from -1: bodies have the positive keys
        # Entries read back from a delta never go to one again: a walk that had to load them (and
        # passed them) would otherwise meet them again after a push, and so on without end.
        self.came_back: set[int] = set()
        # Lazy heaps of seqs (stale items skipped when met, rebuilt when they dominate):
        self._deepest: list[tuple[int, int, int]] = []  # (-rank, -seq, seq): available bodies in RAM, deepest first
        self._shallowest: list[tuple[int, int]] = []  # (rank, seq): available bodies paged out, shallowest first
        self._delivered: list[int] = []  # seqs acquired with a body in RAM, latest last
        self._writes: list[tuple[int, bytes]] = []
        self._reads: list[int] = []
        self.reading: dict[int, int] = {}
        """Seqs asked of the store and not yet ``loaded``, with their sizes."""
        self.reading_bytes = 0
        self.in_flight = False
        """Whether a batch is with the store (the shell runs one at a time)."""
        self.written = 0
        self.read = 0
        self.deleted = 0
        self.durable = durable
        self.unsynced: dict[int, bytes] = {}
        """Durable: bodies handed to the store whose write is not yet synced (a snapshot must keep them)."""
        self._unsynced_order: deque[int] = deque()  # their seqs, in write order (= seq order)
        self._in_flight_writes = 0  # writes of the batch in flight (durable: the head of ``_unsynced_order``)
        self.lost: list[int] = []
        """Durable: available entries whose body the store did not have (dropped by the queue)."""
        self._held_deletes: deque[tuple[int, list[int]]] = deque()  # (journal write, seqs) not yet synced
        self._ready_deletes: list[int] = []
        self.forget_from: int | None = None
        """Durable, after a recovery: the next batch first forgets the store's bodies from this seq on."""
        self.generation = 0
        """Durable: the store's generation this instance recovered with (its batches carry it)."""
        self.kept: set[int] = set()
        """Durable: settled entries whose body stays in the store until ``release_kept`` (dead letters owed)."""
        self._released: list[int] = []  # kept bodies released since the last batch: deleted like settled ones
        self.unsynced_chunks: dict[int, tuple[DeltaRecord, ...]] = {}
        """Durable: delta chunks handed to the store whose write is not yet synced, key -> records (a
        snapshot keeps their entries in full: no journal event names them yet)."""
        self._chunk_ranks: dict[int, tuple[int, DeltaChunk]] = {}  # durable: (level, chunk) of ``unsynced_chunks``
        self._in_flight_chunks: tuple[int, ...] = ()  # durable: keys of the chunks the batch in flight writes
        self.chunk_stored: Callable[[int, DeltaChunk], None] | None = None
        """Durable: told (level, chunk) once a chunk's write is synced, before anything reads it back (the
        queue journals the push there, so replay moves the same entries out of RAM)."""
        self._loaded_chunks: list[int] = []  # durable on disk: chunks read back, deleted once that is journaled
        self.hold_chunk_deletes = False
        """Durable on disk: a chunk read back is deleted with the deletes ``hold_deletes`` holds, once the
        journal's event of its load is synced (a crash before would still need it)."""

    @property
    def held_bytes(self) -> int:
        """Bytes of the live entries' bodies in RAM."""
        entries = self.entries
        return entries.live_bytes - entries.paged_bytes

    @property
    def held_cost(self) -> int:
        """What the target bounds: ``held_bytes`` and ``entry_bytes`` for each body in RAM."""
        entries = self.entries
        held = entries.live_bytes - entries.paged_bytes
        if self.entry_bytes:
            held += self.entry_bytes * (entries.available + entries.acquired - entries.paged)
        return held

    # --- what happened to entries ----------------------------------------------------------

    def published(self, entry: Entry) -> None:
        """A new entry, its body in RAM (durable: and on its way to the store)."""
        if self.durable:
            body = entry.message.body
            entry.stored = True
            self._writes.append((entry.seq, body))
            self.unsynced[entry.seq] = body
            self._unsynced_order.append(entry.seq)
        heapq.heappush(self._deepest, (-entry.position[0], -entry.seq, entry.seq))

    def recovered(self) -> None:
        """A durable queue rebuilt its entries: track each in RAM (the deltas' stay in the store), write the
        bodies the store lacks, and name new chunks below every chunk the deltas hold."""
        entries = self.entries
        keys = [chunk.key for rank in entries.delta_ranks() for chunk in entries.delta_chunks(rank)]
        self._next_chunk = min(keys, default=0) - 1
        for entry in sorted(entries.in_ram(), key=lambda entry: entry.seq):
            seq = entry.seq
            if not entry.stored and not entry.paged:
                self.published(entry)  # a snapshot kept its body: its write was not synced then
                if entry.state is _ACQUIRED:
                    self._delivered.append(seq)
            elif entry.state is _ACQUIRED:
                if not entry.paged:
                    self._delivered.append(seq)
            else:
                self._track(entry)

    def take_writes(self) -> list[tuple[int, bytes]]:
        """Durable with the journal in memory: the writes to make now, in the handler (the store is a dict)."""
        writes, self._writes = self._writes, []
        self.unsynced.clear()
        self._unsynced_order.clear()
        self.written += len(writes)
        return writes

    def body_synced(self, seq: int) -> bool:
        """Durable: whether the bodies of every entry up to ``seq`` are synced in the store."""
        order = self._unsynced_order
        return not order or order[0] > seq

    def keep(self, seq: int) -> None:
        """Durable: the settled entry ``seq`` keeps its body in the store (its dead letter is owed) until released."""
        self.kept.add(seq)

    def release_kept(self, seq: int) -> None:
        """Durable: the body kept for ``seq`` may go, as a settled entry's (on disk: once the journal is synced)."""
        self.kept.discard(seq)
        self._released.append(seq)

    def need_settled(self, seq: int, size: int) -> None:
        """Read the body of the settled entry ``seq`` (an owed dead letter a restarted queue recovered)."""
        self._read_seq(seq, size)

    def _settled(self) -> list[int]:
        """The bodies to delete: entries settled since the last call, but those kept, and those released."""
        settled = self.entries.take_unstored()
        if self.kept:
            settled = [seq for seq in settled if seq not in self.kept]
        if self._released:
            settled += self._released
            self._released = []
        return settled

    def hold_deletes(self, journal_write: int) -> None:
        """Durable on disk: the entries settled so far keep their bodies, and the delta chunks read back
        theirs, until write ``journal_write`` is synced."""
        settled = self._settled()
        if self._loaded_chunks:
            settled += self._loaded_chunks
            self._loaded_chunks = []
        if settled:
            self._held_deletes.append((journal_write, settled))

    def release_deletes(self, synced_write: int) -> None:
        """The journal is synced through ``synced_write``: the bodies settled by then may go."""
        held = self._held_deletes
        while held and held[0][0] <= synced_write:
            self._ready_deletes.extend(held.popleft()[1])

    @property
    def deletes_held(self) -> int:
        """The latest journal write a held delete waits for (0: none waits)."""
        return self._held_deletes[-1][0] if self._held_deletes else 0

    def available_again(self, entries: Iterable[Entry]) -> None:
        """Entries given back (released, nacked, lapsed) at their positions."""
        for entry in entries:
            self._track(entry)

    def delivered(self, entries: Iterable[Entry]) -> None:
        """Entries acquired by a consumer (their deliveries have their bodies, or wait for them)."""
        delivered = self._delivered
        for entry in entries:
            if not entry.paged:
                delivered.append(entry.seq)

    def need_delta(self, rank: int) -> None:
        """A walk met level ``rank``'s delta: read its first chunk back (once)."""
        chunk = self.entries.first_delta_chunk(rank)
        if chunk is not None and chunk.key not in self.loading:
            self.loading[chunk.key] = rank
            self._chunk_reads.append(chunk.key)

    def need(self, entries: Iterable[Entry]) -> list[int]:
        """Ask for the paged-out bodies of ``entries`` (an answer waits for them); returns their seqs."""
        missing = []
        for entry in entries:
            if entry.paged:
                missing.append(entry.seq)
                self._read(entry)
        return missing

    # --- decisions ----------------------------------------------------------------------------

    def balance(self) -> None:
        """Page bodies out past the target, and read the shallowest back while they fit."""
        target = self.target_bytes
        each = self.entry_bytes
        held = self.held_cost
        while held > target:
            victim = self._victim()
            if victim is None:
                break
            self._page_out(victim)
            held -= victim.size + each
        while True:
            wanted = self._next_wanted()
            if wanted is None:
                break
            reading = self.reading_bytes + each * len(self.reading)
            needs = wanted.size + each
            if reading + needs > target:
                break
            if held + reading + needs <= target:
                self._read(wanted)
                continue
            deeper = self._deepest_in_ram()
            if deeper is None or deeper.position <= wanted.position:
                break
            heapq.heappop(self._deepest)
            self._page_out(deeper)
            held -= deeper.size + each
        if self.chunk_entries is not None:
            self._push_deltas(self.chunk_entries)
        self._compact()

    def _push_deltas(self, count: int) -> None:
        """Move runs of entries out of RAM, deepest level first, while more than ``keep_entries`` + a
        chunk are available in RAM; read the first delta back once no more than ``keep_entries`` are.

        The gap of a chunk between the two thresholds keeps a load from being pushed straight back.
        """
        entries = self.entries
        reading = self.reading
        ranks = tuple(reversed(entries.ranks_in_use()))
        while entries.available - entries.delta_count > self.keep_entries + count:
            for rank in ranks:
                run = entries.delta_candidates(rank, count)
                came_back = self.came_back
                if run is not None and not any(entry.seq in reading or entry.seq in came_back for entry in run):
                    key = self._next_chunk
                    self._next_chunk -= 1
                    records = entries.push_delta(rank, run, key)
                    self._chunk_writes.append((key, records))
                    if self.durable:
                        self.unsynced_chunks[key] = records
                        self._chunk_ranks[key] = (rank, entries.last_delta_chunk(rank))
                    break
            else:
                break
        if entries.delta_count and entries.available - entries.delta_count <= self.keep_entries:
            for rank in entries.delta_ranks()[:1]:  # the queue's head is near: read the first delta back
                self.need_delta(rank)

    def take_batch(self) -> PageBatch | None:
        """The store's next job, if there is work and none in flight (then one is, until ``loaded``)."""
        if self.in_flight:
            return None
        deletes = self._settled()
        if self._ready_deletes:
            deletes = self._ready_deletes + deletes
            self._ready_deletes = []
        if not (self._writes or self._reads or deletes or self._chunk_writes or self._chunk_reads
                or self._chunk_deletes or self.forget_from is not None):
            return None
        batch = PageBatch(tuple(self._writes), tuple(self._reads), tuple(deletes), tuple(self._chunk_writes),
                          tuple(self._chunk_reads), tuple(self._chunk_deletes), self.forget_from, self.generation)
        self.forget_from = None
        if self.durable:
            self._in_flight_writes = len(self._writes)
            self._in_flight_chunks = tuple(key for key, _ in self._chunk_writes)
        self._writes = []
        self._reads = []
        self._chunk_writes = []
        self._chunk_reads = []
        self._chunk_deletes = []
        self.written += len(batch.writes)
        self.deleted += len(deletes)
        self.in_flight = True
        return batch

    def loaded(self, done: PageDone) -> None:
        """The batch in flight is done; put the bodies and delta chunks it read back in RAM."""
        self.in_flight = False
        entries = self.entries
        if self._in_flight_writes:  # durable: the batch's writes are synced
            order, unsynced = self._unsynced_order, self.unsynced
            for _ in range(self._in_flight_writes):
                unsynced.pop(order.popleft(), None)
            self._in_flight_writes = 0
        if self._in_flight_chunks:  # durable: the batch's chunks are synced: journal their pushes, in order
            self._chunks_synced(self._in_flight_chunks)
            self._in_flight_chunks = ()
        for key, records in done.chunks:
            rank = self.loading.pop(key)
            chunk = entries.first_delta_chunk(rank)
            if chunk is None or chunk.key != key:
                msg = f"delta chunk {key} of level {rank} came back, but it is not the level's first"
                raise ValueError(msg)
            for back in entries.load_delta(rank, records):
                heapq.heappush(self._shallowest, back.position)
                self.came_back.add(back.seq)
            if self.durable and self.hold_chunk_deletes:
                self._loaded_chunks.append(key)  # the journal's load event must be synced first
            else:
                self._chunk_deletes.append(key)
        reading = self.reading
        for seq, body in done.bodies:
            self.read += 1
            self.reading_bytes -= reading.pop(seq, 0)
            entry = entries.get(seq)
            if entry is None or not entry.paged:
                continue  # settled while read (a dead letter or a browse had it read)
            if body is None:  # a durable store lost it: a publish never confirmed
                if entry.state is _AVAILABLE:
                    self.lost.append(seq)
                continue
            entries.page_in(entry, body)
            if entry.state is _ACQUIRED:
                self._delivered.append(seq)
            else:
                self._track(entry)

    def _chunks_synced(self, keys: Iterable[int]) -> None:
        """Durable: these chunks' writes are synced; tell ``chunk_stored`` of each."""
        for key in keys:
            # Still in its delta: a chunk is read back only by this batch (after its write) or a later one.
            del self.unsynced_chunks[key]
            rank, chunk = self._chunk_ranks.pop(key)
            if self.chunk_stored is not None:
                self.chunk_stored(rank, chunk)

    # --- internals ------------------------------------------------------------------------

    def _track(self, entry: Entry) -> None:
        if entry.paged:
            heapq.heappush(self._shallowest, entry.position)
        else:
            heapq.heappush(self._deepest, (-entry.position[0], -entry.seq, entry.seq))

    def _read(self, entry: Entry) -> None:
        self._read_seq(entry.seq, entry.size)

    def _read_seq(self, seq: int, size: int) -> None:
        if seq not in self.reading:
            self.reading[seq] = size
            self.reading_bytes += size
            self._reads.append(seq)

    def _page_out(self, entry: Entry) -> None:
        body = self.entries.page_out(entry)
        if body is not None:
            self._writes.append((entry.seq, body))
        if entry.state is _AVAILABLE:
            heapq.heappush(self._shallowest, entry.position)

    def _victim(self) -> Entry | None:
        """The next body to page out: the latest delivered one still in RAM, else the deepest available."""
        delivered = self._delivered
        get = self.entries.get
        while delivered:
            entry = get(delivered.pop())
            if entry is not None and entry.state is _ACQUIRED and not entry.paged:
                return entry
        entry = self._deepest_in_ram()
        if entry is not None:
            heapq.heappop(self._deepest)
        return entry

    def _deepest_in_ram(self) -> Entry | None:
        """The deepest available entry whose body is in RAM (left at the heap's top), if any."""
        deepest = self._deepest
        get = self.entries.get
        while deepest:
            entry = get(deepest[0][2])
            if entry is not None and entry.state is _AVAILABLE and not entry.paged:
                return entry
            heapq.heappop(deepest)
        return None

    def _next_wanted(self) -> Entry | None:
        """The shallowest available entry whose body is paged out and not being read, if any."""
        shallowest = self._shallowest
        get = self.entries.get
        while shallowest:
            entry = get(shallowest[0][1])
            if entry is not None and entry.state is _AVAILABLE and entry.paged and entry.seq not in self.reading:
                return entry
            heapq.heappop(shallowest)
        return None

    def _compact(self) -> None:
        """Rebuild a heap whose stale items (settled, taken, moved) outnumber the live entries."""
        entries = self.entries
        live = entries.available + entries.acquired - entries.delta_count  # the live entries in RAM
        limit = 2 * live + 256
        get = entries.get
        if len(self._deepest) > limit:
            self._deepest = [
                item for item in self._deepest
                if (e := get(item[2])) is not None and e.state is _AVAILABLE and not e.paged
            ]
            heapq.heapify(self._deepest)
        if len(self._shallowest) > limit:
            self._shallowest = [
                item for item in self._shallowest
                if (e := get(item[1])) is not None and e.state is _AVAILABLE and e.paged
            ]
            heapq.heapify(self._shallowest)
        if len(self.came_back) > limit:
            self.came_back = {seq for seq in self.came_back if get(seq) is not None}
        if len(self._delivered) > limit:
            self._delivered = [
                seq for seq in self._delivered
                if (e := get(seq)) is not None and e.state is _ACQUIRED and not e.paged
            ]
