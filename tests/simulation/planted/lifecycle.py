"""Planted bugs in the kernel's actor lifecycle: a ``Simulation`` whose cells break one rule of supervision,
``Start``, retries or timers (docs/architecture.md), plugged through ``Variant(simulation=...)``.

The cell is the one home of lifecycle in every backend; these variants subclass the simulator's own
cell (``Simulation.cell_type``) and override one method, and the ``supervision`` and ``timers``
checkers judge the raw trace.
"""

from __future__ import annotations

from typing import Any

from conveyor.runtime import EventKind, TimerHandle
from conveyor.runtime.lowlevel import CellBase, PromiseCell
from conveyor.simulation import Simulation

_KERNEL_MESSAGES = frozenset({"Start", "Stop", "Watch", "Unwatch", "ChildTerminated", "Escalate", "TimerFired",
                              "Terminated"})
"""The kernel's own messages (not public): matched by name."""

_SimCell: Any = Simulation.cell_type
"""The simulator's cell (it keeps each actor's outgoing channels): the broken cells subclass it."""


class _WithCell(Simulation):  # type: ignore[misc]
    """A Simulation whose actors live in a broken subclass of its cell."""

    def _outgoing_of_asker(self, sender: CellBase) -> Any:
        # The simulator tells its own cells by exact type; a subclass's channels are kept the same way.
        outgoing = getattr(sender, "outgoing", None)
        return outgoing if outgoing is not None else Simulation._outgoing_of_asker(self, sender)


def _simulation_with(cell: type) -> type[Simulation]:
    return type(f"{cell.__name__}Simulation", (_WithCell,), {"cell_type": cell})


class ResumingCell(_SimCell):  # type: ignore[misc]
    """Broken: a failed actor carries on with the instance that failed (resumed), whatever its supervisor said."""

    def _failed(self, error: Exception, sender: CellBase | None, message: object) -> None:
        tracer = self.system.tracer
        if tracer is not None:
            tracer.record(EventKind.FAILED, self.system.now(), sender, self, message, error=repr(error))
        if isinstance(sender, PromiseCell):
            sender.fail(error)


class OrphaningCell(_SimCell):  # type: ignore[misc]
    """Broken: a restart forgets the actor's children instead of stopping them (they run on beside the new ones)."""

    def restart(self, error: Exception, again: object = None) -> None:
        self.children.clear()
        super().restart(error, again)


class MailboxLosingCell(_SimCell):  # type: ignore[misc]
    """Broken: a restart throws away the messages waiting for the actor."""

    def restart(self, error: Exception, again: object = None) -> None:
        super().restart(error, again)
        self.system.lose_mail(self)


class ForgetsRetry(_SimCell):  # type: ignore[misc]
    """Broken: the failed message ``retry_failed`` asked to hand the fresh instance is never handed to it."""

    def _retry(self, sender: CellBase | None, message: object) -> None:
        return


class RetriesTwice(_SimCell):  # type: ignore[misc]
    """Broken: the failed message ``retry_failed`` asked for is handed to the fresh instance twice."""

    def _retry(self, sender: CellBase | None, message: object) -> None:
        super()._retry(sender, message)
        if self.alive:
            super()._retry(sender, message)


class NoEarlyBuffer(_SimCell):  # type: ignore[misc]
    """Broken: a message that overtakes ``Start`` is handled at once, before ``on_start``, not held until it ran."""

    early: list[tuple[CellBase | None, object]] | None

    def process(self, sender: CellBase | None, message: object) -> None:
        early = self.early
        if early is None or not self.alive or type(message).__name__ in _KERNEL_MESSAGES:
            super().process(sender, message)
            return
        self.early = None  # as if started: the message goes straight to ``receive``
        try:
            super().process(sender, message)
        finally:
            if self.alive:
                self.early = early


class KeepsTimers(_SimCell):  # type: ignore[misc]
    """Broken: a restart leaves the old instance's timers armed (only a stop cancels them)."""

    def _cancel_all_timers(self) -> None:
        if not self.alive:
            super()._cancel_all_timers()


class EndlessBudgetCell(_SimCell):  # type: ignore[misc]
    """Broken: the restart budget is never spent: a failing actor is restarted for ever, never stopped."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.budget = _EndlessBudget()


class _EndlessBudget:
    def try_spend(self, now: float, strategy: object) -> bool:
        return True


Resuming = _simulation_with(ResumingCell)
Orphaning = _simulation_with(OrphaningCell)
ForgetfulRetry = _simulation_with(ForgetsRetry)
TwiceRetried = _simulation_with(RetriesTwice)
StartOvertaken = _simulation_with(NoEarlyBuffer)
TimersSurviveRestart = _simulation_with(KeepsTimers)
EndlessBudget = _simulation_with(EndlessBudgetCell)


class MailboxLosing(_WithCell):  # type: ignore[misc]
    """A Simulation whose restarted actors lose their queued mail (``MailboxLosingCell``)."""

    cell_type = MailboxLosingCell

    def lose_mail(self, cell: CellBase) -> None:
        """Empty every channel to ``cell``, without a trace: its messages vanish."""
        ready = self._ready
        kept = [channel for channel in ready if channel.receiver is not cell]
        for channel in ready:
            if channel.receiver is cell:
                channel.queue.clear()
                channel.index = -1
        ready[:] = kept
        for index, channel in enumerate(ready):
            channel.index = index


class IgnoresCancel(Simulation):  # type: ignore[misc]
    """Broken: cancelling a timer is recorded and answered True, but the timer stays armed and comes due.

    (The owner's cell still drops its ``TimerFired``: the actor is spared, the backend's promise is not.)
    """

    def cancel_timer(self, handle: TimerHandle) -> bool:
        tracer = self.tracer
        if tracer is not None:
            tracer.record(EventKind.TIMER_CANCELLED, self.now(), None, self.current_cell(), handle)
        return True
