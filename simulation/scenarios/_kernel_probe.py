"""A kernel probe after a broker run: asks answered twice or too late, and a child that escalates.

No actor of the broker, the subscriber or the front answers an ask twice, answers one after its
asker gave up, or escalates a failure to its parent, so the kernel's promises for those cases
(docs/architecture.md: dead letters, ask, supervision) were never exercised by the sweep. Once a
``broker-swarm`` run has gone quiet (and its final browse, if any, is done), the probe asks
``Answerer`` a question it answers twice (the second answer reaches a settled promise: a dead
letter), asks it one it answers only after the ask timed out (noted ``AskAbandoned``; the answer
is a dead letter too), and pokes the child of ``Foreman``, supervised with ``Directive.ESCALATE``
(declared in a note), so that the child stops and ``Foreman`` fails with ``EscalatedError`` and
is restarted. The kernel checkers ``ask_answers``, ``escalation`` and ``termination_cause`` judge
what the kernel did. Last, ``Warden`` lets its flaky child fail five times under a restart budget of
2 within 1/64 s (declared), at times chosen so that the window slides: a restart falls out of it
exactly at its edge, another just before, and ``supervision``'s budget watch judges each verdict
(every other budget of the sweep is spent within its first seconds, so the window never slid). The
probe's times are milliseconds, so the queues' own monitors, judged at their close, see the run they
saw before.
"""

from __future__ import annotations

import math
from typing import Any, final

import attrs

from conveyor.runtime import Actor, ActorRef, AskTimeout, Directive, EventKind, SupervisorStrategy
from conveyor.runtime.lowlevel import register_immutable_type
from conveyor.simulation import Simulation, seeded_random
from conveyor.simulation.checkers import AskAbandoned, EscalationCause, SupervisionDeclared, TimerCancelAnswered

from ._flaky import FLAKY, FlakyActor, Poke

ASK_TIMEOUT_S = 0.001
"""How long the probe's asks wait (virtual seconds)."""
LATE_S = 0.002
"""How long after the question ``Answerer`` answers a late one: past ``ASK_TIMEOUT_S``."""
TICK_S = 2.0**-8
"""The warden's unit of time: a power of two, so its times and their differences are exact floats."""


def restart_every_failure(error: Exception) -> Directive:
    """The warden's decider: restart its child, whatever it raised (the budget decides when it stops)."""
    return Directive.RESTART


WARDEN_BUDGET = SupervisorStrategy(Directive.RESTART, 2, 4 * TICK_S, decider=restart_every_failure)
"""The warden's children: restarted (a decider says so) 2 times within 4 ticks."""
WARDEN_POKES = (0, 2, 5, 6, 7)
"""When the warden pokes its child, in ticks: restarts at 0 and 2; at 5 the one at 0 has left the window
(one at 2 has not); at 6 the one at 2 sits exactly on its edge, so it has left too; at 7 two are in it: a stop."""


@final
@attrs.frozen
class KernelProbe:
    """What the probe does after the run.

    Attributes:
        twice: ask a question that is answered twice.
        late: ask a question that is answered after the ask timed out.
        escalate: poke a child supervised with ``Directive.ESCALATE``.
        window: poke a child five times under ``WARDEN_BUDGET``, its window sliding.
    """

    twice: bool = False
    late: bool = False
    escalate: bool = False
    window: bool = False


@final
@attrs.frozen
class Question:
    """Asks ``Answerer`` for ``answers`` answers, ``delay_s`` after it gets the question."""

    answers: int
    delay_s: float


@final
@attrs.frozen
class Answer:
    """One of ``Answerer``'s answers, numbered from 1."""

    number: int


@final
@attrs.frozen
class _AnswerDue:
    asker: ActorRef
    answers: int


register_immutable_type(Question)
register_immutable_type(Answer)
register_immutable_type(_AnswerDue)


@final
@attrs.frozen
class _WardenPokeDue:
    number: int


register_immutable_type(_WardenPokeDue)


@final
@attrs.frozen
class _Withdrawn:
    """The message of the timer ``Answerer`` cancels as soon as it armed it: it must never arrive."""


register_immutable_type(_Withdrawn)


@final
class Answerer(Actor):
    """Answers a ``Question`` as many times as it says, at once or after its delay.

    On start it arms a timer and cancels it at once, noting what the cancel answered.
    """

    def on_start(self) -> None:
        """Arm a timer, cancel it, note the answer."""
        handle = self.ctx.schedule(TICK_S, _Withdrawn())
        cancelled = self.ctx.cancel(handle)
        if self.ctx.tracing:
            self.ctx.note(TimerCancelAnswered(handle.timer_id, cancelled))

    def receive(self, message: Any) -> None:
        """Answer now, or arm a timer that answers later."""
        if type(message) is Question:
            asker = self.ctx.sender
            if asker is None:
                return
            if message.delay_s > 0:
                self.ctx.schedule(message.delay_s, _AnswerDue(asker, message.answers))
            else:
                self._answer(asker, message.answers)
        elif type(message) is _AnswerDue:
            self._answer(message.asker, message.answers)

    def _answer(self, asker: ActorRef, answers: int) -> None:
        for number in range(1, answers + 1):
            self.ctx.send(asker, Answer(number))


@final
class Foreman(Actor):
    """Supervises a ``FlakyActor`` child with ``Directive.ESCALATE`` and passes it every ``Poke``."""

    def __init__(self) -> None:
        self.child: ActorRef | None = None

    def on_start(self) -> None:
        """Declare the strategy, then spawn the child under it."""
        strategy = SupervisorStrategy(Directive.ESCALATE)
        self.supervisor_strategy = strategy  # type: ignore[misc]  # this instance's children only
        if self.ctx.tracing:
            self.ctx.note(SupervisionDeclared(strategy.directive.value, strategy.max_restarts, strategy.within_s))
        self.child = self.ctx.spawn(FlakyActor, name=FLAKY)

    def on_restart(self, error: Exception) -> None:
        """Note what the ``EscalatedError`` says caused it (the child's error), then start again."""
        if self.ctx.tracing:
            cause = error.__cause__
            self.ctx.note(EscalationCause(None if cause is None else repr(cause)))
        self.on_start()

    def receive(self, message: Any) -> None:
        """Pass a poke on to the child."""
        if type(message) is Poke and self.child is not None:
            self.ctx.send(self.child, message)


@final
class Warden(Actor):
    """Supervises a ``FlakyActor`` child under ``WARDEN_BUDGET`` and pokes it at ``WARDEN_POKES``."""

    def __init__(self) -> None:
        self.child: ActorRef | None = None

    def on_start(self) -> None:
        """Declare the budget, spawn the child, arm one timer per poke."""
        self.supervisor_strategy = WARDEN_BUDGET  # type: ignore[misc]  # this instance's children only
        if self.ctx.tracing:
            self.ctx.note(SupervisionDeclared(WARDEN_BUDGET.directive.value, WARDEN_BUDGET.max_restarts,
                                              WARDEN_BUDGET.within_s))
        self.child = self.ctx.spawn(FlakyActor, name=FLAKY)
        for number, ticks in enumerate(WARDEN_POKES, start=1):
            self.ctx.schedule(ticks * TICK_S, _WardenPokeDue(number))

    def receive(self, message: Any) -> None:
        """Poke the child when a timer fires."""
        if type(message) is _WardenPokeDue and self.child is not None:
            self.ctx.send(self.child, Poke(message.number))


def draw_kernel_probe(seed: int) -> KernelProbe | None:
    """The probe ``broker-swarm`` runs for ``seed`` (half the seeds; each part in 70% of those), or None.

    Drawn from a generator of its own, so every other draw of the seed keeps its value.
    """
    rng = seeded_random(f"scenario:broker-swarm:{seed}:kernel")
    if rng.random() >= 0.5:
        return None
    probe = KernelProbe(twice=rng.random() < 0.7, late=rng.random() < 0.7, escalate=rng.random() < 0.7,
                        window=rng.random() < 0.7)
    return probe if probe != KernelProbe() else KernelProbe(twice=True, late=True, escalate=True, window=True)


def probe_words(probe: KernelProbe) -> str:
    """The probe as the swarm's draws say it."""
    parts = [name for name, on in (("twice", probe.twice), ("late", probe.late), ("escalate", probe.escalate),
                                   ("window", probe.window)) if on]
    return f"kernel_probe={'+'.join(parts)}"


def _promise_of(sim: Simulation, question: Question) -> str | None:
    """The path of the promise that sent ``question`` (the newest send of that very object)."""
    for event in reversed(sim.trace):
        if event.kind is EventKind.SENT and event.message is question and event.sender is not None:
            return event.sender
    return None


def probe_kernel(sim: Simulation, probe: KernelProbe, max_steps: int) -> None:
    """Run ``probe`` in ``sim``: a run gone quiet, before its shutdown."""
    answerer = sim.spawn(Answerer, name="answerer")
    if probe.twice:
        sim.ask(answerer, Question(2, 0.0), timeout=ASK_TIMEOUT_S, max_steps=max_steps)
    if probe.late:
        question = Question(1, LATE_S)
        try:
            sim.ask(answerer, question, timeout=ASK_TIMEOUT_S, max_steps=max_steps)
        except AskTimeout:
            path = _promise_of(sim, question)
            tracer = sim.tracer
            if tracer is not None and path is not None:
                tracer.record(EventKind.NOTE, sim.now(), None, None, AskAbandoned(path))
    if probe.escalate:
        foreman = sim.spawn(Foreman, name="foreman")
        sim.run(max_steps=max_steps)
        foreman.tell(Poke(1))
    sim.run(max_steps=max_steps)
    if probe.window:  # from a time on the tick grid, so every poke falls exactly where WARDEN_POKES says
        sim.run(until=(math.floor(sim.now() / TICK_S) + 1) * TICK_S, max_steps=max_steps)
        sim.spawn(Warden, name="warden")
        sim.run(max_steps=max_steps)
