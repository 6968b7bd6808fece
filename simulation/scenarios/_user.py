"""Scenarios of a user's own actors: a workload drawn from the seed, the actors it spawns, the checkers it names.

A user writes an ``ActorScenario`` in their own module and names it ``module:NAME`` on the command
line (or installs it under the ``conveyor.scenarios`` entry point group, ``_plugins.py``). The
registry runs it as its ``actors`` family: the workload travels as an ``ActorWorkload`` (the user's
data beside the scenario that spawns and judges it), so simulate, replay, the portfolio, the sweep
and the shrinker treat it as they treat a built-in scenario.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Generic, Protocol, TypeVar, final

import attrs

from conveyor.runtime import EventKind, Terminated, TraceEvent
from conveyor.simulation import Fault, FaultApplied, RunResult, Simulation, Strategy
from conveyor.simulation.checkers import CheckResult, delivery_steps, guarded, story_lines

W = TypeVar("W")
W_contra = TypeVar("W_contra", contravariant=True)


class Checker(Protocol[W_contra]):
    """A checker of a user scenario: a pure function of the run's trace and its workload to one verdict or several.

    It reads only trace events (what actors sent, received and noted with ``ctx.note``), never
    the actors themselves, so the same checker judges a run on any backend.
    """

    def __call__(self, trace: list[TraceEvent], workload: W_contra, /) -> CheckResult | list[CheckResult]:
        """The verdict(s) on one run."""
        ...


def _check_name(value: str) -> str:
    """A scenario name fits a comma-separated list and never reads as ``module:NAME``."""
    if not value or any(char in value for char in ",: ") or value in ("all", "plugins"):
        msg = (f"scenario name {value!r} must be non-empty, without ',', ':' or spaces, and not 'all' or "
               f"'plugins' (those words and forms mean something on the command line)")
        raise ValueError(msg)
    return value


@final
@attrs.frozen
class ActorScenario(Generic[W]):
    """A scenario of your own actors, runnable by ``conveyor simulate``, ``replay`` and ``sweep`` as ``module:NAME``.

    Attributes:
        name: its name (``conveyor simulate mypkg.scenarios:NAME`` finds it by this or by its attribute name).
        summary: one line for ``conveyor simulate --list``.
        build: the workload drawn from a seed, through ``seeded_random`` (so the shrinker can shrink its draws).
        spawn: spawns the workload's actors into the ``Simulation``; the run goes on until nothing is left to do.
        checks: the checkers judging every run (each one guarded: a checker that raises is a failing verdict).
        finish: after the run went quiet and its faults ended, spawns what reads the final state (a final
            audit whose notes the checkers read); the run then goes quiet again. None: nothing to read.
        default_faults: the fault plan (``FAULT_PLANS`` names, comma separated) when none is asked for.
        draw_faults: the concrete faults of one fault plan name for a workload, drawn from the generator given
            (``Crash``, ``Pause``, ``Delay``, ``Drop`` ... on your actors' paths); a name it does not know
            draws nothing. None: the scenario runs without faults whatever the plan.
        fault_rotation: the plans the default portfolio adds by seed (``seed % len``), as ``FAULTS_OF`` for a family.
        simpler: simpler workloads than the one given, biggest cut first, for the shrinker (None: it shrinks only
            the choice stream: faults, your actors' ``ctx.random`` choices and the schedule).
    """

    name: str = attrs.field(converter=_check_name)
    summary: str
    build: Callable[[int], W]
    spawn: Callable[[Simulation, W], object]
    checks: tuple[Checker[W], ...] = ()
    finish: Callable[[Simulation, W], object] | None = None
    default_faults: str = "none"
    draw_faults: Callable[[W, random.Random, str], Iterable[Fault]] | None = None
    fault_rotation: tuple[str, ...] = ("none",)
    simpler: Callable[[W], Iterable[W]] | None = None

    def __attrs_post_init__(self) -> None:
        for field in ("build", "spawn"):
            if not callable(getattr(self, field)):
                msg = f"ActorScenario {self.name!r}: {field} must be callable, got {getattr(self, field)!r}"
                raise TypeError(msg)
        if not isinstance(self.checks, tuple) or not all(callable(check) for check in self.checks):
            msg = f"ActorScenario {self.name!r}: checks must be a tuple of checker functions, got {self.checks!r}"
            raise TypeError(msg)


@final
@attrs.frozen
class ActorWorkload:
    """A user scenario's workload as the registry carries it: the drawn data, and the scenario that runs it."""

    data: Any
    scenario: ActorScenario[Any] = attrs.field(eq=False, repr=False)

    @property
    def draws(self) -> str:
        """What the seed drew, when the data says (its own ``draws``), as for a swarm scenario; else ""."""
        return str(getattr(self.data, "draws", ""))


def build_actor_workload(scenario: ActorScenario[Any], seed: int) -> ActorWorkload:
    """The scenario's workload of ``seed``, wrapped for the registry."""
    return ActorWorkload(scenario.build(seed), scenario)


def run_actor_simulation(
    work: ActorWorkload, seed: int, strategy: Strategy, faults: Sequence[Fault] = (),
    system: Callable[..., Simulation] = Simulation, max_steps: int = 500_000,
) -> tuple[Simulation, RunResult]:
    """Spawn the workload's actors, run to quiet, end the faults and ``finish`` (run to quiet again), shut down."""
    sim = system(seed=seed, strategy=strategy, faults=tuple(faults))
    work.scenario.spawn(sim, work.data)
    result = sim.run(max_steps=max_steps)
    if result.quiet and work.scenario.finish is not None:
        sim.end_faults()
        work.scenario.finish(sim, work.data)
        more = sim.run(max_steps=max_steps)
        result = RunResult(result.steps + more.steps, more.time, more.quiet)
    sim.shutdown()
    return sim, result


def check_actor_run(trace: list[TraceEvent], work: ActorWorkload) -> list[CheckResult]:
    """Every checker the scenario names, each guarded (one that raises fails by its own name)."""
    results: list[CheckResult] = []
    for check in work.scenario.checks:
        results += guarded(getattr(check, "__name__", repr(check)), check, trace, work.data)
    return results


def draw_actor_faults(work: ActorWorkload, rng: random.Random, plan: str) -> tuple[ActorWorkload, tuple[Fault, ...]]:
    """The scenario's faults for each name of ``plan``, in order, from one generator (so they replay)."""
    draw = work.scenario.draw_faults
    if draw is None:
        return work, ()
    return work, tuple(fault for name in plan.split(",") if name != "none" for fault in draw(work.data, rng, name))


def actor_candidates(work: ActorWorkload) -> Iterator[ActorWorkload]:
    """The scenario's simpler workloads (its ``simpler``), wrapped; none when it names no way to simplify."""
    if work.scenario.simpler is not None:
        for data in work.scenario.simpler(work.data):
            yield attrs.evolve(work, data=data)


STORY_REPR = 100
"""Characters of a message's repr shown in a user scenario's story line."""


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= STORY_REPR else text[: STORY_REPR - 3] + "..."


def actor_steps(trace: Iterable[TraceEvent]) -> int:
    """A user scenario's length for the shrinker: the messages its actors were handed (its own story's steps)."""
    return sum(1 for event in trace if event.kind is EventKind.DELIVERED)


def actor_story(trace: Iterable[TraceEvent]) -> list[str]:
    """A user scenario's run as lines: each message handed to an actor, each note, fault, failure and stop.

    The built-in ``story_lines`` tells queues, clients and sessions; your actors' messages are told
    as their reprs (``t=0.000 /teller-0 -> /account: Read()``).
    """
    lines: list[str] = []
    for event in trace:
        stamp = f"t={event.time:.3f}"
        if event.kind is EventKind.DELIVERED:
            lines.append(f"{stamp} {event.sender or '<outside>'} -> {event.receiver}: {_shown(event.message)}")
        elif event.kind is EventKind.NOTE:
            lines.append(f"{stamp} {event.sender}: notes {_shown(event.message)}")
        elif event.kind is EventKind.FAULT and isinstance(event.message, FaultApplied):
            lines.append(f"{stamp} fault: {_shown(event.message.fault)} ({event.message.outcome})")
        elif event.kind is EventKind.FAILED:
            lines.append(f"{stamp} {event.receiver}: failed on {type(event.message).__name__}: {event.error}")
        elif (event.kind is EventKind.STOPPED and isinstance(event.message, Terminated)
              and event.message.reason != "shutdown"):
            lines.append(f"{stamp} {event.receiver}: stopped ({event.message.reason})")
    return lines


def scenario_steps(trace: list[TraceEvent], workload: object) -> int:
    """How long a run is, as the shrinker counts: delivery steps, or a user scenario's ``actor_steps``."""
    return actor_steps(trace) if isinstance(workload, ActorWorkload) else delivery_steps(trace)


def scenario_story(trace: list[TraceEvent], workload: object) -> list[str]:
    """A run told as lines: ``story_lines`` for a built-in scenario, ``actor_story`` for a user's."""
    return actor_story(trace) if isinstance(workload, ActorWorkload) else story_lines(trace)
