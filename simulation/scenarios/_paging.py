"""The paging scenario: the variable queue's sans-IO core, driven by a thin shell over the simulated disk.

``PagingShell`` owns a ``VariableQueue`` under a tiny memory target, a message store and a queue
index (``SegmentLog`` and ``QueueIndex`` on the simulation's ``SimDisk``). It carries the core's
effects out in jobs, one batch at a time, so every read and sync comes back as a message in virtual
time; a ``Sync`` confirms the publishes it covers. ``PagingClient`` publishes, fetches, acks,
requeues and changes the target at random, then drains the queue; it writes its history as notes
(``PagingSent``, ``PagingConfirmed``, ``PagingReceived``, ``PagingAcked``, ``PagingDrained``). A
``ProcessCrash`` kills the shell's process: the disk keeps what was synced (perhaps a torn tail),
and the shell reopens both files (their recovery) and the core (``VariableQueue.recover``).
"""

from __future__ import annotations

import pickle
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Final, final

import attrs

from conveyor.actors.storage import (
    AckIndex,
    Effect,
    Fetched,
    FileSystem,
    IndexEntry,
    LoadPending,
    MarkDelivered,
    QueueIndex,
    ReadIndex,
    ReadMessage,
    ReadPending,
    RemoveMessages,
    SegmentLog,
    Sync,
    VariableQueue,
    VariableQueueError,
    WriteIndex,
    WriteMessage,
)
from conveyor.runtime import Actor, ActorRef, JobDone, JobFailed, TraceEvent
from conveyor.simulation import DiskFaults, Fault, RunResult, SimDisk, Simulation, Strategy, seeded_random
from conveyor.simulation.checkers import (
    CheckResult,
    PagingAcked,
    PagingConfirmed,
    PagingDrained,
    PagingReceived,
    PagingSent,
    PagingStatus,
    guarded,
    paging_no_loss,
    paging_order,
    paging_ram,
)

from ._broker import ConnectionLost

SHELL: Final = "/paging"
CLIENT: Final = "/paging-client"
MESSAGES_DIR: Final = "/data/paging/messages"
INDEX_DIR: Final = "/data/paging/index"
SEGMENT_SIZE: Final = 2048
GC_EVERY_SYNCS: Final = 3
"""The shell collects garbage in both files once per this many syncs (often: a short run must compact)."""


@final
@attrs.frozen
class PagingScenario:
    """A paging workload.

    Attributes:
        operations: random operations the client makes before it drains the queue.
        targets: memory targets (bodies in RAM) the client switches between; the first is the start.
        body_sizes: body lengths drawn per publish.
        embed_below: bodies shorter than this are embedded in their index record.
        segment_entries: index positions per segment (one ``ReadIndex``).
        weights: how often the client publishes, fetches, acks, requeues and changes the target.
        disk: how the simulated disk misbehaves (torn writes at a crash).
        ack_deadline_s: unused by the shell; the liveness monitors' scale (kept for the registry).
    """

    operations: int = 60
    targets: tuple[int, ...] = (2, 0, 5)
    body_sizes: tuple[int, ...] = (8, 40, 200)
    embed_below: int = 32
    segment_entries: int = 4
    weights: tuple[int, int, int, int, int] = (40, 30, 15, 7, 8)
    disk: DiskFaults = attrs.field(factory=DiskFaults)
    ack_deadline_s: float = 1.0


def body_of(msg_id: str, size: int) -> bytes:
    """The body the client publishes as ``msg_id``: derived from it, so a receiver can check it whole."""
    seed = (msg_id + ":").encode()
    return (seed * (size // len(seed) + 1))[:size]


# --- the shell's protocol -------------------------------------------------------------------


@final
@attrs.frozen
class PagePublish:
    msg_id: str
    body: bytes


@final
@attrs.frozen
class PageFetch:
    pass


@final
@attrs.frozen
class PageAck:
    seq_id: int


@final
@attrs.frozen
class PageRequeue:
    seq_id: int


@final
@attrs.frozen
class PageTarget:
    target: int | None


@final
@attrs.frozen
class PageConfirmed:
    msg_ids: tuple[str, ...]


@final
@attrs.frozen
class PageFetched:
    seq_id: int
    msg_id: str
    body: bytes
    redelivered: bool


@final
@attrs.frozen
class PageEmpty:
    pass


@final
@attrs.frozen
class PageRefused:
    seq_id: int
    reason: str


@final
class _Files:
    """The shell's two files, opened by a job (its repr, which the trace records, names no address)."""

    def __init__(self, store: SegmentLog, index: QueueIndex, recovered: tuple[int, ...]) -> None:
        self.store = store
        self.index = index
        self.recovered = recovered

    def __repr__(self) -> str:
        return f"<paging files: {len(self.recovered)} messages recovered>"


def _store_key(seq_id: int, msg_id: str) -> bytes:
    return f"{seq_id}:{msg_id}".encode()


def _encode(entry: IndexEntry) -> bytes:
    return pickle.dumps((entry.seq_id, entry.msg_id, entry.size, entry.persistent, entry.delivered, entry.body))


def _decode(data: bytes) -> IndexEntry:
    seq_id, msg_id, size, persistent, delivered, body = pickle.loads(data)
    return IndexEntry(seq_id, msg_id, size, persistent, delivered, body)


def open_files(fs: FileSystem) -> _Files:
    """Open (recover) the message store and the queue index on ``fs``: a job's work."""
    store = SegmentLog(MESSAGES_DIR, fs=fs, segment_size=SEGMENT_SIZE)
    index = QueueIndex(SegmentLog(INDEX_DIR, fs=fs, segment_size=SEGMENT_SIZE))
    return _Files(store, index, tuple(sorted(set(index.seq_ids()))))


def carry_out(files: _Files, effects: Sequence[Effect], collect: bool) -> list[tuple[str, Any]]:
    """Do ``effects`` in order on the files (a job's work); return what the core must hear back."""
    results: list[tuple[str, Any]] = []
    store, index = files.store, files.index
    for effect in effects:
        if type(effect) is WriteMessage:
            store.put(_store_key(effect.seq_id, effect.msg_id), effect.body)
        elif type(effect) is WriteIndex:
            index.publish(effect.entry.seq_id, _encode(effect.entry))
        elif type(effect) is MarkDelivered:
            for seq_id in effect.seq_ids:
                entry = _decode(index.read(seq_id))
                index.ack(seq_id)
                index.publish(seq_id, _encode(attrs.evolve(entry, delivered=True)))
        elif type(effect) is AckIndex:
            for seq_id in effect.seq_ids:
                index.ack(seq_id)
        elif type(effect) is RemoveMessages:
            for seq_id, msg_id in zip(effect.seq_ids, effect.msg_ids, strict=True):
                store.delete(_store_key(seq_id, msg_id))
        elif type(effect) is ReadIndex:
            ids = sorted({seq_id for seq_id in index.seq_ids(effect.start) if seq_id < effect.end})
            results.append(("index", tuple(_decode(index.read(seq_id)) for seq_id in ids)))
        elif type(effect) is ReadMessage:
            if effect.embedded:
                body = _decode(index.read(effect.seq_id)).body
            else:
                body = store.get(_store_key(effect.seq_id, effect.msg_id))
            results.append(("body", (effect.seq_id, body)))
        elif type(effect) is Sync:
            store.sync()  # bodies before the index records that name them
            index.sync()
            if collect:
                store.collect_garbage()
                index.collect_garbage()
            results.append(("synced", effect.token))
    return results


@final
class PagingShell(Actor):
    """The thin shell: a ``VariableQueue`` whose effects run as jobs on the disk, one batch at a time.

    Args:
        fs: the disk its files live on (the simulation's ``SimDisk``).
        scenario: the workload's settings (target, embedding, segment size).
        make_queue: builds the core (a planted bug swaps it).
    """

    def __init__(self, fs: FileSystem, scenario: PagingScenario,
                 make_queue: type[VariableQueue] = VariableQueue) -> None:
        self.fs = fs
        self.scenario = scenario
        self.make_queue = make_queue
        self.queue: VariableQueue | None = None
        self.files: _Files | None = None
        self.job: int | None = None
        self.waiting_effects: list[Effect] = []
        self.stash: list[tuple[ActorRef | None, object]] = []
        self.fetchers: list[ActorRef] = []  # fetches waiting for an index read
        self.outbox: deque[list[Any]] = deque()  # [who, seq_id being read or None, answer]: answered in order
        self.publishers: dict[str, ActorRef] = {}
        self.syncs = 0
        self.target: int | None = scenario.targets[0]

    def on_start(self) -> None:
        """Open the files in a job (recovery); requests wait until they are open."""
        self.job = self.ctx.run_job(open_files, self.fs)

    def receive(self, message: Any) -> None:
        """Serve the client; take the disk's results back."""
        if type(message) is JobDone or type(message) is JobFailed:
            if message.job_id != self.job:
                return  # a job of an earlier life of the process
            self.job = None
            if type(message) is JobFailed:
                raise message.error
            self._done(message.result)
            return
        if self.queue is None:
            self.stash.append((self.ctx.sender, message))
            return
        self._serve(self.ctx.sender, message)
        self._after()

    def _serve(self, sender: ActorRef | None, message: object) -> None:
        queue = self.queue
        assert queue is not None
        if type(message) is PagePublish:
            queue.publish(message.msg_id, message.body, persistent=True)
            if sender is not None:
                self.publishers[message.msg_id] = sender
        elif type(message) is PageFetch and sender is not None:
            self._fetch(sender)
        elif isinstance(message, (PageAck, PageRequeue)):
            try:
                if isinstance(message, PageAck):
                    queue.ack((message.seq_id,))
                else:
                    queue.requeue((message.seq_id,))
            except VariableQueueError as error:
                if sender is not None:
                    self.ctx.send(sender, PageRefused(message.seq_id, str(error)))
        elif type(message) is PageTarget:
            self.target = message.target
            queue.set_target(message.target)

    def _fetch(self, sender: ActorRef) -> None:
        queue = self.queue
        assert queue is not None
        got = queue.fetch()
        if type(got) is LoadPending:
            self.fetchers.append(sender)
        elif type(got) is ReadPending:  # answers after it wait for its body: deliveries keep the queue's order
            self.outbox.append([sender, got.seq_id, None])
        elif type(got) is Fetched:
            self._answer(sender, PageFetched(got.seq_id, got.msg_id, got.body, got.redelivered))
        else:
            self._answer(sender, PageEmpty())

    def _answer(self, sender: ActorRef, answer: object) -> None:
        self.outbox.append([sender, None, answer])
        self._send_ready()

    def _send_ready(self) -> None:
        outbox = self.outbox
        while outbox and outbox[0][2] is not None:
            sender, _, answer = outbox.popleft()
            self.ctx.send(sender, answer)

    def _done(self, result: object) -> None:
        if isinstance(result, _Files):
            self.files = result
            recovered = result.recovered
            start = recovered[0] if recovered else 0
            end = recovered[-1] + 1 if recovered else 0
            self.queue = self.make_queue.recover(
                start=start, end=end, count=len(recovered), target_ram_count=self.target,
                embed_below=self.scenario.embed_below, segment_entries=self.scenario.segment_entries,
            )
            stash, self.stash = self.stash, []
            for sender, message in stash:
                self._serve(sender, message)
            self._after()
            return
        queue = self.queue
        assert queue is not None
        for kind, value in result if isinstance(result, list) else ():
            if kind == "index":
                queue.loaded_index(value)
                fetchers, self.fetchers = self.fetchers, []
                for fetcher in fetchers:
                    self._fetch(fetcher)
            elif kind == "body":
                seq_id, body = value
                got = queue.loaded_message(seq_id, body)
                for waiting in self.outbox:
                    if waiting[1] == seq_id and waiting[2] is None:
                        waiting[2] = PageFetched(got.seq_id, got.msg_id, got.body, got.redelivered)
                        break
                self._send_ready()
            elif kind == "synced":
                confirmed = queue.synced(value)
                by_sender: dict[ActorRef, list[str]] = {}
                for msg_id in confirmed:
                    publisher = self.publishers.pop(msg_id, None)
                    if publisher is not None:
                        by_sender.setdefault(publisher, []).append(msg_id)
                for publisher, msg_ids in by_sender.items():
                    self.ctx.send(publisher, PageConfirmed(tuple(msg_ids)))
        self._after()

    def _after(self) -> None:
        """Note the core's status; start the next batch of disk work if none runs."""
        queue = self.queue
        if queue is None:
            return
        if self.ctx.tracing:
            self.ctx.note(PagingStatus(queue.status(), self.scenario.segment_entries))
        self.waiting_effects.extend(queue.take_effects())
        if self.job is None and self.waiting_effects and self.files is not None:
            effects, self.waiting_effects = self.waiting_effects, []
            collect = False
            if any(type(effect) is Sync for effect in effects):
                self.syncs += 1
                collect = self.syncs % GC_EVERY_SYNCS == 0
            self.job = self.ctx.run_job(carry_out, self.files, tuple(effects), collect)


@final
@attrs.frozen
class _Tick:
    pass


@final
class PagingClient(Actor):
    """Publishes, fetches, acks, requeues and changes the target at random, then drains; notes its history."""

    def __init__(self, shell: ActorRef, scenario: PagingScenario) -> None:
        self.shell = shell
        self.scenario = scenario
        self.left = scenario.operations
        self.published = 0
        self.held: list[tuple[int, str]] = []  # (seq_id, msg_id) fetched, not yet acked or requeued
        self.fetching = False
        self.draining = False
        self.done = False

    def on_start(self) -> None:
        """Start ticking."""
        self.ctx.schedule(self.ctx.random.uniform(0.0, 0.02), _Tick())

    def receive(self, message: Any) -> None:
        """One tick of work, or the shell's answer."""
        cls = type(message)
        if cls is _Tick:
            self._tick()
        elif cls is PageConfirmed:
            self.ctx.note(PagingConfirmed(message.msg_ids))
        elif cls is PageFetched:
            self.fetching = False
            intact = message.body == body_of(message.msg_id, len(message.body))
            self.ctx.note(PagingReceived(message.msg_id, message.seq_id, message.redelivered, intact))
            self.held.append((message.seq_id, message.msg_id))
            if self.draining:
                self._ack_all()
                self._fetch()
        elif cls is PageEmpty:
            self.fetching = False
            if self.draining and not self.done:
                if self.held:
                    self._ack_all()
                    self._fetch()
                else:
                    self.done = True
                    self.ctx.note(PagingDrained())
        elif cls is ConnectionLost:  # the shell's process died: what we held goes back to the queue
            self.held.clear()
            self.fetching = False
            if self.draining and not self.done:
                self._fetch()

    def _tick(self) -> None:
        if self.left <= 0:
            self.draining = True
            self._ack_all()
            if not self.fetching:
                self._fetch()
            return
        self.left -= 1
        rng = self.ctx.random
        publish, fetch, ack, requeue, _ = self.scenario.weights
        draw = rng.randrange(sum(self.scenario.weights))
        if draw < publish:
            msg_id = f"p{self.published}"
            self.published += 1
            size = rng.choice(self.scenario.body_sizes)
            self.ctx.note(PagingSent(msg_id))
            self.ctx.send(self.shell, PagePublish(msg_id, body_of(msg_id, size)))
        elif draw < publish + fetch:
            if not self.fetching:
                self._fetch()
        elif draw < publish + fetch + ack + requeue:
            if self.held:
                seq_id, msg_id = self.held.pop(rng.randrange(len(self.held)))
                if draw < publish + fetch + ack:
                    self.ctx.note(PagingAcked(msg_id))
                    self.ctx.send(self.shell, PageAck(seq_id))
                else:
                    self.ctx.send(self.shell, PageRequeue(seq_id))
        else:
            self.ctx.send(self.shell, PageTarget(rng.choice(self.scenario.targets)))
        self.ctx.schedule(rng.uniform(0.0, 0.02), _Tick())

    def _fetch(self) -> None:
        self.fetching = True
        self.ctx.send(self.shell, PageFetch())

    def _ack_all(self) -> None:
        for seq_id, msg_id in self.held:
            self.ctx.note(PagingAcked(msg_id))
            self.ctx.send(self.shell, PageAck(seq_id))
        self.held.clear()


ShellFactory = Callable[[FileSystem, PagingScenario], PagingShell]


def random_paging_scenario(seed: int) -> PagingScenario:
    """A paging workload drawn from ``seed``: 30-80 operations, targets among 0-6, bodies embedded or stored."""
    rng = seeded_random(f"scenario:paging:{seed}")
    targets = tuple(rng.sample(range(7), rng.randint(1, 3)))
    return PagingScenario(
        operations=rng.randint(30, 80), targets=targets, body_sizes=(8, 40, 200),
        segment_entries=rng.choice((2, 4, 8)),
    )


def run_paging_simulation(
    scenario: PagingScenario, seed: int, strategy: Strategy | None = None, max_steps: int = 500_000,
    faults: Sequence[Fault] = (), system: Callable[..., Simulation] = Simulation,
    shell: ShellFactory | None = None,
) -> tuple[Simulation, RunResult]:
    """Run the shell and its client to quiet in a Simulation with a disk (and ``faults``), then shut it down."""
    sim = system(seed=seed, strategy=strategy, faults=faults, disk=scenario.disk, process=(SHELL,))
    disk: SimDisk | None = sim.disk
    assert disk is not None
    make = shell or PagingShell
    queue = sim.spawn(lambda: make(disk, scenario), name=SHELL.strip("/"))
    sim.spawn(lambda: PagingClient(queue, scenario), name=CLIENT.strip("/"))

    def connection_lost() -> None:
        client = sim.live_ref(CLIENT)
        if client is not None:
            sim.tell_from_thread(client, ConnectionLost())

    sim.process_crash_listeners.append(connection_lost)
    result = sim.run(max_steps=max_steps)
    sim.shutdown()
    return sim, result


def check_paging_run(trace: list[TraceEvent], scenario: PagingScenario) -> list[CheckResult]:
    """Order, no loss and RAM under the target, each ``guarded``."""
    return [
        *guarded("paging_order", paging_order, trace),
        *guarded("paging_no_loss", paging_no_loss, trace),
        *guarded("paging_ram", paging_ram, trace),
    ]
