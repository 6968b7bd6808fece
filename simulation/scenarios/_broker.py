"""Broker scenarios: a publisher, a queue (and its dead-letter queue), clients with policies.

A scenario is data (``BrokerScenario``); ``spawn_broker_scenario`` builds its actors on
any system, so the same workload runs in the simulator, on trio and on threads, and
the same checkers judge every trace. Clients draw their choices from ``ctx.random``,
so a simulated run is fixed by its seed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, final

import attrs

from conveyor.actors.broker import (
    Ack,
    ConsumerActor,
    ConsumerSettings,
    Delivery,
    Message,
    ModifyAckDeadline,
    Nack,
    Overflow,
    Publish,
    Published,
    PublishRejected,
    QueueActor,
    QueueConfig,
    Release,
    RetryPolicy,
)
from conveyor.runtime import Actor, ActorRef, ActorSystemBase, TraceEvent
from conveyor.runtime.lowlevel import register_immutable_type
from conveyor.simulation import Fault, RunResult, Simulation, Strategy, seeded_random
from conveyor.simulation.checkers import (
    CheckResult,
    ClientAnswer,
    ConsumerAsked,
    DeliveryReceived,
    DeliverySettled,
    EnqueueAnswered,
    EnqueueSent,
    SharedTrace,
    accounting,
    browser_completeness,
    consumer_priority,
    delivery_count,
    delivery_limit,
    drained,
    exclusive_lease,
    expiry,
    group_exclusivity,
    guarded,
    length_limit,
    not_before,
    priority_order,
    selector_match,
    strict_order,
    total_queue,
    unsettled_by_clients,
)

from ._final_browse import browse_what_is_left

QUEUE = "/queue"
DEAD_LETTERS = "/dead-letters"


@final
@attrs.frozen
class ClientPolicy:
    """What a client does with each delivery, by probability (the rest is acked at once).

    Attributes:
        nack: nack it (redelivered after the queue's backoff).
        release: release it (redelivered at once).
        ignore: never answer (the lease lapses and it is redelivered).
        late_ack: ack after up to ``late_ack_s`` (sometimes after the lease lapsed).
        extend: extend the lease to ``extend_s`` from now (``ModifyAckDeadline``), then ack
            within it.
        crash_after: stop the client (and its consumer) after this many deliveries; 0 never.
    """

    nack: float = 0.0
    release: float = 0.0
    ignore: float = 0.0
    late_ack: float = 0.0
    late_ack_s: float = 2.0
    crash_after: int = 0
    extend: float = 0.0
    extend_s: float = 3.0


@final
@attrs.frozen
class BrokerScenario:
    """A broker workload.

    Attributes:
        messages: how many the publisher sends, spread over ``publish_span_s``.
        consumers: one ``ClientPolicy`` per acquiring consumer.
        consumer_priorities: per consumer (default all 0).
        selectors: per consumer, selector data (None matches everything).
        browsers: number of browsers.
        priorities: message priorities are drawn from this tuple.
        groups: number of message groups (0: no groups).
        colours: header ``colour`` values drawn for each message (for selectors).
        ack_deadline_s, max_deliveries, prefetch: queue and consumer settings.
        durable: the queues keep their state in their journals, so a crashed queue recovers it.
        ttls, delays: each message's ``ttl_s`` / ``delay_s`` is drawn from these (empty: none).
        max_length, overflow: the queue's length limit and what it does past it.
        draws: what a swarm scenario drew for this run, in words (noted in the trace; empty otherwise).
        memory_target_bytes: the queues page their bodies under this target (``QueueConfig``); None
            keeps every body in RAM. Ignored for a durable scenario (a durable queue cannot page yet).
    """

    messages: int = 50
    consumers: tuple[ClientPolicy, ...] = (ClientPolicy(),)
    consumer_priorities: tuple[int, ...] = ()
    selectors: tuple[Any, ...] = ()
    browsers: int = 0
    priorities: tuple[int, ...] = (4,)
    groups: int = 0
    colours: tuple[str, ...] = ("red", "blue")
    publish_span_s: float = 1.0
    ack_deadline_s: float = 1.0
    max_deliveries: int = 5
    prefetch: int = 5
    retry: RetryPolicy | None = attrs.field(factory=lambda: RetryPolicy(0.05, 0.4))
    durable: bool = False
    ttls: tuple[float | None, ...] = ()
    delays: tuple[float | None, ...] = ()
    max_length: int | None = None
    overflow: Overflow = Overflow.REJECT_PUBLISH
    draws: str = ""
    memory_target_bytes: int | None = None

    def checkers_that_apply(self) -> tuple[str, ...]:
        """Names of the checkers whose preconditions this scenario meets."""
        names = ["accounting", "drained", "delivery_count", "delivery_limit", "exclusive_lease"]
        # the per-message promises first: they fail at the first broken delivery, so a shrink keeps them
        if any(self.ttls):
            names.append("expiry")
        if any(self.delays) or self.retry is not None:
            names.append("not_before")
        if self.max_length is not None:
            names.append("length_limit")
        if any(selector is not None for selector in self.selectors):
            names.append("selector_match")
        names += ["priority_order", "consumer_priority"]
        if len(set(self.consumer_priorities or (0,))) == 1:
            names.append("strict_order")
        if self.groups:
            names.append("group_exclusivity")
        if self.browsers:
            names.append("browser_completeness")
        names.append("total_queue")  # last: a checker that names a cause is the one a shrink keeps failing
        return tuple(names)


@final
@attrs.frozen
class _PublishNext:
    index: int

    def __attrs_post_init__(self) -> None:
        # Checked once here, so arming its timer (one per message) need not walk it.
        if type(self.index) is not int:
            msg = f"_PublishNext.index must be an int, got {self.index!r}"
            raise TypeError(msg)


register_immutable_type(_PublishNext)


@final
class ScenarioPublisher(Actor):
    """Publishes the scenario's messages at random instants, with confirms.

    When the system traces, it writes its history (``EnqueueSent``, ``EnqueueAnswered``) for
    ``total_queue``, which judges the queue by its clients' word alone.
    """

    def __init__(self, queue: ActorRef, scenario: BrokerScenario) -> None:
        self.queue = queue
        self.scenario = scenario
        self.confirmed = 0
        self.queue_path = str(queue.path)
        self.noting = False
        self.salt = 0

    def on_start(self) -> None:
        """Plan every publish as a timer, from ``ctx.random``; note a swarm's draws first."""
        self.noting = self.ctx.tracing
        scenario = self.scenario
        if scenario.draws:
            self.ctx.note(scenario.draws)
        if scenario.ttls or scenario.delays:
            self.salt = self.ctx.random.getrandbits(64)
        for index in range(scenario.messages):
            self.ctx.schedule(self.ctx.random.uniform(0, scenario.publish_span_s), _PublishNext(index))

    def receive(self, message: Any) -> None:
        """Publish one message, or count a confirm."""
        if type(message) is _PublishNext:
            scenario = self.scenario
            rng = self.ctx.random
            group = f"g{rng.randrange(scenario.groups)}" if scenario.groups else None
            index = message.index
            name = f"m{index}"
            ttl = delay = None
            if scenario.ttls or scenario.delays:
                # Drawn only when the scenario asks for them (older scenarios keep their schedules), and
                # per message, so a message keeps its TTL and delay when a shrink drops others.
                own = seeded_random(f"{self.salt}:{index}")
                ttl = own.choice(scenario.ttls) if scenario.ttls else None
                delay = own.choice(scenario.delays) if scenario.delays else None
            sent = Message(
                name.encode(),
                headers=(("colour", rng.choice(scenario.colours)), ("index", index)),
                priority=rng.choice(scenario.priorities),
                group=group,
                message_id=name,
                ttl_s=ttl,
                delay_s=delay,
            )
            if self.noting:
                self.ctx.note(EnqueueSent(self.queue_path, (name,), (sent,)))
            self.ctx.send(self.queue, Publish(sent))
        elif type(message) is Published:
            self.confirmed += 1
            if self.noting:
                self.ctx.note(EnqueueAnswered(self.queue_path, (message.message_id,)))
        elif type(message) is PublishRejected and self.noting:
            self.ctx.note(EnqueueAnswered(self.queue_path, (), (message.message_id,)))


@final
@attrs.frozen
class _LateAck:
    delivery: Delivery


@final
class ScenarioClient(Actor):
    """A client that owns its ConsumerActor (as a child) and answers deliveries by its policy.

    When the system traces, it writes its history: each delivery it is given
    (``DeliveryReceived``, with its own intent to acquire or browse, not what its consumer
    declared) and each answer it sends (``DeliverySettled``).
    """

    def __init__(
        self, queue: ActorRef, policy: ClientPolicy, settings: ConsumerSettings,
        consumer_factory: ConsumerFactory = ConsumerActor,
    ) -> None:
        self.queue = queue
        self.policy = policy
        self.settings = settings
        self.consumer_factory = consumer_factory
        self.deliveries = 0
        self.consumer: ActorRef | None = None
        self.queue_path = str(queue.path)
        self.noting = False
        # The policy's cumulative thresholds, summed once in the order ``receive`` compares them.
        self.below_nack = policy.nack
        self.below_release = policy.nack + policy.release
        self.below_ignore = policy.nack + policy.release + policy.ignore
        self.below_late_ack = policy.nack + policy.release + policy.ignore + policy.late_ack
        self.below_extend = self.below_late_ack + policy.extend

    def on_start(self) -> None:
        """Spawn the consumer, supervised by this client."""
        self.noting = self.ctx.tracing
        if self.noting:
            self.ctx.note(ConsumerAsked(self.queue_path, self.settings.selector, self.settings.acquiring))
        self.consumer = self.ctx.spawn(
            lambda: self.consumer_factory(self.queue, self.ctx.self_ref, self.settings), name="consumer"
        )

    def receive(self, message: Any) -> None:
        """Answer one delivery."""
        cls = type(message)
        if cls is _LateAck:
            delivery = message.delivery
            assert self.consumer is not None
            if self.noting:
                self._note_answer(delivery, "ack")
            self.ctx.send(self.consumer, Ack(delivery.consumer_id, (delivery.tag,)))
            return
        if cls is not Delivery:
            return
        self.deliveries += 1
        policy = self.policy
        acquiring = self.settings.acquiring
        noting = self.noting
        if noting:
            self.ctx.note(DeliveryReceived(self.queue_path, message.consumer_id, message.tag,
                                           message.message.message_id, message.delivery_count, acquiring))
        if not acquiring:
            return
        draw = self.ctx.random.random()
        if draw < self.below_nack:
            if noting:
                self._note_answer(message, "nack")
            self.ctx.reply(Nack(message.consumer_id, (message.tag,)))
        elif draw < self.below_release:
            if noting:
                self._note_answer(message, "release")
            self.ctx.reply(Release(message.consumer_id, (message.tag,)))
        elif draw < self.below_ignore:
            pass
        elif draw < self.below_late_ack:
            self.ctx.schedule(self.ctx.random.uniform(0, policy.late_ack_s), _LateAck(message))
        elif draw < self.below_extend:
            self.ctx.reply(ModifyAckDeadline(message.consumer_id, (message.tag,), policy.extend_s))
            self.ctx.schedule(self.ctx.random.uniform(0.5, 0.9) * policy.extend_s, _LateAck(message))
        else:
            if noting:
                self._note_answer(message, "ack")
            self.ctx.reply(Ack(message.consumer_id, (message.tag,)))
        if policy.crash_after and self.deliveries >= policy.crash_after:
            self.ctx.stop()  # the consumer child stops with us; the queue takes everything back

    def _note_answer(self, delivery: Delivery, outcome: ClientAnswer) -> None:
        self.ctx.note(DeliverySettled(self.queue_path, delivery.consumer_id, delivery.tag,
                                      delivery.message.message_id, delivery.delivery_count, outcome))


QueueFactory = Callable[[QueueConfig], QueueActor]
ConsumerFactory = Callable[[ActorRef, ActorRef, ConsumerSettings], ConsumerActor]
"""Builds a scenario client's consumer from (queue, client, settings): ``ConsumerActor``, or a planted variant."""


def spawn_broker_scenario(
    system: ActorSystemBase, scenario: BrokerScenario, queue_factory: QueueFactory = QueueActor,
    consumer_factory: ConsumerFactory = ConsumerActor,
) -> ActorRef:
    """Spawn the scenario's actors on ``system``; return the queue's ref (path ``/queue``).

    ``queue_factory`` and ``consumer_factory`` let a test run a variant of the queue or of the
    clients' consumers (a planted bug) in the same workload.
    """
    return _spawn_broker_actors(system, scenario, queue_factory, consumer_factory)[0]


def _spawn_broker_actors(
    system: ActorSystemBase, scenario: BrokerScenario, queue_factory: QueueFactory,
    consumer_factory: ConsumerFactory = ConsumerActor,
) -> tuple[ActorRef, ActorRef]:
    """Spawn the scenario's actors; return the queue's and the dead-letter queue's refs."""
    target = None if scenario.durable else scenario.memory_target_bytes
    dead_letters = system.spawn(
        lambda: QueueActor(QueueConfig("dead-letters", durable=scenario.durable, memory_target_bytes=target)),
        name="dead-letters",
    )
    config = QueueConfig(
        "queue",
        ack_deadline_s=scenario.ack_deadline_s,
        max_deliveries=scenario.max_deliveries,
        retry=scenario.retry,
        dead_letter=dead_letters,
        durable=scenario.durable,
        max_length=scenario.max_length,
        overflow=scenario.overflow,
        memory_target_bytes=target,
    )
    queue = system.spawn(lambda: queue_factory(config), name="queue")
    priorities = scenario.consumer_priorities or (0,) * len(scenario.consumers)
    selectors = scenario.selectors or (None,) * len(scenario.consumers)

    def client(policy: ClientPolicy, settings: ConsumerSettings) -> Callable[[], ScenarioClient]:
        return lambda: ScenarioClient(queue, policy, settings, consumer_factory)

    for index, policy in enumerate(scenario.consumers):
        settings = ConsumerSettings(
            prefetch_messages=scenario.prefetch, priority=priorities[index], selector=selectors[index]
        )
        system.spawn(client(policy, settings), name=f"client-{index}")
    for index in range(scenario.browsers):
        settings = ConsumerSettings(prefetch_messages=scenario.prefetch, acquiring=False)
        system.spawn(client(ClientPolicy(), settings), name=f"browser-{index}")
    system.spawn(lambda: ScenarioPublisher(queue, scenario), name="publisher")
    return queue, dead_letters


def random_broker_scenario(seed: int, kind: str = "mixed") -> BrokerScenario:
    """A scenario drawn from ``seed`` (1-20 consumers, priorities, selectors, faults), by kind."""
    rng = seeded_random(f"scenario:{kind}:{seed}")
    count = rng.randint(1, 20)

    def policy() -> ClientPolicy:
        return ClientPolicy(
            nack=rng.choice((0.0, 0.1)),
            release=rng.choice((0.0, 0.05)),
            ignore=rng.choice((0.0, 0.0, 0.05)),
            late_ack=rng.choice((0.0, 0.1)),
            crash_after=rng.choice((0, 0, 0, rng.randint(1, 10))),
        )

    consumers = tuple(policy() for _ in range(count))
    if kind == "priorities":
        return BrokerScenario(
            messages=rng.randint(10, 60),
            consumers=consumers,
            consumer_priorities=tuple(rng.choice((0, 1, 2)) for _ in range(count)),
            selectors=tuple(rng.choice((None, None, {"eq": ["colour", "red"]})) for _ in range(count)),
            priorities=(0, 4, 9),
        )
    if kind == "groups":
        return BrokerScenario(
            messages=rng.randint(10, 60), consumers=consumers, groups=rng.randint(1, 4), browsers=rng.randint(1, 2)
        )
    return BrokerScenario(messages=rng.randint(10, 60), consumers=consumers, priorities=(0, 4, 9))


def run_broker_simulation(
    scenario: BrokerScenario,
    seed: int,
    strategy: Strategy | None = None,
    max_steps: int = 500_000,
    queue_factory: QueueFactory = QueueActor,
    faults: Sequence[Fault] = (),
    consumer_factory: ConsumerFactory = ConsumerActor,
    system: Callable[..., Simulation] = Simulation,
) -> tuple[Simulation, RunResult]:
    """Run ``scenario`` to quiet in a Simulation (with ``faults``), then shut it down (so queues record their end).

    ``system`` builds the Simulation (a planted kernel bug swaps it). If the run went quiet with a
    sent message that the clients' history does not show confirmed and acked, browsers then read
    what is left in the queue and its dead-letter queue and note it (``browse_what_is_left``), so
    ``total_queue`` can tell a message still queued from a lost one without asking the queue. A run
    its clients settled needs no browse and is unchanged by it.
    """
    sim = system(seed=seed, strategy=strategy, faults=faults)
    queue, dead_letters = _spawn_broker_actors(sim, scenario, queue_factory, consumer_factory)
    result = sim.run(max_steps=max_steps)
    if result.quiet and sim.tracer is not None and unsettled_by_clients(sim.trace):
        browse_what_is_left(sim, ((queue, False), (dead_letters, True)))
        more = sim.run(max_steps=max_steps - result.steps)
        result = RunResult(steps=result.steps + more.steps, time=more.time, quiet=more.quiet)
    sim.shutdown()
    return sim, result


def _total_queue(trace: Iterable[TraceEvent], queue_path: str) -> CheckResult:
    return total_queue(trace)


_CHECKERS: dict[str, Callable[[SharedTrace, str], CheckResult]] = {
    "total_queue": _total_queue,
    "accounting": accounting,
    "selector_match": selector_match,
    "drained": drained,
    "strict_order": strict_order,
    "priority_order": priority_order,
    "consumer_priority": consumer_priority,
    "group_exclusivity": group_exclusivity,
    "browser_completeness": browser_completeness,
}


BROWSERS = ("/browser-", "/final-browse-")
"""Path prefixes of the scenario's browsers (and of the final browse's): the per-message checkers
judge consumers by what the workload made them, not by what they declared."""


def _scenario_checker(name: str, scenario: BrokerScenario) -> Callable[[SharedTrace, str], CheckResult]:
    """The checker called ``name``, given what it needs of the scenario's settings."""
    if name == "expiry":
        return lambda trace, queue: expiry(trace, queue, BROWSERS)
    if name == "not_before":
        return lambda trace, queue: not_before(trace, queue, scenario.retry, BROWSERS)
    if name == "delivery_count":
        return lambda trace, queue: delivery_count(trace, queue, BROWSERS)
    if name == "exclusive_lease":
        return lambda trace, queue: exclusive_lease(trace, queue, BROWSERS)
    if name == "delivery_limit":
        return lambda trace, queue: delivery_limit(trace, queue, scenario.max_deliveries, BROWSERS)
    if name == "length_limit":
        return lambda trace, queue: length_limit(trace, queue, scenario.max_length, scenario.overflow, BROWSERS)
    return _CHECKERS[name]


def check_broker_run(trace: list[TraceEvent], scenario: BrokerScenario) -> list[CheckResult]:
    """Run every checker that applies to ``scenario`` over the main queue's story.

    A checker that raises fails the run with what it raised (``guarded``); the others still judge it.
    """
    shared = SharedTrace(trace)  # the queue's story is read once for all of them
    results: list[CheckResult] = []
    for name in scenario.checkers_that_apply():
        results += guarded(name, _scenario_checker(name, scenario), shared, QUEUE)
    return results
