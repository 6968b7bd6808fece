"""Scheduling strategies: at each step, which ready channel delivers next.

A strategy sees the ready channels in the simulator's deterministic order and
returns an index. It is consulted only when two or more channels are ready, so a
recorded schedule holds real choices only, and replaying it gives the same run.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Protocol, final, runtime_checkable

from conveyor.runtime import ConveyorError

from ._channel import Channel


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
        self._rng = random.Random(f"random-walk:{seed}")

    def choose(self, ready: Sequence[Channel]) -> int:
        """Pick uniformly."""
        return self._rng.randrange(len(ready))


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
class Replay:
    """Replay a recorded list of choices; after the list ends, always choose the first."""

    name = "replay"

    def __init__(self, choices: Sequence[int]) -> None:
        self._choices = tuple(choices)
        self._position = 0

    def choose(self, ready: Sequence[Channel]) -> int:
        """Return the next recorded choice, or fail loudly if the run diverged."""
        position = self._position
        if position >= len(self._choices):
            return 0
        choice = self._choices[position]
        self._position = position + 1
        if not 0 <= choice < len(ready):
            msg = (
                f"replay diverged at choice {position}: recorded index {choice} but only "
                f"{len(ready)} channels are ready; the actors or the seed differ from the recorded run"
            )
            raise ReplayDivergence(msg)
        return choice


def strategy_from_name(name: str, seed: int | str) -> Strategy:
    """Build a strategy from its command-line name."""
    if name == RandomWalk.name:
        return RandomWalk(seed)
    if name == RoundRobin.name:
        return RoundRobin()
    msg = f"unknown strategy {name!r}; choose one of: {RandomWalk.name}, {RoundRobin.name}"
    raise ValueError(msg)
