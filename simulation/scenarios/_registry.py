"""The registry of built-in scenarios: name -> workload, faults and checkers, all data.

``run_scenario(name, seed, strategy=..., faults=...)`` is the one function the command
line, the tests and the Spark sweep call: it builds the scenario from the seed, draws the
fault plan's concrete faults from the seed, runs the simulation, checks the trace and
returns a ``RunReport`` (one flat row, the same one the sweep writes to Parquet) beside
the simulation itself (its trace and schedule, for replay and shrinking).
"""

from __future__ import annotations

import random
import shlex
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, final

import attrs

from conveyor.actors.broker import (
    COMPACT_AFTER_EVENTS,
    ENTRY_RAM_BYTES,
    ConsumerActor,
    Delivered,
    EntryEnqueued,
    EntryReturned,
    EntrySettled,
    HeaderEquals,
    QueueActor,
)
from conveyor.actors.pubsub import SubscriptionFactory, TopicFactory
from conveyor.actors.subscriber import Part
from conveyor.actors.transactions import TxStore, ZkTxBackend
from conveyor.runtime import EventKind, TraceEvent
from conveyor.simulation import (
    STRATEGY_NAMES,
    Crash,
    CrashAmong,
    Delay,
    DiskFaults,
    Drop,
    FailJob,
    FailWrite,
    Fault,
    Pause,
    ProcessCrash,
    Replay,
    RunResult,
    Simulation,
    Strategy,
    never_acks,
    seeded_random,
    strategy_from_name,
)
from conveyor.simulation.checkers import (
    CheckResult,
    before_final_browse,
    client_counts,
    fairness,
    guarded,
    jain_index,
    kernel_checks,
    liveness,
    paging_counts,
    queue_paths,
    zk_counts,
)

from ._broker import (
    QUEUE,
    BrokerScenario,
    ClientPolicy,
    ConsumerFactory,
    QueueFactory,
    check_broker_run,
    random_broker_scenario,
    run_broker_simulation,
)
from ._paging import PagingScenario, ShellFactory, check_paging_run, random_paging_scenario, run_paging_simulation
from ._pubsub import (
    REGISTRY,
    PubSubScenario,
    check_pubsub_run,
    random_pubsub_scenario,
    replaced_queues,
    run_pubsub_simulation,
)
from ._subscriber import (
    ManagerFactory,
    SubscriberScenario,
    check_subscriber_run,
    random_subscriber_scenario,
    run_subscriber_simulation,
)
from ._swarm import broker_swarm, subscriber_swarm
from ._transactions import TxScenario, check_tx_run, draw_tx_faults, random_tx_scenario, run_tx_simulation, tx_figures
from ._tx_zk import random_tx_zk_scenario, run_tx_zk_simulation
from ._user import ActorWorkload, check_actor_run, draw_actor_faults, run_actor_simulation
from ._zk_basics import (
    ModelFactory,
    ZkBasicsScenario,
    check_zk_basics_run,
    random_zk_basics_scenario,
    run_zk_basics_simulation,
)

STEP_BUDGET = "step budget exhausted"
"""How a run cut off by ``max_steps`` is reported: a distinct outcome (its line in ``RunReport.violations``
starts with this), never a checker's violation; the shrinker refuses to shrink towards it."""

FAULT_PLANS = ("none", "crash", "pause", "delay", "never-ack", "failing-job", "queue-crash", "disk-error",
               "process-crash")
"""Fault plans a scenario can run under; each draws its concrete faults from the seed."""

COMPACTIONS = (8, 64, COMPACT_AFTER_EVENTS)
"""``compact_after_events`` drawn for a durable broker or subscriber queue: BUGGIFY's small constants, so
that runs compact their journals and a crashed queue recovers from a snapshot, not only from events."""

Family = Literal["broker", "subscriber", "pubsub", "storage", "zookeeper", "transactions", "actors"]
Workload = (BrokerScenario | SubscriberScenario | PubSubScenario | PagingScenario | ZkBasicsScenario | TxScenario
            | ActorWorkload)


@final
@attrs.frozen
class Variant:
    """A planted-bug or test variant of a scenario's actors (``None``: the real ones).

    ``queue`` swaps a broker scenario's queue, ``consumer`` its clients' consumers (the callback
    clients' too), ``manager`` a subscriber scenario's manager, ``topic`` and ``subscription`` the
    Pub/Sub front's topic and subscription actors, and ``simulation`` the kernel itself (what
    builds the ``Simulation``), in any family.
    """

    queue: QueueFactory | None = None
    consumer: ConsumerFactory | None = None
    manager: ManagerFactory | None = None
    topic: TopicFactory | None = None
    subscription: SubscriptionFactory | None = None
    simulation: Callable[..., Simulation] | None = None
    shell: ShellFactory | None = None
    """The paging scenario's shell (a planted bug's core or files)."""
    zookeeper: ModelFactory | None = None
    """The simulated ZooKeeper's model (a planted bug's ``SimZooKeeper`` subclass)."""
    tx_store: Callable[[], TxStore] | None = None
    """The transactions scenario's store core (a planted bug's ``TxStore``)."""
    zk_tx_backend: Callable[..., ZkTxBackend] | None = None
    """``tx-zk``'s backends (a planted bug's ``ZkTxBackend`` subclass)."""


@final
@attrs.frozen
class ScenarioSpec:
    """A built-in scenario.

    Attributes:
        name: what ``conveyor simulate NAME`` calls it.
        summary: one line for listings.
        family: ``broker`` (publisher, queue, consumer clients), ``subscriber`` (queue and subscribe()),
            ``pubsub`` (the Pub/Sub front's actors and clients that speak its protocol), ... or ``actors``
            (a user's ``ActorScenario``: its own actors and checkers).
        build: the workload drawn from a seed.
        default_faults: the fault plan used when none is asked for.
        extra_checks: checkers beyond the family's own, over (trace, workload), run only without
            faults (a paused or crashed consumer is rightly served less, so fairness needs none).
        fault_rotation: the plans the default portfolio adds by seed (None: its family's ``FAULTS_OF``).
    """

    name: str
    summary: str
    family: Family
    build: Callable[[int], Workload]
    default_faults: str = "none"
    extra_checks: Callable[[list[TraceEvent], Workload], list[CheckResult]] | None = None
    fault_rotation: tuple[str, ...] | None = None


@final
@attrs.frozen
class RunReport:
    """One run, flat: what the sweep stores per row and the command line summarises."""

    scenario: str
    seed: int
    strategy: str
    depth: int
    faults: str
    steps: int
    virtual_time: float
    published: int
    delivered: int
    acked: int
    redelivered: int
    dead_lettered: int
    max_outstanding: int
    consumers: int
    fairness: float | None
    latency_p50_ms: float | None
    latency_p99_ms: float | None
    violations: tuple[str, ...]
    trace_hash: str
    replay_command: str

    @property
    def ok(self) -> bool:
        """No checker found a violation, and the run finished within its step budget."""
        return not self.violations

    @property
    def cut_off(self) -> bool:
        """The run was stopped by its step budget before it went quiet (its end-state verdicts are moot)."""
        return any(line.startswith(STEP_BUDGET + ":") for line in self.violations)

    def as_row(self) -> dict[str, Any]:
        """A dict of plain values (violations as a list), for Spark and JSON."""
        row = attrs.asdict(self)
        row["violations"] = list(self.violations)
        return row


@final
@attrs.frozen
class ScenarioRun:
    """A finished run: its report, and the simulation (trace, schedule, faults applied)."""

    report: RunReport
    sim: Simulation = attrs.field(eq=False)
    workload: Workload = attrs.field(eq=False)
    results: tuple[CheckResult, ...] = ()


LIVENESS_DEADLINES = 4.0
"""The liveness monitors' bound T, in the scenario's ack deadlines: an entry may stay deliverable, a
consumer with credit go unwoken, or the queue sit idle before its close, this long (4 s for the broker
scenarios, 4-20 s for the subscriber ones). A correct run is never hot at the end of an instant; the
longest a consumer went unwoken in 200 seeds of each scenario was 2.3 s. See docs/simulation.md."""


def _queues(trace: list[TraceEvent], workload: Workload) -> list[str]:
    """The queues a run's checkers judge: ``/queue``, or every queue under the Pub/Sub registry."""
    if isinstance(workload, PubSubScenario):
        return queue_paths(trace)
    return [QUEUE]


def _liveness_checks(trace: list[TraceEvent], workload: Workload) -> list[CheckResult]:
    """Prompt delivery, starvation, stall, queue order and one wake-up per piece of work, on each queue.

    A Pub/Sub front's queues serve bindings of different flow control, so their consumers'
    prefetch is left to the queue's own view of their credit (``SetInterest``).
    """
    if isinstance(workload, TxScenario | ActorWorkload):
        return []  # no leases or credit: tx_drained is its liveness (a user's scenario names its own checks)
    within = LIVENESS_DEADLINES * workload.ack_deadline_s
    if isinstance(workload, BrokerScenario):
        prefetch: int | None = workload.prefetch
    elif isinstance(workload, SubscriberScenario):
        prefetch = workload.flow.max_messages
    else:
        prefetch = None
    results: list[CheckResult] = []
    paths = _queues(trace, workload)
    replaced = replaced_queues(trace)  # a Seek's predecessors: their end is their successors'
    for path in paths:
        found = guarded("liveness", _liveness_of, trace, path, within, prefetch)
        if path in replaced:
            found = [result for result in found if result.checker != "stall"]
        if len(paths) > 1:  # name the queue in each violation
            found = [r if r.ok else attrs.evolve(r, violations=tuple(f"{path}: {v}" for v in r.violations))
                     for r in found]
        results.extend(found)
    return results


def _liveness_of(trace: list[TraceEvent], path: str, within: float, prefetch: int | None) -> list[CheckResult]:
    return liveness(trace, path, within, prefetch=prefetch)


FAIRNESS_MIN_JAIN = 0.8
"""The ``fairness`` scenario's bar: Jain's index over equal consumers' deliveries (1.0 is an even split)."""


def _fairness_check(trace: list[TraceEvent], workload: Workload) -> list[CheckResult]:
    return [fairness(trace, QUEUE, min_jain=FAIRNESS_MIN_JAIN)]


def _fairness_workload(seed: int) -> BrokerScenario:
    rng = seeded_random(f"scenario:fairness:{seed}")
    consumers = rng.randint(2, 8)
    return BrokerScenario(
        messages=rng.randint(40, 25 * consumers),
        consumers=(ClientPolicy(),) * consumers,
        priorities=(4,),
        prefetch=rng.randint(1, 3),
        publish_span_s=rng.uniform(0.5, 3.0),
    )


def _selectors_workload(seed: int) -> BrokerScenario:
    rng = seeded_random(f"scenario:selectors:{seed}")
    base = random_broker_scenario(seed, "mixed")
    choices = (None, HeaderEquals("colour", "red"), HeaderEquals("colour", "blue"))
    selectors = [rng.choice(choices) for _ in base.consumers]
    selectors[0] = None  # someone takes every colour, so the queue drains
    return attrs.evolve(base, selectors=tuple(selectors), colours=("red", "blue", "green"))


def _durable_crash_workload(seed: int) -> BrokerScenario:
    """A durable queue on the simulated disk: 5-30 messages at priorities 0, 4, 9, 1-4 consumers
    (in 40% of runs all of them leave after 1-6 deliveries, so the final browse finds a backlog)."""
    rng = seeded_random(f"scenario:durable-crash:{seed}")
    consumers = tuple(
        ClientPolicy(nack=rng.choice((0.0, 0.1)), release=rng.choice((0.0, 0.05)), late_ack=rng.choice((0.0, 0.1)),
                     confirm=rng.choice((0.5, 1.0)))  # a confirmed ack must survive the crash (acked_stays_acked)
        for _ in range(rng.randint(1, 4))
    )
    messages = rng.randint(5, 30)
    if rng.random() < 0.4:  # the consumers leave early: a backlog outlives the crashes, for found_order to read
        consumers = tuple(attrs.evolve(policy, crash_after=rng.randint(1, 6)) for policy in consumers)
    prefetch = 5
    if seeded_random(f"scenario:durable-crash:{seed}:backlog").random() < 0.6:
        # a deep backlog that a compaction snapshots and a recovery restores (its own generator: the
        # draws above and below keep their values)
        prefetch, consumers = 1, _backlog_draw(seeded_random(f"scenario:durable-crash:{seed}:backlog-policy"),
                                               messages, consumers)
    # Drawn last (older draws keep their values): the queues page their bodies into a synced body store on the
    # simulated disk under a target of no body, one body or a few (a scenario message is about 20 bytes).
    target = rng.choice((None, 0, 8, FEW_BODIES_BYTES))
    return BrokerScenario(messages=messages, consumers=consumers, priorities=(0, 4, 9), durable=True,
                          confirm_timeout_s=3.0, memory_target_bytes=target, prefetch=prefetch,
                          draws="" if target is None else f"memory_target_bytes={target}")


FEW_BODIES_BYTES = 40 + 2 * ENTRY_RAM_BYTES
"""A paged scenario's target of a few bodies: 40 bytes of them (two scenario messages of about 20) and
their entries (a target counts ``ENTRY_RAM_BYTES`` for each body held)."""


def _backlog_draw(rng: random.Random, messages: int, consumers: tuple[ClientPolicy, ...]) -> tuple[ClientPolicy, ...]:
    """Slow consumers (prefetch 1, each ack up to 0.5 s late) that take half to all but three messages, then leave.

    The publishes outrun them, and the journal's events outgrow the live entries (``needs_compaction``)
    once they have taken about half: the snapshot then holds the undelivered rest, which a recovery
    restores and the final browse finds (``found_order`` judges its order).
    """
    taken = rng.randint(max(1, messages // 2), max(1, messages // 2, messages - 3))
    shares = [taken // len(consumers) + (1 if i < taken % len(consumers) else 0) for i in range(len(consumers))]
    return tuple(attrs.evolve(policy, crash_after=max(1, share), late_ack=1.0, late_ack_s=0.5)
                 for policy, share in zip(consumers, shares, strict=True))


def _paged_swarm_workload(seed: int) -> BrokerScenario:
    """``broker-swarm``'s draw, its queues paged under a target of no body, one body or a few."""
    base = broker_swarm(seed)
    target = seeded_random(f"scenario:paged-swarm:{seed}").choice((0, 0, 8, FEW_BODIES_BYTES))
    draws = f"{base.draws}, memory_target_bytes={target}" if base.draws else f"memory_target_bytes={target}"
    return attrs.evolve(base, memory_target_bytes=target, draws=draws)


def _consumer_priorities_workload(seed: int) -> BrokerScenario:
    base = random_broker_scenario(seed, "priorities")
    return attrs.evolve(base, selectors=())


SCENARIOS: Mapping[str, ScenarioSpec] = {
    spec.name: spec
    for spec in (
        ScenarioSpec(
            "fairness", "2-8 equal consumers that ack everything: Jain's index >= 0.8", "broker",
            _fairness_workload, extra_checks=_fairness_check,
        ),
        ScenarioSpec(
            "priorities", "message priorities 0, 4, 9 with nacks, releases, lapses, crashes", "broker",
            lambda seed: random_broker_scenario(seed, "mixed"),
        ),
        ScenarioSpec(
            "consumer-priorities", "consumers at priorities 0-2: a lower one only when no higher can take",
            "broker", _consumer_priorities_workload,
        ),
        ScenarioSpec(
            "selectors", "consumers with header selectors beside catch-all ones", "broker", _selectors_workload,
        ),
        ScenarioSpec(
            "groups", "message groups: one owner per group at a time, in order; browsers", "broker",
            lambda seed: random_broker_scenario(seed, "groups"),
        ),
        ScenarioSpec(
            "crash-recovery", "consumers crash mid-run: the queue takes back everything they held", "broker",
            lambda seed: random_broker_scenario(seed, "mixed"), default_faults="crash",
        ),
        ScenarioSpec(
            "queue-crash", "the durable queue crashes mid-run and rebuilds itself from its journal", "broker",
            lambda seed: random_broker_scenario(seed, "mixed"), default_faults="queue-crash",
        ),
        ScenarioSpec(
            "broker-swarm", "each seed draws its features (TTLs, delays, limits, priorities, groups, browsers, "
            "selectors, retries) and their settings", "broker", broker_swarm,
        ),
        ScenarioSpec(
            "paged-swarm", "broker-swarm's draws on queues that page their bodies out of RAM (memory_target_bytes "
            "0-40): every delivery, browse and dead letter may wait for a read", "broker", _paged_swarm_workload,
        ),
        ScenarioSpec(
            "leases", "subscriber callbacks slower than the ack deadline: the leaser extends", "subscriber",
            lambda seed: random_subscriber_scenario(seed, "slow"),
        ),
        ScenarioSpec(
            "flow-control", "bursts above max_bytes: outstanding messages and bytes stay bounded", "subscriber",
            lambda seed: random_subscriber_scenario(seed, "burst"),
        ),
        ScenarioSpec(
            "ordering-keys", "ordering keys with raising and nacking callbacks, redeliveries", "subscriber",
            lambda seed: random_subscriber_scenario(seed, "ordered"),
        ),
        ScenarioSpec(
            "subscriber-crash", "the subscriber crashes (or is cancelled) mid-run and a fresh one takes over",
            "subscriber",
            lambda seed: random_subscriber_scenario(seed, "crash"),
        ),
        ScenarioSpec(
            "paused-process", "the whole subscriber pauses past its leases: lapses noticed, nothing lost or reordered",
            "subscriber", lambda seed: random_subscriber_scenario(seed, "paused"),
        ),
        ScenarioSpec(
            "subscriber-swarm", "each seed draws its features (ordering keys, flow control, slow, raising and "
            "nacking callbacks, delivery limit, retry, pause, crash) and their settings", "subscriber",
            subscriber_swarm,
        ),
        ScenarioSpec(
            "pubsub-front", "the Pub/Sub front's actors with misbehaving clients, poison publishes and a forger",
            "pubsub", lambda seed: random_pubsub_scenario(seed, "front"),
        ),
        ScenarioSpec(
            "pubsub-exactly-once", "exactly-once subscriptions: confirmed acks, stale and forged ids refused",
            "pubsub", lambda seed: random_pubsub_scenario(seed, "exactly-once"),
        ),
        ScenarioSpec(
            "pubsub-crash", "bindings and subscription queues crash, clients pause past their leases",
            "pubsub", lambda seed: random_pubsub_scenario(seed, "faults"), default_faults="crash,queue-crash,pause",
        ),
        ScenarioSpec(
            "paging", "the variable queue under a tiny memory target on the simulated disk: publishes, fetches, "
            "acks, requeues, target changes, kill -9", "storage", random_paging_scenario,
            default_faults="process-crash",
        ),
        ScenarioSpec(
            "durable-crash", "a durable queue on a simulated disk: kill -9, torn writes, failed fsyncs, a full disk",
            "broker", _durable_crash_workload, default_faults="process-crash",
        ),
        ScenarioSpec(
            "zk-basics", "clients of the simulated ZooKeeper create sequential and ephemeral nodes through slow "
            "requests, lost connections and expiring sessions", "zookeeper", random_zk_basics_scenario,
        ),
        ScenarioSpec(
            "tx-broker", "transactions on the broker backend: listener containers commit across three queues, "
            "roll back, crash holding locks; the durable store crashes", "transactions", random_tx_scenario,
            default_faults="crash,queue-crash",
        ),
        ScenarioSpec(
            "tx-zk", "tx-broker's workload on 2-3 ZooKeeper backends sharing a root: slow requests, lost connections, "
            "expired sessions, containers crashing holding locks", "transactions", random_tx_zk_scenario,
            default_faults="crash,queue-crash",
        ),
    )
}


def scenario_names() -> tuple[str, ...]:
    """The registry's scenario names, in listing order."""
    return tuple(SCENARIOS)


def scenario_draws(name: str, seed: int) -> str:
    """What a swarm scenario's seed drew (its features and settings), or "" for a scenario that draws none."""
    return str(getattr(get_scenario(name).build(seed), "draws", ""))


def get_scenario(name: str) -> ScenarioSpec:
    """The scenario called ``name``: a built-in one, an installed plugin's, or ``module:NAME`` (``_plugins.py``).

    Raises:
        ValueError: no such scenario (the message lists them and the forms a name may take).
    """
    spec = SCENARIOS.get(name)
    if spec is None:
        from ._plugins import find_scenario

        return find_scenario(name)
    return spec


def check_fault_plan(faults: str) -> str:
    """Validate a fault plan name (or several, comma separated); return it normalised.

    An empty value or entry is refused rather than read as ``none``: ``--faults ""`` is more
    likely a shell variable that was never set than a request for no faults.
    """
    names = [part.strip() for part in faults.split(",")]
    if "" in names:
        msg = (f"empty fault plan in {faults[:40]!r}; choose one or more (comma separated) of: "
               f"{', '.join(FAULT_PLANS)} (none for no faults)")
        raise ValueError(msg)
    for name in names:
        if name not in FAULT_PLANS:
            msg = f"unknown fault plan {name!r}; choose one or more (comma separated) of: {', '.join(FAULT_PLANS)}"
            raise ValueError(msg)
    if len(names) > 1 and "none" in names:
        names.remove("none")
    return ",".join(names)


def _client_paths(workload: Workload) -> list[str]:
    if isinstance(workload, TxScenario):
        return [f"/container-{index}" for index in range(len(workload.containers))]
    if isinstance(workload, PagingScenario):
        return ["/paging-client"]
    if isinstance(workload, BrokerScenario):
        return [f"/client-{index}" for index in range(len(workload.consumers))]
    if isinstance(workload, PubSubScenario):
        return list(workload.client_paths())
    return ["/sub"]


def _draw_pubsub_faults(
    workload: PubSubScenario, rng: random.Random, plan: str
) -> tuple[PubSubScenario, list[Fault]]:
    """The fault plans on the Pub/Sub front, so that ``--faults`` means the same everywhere.

    ``crash`` crashes bindings (each gives up and ends its stream; its client opens another),
    ``queue-crash`` a subscription's durable queue (it rebuilds from its journal), ``disk-error``
    fails one journal write of a queue under the registry, ``pause`` freezes a client past its
    leases, ``delay`` stalls a client's channel to the registry (its publishes, acks, opens),
    ``never-ack`` drops the settlements of a streaming client (never a subscription's only one)
    whose stream asks for one message at a time (the plan sets it), so that the one message it
    never acks uses up its flow control and what lapses goes to the others, as a broker consumer's
    spent credit does. (A client that never acks with credit to spare, or a pulling one, which
    gets fresh credit with every Pull, takes each lapsed message again, for ever if it is first in
    line when it lapses: no queue prevents that short of a dead-letter policy.)
    ``failing-job`` does nothing here: nothing runs jobs. The registry, topics and
    subscriptions themselves are never crashed: they contain a failure per request instead of
    journaling their state, so a kernel restart would start them empty (docs/simulation.md).
    """
    clients = list(workload.client_paths())
    span = 20 + 40 * workload.messages  # steps: the front spends about 40 per message
    faults: list[Fault] = []
    for name in plan.split(","):
        if name == "crash":
            for step in sorted(rng.sample(range(20, span), rng.randint(1, 3))):
                faults.append(CrashAmong(REGISTRY, "binding", at_step=step, pick=rng.randrange(8)))
        elif name == "queue-crash":
            for step in sorted(rng.sample(range(20, span), rng.randint(1, 3))):
                faults.append(CrashAmong(REGISTRY, "queue", at_step=step, pick=rng.randrange(8)))
        elif name == "disk-error":
            faults.append(FailWrite(REGISTRY, nth=rng.randint(1, 3 * workload.messages)))
        elif name == "pause":
            faults.append(Pause(rng.choice(clients), at_time=rng.uniform(0.0, workload.drain_at_s),
                                duration_s=rng.uniform(1.0, 3.0) * workload.ack_deadline_s))
        elif name == "delay":
            faults.append(Delay(rng.choice(clients), REGISTRY, at_step=rng.randint(1, span),
                                duration_s=rng.uniform(0.1, 3.0)))
        elif name == "never-ack":
            served = Counter(plan_.subscription for plan_ in workload.clients)
            streams = [index for index, plan_ in enumerate(workload.clients)
                       if served[plan_.subscription] > 1 and not plan_.pull]
            if streams:
                index = rng.choice(streams)
                one = attrs.evolve(workload.clients[index], max_messages=1)
                workload = attrs.evolve(workload, clients=(*workload.clients[:index], one,
                                                           *workload.clients[index + 1 :]))
                faults.append(Drop(clients[index], "Settle"))
    return workload, faults


def draw_faults(spec: ScenarioSpec, workload: Workload, seed: int, plan: str) -> tuple[Workload, tuple[Fault, ...]]:
    """The concrete faults of ``plan`` for this run, drawn from the seed (so they replay).

    Faults are simulator data, except a subscriber's crash: the process dies and a fresh
    subscription takes over, which the subscriber workload itself plays (``crash_at``), so
    that plan returns a changed workload. (Restarting one part of a subscription, say its
    worker pool, would lose the callbacks it ran; such a failure stops the subscription.)
    """
    if isinstance(workload, ZkBasicsScenario):
        return workload, ()  # its faults are the ensemble's, drawn with the workload (ZkFaults, expiries)
    rng = seeded_random(f"faults:{spec.name}:{seed}:{plan}")
    if isinstance(workload, ActorWorkload):
        return draw_actor_faults(workload, rng, plan)
    if isinstance(workload, TxScenario):
        return draw_tx_faults(workload, rng, plan)
    if isinstance(workload, PagingScenario):
        return _draw_paging_faults(workload, rng, plan)
    if isinstance(workload, PubSubScenario):
        drawn, pubsub_faults = _draw_pubsub_faults(workload, rng, plan)
        return drawn, tuple(pubsub_faults)
    clients = _client_paths(workload)
    faults: list[Fault] = []
    for name in plan.split(","):
        if name == "crash":
            if isinstance(workload, BrokerScenario):
                for path in rng.sample(clients, rng.randint(1, max(1, len(clients) // 2))):
                    faults.append(Crash(path, at_step=rng.randint(5, 400), restart=False))
            elif workload.crash_at is None:
                workload = attrs.evolve(
                    workload, crash_at=rng.uniform(0.05, 1.5), restart_after_s=rng.uniform(0.0, workload.ack_deadline_s)
                )
        elif name == "pause":
            faults.append(Pause(rng.choice(clients), at_time=rng.uniform(0.0, 1.5), duration_s=rng.uniform(0.5, 5.0)))
        elif name == "delay":
            if isinstance(workload, BrokerScenario):
                sender = f"{rng.choice(clients)}/consumer"
            else:
                sender = f"/sub/{Part.CONSUMER}"
            faults.append(Delay(sender, QUEUE, at_step=rng.randint(1, 300), duration_s=rng.uniform(0.1, 3.0)))
        elif name == "never-ack":
            if isinstance(workload, BrokerScenario) and len(clients) > 1:
                faults.append(never_acks(rng.choice(clients[1:])))  # client 0 keeps acking, so work drains
        elif name == "failing-job":
            faults.append(FailJob("/sub", nth=rng.randint(1, 10)))
        elif name == "queue-crash":
            # The queue (a broker's, or the one a subscription reads) crashes 1-3 times and is
            # restarted at once: a durable queue must come back with everything it held.
            # Steps scale with the workload (about 15 per message), so crashes fall all through a
            # run, and a shrunk workload crashes earlier and tells a shorter story.
            workload = attrs.evolve(workload, durable=True)
            for step in sorted(rng.sample(range(5, 5 + 15 * workload.messages), rng.randint(1, 3))):
                faults.append(Crash(QUEUE, at_step=step, restart=True))
        elif name == "disk-error":
            # One of the durable queue's journal writes fails (about 3 a message): it crashes
            # in the middle of a handler and recovers what it had written before.
            workload = attrs.evolve(workload, durable=True)
            faults.append(FailWrite(QUEUE, nth=rng.randint(1, 3 * workload.messages)))
        elif name == "process-crash" and isinstance(workload, BrokerScenario):
            workload, crashes = _draw_process_crashes(workload, rng)
            faults.extend(crashes)
    if workload.durable:  # from its own generator: the draws above stay what they were
        compaction = seeded_random(f"compaction:{spec.name}:{seed}").choice(COMPACTIONS)
        workload = attrs.evolve(workload, compact_after_events=compaction)
    return workload, tuple(faults)


def _draw_paging_faults(
    workload: PagingScenario, rng: random.Random, plan: str,
) -> tuple[PagingScenario, tuple[Fault, ...]]:
    """``process-crash`` kills the paging shell's process 1-3 times, on a disk that tears writes (as drawn).

    The other plans do nothing here: the shell has no clients to crash, delay or pause but its one.
    """
    if "process-crash" not in plan.split(","):
        return workload, ()
    workload = attrs.evolve(workload, disk=DiskFaults(torn_write=rng.choice((0.0, 0.5, 1.0))))
    steps = sorted(rng.sample(range(5, 5 + 8 * workload.operations), rng.randint(1, 3)))
    return workload, tuple(ProcessCrash(at_step=step) for step in steps)


def _draw_process_crashes(workload: BrokerScenario, rng: random.Random) -> tuple[BrokerScenario, list[Fault]]:
    """The queues' process is killed 1-3 times, on a disk that tears writes, fails fsyncs or fills, as drawn.

    The queues journal on a simulated disk (``SimDisk``) through the real storage code; a kill
    (at a drawn step, or, for two kills in three, right after the queue next sends a ``Published`` or an
    ``AckResult``) loses what was not synced and the queues recover from what the disk kept. A failed fsync or a
    full disk crashes the process as well. The publisher gives up a publish unanswered for 3 s.
    """
    full_after = rng.choice((None, None, rng.randint(2_000, 60 * workload.messages + 2_000)))
    disk = DiskFaults(
        torn_write=rng.choice((0.0, 0.5, 1.0)), fsync_failure=rng.choice((0.0, 0.02, 0.1)),
        fsync_failures=rng.randint(1, 2), full_after=full_after, full_for=rng.randint(1, 3),
    )
    workload = attrs.evolve(workload, durable=True, disk=disk, confirm_timeout_s=workload.confirm_timeout_s or 3.0)
    steps = sorted(rng.sample(range(5, 5 + 15 * workload.messages), rng.randint(1, 3)))
    # Half the kills wait for a promise to leave the process (a publish or an ack confirmed): the
    # moment a confirm sent before its sync would show.
    return workload, [ProcessCrash(at_step=step, after_sent=rng.choice((None, "Published", "AckResult")))
                      for step in steps]


def replay_command(name: str, seed: int, strategy: str, depth: int, faults: str) -> str:
    """The one command that reproduces a run bit for bit (``--faults`` whenever it differs from the default)."""
    parts = ["conveyor", "replay", name, "--seed", str(seed), "--strategy", strategy]
    if strategy == "pct":
        parts += ["--depth", str(depth)]
    try:
        default = get_scenario(name).default_faults
    except ValueError:
        default = "none"
    if faults != default:
        parts += ["--faults", faults]
    return shlex.join(parts)


def _disk_figures(trace: list[TraceEvent], work: Workload) -> QueueFigures | None:
    """A disk scenario's figures from its clients' word (a kill -9 takes back the queue's notes); None for others.

    The transactions scenario's too: items put into ``in``, takes, committed takes, dead letters.
    """
    if isinstance(work, TxScenario):
        tx = tx_figures(trace, work)
        return QueueFigures(published=tx.published, delivered=tx.delivered, acked=tx.acked, redelivered=0,
                            dead_lettered=tx.dead_lettered, max_outstanding=0, consumers=len(work.containers),
                            fairness=None, latencies_ms=())
    if isinstance(work, PagingScenario):
        published, delivered, acked = paging_counts(trace)
        dead = 0
    elif isinstance(work, ZkBasicsScenario):  # calls sent, answered, answered without an error
        published, delivered, acked = zk_counts(trace)
        dead = 0
    elif isinstance(work, BrokerScenario) and work.disk is not None:
        published, delivered, acked, dead = client_counts(trace)
    else:
        return None
    return QueueFigures(published=published, delivered=delivered, acked=acked, redelivered=0, dead_lettered=dead,
                        max_outstanding=0, consumers=0, fairness=None, latencies_ms=())


def _percentile(values: Sequence[float], fraction: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


@final
@attrs.frozen
class QueueFigures:
    """What one queue did over a run, read from its trace."""

    published: int
    delivered: int
    acked: int
    redelivered: int
    dead_lettered: int
    max_outstanding: int
    consumers: int
    fairness: float | None
    latencies_ms: tuple[float, ...]


def queue_figures(trace: Iterable[TraceEvent], queue_path: str | tuple[str, ...] = QUEUE) -> QueueFigures:
    """Count publishes, deliveries, acks, redeliveries, dead letters and the in-flight peak of a queue.

    ``queue_path`` may name several queues (a Pub/Sub front's, one per subscription): their counts
    add up, the in-flight peak is of all of them together and fairness is over all their consumers.
    """
    paths = (queue_path,) if isinstance(queue_path, str) else queue_path
    single = paths[0] if len(paths) == 1 else None
    published = delivered = acked = redelivered = dead = outstanding = peak = 0
    enqueued_at: dict[tuple[str, int], float] = {}
    latencies: list[float] = []
    per_consumer: Counter[tuple[str, int]] = Counter()
    for event in before_final_browse(trace):  # the run's traffic, not the clients' closing read
        message = event.message
        sender = event.sender
        if sender is None or (sender != single if single is not None else sender not in paths):
            continue
        if event.kind is EventKind.NOTE:
            if isinstance(message, EntryEnqueued):
                published += 1
                enqueued_at[(sender, message.tag)] = event.time
            elif isinstance(message, EntrySettled):
                if message.outcome == "acked":
                    acked += 1
                elif message.outcome == "dead_lettered":
                    dead += 1
                if message.consumer_id is not None:
                    outstanding = max(0, outstanding - 1)
            elif isinstance(message, EntryReturned):
                outstanding = max(0, outstanding - 1)
        elif event.kind is EventKind.SENT and isinstance(message, Delivered):
            for delivery in message.deliveries:
                delivered += 1
                per_consumer[(sender, delivery.consumer_id)] += 1
                outstanding += 1
                if delivery.delivery_count > 1:
                    redelivered += 1
                else:
                    start = enqueued_at.get((sender, delivery.tag))
                    if start is not None:
                        latencies.append((event.time - start) * 1000.0)
            peak = max(peak, outstanding)
    counts = [float(count) for count in per_consumer.values()]
    return QueueFigures(
        published=published, delivered=delivered, acked=acked, redelivered=redelivered, dead_lettered=dead,
        max_outstanding=peak, consumers=len(counts), fairness=jain_index(counts) if len(counts) > 1 else None,
        latencies_ms=tuple(latencies),
    )


def simulate_workload(
    workload: Workload, seed: int, strategy: Strategy, faults: tuple[Fault, ...] = (), variant: Variant | None = None,
    max_steps: int = 500_000,
) -> tuple[Simulation, RunResult]:
    """Run ``workload`` (faults already drawn) in a Simulation with ``variant``'s actors; no checks.

    What ``run_scenario`` runs before it judges; the shrinker runs candidates through it too.
    """
    variant = variant or Variant()
    system = variant.simulation or Simulation
    if isinstance(workload, TxScenario) and workload.zk is not None:
        return run_tx_zk_simulation(workload, seed, strategy, faults=faults, system=system, max_steps=max_steps,
                                    backend=variant.zk_tx_backend or ZkTxBackend)
    if isinstance(workload, ActorWorkload):
        return run_actor_simulation(workload, seed, strategy, faults, system, max_steps)
    if isinstance(workload, TxScenario):
        return run_tx_simulation(workload, seed, strategy, faults=faults, core=variant.tx_store or TxStore,
                                 system=system, max_steps=max_steps)
    if isinstance(workload, BrokerScenario):
        return run_broker_simulation(
            workload, seed, strategy, max_steps=max_steps, queue_factory=variant.queue or QueueActor, faults=faults,
            consumer_factory=variant.consumer or ConsumerActor,
            system=system,
        )
    if isinstance(workload, ZkBasicsScenario):
        return run_zk_basics_simulation(workload, seed, strategy, max_steps=max_steps, faults=faults, system=system,
                                        model=variant.zookeeper)
    if isinstance(workload, PagingScenario):
        return run_paging_simulation(workload, seed, strategy, max_steps=max_steps, faults=faults, system=system,
                                     shell=variant.shell)
    if isinstance(workload, PubSubScenario):
        return run_pubsub_simulation(
            workload, seed, strategy, max_steps=max_steps, topic_factory=variant.topic,
            subscription_factory=variant.subscription, faults=faults, system=system,
        )
    return run_subscriber_simulation(
        workload, seed, strategy, max_steps=max_steps, manager=variant.manager, faults=faults, system=system
    )


def _judge(spec: ScenarioSpec, trace: list[TraceEvent], work: Workload, plan: str) -> list[CheckResult]:
    """Every verdict on a run: its family's checkers, the liveness monitors, the spec's extra checks.

    Each checker is ``guarded``: one that raises on this trace becomes a failing verdict naming it
    and its exception, and the run's other verdicts stand (a ``KeyError`` in one monitor once
    stopped a whole sweep, hiding every finding of every other run).
    """
    family: Callable[..., list[CheckResult]]
    if isinstance(work, ActorWorkload):
        return guarded(f"{spec.name} checkers", check_actor_run, trace, work) + guarded("kernel", kernel_checks, trace)
    if isinstance(work, TxScenario):
        return guarded("transactions checkers", check_tx_run, trace, work) + guarded("kernel", kernel_checks, trace)
    if isinstance(work, PagingScenario):
        return guarded("storage checkers", check_paging_run, trace, work) + guarded("kernel", kernel_checks, trace)
    if isinstance(work, ZkBasicsScenario):
        return guarded("zookeeper checkers", check_zk_basics_run, trace, work) + guarded("kernel", kernel_checks, trace)
    if isinstance(work, BrokerScenario):
        family = check_broker_run
    elif isinstance(work, PubSubScenario):
        family = check_pubsub_run
    else:
        family = check_subscriber_run
    results = guarded(f"{spec.family} checkers", family, trace, work)
    if not (isinstance(work, BrokerScenario) and work.disk is not None):  # a kill -9 rewinds the queue's own view
        results += guarded("liveness", _liveness_checks, trace, work)
    results += guarded("kernel", kernel_checks, trace)
    if spec.extra_checks is not None and plan == "none":
        results += guarded(f"{spec.name} checks", spec.extra_checks, trace, work)
    return results


def run_scenario(
    name: str,
    seed: int,
    *,
    strategy: str = "random",
    depth: int = 3,
    faults: str | None = None,
    schedule: Sequence[int] | None = None,
    variant: Variant | None = None,
    workload: Workload | None = None,
    max_steps: int = 500_000,
    hash_trace: bool = True,
) -> ScenarioRun:
    """Run scenario ``name`` with ``seed`` under a strategy and a fault plan; check it; report.

    Args:
        name: a registry name (``scenario_names()``), an installed plugin's or ``module:NAME`` (``get_scenario``).
        seed: fixes the workload, the faults, the actors' randomness and the strategy.
        strategy: ``random``, ``pct`` or ``round-robin``.
        depth: PCT's bug depth.
        faults: a fault plan name or several, comma separated (default: the scenario's own).
        schedule: replay these recorded choices instead of asking the strategy.
        variant: swap in planted-bug actors.
        workload: run this workload instead of the one the seed draws (shrinking uses it).
        max_steps: give up after this many deliveries.
        hash_trace: compute the report's ``trace_hash`` (a fifth of a run's cost); ``False`` leaves it
            ``""``, for callers that never show it (``conveyor simulate``: its failures print the
            replay command, and ``conveyor replay`` prints the hash).

    Raises:
        ValueError: an unknown scenario, strategy or fault plan, or a bad depth.
    """
    spec = get_scenario(name)
    plan = check_fault_plan(faults if faults is not None else spec.default_faults)
    if strategy not in STRATEGY_NAMES:
        msg = f"unknown strategy {strategy!r}; choose one of: {', '.join(STRATEGY_NAMES)}"
        raise ValueError(msg)
    chosen: Strategy = Replay(schedule) if schedule is not None else strategy_from_name(strategy, seed, depth=depth)
    work = workload if workload is not None else spec.build(seed)
    work, fault_plan = draw_faults(spec, work, seed, plan)
    sim, result = simulate_workload(work, seed, chosen, fault_plan, variant, max_steps)
    trace = sim.trace
    results = _judge(spec, trace, work, plan)
    violations = tuple(f"{r.checker}: {line}" for r in results if not r.ok for line in r.violations)
    if not result.quiet:
        violations += (
            f"{STEP_BUDGET}: the run had not gone quiet after its budget of {max_steps} delivery steps "
            f"(t={result.time:g}); a cut-off, not a checker's finding: rerun with a larger --max-steps",
        )
    figures = _disk_figures(trace, work) or queue_figures(trace, tuple(_queues(trace, work)))
    report = RunReport(
        scenario=name, seed=seed, strategy=strategy, depth=depth, faults=plan, steps=result.steps,
        virtual_time=result.time, published=figures.published, delivered=figures.delivered, acked=figures.acked,
        redelivered=figures.redelivered, dead_lettered=figures.dead_lettered,
        max_outstanding=figures.max_outstanding, consumers=figures.consumers, fairness=figures.fairness,
        latency_p50_ms=_percentile(figures.latencies_ms, 0.5), latency_p99_ms=_percentile(figures.latencies_ms, 0.99),
        violations=violations, trace_hash=sim.trace_hash() if hash_trace else "",
        replay_command=replay_command(name, seed, strategy, depth, plan),
    )
    return ScenarioRun(report, sim, work, tuple(results))
