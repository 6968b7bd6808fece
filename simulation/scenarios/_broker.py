"""Broker scenarios: a publisher, a queue (and its dead-letter queue), clients with policies.

A scenario is data (``BrokerScenario``); ``spawn_broker_scenario`` builds its actors on
any system, so the same workload runs in the simulator, on trio and on threads, and
the same checkers judge every trace. Clients draw their choices from ``ctx.random``,
so a simulated run is fixed by its seed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, final

import attrs

from conveyor.actors.broker import (
    Ack,
    ConsumerActor,
    ConsumerSettings,
    Delivery,
    Message,
    Nack,
    Publish,
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
    SharedTrace,
    accounting,
    browser_completeness,
    consumer_priority,
    drained,
    group_exclusivity,
    priority_order,
    strict_order,
)

QUEUE = "/queue"


@final
@attrs.frozen
class ClientPolicy:
    """What a client does with each delivery, by probability (the rest is acked at once).

    Attributes:
        nack: nack it (redelivered after the queue's backoff).
        release: release it (redelivered at once).
        ignore: never answer (the lease lapses and it is redelivered).
        late_ack: ack after up to ``late_ack_s`` (sometimes after the lease lapsed).
        crash_after: stop the client (and its consumer) after this many deliveries; 0 never.
    """

    nack: float = 0.0
    release: float = 0.0
    ignore: float = 0.0
    late_ack: float = 0.0
    late_ack_s: float = 2.0
    crash_after: int = 0


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

    def checkers_that_apply(self) -> tuple[str, ...]:
        """Names of the checkers whose preconditions this scenario meets."""
        names = ["accounting", "drained", "priority_order", "consumer_priority"]
        if len(set(self.consumer_priorities or (0,))) == 1:
            names.append("strict_order")
        if self.groups:
            names.append("group_exclusivity")
        if self.browsers:
            names.append("browser_completeness")
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
    """Publishes the scenario's messages at random instants, with confirms."""

    def __init__(self, queue: ActorRef, scenario: BrokerScenario) -> None:
        self.queue = queue
        self.scenario = scenario
        self.confirmed = 0

    def on_start(self) -> None:
        """Plan every publish as a timer, from ``ctx.random``."""
        scenario = self.scenario
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
            self.ctx.send(
                self.queue,
                Publish(
                    Message(
                        name.encode(),
                        headers=(("colour", rng.choice(scenario.colours)), ("index", index)),
                        priority=rng.choice(scenario.priorities),
                        group=group,
                        message_id=name,
                    )
                ),
            )
        else:
            self.confirmed += 1


@final
@attrs.frozen
class _LateAck:
    delivery: Delivery


@final
class ScenarioClient(Actor):
    """A client that owns its ConsumerActor (as a child) and answers deliveries by its policy."""

    def __init__(self, queue: ActorRef, policy: ClientPolicy, settings: ConsumerSettings) -> None:
        self.queue = queue
        self.policy = policy
        self.settings = settings
        self.deliveries = 0
        self.consumer: ActorRef | None = None
        # The policy's cumulative thresholds, summed once in the order ``receive`` compares them.
        self.below_nack = policy.nack
        self.below_release = policy.nack + policy.release
        self.below_ignore = policy.nack + policy.release + policy.ignore
        self.below_late_ack = policy.nack + policy.release + policy.ignore + policy.late_ack

    def on_start(self) -> None:
        """Spawn the consumer, supervised by this client."""
        self.consumer = self.ctx.spawn(
            lambda: ConsumerActor(self.queue, self.ctx.self_ref, self.settings), name="consumer"
        )

    def receive(self, message: Any) -> None:
        """Answer one delivery."""
        cls = type(message)
        if cls is _LateAck:
            delivery = message.delivery
            assert self.consumer is not None
            self.ctx.send(self.consumer, Ack(delivery.consumer_id, (delivery.tag,)))
            return
        if cls is not Delivery:
            return
        self.deliveries += 1
        policy = self.policy
        if not self.settings.acquiring:
            return
        draw = self.ctx.random.random()
        if draw < self.below_nack:
            self.ctx.reply(Nack(message.consumer_id, (message.tag,)))
        elif draw < self.below_release:
            self.ctx.reply(Release(message.consumer_id, (message.tag,)))
        elif draw < self.below_ignore:
            pass
        elif draw < self.below_late_ack:
            self.ctx.schedule(self.ctx.random.uniform(0, policy.late_ack_s), _LateAck(message))
        else:
            self.ctx.reply(Ack(message.consumer_id, (message.tag,)))
        if policy.crash_after and self.deliveries >= policy.crash_after:
            self.ctx.stop()  # the consumer child stops with us; the queue takes everything back


QueueFactory = Callable[[QueueConfig], QueueActor]


def spawn_broker_scenario(
    system: ActorSystemBase, scenario: BrokerScenario, queue_factory: QueueFactory = QueueActor
) -> ActorRef:
    """Spawn the scenario's actors on ``system``; return the queue's ref (path ``/queue``).

    ``queue_factory`` lets a test run a variant of the queue (a planted bug) in the same workload.
    """
    dead_letters = system.spawn(
        lambda: QueueActor(QueueConfig("dead-letters", durable=scenario.durable)), name="dead-letters"
    )
    config = QueueConfig(
        "queue",
        ack_deadline_s=scenario.ack_deadline_s,
        max_deliveries=scenario.max_deliveries,
        retry=scenario.retry,
        dead_letter=dead_letters,
        durable=scenario.durable,
    )
    queue = system.spawn(lambda: queue_factory(config), name="queue")
    priorities = scenario.consumer_priorities or (0,) * len(scenario.consumers)
    selectors = scenario.selectors or (None,) * len(scenario.consumers)

    def client(policy: ClientPolicy, settings: ConsumerSettings) -> Callable[[], ScenarioClient]:
        return lambda: ScenarioClient(queue, policy, settings)

    for index, policy in enumerate(scenario.consumers):
        settings = ConsumerSettings(
            prefetch_messages=scenario.prefetch, priority=priorities[index], selector=selectors[index]
        )
        system.spawn(client(policy, settings), name=f"client-{index}")
    for index in range(scenario.browsers):
        settings = ConsumerSettings(prefetch_messages=scenario.prefetch, acquiring=False)
        system.spawn(client(ClientPolicy(), settings), name=f"browser-{index}")
    system.spawn(lambda: ScenarioPublisher(queue, scenario), name="publisher")
    return queue


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
) -> tuple[Simulation, RunResult]:
    """Run ``scenario`` to quiet in a Simulation (with ``faults``), then shut it down (so queues record their end)."""
    sim = Simulation(seed=seed, strategy=strategy, faults=faults)
    spawn_broker_scenario(sim, scenario, queue_factory)
    result = sim.run(max_steps=max_steps)
    sim.shutdown()
    return sim, result


_CHECKERS = {
    "accounting": accounting,
    "drained": drained,
    "strict_order": strict_order,
    "priority_order": priority_order,
    "consumer_priority": consumer_priority,
    "group_exclusivity": group_exclusivity,
    "browser_completeness": browser_completeness,
}


def check_broker_run(trace: list[TraceEvent], scenario: BrokerScenario) -> list[CheckResult]:
    """Run every checker that applies to ``scenario`` over the main queue's story."""
    shared = SharedTrace(trace)  # the queue's story is read once for all of them
    return [_CHECKERS[name](shared, QUEUE) for name in scenario.checkers_that_apply()]
