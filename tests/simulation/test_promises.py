"""Issue 17, item 1: the swarm and front scenarios exercise the promises their new checkers state.

A checker that judges nothing proves nothing: over a few seeds of the default portfolio each of
them must judge something, and pass on the real actors. (That each one can fail is the planted
bugs' part: ``planted/test_planted.py``.)
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator

import pytest

from conveyor.simulation.checkers import generation_of
from conveyor.simulation.scenarios import run_portfolio

BROKER = ("stale_nack", "ack_confirms", "immediate_publish", "publish_outcomes", "reconfigure")
FRONT = {"filter_respected": "judged", "key_order": "judged", "stream_flow": "peak", "seek_effect": "judged"}


@pytest.fixture(autouse=True)
def _quiet_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Injected faults and refused publishes log at ERROR by design."""
    caplog.set_level(logging.CRITICAL, logger="conveyor")
    yield


def _judged(scenario: str, seeds: int, metrics: dict[str, str]) -> Counter[str]:
    judged: Counter[str] = Counter()
    for seed in range(seeds):
        run = run_portfolio(scenario, seed)
        assert run.report.ok, (seed, run.report.violations)
        for result in run.results:
            if result.checker in metrics:
                judged[result.checker] += int(result.metric(metrics[result.checker]))
    return judged


def test_broker_swarm_exercises_stale_nacks_confirmed_acks_immediate_limits_and_reconfigure() -> None:
    judged = _judged("broker-swarm", 20, dict.fromkeys(BROKER, "judged"))
    assert all(judged[name] > 0 for name in BROKER), judged


def test_pubsub_front_exercises_filters_keys_flow_control_and_seek() -> None:
    judged = _judged("pubsub-front", 20, FRONT)
    assert all(judged[name] > 0 for name in FRONT), judged


def test_a_delivery_generation_is_read_from_its_ack_id() -> None:
    assert generation_of("3-2-7-11-1-1000000000004.00ff") == 2
    assert generation_of("not an ack id") == -1
