"""``ram_under_target``: every ``BodiesInRam`` note a paged queue writes is within its target."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from conveyor.actors.broker import BodiesInRam
from conveyor.runtime import EventKind, TraceEvent
from conveyor.simulation.checkers import MAX_REPORTED, ram_under_target


def notes(held: list[int], target: int, sender: str = "/queue") -> list[TraceEvent]:
    return [TraceEvent(EventKind.NOTE, 0.1 * n, sender, None, BodiesInRam("queue", size, target))
            for n, size in enumerate(held)]


@given(st.lists(st.integers(0, 100), max_size=MAX_REPORTED), st.integers(0, 100))
def test_a_note_over_the_target_fails_and_only_that(held: list[int], target: int) -> None:
    result = ram_under_target(notes(held, target), "/queue")
    assert result.ok == all(size <= target for size in held)
    assert len(result.violations) == sum(size > target for size in held)


def test_past_the_reported_bound_the_rest_are_counted() -> None:
    result = ram_under_target(notes([1] * (MAX_REPORTED + 2), 0), "/queue")
    assert len(result.violations) == MAX_REPORTED + 1
    assert result.violations[-1] == "... and 2 more"


def test_another_queues_notes_are_not_judged() -> None:
    result = ram_under_target(notes([50], 10, sender="/dead-letters"), "/queue")
    assert result.ok
    assert dict(result.metrics)["judged"] == 0
