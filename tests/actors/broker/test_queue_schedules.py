"""The broker behaviour suite again, under more simulator schedules than the one seed of the ``backend`` fixture.

Messages from different senders may arrive in any order (a manager's ``NotifyWork``
and the queue's ``Delivered`` or ``Subscribed``, say); the simulator explores that
freedom by seed. Each seed here is one more interleaving of every scenario.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable

import pytest

from tests.actors.broker import test_queue_behaviour as suite
from tests.conftest import Harness, make_harness

SEEDS = range(1, 13)
SCENARIOS: list[tuple[str, Callable[[Harness], Awaitable[None]]]] = [
    (name, fn)
    for name, fn in vars(suite).items()
    if name.startswith("test_")
    and inspect.iscoroutinefunction(fn)
    and list(inspect.signature(fn).parameters) == ["backend"]
]


def test_the_sweep_covers_the_behaviour_suite() -> None:
    assert len(SCENARIOS) >= 40


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[name for name, _ in SCENARIOS])
async def test_scenario_under_another_schedule(
    scenario: tuple[str, Callable[[Harness], Awaitable[None]]], seed: int
) -> None:
    _, run = scenario
    async for harness in make_harness("simulation", seed=seed):
        await run(harness)
