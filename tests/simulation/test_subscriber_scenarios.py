"""The streaming subscriber under the simulator: 200 seeds per scenario kind, every checker green,
and each checker shown to catch a deliberately broken variant of one subscriber component.

A paused subscriber (the ``paused`` kind: ``Pause("/sub", ...)`` freezes the whole subscription
while the queue and the clock go on) must also notice the leases it lost: ``stale_starts`` below
says no callback starts on a copy whose lease ran out.
"""

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
from conveyor.actors.subscriber._leases import LeaseTable, LeaseWork
from conveyor.actors.subscriber._protocol import (
    CallbackStarted,
    Lapsed,
    Received,
    ReceivedBatch,
    Redelivered,
    Scheduled,
    Tick,
    ack_id_of,
)
from conveyor.actors.subscriber._protocol import (
    Settlement as Settle,
)
from conveyor.actors.subscriber._protocol import (
    SettlementKind as SettleKind,
)
from conveyor.runtime import Actor, ActorRef, EventKind, TraceEvent
from conveyor.simulation import FaultApplied, Pause
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


def _part(subscription_path: str, name: str) -> str:
    return f"{subscription_path}/{name}"


def stale_starts(trace: Iterable[TraceEvent], subscription_path: str = SUB) -> CheckResult:
    """No callback starts on a copy whose lease ran out by the leaser's own account, or that arrived stale.

    Per copy of a message (from the manager's ``Received`` to the leaser), the deadline the leaser
    last asked for is followed through its ``Settle(MODACK)`` requests. A request made at or after
    that deadline came too late: the queue had taken the message back, and the copy is stale. Only
    a ``Redelivered`` (the queue gave the message back to this subscription, under the same ack id)
    makes the copy leased again; a lease given up at ``max_lease_duration_s`` (the leaser's
    ``Settle(DROP)``) is out of scope (that copy may still run, by design). A copy that reached the
    ordered-key handler after the queue's own deadline on it is stale too. Starting a stale copy is
    a violation: after a pause the subscriber must not treat such messages as still leased.
    """
    leaser = _part(subscription_path, "leaser")
    keys = _part(subscription_path, "keys")
    workers = _part(subscription_path, "workers")
    requested: dict[str, float] = {}  # ack id -> the deadline the leaser last asked for, for this copy
    stale: dict[str, float] = {}  # ack id -> the deadline its copy outlived
    given_up: set[str] = set()
    renewing: set[str] = set()
    late: set[tuple[str, int]] = set()  # (ack id, attempt) that arrived after the queue's deadline on it
    violations: list[str] = []
    lapsed = reported = 0
    for event in trace:
        message = event.message
        if event.kind is EventKind.SENT and event.sender == subscription_path and event.receiver == leaser:
            if type(message) is Received:
                for table in (requested, stale):
                    table.pop(message.ack_id, None)
                given_up.discard(message.ack_id)
        elif event.kind is EventKind.DELIVERED and event.receiver == leaser and type(message) is Redelivered:
            renewing.add(message.ack_id)
        elif event.kind is EventKind.SENT and event.sender == leaser and type(message) is Settle:
            ack_id = message.ack_id
            if message.kind is SettleKind.DROP:
                given_up.add(ack_id)
            elif message.kind is SettleKind.MODACK:
                if ack_id in renewing:
                    renewing.discard(ack_id)
                    stale.pop(ack_id, None)
                elif ack_id in requested and requested[ack_id] <= event.time and ack_id not in stale:
                    stale[ack_id] = requested[ack_id]
                    lapsed += 1
                requested[ack_id] = event.time + message.seconds
        elif event.kind is EventKind.SENT and event.sender == leaser and type(message) is Lapsed:
            reported += len(message.ack_ids)
        elif event.kind is EventKind.DELIVERED and event.receiver == keys and type(message) is Received:
            delivery = message.delivery
            if delivery.deadline is not None and delivery.deadline <= event.time:
                late.add((message.ack_id, delivery.delivery_count))
        elif event.kind is EventKind.NOTE and event.sender == workers and isinstance(message, CallbackStarted):
            where = f"t={event.time:g}: {message.ack_id} attempt {message.attempt} started"
            if message.ack_id in stale and message.ack_id not in given_up:
                violations.append(f"{where}, but its lease ran out unextended at t={stale[message.ack_id]:g}")
            if (message.ack_id, message.attempt) in late:
                violations.append(f"{where}, but it arrived after the queue's deadline on it")
    return CheckResult.of("stale_starts", violations, lapsed=lapsed, reported=reported, arrived_late=len(late))


@pytest.mark.parametrize("kind", KINDS)
def test_every_checker_is_green_on_200_seeds(kind: str) -> None:
    """Slow callbacks, bursts over max_bytes, keys with nacks, a paused process, a crash and restart."""
    for seed in range(SEEDS):
        scenario = random_subscriber_scenario(seed, kind)
        sim, result = run_subscriber_simulation(scenario, seed)
        assert result.quiet, f"kind={kind} seed={seed}: still busy after {result.steps} steps"
        results = check_subscriber_run(sim.trace, scenario)
        results += [stale_starts(sim.trace, path) for path in scenario.subscription_paths()]
        failures = _failures(results)
        assert not failures, f"kind={kind} seed={seed}:\n" + "\n".join(failures)


def test_runs_are_deterministic() -> None:
    scenario = random_subscriber_scenario(7, "ordered")
    first, _ = run_subscriber_simulation(scenario, 7)
    second, _ = run_subscriber_simulation(scenario, 7)
    assert first.trace_hash() == second.trace_hash()


def test_the_scenarios_do_what_their_names_say() -> None:
    """Slow runs outlive the ack deadline, bursts exceed max_bytes, ordered runs redeliver, crashes restart,
    and a paused subscriber loses leases during the pause and notices afterwards."""

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
    scenario, trace = callback_spans("paused", 2)
    pauses = [e.message.fault for e in trace if e.kind is EventKind.FAULT and isinstance(e.message, FaultApplied)]
    assert pauses == [Pause(SUB, scenario.pause_at or 0.0, scenario.pause_s)], "the whole subscription pauses"
    assert lease_validity(trace, QUEUE, SUB, scenario.flow).metric("paused") > 0, "leases lapsed during it"
    assert stale_starts(trace).metric("reported") > 0, "the leaser noticed them afterwards"


# A keyed callback runs longer than max_lease_duration_s: its lease is given up and lapses, its ack
# comes too late, and the queue delivers it again after later messages ran. (Callbacks of up to 16 s
# against a 5 s cap: a message merely held behind its key is no longer given up, since its clock
# starts when its callback is scheduled, so the cap is outlived by running callbacks only.)
CAPPED = SubscriberScenario(
    messages=15, keys=1, slow=0.4, slow_factor=(1.2, 8.0), workers=2, ack_deadline_s=2.0, burst=5, burst_gap_s=1.0,
    flow=FlowControl(max_messages=4, min_duration_per_lease_extension_s=2.0, max_lease_duration_s=5.0),
)


def test_ordering_keys_hold_when_callbacks_outlive_max_lease_duration() -> None:
    """Regression (was a strict xfail): the late redelivery is acked again, not run after its key's later ones."""
    redelivered_after_ack = 0
    for seed in range(20):
        sim, _ = run_subscriber_simulation(CAPPED, seed)
        failures = _failures(check_subscriber_run(sim.trace, CAPPED))
        assert not failures, f"seed={seed}:\n" + "\n".join(failures)
        refused = {
            f"1:{tag}" for e in sim.trace
            if e.kind is EventKind.DELIVERED and type(e.message).__name__ == "AckResult" for tag in e.message.invalid
        }
        redelivered_after_ack += len(refused)
    assert redelivered_after_ack > 0, "some acks came after their lease lapsed, as the scenario intends"


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

    def _send_back(self, key: str, tag: int) -> None:
        pass


class _NoLapses(LeaseTable):  # type: ignore[misc]
    def maintain(self, now: float, histogram: Any) -> LeaseWork:
        return attrs.evolve(super().maintain(now, histogram), lapsed=())


class BlindLeaser(Leaser):  # type: ignore[misc]
    """Broken: never notices a lapsed lease (its table reports none), so a paused subscriber runs stale copies."""

    def __init__(self, manager: ActorRef, dispatcher: ActorRef, flow: FlowControl) -> None:
        super().__init__(manager, dispatcher, flow)
        self.table = _NoLapses(flow)


class DeafToLapses(OrderedKeyHandler):  # type: ignore[misc]
    """Broken: ignores the leaser's word that leases lapsed, and runs the stale copies it holds."""

    def receive(self, message: Any) -> None:
        if type(message) is not Lapsed:
            super().receive(message)


class ForgetsRefusedAcks(StreamingPullManager):
    """Broken: forgets that the queue refused an ack, so a late redelivery runs again, after later messages."""

    def _refuse(self, ack_id: str) -> None:
        pass


class RunsDuplicates(StreamingPullManager):
    """Broken: takes in a message delivered again while its ack is on the way, as if it were new."""

    def _deliver(self, delivery: Any) -> None:
        self.acking.pop(ack_id_of(delivery), None)
        super()._deliver(delivery)


class IdleLeaser(Leaser):  # type: ignore[misc]
    """Broken: never extends a lease, so callbacks slower than the ack deadline lose theirs."""

    def receive(self, message: Any) -> None:
        pass


class ReceiptClockLeaser(Leaser):  # type: ignore[misc]
    """Broken (the leaser before issue 15): starts every max-lease clock at receipt, so a keyed message
    held behind its key is given up while it waits, and its lease lapses while its callback runs."""

    def receive(self, message: Any) -> None:
        if type(message) is Received:
            message = attrs.evolve(message, key=None)
        elif type(message) is ReceivedBatch:
            message = ReceivedBatch(tuple(attrs.evolve(item, key=None) for item in message.items))
        elif type(message) is Scheduled:
            return
        super().receive(message)


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

    def __init__(
        self, manager: ActorRef, callback: Callable[[SubscriberMessage], object], workers: int, per_job: int = 1,
    ) -> None:
        super().__init__(manager, _acking(callback), workers, per_job)


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


# One key, callbacks of 1.5 to 2 ack deadlines, a lease cap of 2.5 deadlines: the later messages of a
# burst wait on hold longer than the cap, but each callback runs well under it.
HELD_LONG = SubscriberScenario(
    messages=6, keys=1, slow=1.0, slow_factor=(1.5, 2.0), workers=2, ack_deadline_s=2.0, burst=6,
    flow=FlowControl(max_messages=10, min_duration_per_lease_extension_s=2.0, max_lease_duration_s=5.0),
)


def test_a_message_held_longer_than_max_lease_duration_keeps_its_lease() -> None:
    for seed in range(10):
        sim, _ = run_subscriber_simulation(HELD_LONG, seed)
        failures = _failures(check_subscriber_run(sim.trace, HELD_LONG))
        assert not failures, f"seed={seed}:\n" + "\n".join(failures)


def test_lease_validity_catches_a_leaser_that_starts_the_clock_at_receipt() -> None:
    result = _caught(_leases, HELD_LONG, _manager_with(leaser=ReceiptClockLeaser), seeds=10)
    assert "lapsed while its callback ran" in result.violations[0]


def test_lease_validity_catches_a_leaser_that_fails() -> None:
    result = _caught(_leases, "slow", _manager_with(leaser=FragileLeaser))
    assert "/sub/leaser failed" in result.violations[0]


def test_no_loss_catches_a_pool_that_acks_what_raised() -> None:
    result = _caught(_loss, "ordered", _manager_with(workers=AckingPool))
    assert "acked although its callback raised" in result.violations[0]


def _stale(trace: list[Any], scenario: SubscriberScenario) -> CheckResult:
    return stale_starts(trace)


def test_stale_starts_catches_a_leaser_blind_to_lapses() -> None:
    result = _caught(_stale, "paused", _manager_with(leaser=BlindLeaser))
    assert "its lease ran out unextended" in result.violations[0]


def test_stale_starts_catches_a_key_handler_deaf_to_lapses() -> None:
    result = _caught(_stale, "paused", _manager_with(keys=DeafToLapses))
    assert "its lease ran out unextended" in result.violations[0]


def test_ordering_keys_catches_a_manager_that_runs_a_late_redelivery_again() -> None:
    result = _caught(_ordering, CAPPED, ForgetsRefusedAcks, seeds=20)
    assert "no nack at or below it" in result.violations[0]


def test_flow_bound_catches_a_manager_that_counts_a_duplicate_delivery() -> None:
    result = _caught(_flow, "paused", RunsDuplicates, seeds=60)
    assert "> max_messages" in result.violations[0]


# --- the pause exemptions: only lapses a pause of the subscription explains ----------------------


def _without_faults(trace: list[TraceEvent]) -> list[TraceEvent]:
    return [event for event in trace if event.kind is not EventKind.FAULT]


def test_lease_validity_exempts_lapses_only_because_the_subscription_was_paused() -> None:
    """The same trace with its FAULT events removed fails: those lapses happened, and only the pause excuses them."""
    scenario = random_subscriber_scenario(2, "paused")
    sim, _ = run_subscriber_simulation(scenario, 2)
    paused = lease_validity(sim.trace, QUEUE, SUB, scenario.flow)
    assert paused.ok and paused.metric("paused") > 0, str(paused)
    unexplained = lease_validity(_without_faults(sim.trace), QUEUE, SUB, scenario.flow)
    assert "lapsed while its callback ran" in unexplained.violations[0]
    assert "no pause of /sub since its deadline was last set" in unexplained.violations[0]


def test_lease_validity_still_catches_a_leaser_that_never_extends_in_a_paused_run() -> None:
    result = _caught(_leases, "paused", _manager_with(leaser=IdleLeaser))
    assert "lapsed while its callback ran" in result.violations[0]


# Every callback raises; the pause outlasts the 10 s leases, so nacks are caught in the frozen process.
FROZEN_NACKS = SubscriberScenario(
    messages=30, fail=1.0, workers=6, ack_deadline_s=1.0, fast_s=0.05, burst=30, pause_at=0.3, pause_s=15.0,
    max_deliveries=3, retry=None, flow=FlowControl(max_messages=10, min_duration_per_lease_extension_s=2),
)


RAISED_WHEN_LAPSED_SEED = 35
"""A ``FROZEN_NACKS`` seed whose callback raises on a delivery the queue had taken back (the first of 0-39).

Before nacks named their delivery, seed 4 had two such raises (and 10 of seeds 0-39 had some): a
stale nack, sent before the lease lapsed, took back the delivery made after it while that delivery's
callback ran. The queue ignores such a nack now, and only 1 of seeds 0-39 still raises on a delivery
taken back (its callback frozen by the pause past its lease's lapse), so it is named here."""


def test_no_loss_exempts_a_nack_frozen_by_a_pause_and_a_raise_on_a_lapsed_delivery() -> None:
    frozen = lapsed = 0
    for seed in (*range(5), RAISED_WHEN_LAPSED_SEED):
        sim, _ = run_subscriber_simulation(FROZEN_NACKS, seed)
        result = no_loss(sim.trace, QUEUE)
        assert result.ok, f"seed={seed}: {result}"
        frozen += int(result.metric("nack_paused"))
        lapsed += int(result.metric("raised_when_lapsed"))
        if result.metric("nack_paused"):
            unexplained = no_loss(_without_faults(sim.trace), QUEUE)
            assert any("was never nacked after its callback raised" in line for line in unexplained.violations)
    assert frozen > 0 and lapsed > 0, "both exemptions were exercised"


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
