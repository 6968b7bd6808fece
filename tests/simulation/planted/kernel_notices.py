"""Planted bugs for the kernel checkers of ``simulation/checkers/_kernel_notices.py`` (issue 17, item 6).

Each breaks one promise of docs/architecture.md that the kernel probe (``_kernel_probe.py``, drawn
by ``broker-swarm``) or an ordinary stop exercises: an ``ESCALATE`` that never reaches the parent
(``escalation``), a ``Terminated`` that does not say why (``termination_cause``), a timer the actor
cannot cancel in the handler that armed it (``timer_cancel``), and answers to a settled ask that
vanish instead of becoming dead letters (``ask_answers``).
"""

from __future__ import annotations

from typing import Any

import attrs

from conveyor.runtime import Directive, SupervisorStrategy, TimerHandle
from conveyor.runtime.lowlevel import CellBase
from conveyor.simulation import Simulation

from .lifecycle import _simulation_with

_SimCell: Any = Simulation.cell_type


class SilentEscalationCell(_SimCell):  # type: ignore[misc]
    """Broken: a child supervised with ``ESCALATE`` is stopped as under ``STOP``: its parent is never told."""

    supervisor: SupervisorStrategy

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        if self.supervisor.directive is Directive.ESCALATE and self.supervisor.decider is None:
            self.supervisor = attrs.evolve(self.supervisor, directive=Directive.STOP)


class CauselessStopCell(_SimCell):  # type: ignore[misc]
    """Broken: a stop's ``Terminated`` never carries the error, a failure's included."""

    def terminate(self, reason: str, error: BaseException | None) -> None:
        super().terminate(reason, None)


class LazyTimerCell(_SimCell):  # type: ignore[misc]
    """Broken: a timer is entered in the cell's books only once the handler that armed it returns, so a cancel
    in that handler finds nothing, answers False, and the timer comes due and is handled."""

    def schedule(self, delay_s: float, message: object) -> TimerHandle:
        handle: TimerHandle = self.system.schedule_timer(self, delay_s, message)
        self.__dict__.setdefault("unbooked", []).append(handle.timer_id)
        return handle

    def process(self, sender: CellBase | None, message: object) -> None:
        try:
            super().process(sender, message)
        finally:
            for timer_id in self.__dict__.pop("unbooked", ()):
                self.timers[timer_id] = None


class SwallowsLateAnswers(Simulation):  # type: ignore[misc]
    """Broken: a message that reaches an ask's settled promise vanishes instead of becoming a dead letter."""

    def dead_letter(self, sender: CellBase | None, target: CellBase, message: object) -> None:
        if target.is_promise:
            return
        super().dead_letter(sender, target, message)


SilentEscalation = _simulation_with(SilentEscalationCell)
CauselessStop = _simulation_with(CauselessStopCell)
LazyTimers = _simulation_with(LazyTimerCell)
