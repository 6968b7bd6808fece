"""The transactions workload (seed 004) on the broker backend: producers, listener containers, a misuser.

A durable ``TxStoreActor`` holds ``in``, ``out`` and ``audit``. A producer commits batches of
items into ``in``; listener containers (each its own session) take them and, in one transaction,
put a ``done:`` item into ``out`` and a ``seen:`` item into ``audit`` (so every commit spans three
queues); a listener raises for a drawn share of (item, attempt), rolling its transaction back. A
misuser takes, rolls back, and then commits with puts anyway: the commit must abort and leave
nothing. Faults, drawn from the seed: containers crash for good (their sessions end holding
locks), and the store crashes and rebuilds itself from its journal (compacting every few calls).
Once the run is quiet the surviving containers are stopped and the store is read: ``TxFinal``
for the checkers in ``conveyor.simulation.checkers`` (``transaction_checks``).
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable, Sequence
from typing import Any, final

import attrs

from conveyor.actors.transactions import (
    AtLeastOnce,
    CommitTx,
    ConsumeOnce,
    ConsumePolicy,
    ConsumeTimes,
    DeadLetters,
    DeclareTxQueue,
    GetTxStats,
    ItemKey,
    ListenerConsumer,
    ListenerContainerActor,
    QueueItems,
    ReadDeadLetters,
    ReadItems,
    RedeliveryBackoff,
    RollbackTx,
    StopContainer,
    TakeItem,
    Taken,
    TxItem,
    TxPut,
    TxQueueSettings,
    TxQueueStats,
    TxStore,
    TxStoreActor,
)
from conveyor.runtime import Actor, ActorRef, EventKind, TraceEvent
from conveyor.simulation import (
    Crash,
    Delay,
    Drop,
    Fault,
    Pause,
    RunResult,
    Simulation,
    Strategy,
    ZkFaults,
    seeded_random,
    uniform_job_duration,
)
from conveyor.simulation.checkers import CheckResult, TxFinal, transaction_checks, tx_history

TX_STORE = "/tx"
TX_QUEUES = ("in", "out", "audit")
LISTENER_S = uniform_job_duration(0.02, 0.4)
"""How long a listener runs, in virtual seconds."""
SERVE_S = 30.0
"""Virtual seconds the containers serve before they are stopped: the last put is at 0.5 s, so anything
still in ``in`` then (with a container alive) was kept from them."""


@final
@attrs.frozen
class ZkTxSetup:
    """Where ``tx-zk`` runs the workload: ``backends`` ZooKeeper backends (processes) on one root, a faulty ensemble.

    Container ``i`` and its transactions go through backend ``i % backends``, the producer through
    ``producer``, the misuser through the last one.
    """

    backends: int
    faults: ZkFaults
    """Every session's network: slow requests, lost connections, expiry past the timeout (never backend 0's, so the
    first container keeps serving)."""
    producer: int = 0
    expiries: tuple[tuple[float, int], ...] = ()
    """(virtual time, backend >= 1): from then on, the session of the first backend but the first seen holding a
    lock expires, its locks with it; that backend's if none holds one within 2 s (``queue-crash``)."""

    def home(self, container: int) -> int:
        """The backend container ``container`` goes through."""
        return container % self.backends


@final
@attrs.frozen
class TxScenario:
    """One drawn transactions workload."""

    batches: int
    batch_size: int
    containers: tuple[int, ...]
    """Workers per listener container."""
    policy: ConsumePolicy
    backoff: RedeliveryBackoff | None
    fail_percent: int
    container_crashes: tuple[tuple[int, int], ...] = ()
    """(container index, step): it stops for good, its session ends holding what it holds."""
    store_crashes: tuple[int, ...] = ()
    """Steps at which the durable store crashes and rebuilds itself from its journal."""
    compact_after_events: int = 1024
    misuse: bool = True
    zk: ZkTxSetup | None = None
    """Run on ZooKeeper backends (``tx-zk``) instead of the broker's store."""

    @property
    def items(self) -> int:
        """How many items the producer puts into ``in``."""
        return self.batches * self.batch_size


def random_tx_scenario(seed: int, scenario: str = "tx-broker") -> TxScenario:
    """Draw a workload (policy, backoff, failures, containers; faults: ``draw_tx_faults``), keyed by ``scenario``."""
    rng = seeded_random(f"scenario:{scenario}:{seed}")
    # ConsumeOnce twice as often: a lost session's take is then visible at once (a second take breaks at-most-1)
    policy: ConsumePolicy = rng.choice((ConsumeOnce(), ConsumeOnce(), ConsumeTimes(2), ConsumeTimes(3),
                                        AtLeastOnce(), AtLeastOnce(max_rollbacks=2)))
    backoff = rng.choice((None, RedeliveryBackoff(0.05, 0.4)))
    containers = tuple(rng.randint(1, 3) for _ in range(rng.choice((1, 2, 3, 3))))
    batches, batch_size = rng.randint(1, 5), rng.randint(1, 6)
    return TxScenario(batches=batches, batch_size=batch_size, containers=containers, policy=policy,
                      backoff=backoff, fail_percent=rng.choice((0, 20, 50)),
                      compact_after_events=rng.choice((4, 16, 1024)))


def draw_tx_faults(workload: TxScenario, rng: random.Random, plan: str) -> tuple[TxScenario, tuple[Fault, ...]]:
    """The fault plans on the transactions workload, drawn from ``rng``.

    ``crash`` stops 1-2 containers other than the first for good (their sessions end holding what
    they hold; the first keeps serving, so the queue drains; on the broker the first of them stops
    reaching the store with its commits a little before, so it dies holding items); ``queue-crash``
    crashes the durable store 1-2 times (it rebuilds itself from its journal), or on ZooKeeper
    expires the session of 1-2 backends other than the first, serving a container if one does
    (``ZkTxSetup.expiries``); ``pause`` freezes a container;
    ``delay`` stalls a container's requests to its store. Steps scale with the workload (a run
    makes about 30-80 per item on the broker, more on ZooKeeper). The other plans do nothing here.
    """
    zk = workload.zk
    # the containers start after the setup: 7 steps on the broker, 100-240 on ZooKeeper (80 a backend, more or
    # less), where a transaction makes about 10 times the steps
    first, scale = (8, 1) if zk is None else (80 * zk.backends, 8)
    span = first + (50 + 25 * workload.items) * scale
    faults: list[Fault] = []
    crashes: list[tuple[int, int]] = []
    store_crashes: list[int] = []
    containers = [f"/container-{index}" for index in range(len(workload.containers))]
    for name in plan.split(","):
        if name == "crash" and len(containers) > 1:
            # on ZooKeeper, containers of backend 0: the others' stay for their backend's session to expire
            victims = [index for index in range(1, len(containers)) if zk is None or zk.home(index) == 0]
            drawn = [(rng.choice(victims or range(1, len(containers))),
                      first + rng.randint(5, (20 + 8 * workload.items) * scale)) for _ in range(rng.randint(1, 2))]
            if zk is None:  # the first: its commits stop reaching the store 30-90 steps before, so it dies holding
                index, step = drawn[0]
                faults.append(Drop(containers[index], "CommitTx", from_step=step))
                drawn[0] = (index, step + rng.randint(30, 90))
            crashes += drawn
        elif name == "queue-crash" and zk is not None and zk.backends > 1:
            homes = sorted({zk.home(index) for index in range(len(containers))} - {0}) or list(range(1, zk.backends))
            zk = attrs.evolve(zk, expiries=tuple(sorted((round(rng.uniform(0.1, 1.0), 3), rng.choice(homes))
                                                      for _ in range(rng.randint(1, 2)))))
        elif name == "queue-crash" and zk is None:
            store_crashes += sorted(rng.sample(range(5, span), rng.randint(1, 2)))
        elif name == "pause":
            faults.append(Pause(rng.choice(containers), at_time=rng.uniform(0.0, 2.0),
                                duration_s=rng.uniform(0.5, 5.0)))
        elif name == "delay":
            index = rng.randrange(len(containers))
            faults.append(Delay(containers[index], tx_stores(workload)[0 if zk is None else zk.home(index)],
                                at_step=rng.randint(first + 1, span), duration_s=rng.uniform(0.1, 3.0)))
    workload = attrs.evolve(workload, container_crashes=tuple(crashes), store_crashes=tuple(store_crashes), zk=zk)
    return workload, tuple(faults)


def tx_stores(workload: TxScenario) -> tuple[str, ...]:
    """The paths of the actors that answer the transaction protocol: the store, or each ZooKeeper backend."""
    if workload.zk is None:
        return (TX_STORE,)
    return tuple(f"{TX_STORE}-{index}" for index in range(workload.zk.backends))


@final
@attrs.frozen
class _Produce:
    batch: int


@final
class TxProducer(Actor):
    """Commits ``batches`` batches of items into ``in``, one every 0.1 s."""

    def __init__(self, store: ActorRef, batches: int, batch_size: int) -> None:
        self.store = store
        self.batches = batches
        self.batch_size = batch_size

    def on_start(self) -> None:
        """Schedule the batches."""
        for batch in range(1, self.batches + 1):
            self.ctx.schedule(0.1 * batch, _Produce(batch))

    def receive(self, message: Any) -> None:
        """Send a batch (its answer is in the trace; the producer needs nothing from it)."""
        if type(message) is _Produce:
            puts = tuple(TxPut("in", f"item-{message.batch}-{n}".encode()) for n in range(self.batch_size))
            self.ctx.send(self.store, CommitTx(self.ctx.self_ref, message.batch, (), puts))


@final
class TxMisuser(Actor):
    """Takes an item, rolls back, then commits with puts anyway: the store must abort that commit."""

    def __init__(self, store: ActorRef) -> None:
        self.store = store

    def on_start(self) -> None:
        """Wait for an item."""
        self.ctx.send(self.store, TakeItem(self.ctx.self_ref, 1, "in", 2.0))

    def receive(self, message: Any) -> None:
        """Roll back what it took, then commit the take and a put as if it still held it."""
        if type(message) is Taken:
            self.ctx.send(self.store, RollbackTx(self.ctx.self_ref, 1, failed=False, handed_over=False))
            puts = (TxPut("out", b"forged"),)
            self.ctx.send(self.store, CommitTx(self.ctx.self_ref, 1, (message.item.key,), puts))


def failing_listener(fail_percent: int) -> Callable[[ListenerConsumer, TxItem], None]:
    """A listener that puts into ``out`` and ``audit``, and raises for ``fail_percent`` % of (item, attempt)."""

    def listen(consumer: ListenerConsumer, item: TxItem) -> None:
        consumer.put_on_commit("out", b"done:" + item.body)
        consumer.put_on_commit("audit", b"seen:" + item.body)
        if zlib.crc32(item.body + item.takes.to_bytes(2, "big")) % 100 < fail_percent:
            msg = f"listener failed on {item.body!r} (take {item.takes})"
            raise ValueError(msg)

    return listen


@final
@attrs.frozen
class Audit:
    """Ask the store for every queue's items, DLQ and locks, and note them as a ``TxFinal``."""

    left_while_served: tuple[ItemKey, ...] | None


@final
class TxAuditor(Actor):
    """Reads the store once the run is over and notes what it found (``TxFinal``) for the checkers."""

    def __init__(self, store: ActorRef) -> None:
        self.store = store
        self.audit: Audit | None = None
        self.answers: dict[tuple[type, str], Any] = {}

    def receive(self, message: Any) -> None:
        """Send the reads, collect the answers, note the result."""
        match message:
            case Audit():
                self.audit = message
                for name in TX_QUEUES:
                    for request in (ReadItems(name), ReadDeadLetters(name), GetTxStats(name)):
                        self.ctx.send(self.store, request)
            case QueueItems(queue=name) | DeadLetters(queue=name) | TxQueueStats(queue=name):
                self.answers[(type(message), name)] = message
                if len(self.answers) == 3 * len(TX_QUEUES) and self.audit is not None:
                    self.ctx.note(TxFinal(
                        {name: self.answers[(QueueItems, name)].items for name in TX_QUEUES},
                        {name: self.answers[(DeadLetters, name)].items for name in TX_QUEUES},
                        {name: self.answers[(TxQueueStats, name)].locked for name in TX_QUEUES},
                        self.audit.left_while_served,
                    ))


def run_tx_simulation(
    scenario: TxScenario,
    seed: int,
    strategy: Strategy | None = None,
    *,
    faults: Sequence[Fault] = (),
    core: Callable[[], TxStore] = TxStore,
    system: Callable[..., Simulation] = Simulation,
    max_steps: int = 500_000,
) -> tuple[Simulation, RunResult]:
    """Run the workload, stop the containers, have the store read and noted (``TxFinal``); then shut down.

    ``core`` swaps the store's sans-IO core (a planted bug); ``system`` builds the Simulation.
    """
    plan: list[Fault] = [Crash(TX_STORE, step) for step in scenario.store_crashes]
    plan += [Crash(f"/container-{index}", step, restart=False) for index, step in scenario.container_crashes]
    # listeners take 20-400 ms: workers hold their locks while the rest of the run makes steps, so a crash
    # drawn at a step often finds a container holding some
    sim = system(seed=seed, strategy=strategy, faults=(*faults, *plan), job_duration=LISTENER_S)
    store = sim.spawn(lambda: TxStoreActor(durable=True, compact_after_events=scenario.compact_after_events,
                                           core=core), name="tx")
    for name in TX_QUEUES:
        policy = scenario.policy if name == "in" else AtLeastOnce()
        sim.ask(store, DeclareTxQueue(TxQueueSettings(name, policy, scenario.backoff if name == "in" else None)))
    listener = failing_listener(scenario.fail_percent)

    def container_of(workers: int) -> Callable[[], ListenerContainerActor]:
        return lambda: ListenerContainerActor(store, "in", listener, workers=workers, poll_s=0.5)

    containers = [sim.spawn(container_of(workers), name=f"container-{index}")
                  for index, workers in enumerate(scenario.containers)]
    sim.spawn(lambda: TxProducer(store, scenario.batches, scenario.batch_size), name="producer")
    if scenario.misuse:
        sim.spawn(lambda: TxMisuser(store), name="misuser")
    auditor = sim.spawn(lambda: TxAuditor(store), name="auditor")
    result = sim.run(until=SERVE_S, max_steps=max_steps)
    steps = result.steps
    sim.end_faults()  # the faults drawn past the run's end: none strikes while the containers stop
    serving = any(container.is_alive for container in containers)
    left: QueueItems = sim.ask(store, ReadItems("in"))
    for container in containers:
        if container.is_alive:
            container.tell(StopContainer())
    more = sim.run(max_steps=max_steps - steps)
    steps += more.steps
    auditor.tell(Audit(tuple(key for key, _ in left.items) if serving else None))
    more = sim.run(max_steps=max_steps - steps)
    result = RunResult(steps=sim.steps, time=more.time, quiet=more.quiet)  # the asks' steps too
    sim.shutdown()
    return sim, result


def tx_final(trace: list[TraceEvent]) -> TxFinal:
    """The auditor's ``TxFinal`` note.

    Raises:
        ValueError: the run ended before the auditor noted one.
    """
    for event in reversed(trace):
        if event.kind is EventKind.NOTE and type(event.message) is TxFinal:
            return event.message
    msg = "no TxFinal note in the trace: the run ended before the auditor read the store"
    raise ValueError(msg)


def check_tx_run(trace: list[TraceEvent], scenario: TxScenario) -> list[CheckResult]:
    """The transaction checkers over one run."""
    policies = {"in": scenario.policy, "out": AtLeastOnce(), "audit": AtLeastOnce()}
    return transaction_checks(trace, tx_stores(scenario), tx_final(trace), policies)


@final
@attrs.frozen
class TxFigures:
    """What one run did, from the clients' history: items put into ``in``, takes, committed takes, dead letters."""

    published: int
    delivered: int
    acked: int
    dead_lettered: int


def tx_figures(trace: list[TraceEvent], workload: TxScenario) -> TxFigures:
    """Count the run's items from its history and the auditor's note."""
    history = tx_history(trace, tx_stores(workload))
    final = tx_final(trace)
    # attributed: a commit recovered after a lost reply answers without its keys; its items are found by body
    created = [key for key in history.attributed(final)[0] if key.queue == "in"]
    removed = {key for owner in history.committed if (request := history.commits.get(owner))
               for key in request[1].takes}
    dead = len(dict(final.dead)["in"])
    return TxFigures(len(created), len(history.taken), len(removed), dead)
