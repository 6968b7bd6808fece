"""A short sweep inside a test: the seeds of one scenario and fault plan that fail a checker."""

from __future__ import annotations

from collections.abc import Iterable

from conveyor.simulation.scenarios import run_scenario


def failing_seeds(name: str, seeds: Iterable[int], faults: str) -> list[tuple[int, tuple[str, ...]]]:
    """Each failing seed with its first violation, so a red test names the replay to run."""
    return [
        (seed, tuple(run.report.violations[:1]))
        for seed in seeds
        if not (run := run_scenario(name, seed, faults=faults)).report.ok
    ]
