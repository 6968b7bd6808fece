"""The histogram of processing durations that sets how long a lease is extended (seed 003's leaser).

Like the Pub/Sub client, it keeps one bucket per whole second, clamped into
[``MIN_SECONDS``, ``MAX_SECONDS``]: a message acked after 3.2 s counts as 10, one acked after
2 hours counts as 600, one acked after 42.9 s counts as 42 (truncated, as the seed's client does).
The lease table asks for its 99th percentile to choose the extension it requests.

The class is sans-IO: it is told durations, and never reads a clock.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from fractions import Fraction
from typing import final

from conveyor.runtime import is_finite_number, quote

__all__ = ["MAX_SECONDS", "MIN_SECONDS", "Histogram"]

MIN_SECONDS = 10
"""The smallest bucket: shorter durations count as this many seconds."""
MAX_SECONDS = 600
"""The largest bucket: longer durations count as this many seconds."""


def _is_real(value: object) -> bool:
    """Return whether ``value`` is an int or float, refusing bool (an int that is a mistake here)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@final
class Histogram:
    """Counts processing durations per whole second so percentiles are cheap and memory is bounded.

    Owned by one actor, so it is unsynchronised. At most ``MAX_SECONDS - MIN_SECONDS + 1``
    buckets exist, whatever the number of samples.
    """

    __slots__ = ("_buckets", "_cache", "_len")

    def __init__(self) -> None:
        self._buckets: dict[int, int] = {}
        self._len = 0
        self._cache: dict[int, int] = {}  # p -> percentile(p) since the last add

    def add(self, seconds: float) -> None:
        """Record one processing duration, clamped into [10, 600] whole seconds.

        Args:
            seconds: how long a message took, from receipt to ack; truncated to whole seconds.

        Raises:
            ValueError: ``seconds`` is negative, NaN or infinite.
            TypeError: ``seconds`` is not an int or float.
        """
        if type(seconds) is float and 0.0 <= seconds < MAX_SECONDS:  # the common case: a float, a bucket of its own
            bucket = int(seconds) if seconds >= MIN_SECONDS else MIN_SECONDS
            buckets = self._buckets
            buckets[bucket] = buckets.get(bucket, 0) + 1
            self._len += 1
            if self._cache:
                self._cache.clear()
            return
        if not _is_real(seconds):
            msg = f"Histogram.add: seconds must be an int or float, got {quote(seconds)}"
            raise TypeError(msg)
        if not is_finite_number(seconds) or seconds < 0:
            msg = (
                f"Histogram.add: seconds must be a finite number >= 0, got {quote(seconds)} "
                f"(histogram holds {self._len} samples); is the clock going backwards?"
            )
            raise ValueError(msg)
        bucket = min(max(int(seconds), MIN_SECONDS), MAX_SECONDS)
        self._buckets[bucket] = self._buckets.get(bucket, 0) + 1
        self._len += 1
        if self._cache:
            self._cache.clear()

    def add_many(self, durations: Iterable[float]) -> None:
        """Record several processing durations: the same as ``add`` of each in turn, at less cost per duration.

        Raises:
            ValueError, TypeError: as ``add``, for the first bad duration (those before it are recorded).
        """
        buckets = self._buckets
        short = 0  # durations under MIN_SECONDS not counted yet: all go to its bucket
        longer = 0  # durations counted in their own buckets but not yet in _len
        try:
            for seconds in durations:
                if type(seconds) is float and 0.0 <= seconds < MAX_SECONDS:  # the common case, as in add
                    if seconds < MIN_SECONDS:
                        short += 1
                    else:
                        bucket = int(seconds)
                        buckets[bucket] = buckets.get(bucket, 0) + 1
                        longer += 1
                else:  # rare: add checks it, once the counts so far are in (its error reports them)
                    self._count(short, longer)
                    short = longer = 0
                    self.add(seconds)
        finally:
            self._count(short, longer)

    def _count(self, short: int, longer: int) -> None:
        """Put ``short`` durations in the smallest bucket and count them with ``longer`` already bucketed ones."""
        if short:
            self._buckets[MIN_SECONDS] = self._buckets.get(MIN_SECONDS, 0) + short
        if short or longer:
            self._len += short + longer
            self._cache.clear()

    def percentile(self, p: float) -> int:
        """Return the smallest bucket value v such that at least p% of the samples are <= v.

        The comparison is exact (no float rounding of ``p * len / 100``). Buckets range over
        every whole second in [10, 600], so ``percentile(0)`` is 10.

        Args:
            p: the percentile, in [0, 100].

        Returns:
            A whole number of seconds in [10, 600]; 10 when there are no samples.

        Raises:
            ValueError: ``p`` is outside [0, 100] or NaN.
            TypeError: ``p`` is not an int or float.
        """
        if type(p) is int:
            cached = self._cache.get(p)
            if cached is not None:  # asked again with no sample added since (the leaser's p99)
                return cached
        if not _is_real(p):
            msg = f"Histogram.percentile: p must be an int or float, got {quote(p)}"
            raise TypeError(msg)
        if not 0 <= p <= 100:  # NaN fails both comparisons
            msg = f"Histogram.percentile: p must be in [0, 100], got {quote(p)} (histogram holds {self._len} samples)"
            raise ValueError(msg)
        # Exact ceil: in integers for an int p (no Fraction, the leaser's p99), else with a Fraction.
        needed = -(-p * self._len // 100) if type(p) is int else math.ceil(Fraction(p) * self._len / 100)
        if needed == 0:
            return MIN_SECONDS
        seen = 0
        for bucket in sorted(self._buckets):
            seen += self._buckets[bucket]
            if seen >= needed:
                if type(p) is int:
                    self._cache[p] = bucket
                return bucket
        msg = f"Histogram.percentile: counted {seen} samples but {self._len} were added"  # pragma: no cover
        raise AssertionError(msg)  # pragma: no cover

    def __len__(self) -> int:
        """Return the number of samples added."""
        return self._len

    def __repr__(self) -> str:
        """Show the sample count and the median and 99th percentile, for debugging."""
        return f"<Histogram samples={self._len} p50={self.percentile(50)} p99={self.percentile(99)}>"
