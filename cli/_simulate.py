"""``conveyor simulate`` and ``conveyor replay``: run scenarios over many seeds, replay one run bit for bit.

``simulate`` runs scenarios (built-in ones, installed plugins' or ``module:NAME`` from the user's
own module) over a range of seeds under one strategy and fault plan, with a progress bar, then
prints a summary table; ``--list`` lists the scenarios it can name. A failing run
is printed as soon as it ends, with its seed, its checkers' first messages and the one
command that replays it (a checker that raised is such a failure); with ``--shrink`` the
first failure is reduced to a short run told step by step.
``replay`` reruns one (scenario, seed, strategy, depth, faults) and prints its trace hash
and every checker's verdict, so two machines can compare a run by its hash; with ``--shrink`` a
failing run is then shrunk and the shrunk run replayed.

The simulation modules are imported inside the commands, so ``conveyor demo`` and
``conveyor bench`` do not load every scenario.
"""

from __future__ import annotations

import logging
import os
import statistics
import sys
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
    from conveyor.simulation.scenarios import RunReport, ScenarioRun, ShrinkResult

PORTFOLIO = "portfolio"
ROTATED = "rotated"
"""What the summary shows for the strategy and faults of a portfolio sweep (each failure names its own)."""
SHOWN_VIOLATIONS = 3
"""Checker messages printed per failing run."""


# --- argument checks: the message names the option and the allowed values ----------------------


def importable_from_cwd(scenarios: str) -> None:
    """Let ``module:NAME`` name a module in the current folder, as ``python -m`` does (appended: never shadowing)."""
    folder = os.getcwd()
    if ":" in scenarios and folder not in sys.path:
        sys.path.append(folder)


def check_scenario_or_all(value: str | None) -> str | None:
    """Scenario names, comma separated: ``all`` (the built-ins), ``plugins``, NAME or MODULE:NAME."""
    if value is None:
        return None
    from conveyor.simulation.scenarios import parse_scenario_names

    importable_from_cwd(value)
    try:
        parse_scenario_names(value)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None
    return value


def check_scenario(value: str) -> str:
    """One scenario: a built-in or installed plugin's NAME, or MODULE:NAME."""
    from conveyor.simulation.scenarios import get_scenario

    importable_from_cwd(value)
    try:
        get_scenario(value)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None
    return value


def list_scenarios_option(value: bool) -> None:
    """``--list``: print every scenario a command can name (built-ins, then installed plugins) and exit."""
    if not value:
        return
    from conveyor.simulation.scenarios import ENTRY_POINT_GROUP, list_scenarios

    console = _console()
    table = Table(title="conveyor scenarios", caption=f"plugins: the {ENTRY_POINT_GROUP!r} entry point group; "
                  "'all' runs the built-ins, 'plugins' the installed ones; MODULE:NAME names one in your own module")
    for column in ("name", "origin", "summary"):
        table.add_column(column, no_wrap=column == "name")
    for listed in list_scenarios():
        table.add_row(listed.name, listed.origin, listed.summary)
    console.print(table)
    raise typer.Exit


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
        if not field.init or not field.repr:  # what repr leaves out (a user workload's scenario) stays out
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


def _print_shrunk(console: Console, report: RunReport, max_steps: int) -> ShrinkResult:
    """Shrink the report's run and print the result: its size, workload, choices and story."""
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
    return result


def run_simulate(
    scenario: str, *, seeds: int, first_seed: int, strategy: str | None, depth: int | None, faults: str | None,
    shrink: bool, max_steps: int, console: Console,
) -> int:
    """Run the seeds, print the progress, the failures as they come, the table (and a shrunk one); return the exit code.

    With neither ``strategy`` nor ``faults`` each seed runs under the default portfolio's choice
    (``portfolio_choice``); otherwise under ``strategy`` (random walk if None), ``depth`` (3 if None)
    and ``faults`` (each scenario's own if None).
    """
    from conveyor.simulation.scenarios import parse_scenario_names, portfolio_choice, run_scenario

    names = parse_scenario_names(scenario)
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
    scenario: str | None = typer.Argument(
        None, callback=check_scenario_or_all, metavar="SCENARIO",
        help="Scenario names, comma separated: a built-in or installed plugin's name, MODULE:NAME (a scenario in "
        "your own module), 'all' (every built-in one) or 'plugins' (every installed one). --list lists them.",
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
    _list: bool = typer.Option(
        False, "--list", is_eager=True, callback=list_scenarios_option, help="List the scenarios and exit."
    ),
) -> None:
    """Run a scenario over many seeds; print each failure with the command that replays it, then a summary.

    With no --strategy and no --faults, seeds rotate through the default portfolio: the random walk
    and PCT at depths 2 and 5, under each scenario's own faults plus crash, delay, queue crash, pause,
    never-ack or failing job, and disk error, by seed (docs/simulation.md).
    """
    if scenario is None:
        msg = "give a SCENARIO (or several, comma separated; --list lists them)"
        raise typer.BadParameter(msg, param_hint="SCENARIO")
    code = run_simulate(
        scenario, seeds=seeds, first_seed=first_seed, strategy=strategy, depth=depth, faults=faults,
        shrink=shrink, max_steps=max_steps, console=_console(),
    )
    if code:
        raise typer.Exit(code)


# --- replay ---------------------------------------------------------------------------------------


def run_replay(
    scenario: str, *, seed: int, strategy: str, depth: int, faults: str | None, story: bool, max_steps: int,
    console: Console, shrink: bool = False,
) -> int:
    """Rerun one run; print its trace hash, figures and verdicts (and its story); return the exit code.

    With ``shrink``, a failing run is then shrunk (``_print_shrunk``) and the shrunk run replayed from
    its workload and choices, its hash and verdicts printed: the short run is shown to fail the same way.
    """
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
    code = _print_verdicts(console, run, story)
    if shrink and report.cut_off:
        _line(console, "not shrinking: a run cut off by its step budget has no failure to shrink", "yellow")
    elif shrink and not report.ok:
        with _quiet_actor_logs():
            result = _print_shrunk(console, report, max_steps)
            again = result.replay(max_steps=max_steps)
        same = "the same as the shrunk run's" if again.report.trace_hash == result.report.trace_hash else "DIFFERENT"
        _line(console, f"replayed the shrunk run: trace hash {again.report.trace_hash} ({same})")
        _print_verdicts(console, again, story=False)
    return code


def _print_verdicts(console: Console, run: ScenarioRun, story: bool) -> int:
    """A run's figures, every checker's verdict (and its story), and the outcome; the exit code."""
    from conveyor.simulation.scenarios import scenario_story

    report = run.report
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
        for line in scenario_story(run.sim.trace, run.workload):
            _line(console, f"  {line}")
    if report.ok:
        _line(console, "every checker passed", "green")
        return 0
    found = len(report.violations) - report.cut_off
    _line(console, ("CUT OFF: step budget exhausted; " if report.cut_off else "") + f"{found} violation(s)", "bold red")
    return 1


def replay_command(
    scenario: str = typer.Argument(
        ..., callback=check_scenario, metavar="SCENARIO",
        help="The scenario: a built-in or installed plugin's name, or MODULE:NAME (as the replay command prints it).",
    ),
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
    shrink: bool = typer.Option(
        False, "--shrink", help="If the run fails: shrink it, print its story and replay the shrunk run."
    ),
) -> None:
    """Rerun one run bit for bit and print its trace hash and every checker's verdict."""
    code = run_replay(
        scenario, seed=seed, strategy=strategy, depth=depth, faults=faults, story=story, max_steps=max_steps,
        console=_console(), shrink=shrink,
    )
    if code:
        raise typer.Exit(code)
