"""The default portfolio: which strategy and fault plan a seed of a scenario runs under when none is asked for.

Coyote's default test run rotates its strategies across iterations; a bug that only one
strategy or one fault finds is then found without anyone thinking to ask for it. Here seed
``n`` of a scenario runs under ``PORTFOLIO_STRATEGIES[n % 4]`` and under the scenario's own
fault plan plus ``FAULTS_OF[family][n % 7]`` (``none``: the scenario's plan alone). The two
cycles are coprime, so 28 consecutive seeds meet every (strategy, fault) pair once, and seed 0
of every scenario is the random walk under the scenario's own plan, as before the portfolio.
The choice is a function of (scenario, seed) alone and is written out in full in the run's
replay command (``--strategy``, ``--depth``, ``--faults``), so a failure replays exactly.
"""

from __future__ import annotations

from typing import Final, final

import attrs

from ._registry import Family, ScenarioRun, Variant, get_scenario, run_scenario

PORTFOLIO_STRATEGIES: Final[tuple[tuple[str, int], ...]] = (("random", 3), ("pct", 2), ("random", 3), ("pct", 5))
"""(strategy, PCT depth) by ``seed % 4``: the random walk on half the seeds, PCT at depths 2 and 5 on the rest."""

FAULTS_OF: Final[dict[Family, tuple[str, ...]]] = {
    "broker": ("none", "crash", "delay", "queue-crash", "pause", "never-ack", "disk-error"),
    "subscriber": ("none", "crash", "delay", "queue-crash", "pause", "failing-job", "disk-error"),
    "pubsub": ("none", "crash", "delay", "queue-crash", "pause", "never-ack", "disk-error"),
    "storage": ("none", "process-crash"),
    "zookeeper": ("none",),
    "transactions": ("none", "crash", "delay", "queue-crash", "pause"),
    "actors": ("none",),  # a user's ActorScenario names its own (``fault_rotation``)
}
"""The fault plans rotated by ``seed % 7``, per family: those that do something there (no family has both
``never-ack``, a broker client or Pub/Sub client that stops acking, and ``failing-job``, a subscriber job)."""


@final
@attrs.frozen
class PortfolioChoice:
    """What one seed of one scenario runs under in the default portfolio."""

    strategy: str
    depth: int
    faults: str


def portfolio_choice(name: str, seed: int) -> PortfolioChoice:
    """The strategy, PCT depth and fault plan of seed ``seed`` of scenario ``name`` in the default portfolio.

    Raises:
        ValueError: an unknown scenario (the message lists them).
    """
    spec = get_scenario(name)
    strategy, depth = PORTFOLIO_STRATEGIES[seed % len(PORTFOLIO_STRATEGIES)]
    rotated = spec.fault_rotation or FAULTS_OF[spec.family]
    extra = rotated[seed % len(rotated)]
    plans = [plan for plan in spec.default_faults.split(",") if plan != "none"]
    if extra != "none" and extra not in plans:
        plans.append(extra)
    return PortfolioChoice(strategy, depth, ",".join(plans) or "none")


def run_portfolio(
    name: str, seed: int, *, variant: Variant | None = None, max_steps: int = 500_000, hash_trace: bool = True
) -> ScenarioRun:
    """``run_scenario`` under the portfolio's choice for (``name``, ``seed``): what ``conveyor simulate`` runs."""
    choice = portfolio_choice(name, seed)
    return run_scenario(
        name, seed, strategy=choice.strategy, depth=choice.depth, faults=choice.faults, variant=variant,
        max_steps=max_steps, hash_trace=hash_trace,
    )
