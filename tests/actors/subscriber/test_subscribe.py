"""The subscriber's actors end to end on trio, threads and the simulator."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from conveyor.actors.broker import GetStats, Message, Publish, QueueActor, QueueConfig, QueueStats
from conveyor.actors.subscriber import Cancel, FlowControl, FlowNote, StreamingPullManager, SubscriberMessage
from conveyor.runtime import ActorRef, ConveyorError, EventKind
from conveyor.simulation import Simulation, uniform_job_duration
from tests.conftest import Harness


class Log:
    """Thread-safe record of what callbacks saw (callbacks run in worker threads)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entries: list[tuple[str, str, int, int]] = []

    def add(self, event: str, message: SubscriberMessage) -> None:
        with self.lock:
            self.entries.append((event, message.ordering_key, int(message.data), message.delivery_attempt))

    def snapshot(self) -> list[tuple[str, str, int, int]]:
        with self.lock:
            return list(self.entries)


async def _until_acked(backend: Harness, queue: ActorRef, count: int, timeout: float = 30.0) -> QueueStats:
    waited = 0.0
    while True:
        await backend.quiet()
        stats: QueueStats = await backend.ask(queue, GetStats())
        if stats.acked >= count or waited >= timeout:
            return stats
        await backend.elapse(0.05)
        waited += 0.05


def _setup(
    backend: Harness, callback: Callable[[SubscriberMessage], object], flow: FlowControl | None = None, workers: int = 3
) -> tuple[ActorRef, ActorRef]:
    queue = backend.spawn(lambda: QueueActor(QueueConfig("q", ack_deadline_s=30)), name="q")
    sub = backend.spawn(lambda: StreamingPullManager(queue, callback, flow, workers=workers), name="sub")
    return queue, sub


async def test_every_message_reaches_the_callback_and_is_acked(backend: Harness) -> None:
    log = Log()

    def callback(message: SubscriberMessage) -> None:
        log.add("run", message)
        message.ack()

    queue, _ = _setup(backend, callback)
    await backend.quiet()
    for n in range(30):
        queue.tell(Publish(Message(str(n).encode())))
    stats = await _until_acked(backend, queue, 30)
    assert (stats.acked, stats.depth, stats.in_flight) == (30, 0, 0)
    assert sorted(n for _, _, n, _ in log.snapshot()) == list(range(30))


async def test_a_raising_callback_nacks_and_the_message_comes_again(backend: Harness) -> None:
    log = Log()

    def callback(message: SubscriberMessage) -> None:
        log.add("run", message)
        if message.delivery_attempt == 1:
            raise ValueError("first time fails")
        message.ack()

    queue, _ = _setup(backend, callback)
    await backend.quiet()
    queue.tell(Publish(Message(b"7")))
    stats = await _until_acked(backend, queue, 1)
    assert (stats.acked, stats.redelivered) == (1, 1)
    assert [(n, attempt) for _, _, n, attempt in log.snapshot()] == [(7, 1), (7, 2)]


async def test_one_message_per_ordering_key_at_a_time_in_publish_order(backend: Harness) -> None:
    log = Log()

    def callback(message: SubscriberMessage) -> None:
        log.add("start", message)
        log.add("end", message)
        message.ack()

    queue, _ = _setup(backend, callback, workers=4)
    await backend.quiet()
    for n in range(40):
        queue.tell(Publish(Message(str(n).encode(), group=f"key-{n % 3}")))
    await _until_acked(backend, queue, 40)
    by_key: dict[str, list[tuple[str, int]]] = {}
    for event, key, n, _ in log.snapshot():
        by_key.setdefault(key, []).append((event, n))
    for key, events in by_key.items():
        numbers = [n for event, n in events if event == "start"]
        assert numbers == sorted(numbers), key
        # one at a time: each start is followed by its own end before the next start
        assert events == [pair for n in numbers for pair in (("start", n), ("end", n))], key


async def test_flow_control_bounds_unfinished_messages(backend: Harness) -> None:
    release = threading.Event()

    def callback(message: SubscriberMessage) -> None:
        if backend.name != "simulation":
            release.wait(5)
        message.ack()

    queue, _ = _setup(backend, callback, FlowControl(max_messages=3), workers=8)
    await backend.quiet()
    for n in range(20):
        queue.tell(Publish(Message(str(n).encode())))
    await backend.elapse(0.2)
    release.set()
    stats = await _until_acked(backend, queue, 20)
    assert stats.acked == 20
    counts = [event.message.count for event in backend.trace if isinstance(event.message, FlowNote)]
    assert counts and max(counts) <= 3


def test_the_leaser_keeps_a_slow_callback_from_being_redelivered() -> None:
    sim = Simulation(seed=4, job_duration=uniform_job_duration(25.0, 25.0))  # callbacks take 25 virtual s
    queue = sim.spawn(lambda: QueueActor(QueueConfig("q", ack_deadline_s=10)), name="q")
    flow = FlowControl(min_duration_per_lease_extension_s=10, max_duration_per_lease_extension_s=10)
    sim.spawn(lambda: StreamingPullManager(queue, SubscriberMessage.ack, flow), name="sub")
    sim.run(until=1)
    queue.tell(Publish(Message(b"slow")))
    sim.run(until=100)
    stats = sim.ask(queue, GetStats())
    assert (stats.acked, stats.redelivered) == (1, 0)
    extensions = [
        e for e in sim.trace if e.kind is EventKind.DELIVERED and type(e.message).__name__ == "ModifyAckDeadline"
    ]
    assert len(extensions) >= 3  # the first on receipt, then before each 10 s lease lapsed


def test_a_message_on_hold_behind_its_key_is_not_given_up_while_it_waits() -> None:
    """The max-lease clock starts when the callback is scheduled, not at receipt (issue 15, item 7).

    One key, three 20-second callbacks, a 30-second max lease: the third message waits 40 seconds
    on hold behind the first two. It used to be given up at 30 s, redelivered while its callback
    ran and dead-lettered; each callback here holds its lease 20 s, well under the limit.
    """
    sim = Simulation(seed=4, job_duration=uniform_job_duration(20.0, 20.0))  # 20 virtual s each
    dead = sim.spawn(lambda: QueueActor(QueueConfig("dead")), name="dead")
    queue = sim.spawn(
        lambda: QueueActor(QueueConfig("q", ack_deadline_s=10, max_deliveries=2, dead_letter=dead)), name="q"
    )
    calls: list[tuple[int, int]] = []

    def callback(message: SubscriberMessage) -> None:
        calls.append((int(message.data), message.delivery_attempt))
        message.ack()

    flow = FlowControl(max_lease_duration_s=30)
    sim.spawn(lambda: StreamingPullManager(queue, callback, flow), name="sub")
    sim.run(until=1)
    for n in range(3):
        queue.tell(Publish(Message(str(n).encode(), group="k")))
    sim.run(until=300)
    stats = sim.ask(queue, GetStats())
    assert calls == [(0, 1), (1, 1), (2, 1)]
    assert (stats.acked, stats.redelivered, stats.dead_lettered, stats.depth, stats.in_flight) == (3, 0, 0, 0, 0)
    assert sim.ask(dead, GetStats()).published == 0


async def test_cancel_returns_what_was_not_acked(backend: Harness) -> None:
    def callback(message: SubscriberMessage) -> None:
        pass  # never settles

    queue, sub = _setup(backend, callback, FlowControl(max_messages=5))
    await backend.quiet()
    for n in range(8):
        queue.tell(Publish(Message(str(n).encode())))
    await backend.elapse(0.2)
    sub.tell(Cancel())
    await backend.elapse(0.2)
    stats: QueueStats = await backend.ask(queue, GetStats())
    assert not sub.is_alive
    assert (stats.in_flight, stats.depth, stats.acked) == (0, 8, 0)


def test_bad_subscription_settings_are_refused() -> None:
    with pytest.raises(ValueError, match=r"FlowControl\.max_messages must be an int >= 1, got 0"):
        FlowControl(max_messages=0)
    with pytest.raises(ValueError, match="resume_threshold must be a number in"):
        FlowControl(resume_threshold=1.5)
    with pytest.raises(TypeError, match="callback must be callable"):
        StreamingPullManager(None, "not callable")  # type: ignore[arg-type]


# --- the public API ------------------------------------------------------------------------------


def _ack(message: SubscriberMessage) -> None:
    message.ack()


BAD_SUBSCRIBE_ARGUMENTS: list[tuple[dict[str, object], type[Exception], str]] = [
    ({"system": "sim"}, TypeError, r"subscribe\(\) system must be an actor system \(TrioSystem, ThreadSystem or "
                                   r"Simulation\), got 'sim'"),
    ({"queue": "q"}, TypeError, r"subscribe\(\) queue must be the ActorRef of a queue, got 'q'"),
    ({"callback": None}, TypeError, r"subscribe\(\) callback must be callable, got None"),
    ({"flow_control": {"max_messages": 5}}, TypeError, r"subscribe\(\) flow_control must be None or a FlowControl"),
    ({"workers": 0}, ValueError, r"subscribe\(\) workers must be an int >= 1, got 0"),
    ({"workers": "4"}, ValueError, r"subscribe\(\) workers must be an int >= 1, got '4'"),
    ({"workers": True}, ValueError, r"subscribe\(\) workers must be an int >= 1, got True"),
    ({"selector": 1.5}, ValueError, r"selector: expected a selector"),
    ({"heartbeat_s": 0}, ValueError, r"subscribe\(\) heartbeat_s must be a finite number of seconds >= 1\.0, got 0"),
    ({"heartbeat_s": -5.0}, ValueError, r"subscribe\(\) heartbeat_s must be .*, got -5\.0"),
    ({"heartbeat_s": 0.001}, ValueError, r"subscribe\(\) heartbeat_s must be .*, got 0\.001"),
    ({"heartbeat_s": float("nan")}, ValueError, r"subscribe\(\) heartbeat_s must be .*, got nan"),
    ({"heartbeat_s": float("inf")}, ValueError, r"subscribe\(\) heartbeat_s must be .*, got inf"),
    ({"heartbeat_s": 10**5000}, ValueError, r"subscribe\(\) heartbeat_s must be .*, got 1000+\.\.\. \(5001 digits\)"),
    ({"heartbeat_s": "30"}, TypeError, r"subscribe\(\) heartbeat_s must be a finite number of seconds .*, got '30'"),
    ({"heartbeat_s": None}, TypeError, r"subscribe\(\) heartbeat_s must be .*, got None"),
    ({"heartbeat_s": True}, TypeError, r"subscribe\(\) heartbeat_s must be .*, got True"),
    ({"await_callbacks_on_shutdown": "yes"}, TypeError,
     r"subscribe\(\) await_callbacks_on_shutdown must be True or False, got 'yes'"),
    ({"name": 5}, TypeError, r"subscribe\(\) name must be None or a str of letters, digits.*, got 5"),
    ({"name": "two words"}, ValueError, r"name must be a non-empty str of letters, digits"),
    ({"callbacks_per_job": 0}, ValueError, r"subscribe\(\) callbacks_per_job must be an int >= 1, got 0"),
]


@pytest.mark.parametrize(("bad", "error", "pattern"), BAD_SUBSCRIBE_ARGUMENTS)
async def test_subscribe_refuses_a_bad_argument_at_the_call(
    backend: Harness, bad: dict[str, object], error: type[Exception], pattern: str
) -> None:
    """Issue 15, item 7d: each argument is checked before anything is spawned, naming it; no actor is
    left to fail on it later (``heartbeat_s=0`` spun a CPU, a negative or NaN one crash-looped)."""
    from conveyor.actors.subscriber import subscribe

    queue = backend.spawn(lambda: QueueActor(QueueConfig("q")), name="q")
    await backend.quiet()
    arguments: dict[str, object] = {"system": backend.system, "queue": queue, "callback": _ack}
    arguments.update(bad)
    with pytest.raises(error, match=pattern):
        subscribe(**arguments)  # type: ignore[arg-type]
    await backend.elapse(0.05)
    assert backend.system.failures == []
    assert not [e for e in backend.trace if e.kind in (EventKind.FAILED, EventKind.RESTARTED)]
    started = {e.receiver for e in backend.trace if type(e.message).__name__ == "Start"}
    assert started == {"/q", "/q/consumers"}, "nothing spawned but the queue (and its consumer manager)"


def test_the_manager_refuses_a_bad_heartbeat_too() -> None:
    """For a manager built without ``subscribe()`` (a subclass, the Pub/Sub transport's)."""
    with pytest.raises(ValueError, match=r"subscribe\(\) heartbeat_s must be .*, got 0"):
        StreamingPullManager(None, _ack, heartbeat_s=0)  # type: ignore[arg-type]


async def test_subscribe_cancel_and_wait_for_the_end(backend: Harness) -> None:
    from conveyor.actors.subscriber import subscribe

    log = Log()

    def callback(message: SubscriberMessage) -> None:
        log.add("run", message)
        message.ack()

    queue = backend.spawn(lambda: QueueActor(QueueConfig("q")), name="q")
    subscription = subscribe(backend.system, queue, callback, name="subscription")
    await backend.quiet()
    for n in range(10):
        queue.tell(Publish(Message(str(n).encode())))
    await _until_acked(backend, queue, 10)
    assert subscription.running
    subscription.cancel()
    if backend.name == "trio":
        with pytest.raises(ConveyorError, match=r"use `await subscription\.wait"):
            subscription.result()
        await subscription.wait()
    else:
        subscription.result(timeout=5)
    assert not subscription.running
    assert sorted(n for _, _, n, _ in log.snapshot()) == list(range(10))


async def test_ack_with_response_is_confirmed_by_the_queue(backend: Harness) -> None:
    from conveyor.actors.subscriber import subscribe

    answers: list[bool] = []
    errors: list[str] = []

    def callback(message: SubscriberMessage) -> None:
        try:
            answers.append(message.ack_with_response(timeout=5))
        except Exception as error:
            errors.append(str(error))
            message.ack()

    queue = backend.spawn(lambda: QueueActor(QueueConfig("q")), name="q")
    subscribe(backend.system, queue, callback)
    await backend.quiet()
    queue.tell(Publish(Message(b"once")))
    stats = await _until_acked(backend, queue, 1)
    assert stats.acked == 1
    if backend.name == "simulation":  # a simulated job cannot block for an answer
        assert errors and "cannot answer ask_from_thread" in errors[0]
    else:
        assert answers == [True]


async def test_acks_made_before_cancel_reach_the_queue(backend: Harness) -> None:
    """Found by a helper: the final stop used to overtake the dispatcher's last batch of acks."""
    from conveyor.actors.subscriber import subscribe

    def callback(message: SubscriberMessage) -> None:
        message.ack()

    queue = backend.spawn(lambda: QueueActor(QueueConfig("q")), name="q")
    subscription = subscribe(backend.system, queue, callback)
    await backend.quiet()
    for n in range(5):
        queue.tell(Publish(Message(str(n).encode())))
    await backend.quiet()  # on trio and threads the callbacks ran; their acks wait in the batch
    if backend.name == "simulation":
        await backend.elapse(0.06)  # jobs take virtual time: let every callback run first
    subscription.cancel()
    await backend.elapse(0.2)
    assert not subscription.running
    stats: QueueStats = await backend.ask(queue, GetStats())
    assert (stats.acked, stats.depth, stats.in_flight) == (5, 0, 0)


async def test_a_zero_ack_deadline_from_the_callback_nacks(backend: Harness) -> None:
    """Found by a helper: modify_ack_deadline(0) used to leave the message stuck as pending."""
    log = Log()

    def callback(message: SubscriberMessage) -> None:
        log.add("run", message)
        if message.delivery_attempt == 1:
            message.modify_ack_deadline(0)
        else:
            message.ack()

    queue, _ = _setup(backend, callback)
    await backend.quiet()
    queue.tell(Publish(Message(b"1")))
    stats = await _until_acked(backend, queue, 1)
    assert (stats.acked, stats.redelivered) == (1, 1)
    assert [attempt for _, _, _, attempt in log.snapshot()] == [1, 2]


async def test_cancel_can_let_running_callbacks_finish(backend: Harness) -> None:
    """With await_callbacks_on_shutdown the callbacks in progress settle before the stop."""
    from conveyor.actors.subscriber import subscribe

    started = threading.Event()
    release = threading.Event()
    log = Log()

    def callback(message: SubscriberMessage) -> None:
        log.add("start", message)
        started.set()
        if backend.name != "simulation":
            release.wait(5)
        message.ack()

    queue = backend.spawn(lambda: QueueActor(QueueConfig("q")), name="q")
    subscription = subscribe(
        backend.system, queue, callback, workers=2, flow_control=FlowControl(max_messages=4),
        await_callbacks_on_shutdown=True,
    )
    await backend.quiet()
    for n in range(10):
        queue.tell(Publish(Message(str(n).encode())))
    await backend.wait_until(started.is_set)
    subscription.cancel()
    release.set()
    if backend.name == "trio":
        await subscription.wait()
    else:
        subscription.result(timeout=10)
    await backend.quiet()
    stats: QueueStats = await backend.ask(queue, GetStats())
    ran = len(log.snapshot())
    assert ran >= 1
    assert stats.acked == ran  # every callback that started finished and its ack reached the queue
    assert (stats.in_flight, stats.depth) == (0, 10 - ran)
