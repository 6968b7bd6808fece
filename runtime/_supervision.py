"""Supervision decisions, as plain values and a sans-IO restart budget."""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable
from typing import final

import attrs

from .validators import non_negative_int, positive_number


class Directive(enum.Enum):
    """What a supervisor does with a child whose ``receive`` raised."""

    RESTART = "restart"
    """Replace the instance with a fresh one from the factory; the mailbox is kept."""
    STOP = "stop"
    """Stop the child; watchers get ``Terminated(reason="failed")``."""
    ESCALATE = "escalate"
    """Stop the child and fail the parent with the same error."""


@final
@attrs.frozen
class SupervisorStrategy:
    """How a parent treats its failing children (set as ``Actor.supervisor_strategy``).

    Attributes:
        directive: applied to every exception unless ``decider`` is given.
        max_restarts: restarts allowed within ``within_s``; one more failure stops the child.
        within_s: the sliding window, in seconds of the system's clock.
        decider: optional function from the exception to a ``Directive``.
    """

    directive: Directive = attrs.field(default=Directive.RESTART, validator=attrs.validators.instance_of(Directive))
    max_restarts: int = attrs.field(default=3, validator=non_negative_int)
    within_s: float = attrs.field(default=60.0, validator=positive_number)
    decider: Callable[[Exception], Directive] | None = attrs.field(default=None, eq=False)

    def decide(self, error: Exception) -> Directive:
        """Return the directive for ``error``."""
        if self.decider is None:
            return self.directive
        decided = self.decider(error)
        if not isinstance(decided, Directive):
            msg = f"SupervisorStrategy.decider returned {decided!r}; it must return a Directive"
            raise TypeError(msg)
        return decided


@final
class RestartBudget:
    """Counts restarts in a sliding window; owned by one actor cell, so unsynchronised."""

    __slots__ = ("_times",)

    def __init__(self) -> None:
        self._times: deque[float] = deque()

    def try_spend(self, now: float, strategy: SupervisorStrategy) -> bool:
        """Record a restart at ``now`` and return True, or return False if the budget is spent."""
        horizon = now - strategy.within_s
        times = self._times
        while times and times[0] <= horizon:
            times.popleft()
        if len(times) >= strategy.max_restarts:
            return False
        times.append(now)
        return True
