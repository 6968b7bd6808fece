"""Shrinking: from a failing scenario run to a short one that fails the same checker, told as a story.

A failing run is fixed by (scenario, seed, strategy, faults, variant). ``shrink`` reduces
it in two alternating phases, keeping a candidate only when it still fails the checker
that failed first:

* the workload (attrs data): fewer messages, consumers and browsers, plain client
  policies, fewer groups, priorities, selectors and colours, a zero publish span, a
  smaller prefetch, fewer fault plans. Each candidate is tried under the plain order
  (always the first ready channel), under the current schedule replayed leniently (an
  index past the ready channels takes the last one), and under the original strategy;
* the schedule (delta debugging over the list of choices): truncate it (a replay past
  its end takes the first ready channel), delete chunks, zero chunks, lower single
  choices. A candidate must leave fewer non-default choices, or as many in a shorter or
  smaller list, so the phase ends.

Why not hypothesis's shrinker: hypothesis must find the failure itself before it can
shrink it, and it has no public way to start from a known failing stream of choices. The
failures we shrink were found by a seeded random walk or PCT over hundreds of choices,
which random draws rarely meet again; a greedy reduction that starts from the failure
always has a failing run in hand. ``HypothesisStrategy`` remains the tool when
hypothesis does both the search and the shrinking, inside a test.

Every verdict comes from ``run_scenario`` itself (a candidate schedule is replayed by it),
so the shrunk run is exactly what the registry runs and judges; ``story_lines`` then
tells that run as readable lines: who published, delivered, acked, nacked or released what.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, final

import attrs

from conveyor.simulation import Replay
from conveyor.simulation.checkers import delivery_steps, story_lines

from ._broker import BrokerScenario, ClientPolicy
from ._pubsub import PubSubScenario
from ._pubsub_clients import ClientPlan
from ._registry import (
    RunReport,
    ScenarioRun,
    Variant,
    check_fault_plan,
    draw_faults,
    get_scenario,
    run_scenario,
    simulate_workload,
)
from ._subscriber import SubscriberScenario

Workload = BrokerScenario | SubscriberScenario | PubSubScenario


# --- running candidates -----------------------------------------------------------------------


def _normal(schedule: Sequence[int]) -> tuple[int, ...]:
    """A schedule without its trailing zeros (a replay past its end chooses 0 anyway)."""
    end = len(schedule)
    while end and schedule[end - 1] == 0:
        end -= 1
    return tuple(schedule[:end])


def _schedule_key(schedule: Sequence[int]) -> tuple[int, int, tuple[int, ...]]:
    """Smaller is plainer: fewer choices off the first channel, then shorter, then lexicographically smaller."""
    return (sum(1 for choice in schedule if choice), len(schedule), tuple(schedule))


@final
@attrs.frozen
class _Attempt:
    """One candidate's run: what went in (the workload before faults are drawn) and what came out."""

    workload: Workload
    plan: str
    schedule: tuple[int, ...]
    run: ScenarioRun = attrs.field(eq=False, repr=False)

    @property
    def violations(self) -> tuple[str, ...]:
        return self.run.report.violations

    @property
    def deliveries(self) -> int:
        return delivery_steps(self.run.sim.trace)


def _checkers(violations: Iterable[str]) -> list[str]:
    return [line.split(":", 1)[0] for line in violations]


class _Budget(Exception):
    """The shrinker ran out of runs; the best run so far stands."""


@final
class _Runner:
    """Runs candidates through ``run_scenario`` itself, so every verdict is the registry's; counts runs.

    ``run_scenario`` takes a strategy name or a recorded schedule, not a strategy object. A
    lenient replay is therefore recorded first, in a bare simulation of the same scenario
    (faults drawn the same way), and its actual choices are then replayed by ``run_scenario``.
    Should that bare simulation ever drift from the registry's, the replay diverges and the
    candidate is dropped: drift can make shrinking weaker, never wrong.
    """

    def __init__(
        self, name: str, seed: int, strategy: str, depth: int, variant: Variant, max_steps: int, max_runs: int
    ) -> None:
        self.name = name
        self.spec = get_scenario(name)
        self.seed = seed
        self.strategy = strategy
        self.depth = depth
        self.variant = variant
        self.max_steps = max_steps
        self.max_runs = max_runs
        self.runs = 0

    def _count(self) -> None:
        if self.runs >= self.max_runs:
            raise _Budget
        self.runs += 1

    def attempt(self, workload: Workload, plan: str, schedule: Sequence[int] | None) -> _Attempt:
        """Run ``workload`` under ``plan``: replaying ``schedule``, or under the original strategy if None."""
        self._count()
        run = run_scenario(
            self.name, self.seed, strategy=self.strategy, depth=self.depth, faults=plan, schedule=schedule,
            variant=self.variant, workload=workload, max_steps=self.max_steps,
        )
        return _Attempt(workload, plan, _normal(run.sim.schedule), run)

    def lenient(self, workload: Workload, plan: str, choices: Sequence[int]) -> _Attempt:
        """Replay ``choices`` clamped to what each step offers (``Replay(clamp=True)``)."""
        self._count()
        work, faults = draw_faults(self.spec, workload, self.seed, plan)
        sim, _ = simulate_workload(work, self.seed, Replay(choices, clamp=True), faults, self.variant, self.max_steps)
        return self.attempt(workload, plan, sim.schedule)


# --- candidates -----------------------------------------------------------------------------------


def _fewer(count: int, floor: int = 0) -> list[int]:
    """Smaller counts to try, smallest first."""
    options = {floor, floor + 1, floor + 2, count // 4, count // 2, count - 1}
    return sorted(option for option in options if floor <= option < count)


def _without(values: tuple[Any, ...], index: int) -> tuple[Any, ...]:
    return values if not values else values[:index] + values[index + 1 :]


def _broker_candidates(work: BrokerScenario) -> Iterator[BrokerScenario]:
    """Simpler broker workloads, roughly from the biggest cut to the smallest."""
    for messages in _fewer(work.messages, floor=1):
        yield attrs.evolve(work, messages=messages)
    consumers = len(work.consumers)
    for keep in _fewer(consumers, floor=0 if work.browsers else 1):
        yield attrs.evolve(
            work, consumers=work.consumers[:keep], consumer_priorities=work.consumer_priorities[:keep],
            selectors=work.selectors[:keep],
        )
    for index in reversed(range(consumers)):
        if consumers > 1:
            yield attrs.evolve(
                work, consumers=_without(work.consumers, index),
                consumer_priorities=_without(work.consumer_priorities, index),
                selectors=_without(work.selectors, index),
            )
    for browsers in _fewer(work.browsers):
        yield attrs.evolve(work, browsers=browsers)
    plain = ClientPolicy()
    if any(policy != plain for policy in work.consumers):
        yield attrs.evolve(work, consumers=(plain,) * consumers)
    for index, policy in enumerate(work.consumers):
        if policy != plain:
            yield attrs.evolve(work, consumers=(*work.consumers[:index], plain, *work.consumers[index + 1 :]))
        for field in ("nack", "release", "ignore", "late_ack", "crash_after"):
            if getattr(policy, field):
                simpler = attrs.evolve(policy, **{field: 0})
                yield attrs.evolve(work, consumers=(*work.consumers[:index], simpler, *work.consumers[index + 1 :]))
    for groups in _fewer(work.groups):
        yield attrs.evolve(work, groups=groups)
    if len(work.priorities) > 1:
        for priority in work.priorities:
            yield attrs.evolve(work, priorities=(priority,))
    if any(work.consumer_priorities):
        yield attrs.evolve(work, consumer_priorities=())
        for index, rank in enumerate(work.consumer_priorities):
            if rank:
                ranks = work.consumer_priorities
                yield attrs.evolve(work, consumer_priorities=(*ranks[:index], 0, *ranks[index + 1 :]))
    if any(selector is not None for selector in work.selectors):
        yield attrs.evolve(work, selectors=())
        for index, selector in enumerate(work.selectors):
            if selector is not None:
                chosen = work.selectors
                yield attrs.evolve(work, selectors=(*chosen[:index], None, *chosen[index + 1 :]))
    if len(work.colours) > 1:
        yield attrs.evolve(work, colours=work.colours[:1])
    if work.publish_span_s > 0:
        yield attrs.evolve(work, publish_span_s=0.0)
    for prefetch in _fewer(work.prefetch, floor=1):
        yield attrs.evolve(work, prefetch=prefetch)
    # a swarm's feature draws shrink too: each feature off
    if work.ttls:
        yield attrs.evolve(work, ttls=())
    if work.delays:
        yield attrs.evolve(work, delays=())
    if work.max_length is not None:
        yield attrs.evolve(work, max_length=None)
    if work.retry is not None:
        yield attrs.evolve(work, retry=None)


def _subscriber_candidates(work: SubscriberScenario) -> Iterator[SubscriberScenario]:
    """Simpler subscriber workloads: fewer messages and keys, plainer callbacks, no pause or crash."""
    for messages in _fewer(work.messages, floor=1):
        yield attrs.evolve(work, messages=messages, burst=min(work.burst, messages))
    for keys in _fewer(work.keys):
        yield attrs.evolve(work, keys=keys)
    if work.fail:
        yield attrs.evolve(work, fail=0.0)
    if work.nack:
        yield attrs.evolve(work, nack=0.0)
    if work.slow:
        yield attrs.evolve(work, slow=0.0)
    for workers in _fewer(work.workers, floor=1):
        yield attrs.evolve(work, workers=workers)
    if work.pause_at is not None:
        yield attrs.evolve(work, pause_at=None, pause_s=0.0)
    if work.crash_at is not None:
        yield attrs.evolve(work, crash_at=None)
    for burst in _fewer(work.burst, floor=1):
        yield attrs.evolve(work, burst=burst)


def _pubsub_candidates(work: PubSubScenario) -> Iterator[PubSubScenario]:
    """Simpler Pub/Sub workloads: fewer subscriptions, clients, publishers and messages, plainer everything.

    A cut that ``PubSubScenario`` refuses (a subscription left without a client) is skipped.
    """
    seen = {work}
    for changes in _pubsub_cuts(work):
        try:
            candidate = attrs.evolve(work, **changes)
        except ValueError:
            continue
        if candidate not in seen:
            seen.add(candidate)
            yield candidate


def _pubsub_cuts(work: PubSubScenario) -> Iterator[dict[str, Any]]:
    """``_pubsub_candidates``' cuts, as changed fields (building one validates it)."""
    subscriptions, clients, publishers = work.subscriptions, work.clients, work.publishers
    if len(subscriptions) > 1:
        for index in reversed(range(len(subscriptions))):
            yield _without_subscription(work, index)
    if len(clients) > 1:
        for index in reversed(range(len(clients))):
            yield {"clients": _without(clients, index)}
    if len(publishers) > 1:
        for index in reversed(range(len(publishers))):
            yield {"publishers": _without(publishers, index)}
    for index, publisher in enumerate(publishers):
        simpler = [attrs.evolve(publisher, publishes=count) for count in _fewer(publisher.publishes, floor=1)]
        simpler += [attrs.evolve(publisher, max_batch=count) for count in _fewer(publisher.max_batch, floor=1)]
        simpler += [attrs.evolve(publisher, **{field: 0}) for field in ("poison", "keys", "gap_s")
                    if getattr(publisher, field)]
        for plain in simpler:
            yield {"publishers": (*publishers[:index], plain, *publishers[index + 1 :])}
    if any(not client.plain for client in clients):
        yield {"clients": tuple(_plain(client) for client in clients)}
    for index, client in enumerate(clients):
        simpler_clients = [_plain(client)] if not client.plain else []
        zeroed: dict[str, Any] = dict.fromkeys(("nack", "ignore", "late", "extend", "duplicate", "stale"), 0.0)
        simpler_clients += [attrs.evolve(client, **{field: value}) for field, value in zeroed.items()
                            if getattr(client, field)]
        if client.forge is not None:
            simpler_clients.append(attrs.evolve(client, forge=None))
        if client.pull:
            simpler_clients.append(attrs.evolve(client, pull=False))
        simpler_clients += [attrs.evolve(client, max_messages=count) for count in _fewer(client.max_messages, floor=1)]
        for plain_client in simpler_clients:
            if plain_client != client:
                yield {"clients": (*clients[:index], plain_client, *clients[index + 1 :])}
    for index, subscription in enumerate(subscriptions):
        plain_fields: dict[str, Any] = {"exactly_once": False, "ordering": False, "filter": "", "retry": False,
                                        "dead_letter": False}
        for field, value in plain_fields.items():
            if getattr(subscription, field) != value:
                plain_sub = attrs.evolve(subscription, **{field: value})
                yield {"subscriptions": (*subscriptions[:index], plain_sub, *subscriptions[index + 1 :])}
    if work.drain_at_s > 0:
        yield {"drain_at_s": 0.0}


def _plain(client: ClientPlan) -> ClientPlan:
    """The client acking everything at once, still on its subscription, its way of receiving and its forging."""
    return ClientPlan(client.subscription, client.pull, client.max_messages, forge=client.forge)


def _without_subscription(work: PubSubScenario, index: int) -> dict[str, Any]:
    """Subscription ``index`` and its clients gone; later subscriptions renumbered, forgers on it made honest."""

    def moved(number: int) -> int:
        return number - 1 if number > index else number

    clients = tuple(
        attrs.evolve(client, subscription=moved(client.subscription),
                     forge=None if client.forge is None or client.forge == index else moved(client.forge))
        for client in work.clients if client.subscription != index
    )
    return {"subscriptions": _without(work.subscriptions, index), "clients": clients}


def _plan_candidates(plan: str) -> list[str]:
    if plan == "none":
        return []
    parts = plan.split(",")
    fewer = [",".join(part for part in parts if part != dropped) for dropped in parts] if len(parts) > 1 else []
    return ["none", *fewer]


def _schedule_candidates(schedule: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
    """Delta debugging over a choice list: truncations, deleted chunks, zeroed chunks, lowered choices."""
    length = len(schedule)
    for keep in sorted({0, length // 4, length // 2, (3 * length) // 4, length - 1}):
        if keep < length:
            yield schedule[:keep]
    size = length // 2
    while size >= 1:
        for start in range(0, length - size + 1, size):
            yield schedule[:start] + schedule[start + size :]
        for start in range(0, length - size + 1, size):
            chunk = schedule[start : start + size]
            if any(chunk):
                yield schedule[:start] + (0,) * size + schedule[start + size :]
        size //= 2
    for index, choice in enumerate(schedule):
        if choice > 1:
            yield (*schedule[:index], choice - 1, *schedule[index + 1 :])


# --- the shrinker ---------------------------------------------------------------------------------


@final
class _Shrinker:
    """Greedy reduction of one failing run; each accepted candidate still fails ``target``.

    The workload phase takes the first candidate (smallest cut first) that fails, under the
    plain order, the current schedule replayed leniently, or the original strategy; the
    schedule phase takes the first edited schedule whose run fails with a plainer schedule.
    Both phases alternate until neither finds anything, or the runner's budget runs out.
    """

    def __init__(self, runner: _Runner, target: str) -> None:
        self.runner = runner
        self.target = target
        self.passed: set[str] = set()  # candidates (by repr: selectors may be dicts) already seen to pass
        self.best: _Attempt | None = None

    def fails(self, attempt: _Attempt | None) -> bool:
        return attempt is not None and self.target in _checkers(attempt.violations)

    def attempt(
        self, workload: Workload, plan: str, *, schedule: Sequence[int] | None = None,
        lenient: Sequence[int] | None = None,
    ) -> _Attempt | None:
        """One candidate run, or None when the scenario cannot run it (a replay that diverges included)."""
        try:
            if lenient is not None:
                return self.runner.lenient(workload, plan, lenient)
            return self.runner.attempt(workload, plan, schedule)
        except _Budget:
            raise
        except Exception:  # noqa: BLE001 - a cut the scenario cannot run (no client left to crash) is no candidate
            return None

    def shrink(self, best: _Attempt) -> _Attempt:
        """Alternate the phases until neither finds anything; out of runs, the last accepted run stands."""
        self.best = best
        try:
            changed = True
            while changed:
                best, workload_changed = self._workload(best)
                best, schedule_changed = self._schedule(best)
                changed = workload_changed or schedule_changed
        except _Budget:
            assert self.best is not None
            return self.best  # accepted inside a phase the budget cut short
        return best

    def _workload(self, best: _Attempt) -> tuple[_Attempt, bool]:
        changed = False
        improved = True
        while improved:
            improved = False
            work = best.workload
            candidates: list[tuple[Workload, str]] = [(work, plan) for plan in _plan_candidates(best.plan)]
            more: Iterable[Workload]
            if isinstance(work, BrokerScenario):
                more = _broker_candidates(work)
            elif isinstance(work, PubSubScenario):
                more = _pubsub_candidates(work)
            else:
                more = _subscriber_candidates(work)
            candidates.extend((candidate, best.plan) for candidate in more)
            for candidate, plan in candidates:
                attempt = self._try_workload(candidate, plan, best.schedule)
                if attempt is not None:
                    best, improved, changed = attempt, True, True
                    self.best = best
                    break
        return best, changed

    def _try_workload(self, candidate: Workload, plan: str, schedule: tuple[int, ...]) -> _Attempt | None:
        key = repr((candidate, plan))
        if key in self.passed:
            return None
        plain = self.attempt(candidate, plan, schedule=())
        if self.fails(plain):
            return plain
        if schedule:
            kept = self.attempt(candidate, plan, lenient=schedule)
            if self.fails(kept):
                return kept
        original = self.attempt(candidate, plan)
        if self.fails(original):
            return original
        self.passed.add(key)
        return None

    def _schedule(self, best: _Attempt) -> tuple[_Attempt, bool]:
        changed = False
        improved = True
        while improved:
            improved = False
            for candidate in _schedule_candidates(best.schedule):
                attempt = self.attempt(best.workload, best.plan, lenient=candidate)
                if attempt is not None and self.fails(attempt) and (
                    _schedule_key(attempt.schedule) < _schedule_key(best.schedule)
                ):
                    best, improved, changed = attempt, True, True
                    self.best = best
                    break
        return best, changed


@final
@attrs.frozen
class ShrinkResult:
    """A short failing run, and how it was reached.

    Attributes:
        workload: the shrunk workload; ``run_scenario(name, seed, workload=..., schedule=...,
            faults=report.faults)`` (with the same variant) reproduces the run.
        schedule: the shrunk run's choices (trailing zeros dropped).
        report: the shrunk run's report, from ``run_scenario``; its violations name the checker.
        story: the shrunk run told step by step (``story_lines``).
        checker: the checker the run was kept failing.
        deliveries: delivery steps of the shrunk run.
        original_deliveries: delivery steps of the run shrinking started from.
        runs: simulations run while shrinking.
    """

    workload: Workload
    schedule: tuple[int, ...]
    report: RunReport
    story: tuple[str, ...]
    checker: str
    deliveries: int
    original_deliveries: int
    runs: int


def shrink(
    name: str,
    seed: int,
    *,
    strategy: str = "random",
    depth: int = 3,
    faults: str | None = None,
    variant: Variant | None = None,
    workload: Workload | None = None,
    schedule: Sequence[int] | None = None,
    checker: str | None = None,
    max_runs: int = 600,
    max_steps: int = 500_000,
) -> ShrinkResult:
    """Reduce a failing run of scenario ``name`` to a short run that fails the same checker.

    Args:
        name, seed, strategy, depth, faults, variant, workload: the failing run, as given to
            ``run_scenario``.
        schedule: start from these recorded choices instead of the strategy's.
        checker: the checker to keep failing (default: the first one that failed).
        max_runs: stop shrinking after this many simulations; the best run so far stands.
        max_steps: each run gives up after this many deliveries.

    Returns:
        The shrunk workload and schedule, its report and its story.

    Raises:
        ValueError: an unknown scenario, strategy or fault plan, or the run does not fail
            (or does not fail ``checker``).
    """
    spec = get_scenario(name)
    plan = check_fault_plan(faults if faults is not None else spec.default_faults)
    variant = variant or Variant()
    runner = _Runner(name, seed, strategy, depth, variant, max_steps, max(1, max_runs))
    original = runner.attempt(workload if workload is not None else spec.build(seed), plan, schedule)
    failed = _checkers(original.violations)
    if not failed:
        msg = f"{name} seed {seed} ({strategy}, faults {plan}) passes every checker: nothing to shrink"
        raise ValueError(msg)
    target = checker or failed[0]
    if target not in failed:
        msg = f"{name} seed {seed} fails {', '.join(dict.fromkeys(failed))} but not {target!r}: nothing to shrink"
        raise ValueError(msg)
    best = _Shrinker(runner, target).shrink(original)
    return ShrinkResult(
        workload=best.workload, schedule=best.schedule, report=best.run.report,
        story=tuple(story_lines(best.run.sim.trace)), checker=target, deliveries=best.deliveries,
        original_deliveries=original.deliveries, runs=runner.runs,
    )
