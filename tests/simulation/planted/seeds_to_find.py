"""Seeds-to-find of every planted bug, random walk against PCT: a measurement, run by hand, not a test.

For each bug of ``catalog.PLANTED`` and each strategy, runs seeds ``0 .. seeds-1`` of its
scenario with its variant and counts the failing runs. Seeds-to-find is the first failing
seed plus one (how many seeds a search from seed 0 spends); the hit rate gives its mean
over starting points, ``seeds / hits``. Then shrinks the first random-walk failure and
reports its delivery steps. Prints a Markdown table for docs/simulation.md.

Run: ``.venv/bin/python -m tests.simulation.planted.seeds_to_find [--seeds 200] [--depth 3] [--only NAME ...]``.
"""

from __future__ import annotations

import argparse
import logging
import time

from conveyor.simulation.scenarios import run_scenario, shrink

from .catalog import PLANTED, PlantedBug, checkers_of


def _hits(bug: PlantedBug, strategy: str, seeds: int, depth: int) -> tuple[list[int], set[str]]:
    failing: list[int] = []
    found_by: set[str] = set()
    for seed in range(seeds):
        report = run_scenario(bug.scenario, seed, strategy=strategy, depth=depth, variant=bug.variant).report
        if not report.ok:
            failing.append(seed)
            found_by |= checkers_of(report.violations) & bug.checkers
    return failing, found_by


def _cell(failing: list[int], seeds: int) -> str:
    if not failing:
        return f"not found in {seeds}"
    return f"{failing[0] + 1} ({len(failing)}/{seeds}, mean {seeds / len(failing):.1f})"


def main(seeds: int = 200, depth: int = 3, only: tuple[str, ...] = ()) -> None:
    """Measure every planted bug (or those named in ``only``) and print the table."""
    unknown = set(only) - {bug.name for bug in PLANTED}
    if unknown:
        msg = f"unknown planted bug(s) {sorted(unknown)}; choose from {[bug.name for bug in PLANTED]}"
        raise SystemExit(msg)
    logging.disable(logging.CRITICAL)
    print(f"| bug | scenario | found by | random walk: seeds-to-find (hits, mean) | PCT d={depth}: seeds-to-find "
          "(hits, mean) | shrunk to (deliveries) |")
    print("|---|---|---|---|---|---|")
    for bug in PLANTED:
        if only and bug.name not in only:
            continue
        started = time.perf_counter()
        random_hits, by_random = _hits(bug, "random", seeds, depth)
        pct_hits, by_pct = _hits(bug, "pct", seeds, depth)
        shrunk = "-"
        if random_hits:
            result = shrink(bug.scenario, random_hits[0], variant=bug.variant, max_runs=bug.shrink_runs)
            shrunk = f"{result.original_deliveries} -> {result.deliveries} ({result.checker})"
        found_by = ", ".join(sorted(by_random | by_pct)) or "-"
        print(f"| {bug.name} | {bug.scenario} | {found_by} | {_cell(random_hits, seeds)} | "
              f"{_cell(pct_hits, seeds)} | {shrunk} |", flush=True)
        logging.getLogger(__name__).debug("%s took %.1f s", bug.name, time.perf_counter() - started)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--depth", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=[], help="planted bug names (default: all)")
    args = parser.parse_args()
    main(seeds=args.seeds, depth=args.depth, only=tuple(args.only))
