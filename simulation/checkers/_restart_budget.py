"""The restart budget (docs/architecture.md, supervision), judged from each actor's lifecycle events.

Under ``SupervisorStrategy`` (every actor of the scenarios keeps the default: restart, at most 3
restarts within 60 s), a failure (``FAILED``) is answered by a restart (``RESTARTED``) while fewer
than ``max_restarts`` supervision restarts of that actor fall within the last ``within_s``, and by a
stop (``STOPPED``) once they do. A restart the simulator injects (a ``Crash`` fault) follows no
failure and spends nothing; a stop ends the actor (a new one at its path starts with a full budget).
A parent that supervises its children otherwise says so in a ``SupervisionDeclared`` note, written
before it spawns them: under ``stop`` every failure of theirs is answered by a stop.
"""

from __future__ import annotations

from collections import deque
from typing import final

import attrs

from conveyor.runtime import Directive, SupervisorStrategy


@final
@attrs.frozen
class SupervisionDeclared:
    """Note: the actor writing it supervises its children with ``directive``, ``max_restarts`` within ``within_s``."""

    directive: str
    max_restarts: int
    within_s: float


DOCUMENTED_DEFAULT = SupervisorStrategy(Directive.RESTART, 3, 60.0)
"""The default strategy as docs/architecture.md states it (restart, 3 within 60 s), written out here rather
than read from ``SupervisorStrategy()``: a runtime whose defaults drifted from the documented ones must show."""


@final
class RestartBudgetWatch:
    """Follows every actor's failures, restarts and stops; collects the verdicts the budget did not call for."""

    def __init__(self, strategy: SupervisorStrategy | None = None) -> None:
        self.strategy = strategy or DOCUMENTED_DEFAULT
        self.restarted: dict[str, deque[float]] = {}  # actor -> times of its supervision restarts
        self.due: dict[str, tuple[float, bool]] = {}  # actor -> (when it failed, whether a restart is due)
        self.violations: list[str] = []
        self.exhausted = 0  # failures past the budget (each must stop its actor)
        self.declared: dict[str, SupervisorStrategy] = {}  # parent -> the strategy its children have

    def declare(self, parent: str, note: SupervisionDeclared) -> None:
        """``parent`` supervises its children by ``note`` (a restart-only budget is all that is judged)."""
        self.declared[parent] = SupervisorStrategy(Directive(note.directive), note.max_restarts, note.within_s)

    def _strategy_of(self, path: str) -> SupervisorStrategy:
        return self.declared.get(path.rpartition("/")[0], self.strategy) if self.declared else self.strategy

    def failed(self, path: str, now: float) -> None:
        """``path`` failed at ``now``: a restart is due if its budget has room, else a stop."""
        earlier = self.due.get(path)
        if earlier is not None:
            self.violations.append(f"t={now:g}: {path} failed again, never restarted nor stopped after its failure "
                                   f"at t={earlier[0]:g}")
        strategy = self._strategy_of(path)
        times = self.restarted.setdefault(path, deque())
        while times and times[0] <= now - strategy.within_s:
            times.popleft()
        restart = strategy.directive is Directive.RESTART and len(times) < strategy.max_restarts
        self.exhausted += not restart
        self.due[path] = (now, restart)

    def restarted_at(self, path: str, now: float) -> None:
        """``path`` restarted at ``now``: by its supervisor if a failure is pending (it spends the budget)."""
        pending = self.due.pop(path, None)
        if pending is None:
            return  # a Crash fault's restart: no failure, no budget spent
        failed_at, restart = pending
        if not restart:
            strategy = self._strategy_of(path)
            self.violations.append(
                f"t={now:g}: {path} was restarted after its failure at t={failed_at:g}, though its supervisor says "
                f"{strategy.directive.value} with {strategy.max_restarts} restarts within {strategy.within_s:g} s and "
                f"they were spent: it must be stopped"
            )
        self.restarted.setdefault(path, deque()).append(failed_at)

    def stopped(self, path: str, now: float) -> None:
        """``path`` stopped at ``now``; a new actor at its path starts with a full budget."""
        pending = self.due.pop(path, None)
        self.restarted.pop(path, None)
        if pending is not None and pending[1]:
            strategy = self._strategy_of(path)
            self.violations.append(
                f"t={now:g}: {path} was stopped after its failure at t={pending[0]:g}, with restarts left in its "
                f"budget ({strategy.max_restarts} within {strategy.within_s:g} s): it must be restarted"
            )

    def finish(self) -> None:
        """A failure never answered by a restart or a stop is a violation (the actor lingers, failed)."""
        for path, (failed_at, restart) in self.due.items():
            self.violations.append(f"t={failed_at:g}: {path} failed and was neither restarted nor stopped "
                                   f"({'a restart' if restart else 'a stop'} was due)")
        self.due.clear()
