"""ThreadSystem specifics: plain threads may use it, timers share one thread, shutdown is clean."""

from __future__ import annotations

import gc
import os
import threading
import time
import weakref
from typing import Any

import attrs
import pytest

from conveyor.runtime import Actor, ActorRef, ConveyorError, JobDone, ThreadSystem
from tests.runtime.actors import Echo, Get, OrderChecker, Recorder, Seq


def test_plain_threads_tell_concurrently_and_each_keeps_its_order() -> None:
    with ThreadSystem() as system:
        checker = system.spawn(OrderChecker)

        def send(name: str) -> None:
            for n in range(2_000):
                checker.tell(Seq(name, n))

        threads = [threading.Thread(target=send, args=(f"thread-{i}",)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert system.wait_quiet(10)
        count, violations, _ = system.ask(checker, Get())
    assert (count, violations) == (8_000, 0)


class ManyTimers(Actor):
    def on_start(self) -> None:
        for n in range(200):
            self.ctx.schedule(0.001 * (n % 20), n)
        self.fired = 0

    def receive(self, message: Any) -> None:
        if isinstance(message, int):
            self.fired += 1
        else:
            self.ctx.reply(self.fired)


def test_timers_do_not_take_a_thread_each() -> None:
    with ThreadSystem() as system:
        threads_before = threading.active_count()
        actor = system.spawn(ManyTimers)
        system.wait_quiet(5)
        assert threading.active_count() <= threads_before + 1  # the actor's own thread only
        for _ in range(500):  # wait until every timer fired (at most 2.5 s)
            if system.ask(actor, Get()) == 200:
                break
            threading.Event().wait(0.005)
        assert system.ask(actor, Get()) == 200


def test_shutdown_joins_every_actor_thread_and_refuses_new_work() -> None:
    baseline = {t.ident for t in threading.enumerate()}
    system = ThreadSystem()
    refs = [system.spawn(Echo) for _ in range(10)]
    assert all(system.ask(ref, "hi") == "hi" for ref in refs)
    system.shutdown()
    leftover = [t for t in threading.enumerate() if t.ident not in baseline and t.is_alive()]
    # Pool threads of the job executor wind down by themselves; actor and timer threads are gone.
    assert not [t for t in leftover if "conveyor-job" not in t.name]
    with pytest.raises(ConveyorError, match="shut down"):
        system.spawn(Recorder)
    system.shutdown()  # idempotent


def test_ask_from_inside_an_actor_is_refused() -> None:
    class Asker(Actor):
        def receive(self, message: Any) -> None:
            try:
                system.ask(self.ctx.self_ref, "x")
            except ConveyorError as error:
                self.ctx.reply(str(error))

    with ThreadSystem() as system:
        asker = system.spawn(Asker)
        assert "inside an actor use ctx.send()" in system.ask(asker, "go")


def test_shutdown_with_jobs_still_queued_cancels_them_quietly(caplog: pytest.LogCaptureFixture) -> None:
    release = threading.Event()

    class Busy(Actor):
        def on_start(self) -> None:
            self.ctx.run_job(release.wait, 5.0)  # holds the only worker
            for _ in range(3):
                self.ctx.run_job(lambda: None)  # queued behind it, cancelled by shutdown

        def receive(self, message: Any) -> None:
            pass

    system = ThreadSystem(job_workers=1)
    system.spawn(Busy)
    system.wait_quiet(0.2)
    system.shutdown()  # cancels the queued jobs
    release.set()
    time.sleep(0.05)  # let the worker finish the held job (no assertion on time)
    assert not [record for record in caplog.records if "CancelledError" in (record.exc_text or record.getMessage())]


@attrs.frozen
class _Forwarded:
    question: object
    reply_to: ActorRef | None


@attrs.frozen
class _Answer:
    payload: bytes


def test_an_actor_that_forwards_asks_does_not_keep_their_answers() -> None:
    # The asked actor remembers its unanswered asks (up to 64); one that forwards every ask, as the
    # Pub/Sub registry does, kept each answer alive with them (a Pull's messages included).
    class Answerer(Actor):
        def receive(self, message: Any) -> None:
            self.ctx.send(message.reply_to, _Answer(b"x" * 1000))

    class Forwarder(Actor):
        def __init__(self, to: ActorRef) -> None:
            self.to = to

        def receive(self, message: Any) -> None:
            self.ctx.send(self.to, _Forwarded(message, self.ctx.sender))

    with ThreadSystem() as system:
        answerer = system.spawn(Answerer)
        forwarder = system.spawn(lambda: Forwarder(answerer))
        answers = [weakref.ref(system.ask(forwarder, n)) for n in range(3)]
        gc.collect()
        assert [answer() for answer in answers] == [None, None, None]


# --- ThreadSystem(cpu=...): the actor threads and the timer thread on one CPU --------------------------------------

PROCESS_CPUS = tuple(sorted(os.sched_getaffinity(0)))


@attrs.frozen
class WhereAmI:
    """Ask an ``Affinity`` actor for the CPUs its handler and a job it runs may use."""


class Affinity(Actor):
    """Answers ``WhereAmI`` with (its handler's CPUs, the CPUs of a job it ran)."""

    def receive(self, message: Any) -> Any:
        if isinstance(message, WhereAmI):
            self.asker = self.ctx.sender
            self.here = tuple(sorted(os.sched_getaffinity(0)))
            self.ctx.run_job(lambda: tuple(sorted(os.sched_getaffinity(0))))
        elif isinstance(message, JobDone):
            assert self.asker is not None
            self.ctx.send(self.asker, (self.here, message.result))


def timer_threads() -> set[int]:
    """The native ids of every ThreadSystem's timer thread alive now."""
    return {t.native_id or 0 for t in threading.enumerate() if t.name == "conveyor-timers"}


def where(system: ThreadSystem, timers_before: set[int]) -> tuple[tuple[int, ...], ...]:
    """(an actor's CPUs, its job's CPUs, the CPUs of the one timer thread started since ``timers_before``)."""
    (timer,) = timer_threads() - timers_before
    actor, job = system.ask(system.spawn(Affinity), WhereAmI())
    return actor, job, tuple(sorted(os.sched_getaffinity(timer)))


@pytest.mark.parametrize("cpu", PROCESS_CPUS)
def test_a_cpu_keeps_every_actor_thread_and_the_timer_thread_on_it_and_leaves_jobs_free(cpu: int) -> None:
    before = timer_threads()
    with ThreadSystem(cpu=cpu) as system:
        assert system.cpu == cpu
        assert where(system, before) == ((cpu,), PROCESS_CPUS, (cpu,))
        # an actor spawned later keeps to it too
        assert where(system, before)[0] == (cpu,)


def test_without_a_cpu_the_threads_go_where_the_process_may() -> None:
    before = timer_threads()
    with ThreadSystem() as system:
        assert system.cpu is None
        assert where(system, before) == (PROCESS_CPUS, PROCESS_CPUS, PROCESS_CPUS)


@pytest.mark.parametrize("cpu", [-1, max(PROCESS_CPUS) + 1, True, "0", 0.0])
def test_a_cpu_the_process_may_not_use_is_refused_before_a_thread_starts(cpu: object) -> None:
    before = threading.active_count()
    with pytest.raises(ValueError, match=rf"ThreadSystem\.cpu must be None or one of the CPUs this process may run "
                                         rf"on, \[{', '.join(map(str, PROCESS_CPUS))}\], got"):
        ThreadSystem(cpu=cpu)  # type: ignore[arg-type]
    assert threading.active_count() == before


@attrs.frozen
class MakeSystemOn:
    """Ask a ``SystemMaker`` to make a ThreadSystem on ``cpu`` from its own (pinned) thread and report where."""

    cpu: int


class SystemMaker(Actor):
    def receive(self, message: Any) -> Any:
        if isinstance(message, MakeSystemOn):
            before = timer_threads()
            with ThreadSystem(cpu=message.cpu) as inner:
                self.ctx.reply(where(inner, before))


@pytest.mark.skipif(len(PROCESS_CPUS) < 2, reason="needs two CPUs to pin one system's actors away from another's")
def test_a_system_made_on_a_pinned_thread_may_use_every_cpu_of_the_process() -> None:
    first, second = PROCESS_CPUS[0], PROCESS_CPUS[1]
    with ThreadSystem(cpu=first) as outer:
        maker = outer.spawn(SystemMaker)
        assert outer.ask(maker, MakeSystemOn(second), timeout=10) == ((second,), PROCESS_CPUS, (second,))
