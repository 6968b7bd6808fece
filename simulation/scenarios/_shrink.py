"""Shrinking: from a failing scenario run to a short one that fails the same checker, told as a story.

A run draws everything from one choice stream (``conveyor.simulation.ChoiceStream``): the
workload and its feature draws, the faults, the clients' random choices, job durations and
every scheduling choice, in the order the run asks. A failing run found from a seed is first
rerun recording its stream (the same run, trace for trace); ``shrink`` then reduces it in two
alternating phases (the workload first), keeping a candidate only when it still fails the checker that failed first:

* the stream, as hypothesis shrinks its buffer: truncate it (a replay past its end takes the
  simplest choice of every draw), delete chunks, zero chunks, lower single values. Every edit
  is a valid run, because a replayed value too big for its draw is clamped. A candidate is kept
  when its run has fewer delivery steps, or as many and a shorter or smaller stream;
* the workload, as data, to go below what its draws can reach (one message, one consumer, plain
  client policies, fewer groups, priorities, selectors and colours, fewer fault plans). The
  workload is then fixed, its draws leave the stream, and each candidate is tried replaying the
  rest of the stream, with the simplest choices, and with the seed's own draws.

A run cut off by its step budget is never a failure here: the shrinker will not shrink towards a
cut-off, and refuses a run whose only finding is one. When the result still has more than
``STORY_STEPS`` delivery steps, ``ShrinkResult.note`` says why.

Why not hypothesis's shrinker itself: it must find the failure before it can shrink it, and it
has no public way to start from a known failing buffer; the failures we shrink were found by a
seeded random walk or PCT over hundreds of choices. ``HypothesisStrategy`` remains the tool when
hypothesis does both the search and the shrinking, inside a test.

Every verdict comes from ``run_scenario`` itself, so the shrunk run is exactly what the registry
runs and judges; ``story_lines`` then tells that run as readable lines: who published, delivered,
acked, nacked or released what.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, final

import attrs

from conveyor.simulation import ChoiceStream, choice_stream

from ._broker import BrokerScenario, ClientPolicy
from ._paging import PagingScenario
from ._pubsub import PubSubScenario
from ._pubsub_clients import ClientPlan
from ._registry import (
    STEP_BUDGET,
    RunReport,
    ScenarioRun,
    Variant,
    check_fault_plan,
    get_scenario,
    run_scenario,
)
from ._subscriber import SubscriberScenario
from ._transactions import TxScenario
from ._tx_zk import zk_setup_candidates
from ._user import ActorWorkload, actor_candidates, scenario_steps, scenario_story
from ._zk_basics import ZkBasicsScenario

Workload = (BrokerScenario | SubscriberScenario | PubSubScenario | PagingScenario | ZkBasicsScenario | TxScenario
            | ActorWorkload)

STORY_STEPS = 15
"""A shrunk run this short (in delivery steps) reads as a story; a longer one comes with a note saying why."""

CANDIDATE_STEPS_FACTOR = 4
"""A candidate may take this many times the steps of the failing run (plus 1,000) before it is cut off."""


# --- running candidates -----------------------------------------------------------------------


def _normal(choices: Sequence[int]) -> tuple[int, ...]:
    """A stream without its trailing zeros (a replay past its end draws the simplest choices anyway)."""
    end = len(choices)
    while end and choices[end - 1] == 0:
        end -= 1
    return tuple(choices[:end])


@final
@attrs.frozen
class _Attempt:
    """One candidate's run: its workload (None: built from the stream), fault plan and stream, and its run."""

    workload: Workload | None
    plan: str
    choices: tuple[int, ...]
    run: ScenarioRun = attrs.field(eq=False, repr=False)

    @property
    def violations(self) -> tuple[str, ...]:
        return self.run.report.violations

    @property
    def deliveries(self) -> int:
        return scenario_steps(self.run.sim.trace, self.run.workload)

    @property
    def key(self) -> tuple[int, int, tuple[int, ...]]:
        """Smaller is simpler: fewer delivery steps, then a shorter stream, then smaller choices."""
        return (self.deliveries, len(self.choices), self.choices)


def _checkers(violations: Iterable[str]) -> list[str]:
    return [line.split(":", 1)[0] for line in violations]


class _Budget(Exception):
    """The shrinker ran out of runs; the best run so far stands."""


@final
class _Runner:
    """Runs candidates through ``run_scenario`` inside a ``choice_stream`` block; counts runs."""

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

    def attempt(self, workload: Workload | None, plan: str, choices: Sequence[int] | None) -> _Attempt:
        """Run ``workload`` (None: the seed's, built from the stream) under ``plan``.

        ``choices`` None records: every draw comes from its seeded source, as in a plain run of
        the seed (the strategy's choices included). A sequence is replayed. After the first run,
        ``max_steps`` is capped (``cap``): a candidate that runs far longer than the failure it
        shrinks is cut off early rather than spending the whole budget (and its trace's memory).
        """
        if self.runs >= self.max_runs:
            raise _Budget
        self.runs += 1
        stream = ChoiceStream(choices)
        with choice_stream(stream):
            run = run_scenario(
                self.name, self.seed, strategy=self.strategy, depth=self.depth, faults=plan, variant=self.variant,
                workload=workload, max_steps=self.max_steps,
            )
        return _Attempt(workload, plan, _normal(stream.drawn), run)

    def cap(self, steps: int) -> None:
        """Cut candidates off after a few times the ``steps`` of the run being shrunk."""
        self.max_steps = min(self.max_steps, CANDIDATE_STEPS_FACTOR * steps + 1000)

    def split(self, choices: Sequence[int]) -> tuple[Workload, tuple[int, ...]]:
        """The workload the seed's build draws from ``choices``, and the rest of the stream after its draws."""
        stream = ChoiceStream(choices)
        with choice_stream(stream):
            workload = self.spec.build(self.seed)
        return workload, tuple(choices[len(stream.drawn) :])


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
    for callbacks in _fewer(work.callback_clients):
        yield attrs.evolve(work, callback_clients=callbacks)
    plain = ClientPolicy()
    if any(policy != plain for policy in work.consumers):
        yield attrs.evolve(work, consumers=(plain,) * consumers)
    for index, policy in enumerate(work.consumers):
        if policy != plain:
            yield attrs.evolve(work, consumers=(*work.consumers[:index], plain, *work.consumers[index + 1 :]))
        for field in ("nack", "release", "ignore", "late_ack", "crash_after", "stale_nack", "confirm"):
            if getattr(policy, field):
                simpler = attrs.evolve(policy, **{field: 0})
                yield attrs.evolve(work, consumers=(*work.consumers[:index], simpler, *work.consumers[index + 1 :]))
        for sooner in _fewer(policy.crash_after, floor=1):  # leaving sooner: a shorter story of what it took
            simpler = attrs.evolve(policy, crash_after=sooner)
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
    if work.immediate:
        yield attrs.evolve(work, immediate=0.0)
    if work.batch:
        yield attrs.evolve(work, batch=0)
    if work.oversize:
        yield attrs.evolve(work, oversize=0.0)
    if work.reconfigure_at is not None:
        yield attrs.evolve(work, reconfigure_at=None)
    if work.consumer_leases:
        yield attrs.evolve(work, consumer_leases=())


def _tx_candidates(work: TxScenario) -> Iterator[TxScenario]:
    """Simpler transactions workloads: fewer items and containers, fewer workers, no failures, no misuser."""
    for batches in _fewer(work.batches, floor=1):
        yield attrs.evolve(work, batches=batches)
    for size in _fewer(work.batch_size, floor=1):
        yield attrs.evolve(work, batch_size=size)
    for count in _fewer(len(work.containers), floor=1):
        kept = tuple(crash for crash in work.container_crashes if crash[0] < count)
        yield attrs.evolve(work, containers=work.containers[:count], container_crashes=kept)
    for index, workers in enumerate(work.containers):
        for fewer in _fewer(workers, floor=1):
            yield attrs.evolve(work, containers=(*work.containers[:index], fewer, *work.containers[index + 1 :]))
    if work.fail_percent:
        yield attrs.evolve(work, fail_percent=0)
    if work.misuse:
        yield attrs.evolve(work, misuse=False)
    if work.backoff is not None:
        yield attrs.evolve(work, backoff=None)
    yield from zk_setup_candidates(work)


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


def _paging_candidates(work: PagingScenario) -> Iterator[PagingScenario]:
    """Simpler paging workloads: fewer operations, one memory target, one body size."""
    for operations in _fewer(work.operations, floor=1):
        yield attrs.evolve(work, operations=operations)
    for index in range(1, len(work.targets)):
        yield attrs.evolve(work, targets=(work.targets[index],))
    if len(work.targets) > 1:
        yield attrs.evolve(work, targets=work.targets[:1])
    for size in work.body_sizes if len(work.body_sizes) > 1 else ():
        yield attrs.evolve(work, body_sizes=(size,))


def _zk_candidates(work: ZkBasicsScenario) -> Iterator[ZkBasicsScenario]:
    """Simpler ZooKeeper workloads: fewer clients and requests, fewer hand-made expiries, no slow requests."""
    for clients in _fewer(work.clients, floor=1):
        yield attrs.evolve(work, clients=clients, closes_at_end=work.closes_at_end[:clients])
    for operations in _fewer(work.operations, floor=1):
        yield attrs.evolve(work, operations=operations)
    for expiries in _fewer(len(work.expiries)):
        yield attrs.evolve(work, expiries=work.expiries[:expiries])
    if work.faults.slow:
        yield attrs.evolve(work, faults=attrs.evolve(work.faults, slow=0.0))


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
        if client.seek_at is not None:
            simpler_clients.append(attrs.evolve(client, seek_at=None))
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


def _stream_candidates(choices: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
    """Edits of a stream, biggest first: truncations, deleted chunks, zeroed chunks, lowered values."""
    length = len(choices)
    for keep in sorted({0, length // 8, length // 4, length // 2, (3 * length) // 4, length - 1}):
        if keep < length:
            yield choices[:keep]
    size = length // 2
    while size >= 1:
        for start in range(0, length - size + 1, size):
            yield choices[:start] + choices[start + size :]
        for start in range(0, length - size + 1, size):
            if any(choices[start : start + size]):
                yield choices[:start] + (0,) * size + choices[start + size :]
        size //= 2
    for index, choice in enumerate(choices):
        for lower in dict.fromkeys((choice // 2, choice - 1)):
            if choice > 0 and lower < choice:
                yield (*choices[:index], lower, *choices[index + 1 :])


# --- the shrinker ---------------------------------------------------------------------------------


@final
class _Shrinker:
    """Greedy reduction of one failing run; each accepted candidate still fails ``target``, within its budget.

    The workload phase takes the first simpler workload or fault plan whose run fails at all (big
    cuts first: they shorten the stream the most); the stream phase the first edited stream whose
    run is simpler (``_Attempt.key``). Both alternate until neither finds anything, or the
    runner's budget runs out.
    """

    def __init__(self, runner: _Runner, target: str) -> None:
        self.runner = runner
        self.target = target
        self.passed: set[str] = set()  # workload candidates (by repr: selectors may be dicts) seen to pass
        self.best: _Attempt | None = None

    def fails(self, attempt: _Attempt | None) -> bool:
        """The run fails the target checker, and it ran to its end (a cut-off judges an unfinished run)."""
        return attempt is not None and not attempt.run.report.cut_off and self.target in _checkers(attempt.violations)

    def attempt(self, workload: Workload | None, plan: str, choices: Sequence[int] | None) -> _Attempt | None:
        """One candidate run, or None when the scenario cannot run it."""
        try:
            return self.runner.attempt(workload, plan, choices)
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
                best, stream_changed = self._stream(best)
                changed = workload_changed or stream_changed
        except _Budget:
            assert self.best is not None
            return self.best  # accepted inside a phase the budget cut short
        return best

    def _accept(self, attempt: _Attempt) -> _Attempt:
        self.best = attempt
        return attempt

    def _stream(self, best: _Attempt) -> tuple[_Attempt, bool]:
        changed = False
        improved = True
        while improved:
            improved = False
            for candidate in _stream_candidates(best.choices):
                attempt = self.attempt(best.workload, best.plan, candidate)
                if attempt is not None and self.fails(attempt) and attempt.key < best.key:
                    best, improved, changed = self._accept(attempt), True, True
                    break
        return best, changed

    def _workload(self, best: _Attempt) -> tuple[_Attempt, bool]:
        changed = False
        improved = True
        while improved:
            improved = False
            if best.workload is None:
                work, rest = self.runner.split(best.choices)
            else:
                work, rest = best.workload, best.choices
            candidates: list[tuple[Workload, str]] = [(work, plan) for plan in _plan_candidates(best.plan)]
            more: Iterable[Workload]
            if isinstance(work, ActorWorkload):
                more = actor_candidates(work)
            elif isinstance(work, ZkBasicsScenario):
                more = _zk_candidates(work)
            elif isinstance(work, TxScenario):
                more = _tx_candidates(work)
            elif isinstance(work, PagingScenario):
                more = _paging_candidates(work)
            elif isinstance(work, BrokerScenario):
                more = _broker_candidates(work)
            elif isinstance(work, PubSubScenario):
                more = _pubsub_candidates(work)
            else:
                more = _subscriber_candidates(work)
            candidates.extend((candidate, best.plan) for candidate in more)
            for candidate, plan in candidates:
                attempt = self._try_workload(candidate, plan, rest)
                if attempt is not None:
                    best, improved, changed = self._accept(attempt), True, True
                    break
        return best, changed

    def _try_workload(self, candidate: Workload, plan: str, rest: tuple[int, ...]) -> _Attempt | None:
        """The candidate replaying the rest of the stream, with the simplest choices, or with the seed's draws."""
        key = repr((candidate, plan, rest))
        if key in self.passed:
            return None
        for choices in dict.fromkeys((rest, ())):
            attempt = self.attempt(candidate, plan, choices)
            if self.fails(attempt):
                return attempt
        seeded = self.attempt(candidate, plan, None)
        if self.fails(seeded):
            return seeded
        self.passed.add(key)
        return None


@final
@attrs.frozen
class ShrinkResult:
    """A short failing run, and how it was reached.

    Attributes:
        workload: the shrunk workload, before faults are drawn.
        choices: the rest of the shrunk run's choice stream (after the workload's own draws);
            ``replay()`` runs ``workload`` replaying it.
        schedule: the shrunk run's scheduling choices (trailing zeros dropped), for reading.
        report: the shrunk run's report, from ``run_scenario``; its violations name the checker.
        story: the shrunk run told step by step (``story_lines``).
        checker: the checker the run was kept failing.
        deliveries: delivery steps of the shrunk run.
        original_deliveries: delivery steps of the run shrinking started from.
        runs: simulations run while shrinking.
        note: why the run is still longer than ``STORY_STEPS`` delivery steps ("" when it is not).
        scenario, seed, strategy, depth: the run's, for ``replay``.
    """

    workload: Workload
    choices: tuple[int, ...]
    schedule: tuple[int, ...]
    report: RunReport
    story: tuple[str, ...]
    checker: str
    deliveries: int
    original_deliveries: int
    runs: int
    note: str
    scenario: str
    seed: int
    strategy: str = "random"
    depth: int = 3

    def replay(self, variant: Variant | None = None, max_steps: int = 500_000) -> ScenarioRun:
        """Run the shrunk run again (with the same ``variant``): the same trace, the same verdicts."""
        with choice_stream(ChoiceStream(self.choices)):
            return run_scenario(
                self.scenario, self.seed, strategy=self.strategy, depth=self.depth, faults=self.report.faults,
                variant=variant, workload=self.workload, max_steps=max_steps,
            )


def _note(best: _Attempt, runs: int, max_runs: int, target: str) -> str:
    if best.deliveries <= STORY_STEPS:
        return ""
    if runs >= max_runs:
        return (f"the budget of {max_runs} runs ran out with {best.deliveries} delivery steps left; "
                f"a larger max_runs may shrink further")
    return (f"no cut of the workload or the fault plan, and no edit of the choice stream, fails {target} "
            f"in fewer than {best.deliveries} delivery steps: the failure needs that many")


def shrink(
    name: str,
    seed: int,
    *,
    strategy: str = "random",
    depth: int = 3,
    faults: str | None = None,
    variant: Variant | None = None,
    workload: Workload | None = None,
    choices: Sequence[int] | None = None,
    checker: str | None = None,
    max_runs: int = 600,
    max_steps: int = 500_000,
) -> ShrinkResult:
    """Reduce a failing run of scenario ``name`` to a short run that fails the same checker.

    Args:
        name, seed, strategy, depth, faults, variant, workload: the failing run, as given to
            ``run_scenario``.
        choices: start from this recorded choice stream instead of the seed's draws (after
            ``workload``'s draws when a workload is given).
        checker: the checker to keep failing (default: the first one that failed).
        max_runs: stop shrinking after this many simulations; the best run so far stands.
        max_steps: each run gives up after this many deliveries (a cut-off, never a failure).

    Returns:
        The shrunk workload and choice stream, its report, its story, and a note when it is long.

    Raises:
        ValueError: an unknown scenario, strategy or fault plan; the run does not fail (or does
            not fail ``checker``); or it was cut off by its step budget.
    """
    spec = get_scenario(name)
    plan = check_fault_plan(faults if faults is not None else spec.default_faults)
    variant = variant or Variant()
    runner = _Runner(name, seed, strategy, depth, variant, max_steps, max(1, max_runs))
    original = runner.attempt(workload, plan, choices)
    report = original.run.report
    failed = [checker_ for checker_ in _checkers(report.violations) if checker_ != STEP_BUDGET]
    if report.cut_off:
        msg = (f"{name} seed {seed} ({strategy}, faults {plan}) was cut off by its step budget of {max_steps} "
               f"delivery steps before it went quiet: its verdicts judge an unfinished run, so there is no "
               f"failure to shrink (rerun with a larger max_steps)")
        raise ValueError(msg)
    if not failed:
        msg = f"{name} seed {seed} ({strategy}, faults {plan}) passes every checker: nothing to shrink"
        raise ValueError(msg)
    target = checker or failed[0]
    if target not in failed:
        msg = f"{name} seed {seed} fails {', '.join(dict.fromkeys(failed))} but not {target!r}: nothing to shrink"
        raise ValueError(msg)
    runner.cap(report.steps)
    best = _Shrinker(runner, target).shrink(original)
    if best.deliveries > original.deliveries:  # a simpler workload that tells a longer story is no shrink
        best = original
    work, rest = runner.split(best.choices) if best.workload is None else (best.workload, best.choices)
    return ShrinkResult(
        workload=work, choices=rest, schedule=_normal(best.run.sim.schedule), report=best.run.report,
        story=tuple(scenario_story(best.run.sim.trace, best.run.workload)), checker=target, deliveries=best.deliveries,
        original_deliveries=original.deliveries, runs=runner.runs,
        note=_note(best, runner.runs, runner.max_runs, target),
        scenario=name, seed=seed, strategy=strategy, depth=depth,
    )
