"""The checkers written against the default sweep's surviving mutants: flow_pause, expiry_not_early, the restart budget.

Each is shown a hand-made trace that keeps its promise and one that breaks it (the break the
mutant made), and the flaky actor of ``broker-swarm`` is shown to spend a real restart budget.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from conveyor.actors.broker import (
    Delivery,
    EntryEnqueued,
    EntrySettled,
    Message,
    Publish,
    Resume,
    Suspend,
)
from conveyor.actors.subscriber import Done, FlowControl, FlowNote, Received
from conveyor.runtime import EventKind, TraceEvent
from conveyor.simulation.checkers import SupervisionDeclared, expiry_not_early, flow_pause, supervision
from conveyor.simulation.scenarios import run_portfolio

LOAD = "/sub/load"
CONSUMER = "/sub/consumer"
MANAGER = "/sub"


@pytest.fixture(autouse=True)
def _quiet_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.CRITICAL, logger="conveyor")
    yield


def _received(ack_id: str, size: int = 10) -> Received:
    return Received(ack_id, size, None, Delivery("q", int(ack_id), Message(b"x"), 1, 100.0, 1))


def _handled(time: float, message: object, *, sends: tuple[object, ...] = (), paused: bool) -> list[TraceEvent]:
    """The load controller handles ``message``: its sends, then its FlowNote."""
    events = [TraceEvent(EventKind.DELIVERED, time, MANAGER, LOAD, message)]
    events += [TraceEvent(EventKind.SENT, time, LOAD, CONSUMER, sent) for sent in sends]
    events.append(TraceEvent(EventKind.NOTE, time, LOAD, None, FlowNote(0, 0, paused)))
    return events


FLOW = FlowControl(max_messages=2, min_duration_per_lease_extension_s=2, resume_threshold=0.5)


def test_flow_pause_accepts_a_suspend_at_full_load_and_a_resume_below_the_threshold() -> None:
    trace = [
        *_handled(0.0, _received("1"), paused=False),
        *_handled(0.1, _received("2"), sends=(Suspend(),), paused=True),  # load 1.0
        *_handled(0.2, Done("1"), paused=True),  # load 0.5: not below the threshold
        *_handled(0.3, Done("2"), sends=(Resume(),), paused=False),  # load 0
    ]
    result = flow_pause(trace, MANAGER, FLOW)
    assert result.ok, result.violations
    assert dict(result.metrics) == {"suspends": 1, "resumes": 1}


def test_flow_pause_finds_a_missing_suspend_a_spurious_resume_and_a_false_note() -> None:
    missing = [*_handled(0.0, _received("1"), paused=False), *_handled(0.1, _received("2"), paused=True)]
    assert any("did not send Suspend" in line for line in flow_pause(missing, MANAGER, FLOW).violations)
    spurious = _handled(0.0, _received("1"), sends=(Resume(),), paused=False)
    assert any("sent Resume" in line for line in flow_pause(spurious, MANAGER, FLOW).violations)
    lying = [*_handled(0.0, _received("1"), paused=False),
             *_handled(0.1, _received("2"), sends=(Suspend(),), paused=False)]
    assert any("noted paused=False" in line for line in flow_pause(lying, MANAGER, FLOW).violations)


def _expiry_trace(expired_at: float) -> list[TraceEvent]:
    message = Message(b"x", ttl_s=2.0, message_id="m1")
    return [
        TraceEvent(EventKind.DELIVERED, 1.0, "/publisher", "/queue", Publish(message)),
        TraceEvent(EventKind.NOTE, 1.0, "/queue", None, EntryEnqueued("queue", 0, message)),
        TraceEvent(EventKind.NOTE, expired_at, "/queue", None, EntrySettled("queue", 0, "expired")),
    ]


def test_expiry_not_early_times_an_expiry_from_the_queues_receipt_of_the_publish() -> None:
    on_time = expiry_not_early(_expiry_trace(3.0), "/queue")
    assert on_time.ok and dict(on_time.metrics) == {"judged": 1}
    early = expiry_not_early(_expiry_trace(2.5), "/queue")
    assert early.violations == ("t=2.5: 'm1' (tag 0) expired before its TTL ran out at t=3",)


def _life(kind: EventKind, time: float, path: str = "/flaky") -> TraceEvent:
    return TraceEvent(kind, time, None, path, None, error="FlakyFailure('poked')")


def _failures(times: list[float], answers: list[EventKind], path: str = "/flaky") -> list[TraceEvent]:
    return [event for time, answer in zip(times, answers, strict=True)
            for event in (_life(EventKind.FAILED, time, path), _life(answer, time, path))]


R, S = EventKind.RESTARTED, EventKind.STOPPED


def test_the_default_budget_restarts_three_times_within_a_minute_then_stops() -> None:
    assert supervision(_failures([1, 2, 3, 4], [R, R, R, S])).ok
    # past the window, the oldest restarts no longer count
    assert supervision(_failures([1, 2, 3, 62], [R, R, R, R])).ok
    # a Crash fault's restart follows no failure and spends nothing
    assert supervision([_life(R, 0.5), _life(R, 0.6), *_failures([1, 2, 3, 4], [R, R, R, S])]).ok


def test_a_restart_past_the_budget_or_a_stop_within_it_is_a_violation() -> None:
    past = supervision(_failures([1, 2, 3, 4], [R, R, R, R]))
    assert any("restarted after its failure at t=4" in line for line in past.violations), past.violations
    early = supervision(_failures([1, 2], [R, S]))
    assert any("stopped after its failure at t=2, with restarts left" in line for line in early.violations)
    lingering = supervision([*_failures([1, 2, 3], [R, R, R]), _life(EventKind.FAILED, 4)])
    assert any("neither restarted nor stopped" in line for line in lingering.violations), lingering.violations


def test_a_declared_stop_strategy_stops_its_childrens_first_failure() -> None:
    declared = TraceEvent(EventKind.NOTE, 0.0, "/poker", None, SupervisionDeclared("stop", 3, 60.0))
    assert supervision([declared, *_failures([1], [S], "/poker/flaky")]).ok
    restarted = supervision([declared, *_failures([1], [R], "/poker/flaky")])
    assert not restarted.ok


@pytest.mark.parametrize(("seed", "flaky", "failures", "restarts"), [(11, "/flaky", 4, 3), (6, "/poker/flaky", 1, 0)])
def test_broker_swarm_flaky_actor_spends_its_budget(seed: int, flaky: str, failures: int, restarts: int) -> None:
    run = run_portfolio("broker-swarm", seed, hash_trace=False)
    assert run.report.ok, run.report.violations
    kinds = [event.kind for event in run.sim.trace if event.receiver == flaky and event.kind in (
        EventKind.FAILED, EventKind.RESTARTED, EventKind.STOPPED)]
    assert (kinds.count(EventKind.FAILED), kinds.count(EventKind.RESTARTED), kinds[-1]) == (
        failures, restarts, EventKind.STOPPED)


def _extension_trace(asked: float, took: float) -> list[TraceEvent]:
    """A message leased at 0 and acked ``took`` seconds later, then a message leased with an extension of ``asked``."""
    from conveyor.actors.subscriber import Part

    leaser = f"{MANAGER}/{Part.LEASER}"
    ask = type("Extend", (), {"seconds": asked})()  # the leaser's request, as the checker reads it
    return [
        TraceEvent(EventKind.DELIVERED, 0.0, MANAGER, leaser, _received("1")),
        TraceEvent(EventKind.DELIVERED, took, MANAGER, leaser, Done("1", acked=True)),
        TraceEvent(EventKind.DELIVERED, took, MANAGER, leaser, _received("2")),
        TraceEvent(EventKind.SENT, took, leaser, f"{MANAGER}/dispatcher", ask),
    ]


LONG = FlowControl(min_duration_per_lease_extension_s=2, max_duration_per_lease_extension_s=60)


def test_lease_extension_is_the_clamped_99th_percentile_of_processing_times() -> None:
    from conveyor.simulation.checkers import lease_extension

    assert lease_extension(_extension_trace(14.0, 14.7), MANAGER, LONG).ok  # 14.7 s counts as 14
    assert lease_extension(_extension_trace(10.0, 3.2), MANAGER, LONG).ok  # at least 10
    capped = FlowControl(min_duration_per_lease_extension_s=2, max_duration_per_lease_extension_s=4)
    assert lease_extension(_extension_trace(4.0, 14.7), MANAGER, capped).ok
    ignored = lease_extension(_extension_trace(10.0, 14.7), MANAGER, LONG)  # as if no time had been recorded
    assert ignored.violations == (
        "t=14.7: /sub/leaser asked for 10 s; the 99th percentile of 1 processing times, clamped into [2, 60], "
        "is 14 s",
    )


def _pull_after(*settlements: object, asked: int) -> list[TraceEvent]:
    """A consumer given tags 1 (attempt 2) and 2, its client's settlements, then a Pull asking for ``asked``."""
    from conveyor.actors.broker import Delivered, Pull

    consumer, client = "/client-0/consumer", "/client-0"
    deliveries = tuple(Delivery("queue", tag, Message(b"x"), count, 9.0, 0) for tag, count in ((1, 2), (2, 1)))
    return [
        TraceEvent(EventKind.DELIVERED, 0.0, "/queue", consumer, Delivered("queue", deliveries, exhausted=False)),
        *(TraceEvent(EventKind.DELIVERED, 0.1, client, consumer, settled) for settled in settlements),
        TraceEvent(EventKind.SENT, 0.2, consumer, "/queue", Pull(0, asked, 1 << 20)),
    ]


def test_consumer_credit_frees_what_the_client_settled_and_not_a_stale_nack() -> None:
    from conveyor.actors.broker import Ack, ModifyAckDeadline, Nack
    from conveyor.simulation.checkers import consumer_credit

    assert consumer_credit(_pull_after(asked=3), prefetch=5).ok
    assert consumer_credit(_pull_after(Ack(0, (2,)), ModifyAckDeadline(0, (1,), 0.0), asked=5), prefetch=5).ok
    assert consumer_credit(_pull_after(Nack(0, (1,), attempts=(1,)), asked=3), prefetch=5).ok  # stale: ignored
    kept = consumer_credit(_pull_after(ModifyAckDeadline(0, (1,), 0.0), asked=3), prefetch=5)
    assert kept.violations == (
        "t=0.2: /client-0/consumer pulled for 3 with its client holding 1 unsettled deliveries of a prefetch of 5",
    )
    freed = consumer_credit(_pull_after(Nack(0, (1,), attempts=(1,)), asked=4), prefetch=5)
    assert not freed.ok
