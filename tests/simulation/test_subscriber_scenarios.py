"""The streaming subscriber under the simulator: 200 seeds per scenario kind, every checker green,
and each checker shown to catch a deliberately broken variant of one subscriber component."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import attrs
import pytest

from conveyor.actors.subscriber import (
    FlowControl,
    Leaser,
    LoadController,
    OrderedKeyHandler,
    StreamingPullManager,
    SubscriberMessage,
    WorkerPool,
)
from conveyor.actors.subscriber._protocol import Received, Tick
from conveyor.runtime import Actor, ActorRef, EventKind
from conveyor.simulation.checkers import (
    CheckResult,
    all_settled,
    flow_bound,
    lease_validity,
    no_loss,
    ordering_keys,
)
from conveyor.simulation.scenarios import (
    SubscriberScenario,
    check_subscriber_run,
    random_subscriber_scenario,
    run_subscriber_simulation,
)
from conveyor.simulation.scenarios._subscriber import KINDS

SEEDS = 200
QUEUE = "/queue"
SUB = "/sub"


@pytest.fixture(autouse=True)
def _quiet_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Raising callbacks and planted bugs log tracebacks by design; thousands of them only cost time."""
    caplog.set_level(logging.CRITICAL, logger="conveyor")
    yield


def _failures(results: Iterable[CheckResult]) -> list[str]:
    return [str(result) for result in results if not result.ok]


@pytest.mark.parametrize("kind", KINDS)
def test_every_checker_is_green_on_200_seeds(kind: str) -> None:
    """Slow callbacks, bursts over max_bytes, keys with nacks, a paused process, a crash and restart."""
    for seed in range(SEEDS):
        scenario = random_subscriber_scenario(seed, kind)
        sim, result = run_subscriber_simulation(scenario, seed)
        assert result.quiet, f"kind={kind} seed={seed}: still busy after {result.steps} steps"
        failures = _failures(check_subscriber_run(sim.trace, scenario))
        assert not failures, f"kind={kind} seed={seed}:\n" + "\n".join(failures)


def test_runs_are_deterministic() -> None:
    scenario = random_subscriber_scenario(7, "ordered")
    first, _ = run_subscriber_simulation(scenario, 7)
    second, _ = run_subscriber_simulation(scenario, 7)
    assert first.trace_hash() == second.trace_hash()


def test_the_scenarios_do_what_their_names_say() -> None:
    """Slow runs outlive the ack deadline, bursts exceed max_bytes, ordered runs redeliver, crashes restart."""

    def callback_spans(kind: str, seed: int) -> tuple[SubscriberScenario, list[Any]]:
        scenario = random_subscriber_scenario(seed, kind)
        sim, _ = run_subscriber_simulation(scenario, seed)
        return scenario, sim.trace

    scenario, trace = callback_spans("slow", 1)
    started = {e.message.ack_id: e.time for e in trace if type(e.message).__name__ == "CallbackStarted"}
    ended = {e.message.ack_id: e.time for e in trace if type(e.message).__name__ == "CallbackEnded"}
    assert max(ended[a] - started[a] for a in ended) > scenario.ack_deadline_s
    scenario, trace = callback_spans("burst", 0)
    assert flow_bound(trace, SUB, scenario.flow).metric("max_bytes") > scenario.flow.max_bytes
    scenario, trace = callback_spans("ordered", 0)
    assert any(type(e.message).__name__ == "CallbackStarted" and e.message.attempt > 1 for e in trace)
    scenario, trace = callback_spans("crash", 0)
    assert any(e.kind is EventKind.NOTE and e.sender == "/sub-2/workers" for e in trace)


@pytest.mark.xfail(
    strict=True,
    reason="open: a keyed message held past max_lease_duration_s loses its lease and is redelivered alone, "
    "after its key's later messages ran (the key's later messages are not sent back with it), so key order "
    "breaks; the 'slow' kind caps leases only for unordered runs",
)
def test_ordering_keys_hold_when_held_messages_outlive_max_lease_duration() -> None:
    for seed in range(20):
        deadline = 2.0
        flow = FlowControl(
            max_messages=4, min_duration_per_lease_extension_s=deadline, max_lease_duration_s=2.5 * deadline
        )
        scenario = SubscriberScenario(
            messages=15, keys=1, slow=0.4, slow_factor=(1.2, 4.0), flow=flow, workers=2, ack_deadline_s=deadline,
            burst=5, burst_gap_s=1.0,
        )
        sim, _ = run_subscriber_simulation(scenario, seed)
        failures = _failures(check_subscriber_run(sim.trace, scenario))
        assert not failures, f"seed={seed}:\n" + "\n".join(failures)


# --- planted bugs: each checker must catch its broken variant ----------------------------------

ManagerFactory = Callable[..., StreamingPullManager]


def _manager_with(**variants: Callable[..., Actor]) -> ManagerFactory:
    """A subscription whose named components (``load``, ``leaser``, ``keys``, ``workers``...) are variants."""

    class Variant(StreamingPullManager):
        def make_part(self, name: str, factory: Callable[..., Actor], *args: Any) -> ActorRef:
            return super().make_part(name, variants.get(name, factory), *args)

    return Variant


def _caught(
    checker: Callable[[list[Any], SubscriberScenario], CheckResult], kind: str | SubscriberScenario,
    manager: ManagerFactory, seeds: int = 30,
) -> CheckResult:
    """The first failing result of ``checker`` over seeds of ``kind`` (or one scenario) with the broken subscriber."""
    for seed in range(seeds):
        scenario = random_subscriber_scenario(seed, kind) if isinstance(kind, str) else kind
        sim, _ = run_subscriber_simulation(scenario, seed, manager=manager)
        result = checker(sim.trace, scenario)
        if not result.ok:
            return result
    pytest.fail(f"the checker did not catch the planted bug in {seeds} seeds of {kind!r}")


def _flow(trace: list[Any], scenario: SubscriberScenario) -> CheckResult:
    return flow_bound(trace, SUB, scenario.flow)


def _ordering(trace: list[Any], scenario: SubscriberScenario) -> CheckResult:
    return ordering_keys(trace, SUB)


def _leases(trace: list[Any], scenario: SubscriberScenario) -> CheckResult:
    return lease_validity(trace, QUEUE, SUB, scenario.flow)


def _loss(trace: list[Any], scenario: SubscriberScenario) -> CheckResult:
    return no_loss(trace, QUEUE)


def _settled(trace: list[Any], scenario: SubscriberScenario) -> CheckResult:
    return all_settled(trace, QUEUE)


class KeyBlindLoad(LoadController):  # type: ignore[misc]
    """Broken: leaves keyed messages (which may wait on hold) out of the load, as seed 003's client does."""

    def receive(self, message: Any) -> None:
        if type(message) is Received and message.key:
            return
        super().receive(message)


class GreedyManager(StreamingPullManager):
    """Broken: asks the server for far more than the flow control allows (credit not set from it)."""

    def make_part(self, name: str, factory: Callable[..., Actor], *args: Any) -> ActorRef:
        if name == "consumer":
            queue, client, settings = args
            args = (queue, client, attrs.evolve(settings, prefetch_messages=10_000, prefetch_bytes=1 << 30))
        return super().make_part(name, factory, *args)


class KeyBlindOrdering(OrderedKeyHandler):  # type: ignore[misc]
    """Broken: runs every message at once, whatever its ordering key."""

    def receive(self, message: Any) -> None:
        if type(message) is Received:
            self._run(message)


class NoSendBack(OrderedKeyHandler):  # type: ignore[misc]
    """Broken: after a nack, runs the key's held messages instead of sending them back behind it."""

    def _send_back_from(self, key: str, tag: int) -> None:
        pass


class IdleLeaser(Leaser):  # type: ignore[misc]
    """Broken: never extends a lease, so callbacks slower than the ack deadline lose theirs."""

    def receive(self, message: Any) -> None:
        pass


class FragileLeaser(Leaser):  # type: ignore[misc]
    """Broken: fails on its first maintenance pass (restarted with an empty table, then stopped)."""

    def receive(self, message: Any) -> None:
        if type(message) is Tick:
            raise RuntimeError("leaser bug")
        super().receive(message)


def _acking(callback: Callable[[SubscriberMessage], object]) -> Callable[[SubscriberMessage], object]:
    def run(message: SubscriberMessage) -> object:
        try:
            return callback(message)
        except Exception:
            message.ack()  # "handled": logged and acked so a poison message cannot loop
            raise

    return run


class AckingPool(WorkerPool):  # type: ignore[misc]
    """Broken: a callback that raises is reported and acked, not nacked (the failure is swallowed)."""

    def __init__(self, manager: ActorRef, callback: Callable[[SubscriberMessage], object], workers: int) -> None:
        super().__init__(manager, _acking(callback), workers)


class DirectLeaserManager(StreamingPullManager):
    """Broken (the wiring before the fix): the leaser's extensions go straight to the dispatcher, where a
    late one can supersede a nack of the same message in the batch; the nack is lost and credit leaks."""

    dispatcher: ActorRef | None = None

    def make_part(self, name: str, factory: Callable[..., Actor], *args: Any) -> ActorRef:
        if name == "leaser" and self.dispatcher is not None:
            args = (args[0], self.dispatcher, *args[2:])
        ref = super().make_part(name, factory, *args)
        if name == "dispatcher":
            self.dispatcher = ref
        return ref


def test_flow_bound_catches_a_load_controller_blind_to_held_messages() -> None:
    result = _caught(_flow, "ordered", _manager_with(load=KeyBlindLoad))
    assert "wrote no FlowNote after Received" in result.violations[0]
    assert any("were unfinished" in line for line in result.violations)


def test_flow_bound_catches_a_subscription_that_asks_for_too_much() -> None:
    result = _caught(_flow, "slow", GreedyManager)
    assert "> max_messages" in result.violations[0]


def test_ordering_keys_catches_a_handler_blind_to_keys() -> None:
    result = _caught(_ordering, "ordered", _manager_with(keys=KeyBlindOrdering))
    assert "still ran" in result.violations[0]


def test_ordering_keys_catches_a_handler_that_runs_past_a_nack() -> None:
    result = _caught(_ordering, "ordered", _manager_with(keys=NoSendBack))
    assert any("no nack at or below it" in line for line in result.violations)


def test_lease_validity_catches_a_leaser_that_never_extends() -> None:
    result = _caught(_leases, "slow", _manager_with(leaser=IdleLeaser))
    assert "lapsed while its callback ran" in result.violations[0]


def test_lease_validity_catches_a_leaser_that_fails() -> None:
    result = _caught(_leases, "slow", _manager_with(leaser=FragileLeaser))
    assert "/sub/leaser failed" in result.violations[0]


def test_no_loss_catches_a_pool_that_acks_what_raised() -> None:
    result = _caught(_loss, "ordered", _manager_with(workers=AckingPool))
    assert "acked although its callback raised" in result.violations[0]


# Keys, nacks and immediate redelivery: messages reach a key fenced by a nack and are sent back at once.
FENCED = SubscriberScenario(
    messages=30, keys=2, nack=0.3, flow=FlowControl(max_messages=3, min_duration_per_lease_extension_s=2), workers=2,
    burst=10, burst_gap_s=0.2, retry=None,
)


def test_all_settled_catches_the_lost_nack_of_the_old_leaser_wiring() -> None:
    """Regression: with the leaser's extensions sent straight to the dispatcher, a fence's nack could be
    superseded in the batch by the leaser's first extension: the nack was lost, and the run stalled."""
    for seed in range(20):
        sim, _ = run_subscriber_simulation(FENCED, seed)
        assert not _failures(check_subscriber_run(sim.trace, FENCED)), f"seed {seed}"
    result = _caught(_settled, FENCED, DirectLeaserManager)
    assert "still in the queue at the end" in result.violations[0]


def test_flow_bound_allows_one_message_over_max_bytes_only() -> None:
    """A lone message larger than max_bytes is delivered (and allowed); the checker's arithmetic, by hand."""
    flow = FlowControl(max_messages=5, max_bytes=100)
    scenario = SubscriberScenario(messages=3, sizes=(250, 250), flow=flow, burst=3)
    sim, _ = run_subscriber_simulation(scenario, 1)
    result = flow_bound(sim.trace, SUB, flow)
    assert result.ok, str(result)
    assert result.metric("max_count") == 1  # one at a time: each fills the budget alone
    assert all_settled(sim.trace, QUEUE).ok
