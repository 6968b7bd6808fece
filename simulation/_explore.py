"""Bounded exhaustive search over a run's scheduling choices, for scenarios small enough to enumerate.

The simulator is deterministic and consults its strategy only when two or more channels
are ready, so a run is a function of its list of choices. ``explore`` enumerates those
lists depth first, statelessly (as CHESS and other stateless model checkers do): it
replays a prefix, lets every later choice take the first ready channel, records how
many channels were ready at each choice point, and backtracks to the deepest point that
still has an untried channel. Every run it makes is a distinct interleaving, and when it
stops without hitting a bound it has covered them all.

Real scenarios have far too many interleavings to cover, so two bounds keep the search
finite and still useful: ``max_depth`` branches only at the first choice points, and
``max_deviations`` admits only schedules that leave the first ready channel at most k
times (delay bounding, after Emmi, Qadeer and Rakamaric, POPL 2011: most ordering bugs
need only a few deviations from a plain order, and the number of such schedules grows
polynomially, not exponentially, with the length of the run).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, TypeAlias, TypeVar, final

import attrs

from conveyor.runtime import ConveyorError

from ._channel import Channel
from ._strategies import ReplayDivergence, Strategy

T = TypeVar("T")

Verdict: TypeAlias = bool | Sequence[str]
"""What a check returns: True (or no messages) when the run is fine, False or messages when not."""


@final
@attrs.frozen
class ExploreFailure(Generic[T]):
    """One schedule whose run failed its check.

    Attributes:
        schedule: the choices of that run; ``Replay(schedule)`` reproduces it.
        violations: what the check said (``("check returned False",)`` for a bare False).
        result: whatever the run returned, for a closer look.
    """

    schedule: tuple[int, ...]
    violations: tuple[str, ...]
    result: T = attrs.field(eq=False, repr=False)


@final
@attrs.frozen
class ExploreResult(Generic[T]):
    """How a search went.

    Attributes:
        schedules_run: distinct schedules run (each one interleaving).
        complete: True if every schedule within the bounds was run, so the count is the
            exact number of interleavings (within ``max_depth`` / ``max_deviations``).
        failures: the failing schedules, in the order found.
        longest: the most choice points seen in one run.
    """

    schedules_run: int
    complete: bool
    failures: tuple[ExploreFailure[T], ...]
    longest: int

    @property
    def ok(self) -> bool:
        """No schedule failed."""
        return not self.failures


@final
class ExploringStrategy:
    """Replays a prefix of choices, then always takes the first ready channel, recording each choice point.

    ``explore`` builds one per run; after the run, ``choices`` and ``widths`` (how many
    channels were ready at each point) say where the search may branch next.
    """

    name = "explore"

    def __init__(self, prefix: Sequence[int] = ()) -> None:
        self.prefix = tuple(prefix)
        self.choices: list[int] = []
        self.widths: list[int] = []

    def choose(self, ready: Sequence[Channel]) -> int:
        """The prefix's choice while it lasts, then 0; both recorded with the number of ready channels."""
        position = len(self.choices)
        count = len(ready)
        choice = self.prefix[position] if position < len(self.prefix) else 0
        if choice >= count:
            msg = (
                f"exploration diverged at choice {position}: the prefix asks for index {choice} but only "
                f"{count} channels are ready; the run is not a function of its schedule (it must build a "
                f"fresh Simulation from the same seed on every call)"
            )
            raise ReplayDivergence(msg)
        self.choices.append(choice)
        self.widths.append(count)
        return choice


def _violations(verdict: Verdict) -> tuple[str, ...]:
    if verdict is True:
        return ()
    if verdict is False:
        return ("check returned False",)
    if isinstance(verdict, str):
        return (verdict,) if verdict else ()
    return tuple(str(line) for line in verdict)


def _next_prefix(
    choices: Sequence[int], widths: Sequence[int], max_depth: int | None, max_deviations: int | None
) -> tuple[int, ...] | None:
    """The prefix of the next schedule in depth-first order, or None when the bounded space is done.

    The deepest choice point with an untried channel (within ``max_depth``) whose schedule
    stays within ``max_deviations`` non-zero choices is advanced by one; everything after
    it goes back to 0.
    """
    limit = len(choices) if max_depth is None else min(len(choices), max_depth)
    deviations_before = [0] * (limit + 1)
    for index in range(limit):
        deviations_before[index + 1] = deviations_before[index] + (choices[index] != 0)
    for index in range(limit - 1, -1, -1):
        if choices[index] + 1 >= widths[index]:
            continue
        if max_deviations is not None and deviations_before[index] + 1 > max_deviations:
            continue
        return (*choices[:index], choices[index] + 1)
    return None


def explore(
    run: Callable[[Strategy], T],
    check: Callable[[T], Verdict],
    *,
    max_schedules: int = 10_000,
    max_depth: int | None = None,
    max_deviations: int | None = None,
    max_failures: int | None = None,
) -> ExploreResult[T]:
    """Run every schedule of a small scenario (within bounds), depth first; check each run.

    Args:
        run: builds a fresh Simulation with the given strategy (and the same seed each time),
            runs it, and returns what ``check`` needs. It must be a function of the strategy's
            choices alone, or the search raises ``ReplayDivergence``.
        check: True, or an empty sequence of messages, when a run is fine; False or the
            violations when not.
        max_schedules: stop after this many runs (the result is then not ``complete``).
        max_depth: branch only at the first ``max_depth`` choice points; later ones take the
            first ready channel. None: branch everywhere.
        max_deviations: admit only schedules with at most this many choices other than the
            first ready channel (delay bounding). None: no bound.
        max_failures: stop after this many failing schedules. None: keep going.

    Returns:
        How many schedules ran, whether that covered the bounded space, and every failure.

    Raises:
        ValueError: a bound is negative, or ``max_schedules`` < 1.
        ReplayDivergence: ``run`` is not deterministic in its choices.
    """
    if type(max_schedules) is not int or max_schedules < 1:
        msg = f"max_schedules must be an int >= 1, got {max_schedules!r}"
        raise ValueError(msg)
    for label, bound in (("max_depth", max_depth), ("max_deviations", max_deviations),
                         ("max_failures", max_failures)):
        if bound is not None and (type(bound) is not int or bound < (1 if label == "max_failures" else 0)):
            msg = f"{label} must be None or an int >= {1 if label == 'max_failures' else 0}, got {bound!r}"
            raise ValueError(msg)
    prefix: tuple[int, ...] | None = ()
    runs = 0
    longest = 0
    failures: list[ExploreFailure[T]] = []
    while prefix is not None and runs < max_schedules:
        if max_failures is not None and len(failures) >= max_failures:
            break
        probe = ExploringStrategy(prefix)
        result = run(probe)
        runs += 1
        if len(probe.choices) < len(prefix):
            msg = (
                f"the run made {len(probe.choices)} choices but replayed a prefix of {len(prefix)}; "
                f"it must hand the strategy to a fresh Simulation built the same way on every call"
            )
            raise ConveyorError(msg)
        longest = max(longest, len(probe.choices))
        violations = _violations(check(result))
        if violations:
            failures.append(ExploreFailure(tuple(probe.choices), violations, result))
        prefix = _next_prefix(probe.choices, probe.widths, max_depth, max_deviations)
    return ExploreResult(schedules_run=runs, complete=prefix is None, failures=tuple(failures), longest=longest)
