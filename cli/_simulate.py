"""``conveyor simulate`` and ``conveyor replay``: run scenarios over many seeds, replay one run bit for bit.

``simulate`` runs a registry scenario (or all of them) over a range of seeds under one
strategy and fault plan, with a progress bar, then prints a summary table. A failing run
is printed as soon as it ends, with its seed, its checkers' first messages and the one
command that replays it (a checker that raised is such a failure); with ``--shrink`` the
first failure is reduced to a short run told step by step.
``replay`` reruns one (scenario, seed, strategy, depth, faults) and prints its trace hash
and every checker's verdict, so two machines can compare a run by its hash.

The simulation modules are imported inside the commands, so ``conveyor demo`` and
``conveyor bench`` do not load every scenario.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import attrs
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from conveyor.simulation.scenarios import FAULT_PLANS, STEP_BUDGET

if TYPE_CHECKING:
    from conveyor.simulation.scenarios import RunReport

ALL = "all"
PORTFOLIO = "portfolio"
ROTATED = "rotated"
"""What the summary shows for the strategy and faults of a portfolio sweep (each failure names its own)."""
SHOWN_VIOLATIONS = 3
"""Checker messages printed per failing run."""


# --- argument checks: the message names the option and the allowed values ----------------------


def _scenario_names() -> tuple[str, ...]:
    from conveyor.simulation.scenarios import scenario_names

    return scenario_names()


def check_scenario_or_all(value: str) -> str:
    """A registry scenario name, or ``all``."""
    names = _scenario_names()
    if value != ALL and value not in names:
        msg = f"unknown scenario {value!r}; choose one of: {', '.join(names)}, {ALL}"
        raise typer.BadParameter(msg)
    return value


def check_scenario(value: str) -> str:
    """A registry scenario name."""
    names = _scenario_names()
    if value not in names:
        msg = f"unknown scenario {value!r}; choose one of: {', '.join(names)}"
        raise typer.BadParameter(msg)
    return value


def check_strategy(value: str) -> str:
    """One of the strategies a seed alone builds."""
    from conveyor.simulation import STRATEGY_NAMES

    if value not in STRATEGY_NAMES:
        msg = f"unknown strategy {value!r}; choose one of: {', '.join(STRATEGY_NAMES)}"
        raise typer.BadParameter(msg)
    return value


def check_optional_strategy(value: str | None) -> str | None:
    """None (the default portfolio), or one of the strategies a seed alone builds."""
    return None if value is None else check_strategy(value)


def check_faults(value: str | None) -> str | None:
    """None (each scenario's own plan), or fault plan names, comma separated; returned normalised."""
    if value is None:
        return None
    from conveyor.simulation.scenarios import check_fault_plan

    try:
        return check_fault_plan(value)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None


@contextmanager
def _quiet_actor_logs() -> Iterator[None]:
    """Silence conveyor's per-failure tracebacks while runs go (a scenario's callbacks raise on purpose,
    a planted bug may crash an actor hundreds of times); the checkers and the stories report failures."""
    logger = logging.getLogger("conveyor")
    level = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        logger.setLevel(level)


def full_replay_command(report: RunReport) -> str:
    """The report's replay command (the registry names ``--faults`` whenever it differs from the default)."""
    return report.replay_command


def _console() -> Console:
    """The commands' console: the terminal's width, or 120 columns when output goes to a pipe or a file."""
    console = Console()
    if not console.is_terminal:
        console.width = max(console.width, 120)
    return console


def compact(value: object) -> str:
    """An attrs value showing only the fields that differ from their defaults (recursively, tuples too)."""
    if isinstance(value, tuple):
        if value and all(item == value[0] for item in value) and len(value) > 1:
            return f"{len(value)} x {compact(value[0])}"
        return "(" + ", ".join(compact(item) for item in value) + ("," if len(value) == 1 else "") + ")"
    cls: Any = type(value)
    if not attrs.has(cls):
        return repr(value)
    parts = []
    for field in attrs.fields(cls):
        if not field.init:
            continue
        current = getattr(value, field.name)
        default = field.default
        if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            default = default.factory()
        if default is attrs.NOTHING or current != default:
            parts.append(f"{field.name}={compact(current)}")
    return f"{type(value).__name__}({', '.join(parts)})"


def _line(console: Console, text: str, style: str | None = None) -> None:
    """Print ``text`` as it is: no markup, no highlighting, no wrapping (a story line stays one line)."""
    console.print(text, style=style, markup=False, highlight=False, soft_wrap=True)


# --- simulate -------------------------------------------------------------------------------------


def _mean(values: Sequence[float]) -> str:
    return f"{statistics.fmean(values):.3f}" if values else "-"


def _summary(reports: Sequence[RunReport], scenarios: Sequence[str], strategy: str | None) -> Table:
    table = Table(
        title=f"conveyor simulate: {len(reports)} runs",
        caption="fairness: mean Jain's index over runs; p99: worst run's publish-to-delivery p99 (virtual ms)",
    )
    for column in ("scenario", "strategy", "faults", "runs", "failures", "steps/run", "fairness", "p99 ms"):
        table.add_column(column, justify="left" if column in ("scenario", "strategy", "faults") else "right")
    for name in scenarios:
        rows = [report for report in reports if report.scenario == name]
        if not rows:
            continue
        failures = sum(1 for report in rows if not report.ok)
        fairness = [report.fairness for report in rows if report.fairness is not None]
        p99 = [report.latency_p99_ms for report in rows if report.latency_p99_ms is not None]
        table.add_row(
            name, strategy or PORTFOLIO, rows[0].faults if strategy else ROTATED, str(len(rows)),
            f"[red]{failures}[/red]" if failures else "0",
            f"{statistics.fmean(report.steps for report in rows):.0f}", _mean(fairness),
            f"{max(p99):.1f}" if p99 else "-",
        )
    return table


def _print_failure(console: Console, report: RunReport) -> None:
    found = len(report.violations) - report.cut_off
    outcome = f"{found} violation(s)" if found else ""
    if report.cut_off:  # a distinct outcome: the run was stopped, no checker found anything by it
        outcome = "step budget exhausted" + (f", and {outcome}" if outcome else "")
    depth = f" depth {report.depth}" if report.strategy == "pct" else ""
    _line(
        console,
        f"{'CUT OFF' if report.cut_off else 'FAILED'} {report.scenario} seed {report.seed} "
        f"({report.strategy}{depth}, faults {report.faults}): {outcome}",
        "bold red",
    )
    for line in report.violations[:SHOWN_VIOLATIONS]:
        _line(console, f"  {line}")
    if len(report.violations) > SHOWN_VIOLATIONS:
        _line(console, f"  ... and {len(report.violations) - SHOWN_VIOLATIONS} more")
    from conveyor.simulation.scenarios import scenario_draws

    draws = scenario_draws(report.scenario, report.seed)
    if draws:
        _line(console, f"  {draws}")  # which configuration a swarm scenario's seed ran
    _line(console, f"  replay: {full_replay_command(report)}")


def _print_shrunk(console: Console, report: RunReport, max_steps: int) -> None:
    from conveyor.simulation.scenarios import STORY_STEPS, shrink

    _line(console, f"Shrinking {report.scenario} seed {report.seed} ...")
    result = shrink(
        report.scenario, report.seed, strategy=report.strategy, depth=report.depth, faults=report.faults,
        max_steps=max_steps,
    )
    _line(
        console,
        f"Shrunk to {result.deliveries} delivery steps (from {result.original_deliveries}) in {result.runs} runs; "
        f"still fails {result.checker}, faults {result.report.faults}, "
        f"{sum(1 for choice in result.schedule if choice)} choice(s) off the first ready channel.",
    )
    if result.note:
        _line(console, f"Still longer than {STORY_STEPS} delivery steps: {result.note}", "yellow")
    _line(console, f"workload: {compact(result.workload)}")
    _line(console, f"choice stream ({len(result.choices)} choices after the workload's): {list(result.choices)}")
    _line(console, f"schedule: {list(result.schedule)}")
    for line in result.report.violations[:SHOWN_VIOLATIONS]:
        _line(console, f"  {line}")
    _line(console, "story:")
    for line in result.story:
        _line(console, f"  {line}")


def run_simulate(
    scenario: str, *, seeds: int, first_seed: int, strategy: str | None, depth: int | None, faults: str | None,
    shrink: bool, max_steps: int, console: Console,
) -> int:
    """Run the seeds, print the progress, the failures as they come, the table (and a shrunk one); return the exit code.

    With neither ``strategy`` nor ``faults`` each seed runs under the default portfolio's choice
    (``portfolio_choice``); otherwise under ``strategy`` (random walk if None), ``depth`` (3 if None)
    and ``faults`` (each scenario's own if None).
    """
    from conveyor.simulation.scenarios import portfolio_choice, run_scenario, scenario_names

    names = scenario_names() if scenario == ALL else (scenario,)
    portfolio = strategy is None and faults is None
    reports: list[RunReport] = []
    with _quiet_actor_logs():
        with Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=console,
        ) as progress:
            for name in names:
                task = progress.add_task(f"{name} ({strategy or PORTFOLIO})", total=seeds)
                for seed in range(first_seed, first_seed + seeds):
                    plan: str | None
                    if portfolio:
                        choice = portfolio_choice(name, seed)
                        chosen, chosen_depth, plan = choice.strategy, choice.depth, choice.faults
                    else:
                        chosen, chosen_depth, plan = strategy or "random", depth or 3, faults
                    run = run_scenario(name, seed, strategy=chosen, depth=chosen_depth, faults=plan,
                                       max_steps=max_steps, hash_trace=False)
                    reports.append(run.report)
                    if not run.report.ok:  # at once, above the bar: a sweep stopped early keeps what it found
                        _print_failure(progress.console, run.report)
                    progress.advance(task)
        console.print(_summary(reports, names, strategy))
        failed = [report for report in reports if not report.ok]
        if failed and shrink:
            _print_shrunk(console, failed[0], max_steps)
    if failed:
        cut_off = sum(1 for report in failed if report.cut_off)
        note = f" ({cut_off} cut off by the step budget of {max_steps} deliveries)" if cut_off else ""
        _line(console, f"{len(failed)} of {len(reports)} runs failed{note}.", "bold red")
        return 1
    _line(console, f"All {len(reports)} runs passed every checker.", "green")
    return 0


def simulate_command(
    scenario: str = typer.Argument(
        ..., callback=check_scenario_or_all, metavar="SCENARIO", help="A scenario name, or 'all' for every one."
    ),
    seeds: int = typer.Option(20, "--seeds", min=1, help="How many seeds to run."),
    first_seed: int = typer.Option(0, "--first-seed", min=0, help="The first seed."),
    strategy: str | None = typer.Option(
        None, "--strategy", callback=check_optional_strategy,
        help="Scheduling strategy: random, pct or round-robin (default: the portfolio's; random with --faults).",
    ),
    depth: int | None = typer.Option(None, "--depth", min=1, help="PCT's bug depth (default 3)."),
    faults: str | None = typer.Option(
        None, "--faults", callback=check_faults,
        help=f"Fault plans, comma separated: {', '.join(FAULT_PLANS)} (default: the portfolio's rotation, "
        "or each scenario's own when --strategy is given).",
    ),
    shrink: bool = typer.Option(False, "--shrink", help="Shrink the first failing run and print its story."),
    max_steps: int = typer.Option(500_000, "--max-steps", min=1, help="Give up a run after this many deliveries."),
) -> None:
    """Run a scenario over many seeds; print each failure with the command that replays it, then a summary.

    With no --strategy and no --faults, seeds rotate through the default portfolio: the random walk
    and PCT at depths 2 and 5, under each scenario's own faults plus crash, delay, queue crash, pause,
    never-ack or failing job, and disk error, by seed (docs/simulation.md).
    """
    code = run_simulate(
        scenario, seeds=seeds, first_seed=first_seed, strategy=strategy, depth=depth, faults=faults,
        shrink=shrink, max_steps=max_steps, console=_console(),
    )
    if code:
        raise typer.Exit(code)


# --- replay ---------------------------------------------------------------------------------------


def run_replay(
    scenario: str, *, seed: int, strategy: str, depth: int, faults: str | None, story: bool, max_steps: int,
    console: Console,
) -> int:
    """Rerun one run; print its trace hash, figures and verdicts (and its story); return the exit code."""
    from conveyor.simulation.checkers import story_lines
    from conveyor.simulation.scenarios import run_scenario, scenario_draws

    with _quiet_actor_logs():
        run = run_scenario(scenario, seed, strategy=strategy, depth=depth, faults=faults, max_steps=max_steps)
    report = run.report
    _line(
        console,
        f"{scenario} seed {seed} ({strategy}{f', depth {depth}' if strategy == 'pct' else ''}, "
        f"faults {report.faults})",
    )
    _line(console, f"trace hash {report.trace_hash}")
    draws = scenario_draws(scenario, seed)
    if draws:
        _line(console, draws)
    _line(
        console,
        f"{report.steps} steps, {len(run.sim.schedule)} choices, virtual time {report.virtual_time:.3f} s; "
        f"published {report.published}, delivered {report.delivered}, acked {report.acked}, "
        f"redelivered {report.redelivered}, dead-lettered {report.dead_lettered}",
    )
    for result in run.results:
        _line(console, f"  {result}", None if result.ok else "red")
    for line in report.violations:
        if line.startswith(STEP_BUDGET + ":"):
            _line(console, f"  {line}", "red")
    if story:
        _line(console, "story:")
        for line in story_lines(run.sim.trace):
            _line(console, f"  {line}")
    if report.ok:
        _line(console, "every checker passed", "green")
        return 0
    found = len(report.violations) - report.cut_off
    _line(console, ("CUT OFF: step budget exhausted; " if report.cut_off else "") + f"{found} violation(s)", "bold red")
    return 1


def replay_command(
    scenario: str = typer.Argument(..., callback=check_scenario, metavar="SCENARIO", help="The scenario's name."),
    seed: int = typer.Option(..., "--seed", help="The run's seed."),
    strategy: str = typer.Option(
        "random", "--strategy", callback=check_strategy, help="Scheduling strategy: random, pct or round-robin."
    ),
    depth: int = typer.Option(3, "--depth", min=1, help="PCT's bug depth."),
    faults: str | None = typer.Option(
        None, "--faults", callback=check_faults,
        help="Fault plans, comma separated (default: the scenario's own).",
    ),
    story: bool = typer.Option(False, "--story", help="Print the run step by step."),
    max_steps: int = typer.Option(500_000, "--max-steps", min=1, help="Give up after this many deliveries."),
) -> None:
    """Rerun one run bit for bit and print its trace hash and every checker's verdict."""
    code = run_replay(
        scenario, seed=seed, strategy=strategy, depth=depth, faults=faults, story=story, max_steps=max_steps,
        console=_console(),
    )
    if code:
        raise typer.Exit(code)
