"""A worker job that runs several callbacks in turn (``WorkerPool(callbacks_per_job=...)``).

What must hold: every callback runs once; the settlements made on the job's thread reach the
manager in order, grouped (``Settles`` as the job goes, the rest with ``RunsEnded``), and none is
lost or doubled; one made on another thread goes straight to the manager; a callback that
raises nacks only its own message; a job that dies nacks everything it held; the key handler's
runs (one per key at a time) share jobs like unordered ones.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conveyor.actors.broker import Delivery, Message
from conveyor.actors.broker._values import DEFAULT_PRIORITY
from conveyor.actors.subscriber import SubscriberMessage, WorkerPool, subscribe
from conveyor.actors.subscriber._components import PACKED_SETTLES_PER_HAND_OVER, SETTLES_PER_HAND_OVER
from conveyor.actors.subscriber._protocol import (
    CallbackEnded,
    Lapsed,
    Received,
    RunBatch,
    RunsEnded,
    Settles,
    Skipped,
)
from conveyor.actors.subscriber._protocol import Run as RunOne
from conveyor.actors.subscriber._protocol import (
    Settlement as Settle,
)
from conveyor.actors.subscriber._protocol import (
    SettlementKind as SettleKind,
)
from conveyor.runtime import Actor, ActorRef, ThreadSystem
from conveyor.simulation import FailJob, Simulation, uniform_job_duration


class Recorder(Actor):
    """Stands in for the manager."""

    def __init__(self, log: list[Any]) -> None:
        self.log = log

    def receive(self, message: Any) -> None:
        self.log.append(message)


def _run(tag: int, key: str | None = None) -> Received:
    """A message to run, as the key handler hands it over in a ``RunBatch``."""
    delivery = Delivery("q", tag, Message(f"m{tag}".encode(), priority=DEFAULT_PRIORITY, group=key), 1, 100.0, 1)
    return Received(f"1:{tag}", 8, key, delivery)


def _one(tag: int) -> RunOne:
    """A message to run, alone: a ``Run``."""
    received = _run(tag)
    return RunOne(received.ack_id, received.key, received.delivery)


def _pool(callback: Any, workers: int = 2, per_job: int = 8, **sim: Any) -> tuple[Simulation, Any, list[Any]]:
    sim.setdefault("job_duration", uniform_job_duration(1.0, 1.0))
    simulation = Simulation(seed=1, **sim)
    log: list[Any] = []
    manager = simulation.spawn(lambda: Recorder(log), name="manager")
    pool = simulation.spawn(lambda: WorkerPool(manager, callback, workers, per_job), name="workers")
    return simulation, pool, log


def _settled(log: list[Any]) -> list[Settle]:
    """Every settlement the manager heard, in arrival order, whichever way it came."""
    found: list[Settle] = []
    for message in log:
        if type(message) is Settle:
            found.append(message)
        elif type(message) is Settles:
            found.extend(message.items)
        elif type(message) is RunsEnded:
            found.extend(message.settled)
    return found


def test_waiting_unordered_messages_share_jobs_and_their_acks_arrive_once_each_in_order() -> None:
    calls: list[int] = []

    def callback(message: SubscriberMessage) -> None:
        calls.append(message.tag)
        message.ack()

    sim, pool, log = _pool(callback)
    pool.tell(RunBatch(tuple(_run(tag) for tag in range(1, 21))))
    sim.run(until=60.0)
    assert calls == list(range(1, 21))
    jobs = [message for message in log if type(message) is RunsEnded]
    assert [len(job.ended) for job in jobs] == [8, 8, 4], "20 waiting over 2 workers: 8 each, then the rest"
    assert not [message for message in log if type(message) is CallbackEnded], "no message got a job of its own"
    assert [settle.ack_id for settle in _settled(log)] == [f"1:{tag}" for tag in range(1, 21)]
    assert all(settle.kind is SettleKind.ACK for settle in _settled(log))
    assert any(len(m.items) == SETTLES_PER_HAND_OVER for m in log if type(m) is Settles), "a long job hands over"
    assert [end.ack_id for job in jobs for end in job.ended] == [f"1:{tag}" for tag in range(1, 21)]


def test_few_waiting_messages_keep_every_worker_busy_with_one_each() -> None:
    sim, pool, log = _pool(lambda message: message.ack(), workers=4)
    pool.tell(RunBatch(tuple(_run(tag) for tag in range(1, 4))))
    sim.run(until=60.0)
    assert [message.ack_id for message in log if type(message) is CallbackEnded] == ["1:1", "1:2", "1:3"]
    assert not [message for message in log if type(message) is RunsEnded]


def test_messages_of_distinct_ordering_keys_share_a_job_in_their_order() -> None:
    calls: list[int] = []

    def callback(message: SubscriberMessage) -> None:
        calls.append(message.tag)
        message.ack()

    sim, pool, log = _pool(callback, workers=1)
    pool.tell(RunBatch(tuple(_run(tag, key=f"k{tag % 2}" if tag > 5 else None) for tag in range(1, 8))))
    sim.run(until=60.0)
    assert calls == list(range(1, 8))
    jobs = [message for message in log if type(message) is RunsEnded]
    assert [[(end.ack_id, end.key) for end in job.ended] for job in jobs] == [
        [("1:1", None), ("1:2", None), ("1:3", None), ("1:4", None), ("1:5", None), ("1:6", "k0"), ("1:7", "k1")]
    ], "keyed and unordered messages share the one worker's job, each reported with its key"
    assert not [message for message in log if type(message) is CallbackEnded]


@pytest.mark.parametrize(("job_s", "sizes", "hand_overs"), [(0.0002, [8], 0), (0.01, [4, 4, 4, 4], 0),
                                                           (0.01, [8, 8, 8, 8], 4)], ids=["short", "long", "long-jobs"])
def test_once_callbacks_prove_short_what_waits_is_packed_not_spread_and_acked_with_the_jobs_end(
    job_s: float, sizes: list[int], hand_overs: int
) -> None:
    sim, pool, log = _pool(lambda message: message.ack(), workers=4, job_duration=uniform_job_duration(job_s, job_s))
    pool.tell(_one(1))  # the first job: the pool learns how long a callback takes
    sim.run(until=1.0)
    pool.tell(RunBatch(tuple(_run(tag, key=f"k{tag}") for tag in range(2, 2 + sum(sizes)))))
    sim.run(until=2.0)
    assert [len(job.ended) for job in log if type(job) is RunsEnded] == sizes
    assert len([message for message in log if type(message) is Settles]) == hand_overs, "eight at a time if spread"
    assert [settle.ack_id for settle in _settled(log)] == [f"1:{tag}" for tag in range(1, 2 + sum(sizes))]


def test_a_packed_job_hands_its_acks_over_as_it_goes_not_only_with_its_end() -> None:
    # A packed job of 128 short callbacks sat on its first ack until the last callback had run: the
    # ack (and the server's flow-control credit) waited for 127 more callbacks.
    size = 2 * PACKED_SETTLES_PER_HAND_OVER + 5
    sim, pool, log = _pool(lambda message: message.ack(), workers=4, per_job=128,
                           job_duration=uniform_job_duration(0.0002, 0.0002))
    pool.tell(_one(1))  # the first job: the pool learns callbacks are short, and packs from then on
    sim.run(until=1.0)
    pool.tell(RunBatch(tuple(_run(tag) for tag in range(2, 2 + size))))
    sim.run(until=2.0)
    assert [len(job.ended) for job in log if type(job) is RunsEnded] == [size], "one packed job"
    assert [len(group.items) for group in log if type(group) is Settles] == [PACKED_SETTLES_PER_HAND_OVER] * 2
    ended = next(job for job in log if type(job) is RunsEnded)
    assert len(ended.settled) == 5, "the rest with the job's end"
    assert [settle.ack_id for settle in _settled(log)] == [f"1:{tag}" for tag in range(1, 2 + size)]


def test_a_callback_that_raises_nacks_its_own_message_and_the_job_goes_on() -> None:
    def callback(message: SubscriberMessage) -> None:
        if message.tag == 3:
            raise RuntimeError("boom")
        message.ack()

    sim, pool, log = _pool(callback, workers=1)
    pool.tell(RunBatch(tuple(_run(tag) for tag in range(1, 6))))
    sim.run(until=60.0)
    kinds = {settle.ack_id: settle.kind for settle in _settled(log)}
    assert kinds == {"1:1": SettleKind.ACK, "1:2": SettleKind.ACK, "1:3": SettleKind.NACK,
                     "1:4": SettleKind.ACK, "1:5": SettleKind.ACK}
    ended = {end.ack_id: end for job in log if type(job) is RunsEnded for end in job.ended}
    assert ended["1:3"].nacked and "boom" in (ended["1:3"].error or "")
    assert not ended["1:4"].nacked and ended["1:4"].error is None


def test_a_job_that_dies_nacks_every_message_it_held() -> None:
    calls: list[int] = []
    sim, pool, log = _pool(lambda message: calls.append(message.tag), workers=1,
                           faults=(FailJob("/workers", 1),))
    pool.tell(RunBatch(tuple(_run(tag) for tag in range(1, 5))))
    sim.run(until=60.0)
    assert calls == [], "the job died before it ran any callback"
    assert sorted(s.ack_id for s in _settled(log) if s.kind is SettleKind.NACK) == [f"1:{t}" for t in range(1, 5)]
    ended = [message for message in log if type(message) is CallbackEnded]
    assert len(ended) == 4 and all(end.nacked and end.error for end in ended)


def test_an_ack_made_on_another_thread_goes_straight_to_the_manager() -> None:
    system = ThreadSystem()
    log: list[Any] = []
    done = threading.Event()
    later: list[threading.Thread] = []

    def callback(message: SubscriberMessage) -> None:
        thread = threading.Thread(target=message.ack)  # acked after the callback, off the job's thread
        later.append(thread)
        thread.start()

    try:
        manager = system.spawn(lambda: Recorder(log))
        pool = system.spawn(lambda: WorkerPool(manager, callback, 1, 8))
        pool.tell(RunBatch(tuple(_run(tag) for tag in range(1, 11))))
        for _ in range(200):
            if len([m for m in log if type(m) is Settle]) == 10 and any(type(m) is RunsEnded for m in log):
                done.set()
                break
            threading.Event().wait(0.02)
    finally:
        for thread in later:
            thread.join(5)
        system.shutdown()
    assert done.is_set(), log
    assert sorted(m.ack_id for m in log if type(m) is Settle) == sorted(f"1:{t}" for t in range(1, 11))
    assert all(not job.settled for job in log if type(job) is RunsEnded), "nothing was collected in the job"


def test_callbacks_per_job_must_be_a_positive_int() -> None:
    sim = Simulation(seed=1)
    queue = sim.spawn(lambda: Recorder([]))
    with pytest.raises(ValueError, match="callbacks_per_job must be an int >= 1, got 0"):
        subscribe(sim, queue, lambda message: None, callbacks_per_job=0)



class KeyFeeder(Actor):
    """Stands in for the manager and the key handler: one run of a key at the pool at a time, the next once it ended."""

    def __init__(self, runs: list[Received], pool: list[ActorRef], log: list[Any]) -> None:
        self.pool = pool  # filled in once the pool is spawned, before anything runs
        self.log = log
        self.lines: dict[str, deque[Received]] = {}
        for run in runs:
            if run.key:
                self.lines.setdefault(run.key, deque()).append(run)

    def receive(self, message: Any) -> None:
        self.log.append(message)
        ended = message.ended if type(message) is RunsEnded else (message,) if type(message) is CallbackEnded else ()
        for end in ended:
            if end.key:
                assert self.lines[end.key][0].ack_id == end.ack_id
                self.lines[end.key].popleft()
        released = tuple(self.lines[end.key][0] for end in ended if end.key and self.lines[end.key])
        if released:
            self.ctx.send(self.pool[0], RunBatch(released))


@settings(max_examples=150, deadline=None)
@given(
    keys=st.lists(st.sampled_from((None, "a", "b", "c", "d", "e")), min_size=1, max_size=40),
    workers=st.integers(min_value=1, max_value=4),
    per_job=st.integers(min_value=1, max_value=8),
    seed=st.integers(min_value=0, max_value=2**16),
    job_s=st.sampled_from(((0.0001, 0.0005), (0.1, 1.0))),
)
def test_shared_jobs_keep_each_keys_order_and_run_each_message_once(
    keys: list[str | None], workers: int, per_job: int, seed: int, job_s: tuple[float, float]
) -> None:
    """With the key handler's rule (one run of a key at the pool at a time), whatever shares a job: each key's
    callbacks run in order, every message once, and no job holds a key twice; with short jobs (packed) and long
    ones (spread)."""
    runs = [_run(tag, key) for tag, key in enumerate(keys, start=1)]
    calls: list[tuple[str | None, int]] = []
    log: list[Any] = []
    pool: list[ActorRef] = []
    simulation = Simulation(seed=seed, job_duration=uniform_job_duration(*job_s))
    feeder = simulation.spawn(lambda: KeyFeeder(runs, pool, log), name="manager")
    pool.append(simulation.spawn(
        lambda: WorkerPool(feeder, lambda message: calls.append((message.ordering_key or None, message.tag)),
                           workers, per_job), name="workers"))
    firsts = {run.key: run for run in reversed(runs) if run.key}
    pool[0].tell(RunBatch(tuple(run for run in runs if not run.key or firsts[run.key] is run)))
    simulation.run(until=1000.0)
    assert sorted(tag for _, tag in calls) == list(range(1, len(keys) + 1)), "every message ran once"
    for key in {key for key in keys if key}:
        tags = [tag for called, tag in calls if called == key]
        assert tags == sorted(tags), f"key {key}'s callbacks ran out of order: {tags}"
    for job in (message for message in log if type(message) is RunsEnded):
        job_keys = [end.key for end in job.ended if end.key]
        assert len(job_keys) == len(set(job_keys)), f"one job held a key twice: {job_keys}"


@pytest.mark.parametrize(("later", "sizes"), [((3, 2), [5, 5]), ((40,), [5, 40])],
                         ids=["a-few-wait", "a-backlog-spreads"])
def test_while_a_packed_job_runs_a_few_short_callbacks_wait_for_the_next_job_and_a_backlog_gets_its_own(
    later: tuple[int, ...], sizes: list[int]
) -> None:
    """With many ordering keys, a job's end releases a few runs at a time: each few made a job of its own."""
    sim, pool, log = _pool(lambda message: message.ack(), workers=4, per_job=128,
                           job_duration=uniform_job_duration(0.0002, 0.0002))
    pool.tell(_one(1))  # the first job: callbacks prove short
    sim.run(until=1.0)
    tag = 2
    for size in (5, *later):  # the first batch starts a job; the later ones arrive while it runs
        pool.tell(RunBatch(tuple(_run(t, key=f"k{t}") for t in range(tag, tag + size))))
        tag += size
    sim.run(until=2.0)
    assert [len(job.ended) for job in log if type(job) is RunsEnded] == sizes
    assert [settle.ack_id for settle in _settled(log)] == [f"1:{t}" for t in range(1, tag)]


def test_a_key_run_stays_in_one_job_in_order_even_across_free_workers() -> None:
    """The key handler's release of several messages of one key (a key run) is never split over jobs."""
    sim, pool, log = _pool(lambda message: message.ack(), workers=4)
    pool.tell(RunBatch((_run(1, "a"), _run(2, "a"), _run(3, "a"), _run(4, "b"))))
    sim.run(until=60.0)
    assert [[end.ack_id for end in job.ended] for job in log if type(job) is RunsEnded] == [["1:1", "1:2", "1:3"]]
    assert [end.ack_id for end in log if type(end) is CallbackEnded] == ["1:4"], "the other key: a job of its own"


def test_after_a_nack_the_rest_of_its_key_run_goes_back_unstarted_and_other_keys_go_on() -> None:
    calls: list[int] = []

    def callback(message: SubscriberMessage) -> None:
        calls.append(message.tag)
        if message.tag == 2:
            message.nack()
        else:
            message.ack()

    sim, pool, log = _pool(callback, workers=1)
    pool.tell(RunBatch((_run(1, "a"), _run(2, "a"), _run(3, "a"), _run(4, "a"), _run(5, "b"))))
    sim.run(until=60.0)
    assert calls == [1, 2, 5], "3 and 4 must not run after 2 of their key nacked"
    ended = [(end.ack_id, end.nacked) for job in log if type(job) is RunsEnded for end in job.ended]
    assert ended == [("1:1", False), ("1:2", True), ("1:3", True), ("1:4", True), ("1:5", False)]
    kinds = {settle.ack_id: settle.kind for settle in _settled(log)}
    assert kinds == {"1:1": SettleKind.ACK, "1:2": SettleKind.NACK, "1:3": SettleKind.NACK,
                     "1:4": SettleKind.NACK, "1:5": SettleKind.ACK}, "the skipped go back to the queue"


def test_a_lapse_in_a_waiting_key_run_cuts_the_rest_of_it() -> None:
    sim, pool, log = _pool(lambda message: message.ack(), workers=1)
    pool.tell(_one(9))  # occupies the one worker
    pool.tell(RunBatch((_run(1, "a"), _run(2, "a"), _run(3, "a"))))
    pool.tell(Lapsed(("1:2",)))
    sim.run(until=60.0)
    assert [m.ack_id for m in log if type(m) is Skipped] == ["1:2", "1:3"]
    assert "1:1" in [end.ack_id for m in log if type(m) in (RunsEnded, CallbackEnded)
                     for end in (m.ended if type(m) is RunsEnded else (m,))]
