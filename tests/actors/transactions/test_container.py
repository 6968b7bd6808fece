"""The listener container on trio, threads and the simulator: listener per item, rollback on error, stop.

Listeners here record what they were called with; the store is asked what became of every item
(committed puts, the DLQ, locks), so each test says what a user of the container would see.
"""

from __future__ import annotations

import threading
import time

import pytest

from conveyor.actors.transactions import (
    AtLeastOnce,
    ConsumeTimes,
    ContainerStopped,
    GetContainerStats,
    ListenerConsumer,
    ListenerContainerActor,
    QueueListenerContainer,
    StopContainer,
    TakeItem,
    TxItem,
    TxQueue,
    TxStoreActor,
)
from conveyor.runtime import ActorRef, EventKind, ThreadSystem
from conveyor.simulation import Simulation
from tests.actors.transactions.helpers import declared, produce, spawn_store, until
from tests.conftest import Harness


def container(backend: Harness, store: ActorRef, queue: str, listener: object, workers: int) -> ActorRef:
    return backend.spawn(lambda: ListenerContainerActor(store, queue, listener, workers=workers, poll_s=0.5))  # type: ignore[arg-type]


async def test_every_item_reaches_the_listener_and_its_puts_commit_with_it(backend: Harness) -> None:
    store = spawn_store(backend)
    q = await declared(backend, store, ("in", ConsumeTimes(1)), ("out", AtLeastOnce()))
    await produce(q, "in", *(f"m{n}".encode() for n in range(10)))
    calls: list[bytes] = []

    def greet(consumer: ListenerConsumer, item: TxItem) -> None:
        calls.append(item.body)
        consumer.put_on_commit("out", b"Hello, " + item.body)

    ref = container(backend, store, "in", greet, workers=3)

    async def drained() -> bool:
        return (await q.stats("in")).items == 0

    await until(backend, drained)
    stopped = await backend.ask(ref, StopContainer(), 10.0)
    assert stopped == ContainerStopped(committed=10, rolled_back=0)
    assert sorted(calls) == sorted(f"m{n}".encode() for n in range(10))
    assert (await q.stats("out")).items == 10
    assert (await q.stats("in")).locked == 0
    assert await q.dead_letters("in") == ()


async def test_a_listener_error_rolls_back_redelivers_and_ends_in_the_dlq_after_k(backend: Harness) -> None:
    store = spawn_store(backend)
    q = await declared(backend, store, ("in", ConsumeTimes(3)), ("out", AtLeastOnce()))
    await produce(q, "in", b"bad", b"flaky", b"good")
    attempts: dict[bytes, int] = {}

    def listener(consumer: ListenerConsumer, item: TxItem) -> None:
        attempts[item.body] = attempts.get(item.body, 0) + 1
        consumer.put_on_commit("out", item.body)
        if item.body == b"bad" or (item.body == b"flaky" and item.takes == 1):
            raise ValueError(f"cannot handle {item.body!r}")

    ref = container(backend, store, "in", listener, workers=2)

    async def settled() -> bool:
        return (await q.stats("in")).items == 0

    await until(backend, settled)
    stopped = await backend.ask(ref, StopContainer(), 10.0)
    assert attempts == {b"bad": 3, b"flaky": 2, b"good": 1}
    assert stopped == ContainerStopped(committed=2, rolled_back=4)
    assert [(d.body, d.takes) for d in await q.dead_letters("in")] == [(b"bad", 3)]
    assert (await q.stats("out")).items == 2, "a rolled-back listener's puts are dropped"


async def test_stop_waits_for_running_listeners_and_leaves_no_lock(backend: Harness) -> None:
    store = spawn_store(backend)
    q = await declared(backend, store, ("in", ConsumeTimes(1)), ("out", AtLeastOnce()))
    await produce(q, "in", *(f"m{n}".encode() for n in range(6)))
    started: list[bytes] = []
    release = threading.Event()

    def slow(consumer: ListenerConsumer, item: TxItem) -> None:
        started.append(item.body)
        release.wait(10)  # user code still running when the stop is asked
        consumer.put_on_commit("out", item.body)

    ref = container(backend, store, "in", slow, workers=2)
    if backend.name == "simulation":
        release.set()
        await backend.quiet()  # both takes answered; the listeners' jobs complete at later virtual times
        assert (await backend.ask(ref, GetContainerStats())).running == 2
    else:
        await backend.wait_until(lambda: len(started) == 2)
        threading.Timer(0.2, release.set).start()  # the listeners finish while the stop is waiting
    stopped = await backend.ask(ref, StopContainer(), 10.0)
    assert release.is_set()
    assert stopped == ContainerStopped(committed=2, rolled_back=0), "every running listener finished and committed"
    await backend.quiet()
    assert (await q.stats("in")).locked == 0
    assert (await q.stats("out")).items == 2
    assert (await q.stats("in")).items == 4, "what no listener saw is still there"
    assert await q.dead_letters("in") == (), "an item taken while stopping is returned uncounted, not dead-lettered"
    assert not ref.is_alive


async def test_a_container_that_dies_mid_listener_releases_its_locks(backend: Harness) -> None:
    store = spawn_store(backend)
    q = await declared(backend, store, ("in", AtLeastOnce()))
    await produce(q, "in", b"x")

    started, release = threading.Event(), threading.Event()

    def slow(consumer: ListenerConsumer, item: TxItem) -> None:
        started.set()
        release.wait(10)  # still running when the container is stopped (the simulator's job is pending)

    ref = container(backend, store, "in", slow, workers=1)
    if backend.name == "simulation":
        release.set()
        await backend.quiet()  # the take is answered; the listener's job completes at a later virtual time
    else:
        await backend.wait_until(started.is_set)
    assert (await backend.ask(ref, GetContainerStats())).running == 1
    assert (await q.stats("in")).locked == 1
    backend.system.stop(ref)  # the client dies: its session (the container) ends
    release.set()
    await backend.quiet()
    assert (await q.stats("in")).locked == 0
    async with q.new_transaction() as tx:
        item = await tx.try_take("in")
        assert item is not None and item.takes == 2, "offered again: at least once"


def test_the_blocking_container_on_threads() -> None:
    with ThreadSystem() as system:
        store = system.spawn(TxStoreActor)
        q = TxQueue(system, store)
        q.declare("in", ConsumeTimes(2))
        q.declare("out", AtLeastOnce())
        with q.new_transaction() as tx:
            for n in range(20):
                tx.put("in", str(n).encode())
            tx.commit()

        def listener(consumer: ListenerConsumer, item: TxItem) -> None:
            consumer.put_on_commit("out", b"Hello, " + item.body)

        running = QueueListenerContainer(system, store, "in", listener, workers=4, poll_s=0.2)
        running.start()
        deadline = time.monotonic() + 30
        while q.stats("in").items and time.monotonic() < deadline:
            time.sleep(0.01)
        assert running.stop() == ContainerStopped(committed=20, rolled_back=0)
        assert q.stats("out").items == 20
        with pytest.raises(RuntimeError, match="called already"):
            running.start()


def test_a_refused_take_is_asked_again_after_poll_s_not_at_once() -> None:
    """A store that refuses every take (here: a queue never declared; on ZooKeeper: an expired session) is asked
    again once per ``poll_s`` per worker, not in a loop as fast as it answers (issue 19, found by ``tx-zk``)."""
    sim = Simulation(seed=1)
    store = sim.spawn(TxStoreActor, name="tx")
    ref = sim.spawn(lambda: ListenerContainerActor(store, "nowhere", lambda consumer, item: None, workers=2,
                                                   poll_s=0.5), name="container")
    result = sim.run(until=2.0, max_steps=10_000)
    takes = [event for event in sim.trace
             if event.kind is EventKind.DELIVERED and type(event.message) is TakeItem and event.receiver == "/tx"]
    assert result.quiet, "not spinning"
    assert 2 <= len(takes) <= 2 * (1 + 2.0 / 0.5)
    assert sim.ask(ref, StopContainer()) == ContainerStopped(committed=0, rolled_back=0)
