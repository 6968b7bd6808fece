"""Tests of the processing-time histogram: clamping, percentiles by example, then against a sorted list."""

from __future__ import annotations

import bisect
import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conveyor.actors.subscriber._histogram import MAX_SECONDS, MIN_SECONDS, Histogram


def _histogram(*samples: float) -> Histogram:
    histogram = Histogram()
    for seconds in samples:
        histogram.add(seconds)
    return histogram


# ---------------------------------------------------------------------- add and clamping


def test_an_empty_histogram_answers_the_smallest_bucket() -> None:
    histogram = Histogram()
    assert len(histogram) == 0
    assert histogram.percentile(0) == MIN_SECONDS == 10
    assert histogram.percentile(99) == 10
    assert histogram.percentile(100) == 10


def test_short_durations_count_as_ten_seconds() -> None:
    histogram = _histogram(0, 0.5, 3, 9.99)
    assert len(histogram) == 4
    assert histogram.percentile(100) == 10


def test_long_durations_count_as_six_hundred_seconds() -> None:
    histogram = _histogram(601, 7200.0, 1e12)
    assert len(histogram) == 3
    assert histogram.percentile(1) == MAX_SECONDS == 600


def test_durations_are_truncated_to_whole_seconds() -> None:
    assert _histogram(42.9).percentile(50) == 42
    assert _histogram(600.99).percentile(50) == 600
    assert _histogram(10.0).percentile(50) == 10


@pytest.mark.parametrize("bad", [-0.001, -5, math.nan, math.inf, -math.inf])
def test_add_refuses_negative_nan_and_infinite_durations(bad: float) -> None:
    histogram = _histogram(12)
    with pytest.raises(ValueError, match=rf"seconds must be a finite number >= 0, got {bad!r} \(histogram holds 1"):
        histogram.add(bad)
    assert len(histogram) == 1


@pytest.mark.parametrize("bad", [True, "12", None])
def test_add_refuses_values_that_are_not_numbers(bad: object) -> None:
    with pytest.raises(TypeError, match="seconds must be an int or float"):
        Histogram().add(bad)  # type: ignore[arg-type]


# ---------------------------------------------------------------------- percentiles


def test_percentile_is_the_smallest_value_covering_p_percent() -> None:
    histogram = _histogram(*range(11, 111))  # 100 samples: 11, 12, ..., 110
    assert histogram.percentile(1) == 11
    assert histogram.percentile(50) == 60
    assert histogram.percentile(50.5) == 61  # 50.5 samples needed: 51 of them
    assert histogram.percentile(99) == 109
    assert histogram.percentile(99.01) == 110
    assert histogram.percentile(100) == 110
    assert histogram.percentile(0) == 10


def test_percentile_of_one_slow_message_among_many_fast_ones() -> None:
    histogram = _histogram(*([20] * 99), 500)
    assert histogram.percentile(99) == 20
    assert histogram.percentile(99.5) == 500


def test_percentile_takes_p_at_its_exact_value() -> None:
    # The float 100 / 3 is a little above a third, so one sample in three is not enough;
    # p * len / 100 computed in floats would round to exactly 1.0 and answer 20.
    histogram = _histogram(20, 30, 40)
    assert histogram.percentile(100 / 3) == 30
    assert histogram.percentile(33) == 20


@pytest.mark.parametrize("bad", [-0.1, 100.01, math.nan, math.inf, -math.inf])
def test_percentile_refuses_p_outside_zero_to_hundred(bad: float) -> None:
    with pytest.raises(ValueError, match=rf"p must be in \[0, 100\], got {bad!r}"):
        Histogram().percentile(bad)


def test_percentile_refuses_values_that_are_not_numbers() -> None:
    with pytest.raises(TypeError, match="p must be an int or float, got True"):
        Histogram().percentile(True)


def test_repr_shows_the_samples_and_percentiles() -> None:
    assert repr(_histogram(30, 40)) == "<Histogram samples=2 p50=30 p99=40>"


# ---------------------------------------------------------------------- against a sorted list


def _reference_percentile(samples: list[float], p: float) -> int:
    """The definition, by brute force: scan every bucket value and count the clamped samples below it."""
    clamped = sorted(min(max(math.floor(s), 10), 600) for s in samples)
    for v in range(10, 601):
        if Fraction(bisect.bisect_right(clamped, v) * 100) >= Fraction(p) * len(clamped):
            return v
    raise AssertionError("p <= 100 is always covered by v = 600")


durations = st.one_of(
    st.integers(min_value=0, max_value=700),
    st.floats(min_value=0, max_value=700, allow_nan=False),
    st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False),
)
percents = st.one_of(
    st.sampled_from([0, 1, 50, 90, 99, 99.9, 100]),
    st.floats(min_value=0, max_value=100, allow_nan=False),
)


@given(samples=st.lists(durations, max_size=300), p=percents)
def test_percentile_matches_a_sorted_list(samples: list[float], p: float) -> None:
    histogram = _histogram(*samples)
    assert len(histogram) == len(samples)
    assert histogram.percentile(p) == _reference_percentile(samples, p)


@given(samples=st.lists(durations, min_size=1, max_size=100), p=percents, q=percents)
def test_percentile_is_monotonic_in_p(samples: list[float], p: float, q: float) -> None:
    histogram = _histogram(*samples)
    low, high = sorted((p, q))
    assert 10 <= histogram.percentile(low) <= histogram.percentile(high) <= 600
