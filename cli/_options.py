"""The options ``simulate``, ``replay`` and ``sweep`` share: one name per idea and one grammar.

The grammar (docs/simulation.md, "Command-line options"): a comma separates alternatives in
every list option (scenarios, strategies, fault plans), each tried in turn; ``+`` joins fault
plans into one plan whose faults all happen in the same run (``crash+delay``); ``default`` is
each scenario's own plan. ``replay`` reruns one run, so it takes one strategy and one plan.

Old spellings stay as hidden options that still work and print one deprecation line on
stderr: ``sweep --seed-start`` (now ``--first-seed``), ``sweep --strategies`` (now
``--strategy``) and ``replay --faults a,b`` (a replay command printed before the ``+``
spelling; now ``a+b``).
"""

from __future__ import annotations

from typing import Final

import typer

from conveyor.simulation.scenarios import FAULT_PLANS, spell_fault_plan

DEFAULT_FAULTS: Final = "default"
"""A fault plan entry standing for each scenario's own plan."""
FAULTS_GRAMMAR: Final = (
    f"Fault plans, comma separated, each tried in turn: {DEFAULT_FAULTS} (the scenario's own), "
    f"{', '.join(FAULT_PLANS)}; join plans with + to have them in the same run (crash+delay)."
)
STRATEGIES_GRAMMAR: Final = "Scheduling strategies, comma separated, each tried in turn: random, pct, round-robin."


def deprecated(old: str, new: str) -> None:
    """One line on stderr: ``old`` still works, ``new`` is its name now."""
    typer.echo(f"note: {old} is deprecated; use {new}", err=True)


def parse_strategy_list(text: str) -> tuple[str, ...]:
    """Comma-separated strategy names, each checked; the message names the option and the allowed values."""
    from conveyor.simulation import STRATEGY_NAMES

    names = tuple(dict.fromkeys(part.strip() for part in text.split(",")))
    for name in names:
        if name not in STRATEGY_NAMES:
            msg = f"unknown strategy {name!r}; choose one or more (comma separated) of: {', '.join(STRATEGY_NAMES)}"
            raise typer.BadParameter(msg)
    return names


def parse_fault_list(text: str) -> tuple[str, ...]:
    """Comma-separated fault plans (``+`` joins plans into one), normalised as the registry spells a plan.

    ``default`` stays ``default``; ``crash+delay`` becomes ``crash,delay`` (the registry's spelling of
    one combined plan, which ``run_scenario`` takes).
    """
    from conveyor.simulation.sweep import parse_fault_plans

    try:
        return parse_fault_plans(text)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None


def parse_one_fault_plan(text: str) -> str | None:
    """``replay``'s one plan: ``default`` (None: the scenario's own) or plans joined with ``+``.

    ``a,b`` is the spelling replay commands printed before ``+``: read as ``a+b``, with a note.
    """
    plans = parse_fault_list(text)
    if len(plans) > 1:
        if DEFAULT_FAULTS in plans:
            msg = f"replay runs one fault plan; got {len(plans)} ({text[:60]!r}); join plans with +"
            raise typer.BadParameter(msg)
        joined = "+".join(spell_fault_plan(plan) for plan in plans)
        deprecated(f"--faults {text}", f"--faults {joined} (+ joins plans)")
        plans = parse_fault_list(joined)
    (plan,) = plans
    return None if plan == DEFAULT_FAULTS else plan
