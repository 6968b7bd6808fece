"""Faults as data: each one does what it says, lands in the trace, and replays identically."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from conveyor.runtime import Actor, ActorRef, EventKind, JobDone, JobFailed, Terminated
from conveyor.simulation import (
    Crash,
    CrashAmong,
    Delay,
    Drop,
    FailJob,
    FailWrite,
    FaultApplied,
    InjectedFault,
    Pause,
    RoundRobin,
    Simulation,
    never_acks,
)


@attrs.frozen
class Bump:
    """Add one to the counter."""


@attrs.frozen
class Tick:
    """A timer's message."""


@attrs.frozen
class Ack:
    """Named like the broker's ack, so ``never_acks`` drops it."""

    n: int


class Recorder(Actor):
    """Remembers what it got and when (the list is the test's window into the actor)."""

    def __init__(self, log: list[tuple[float, Any]]) -> None:
        self.log = log
        self.count = 0

    def on_start(self) -> None:
        self.log.append((self.ctx.now(), "started"))

    def receive(self, message: Any) -> None:
        if isinstance(message, Bump):
            self.count += 1
            self.log.append((self.ctx.now(), self.count))
        else:
            self.log.append((self.ctx.now(), message))


class Sender(Actor):
    """Sends ``count`` messages made by ``make`` to ``target`` when started."""

    def __init__(self, target: ActorRef, messages: tuple[Any, ...]) -> None:
        self.target = target
        self.messages = messages

    def on_start(self) -> None:
        for message in self.messages:
            self.ctx.send(self.target, message)


def fault_events(sim: Simulation) -> list[FaultApplied]:
    return [event.message for event in sim.trace if event.kind is EventKind.FAULT]


def test_crash_with_restart_gives_a_fresh_instance_and_is_recorded() -> None:
    log: list[tuple[float, Any]] = []
    sim = Simulation(seed=1, strategy=RoundRobin(), faults=[Crash("/counter", at_step=4)])
    counter = sim.spawn(lambda: Recorder(log), name="counter")
    for _ in range(6):
        counter.tell(Bump())
    sim.run()
    counts = [entry for _, entry in log if isinstance(entry, int)]
    # Steps count from 0: Start is step 0, bumps are steps 1..6; the crash before step 4 wipes a count of 3.
    assert counts == [1, 2, 3, 1, 2, 3]
    assert [entry for _, entry in log].count("started") == 2
    [applied] = fault_events(sim)
    assert applied == FaultApplied(Crash("/counter", 4), "restarted")
    assert any(event.kind is EventKind.RESTARTED and "injected crash" in (event.error or "") for event in sim.trace)


def test_crash_without_restart_stops_the_actor_and_tells_its_watchers() -> None:
    log: list[tuple[float, Any]] = []

    class Watcher(Actor):
        def __init__(self, target: ActorRef) -> None:
            self.target = target

        def on_start(self) -> None:
            self.ctx.watch(self.target)

        def receive(self, message: Any) -> None:
            log.append((self.ctx.now(), message))

    sim = Simulation(seed=1, faults=[Crash("/victim", at_step=3, restart=False)])
    victim = sim.spawn(lambda: Recorder([]), name="victim")
    sim.spawn(lambda: Watcher(victim), name="watcher")
    sim.run()
    assert not victim.is_alive
    [(_, terminated)] = log
    assert isinstance(terminated, Terminated)
    assert terminated.reason == "crashed"


def test_crash_of_an_actor_that_is_not_there_is_recorded_as_missed() -> None:
    sim = Simulation(seed=1, faults=[Crash("/nobody", at_step=0)])
    sim.spawn(lambda: Recorder([]), name="someone")
    sim.run()
    [applied] = fault_events(sim)
    assert applied.outcome == "no live actor at /nobody"


class Parent(Actor):
    """Spawns children named ``names`` when started (a registry spawning bindings, say)."""

    def __init__(self, names: tuple[str, ...], log: list[tuple[float, Any]]) -> None:
        self.names = names
        self.log = log

    def on_start(self) -> None:
        for name in self.names:
            self.ctx.spawn(lambda: Recorder(self.log), name=name)


def test_crash_among_hits_the_picked_live_actor_of_that_name_counting_modulo() -> None:
    log: list[tuple[float, Any]] = []
    names = ("binding-1", "queue-0", "binding-2", "binding")
    sim = Simulation(seed=1, faults=[CrashAmong("/front", "binding", at_step=6, pick=4)])
    sim.spawn(lambda: Parent(names, log), name="front")
    sim.spawn(lambda: Recorder([]), name="binding-9")  # not under /front: never picked
    sim.run()
    [applied] = fault_events(sim)
    # Live matches in spawn order: binding-1, binding-2, binding; pick 4 is 4 % 3 = 1.
    assert applied == FaultApplied(CrashAmong("/front", "binding", 6, 4), "restarted /front/binding-2")
    restarted = [event.receiver for event in sim.trace if event.kind is EventKind.RESTARTED]
    assert restarted == ["/front/binding-2"]


def test_crash_among_nothing_live_is_recorded_as_missed_and_names_are_checked() -> None:
    sim = Simulation(seed=1, faults=[CrashAmong("/front", "queue", at_step=0)])
    sim.spawn(lambda: Recorder([]), name="front")
    sim.run()
    [applied] = fault_events(sim)
    assert applied.outcome == "no live actor named queue under /front"
    with pytest.raises(ValueError, match="name must be an actor's own name"):
        CrashAmong("/front", "a/b", at_step=1)
    with pytest.raises(ValueError, match="pick must be an int >= 0"):
        CrashAmong("/front", "queue", at_step=1, pick=-1)


def test_pause_freezes_the_process_while_the_clock_and_others_go_on() -> None:
    paused_log: list[tuple[float, Any]] = []
    free_log: list[tuple[float, Any]] = []

    class Ticker(Recorder):
        def on_start(self) -> None:
            super().on_start()
            self.ctx.schedule(1.0, Tick())
            self.ctx.schedule(4.0, Tick())

    sim = Simulation(seed=2, faults=[Pause("/app", at_time=0.5, duration_s=2.5)])
    sim.spawn(lambda: Ticker(paused_log), name="app")
    sim.spawn(lambda: Ticker(free_log), name="broker")
    sim.run()
    # The broker's tick at 1.0 comes on time; the app's arrives when the pause ends at 3.0.
    assert [time for time, entry in free_log if isinstance(entry, Tick)] == [1.0, 4.0]
    assert [time for time, entry in paused_log if isinstance(entry, Tick)] == [3.0, 4.0]
    [applied] = fault_events(sim)
    assert applied.outcome == "/app frozen until 3"


def test_pause_covers_children_but_not_a_sibling_with_a_longer_name() -> None:
    child_log: list[tuple[float, Any]] = []
    sibling_log: list[tuple[float, Any]] = []

    class Parent(Actor):
        def on_start(self) -> None:
            self.ctx.spawn(lambda: Recorder(child_log), name="child")

        def receive(self, message: Any) -> None:
            pass

    sim = Simulation(seed=3, faults=[Pause("/sub", at_time=0.0, duration_s=5.0)])
    sim.spawn(Parent, name="sub")
    sim.spawn(lambda: Recorder(sibling_log), name="sub-2")
    sim.run()
    assert sibling_log == [(0.0, "started")]
    assert child_log == [(5.0, "started")]


def test_delay_keeps_the_channel_in_order_but_lets_later_senders_overtake() -> None:
    log: list[tuple[float, Any]] = []
    sim = Simulation(seed=4, strategy=RoundRobin(), faults=[Delay("/early", "/sink", at_step=0, duration_s=2.0)])
    sink = sim.spawn(lambda: Recorder(log), name="sink")
    sim.spawn(lambda: Sender(sink, ("a1", "a2", "a3")), name="early")
    sim.run(max_steps=2)  # sink and early start; early sends into the held channel
    sim.spawn(lambda: Sender(sink, ("b1",)), name="late")
    sim.run()
    received = [entry for _, entry in log if isinstance(entry, str) and entry != "started"]
    assert received == ["b1", "a1", "a2", "a3"]
    assert [time for time, entry in log if entry == "a1"] == [2.0]


def test_fail_job_makes_exactly_the_nth_job_fail() -> None:
    log: list[tuple[float, Any]] = []

    class Jobs(Recorder):
        def on_start(self) -> None:
            for index in range(3):
                self.ctx.run_job(lambda i=index: i * 10)

    sim = Simulation(seed=5, faults=[FailJob("/jobs", nth=2)])
    sim.spawn(lambda: Jobs(log), name="jobs")
    sim.run()
    finished = [entry for _, entry in log if isinstance(entry, (JobDone, JobFailed))]
    outcomes = sorted((entry.job_id, type(entry).__name__) for entry in finished)
    assert outcomes == [(1, "JobDone"), (2, "JobFailed"), (3, "JobDone")]
    failed = next(entry for _, entry in log if isinstance(entry, JobFailed))
    assert isinstance(failed.error, InjectedFault)


def test_fail_write_fails_exactly_the_nth_journal_write_and_the_actor_recovers_the_rest() -> None:
    from tests.runtime.actors import Get, counted_under_faults

    sim, counter = counted_under_faults([FailWrite("/counter", nth=3)], increments=5, seed=2)
    assert [f.outcome for f in sim.faults_applied] == ["write 3 to the journal of /counter fails"]
    failed = [e for e in sim.trace if e.kind is EventKind.FAILED]
    assert len(failed) == 1 and "injected disk error" in (failed[0].error or "")
    # The third Inc died with its handler and its write; the restart recovered the two before it.
    assert sim.ask(counter, Get()) == (4, 2)
    assert len(sim.journals["/counter"]) == 4


def test_never_acks_drops_only_that_senders_acks() -> None:
    log: list[tuple[float, Any]] = []
    sim = Simulation(seed=6, faults=[never_acks("/client")])
    sink = sim.spawn(lambda: Recorder(log), name="sink")
    sim.spawn(lambda: Sender(sink, (Ack(1), "hello", Ack(2))), name="client")
    sim.spawn(lambda: Sender(sink, (Ack(3),)), name="other")
    sim.run()
    received = [entry for _, entry in log if entry != "started"]
    assert sorted(map(repr, received)) == sorted(map(repr, ["hello", Ack(3)]))
    assert [applied.fault for applied in fault_events(sim)] == [Drop("/client", "Ack")] * 2


def test_faults_replay_identically() -> None:
    def run() -> str:
        sim = Simulation(
            seed=9, faults=[Crash("/counter", at_step=5), Pause("/counter", at_time=0.0, duration_s=1.0)]
        )
        counter = sim.spawn(lambda: Recorder([]), name="counter")
        sim.spawn(lambda: Sender(counter, tuple(Bump() for _ in range(10))), name="a")
        sim.spawn(lambda: Sender(counter, tuple(Bump() for _ in range(10))), name="b")
        sim.run()
        return sim.trace_hash()

    assert run() == run()


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: Crash("counter", 1), "path"),
        (lambda: Crash("/counter", -1), "at_step"),
        (lambda: Pause("/app", at_time=1.0, duration_s=0), "duration_s"),
        (lambda: Pause("/app", at_time=float("nan"), duration_s=1), "at_time"),
        (lambda: Delay("/a", "/b", at_step=0, duration_s=-1), "duration_s"),
        (lambda: FailJob("/a", nth=0), "nth"),
        (lambda: FailWrite("/a", nth=0), "nth"),
        (lambda: FailWrite("a", nth=1), "prefix"),
        (lambda: Drop("/a", "not a name"), "message_type"),
    ],
)
def test_bad_faults_name_the_field(make: Any, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        make()


def test_a_fault_plan_must_hold_faults() -> None:
    with pytest.raises(TypeError, match=r"faults\[1\]"):
        Simulation(faults=[Crash("/a", 1), "crash"])  # type: ignore[list-item]
