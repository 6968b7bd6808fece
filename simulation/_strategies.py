"""Scheduling strategies: at each step, which ready channel delivers next.

A strategy sees the ready channels in the simulator's deterministic order and
returns an index. It is consulted only when two or more channels are ready, so a
recorded schedule holds real choices only, and replaying it gives the same run.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, final, runtime_checkable

from conveyor.runtime import ConveyorError

from ._channel import Channel

if TYPE_CHECKING:
    from hypothesis.strategies import DataObject, DrawFn


@runtime_checkable
class Strategy(Protocol):
    """Chooses among ready channels; must be deterministic given its own seed."""

    name: str

    def choose(self, ready: Sequence[Channel]) -> int:
        """Return an index into ``ready`` (which always holds at least two channels)."""
        ...


class ReplayDivergence(ConveyorError):
    """A recorded schedule asked for a choice the run does not offer: the code changed."""


@final
class RandomWalk:
    """Uniformly random choice, from its own ``random.Random(seed)``."""

    name = "random"

    def __init__(self, seed: int | str) -> None:
        self._bits = random.Random(f"random-walk:{seed}").getrandbits

    def choose(self, ready: Sequence[Channel]) -> int:
        """Pick uniformly.

        The draw ``randrange(len(ready))`` makes (rejection sampling over ``getrandbits``),
        so seeds keep their schedules, without its three Python calls on the simulator's
        hottest line.
        """
        count = len(ready)
        width = count.bit_length()
        index = self._bits(width)
        while index >= count:
            index = self._bits(width)
        return index


@final
class RoundRobin:
    """Cycle through channels in the order of their keys, starting after the last one served."""

    name = "round-robin"

    def __init__(self) -> None:
        self._last: tuple[int, int] = (-(2**62), -(2**62))

    def choose(self, ready: Sequence[Channel]) -> int:
        """Pick the ready channel whose key follows the last served key (wrapping)."""
        best_after = -1
        best_overall = 0
        for index, channel in enumerate(ready):
            key = channel.key
            if key < ready[best_overall].key:
                best_overall = index
            if key > self._last and (best_after < 0 or key < ready[best_after].key):
                best_after = index
        chosen = best_after if best_after >= 0 else best_overall
        self._last = ready[chosen].key
        return chosen


@final
class PCT:
    """Probabilistic concurrency testing (Burckhardt et al., ASPLOS 2010) over channels.

    Each channel gets a random priority when first seen, and the highest-priority ready
    channel always goes next, so one sender-receiver pair runs far ahead of the others, the
    way PCT lets one thread run ahead. At ``depth - 1`` choice points drawn uniformly from
    the first ``steps`` choices, the channel about to go is demoted below every other: a
    bug that needs d ordering constraints is found with probability at least 1 / (n k^(d-1)).

    Args:
        seed: fixes priorities and change points.
        depth: the bug depth d (>= 1); d = 1 never changes priorities.
        steps: the expected number of choices k in a run (change points fall inside it).
    """

    name = "pct"

    def __init__(self, seed: int | str, depth: int = 3, steps: int = 2000) -> None:
        if type(depth) is not int or depth < 1:
            msg = f"PCT depth must be an int >= 1, got {depth!r}"
            raise ValueError(msg)
        if type(steps) is not int or steps < 1:
            msg = f"PCT steps must be an int >= 1, got {steps!r}"
            raise ValueError(msg)
        self.depth = depth
        self._rng = random.Random(f"pct:{seed}:{depth}")
        points = self._rng.sample(range(1, steps + 1), min(depth - 1, steps))
        # Change point j (1-based, in the order drawn) demotes to priority depth - j: all below
        # the initial priorities, which start at depth.
        self._change_points = {point: depth - 1 - index for index, point in enumerate(points)}
        self._priorities: dict[tuple[int, int], float] = {}
        self._choices = 0

    def _priority(self, channel: Channel) -> float:
        priority = self._priorities.get(channel.key)
        if priority is None:
            priority = self._priorities[channel.key] = self.depth + self._rng.random()
        return priority

    def choose(self, ready: Sequence[Channel]) -> int:
        """The highest-priority ready channel, after applying a change point that falls here."""
        self._choices += 1
        best = max(range(len(ready)), key=lambda index: self._priority(ready[index]))
        demoted = self._change_points.get(self._choices)
        if demoted is not None:
            self._priorities[ready[best].key] = demoted
            best = max(range(len(ready)), key=lambda index: self._priority(ready[index]))
        return best


@final
class Replay:
    """Replay a recorded list of choices; after the list ends, always choose the first.

    With ``clamp``, an index past the ready channels becomes the last one instead of an
    error: a shrunk workload or an edited schedule rarely offers the recorded widths, and
    clamping keeps as much of the recorded order as fits.
    """

    name = "replay"

    def __init__(self, choices: Sequence[int], *, clamp: bool = False) -> None:
        self._choices = tuple(choices)
        self._position = 0
        self._clamp = clamp

    def choose(self, ready: Sequence[Channel]) -> int:
        """Return the next recorded choice, or fail loudly if the run diverged (unless clamping)."""
        position = self._position
        if position >= len(self._choices):
            return 0
        choice = self._choices[position]
        self._position = position + 1
        if not 0 <= choice < len(ready):
            if self._clamp:
                return len(ready) - 1
            msg = (
                f"replay diverged at choice {position}: recorded index {choice} but only "
                f"{len(ready)} channels are ready; the actors or the seed differ from the recorded run"
            )
            raise ReplayDivergence(msg)
        return choice


@final
class HypothesisStrategy:
    """Draw every choice from hypothesis, so a failing interleaving shrinks like any other example.

    Inside a ``@given(st.data())`` test, ``Simulation(seed, HypothesisStrategy(data))`` makes
    each scheduling choice one ``data.draw(st.integers(0, len(ready) - 1))``. The whole run is
    then one stream of draws (as a ``RuleBasedStateMachine``'s steps are), and hypothesis
    shrinks a failing stream toward zeros: toward always taking the first ready channel, the
    simulator's plainest order, with the few choices the bug needs left standing.

    The ``draw`` function of an ``@st.composite`` strategy works too, and is the faster of the
    two for long runs: ``data.draw`` also formats a note for every draw, which a run of a few
    hundred choices, replayed a thousand times while shrinking, pays for in full.

    hypothesis is imported when the strategy is built, so the simulator itself does not need it.

    Args:
        data: the ``st.data()`` object of the running test, or a composite strategy's ``draw``.
    """

    name = "hypothesis"

    def __init__(self, data: DataObject | DrawFn) -> None:
        from hypothesis import strategies as st

        self._draw: DrawFn | Callable[[st.SearchStrategy[int]], int] = (
            data.draw if isinstance(data, st.DataObject) else data
        )
        self._integers = st.integers
        self._bounded: dict[int, st.SearchStrategy[int]] = {}

    def choose(self, ready: Sequence[Channel]) -> int:
        """Draw an index into ``ready`` from hypothesis (shrinks toward 0, the first ready channel)."""
        count = len(ready)
        bounded = self._bounded.get(count)
        if bounded is None:
            bounded = self._bounded[count] = self._integers(0, count - 1)
        choice: int = self._draw(bounded)
        return choice


STRATEGY_NAMES = (RandomWalk.name, PCT.name, RoundRobin.name)
"""The strategies a seed alone can build (replay and hypothesis need a recorded schedule or data)."""


def strategy_from_name(name: str, seed: int | str, depth: int = 3, steps: int = 2000) -> Strategy:
    """Build a strategy from its command-line name; ``depth`` and ``steps`` are PCT's."""
    if name == RandomWalk.name:
        return RandomWalk(seed)
    if name == PCT.name:
        return PCT(seed, depth=depth, steps=steps)
    if name == RoundRobin.name:
        return RoundRobin()
    msg = f"unknown strategy {name!r}; choose one of: {', '.join(STRATEGY_NAMES)}"
    raise ValueError(msg)
