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

import zlib
from collections.abc import Callable
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
from conveyor.runtime import Actor, ActorRef
from conveyor.simulation import Crash, Fault, RunResult, Simulation, Strategy, seeded_random
from conveyor.simulation.checkers import CheckResult, TxFinal, transaction_checks

TX_STORE = "/tx"
TX_QUEUES = ("in", "out", "audit")
SERVE_S = 30.0
"""Virtual seconds the containers serve before they are stopped: the last put is at 0.5 s, so anything
still in ``in`` then (with a container alive) was kept from them."""


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

    @property
    def items(self) -> int:
        """How many items the producer puts into ``in``."""
        return self.batches * self.batch_size


def random_tx_scenario(seed: int) -> TxScenario:
    """Draw a workload: policy, backoff, failure rate, containers and faults, all from the seed."""
    rng = seeded_random(f"scenario:tx-broker:{seed}")
    policy: ConsumePolicy = rng.choice((ConsumeOnce(), ConsumeTimes(2), ConsumeTimes(3), AtLeastOnce(),
                                        AtLeastOnce(max_rollbacks=2)))
    backoff = rng.choice((None, RedeliveryBackoff(0.05, 0.4)))
    containers = tuple(rng.randint(1, 3) for _ in range(rng.randint(1, 3)))
    batches, batch_size = rng.randint(1, 5), rng.randint(1, 6)
    span = 50 + 25 * batches * batch_size  # steps: a run makes about 30-80 per item
    crashes = tuple((rng.randrange(len(containers)), rng.randint(5, span))
                    for _ in range(rng.choice((0, 1, 1, 2))) if len(containers) > 1)
    store_crashes = tuple(sorted(rng.sample(range(5, span), rng.choice((0, 1, 2)))))
    return TxScenario(batches=batches, batch_size=batch_size, containers=containers, policy=policy,
                      backoff=backoff, fail_percent=rng.choice((0, 20, 50)), container_crashes=crashes,
                      store_crashes=store_crashes, compact_after_events=rng.choice((4, 16, 1024)))


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


def run_tx_simulation(
    scenario: TxScenario,
    seed: int,
    strategy: Strategy | None = None,
    *,
    core: Callable[[], TxStore] = TxStore,
    max_steps: int = 200_000,
) -> tuple[Simulation, RunResult, TxFinal]:
    """Run the workload to quiet, stop the containers, read the store.

    ``core`` swaps the store's sans-IO core (a planted bug).
    """
    faults: list[Fault] = [Crash(TX_STORE, step) for step in scenario.store_crashes]
    faults += [Crash(f"/container-{index}", step, restart=False) for index, step in scenario.container_crashes]
    sim = Simulation(seed=seed, strategy=strategy, faults=faults)
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
    result = sim.run(until=SERVE_S, max_steps=max_steps)
    sim.end_faults()  # the faults drawn past the run's end: none strikes while the containers stop
    serving = any(container.is_alive for container in containers)
    left: QueueItems = sim.ask(store, ReadItems("in"))
    for container in containers:
        if container.is_alive:
            sim.ask(container, StopContainer(), timeout=60.0)
    more = sim.run(max_steps=max_steps)
    result = RunResult(steps=result.steps + more.steps, time=more.time, quiet=more.quiet)
    final = attrs.evolve(read_final(sim, store),
                         left_while_served=tuple(key for key, _ in left.items) if serving else None)
    sim.shutdown()
    return sim, result, final


def read_final(sim: Simulation, store: ActorRef) -> TxFinal:
    """Every queue's items, DLQ and lock count, asked of the store."""
    items: dict[str, tuple[Any, ...]] = {}
    dead: dict[str, tuple[Any, ...]] = {}
    locked: dict[str, int] = {}
    for name in TX_QUEUES:
        listing: QueueItems = sim.ask(store, ReadItems(name))
        letters: DeadLetters = sim.ask(store, ReadDeadLetters(name))
        stats: TxQueueStats = sim.ask(store, GetTxStats(name))
        items[name], dead[name], locked[name] = listing.items, letters.items, stats.locked
    return TxFinal(items, dead, locked)


def check_tx_run(sim: Simulation, scenario: TxScenario, final: TxFinal) -> list[CheckResult]:
    """The transaction checkers over one run."""
    policies = {"in": scenario.policy, "out": AtLeastOnce(), "audit": AtLeastOnce()}
    return transaction_checks(sim.trace, TX_STORE, final, policies)
