"""Pub/Sub front scenarios: the real registry, topic, subscriptions, bindings and queues, driven by clients.

A scenario is data (``PubSubScenario``): subscriptions of one topic (plain or exactly-once,
with or without ordering, filters, retry and dead-letter policies), publishers (some of whose
publishes carry a message the broker refuses), and subscriber clients whose behaviour is drawn
from the seed (``ClientPlan``), one of which may forge settlements on another subscription.
``run_pubsub_simulation`` builds it in a Simulation: the ``PubSubRegistry`` as ``/pubsub`` with
an ack-id key drawn from the seed, the topic and subscriptions created through it, and the
clients (``_pubsub_clients.py``) speaking the front's actor protocol directly, no gRPC. The run
goes until every publish was answered and every subscription's queue has settled everything it
took, then the clients stop and the system shuts down (so the queues note ``QueueClosed``).
``check_pubsub_run`` judges the trace from the clients' history and, per queue, with the
broker's checkers.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from typing import final

import attrs

from conveyor.actors.broker import EntryEnqueued, EntrySettled
from conveyor.actors.pubsub import (
    CreateSubscription,
    CreateTopic,
    DeadLetterSettings,
    Failed,
    PubSubRegistry,
    PullMessages,
    RetrySettings,
    SubscriptionActor,
    SubscriptionConfig,
    SubscriptionFactory,
    TopicActor,
    TopicConfig,
    TopicFactory,
    parse_filter,
)
from conveyor.runtime import ActorRef, ConveyorError, EventKind, TraceEvent
from conveyor.simulation import Fault, RunResult, Simulation, Strategy, seeded_random
from conveyor.simulation.checkers import (
    CheckResult,
    ProbesFinished,
    PublishDone,
    SharedTrace,
    SubscriptionTerms,
    accounting,
    acks_from_receivers,
    contained_failures,
    drained,
    exactly_once,
    filter_respected,
    group_exclusivity,
    guarded,
    idle_stream,
    key_order,
    no_confirmed_loss,
    pull_fill,
    queue_paths,
    request_limits,
    seek_effect,
    seek_replay,
    stream_flow,
    strict_order,
)

from ._pubsub_clients import ClientPlan, FrontPublisher, FrontSubscriber, PublisherPlan, StopClient
from ._pubsub_idle import IdleStreamer, StartIdle, draw_idle
from ._pubsub_limits import PUBLISH_KINDS, LimitProbe, LimitProber, draw_limit_probes

REGISTRY = "/pubsub"
"""The registry's path; every topic, subscription, binding and queue of the front is under it."""
PROJECT = "projects/sim"
TOPIC = f"{PROJECT}/topics/orders"
DEAD_LETTER_TOPIC = f"{PROJECT}/topics/dead-letters"
DEAD_LETTER_SUBSCRIPTION = f"{PROJECT}/subscriptions/dead-letters"
RETENTION_S = 3600.0
"""Every subscription keeps messages an hour (longer than any run), not Pub/Sub's default week: a queue arms
a timer for its messages' expiry, and a run ends once that fires."""
KEY_BYTES = 32
"""Bytes of the ack-id key the registry is given, drawn from the seed (``AckIdCodec`` takes 16 to 64)."""
KINDS = ("front", "exactly-once", "faults")
"""The kinds ``random_pubsub_scenario`` draws."""


@final
@attrs.frozen
class SubscriptionPlan:
    """One subscription of the scenario's topic.

    Attributes:
        exactly_once: Pub/Sub's exactly-once delivery (acks confirmed by the queue).
        ordering: ``enable_message_ordering`` (an ordering key becomes the broker's group).
        filter: Pub/Sub filter text; empty accepts every message.
        ack_deadline_s: the subscription's ack deadline (the simulator does not hold it to Pub/Sub's 10 s minimum,
            so that lapses fit in short runs).
        retry: a retry policy (0.1-1 s backoff) instead of redelivering a nacked message at once.
        dead_letter: a dead-letter policy to the scenario's dead-letter topic after ``max_deliveries``
            deliveries (drawn below Pub/Sub's minimum of 5 too, so that short runs dead-letter).
        retain_acked: ``retain_acked_messages`` (a Seek back replays acked messages too).
    """

    exactly_once: bool = False
    ordering: bool = False
    filter: str = ""
    ack_deadline_s: int = 5
    retry: bool = False
    dead_letter: bool = False
    max_deliveries: int = 5
    retain_acked: bool = False


def _check_scenario(scenario: PubSubScenario) -> None:
    count = len(scenario.subscriptions)
    if count < 1:
        msg = "PubSubScenario needs at least one subscription"
        raise ValueError(msg)
    for index, client in enumerate(scenario.clients):
        if not 0 <= client.subscription < count or (client.forge is not None and not (
            0 <= client.forge < count and client.forge != client.subscription
        )):
            msg = (f"PubSubScenario.clients[{index}] names subscription {client.subscription} (forging on "
                   f"{client.forge}); there are {count}, and a forger attacks another one than its own")
            raise ValueError(msg)
    served = {client.subscription for client in scenario.clients}
    if len(served) < count:
        missing = sorted(set(range(count)) - served)
        msg = f"PubSubScenario: subscriptions {missing} have no client, so their messages could never drain"
        raise ValueError(msg)


@final
@attrs.frozen
class PubSubScenario:
    """A Pub/Sub front workload, all of it data.

    Attributes:
        subscriptions: the topic's subscriptions (``projects/sim/subscriptions/s{i}``).
        publishers: one plan per publisher.
        clients: one plan per subscriber client; every subscription has at least one.
        colours: the ``colour`` attribute values drawn for messages (for filters).
        wait_s: how long a ``NextBatch`` or ``PullMessages`` waits for a first message.
        drain_at_s: from this virtual time on every client acks what it is given at once.
        horizon_s: virtual time after which the run stops waiting for the subscriptions to drain.
        probes: requests at or over the front's limits, sent by a prober client of subscription 0
            (``_pubsub_limits.py``).
        idle_s: once the other clients have stopped, a client opens a stream on subscription 0 and asks
            nothing for this long (``_pubsub_idle.py``); None: no such client.
        idle_asks_first: whether that client takes a batch before its silence.
    """

    subscriptions: tuple[SubscriptionPlan, ...] = (SubscriptionPlan(),)
    publishers: tuple[PublisherPlan, ...] = (PublisherPlan(),)
    clients: tuple[ClientPlan, ...] = (ClientPlan(),)
    colours: tuple[str, ...] = ("red", "blue")
    wait_s: float = 1.0
    drain_at_s: float = 8.0
    horizon_s: float = 600.0
    probes: tuple[LimitProbe, ...] = ()
    idle_s: float | None = None
    idle_asks_first: bool = True

    def __attrs_post_init__(self) -> None:
        _check_scenario(self)

    @property
    def messages(self) -> int:
        """The most messages the publishers may send (fault steps scale with it)."""
        return sum(plan.publishes * plan.max_batch for plan in self.publishers)

    @property
    def ack_deadline_s(self) -> float:
        """The longest ack deadline of its subscriptions (the liveness checks' unit)."""
        return float(max(plan.ack_deadline_s for plan in self.subscriptions))

    @property
    def dead_letters(self) -> bool:
        """Some subscription dead-letters: the dead-letter topic has a subscription and a client."""
        return any(plan.dead_letter for plan in self.subscriptions)

    def subscription_name(self, index: int) -> str:
        """The name of subscription ``index``."""
        return f"{PROJECT}/subscriptions/s{index}"

    def configs(self) -> tuple[SubscriptionConfig, ...]:
        """Every subscription's config, the dead-letter topic's own subscription last."""
        configs = []
        for index, plan in enumerate(self.subscriptions):
            configs.append(SubscriptionConfig(
                self.subscription_name(index), TOPIC, ack_deadline_s=plan.ack_deadline_s, retention_s=RETENTION_S,
                enable_message_ordering=plan.ordering, filter_text=plan.filter, filter=parse_filter(plan.filter),
                dead_letter=DeadLetterSettings(DEAD_LETTER_TOPIC, plan.max_deliveries) if plan.dead_letter else None,
                retry=RetrySettings(0.1, 1.0) if plan.retry else None, exactly_once=plan.exactly_once,
                retain_acked_messages=plan.retain_acked,
            ))
        if self.dead_letters:
            configs.append(SubscriptionConfig(DEAD_LETTER_SUBSCRIPTION, DEAD_LETTER_TOPIC, ack_deadline_s=5,
                                              retention_s=RETENTION_S))
        return tuple(configs)

    def terms(self) -> tuple[SubscriptionTerms, ...]:
        """What each subscription promised, for the checkers."""
        return tuple(
            SubscriptionTerms(config.name, config.topic, config.filter, config.exactly_once,
                              config.dead_letter.topic if config.dead_letter else None,
                              config.enable_message_ordering)
            for config in self.configs()
        )

    def stream_limits(self) -> dict[str, int]:
        """Each streaming client's path -> its flow control in messages (pulling clients have none)."""
        limits = {path: plan.max_messages for path, plan in zip(self.client_paths(), self.clients, strict=True)
                  if not plan.pull}
        if self.dead_letters:
            limits["/dead-letter-client"] = ClientPlan().max_messages
        return limits

    def pull_limits(self) -> dict[str, tuple[int, int]]:
        """Each pulling client's path -> (``max_messages``, ``max_bytes``) of its Pulls."""
        return {path: (plan.max_messages, plan.max_bytes or PullMessages("", 1, 0.0).max_bytes)
                for path, plan in zip(self.client_paths(), self.clients, strict=True) if plan.pull}

    def retaining(self) -> frozenset[str]:
        """The names of the subscriptions that retain acked messages."""
        return frozenset(self.subscription_name(index) for index, plan in enumerate(self.subscriptions)
                         if plan.retain_acked)

    def client_paths(self) -> tuple[str, ...]:
        """The subscriber clients' paths (the dead-letter subscription's own client not included)."""
        return tuple(f"/client-{index}" for index in range(len(self.clients)))


def random_pubsub_scenario(seed: int, kind: str = "front") -> PubSubScenario:
    """A scenario of ``kind`` (one of ``KINDS``) drawn from ``seed``.

    * ``front``: 1-3 subscriptions, a fifth of them exactly-once, some ordered or filtered;
      poison publishes; clients that nack, let leases lapse, ack late, extend, ack twice and
      settle stale ids; mostly a forger attacking one subscription from another.
    * ``exactly-once``: the same, every subscription exactly-once, and more acks sent late (after
      their lease may have lapsed).
    * ``faults``: the same mix as ``front``, with longer runs for crashes and pauses to land in.

    Raises:
        ValueError: an unknown kind.
    """
    if kind not in KINDS:
        msg = f"unknown pubsub scenario kind {kind!r}; choose one of {', '.join(KINDS)}"
        raise ValueError(msg)
    rng = seeded_random(f"pubsub-scenario:{kind}:{seed}")
    count = rng.choice((1, 2, 2, 3, 3))
    subscriptions = tuple(
        SubscriptionPlan(
            exactly_once=kind == "exactly-once" or rng.random() < 0.2,
            ordering=rng.random() < 0.3,
            filter=rng.choice(("", "", 'attributes.colour = "red"', 'NOT attributes.colour = "red"')) if index else "",
            ack_deadline_s=rng.choice((2, 3, 5)),
            retry=rng.random() < 0.5,
            dead_letter=rng.random() < 0.2,
            max_deliveries=rng.choice((2, 3, 5)),
        )
        for index in range(count)
    )
    publishers = tuple(
        PublisherPlan(
            publishes=rng.randint(2, 6), max_batch=rng.randint(1, 4), poison=rng.choice((0.0, 0.2, 0.3)),
            keys=rng.choice((0, 0, 2, 4)), gap_s=rng.uniform(0.1, 1.0),
        )
        for _ in range(rng.randint(1, 3))
    )

    lates = (0.1, 0.2) if kind == "exactly-once" else (0.0, 0.1)  # acks after a lapse: exactly-once's hard case

    def client(subscription: int, forge: int | None = None) -> ClientPlan:
        return ClientPlan(
            subscription=subscription, pull=rng.random() < 0.3, max_messages=rng.randint(1, 6),
            nack=rng.choice((0.0, 0.1, 0.2)), ignore=rng.choice((0.0, 0.0, 0.1)), late=rng.choice(lates),
            extend=rng.choice((0.0, 0.1)), duplicate=rng.choice((0.0, 0.1)), stale=rng.choice((0.0, 0.3)),
            forge=forge,
        )

    clients = [client(index) for index in range(count) for _ in range(rng.choice((1, 1, 2)))]
    if count > 1 and rng.random() < 0.9:
        victim = rng.randrange(count)
        clients.append(client(rng.choice([index for index in range(count) if index != victim]), forge=victim))
    rng.shuffle(clients)
    span = sum(plan.publishes for plan in publishers) * 0.5
    scenario = PubSubScenario(
        subscriptions=subscriptions, publishers=publishers, clients=tuple(clients),
        wait_s=rng.choice((0.5, 1.0, 2.0)),
        drain_at_s=rng.uniform(span, span + (20.0 if kind == "faults" else 8.0)),
    )
    if kind != "front":
        return scenario
    scenario = _promise_features(seed, scenario)
    scenario = attrs.evolve(scenario, probes=draw_limit_probes(seed, span))  # from a generator of their own
    return _delivery_features(seed, scenario, span)  # drawn last, from one of their own


def _delivery_features(seed: int, scenario: PubSubScenario, span: float) -> PubSubScenario:
    """``scenario`` with more Seeks (some on subscriptions retaining acked messages), Pulls that fit exactly,
    and an idle stream, drawn for ``seed`` from a generator of their own (issue 17, item 6).

    A Seek is added (in half the runs that had none) to a client not of an exactly-once
    subscription, 0.5-3 s back; a seeker's subscription retains acked messages in half the runs. In
    half the runs every publisher pads its messages to one size S and each pulling client (one stream
    client turned into one, if none pulls) pulls 2 or 3 times S bytes, so batches fill exactly.
    """
    rng = seeded_random(f"pubsub-scenario:front:{seed}:delivery")
    subscriptions, publishers, clients = list(scenario.subscriptions), scenario.publishers, list(scenario.clients)
    seekers = [index for index, plan in enumerate(clients) if not subscriptions[plan.subscription].exactly_once]
    if seekers and not any(plan.seek_at is not None for plan in clients) and rng.random() < 0.5:
        index = rng.choice(seekers)  # back far enough that some messages after the time are acked already
        clients[index] = attrs.evolve(clients[index], seek_at=round(rng.uniform(0.5, max(1.0, 0.8 * span)), 3),
                                      seek_back_s=round(rng.uniform(0.5, 3.0), 3))
    for plan in clients:
        if plan.seek_at is not None and rng.random() < 0.5:
            subscriptions[plan.subscription] = attrs.evolve(subscriptions[plan.subscription], retain_acked=True)
    if rng.random() < 0.5:
        size = rng.randint(90, 140)
        publishers = tuple(attrs.evolve(plan, size=size) for plan in publishers)
        if not any(plan.pull for plan in clients):
            index = rng.randrange(len(clients))
            clients[index] = attrs.evolve(clients[index], pull=True)
        for index, plan in enumerate(clients):
            if plan.pull:  # two or more messages: a batch of one fits whatever its size
                fits = rng.choice((2, 2, 3))
                clients[index] = attrs.evolve(plan, max_bytes=size * fits, max_messages=max(plan.max_messages, fits))
    idle = draw_idle(seed)
    return attrs.evolve(scenario, subscriptions=tuple(subscriptions), publishers=publishers, clients=tuple(clients),
                        idle_s=idle[0] if idle else None, idle_asks_first=idle[1] if idle else True)


def _promise_features(seed: int, scenario: PubSubScenario) -> PubSubScenario:
    """``scenario`` with an ordered subscription whose publishers use keys, and a Seek, drawn for ``seed``.

    Drawn from a generator of their own (issue 17, item 1), so the draws before them keep their
    values. A Seek goes to a subscription that is not exactly-once.
    """
    rng = seeded_random(f"pubsub-scenario:front:{seed}:promises")
    subscriptions, publishers, clients = list(scenario.subscriptions), scenario.publishers, list(scenario.clients)
    if rng.random() < 0.5:
        index = rng.randrange(len(subscriptions))
        subscriptions[index] = attrs.evolve(subscriptions[index], ordering=True)
        publishers = tuple(attrs.evolve(plan, keys=max(plan.keys, rng.choice((1, 2)))) for plan in publishers)
    seekers = [index for index, plan in enumerate(clients) if not subscriptions[plan.subscription].exactly_once]
    if seekers and rng.random() < 0.4:
        index = rng.choice(seekers)
        span = sum(plan.publishes for plan in publishers) * 0.5  # while publishes go on, so some are unacked
        clients[index] = attrs.evolve(clients[index], seek_at=round(rng.uniform(0.2, max(0.5, 0.8 * span)), 3),
                                      seek_back_s=round(rng.uniform(-1.0, 2.0), 3))  # < 0: a time ahead
    return attrs.evolve(scenario, subscriptions=tuple(subscriptions), publishers=publishers, clients=tuple(clients))


def _create(sim: Simulation, registry: ActorRef, request: CreateTopic | CreateSubscription) -> None:
    answer = sim.ask(registry, request)
    if type(answer) is Failed:
        msg = f"the front refused the scenario's {type(request).__name__}: {answer.code} {answer.message}"
        raise ConveyorError(msg)


@final
class _Progress:
    """What the runner reads back from the trace to know when the run has drained."""

    def __init__(self, publishes: int, probing: bool = False) -> None:
        self.publishes = publishes
        self.probing = probing  # the limit prober has probes left
        self.answered = 0
        self.open: dict[str, set[int]] = {}  # queue path -> tags enqueued and not yet settled
        self.seen = 0

    def read(self, trace: list[TraceEvent]) -> None:
        for event in trace[self.seen:]:
            if event.kind is EventKind.STOPPED and event.receiver in self.open:
                del self.open[event.receiver]  # a queue a Seek replaced: its successor holds what it had
                continue
            if event.kind is not EventKind.NOTE:
                continue
            note = event.message
            cls = type(note)
            if cls is EntryEnqueued:
                self.open.setdefault(event.sender or "?", set()).add(note.tag)
            elif cls is EntrySettled:
                self.open.setdefault(event.sender or "?", set()).discard(note.tag)
            elif cls is PublishDone:
                self.answered += 1
            elif cls is ProbesFinished:
                self.probing = False
        self.seen = len(trace)

    def drained(self) -> bool:
        return self.answered >= self.publishes and not self.probing and not any(self.open.values())


def run_pubsub_simulation(
    scenario: PubSubScenario,
    seed: int,
    strategy: Strategy | None = None,
    max_steps: int = 500_000,
    topic_factory: TopicFactory | None = None,
    subscription_factory: SubscriptionFactory | None = None,
    faults: Sequence[Fault] = (),
    chunk_s: float = 1.0,
    system: Callable[..., Simulation] = Simulation,
) -> tuple[Simulation, RunResult]:
    """Run ``scenario`` until it drains (or its horizon or ``max_steps``), then stop the clients and shut down.

    The clients poll for ever (a stream asks for its next batch as soon as it has one), so the
    run goes in chunks of ``chunk_s`` virtual seconds until every publish was answered, nothing
    is in flight and every queue under the registry has settled all it took; then each client
    ends its stream and stops, the system runs to quiet and is shut down.
    ``topic_factory`` / ``subscription_factory`` swap in variants of the front's actors.
    """
    sim = system(seed=seed, strategy=strategy, faults=faults)  # a planted kernel bug swaps ``system``
    key = random.Random(f"pubsub-ack-key:{seed}").randbytes(KEY_BYTES)
    topics, subscriptions = topic_factory or TopicActor, subscription_factory or SubscriptionActor
    registry = sim.spawn(
        lambda: PubSubRegistry(key, topic_factory=topics, subscription_factory=subscriptions), name=REGISTRY[1:]
    )
    _create(sim, registry, CreateTopic(TopicConfig(TOPIC)))
    if scenario.dead_letters:
        _create(sim, registry, CreateTopic(TopicConfig(DEAD_LETTER_TOPIC)))
    configs = scenario.configs()
    for config in configs:
        _create(sim, registry, CreateSubscription(config))
    deadlines = {config.name: config.ack_deadline_s for config in configs}
    clients: list[ActorRef] = []
    for index, plan in enumerate(scenario.clients):
        name = scenario.subscription_name(plan.subscription)
        victim = None if plan.forge is None else scenario.subscription_name(plan.forge)
        clients.append(sim.spawn(_subscriber(registry, name, plan, deadlines[name], scenario, seed, victim),
                                 name=f"client-{index}"))
    if scenario.dead_letters:
        clients.append(sim.spawn(
            _subscriber(registry, DEAD_LETTER_SUBSCRIPTION, ClientPlan(), 5, scenario, seed, None),
            name="dead-letter-client",
        ))
    for index, publisher in enumerate(scenario.publishers):
        sim.spawn(_publisher(registry, index, publisher, scenario.colours, seed), name=f"publisher-{index}")
    if scenario.probes:
        probes, prober_on = scenario.probes, scenario.subscription_name(0)
        patience_s = 5.0 * deadlines[prober_on] + 1.0
        clients.append(sim.spawn(lambda: LimitProber(registry, TOPIC, prober_on, probes, patience_s, seed),
                                 name="limit-prober"))
    probe_publishes = sum(1 for probe in scenario.probes if probe.kind in PUBLISH_KINDS)
    progress = _Progress(sum(plan.publishes for plan in scenario.publishers) + probe_publishes,
                         probing=bool(scenario.probes))
    steps = sim.steps
    while steps < max_steps and sim.now() < scenario.horizon_s:
        result = sim.run(until=sim.now() + chunk_s, max_steps=max_steps - steps)
        steps += result.steps
        progress.read(sim.trace)
        if sim.pending == 0 and progress.drained():
            break
    for ref in clients:
        if ref.is_alive:
            ref.tell(StopClient())
    if scenario.idle_s is not None:  # alone now: its hour of virtual time costs only its own timers
        idle_s, idle_on, first = scenario.idle_s, scenario.subscription_name(0), scenario.idle_asks_first
        sim.spawn(lambda: IdleStreamer(registry, idle_on, idle_s, scenario.wait_s, first),
                  name="idle-streamer").tell(StartIdle())
    final = sim.run(max_steps=max(0, max_steps - steps))
    sim.shutdown()
    return sim, RunResult(steps=sim.steps, time=sim.now(), quiet=final.quiet and steps < max_steps)


def _subscriber(
    registry: ActorRef, name: str, plan: ClientPlan, deadline_s: int, scenario: PubSubScenario, seed: int,
    victim: str | None,
) -> Callable[[], FrontSubscriber]:
    return lambda: FrontSubscriber(registry, name, plan, deadline_s, scenario.wait_s, scenario.drain_at_s, seed, victim)


def _publisher(
    registry: ActorRef, index: int, plan: PublisherPlan, colours: tuple[str, ...], seed: int
) -> Callable[[], FrontPublisher]:
    return lambda: FrontPublisher(registry, TOPIC, index, plan, colours, seed)


def check_pubsub_run(trace: list[TraceEvent], scenario: PubSubScenario) -> list[CheckResult]:
    """The clients' promises (acks from receivers, exactly-once, no confirmed loss), then the broker's per queue.

    A checker that raises fails the run with what it raised (``guarded``); the others still judge it.

    Every queue under the registry gets ``accounting``, ``drained`` and ``strict_order``, and
    ``group_exclusivity`` where some subscription orders; a queue's violations name its path.
    """
    terms = scenario.terms()
    # A wrong settlement is often what loses a message: the checkers naming a cause come first, and
    # the first that fails is the one a shrink keeps failing.
    results = guarded("contained_failures", contained_failures, trace)  # a raise inside the front explains the rest
    results += guarded("acks_from_receivers", acks_from_receivers, trace)
    results += guarded("exactly_once", exactly_once, trace, terms)
    results += guarded("filter_respected", filter_respected, trace, terms)
    if any(term.ordered for term in terms):
        results += guarded("key_order", key_order, trace, terms)
    results += guarded("stream_flow", stream_flow, trace, scenario.stream_limits())
    if any(plan.seek_at is not None for plan in scenario.clients):
        results += guarded("seek_effect", seek_effect, trace)
    if scenario.probes:
        results += guarded("request_limits", request_limits, trace)
    if any(plan.seek_at is not None for plan in scenario.clients):
        results += guarded("seek_replay", seek_replay, trace, scenario.retaining())
    if any(plan.pull for plan in scenario.clients):
        results += guarded("pull_fill", pull_fill, trace, scenario.pull_limits())
    if scenario.idle_s is not None:
        results += guarded("idle_stream", idle_stream, trace)
    results += guarded("no_confirmed_loss", no_confirmed_loss, trace, terms)
    shared = SharedTrace(trace)
    ordered = any(plan.ordering for plan in scenario.subscriptions)
    checkers: list[tuple[str, Callable[[SharedTrace, str], CheckResult]]] = [
        ("accounting", accounting), ("drained", drained), ("strict_order", strict_order)]
    if ordered:
        checkers.append(("group_exclusivity", group_exclusivity))
    paths = queue_paths(shared)
    replaced = replaced_queues(trace)
    for path in paths:
        for name, check in checkers:
            if name == "drained" and path in replaced:
                continue  # a Seek stopped it with what it held; its successor holds that now
            found = guarded(name, check, shared, path)
            results.extend(_at(path, result) for result in found)
    return results


def replaced_queues(trace: Iterable[TraceEvent]) -> set[str]:
    """The queues under the front that a later generation of their subscription replaced (a Seek's).

    ``.../queue-N`` is replaced once anything reaches ``.../queue-M`` with M > N. Such a queue is
    stopped with what it held, which its successor holds again, so the promises about a queue's end
    (nothing deliverable left, no stall before the close) are its successor's to keep. (A queue stopped
    with its subscription, which expires once idle for its ``ttl`` after the clients stopped, is not
    replaced: its end is judged.)
    """
    newest: dict[str, int] = {}
    seen: set[str] = set()
    for event in trace:
        path = event.receiver
        if path is None or path in seen or not path.startswith(REGISTRY):
            continue
        seen.add(path)
        parent, _, name = path.rpartition("/")
        number = name.removeprefix("queue-")
        if number != name and number.isdecimal():
            newest[parent] = max(newest.get(parent, 0), int(number))
    replaced = set()
    for path in seen:
        parent, _, name = path.rpartition("/")
        number = name.removeprefix("queue-")
        if number != name and number.isdecimal() and int(number) < newest[parent]:
            replaced.add(path)
    return replaced


def _at(path: str, result: CheckResult) -> CheckResult:
    """``result`` with each violation prefixed by the queue it is about."""
    if result.ok:
        return result
    return attrs.evolve(result, violations=tuple(f"{path}: {line}" for line in result.violations))
