"""The broker under the simulator: 200 seeds per scenario, every checker green, and each checker
shown to catch a deliberately broken variant of the queue."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import pytest
import trio

from conveyor.actors.broker import (
    Ack,
    ConsumerActor,
    ConsumerLists,
    ConsumerManagerActor,
    ConsumerSettings,
    Delivery,
    EntryList,
    GetStats,
    Message,
    Publish,
    PublishBatch,
    QueueActor,
    QueueConfig,
)
from conveyor.actors.broker._entries import Entry, EntryState, Returned, _Cursor
from conveyor.runtime import Actor, ActorRef, ActorSystemBase, ThreadSystem, TrioSystem
from conveyor.simulation import RoundRobin, Simulation, never_acks
from conveyor.simulation.checkers import (
    CheckResult,
    SharedTrace,
    accounting,
    browser_completeness,
    consumer_priority,
    drained,
    fairness,
    group_exclusivity,
    jain_index,
    priority_order,
    queue_story,
    strict_order,
)
from conveyor.simulation.scenarios import (
    BrokerScenario,
    ClientPolicy,
    check_broker_run,
    random_broker_scenario,
    run_broker_simulation,
    spawn_broker_scenario,
)

SEEDS = 200
QUEUE = "/queue"


def _failures(results: Iterable[CheckResult]) -> list[str]:
    return [str(result) for result in results if not result.ok]


@pytest.mark.parametrize("kind", ["mixed", "priorities", "groups"])
def test_every_checker_is_green_on_200_seeds(kind: str) -> None:
    """1-20 consumers, priorities, selectors, nacks, releases, lease expiry, late acks, crashes."""
    for seed in range(SEEDS):
        scenario = random_broker_scenario(seed, kind)
        sim, result = run_broker_simulation(scenario, seed)
        assert result.quiet, f"seed {seed}: still busy after {result.steps} steps"
        failures = _failures(check_broker_run(sim.trace, scenario))
        assert not failures, f"kind={kind} seed={seed}:\n" + "\n".join(failures)


# --- planted bugs: each checker must catch its broken variant ----------------------------------
# The workloads publish in bursts (publish_span_s=0) where a bug needs several messages waiting.


def _caught(checker: Callable[..., CheckResult], scenario: BrokerScenario, factory: Callable[[QueueConfig], QueueActor],
            seeds: int = 30) -> CheckResult:
    """The first failing result of ``checker`` over seeds with the broken queue; fails the test if none."""
    for seed in range(seeds):
        sim, _ = run_broker_simulation(scenario, seed, queue_factory=factory)
        result = checker(sim.trace, QUEUE)
        if not result.ok:
            return result
    pytest.fail(f"{checker.__name__} did not catch the planted bug in {seeds} seeds")


def _green(checker: Callable[..., CheckResult], scenario: BrokerScenario, seeds: int = 30) -> None:
    for seed in range(seeds):
        sim, _ = run_broker_simulation(scenario, seed)
        assert checker(sim.trace, QUEUE).ok, f"seed {seed}"


def _queue_with(entries: type[EntryList]) -> Callable[[QueueConfig], QueueActor]:
    class Variant(QueueActor):
        def make_entries(self, config: QueueConfig) -> EntryList:
            return entries(config.priorities, config.max_deliveries)

    return Variant


class LifoEntries(EntryList):
    """Broken: takes the newest available entry of a level first."""

    def _after(self, pointer: tuple[int, int]) -> Any:
        entries = list(super()._after((-1, -1)))
        return iter(sorted(entries, key=lambda e: (e.position[0], -e.seq)))


class PriorityBlind(EntryList):
    """Broken: puts every message in the lowest level, ignoring its priority."""

    def __init__(self, priorities: int = 10, max_deliveries: int | None = None) -> None:
        super().__init__(1, max_deliveries)


class NoReservation(EntryList):
    """Broken: a lower-priority consumer takes entries a higher one wants."""

    def _reserved_for_higher(self, entry: Entry, cursor: _Cursor) -> bool:
        return False


class Forgetful(EntryList):
    """Broken: a nacked or released entry vanishes instead of returning."""

    def _return(self, entries: list[Entry], now: float, delay_of: Callable[[Entry], float]) -> Returned:
        for entry in entries:
            cursor = self._cursors.get(entry.consumer) if entry.consumer is not None else None
            if cursor is not None:
                self._unhold(entry, cursor)
            entry.state = EntryState.AVAILABLE
            self._finish(entry, EntryState.DEQUEUED)
        return Returned()


class DoubleDealer(EntryList):
    """Broken: an acquired entry stays visible, so a second consumer gets it too."""

    def _acquire(self, entry: Entry, consumer_id: int, cursor: _Cursor, deadline: float) -> None:
        super()._acquire(entry, consumer_id, cursor, deadline)
        if entry.seq % 3 == 0:
            entry.state = EntryState.AVAILABLE
            self.available += 1
            self.acquired -= 1


class SkippingBrowser(EntryList):
    """Broken: browsers skip every other entry."""

    def browse(self, consumer_id: int, max_messages: int, max_bytes: int) -> list[Entry]:
        seen = super().browse(consumer_id, max_messages, max_bytes)
        return seen[::2]


class GroupBlind(EntryList):
    """Broken: ignores message-group ownership."""

    def _group_allows(self, entry: Entry, consumer_id: int) -> bool:
        return True


class Favouritism(ConsumerManagerActor):
    """Broken: always notifies the first consumer that ever subscribed."""

    def make_lists(self) -> ConsumerLists:
        class FirstOnly(ConsumerLists):
            def work_available(self, now: float | None = None) -> tuple[int, ...]:
                ids = self.all_ids()
                return ids[:1]

            def exhausted(self, consumer_id: int, *, more_work: bool, now: float | None = None) -> tuple[int, ...]:
                return ()

        return FirstOnly()


class FavouringQueue(QueueActor):
    def make_manager(self) -> ConsumerManagerActor:
        return Favouritism(self.ctx.self_ref)


class Tired(ConsumerManagerActor):
    """Broken: stops notifying anyone after its tenth notification (a lost wake-up)."""

    def make_lists(self) -> ConsumerLists:
        class Drowsy(ConsumerLists):
            calls = 0

            def work_available(self, now: float | None = None) -> tuple[int, ...]:
                self.calls += 1
                return super().work_available(now) if self.calls <= 10 else ()

        return Drowsy()


class StallingQueue(QueueActor):
    def make_manager(self) -> ConsumerManagerActor:
        return Tired(self.ctx.self_ref)


ONE_CONSUMER = BrokerScenario(
    messages=30, consumers=(ClientPolicy(),), priorities=(0, 4, 9), prefetch=5, publish_span_s=0.0
)
EQUALS = BrokerScenario(messages=60, consumers=tuple(ClientPolicy() for _ in range(4)), prefetch=3)
RANKED = BrokerScenario(
    messages=40, consumers=(ClientPolicy(), ClientPolicy()), consumer_priorities=(5, 0), prefetch=50,
    publish_span_s=0.0,
)
NACKING = BrokerScenario(messages=40, consumers=(ClientPolicy(nack=0.3, release=0.2),) * 3, max_deliveries=50)
GROUPED = BrokerScenario(messages=40, consumers=(ClientPolicy(late_ack=0.5),) * 3, groups=2)
BROWSED = BrokerScenario(messages=30, consumers=(), browsers=1, publish_span_s=0.0)


@pytest.mark.parametrize(
    ("scenario", "factory"),
    [(ONE_CONSUMER, _queue_with(LifoEntries)), (RANKED, _queue_with(NoReservation)), (GROUPED, QueueActor)],
    ids=["lifo", "no-reservation", "groups"],
)
def test_checkers_give_the_same_verdicts_on_a_shared_trace(
    scenario: BrokerScenario, factory: Callable[[QueueConfig], QueueActor]
) -> None:
    """A SharedTrace reads the queue's story once and replays it: every checker's result, failing
    ones included, is the one it gives on the plain trace."""
    checkers = [accounting, browser_completeness, consumer_priority, drained, fairness, group_exclusivity,
                priority_order, strict_order]
    failing = 0
    for seed in range(3):
        sim, _ = run_broker_simulation(scenario, seed, queue_factory=factory)
        shared = SharedTrace(sim.trace)
        assert shared.story(QUEUE) == tuple(queue_story(sim.trace, QUEUE))
        assert shared.story(QUEUE) is shared.story(QUEUE)  # read once
        for checker in checkers:
            alone, replayed = checker(sim.trace, QUEUE), checker(shared, QUEUE)
            assert replayed == alone, checker.__name__
            failing += not alone.ok
    assert failing or factory is QueueActor


def test_strict_order_catches_a_lifo_queue() -> None:
    _green(strict_order, ONE_CONSUMER)
    result = _caught(strict_order, ONE_CONSUMER, _queue_with(LifoEntries))
    assert "after tag" in result.violations[0]


def test_priority_order_catches_a_queue_blind_to_priority() -> None:
    _green(priority_order, ONE_CONSUMER)
    result = _caught(priority_order, ONE_CONSUMER, _queue_with(PriorityBlind))
    assert "waited" in result.violations[0]


def test_consumer_priority_catches_a_queue_without_reservation() -> None:
    _green(consumer_priority, RANKED)
    result = _caught(consumer_priority, RANKED, _queue_with(NoReservation))
    assert "wanted work and matched" in result.violations[0]


def test_accounting_catches_lost_messages() -> None:
    _green(accounting, NACKING)
    result = _caught(accounting, NACKING, _queue_with(Forgetful))
    assert result.metric("lost") > 0


def test_accounting_catches_duplicate_deliveries() -> None:
    _green(accounting, EQUALS)
    result = _caught(accounting, EQUALS, _queue_with(DoubleDealer))
    assert result.metric("duplicated") > 0


def test_browser_completeness_catches_a_skipping_browser() -> None:
    _green(browser_completeness, BROWSED)
    result = _caught(browser_completeness, BROWSED, _queue_with(SkippingBrowser))
    assert "never saw" in result.violations[0]


def test_group_exclusivity_catches_a_queue_blind_to_groups() -> None:
    _green(group_exclusivity, GROUPED)
    result = _caught(group_exclusivity, GROUPED, _queue_with(GroupBlind))
    assert "held the group" in result.violations[0]


def test_drained_catches_a_lost_wake_up() -> None:
    _green(drained, EQUALS)
    result = _caught(drained, EQUALS, StallingQueue)
    assert "a stall" in result.violations[0]


def test_drained_does_not_blame_the_queue_for_a_consumer_without_credit() -> None:
    # The client's acks never reach its consumer, so its prefetch is used up for good and the rest
    # stays queued. No queue could deliver it: the consumer said it wants no more (SetInterest).
    scenario = BrokerScenario(messages=6, consumers=(ClientPolicy(),), prefetch=2, publish_span_s=0.0)
    sim, _ = run_broker_simulation(scenario, 0, faults=(never_acks("/client-0"),))
    result = drained(sim.trace, QUEUE)
    assert result.ok, result.violations
    assert result.metric("remaining") == 6  # the 2 it holds (leases lapsed) and the 4 it never took


def test_fairness_catches_a_manager_with_a_favourite() -> None:
    _green(lambda trace, queue: fairness(trace, queue, 0.8), EQUALS)
    result = _caught(lambda trace, queue: fairness(trace, queue, 0.8), EQUALS, FavouringQueue)
    assert result.metric("jain") < 0.8


# --- fairness at scale --------------------------------------------------------------------------


class Acker(Actor):
    """Acks every delivery at once."""

    def receive(self, message: Any) -> None:
        if isinstance(message, Delivery):
            self.ctx.reply(Ack(message.consumer_id, (message.tag,)))


def _eight_ackers(sim: Simulation) -> ActorRef:
    """A queue with 8 equal consumers (prefetch 100) whose clients ack at once."""
    queue = sim.spawn(lambda: QueueActor(QueueConfig("fair", ack_deadline_s=3600)), name="fair")
    for index in range(8):
        client = sim.spawn(Acker, name=f"acker-{index}")
        sim.spawn(lambda c=client: ConsumerActor(queue, c, ConsumerSettings(prefetch_messages=100)),  # type: ignore[misc]
                  name=f"consumer-{index}")
    sim.run()
    return queue


def test_eight_equal_consumers_share_100000_messages_fairly() -> None:
    sim = Simulation(seed=11, trace=False)
    queue = _eight_ackers(sim)
    body = b"x" * 100
    for _ in range(100):
        queue.tell(PublishBatch(tuple(Message(body) for _ in range(1_000))))
    assert sim.run().quiet
    stats = sim.ask(queue, GetStats())
    assert stats.acked == 100_000
    delivered = [consumer.delivered for consumer in stats.consumers]
    assert jain_index(delivered) >= 0.99, delivered


def test_fairness_with_single_publishes_under_round_robin() -> None:
    """One publish at a time, consumers scheduled evenly (as trio's dispatcher does): Jain >= 0.99."""
    sim = Simulation(seed=5, trace=False, strategy=RoundRobin())
    queue = _eight_ackers(sim)
    for _ in range(20_000):
        queue.tell(Publish(Message(b"x")))
    assert sim.run().quiet
    stats = sim.ask(queue, GetStats())
    assert stats.acked == 20_000
    assert jain_index([consumer.delivered for consumer in stats.consumers]) >= 0.99


def test_jain_index() -> None:
    assert jain_index([5, 5, 5]) == 1.0
    assert jain_index([9, 0, 0]) == pytest.approx(1 / 3)
    assert jain_index([]) == 1.0


# --- the same scenarios on the real backends, traced ---------------------------------------------

REAL = BrokerScenario(
    messages=40,
    consumers=(ClientPolicy(nack=0.1), ClientPolicy(release=0.1), ClientPolicy(crash_after=5), ClientPolicy()),
    priorities=(0, 4, 9),
    browsers=1,
    publish_span_s=0.05,
    ack_deadline_s=0.3,
    retry=None,
)


def _settled(system: ActorSystemBase, expected: int) -> Callable[[], bool]:
    def done() -> bool:
        settled = sum(1 for e in system.trace if e.kind.value == "note" and type(e.message).__name__ == "EntrySettled"
                      and e.sender == QUEUE)
        return settled >= expected

    return done


async def test_scenarios_on_trio_with_trace_are_green() -> None:
    async with TrioSystem(trace=True, seed=3) as system:
        spawn_broker_scenario(system, REAL)
        with trio.fail_after(20):
            while not _settled(system, REAL.messages)():
                await trio.sleep(0.01)
        system.shutdown()
    failures = _failures(check_broker_run(system.trace, REAL))
    assert not failures, "\n".join(failures)


def test_scenarios_on_threads_with_trace_are_green() -> None:
    system = ThreadSystem(trace=True, seed=3)
    spawn_broker_scenario(system, REAL)
    done = _settled(system, REAL.messages)
    deadline = time.monotonic() + 20
    while not done():
        assert time.monotonic() < deadline, "scenario did not settle within 20 s"
        time.sleep(0.01)
    system.shutdown()
    failures = _failures(check_broker_run(list(system.trace), REAL))
    assert not failures, "\n".join(failures)
