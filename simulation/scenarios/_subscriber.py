"""Subscriber scenarios: a queue, a publisher in bursts, and a streaming subscription whose callbacks misbehave.

A scenario is data (``SubscriberScenario``). ``run_subscriber_simulation`` builds it in a
Simulation: the queue ``/queue`` (with a dead-letter queue), a publisher that publishes in
bursts, and ``subscribe(...)`` as ``/sub`` (``/sub-2`` after a crash). Callback behaviour is
data too: each callback draws from ``seeded_random(f"{seed}:{ack_id}:{attempt}")`` whether it
raises, nacks or acks, and the Simulation's ``job_duration`` draws how long it runs (slow
ones outlive the ack deadline). A paused process is a ``Pause("/sub", ...)`` fault: the whole
subscription (manager, leaser, dispatcher, workers, broker consumer...) freezes while the queue
and the clock go on, and its callbacks in flight freeze with it. A run is fixed by its seed;
``check_subscriber_run`` judges its trace with the subscriber checkers.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any, final

import attrs

from conveyor.actors.broker import EntrySettled, Message, PublishBatch, QueueActor, QueueConfig, RetryPolicy
from conveyor.actors.subscriber import (
    CALLBACKS_PER_JOB,
    Cancel,
    FlowControl,
    StreamingPullManager,
    SubscriberMessage,
    subscribe,
)
from conveyor.runtime import Actor, ActorRef, EventKind, TraceEvent
from conveyor.simulation import Fault, Pause, RunResult, Simulation, Strategy, seeded_random
from conveyor.simulation.checkers import (
    CheckResult,
    all_settled,
    flow_bound,
    lease_validity,
    no_loss,
    ordering_keys,
)

QUEUE = "/queue"
SUBSCRIPTION = "sub"
RESTARTED = "sub-2"
KINDS = ("slow", "burst", "ordered", "paused", "crash")
"""The kinds ``random_subscriber_scenario`` draws."""


class CallbackFailure(Exception):
    """What a scenario callback raises when its draw says so (the subscriber must nack it)."""


@final
@attrs.frozen
class SubscriberScenario:
    """A subscriber workload, all of it data.

    Attributes:
        messages: how many the publisher sends, in bursts of ``burst`` every ``burst_gap_s``.
        keys: ordering keys (the queue's ``group``): each message gets one of ``k0``..``k{keys-1}``
            or none, equally likely; 0: unordered.
        sizes: each message body is drawn between these sizes, in bytes.
        fail: probability that a callback raises (the subscriber nacks it).
        nack: probability that a callback nacks; the rest ack.
        fast_s: an ordinary callback runs up to this many seconds.
        slow: probability that a callback is slow...
        slow_factor: ...and runs this many ack deadlines (drawn between the two bounds).
        flow: the subscription's flow control (also the leaser's settings).
        workers: callbacks run at once.
        callbacks_per_job: most unordered callbacks one worker job runs in turn (``WorkerPool``);
            a job's virtual duration is one draw of ``job_duration`` however many it runs.
        ack_deadline_s: the queue's lease on each delivery, before any extension.
        max_deliveries: the queue dead-letters a message after this many; None never.
        retry: the queue's backoff after a nack.
        pause_at, pause_s: at ``pause_at`` the subscriber's process pauses for ``pause_s``: a
            ``Pause("/sub", pause_at, pause_s)`` fault freezes every actor of the subscription
            (its leases lapse at the queue meanwhile), and ``CallbackDurations`` freezes the
            callbacks in flight, as a paused process freezes its worker threads (None: no pause).
        crash_at: the subscription's manager stops at this time (a process crash) and a fresh
            subscription starts ``restart_after_s`` later (None: no crash).
        horizon_s: virtual time after which the run stops waiting for everything to settle.
        durable: the queues keep their state in their journals, so a crashed queue recovers it.
    """

    messages: int = 30
    keys: int = 0
    sizes: tuple[int, int] = (10, 100)
    fail: float = 0.0
    nack: float = 0.0
    fast_s: float = 0.05
    slow: float = 0.0
    slow_factor: tuple[float, float] = (1.5, 3.0)
    flow: FlowControl = attrs.field(factory=lambda: FlowControl(max_messages=10, min_duration_per_lease_extension_s=2))
    workers: int = 4
    callbacks_per_job: int = 1
    ack_deadline_s: float = 2.0
    max_deliveries: int | None = None
    retry: RetryPolicy | None = attrs.field(factory=lambda: RetryPolicy(0.05, 0.4))
    burst: int = 10
    burst_gap_s: float = 0.5
    pause_at: float | None = None
    pause_s: float = 0.0
    crash_at: float | None = None
    restart_after_s: float = 0.5
    horizon_s: float = 3600.0
    durable: bool = False

    def subscription_paths(self) -> tuple[str, ...]:
        """The managers' paths this scenario starts: ``/sub``, and ``/sub-2`` after a crash."""
        if self.crash_at is None:
            return (f"/{SUBSCRIPTION}",)
        return f"/{SUBSCRIPTION}", f"/{RESTARTED}"


def scenario_callback(seed: int, scenario: SubscriberScenario) -> Callable[[SubscriberMessage], None]:
    """The user callback of a run: raise, nack or ack, as drawn from ``(seed, ack id, attempt)``.

    The draw uses its own generator, so it depends on neither the schedule nor the worker
    thread, and a message's fate on one attempt is the same on every backend (inside a
    ``choice_stream`` block it is one choice of the run's stream, so it shrinks with the rest).
    """

    def callback(message: SubscriberMessage) -> None:
        draw = seeded_random(f"{seed}:{message.ack_id}:{message.delivery_attempt}").random()
        if draw < scenario.fail:
            raise CallbackFailure(f"scenario callback fails on {message.ack_id} attempt {message.delivery_attempt}")
        if draw < scenario.fail + scenario.nack:
            message.nack()
        else:
            message.ack()

    return callback


@final
class CallbackDurations:
    """The Simulation's ``job_duration``: ordinary or slow callbacks, frozen across a pause.

    Jobs are the subscriber's callbacks (nothing else in a scenario runs jobs). The ``Pause``
    fault freezes the subscription's actors, not a job already running (the simulator runs a job
    at its completion time); a paused process freezes its worker threads too, so a callback in
    flight during the pause is lengthened by the part of the pause it overlaps. ``now`` reads the
    simulation's clock; set it once the Simulation exists.
    """

    def __init__(self, scenario: SubscriberScenario) -> None:
        self.scenario = scenario
        self.now: Callable[[], float] = lambda: 0.0

    def __call__(self, rng: random.Random) -> float:
        """Draw one callback's duration from the simulation's seeded job generator."""
        scenario = self.scenario
        duration = rng.uniform(0.001, scenario.fast_s)
        if rng.random() < scenario.slow:
            duration = rng.uniform(*scenario.slow_factor) * scenario.ack_deadline_s
        if scenario.pause_at is None or scenario.pause_s <= 0:
            return duration
        start = self.now()
        pause_end = scenario.pause_at + scenario.pause_s
        if start < pause_end and start + duration > scenario.pause_at:
            duration += pause_end - max(start, scenario.pause_at)  # frozen while the process is
        return duration


@final
@attrs.frozen
class _Burst:
    first: int
    count: int


@final
class BurstPublisher(Actor):
    """Publishes the scenario's messages in bursts (one ``PublishBatch`` each), keys and sizes from ``ctx.random``."""

    def __init__(self, queue: ActorRef, scenario: SubscriberScenario) -> None:
        self.queue = queue
        self.scenario = scenario

    def on_start(self) -> None:
        """Plan every burst as a timer."""
        scenario = self.scenario
        for index, first in enumerate(range(0, scenario.messages, scenario.burst)):
            count = min(scenario.burst, scenario.messages - first)
            self.ctx.schedule(index * scenario.burst_gap_s, _Burst(first, count))

    def receive(self, message: Any) -> None:
        """Publish one burst (the queue's confirm is ignored)."""
        if not isinstance(message, _Burst):
            return
        scenario = self.scenario
        rng = self.ctx.random
        batch = []
        for index in range(message.first, message.first + message.count):
            name = f"m{index}".encode()
            size = max(len(name), rng.randint(*scenario.sizes))
            key = rng.randrange(scenario.keys + 1)  # ``keys`` ordering keys, or none
            group = f"k{key}" if key < scenario.keys else None
            batch.append(Message(name.ljust(size, b"."), group=group, message_id=f"m{index}"))
        self.ctx.send(self.queue, PublishBatch(tuple(batch)))


ManagerFactory = Callable[..., StreamingPullManager]
"""Builds a subscription's manager from ``subscribe``'s arguments; a test may pass a broken variant."""


def _subscribe(
    sim: Simulation, queue: ActorRef, scenario: SubscriberScenario, seed: int, name: str,
    manager: ManagerFactory | None,
) -> ActorRef:
    """Start the scenario's subscription as ``/name`` (through ``subscribe``, or a variant manager); its manager."""
    callback = scenario_callback(seed, scenario)
    if manager is None:
        return subscribe(sim, queue, callback, flow_control=scenario.flow, workers=scenario.workers, name=name).manager
    return sim.spawn(
        lambda: manager(queue, callback, scenario.flow, scenario.workers, callbacks_per_job=scenario.callbacks_per_job),
        name=name,
    )


def _collect_settled(trace: list[TraceEvent], start: int, tags: set[int]) -> int:
    """Add the tags the queue settled in ``trace[start:]`` to ``tags``; return where to look next."""
    for event in trace[start:]:
        if event.kind is EventKind.NOTE and event.sender == QUEUE and isinstance(event.message, EntrySettled):
            tags.add(event.message.tag)
    return len(trace)


def run_subscriber_simulation(
    scenario: SubscriberScenario,
    seed: int,
    strategy: Strategy | None = None,
    max_steps: int = 200_000,
    manager: ManagerFactory | None = None,
    chunk_s: float = 1.0,
    faults: Sequence[Fault] = (),
) -> tuple[Simulation, RunResult]:
    """Run ``scenario`` until every message is settled (or the horizon or ``max_steps``), then stop cleanly.

    The subscription's heartbeat keeps a timer armed forever, so the run goes in chunks of
    ``chunk_s`` virtual seconds until the queue has settled every message; then each live
    subscription is cancelled, the system runs to quiet and is shut down (so the queue
    notes ``QueueClosed``). A crash stops ``/sub`` at ``crash_at`` and subscribes ``/sub-2``
    ``restart_after_s`` later. A scenario with ``pause_at`` adds ``Pause("/sub", pause_at,
    pause_s)`` to ``faults``. ``manager`` swaps the subscription's manager for a variant.

    Returns:
        The Simulation (its ``trace`` is the evidence) and the whole run's step count, end
        time, and whether the final run to quiet got there.
    """
    durations = CallbackDurations(scenario)
    if scenario.pause_at is not None and scenario.pause_s > 0:
        faults = (*faults, Pause(f"/{SUBSCRIPTION}", scenario.pause_at, scenario.pause_s))
    sim = Simulation(seed=seed, strategy=strategy, job_duration=durations, faults=faults)
    durations.now = sim.now
    dead_letters = sim.spawn(
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
    queue = sim.spawn(lambda: QueueActor(config), name="queue")
    managers = [_subscribe(sim, queue, scenario, seed, SUBSCRIPTION, manager)]
    sim.spawn(lambda: BurstPublisher(queue, scenario), name="publisher")
    crash_at = scenario.crash_at
    restart_at = None if crash_at is None else crash_at + scenario.restart_after_s
    settled: set[int] = set()
    seen = steps = 0
    while steps < max_steps and sim.now() < scenario.horizon_s:
        until = sim.now() + chunk_s
        for event_at in (crash_at, restart_at):
            if event_at is not None and sim.now() < event_at < until:
                until = event_at
        result = sim.run(until=until, max_steps=max_steps - steps)
        steps += result.steps
        if crash_at is not None and sim.now() >= crash_at:
            crash_at = None
            sim.stop(managers[0])  # the process dies: its children with it, callbacks unfinished
        if crash_at is None and restart_at is not None and sim.now() >= restart_at:
            restart_at = None
            managers.append(_subscribe(sim, queue, scenario, seed, RESTARTED, manager))
        seen = _collect_settled(sim.trace, seen, settled)
        if len(settled) >= scenario.messages and crash_at is None and restart_at is None:
            break
    for ref in managers:
        if ref.is_alive:
            ref.tell(Cancel())
    final = sim.run(max_steps=max(0, max_steps - steps))
    sim.shutdown()
    return sim, RunResult(steps=steps + final.steps, time=sim.now(), quiet=final.quiet)


def check_subscriber_run(trace: list[TraceEvent], scenario: SubscriberScenario) -> list[CheckResult]:
    """Every subscriber checker over the run: per subscription, then for the queue as a whole."""
    results: list[CheckResult] = []
    for path in scenario.subscription_paths():
        results.append(flow_bound(trace, path, scenario.flow))
        results.append(ordering_keys(trace, path))
        results.append(lease_validity(trace, QUEUE, path, scenario.flow))
    results.append(no_loss(trace, QUEUE))
    results.append(all_settled(trace, QUEUE))
    return results


def random_subscriber_scenario(seed: int, kind: str) -> SubscriberScenario:
    """A scenario of ``kind`` (one of ``KINDS``) drawn from ``seed``.

    * ``slow``: some callbacks outlive the ack deadline several times; the leaser must extend.
    * ``burst``: bursts of many times ``max_bytes``, some single messages larger than it.
    * ``ordered``: ordering keys with raising and nacking callbacks, so keys are redelivered.
    * ``paused``: the whole subscriber pauses (``Pause("/sub", ...)``) for 2-6 ack deadlines
      early on, long enough for many leases to lapse at the queue; after it the subscriber
      must notice them, lose nothing and keep every key in order.
    * ``crash``: the subscriber crashes mid-run and a fresh one takes over.

    Raises:
        ValueError: an unknown kind.
    """
    rng = seeded_random(f"subscriber-scenario:{kind}:{seed}")
    deadline = rng.choice((1.0, 2.0, 5.0))
    keys = rng.choice((0, 0, 1, 3))
    workers = rng.randint(1, 6)
    if kind == "slow":
        # Leases are extended by [deadline, 2 x deadline]. A quarter of the runs cap a lease below
        # the slowest callbacks, which the leaser must then let lapse: the message is redelivered,
        # and with ordering keys its key's order must still hold.
        capped = rng.random() < 0.25
        flow = FlowControl(
            max_messages=rng.randint(2, 10),
            min_duration_per_lease_extension_s=max(2.0, deadline),
            max_duration_per_lease_extension_s=max(2.0, 2 * deadline),
            max_lease_duration_s=2.5 * deadline if capped else 3600.0,
        )
        return SubscriberScenario(
            messages=rng.randint(10, 25), keys=keys, slow=rng.choice((0.3, 0.6)), slow_factor=(1.2, 4.0),
            nack=rng.choice((0.0, 0.1)), flow=flow, workers=workers, ack_deadline_s=deadline,
            burst=rng.randint(3, 10), burst_gap_s=rng.uniform(0.1, 2.0),
        )
    if kind == "burst":
        max_bytes = rng.choice((500, 1000, 2000))
        flow = FlowControl(max_messages=1000, max_bytes=max_bytes, min_duration_per_lease_extension_s=2)
        return SubscriberScenario(
            messages=rng.randint(20, 40), keys=keys, sizes=(20, int(max_bytes * rng.choice((0.5, 1.5)))),
            fail=rng.choice((0.0, 0.1)), flow=flow, workers=workers, ack_deadline_s=deadline,
            burst=rng.randint(10, 40), burst_gap_s=rng.uniform(0.05, 0.5), fast_s=rng.choice((0.05, 0.5)),
            callbacks_per_job=rng.choice((1, CALLBACKS_PER_JOB)),  # drawn last: earlier draws stay as they were
        )
    if kind == "ordered":
        flow = FlowControl(max_messages=rng.randint(3, 20), min_duration_per_lease_extension_s=2)
        return SubscriberScenario(
            messages=rng.randint(15, 30), keys=rng.randint(1, 4), fail=rng.choice((0.1, 0.2)),
            nack=rng.choice((0.1, 0.2)), flow=flow, workers=workers, ack_deadline_s=deadline,
            max_deliveries=rng.choice((None, None, 8)), burst=rng.randint(5, 15), burst_gap_s=rng.uniform(0.1, 1.0),
            retry=rng.choice((RetryPolicy(0.05, 0.4), RetryPolicy(0.05, 4.0), None)),  # None: redeliver at once
        )
    if kind == "paused":
        flow = FlowControl(max_messages=rng.randint(3, 10), min_duration_per_lease_extension_s=max(2.0, deadline))
        return SubscriberScenario(
            messages=rng.randint(15, 30), keys=keys, fail=rng.choice((0.0, 0.1)), flow=flow, workers=workers,
            ack_deadline_s=deadline, fast_s=0.2, burst=rng.randint(5, 15), burst_gap_s=rng.uniform(0.1, 0.5),
            pause_at=rng.uniform(0.05, 1.0), pause_s=rng.uniform(2.0, 6.0) * deadline,
        )
    if kind == "crash":
        flow = FlowControl(max_messages=rng.randint(3, 10), min_duration_per_lease_extension_s=2)
        # Nacked messages often wait out a long retry backoff when the crash comes: the new
        # subscription must still see each key in order.
        return SubscriberScenario(
            messages=rng.randint(15, 30), keys=rng.choice((0, 1, 3)), fail=rng.choice((0.0, 0.1)),
            nack=rng.choice((0.1, 0.3)), flow=flow, workers=workers, ack_deadline_s=deadline,
            fast_s=rng.choice((0.05, 0.5)), slow=rng.choice((0.0, 0.2)), burst=rng.randint(5, 15),
            burst_gap_s=rng.uniform(0.1, 0.5), retry=RetryPolicy(rng.choice((0.05, 1.0)), 2.0),
            crash_at=rng.uniform(0.05, 1.5), restart_after_s=rng.choice((0.0, rng.uniform(0.0, 2.0 * deadline))),
        )
    msg = f"unknown subscriber scenario kind {kind!r}; choose one of {', '.join(KINDS)}"
    raise ValueError(msg)

