"""One choice stream per run: every random draw of a scenario run, recorded as one list of integers.

A run draws its workload and feature choices, its faults, its clients' random choices (``ctx.random``
and the Pub/Sub clients' fates), its job durations and its scheduling choices. Normally each comes
from its own seeded ``random.Random``. Under ``choice_stream(stream)`` every one of them comes from
``stream`` instead, in the order the run asks, as hypothesis draws everything from one buffer:

* a recording stream (``ChoiceStream()``) asks each draw's own seeded source, so the run is the
  very run the seed gives (same trace, same schedule), and writes down each answer;
* a replaying stream (``ChoiceStream(choices)``) answers from the list. A value too big for the
  draw is clamped to its largest; past the end of the list every draw takes the simplest answer
  (and a run that then loops on one draw, as ``random.sample`` rejecting a repeat does, raises
  ``StreamStuck`` instead of looping for ever).

So a shrinker edits one list of integers (deletes chunks, zeroes them, lowers values) and every
edit is a valid run. Zero is the simplest answer of every draw: the first of a choice
(``randrange``, ``choice``, ``randint``'s low end, the first ready channel) and, for a float, the
value just below 1, so that ``random() < p`` is False: the rare thing (a nack, a poison message,
a crash) does not happen.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import final

from conveyor.runtime import ConveyorError

from ._channel import Channel
from ._strategies import Strategy

STUCK_DRAWS = 10_000
"""Past the end of a replayed stream, this many draws in a row of one bound mean the run is looping on a
draw (a rejection loop such as ``random.sample``'s, which the simplest choice never satisfies)."""

FLOAT_STEPS = 1 << 53
"""A generator's ``random()`` is k / 2**53: a float draw is recorded as the integer 2**53 - 1 - k."""


class StreamStuck(ConveyorError):
    """A replayed stream ran out and the run keeps drawing the same simplest choice: it cannot finish."""


@final
class ChoiceStream:
    """The list of choices a run draws from: recorded from the seed, or replayed (see the module).

    Args:
        choices: replay these; None records (each draw answered by its own seeded source).
    """

    def __init__(self, choices: Sequence[int] | None = None) -> None:
        if choices is not None and any(type(choice) is not int or choice < 0 for choice in choices):
            msg = f"ChoiceStream choices must be ints >= 0, got {list(choices)[:10]!r}"
            raise ValueError(msg)
        self._replay = None if choices is None else tuple(choices)
        self._repeats = 0
        self._last_bound = 0
        self.drawn: list[int] = []
        """The choices this run actually made (clamped, and zeros past the end included)."""

    @property
    def recording(self) -> bool:
        """True when draws come from their seeded sources, False when from a recorded list."""
        return self._replay is None

    def draw(self, bound: int, source: Callable[[], int]) -> int:
        """A choice in ``[0, bound)``: ``source()`` when recording, else the next recorded one (clamped)."""
        replay = self._replay
        if replay is None:
            value = source()
        else:
            position = len(self.drawn)
            if position < len(replay):
                value = min(replay[position], bound - 1)
            else:
                value = 0
                self._repeats = self._repeats + 1 if bound == self._last_bound else 1
                self._last_bound = bound
                if self._repeats > STUCK_DRAWS:
                    msg = (
                        f"past the end of its {len(replay)} recorded choices the run drew the simplest choice "
                        f"of [0, {bound}) {STUCK_DRAWS} times in a row: it loops on a draw and cannot finish"
                    )
                    raise StreamStuck(msg)
        self.drawn.append(value)
        return value


class StreamRandom(random.Random):
    """A ``random.Random`` whose every draw is one choice of a stream.

    Recording, each draw asks ``random.Random(key)`` by the same primitive the base class would
    (``_randbelow``, ``random``, ``getrandbits``), so every method built on them (``choice``,
    ``randint``, ``uniform``, ``sample``, ``shuffle``, ...) returns exactly what the seeded
    generator returns.
    """

    def __init__(self, stream: ChoiceStream, key: int | str) -> None:
        super().__init__(0)
        self._stream = stream
        self._source = random.Random(key)

    def random(self) -> float:
        """A float in [0, 1); its simplest value (choice 0) is the largest, just below 1."""
        source = self._source
        choice = self._stream.draw(FLOAT_STEPS, lambda: FLOAT_STEPS - 1 - int(source.random() * FLOAT_STEPS))
        return (FLOAT_STEPS - 1 - choice) / FLOAT_STEPS

    def getrandbits(self, k: int, /) -> int:
        """``k`` random bits, one choice (``randbytes`` draws through this)."""
        if k <= 0:
            return self._source.getrandbits(k)  # 0 bits, or the base class's error
        return self._stream.draw(1 << k, lambda: self._source.getrandbits(k))

    def _randbelow(self, n: int) -> int:
        """An int in [0, n), one choice: what ``randrange``, ``choice``, ``sample`` and ``shuffle`` use."""
        if n <= 0:
            return 0
        source = self._source
        return self._stream.draw(n, lambda: source.randrange(n))  # randrange(n) is one _randbelow(n)


@final
class StreamStrategy:
    """A scheduling strategy whose choices are choices of the stream; ``inner`` answers when recording."""

    def __init__(self, stream: ChoiceStream, inner: Strategy) -> None:
        self.name = inner.name
        self._stream = stream
        self._inner = inner

    def choose(self, ready: Sequence[Channel]) -> int:
        """The stream's next choice among ``ready`` (the inner strategy's, when recording)."""
        inner = self._inner
        return self._stream.draw(len(ready), lambda: inner.choose(ready))


_ACTIVE: ContextVar[ChoiceStream | None] = ContextVar("conveyor_choice_stream", default=None)


@contextmanager
def choice_stream(stream: ChoiceStream) -> Iterator[ChoiceStream]:
    """Make every seeded draw and every new Simulation's schedule inside the block come from ``stream``."""
    token = _ACTIVE.set(stream)
    try:
        yield stream
    finally:
        _ACTIVE.reset(token)


def active_stream() -> ChoiceStream | None:
    """The stream of the enclosing ``choice_stream`` block, if any."""
    return _ACTIVE.get()


def seeded_random(key: int | str) -> random.Random:
    """``random.Random(key)``, or inside a ``choice_stream`` block a generator drawing from its stream.

    Every generator a scenario run draws from is made here, so the whole run is one stream.
    """
    stream = _ACTIVE.get()
    return random.Random(key) if stream is None else StreamRandom(stream, key)


def streamed(strategy: Strategy) -> Strategy:
    """``strategy``, or inside a ``choice_stream`` block the same strategy drawing from its stream."""
    stream = _ACTIVE.get()
    return strategy if stream is None else StreamStrategy(stream, strategy)
