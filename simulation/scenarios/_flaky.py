"""A flaky actor beside a scenario's broker: it raises on every poke, so the kernel's restart budget is spent.

No actor of the broker, the subscriber or the front fails over and over in a healthy run, so the
supervisor's budget (``SupervisorStrategy.max_restarts`` within ``within_s``) was never reached by
the sweep. ``Poker`` pokes ``FlakyActor`` at the times the scenario drew; each poke fails it, the
default strategy restarts it three times within a minute and stops it at the fourth failure, and
the kernel checker ``supervision`` judges every verdict against that budget. A ``Poker`` given no
flaky actor spawns one as its child under ``Directive.STOP`` (declared in a note), which stops it
at its first failure; the strategy says so through a decider, so that a decider's answer is what the
kernel follows (no other actor of the sweep has one).
"""

from __future__ import annotations

from typing import Any, final

import attrs

from conveyor.runtime import Actor, ActorRef, Directive, SupervisorStrategy
from conveyor.runtime.lowlevel import register_immutable_type
from conveyor.simulation.checkers import SupervisionDeclared

FLAKY = "flaky"
"""The flaky actor's name (a top-level actor: the system's default strategy supervises it)."""


class FlakyFailure(Exception):
    """What ``FlakyActor`` raises on a poke: a bug in an actor, as supervision sees one."""


@final
@attrs.frozen
class Poke:
    """Makes ``FlakyActor`` raise; ``number`` counts the pokes from 1."""

    number: int


@final
@attrs.frozen
class _PokeDue:
    index: int


register_immutable_type(Poke)
register_immutable_type(_PokeDue)


def stop_every_failure(error: Exception) -> Directive:
    """The poker's decider: stop its flaky child, whatever it raised."""
    return Directive.STOP


@final
class FlakyActor(Actor):
    """Fails on every ``Poke``; ignores everything else."""

    def receive(self, message: Any) -> None:
        """Raise on a poke."""
        if type(message) is Poke:
            msg = f"flaky actor poked ({message.number})"
            raise FlakyFailure(msg)


@final
class Poker(Actor):
    """Pokes ``flaky`` at each of ``times`` (seconds after it starts); None: its own child, stopped at a failure."""

    def __init__(self, flaky: ActorRef | None, times: tuple[float, ...]) -> None:
        self.flaky = flaky
        self.times = times

    def on_start(self) -> None:
        """Spawn the flaky child if there is none yet, and arm one timer per poke."""
        if self.flaky is None:
            strategy = SupervisorStrategy(decider=stop_every_failure)
            self.supervisor_strategy = strategy  # type: ignore[misc]  # this instance's children only
            if self.ctx.tracing:
                self.ctx.note(SupervisionDeclared(Directive.STOP.value, strategy.max_restarts, strategy.within_s))
            self.flaky = self.ctx.spawn(FlakyActor, name=FLAKY)
        for index, at in enumerate(self.times):
            self.ctx.schedule(at, _PokeDue(index))

    def receive(self, message: Any) -> None:
        """Poke when a timer fires."""
        if type(message) is _PokeDue and self.flaky is not None:
            self.ctx.send(self.flaky, Poke(message.index + 1))
