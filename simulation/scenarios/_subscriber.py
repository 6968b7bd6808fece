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

from conveyor.actors.broker import (
    COMPACT_AFTER_EVENTS,
    BatchPublished,
    EntrySettled,
    Message,
    PublishBatch,
    Published,
    QueueActor,
    QueueConfig,
    RetryPolicy,
)
from conveyor.actors.subscriber import (
    CALLBACKS_PER_JOB,
    Cancel,
    FlowControl,
    Part,
    StreamingPullManager,
    SubscriberMessage,
    subscribe,
)
from conveyor.runtime import Actor, ActorRef, ActorSystemBase, EventKind, TraceEvent
from conveyor.simulation import Delay, Fault, Pause, RunResult, Simulation, Strategy, seeded_random
from conveyor.simulation.checkers import (
    CheckResult,
    ClientAnswer,
    DeliveryReceived,
    DeliverySettled,
    EnqueueAnswered,
    EnqueueSent,
    all_settled,
    exclusive_lease,
    flow_bound,
    flow_pause,
    guarded,
    lease_cap,
    lease_extension,
    lease_schedule,
    lease_validity,
    no_loss,
    ordering_keys,
    runs_once,
    total_queue,
    unsettled_by_clients,
)

from ._final_browse import browse_what_is_left

QUEUE = "/queue"
SUBSCRIPTION = "sub"
RESTARTED = "sub-2"
KINDS = ("slow", "burst", "ordered", "paused", "crash")
SHUTDOWNS = ("crash", "cancel", "cancel-await")
"""How a ``crash`` scenario's first subscription ends mid-run (``SubscriberScenario.shutdown``)."""
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
        shutdown: how the first subscription ends at ``crash_at``: ``crash`` (the process dies: its
            manager is stopped), ``cancel`` (``Subscription.cancel()``: drain what is batched, then
            stop) or ``cancel-await`` (subscribed with ``await_callbacks_on_shutdown``, then
            cancelled: what never started is nacked, the running callbacks end first). Either way
            the queue must take back every message not acked.
        horizon_s: virtual time after which the run stops waiting for everything to settle.
        durable: the queues keep their state in their journals, so a crashed queue recovers it.
        draws: what a swarm scenario drew for this run, in words (noted in the trace; empty otherwise).
        compact_after_events: the durable queues' ``QueueConfig.compact_after_events`` (the fault plans
            that make them durable draw a small one, so runs compact and recover from snapshots).
        drop: probability that a callback that would ack drops its message instead (``drop()``: nothing
            goes to the queue, the lease lapses and the message comes back); half of those first nack
            it by a zero deadline (``modify_ack_deadline(0)``), so the drop after it must change
            nothing: the first decision stands. Drawn from a generator of its own, so 0 keeps every
            other callback's answer.
        late_ends: ``(at_step, duration_s)`` stalls of the worker pool's channel to ``/sub``
            (``Delay`` faults): a callback's end (``CallbackEnded``) arrives late while its settlement,
            sent from the callback's thread, does not, so a nacked keyed message may come back to
            the key handler before its old copy's end (``Admission.EARLY``).
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
    shutdown: str = attrs.field(default="crash", validator=attrs.validators.in_(SHUTDOWNS))
    horizon_s: float = 3600.0
    durable: bool = False
    draws: str = ""
    compact_after_events: int = COMPACT_AFTER_EVENTS
    drop: float = 0.0
    late_ends: tuple[tuple[int, float], ...] = ()

    def subscription_paths(self) -> tuple[str, ...]:
        """The managers' paths this scenario starts: ``/sub``, and ``/sub-2`` after a crash."""
        if self.crash_at is None:
            return (f"/{SUBSCRIPTION}",)
        return f"/{SUBSCRIPTION}", f"/{RESTARTED}"


def scenario_callback(
    seed: int, scenario: SubscriberScenario, history: Callable[[object], None] | None = None
) -> Callable[[SubscriberMessage], None]:
    """The user callback of a run: raise, nack or ack, as drawn from ``(seed, ack id, attempt)``.

    The draw uses its own generator, so it depends on neither the schedule nor the worker
    thread, and a message's fate on one attempt is the same on every backend (inside a
    ``choice_stream`` block it is one choice of the run's stream, so it shrinks with the rest). With
    ``history`` (``CallbackHistory.record``) the callback writes what it was given and what it
    answered (``DeliveryReceived``, ``DeliverySettled``), the user's side of the run that
    ``total_queue`` judges; it knows its message by the data, which begins with the message id.
    """

    def callback(message: SubscriberMessage) -> None:
        draw = seeded_random(f"{seed}:{message.ack_id}:{message.delivery_attempt}").random()
        answer: ClientAnswer = "raised" if draw < scenario.fail else "nack" if draw < scenario.fail + scenario.nack \
            else "ack"
        dropping = _drops(seed, scenario, message) if answer == "ack" else None
        if dropping is not None:
            answer = "nack"  # recorded only for a zero-deadline nack; a plain drop answers nothing
        if history is not None:
            consumer_id = int(message.ack_id.partition(":")[0])
            message_id = message.data.partition(b".")[0].decode()
            attempt = message.delivery_attempt
            history(DeliveryReceived(QUEUE, consumer_id, message.tag, message_id, attempt))
            if dropping != "drop":
                history(DeliverySettled(QUEUE, consumer_id, message.tag, message_id, attempt, answer))
        if dropping is not None:
            if dropping == "nack-then-drop":
                message.modify_ack_deadline(0)  # Pub/Sub's nack: the drop after it must not undo it
            message.drop()
            return
        if answer == "raised":
            raise CallbackFailure(f"scenario callback fails on {message.ack_id} attempt {message.delivery_attempt}")
        if answer == "nack":
            message.nack()
        else:
            message.ack()

    return callback


def _drops(seed: int, scenario: SubscriberScenario, message: SubscriberMessage) -> str | None:
    """Whether a callback that would ack drops instead: ``drop``, ``nack-then-drop``, or None (it acks)."""
    if not scenario.drop:
        return None
    draw = seeded_random(f"{seed}:{message.ack_id}:{message.delivery_attempt}:drop").random()
    if draw >= scenario.drop:
        return None
    return "nack-then-drop"


HISTORY = "/callbacks"
"""The path a run's user callbacks write their history under (no actor lives there)."""


@final
class CallbackHistory:
    """Where a run's user callbacks write their history: notes in the system's trace, under ``HISTORY``.

    A callback runs on a worker, outside every actor, and it is a client like any publisher or
    consumer client: what it was given and what it answered belong in the clients' history. It
    cannot use a context, so ``record`` appends the note to the trace itself (a list append, which
    a real system's worker threads may share), stamped with the system's clock. No actor is
    spawned for it, so a run's deliveries and schedule are those it had without the history.
    """

    def __init__(self, system: ActorSystemBase) -> None:
        self.system = system

    def record(self, note: object) -> None:
        """Add ``note`` to the trace, as a note of ``HISTORY``, if the system traces."""
        system = self.system
        if system.tracer is not None:
            system.trace.append(TraceEvent(EventKind.NOTE, system.now(), HISTORY, None, note))


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
    """Publishes the scenario's messages in bursts (one ``PublishBatch`` each), keys and sizes from ``ctx.random``.

    When the system traces, it writes its history (``EnqueueSent``, ``EnqueueAnswered``).
    """

    def __init__(self, queue: ActorRef, scenario: SubscriberScenario) -> None:
        self.queue = queue
        self.scenario = scenario
        self.queue_path = str(queue.path)

    def on_start(self) -> None:
        """Plan every burst as a timer; note a swarm's draws first."""
        scenario = self.scenario
        if scenario.draws:
            self.ctx.note(scenario.draws)
        for index, first in enumerate(range(0, scenario.messages, scenario.burst)):
            count = min(scenario.burst, scenario.messages - first)
            self.ctx.schedule(index * scenario.burst_gap_s, _Burst(first, count))

    def receive(self, message: Any) -> None:
        """Publish one burst, or note the queue's answer to one."""
        if type(message) is BatchPublished:
            if self.ctx.tracing:
                confirmed = tuple(o.message_id for o in message.outcomes if type(o) is Published)
                refused = tuple(o.message_id for o in message.outcomes if type(o) is not Published)
                self.ctx.note(EnqueueAnswered(self.queue_path, confirmed, refused))
            return
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
        if self.ctx.tracing:
            self.ctx.note(EnqueueSent(self.queue_path, tuple(m.message_id for m in batch), tuple(batch)))
        self.ctx.send(self.queue, PublishBatch(tuple(batch)))


ManagerFactory = Callable[..., StreamingPullManager]
"""Builds a subscription's manager from ``subscribe``'s arguments; a test may pass a broken variant."""


def _subscribe(
    sim: Simulation, queue: ActorRef, scenario: SubscriberScenario, seed: int, name: str,
    manager: ManagerFactory | None, history: CallbackHistory,
) -> ActorRef:
    """Start the scenario's subscription as ``/name`` (through ``subscribe``, or a variant manager); its manager."""
    callback = scenario_callback(seed, scenario, history.record)
    wait = scenario.shutdown == "cancel-await" and name == SUBSCRIPTION
    if manager is None:
        return subscribe(sim, queue, callback, flow_control=scenario.flow, workers=scenario.workers, name=name,
                         await_callbacks_on_shutdown=wait).manager
    return sim.spawn(
        lambda: manager(queue, callback, scenario.flow, scenario.workers, await_callbacks_on_shutdown=wait,
                        callbacks_per_job=scenario.callbacks_per_job),
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
    system: Callable[..., Simulation] = Simulation,
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
    pool = f"/{SUBSCRIPTION}/{Part.WORKERS}"
    late = (Delay(pool, f"/{SUBSCRIPTION}", at_step, duration) for at_step, duration in scenario.late_ends)
    faults = (*faults, *late)
    sim = system(seed=seed, strategy=strategy, job_duration=durations, faults=faults)  # planted kernel bugs swap it
    durations.now = sim.now
    dead_letters = sim.spawn(
        lambda: QueueActor(QueueConfig("dead-letters", durable=scenario.durable,
                                       compact_after_events=scenario.compact_after_events)), name="dead-letters"
    )
    config = QueueConfig(
        "queue",
        ack_deadline_s=scenario.ack_deadline_s,
        max_deliveries=scenario.max_deliveries,
        retry=scenario.retry,
        dead_letter=dead_letters,
        durable=scenario.durable,
        compact_after_events=scenario.compact_after_events,
    )
    queue = sim.spawn(lambda: QueueActor(config), name="queue")
    history = CallbackHistory(sim)
    managers = [_subscribe(sim, queue, scenario, seed, SUBSCRIPTION, manager, history)]
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
            if scenario.shutdown == "crash":
                sim.stop(managers[0])  # the process dies: its children with it, callbacks unfinished
            else:
                managers[0].tell(Cancel())  # shutting down mid-run: the queue takes back what is not acked
        if crash_at is None and restart_at is not None and sim.now() >= restart_at:
            restart_at = None
            managers.append(_subscribe(sim, queue, scenario, seed, RESTARTED, manager, history))
        seen = _collect_settled(sim.trace, seen, settled)
        if len(settled) >= scenario.messages and crash_at is None and restart_at is None:
            break
    for ref in managers:
        if ref.is_alive:
            ref.tell(Cancel())
    final = sim.run(max_steps=max(0, max_steps - steps))
    steps += final.steps
    if final.quiet and unsettled_by_clients(sim.trace):  # the clients left something open: read what is left
        sim.end_faults()
        browse_what_is_left(sim, ((queue, False), (dead_letters, True)))
        final = sim.run(max_steps=max(0, max_steps - steps))
        steps += final.steps
    sim.shutdown()
    return sim, RunResult(steps=steps, time=sim.now(), quiet=final.quiet)


def check_subscriber_run(trace: list[TraceEvent], scenario: SubscriberScenario) -> list[CheckResult]:
    """Every subscriber checker over the run: the clients' total queue, per subscription, then the queue as a whole.

    A checker that raises fails the run with what it raised (``guarded``); the others still judge it.
    """
    results: list[CheckResult] = []
    for path in scenario.subscription_paths():
        results += guarded("flow_bound", flow_bound, trace, path, scenario.flow)
        results += guarded("flow_pause", flow_pause, trace, path, scenario.flow)
        results += guarded("lease_extension", lease_extension, trace, path, scenario.flow)
        results += guarded("ordering_keys", ordering_keys, trace, path)
        results += guarded("lease_validity", lease_validity, trace, QUEUE, path, scenario.flow)
        results += guarded("runs_once", runs_once, trace, path, QUEUE)
        results += guarded("lease_cap", lease_cap, trace, path, scenario.flow)
        results += guarded("lease_schedule", lease_schedule, trace, path, scenario.flow)
    results += guarded("no_loss", no_loss, trace, QUEUE)
    results += guarded("exclusive_lease", exclusive_lease, trace, QUEUE)
    results += guarded("all_settled", all_settled, trace, QUEUE)
    results += guarded("total_queue", total_queue, trace)  # last: the others name a cause
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
            shutdown=rng.choice(SHUTDOWNS),
        )
    msg = f"unknown subscriber scenario kind {kind!r}; choose one of {', '.join(KINDS)}"
    raise ValueError(msg)

