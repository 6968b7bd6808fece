"""The Pub/Sub front's request limits in the simulator: a prober client's requests over and at each limit.

Every probe kind, over and at its limit, through the real front (``request_limits`` judges them
all and finds nothing); a subscription that half-applies a refused settlement is caught by
``acks_from_receivers`` (the refused probe is no ``SettleSent``), a topic that half-applies a
refused publish by ``request_limits``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import attrs
import pytest

from conveyor.simulation.scenarios import Variant, run_scenario
from conveyor.simulation.scenarios._pubsub import random_pubsub_scenario
from conveyor.simulation.scenarios._pubsub_limits import OVER_ONLY, PROBE_KINDS, LimitProbe, draw_limit_probes
from tests.simulation.planted.pubsub_limits import HalfAppliedPublish, HalfAppliedSettle

EVERY_PROBE = tuple(
    LimitProbe(0.8 + 0.3 * index, kind, over)
    for index, (kind, over) in enumerate((kind, over) for kind in PROBE_KINDS for over in (True, False)
                                         if over or kind not in OVER_ONLY)
)


@pytest.fixture(autouse=True)
def _quiet_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.CRITICAL, logger="conveyor")
    yield


def _run(seed: int, probes: tuple[LimitProbe, ...], variant: Variant | None = None) -> dict[str, object]:
    workload = attrs.evolve(random_pubsub_scenario(seed, "front"), probes=probes)
    run = run_scenario("pubsub-front", seed, workload=workload, variant=variant, faults="none")
    verdicts = {result.checker: result for result in run.results}
    return {"ok": run.report.ok, "violations": run.report.violations, "limits": verdicts["request_limits"]}


@pytest.mark.parametrize("seed", [0, 3])
def test_the_real_front_refuses_every_probe_over_a_limit_and_no_probe_at_one(seed: int) -> None:
    run = _run(seed, EVERY_PROBE)
    assert run["ok"], run["violations"]
    limits = run["limits"]
    metrics = dict(limits.metrics)  # type: ignore[attr-defined]
    assert metrics["judged"] == len(EVERY_PROBE)
    assert metrics["refused"] == sum(1 for probe in EVERY_PROBE if probe.over)


def test_a_half_applied_settlement_is_an_unbacked_ack() -> None:
    probes = (LimitProbe(1.0, "ack-ids", True),)
    assert _run(0, probes)["ok"]
    broken = _run(0, probes, Variant(subscription=HalfAppliedSettle))
    assert any(line.startswith("acks_from_receivers:") for line in broken["violations"]), broken  # type: ignore[attr-defined]


def test_a_half_applied_publish_is_caught_by_request_limits() -> None:
    probes = (LimitProbe(1.0, "attribute-key", True),)
    assert _run(0, probes)["ok"]
    broken = _run(0, probes, Variant(topic=HalfAppliedPublish))
    assert any(line.startswith("request_limits:") for line in broken["violations"]), broken  # type: ignore[attr-defined]


def test_probes_are_drawn_from_a_generator_of_their_own() -> None:
    assert draw_limit_probes(7, 5.0) == draw_limit_probes(7, 5.0)
    drawn = [draw_limit_probes(seed, 5.0) for seed in range(40)]
    assert 20 <= sum(1 for probes in drawn if probes) <= 38
    assert {probe.kind for probes in drawn for probe in probes} == set(PROBE_KINDS)
