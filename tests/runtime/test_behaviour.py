"""The kernel's behaviour, asserted identically on trio, threads and the simulator."""

from __future__ import annotations

import logging
from typing import Any

import attrs
import pytest

from conveyor.runtime import (
    Actor,
    ActorDeadError,
    ActorNameTaken,
    AskTimeout,
    ConveyorError,
    Directive,
    EventKind,
    MutableMessageError,
    SupervisorStrategy,
    Terminated,
    TimerHandle,
)
from tests.conftest import Harness, make_harness
from tests.runtime.actors import (
    Boom,
    Echo,
    Get,
    Go,
    Inc,
    JobRunner,
    Journal,
    OrderChecker,
    Parent,
    Pinger,
    Ponger,
    Quitter,
    Recorder,
    SeqSender,
    Silent,
    UnwatchIt,
    Watcher,
    WatchIt,
    fragile,
)


async def test_ping_pong(backend: Harness) -> None:
    pinger = backend.spawn(Pinger)
    ponger = backend.spawn(Ponger)
    pinger.tell(Go(ponger, 500))
    await backend.quiet()
    assert await backend.ask(pinger, Get()) == tuple(range(500))


async def test_order_per_sender_receiver_pair_over_10000_messages(backend: Harness) -> None:
    checker = backend.spawn(OrderChecker)
    senders = [backend.spawn(SeqSender, name=f"sender-{i}") for i in range(3)]
    for sender in senders:
        sender.tell(Go(checker, 10_000))
    await backend.quiet()
    count, violations, last = await backend.ask(checker, Get())
    assert violations == 0
    assert count == 30_000
    assert last == tuple((f"sender-{i}", 9_999) for i in range(3))


async def test_outside_tells_arrive_in_order(backend: Harness) -> None:
    recorder = backend.spawn(Recorder)
    for n in range(1_000):
        recorder.tell(n)
    await backend.quiet()
    assert await backend.ask(recorder, Get()) == tuple(range(1_000))


@attrs.frozen
class Arm:
    pass


class TimerUser(Actor):
    """Arms three timers and cancels one; records the order they fire in and cancel results."""

    def __init__(self) -> None:
        self.fired: list[str] = []
        self.cancels: list[bool] = []
        self.handle: TimerHandle | None = None
        self.senders: list[object] = []

    def receive(self, message: Any) -> None:
        match message:
            case Arm():
                self.ctx.schedule(0.04, "late")
                cancelled = self.ctx.schedule(0.06, "cancelled")
                self.handle = self.ctx.schedule(0.02, "early")
                self.cancels.append(self.ctx.cancel(cancelled))
                self.cancels.append(self.ctx.cancel(cancelled))
            case str():
                self.fired.append(message)
                self.senders.append(self.ctx.sender)
                if message == "late" and self.handle is not None:
                    self.cancels.append(self.ctx.cancel(self.handle))  # already fired
            case Get():
                self.ctx.reply((tuple(self.fired), tuple(self.cancels), tuple(self.senders)))


async def test_timers_fire_in_deadline_order_and_cancel_works(backend: Harness) -> None:
    actor = backend.spawn(TimerUser)
    actor.tell(Arm())
    await backend.quiet()
    await backend.elapse(0.15)
    fired, cancels, senders = await backend.ask(actor, Get())
    assert fired == ("early", "late")
    assert cancels == (True, False, False)
    assert senders == (None, None)


async def test_ask_times_out_when_no_reply_comes(backend: Harness) -> None:
    silent = backend.spawn(Silent)
    with pytest.raises(AskTimeout, match="no reply from"):
        await backend.ask(silent, "hello?", timeout=0.05)
    # The system stays usable after a timeout.
    echo = backend.spawn(Echo)
    assert await backend.ask(echo, "still here") == "still here"


async def test_dead_actor_fails_fast(backend: Harness) -> None:
    echo = backend.spawn(Echo)
    backend.system.stop(echo)
    await backend.quiet()
    assert not echo.is_alive
    with pytest.raises(ActorDeadError, match="has stopped"):
        echo.tell("anyone?")
    with pytest.raises(ActorDeadError, match="has stopped"):
        await backend.ask(echo, "anyone?")


async def test_ask_fails_fast_when_the_actor_stops_without_answering(backend: Harness) -> None:
    quitter = backend.spawn(Quitter)
    with pytest.raises(ActorDeadError, match="without answering"):
        await backend.ask(quitter, "question", timeout=30)


async def test_ask_reraises_the_actors_exception(backend: Harness) -> None:
    journal = Journal()
    actor = backend.spawn(fragile(journal))
    with pytest.raises(ValueError, match="boom"):
        await backend.ask(actor, Boom(), timeout=30)


async def test_restart_gives_a_fresh_instance_and_keeps_the_mailbox(backend: Harness) -> None:
    journal = Journal()
    actor = backend.spawn(fragile(journal))
    for _ in range(3):
        actor.tell(Inc())
    await backend.quiet()  # an ask travels its own channel: only quiet orders it after the tells
    assert await backend.ask(actor, Get()) == 3
    actor.tell(Boom())
    actor.tell(Inc())
    actor.tell(Inc())
    await backend.quiet()
    assert await backend.ask(actor, Get()) == 2  # the mailbox survived the restart, in order
    assert journal.snapshot() == ["start", "restart:ValueError"]
    assert actor.is_alive


async def test_failures_are_logged_with_actor_and_message_type(
    backend: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    journal = Journal()
    actor = backend.spawn(fragile(journal), name="fragile")
    with caplog.at_level(logging.ERROR, logger="conveyor.runtime"):
        actor.tell(Boom())
        await backend.quiet()
    failures = [r for r in caplog.records if "failed handling" in r.getMessage()]
    assert len(failures) == 1
    assert "/fragile" in failures[0].getMessage()
    assert "Boom" in failures[0].getMessage()
    assert failures[0].exc_info is not None


async def test_restart_limit_stops_the_actor(backend_kind: str) -> None:
    strategy = SupervisorStrategy(Directive.RESTART, max_restarts=2, within_s=60)
    async for backend in make_harness(backend_kind, strategy=strategy):
        journal = Journal()
        actor = backend.spawn(fragile(journal))
        watcher = backend.spawn(Watcher)
        assert await backend.ask(watcher, WatchIt(actor)) == "watching"
        for _ in range(3):
            actor.tell(Boom())
        await backend.quiet()
        notices = await backend.ask(watcher, Get())
        assert not actor.is_alive
        assert journal.snapshot() == ["start", "restart:ValueError", "restart:ValueError", "stop"]
        assert len(notices) == 1
        assert notices[0].ref == actor
        assert notices[0].reason == "failed"
        assert "ValueError('boom')" in notices[0].error


async def test_stop_directive_and_decider(backend_kind: str) -> None:
    def decide(error: Exception) -> Directive:
        return Directive.STOP if isinstance(error, KeyError) else Directive.RESTART

    async for backend in make_harness(backend_kind, strategy=SupervisorStrategy(decider=decide)):
        journal = Journal()
        actor = backend.spawn(fragile(journal))
        actor.tell(Boom("value"))  # restarted
        actor.tell(Boom("key"))  # stopped
        await backend.quiet()
        assert not actor.is_alive
        assert journal.snapshot() == ["start", "restart:ValueError", "stop"]


async def test_escalate_fails_the_parent_which_its_supervisor_restarts(backend: Harness) -> None:
    journal = Journal()
    escalate = SupervisorStrategy(Directive.ESCALATE)
    parent = backend.spawn(lambda: Parent(journal, escalate), name="parent")
    parent.tell(Inc())
    await backend.quiet()
    count, first_child = await backend.ask(parent, Get())
    assert count == 1
    assert first_child.path == "/parent/child"
    parent.tell(Boom())
    await backend.quiet()
    count, second_child = await backend.ask(parent, Get())
    assert count == 0  # the parent is a fresh instance
    assert not first_child.is_alive
    assert second_child.is_alive and second_child != first_child
    assert second_child.path == "/parent/child"
    entries = journal.snapshot()
    assert entries.count("parent-start") == 2
    assert "restart:ValueError" not in entries  # the child was not restarted: it escalated


async def test_escalation_to_the_top_is_recorded_and_stops_the_actor(backend_kind: str) -> None:
    async for backend in make_harness(backend_kind, strategy=SupervisorStrategy(Directive.ESCALATE)):
        journal = Journal()
        actor = backend.spawn(fragile(journal), name="top")
        actor.tell(Boom())
        await backend.quiet()
        assert not actor.is_alive
        assert [(path, type(error)) for path, error in backend.system.failures] == [("/top", ValueError)]


async def test_watch_delivers_terminated_and_unwatch_stops_it(backend: Harness) -> None:
    watcher = backend.spawn(Watcher)
    watched = backend.spawn(Echo, name="watched")
    unwatched = backend.spawn(Echo, name="unwatched")
    assert await backend.ask(watcher, WatchIt(watched)) == "watching"
    assert await backend.ask(watcher, WatchIt(unwatched)) == "watching"
    assert await backend.ask(watcher, UnwatchIt(unwatched)) == "unwatched"
    backend.system.stop(watched)
    backend.system.stop(unwatched)
    await backend.quiet()
    assert await backend.ask(watcher, Get()) == (Terminated(watched, "stopped"),)


async def test_watching_a_dead_actor_delivers_terminated_at_once(backend: Harness) -> None:
    watcher = backend.spawn(Watcher)
    gone = backend.spawn(Echo)
    backend.system.stop(gone)
    await backend.quiet()
    assert await backend.ask(watcher, WatchIt(gone)) == "watching"
    await backend.quiet()
    assert await backend.ask(watcher, Get()) == (Terminated(gone, "stopped"),)


@attrs.define
class MutableThing:
    x: int


@attrs.frozen
class Wrapper:
    items: Any


@pytest.mark.parametrize(
    ("message", "named"),
    [
        ([1, 2], "list"),
        ({"a": 1}, "dict"),
        ({1}, "set"),
        (bytearray(b"x"), "bytearray"),
        (MutableThing(1), "MutableThing"),
        (Wrapper([1]), "message.items is a builtins.list"),
        ((1, (2, [3])), r"message\[1\]\[1\] is a builtins.list"),
    ],
)
async def test_mutable_messages_are_refused_at_the_send(backend: Harness, message: object, named: str) -> None:
    recorder = backend.spawn(Recorder)
    with pytest.raises(MutableMessageError, match=named):
        recorder.tell(message)
    with pytest.raises(TypeError, match=named):
        await backend.ask(recorder, message)
    await backend.quiet()
    assert await backend.ask(recorder, Get()) == ()


@attrs.frozen
class SendTo:
    target: Any
    payload_kind: str


class Relay(Actor):
    """Tries to send a mutable payload and replies with the error it got."""

    def receive(self, message: Any) -> None:
        if isinstance(message, SendTo):
            payload: object = [1] if message.payload_kind == "list" else {"k": 1}
            try:
                self.ctx.send(message.target, payload)
            except TypeError as error:
                self.ctx.reply(f"send refused: {error}")
                return
            self.ctx.reply("sent")
        elif message == "schedule":
            try:
                self.ctx.schedule(0.01, [1])
            except TypeError as error:
                self.ctx.reply(f"schedule refused: {error}")


async def test_mutable_messages_are_refused_inside_actors(backend: Harness) -> None:
    recorder = backend.spawn(Recorder)
    relay = backend.spawn(Relay)
    answer = await backend.ask(relay, SendTo(recorder, "dict"))
    assert answer.startswith("send refused") and "builtins.dict" in answer
    answer = await backend.ask(relay, "schedule")
    assert answer.startswith("schedule refused") and "builtins.list" in answer
    await backend.quiet()
    assert await backend.ask(recorder, Get()) == ()


def _square(n: int) -> int:
    if n < 0:
        raise ValueError(f"negative: {n}")
    return n * n


async def test_run_job_delivers_done_and_failed(backend: Harness) -> None:
    runner = backend.spawn(lambda: JobRunner(_square))
    from tests.runtime.actors import Ping

    runner.tell(Ping(3))
    runner.tell(Ping(-1))
    await backend.wait_until(lambda: len(backend.system.trace) > 0 and _jobs_done(backend) == 2)
    await backend.quiet()
    outcomes = sorted(await backend.ask(runner, Get()))
    assert outcomes == [("done", 1, 9), ("failed", 2, "ValueError('negative: -1')")]


def _jobs_done(backend: Harness) -> int:
    return sum(1 for event in backend.system.trace if event.kind is EventKind.JOB_DONE)


async def test_shutdown_with_messages_still_queued(backend: Harness) -> None:
    journal = Journal()

    class Counting(Actor):
        def receive(self, message: Any) -> None:
            journal.add("handled")

        def on_stop(self) -> None:
            journal.add("on_stop")

    actor = backend.spawn(Counting)
    for n in range(1_000):
        actor.tell(n)
    await backend.shutdown()
    handled = journal.count("handled")
    assert journal.count("on_stop") == 1
    assert handled + backend.system.dead_letters == 1_000
    assert not actor.is_alive
    with pytest.raises(ActorDeadError):
        actor.tell("late")


async def test_spawn_names_are_unique_among_live_siblings(backend: Harness) -> None:
    first = backend.spawn(Echo, name="echo")
    with pytest.raises(ActorNameTaken, match="'echo' already runs"):
        backend.spawn(Echo, name="echo")
    backend.system.stop(first)
    await backend.quiet()
    again = backend.spawn(Echo, name="echo")
    assert again.path == "/echo" and again != first
    with pytest.raises(ValueError, match="name must be"):
        backend.spawn(Echo, name="bad name/with slash")


async def test_reply_without_sender_is_an_error(backend: Harness) -> None:
    class Replier(Actor):
        def receive(self, message: Any) -> None:
            if message == "from-outside":
                try:
                    self.ctx.reply("x")
                except ConveyorError as error:
                    self.ctx.send(recorder, str(error))

    recorder = backend.spawn(Recorder)
    replier = backend.spawn(Replier)
    replier.tell("from-outside")
    await backend.quiet()
    (seen,) = await backend.ask(recorder, Get())
    assert "has no sender" in seen


async def test_trace_records_sent_and_delivered_in_pair_order(backend: Harness) -> None:
    recorder = backend.spawn(Recorder, name="rec")
    for n in range(20):
        recorder.tell(n)
    await backend.quiet()
    to_recorder = [e for e in backend.trace if e.receiver == "/rec" and isinstance(e.message, int)]
    delivered = [e.message for e in to_recorder if e.kind is EventKind.DELIVERED]
    sent = [e.message for e in to_recorder if e.kind is EventKind.SENT]
    assert delivered == list(range(20))
    assert sent == list(range(20))
    assert all(e.sender is None for e in to_recorder)


class StartAware(Actor):
    def __init__(self) -> None:
        self.started = False

    def on_start(self) -> None:
        self.started = True

    def receive(self, message: Any) -> None:
        self.ctx.reply(self.started)


async def test_on_start_runs_before_any_message_from_any_sender(backend: Harness) -> None:
    for _ in range(20):
        actor = backend.spawn(StartAware)
        assert await backend.ask(actor, "started?") is True


def test_on_start_precedes_messages_in_every_simulated_interleaving() -> None:
    from conveyor.simulation import Simulation

    for seed in range(100):
        sim = Simulation(seed=seed)
        actor = sim.spawn(StartAware)
        assert sim.ask(actor, "started?") is True, f"seed {seed}"


class Nursery(Actor):
    """Spawns a child on start; stops it (or a stranger) on request."""

    def __init__(self) -> None:
        self.child: Any = None

    def on_start(self) -> None:
        self.child = self.ctx.spawn(Echo, name="kid")

    def receive(self, message: Any) -> None:
        if message == "stop-child":
            self.ctx.stop(self.child)
            self.ctx.reply(self.child)
        elif isinstance(message, tuple):
            try:
                self.ctx.stop(message[1])
            except ConveyorError as error:
                self.ctx.reply(str(error))


async def test_an_actor_stops_its_child_but_not_a_stranger(backend: Harness) -> None:
    parent = backend.spawn(Nursery, name="nursery")
    stranger = backend.spawn(Echo, name="stranger")
    child = await backend.ask(parent, "stop-child")
    await backend.quiet()
    assert not child.is_alive and parent.is_alive
    answer = await backend.ask(parent, ("stop", stranger))
    assert "can stop itself or its children, not /stranger" in answer
    assert stranger.is_alive


def _tell_back(system: Any, ref: Any, payload: int) -> int:
    system.tell_from_thread(ref, ("from a job", payload))
    return payload


class JobTeller(Actor):
    """Starts a job that tells this actor from the job's own thread; answers Get with what came."""

    def __init__(self) -> None:
        self.got: list[object] = []

    def receive(self, message: Any) -> None:
        if message == "go":
            self.ctx.run_job(_tell_back, self.ctx._cell.system, self.ctx.self_ref, 7)
        elif isinstance(message, tuple):
            self.got.append(message)
        elif isinstance(message, Get):
            self.ctx.reply(tuple(self.got))


async def test_tell_from_thread_reaches_the_actor_from_a_job(backend: Harness) -> None:
    actor = backend.spawn(JobTeller)
    actor.tell("go")
    await backend.wait_until(lambda: any(e.message == ("from a job", 7) for e in backend.trace))
    await backend.quiet()
    assert await backend.ask(actor, Get()) == (("from a job", 7),)
    with pytest.raises(MutableMessageError):
        backend.system.tell_from_thread(actor, [1])


class TellsBack(Actor):
    """Answers by telling the sender's ref directly instead of ctx.reply."""

    def receive(self, message: Any) -> None:
        sender = self.ctx.sender
        if sender is not None:
            sender.tell(("told", message))


async def test_an_asker_can_be_answered_by_telling_its_ref(backend: Harness) -> None:
    actor = backend.spawn(TellsBack)
    assert await backend.ask(actor, 5) == ("told", 5)


class GiverUp(Actor):
    """Gives up when told to: stops for good, as failed, naming why."""

    def receive(self, message: Any) -> None:
        if message == "give up":
            self.ctx.give_up(LookupError("its source is gone"))
        elif message == "give up badly":
            self.ctx.give_up("not an exception")  # type: ignore[arg-type]


async def test_give_up_stops_the_actor_as_failed_without_a_restart(backend: Harness) -> None:
    watcher = backend.spawn(Watcher)
    quitter = backend.spawn(GiverUp, name="giver-up")
    assert quitter.termination is None
    assert await backend.ask(watcher, WatchIt(quitter)) == "watching"
    quitter.tell("give up")
    await backend.quiet()
    assert not quitter.is_alive
    expected = Terminated(quitter, "failed", "LookupError('its source is gone')")
    assert quitter.termination == expected
    assert await backend.ask(watcher, Get()) == (expected,)
    assert backend.system.failures == [], "giving up is not an escalation"


async def test_give_up_wants_an_exception(backend: Harness, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.CRITICAL, logger="conveyor")
    quitter = backend.spawn(GiverUp)
    quitter.tell("give up badly")  # the TypeError is the handler's failure: supervision restarts it
    await backend.quiet()
    assert quitter.is_alive and quitter.termination is None
