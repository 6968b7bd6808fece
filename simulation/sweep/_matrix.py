"""The run matrix of a sweep: scenario x seed x strategy x fault plan, and its split into partitions.

A Spark task costs 10-25 ms here and a simulated run 30-500 ms, so a sweep never runs
one task per seed: the matrix is dealt into a few partitions per core. Runs of the
different scenarios cost very different amounts, so the deal is by estimated cost
(longest first onto the least loaded partition), which also spreads every scenario
over every partition. Everything here is pure and deterministic: the same arguments
give the same cells in the same partitions.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from typing import final

import attrs

from conveyor.simulation import STRATEGY_NAMES
from conveyor.simulation.scenarios import FAULT_PLANS, check_fault_plan, get_scenario, parse_scenario_names

DEFAULT_PLAN = "default"
"""A fault-plan entry that stands for each scenario's own default plan."""
DEFAULT_MAX_STEPS = 500_000
"""``run_scenario``'s own step budget: a run that has not gone quiet by then is a violation."""

COST_HINTS_MS: dict[str, float] = {
    "fairness": 110.0,
    "priorities": 55.0,
    "consumer-priorities": 75.0,
    "selectors": 75.0,
    "groups": 175.0,
    "crash-recovery": 50.0,
    "queue-crash": 70.0,  # measured beside crash-recovery: 30 vs 21 ms per run
    "leases": 80.0,
    "flow-control": 80.0,
    "ordering-keys": 105.0,
    "subscriber-crash": 110.0,
}
"""Mean milliseconds per run measured on this machine (2026-11, 12 runs each); only their ratios matter."""
UNKNOWN_COST_MS = 100.0


@final
@attrs.frozen
class SweepCell:
    """One run of the matrix: what ``run_scenario`` needs, and nothing else (so a row replays)."""

    scenario: str
    seed: int
    strategy: str
    depth: int
    faults: str
    max_steps: int = DEFAULT_MAX_STEPS

    def as_tuple(self) -> tuple[str, int, str, int, str, int]:
        """The cell in ``MATRIX_COLUMNS`` order (what a Spark row of the matrix holds)."""
        return (self.scenario, self.seed, self.strategy, self.depth, self.faults, self.max_steps)


MATRIX_COLUMNS = ("scenario", "seed", "strategy", "depth", "faults", "max_steps")


def parse_names(text: str, allowed: Sequence[str], what: str) -> tuple[str, ...]:
    """Split a comma-separated list (``all`` means every allowed name) and validate each name.

    Raises:
        ValueError: a name that is not allowed (the message lists the allowed ones).
    """
    names = [part.strip() for part in text.split(",") if part.strip()]
    if names == ["all"]:
        return tuple(allowed)
    for name in names:
        if name not in allowed:
            msg = f"unknown {what} {name!r}; choose from: all, {', '.join(allowed)}"
            raise ValueError(msg)
    if not names:
        msg = f"no {what} given; choose from: all, {', '.join(allowed)}"
        raise ValueError(msg)
    return tuple(dict.fromkeys(names))


def parse_scenarios(text: str) -> tuple[str, ...]:
    """Comma-separated scenario names: ``all`` (the built-ins), ``plugins`` (installed ones), NAME, MODULE:NAME."""
    return parse_scenario_names(text)


def parse_strategies(text: str) -> tuple[str, ...]:
    """Comma-separated strategy names (``random``, ``pct``, ``round-robin``)."""
    return parse_names(text, STRATEGY_NAMES, "strategy")


def parse_fault_plans(text: str) -> tuple[str, ...]:
    """Comma-separated matrix entries; each is ``default`` or a plan, plans combined with ``+``.

    ``none,crash+delay,default`` is three entries: no faults, crash and delay together, and
    each scenario's own default. Combined plans are normalised as the registry spells them
    (``crash,delay``).

    Raises:
        ValueError: an unknown fault plan, or an empty entry (``""`` is refused, not read as ``default``).
    """
    entries: list[str] = []
    for part in text.split(","):
        entry = part.strip()
        if not entry or "" in (plan.strip() for plan in entry.split("+")):
            msg = (f"empty fault plan in {text[:40]!r}; choose one or more (comma separated) of: "
                   f"{DEFAULT_PLAN}, {', '.join(FAULT_PLANS)} (join plans with + to combine them)")
            raise ValueError(msg)
        entries.append(entry if entry == DEFAULT_PLAN else check_fault_plan(entry.replace("+", ",")))
    return tuple(dict.fromkeys(entries))


def build_matrix(
    scenarios: Sequence[str],
    seeds: int,
    strategies: Sequence[str],
    fault_plans: Sequence[str] = (DEFAULT_PLAN,),
    *,
    seed_start: int = 0,
    depth: int = 3,
    max_steps: int = DEFAULT_MAX_STEPS,
) -> list[SweepCell]:
    """Every cell, ordered scenario, fault plan, strategy, seed (``default`` resolved per scenario, deduplicated).

    Raises:
        ValueError: an unknown scenario, or a non-positive seed count or step budget.
    """
    if max_steps < 1:
        msg = f"max_steps must be >= 1, got {max_steps}"
        raise ValueError(msg)
    if seeds < 1:
        msg = f"seeds must be >= 1, got {seeds}"
        raise ValueError(msg)
    cells: list[SweepCell] = []
    for name in scenarios:
        spec = get_scenario(name)
        plans = dict.fromkeys(spec.default_faults if plan == DEFAULT_PLAN else plan for plan in fault_plans)
        for plan in plans:
            for strategy in strategies:
                cells.extend(
                    SweepCell(name, seed, strategy, depth, plan, max_steps)
                    for seed in range(seed_start, seed_start + seeds)
                )
    return cells


def estimated_cost(cell: SweepCell) -> float:
    """Relative cost of one run (``COST_HINTS_MS``; unknown scenarios get ``UNKNOWN_COST_MS``)."""
    return COST_HINTS_MS.get(cell.scenario, UNKNOWN_COST_MS)


def plan_partitions(cells: Iterable[SweepCell], partitions: int) -> list[list[SweepCell]]:
    """Deal cells into ``partitions`` groups of about equal estimated cost.

    Longest-processing-time first: costliest cells first, each onto the least loaded group
    (ties to the lower index). Within a group, cells keep their matrix order. Empty groups
    are dropped, so there are never more groups than cells.

    Raises:
        ValueError: ``partitions`` < 1.
    """
    if partitions < 1:
        msg = f"partitions must be >= 1, got {partitions}"
        raise ValueError(msg)
    indexed = list(enumerate(cells))
    order = sorted(indexed, key=lambda item: (-estimated_cost(item[1]), item[0]))
    loads = [(0.0, group) for group in range(partitions)]
    members: list[list[tuple[int, SweepCell]]] = [[] for _ in range(partitions)]
    for index, cell in order:
        load, group = heapq.heappop(loads)
        members[group].append((index, cell))
        heapq.heappush(loads, (load + estimated_cost(cell), group))
    return [[cell for _, cell in sorted(group)] for group in members if group]


def partition_count(cells: int, cores: int, per_core: int) -> int:
    """A few partitions per core, never more than there are cells."""
    return max(1, min(cells, max(1, cores) * max(1, per_core)))
