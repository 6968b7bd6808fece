"""Swarm scenarios (issue 17, item 2): each seed draws its features, the draws replay and show."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

import pytest

from conveyor.runtime import EventKind
from conveyor.simulation.scenarios import BrokerScenario, SubscriberScenario, get_scenario, run_scenario, scenario_draws

SEEDS = range(60)


@pytest.fixture(autouse=True)
def _quiet_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Raising callbacks log tracebacks by design."""
    caplog.set_level(logging.CRITICAL, logger="conveyor")
    yield


@pytest.mark.parametrize("name", ["broker-swarm", "subscriber-swarm"])
def test_a_seed_replays_its_draws_and_seeds_differ(name: str) -> None:
    build = get_scenario(name).build
    assert build(7) == build(7)
    assert scenario_draws(name, 7) == scenario_draws(name, 7) != ""
    assert len({scenario_draws(name, seed) for seed in SEEDS}) == len(SEEDS)


def test_a_scenario_that_draws_nothing_says_so() -> None:
    assert scenario_draws("fairness", 3) == ""


def test_every_broker_feature_is_on_in_some_seeds_and_off_in_others() -> None:
    runs = [run for seed in SEEDS if isinstance(run := get_scenario("broker-swarm").build(seed), BrokerScenario)]
    assert len(runs) == len(SEEDS)
    features: dict[str, Callable[[BrokerScenario], bool]] = {
        "priorities": lambda s: len(s.priorities) > 1,
        "consumer priorities": lambda s: bool(s.consumer_priorities),
        "selectors": lambda s: any(s.selectors),
        "groups": lambda s: s.groups > 0,
        "browsers": lambda s: s.browsers > 0,
        "ttls": lambda s: any(s.ttls),
        "delays": lambda s: any(s.delays),
        "retry": lambda s: s.retry is not None,
        "length limit": lambda s: s.max_length is not None,
        "drop-head": lambda s: s.max_length is not None and s.overflow.value == "drop-head",
        "crashing clients": lambda s: any(policy.crash_after > 0 for policy in s.consumers),
        "one burst": lambda s: s.publish_span_s == 0.0,
        "several consumers": lambda s: len(s.consumers) > 1,
    }
    for feature, on in features.items():
        used = sum(1 for run in runs if on(run))
        assert 0 < used < len(runs), f"{feature}: on in {used} of {len(runs)} seeds"


def test_every_subscriber_feature_is_on_in_some_seeds_and_off_in_others() -> None:
    runs = [run for seed in SEEDS
            if isinstance(run := get_scenario("subscriber-swarm").build(seed), SubscriberScenario)]
    assert len(runs) == len(SEEDS)
    features: dict[str, Callable[[SubscriberScenario], bool]] = {
        "ordering keys": lambda s: s.keys > 0,
        "byte limit": lambda s: s.flow.max_bytes <= 100_000,
        "slow callbacks": lambda s: s.slow > 0,
        "capped leases": lambda s: s.flow.max_lease_duration_s < 3600,
        "raising callbacks": lambda s: s.fail > 0,
        "nacking callbacks": lambda s: s.nack > 0,
        "delivery limit": lambda s: s.max_deliveries is not None,
        "no retry policy": lambda s: s.retry is None,
        "pause": lambda s: s.pause_at is not None,
        "crash": lambda s: s.crash_at is not None,
        "batched jobs": lambda s: s.callbacks_per_job > 1,
    }
    for feature, on in features.items():
        used = sum(1 for run in runs if on(run))
        assert 0 < used < len(runs), f"{feature}: on in {used} of {len(runs)} seeds"


@pytest.mark.parametrize("name", ["broker-swarm", "subscriber-swarm"])
def test_the_draws_are_the_runs_first_text_note_and_the_run_passes(name: str) -> None:
    for seed in range(3):
        run = run_scenario(name, seed)
        notes = [
            event.message for event in run.sim.trace if event.kind is EventKind.NOTE and type(event.message) is str
        ]
        assert notes[0] == scenario_draws(name, seed)
        assert run.report.ok, run.report.violations
