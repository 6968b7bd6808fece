"""The checkers issue 17 added for promises that had none, on hand-made traces: ``Start`` first and retries
(``supervision``), ``timers`` and ``lease_cap``. Each trace is a kernel's or a leaser's story told in events,
once as the kernel or the leaser keeps the promise, once with the promise broken."""

from __future__ import annotations

from conveyor.actors.broker import Delivery, Message
from conveyor.actors.subscriber import Done, FlowControl, Received
from conveyor.actors.subscriber._protocol import Scheduled, Settlement, SettlementKind, Tick
from conveyor.runtime import EventKind, TimerHandle, TraceEvent
from conveyor.runtime.lowlevel import TimerFired
from conveyor.simulation.checkers import lease_cap, supervision, timers

QUEUE = "/queue"
CLIENT = "/client"


class Start:
    """Stands for the kernel's ``Start`` (the checkers match the kernel's messages by name)."""


class Publish:
    """A message of the actors' own."""


def _sent(message: object, time: float = 0.0, sender: str | None = CLIENT, receiver: str = QUEUE) -> TraceEvent:
    return TraceEvent(EventKind.SENT, time, sender, receiver, message)


def _delivered(message: object, time: float = 0.0, sender: str | None = CLIENT, receiver: str = QUEUE) -> TraceEvent:
    return TraceEvent(EventKind.DELIVERED, time, sender, receiver, message)


def _lines(trace: list[TraceEvent], checker: str = "supervision") -> tuple[str, ...]:
    verdict = {"supervision": supervision, "timers": timers}[checker](trace)
    return verdict.violations


# --- Start first ---------------------------------------------------------------------------


def test_start_is_handled_first() -> None:
    start, publish = Start(), Publish()
    trace = [_sent(start, sender=None), _sent(publish), _delivered(start, sender=None), _delivered(publish)]
    assert _lines(trace) == ()


def test_a_message_handled_before_start_is_reported() -> None:
    start, publish = Start(), Publish()
    trace = [_sent(start, sender=None), _sent(publish), _delivered(publish), _delivered(start, sender=None)]
    assert any("before its Start" in line for line in _lines(trace))


def test_two_actors_at_one_path_are_not_judged_for_start() -> None:
    """A restarted parent's new child beside the old one still draining: the old one's mail is no breach."""
    first, second, publish = Start(), Start(), Publish()
    trace = [
        _sent(first, sender=None), _delivered(first, sender=None),
        _sent(second, sender=None), _sent(publish), _delivered(publish),  # the old one's
        _delivered(second, sender=None),
    ]
    assert _lines(trace) == ()


# --- retries -------------------------------------------------------------------------------


def _failure(message: object, again: object) -> list[TraceEvent]:
    return [
        _sent(message), _delivered(message),
        TraceEvent(EventKind.FAILED, 0.0, CLIENT, QUEUE, message, error="InjectedFault('disk')"),
        TraceEvent(EventKind.RESTARTED, 0.0, None, QUEUE, again, error="InjectedFault('disk')"),
    ]


def test_an_asked_retry_is_the_next_thing_handled() -> None:
    publish = Publish()
    assert _lines([*_failure(publish, publish), _delivered(publish)]) == ()


def test_an_asked_retry_that_never_comes_is_reported() -> None:
    publish, other = Publish(), Publish()
    trace = [*_failure(publish, publish), _sent(other), _delivered(other)]
    assert any("asked to handle Publish once more" in line for line in _lines(trace))
    assert any("never was" in line for line in _lines(_failure(publish, publish)))


def test_a_retry_nobody_asked_for_is_reported() -> None:
    publish = Publish()
    trace = [*_failure(publish, None), _delivered(publish)]
    assert any("had not asked for it" in line for line in _lines(trace))


def test_a_retry_is_not_retried() -> None:
    publish = Publish()
    trace = [
        *_failure(publish, publish), _delivered(publish),
        TraceEvent(EventKind.FAILED, 0.0, CLIENT, QUEUE, publish, error="InjectedFault('disk')"),
        TraceEvent(EventKind.RESTARTED, 0.0, None, QUEUE, publish, error="InjectedFault('disk')"),
        _delivered(publish),
    ]
    assert any("a failed message is retried once" in line for line in _lines(trace))


# --- timers --------------------------------------------------------------------------------


def _armed(timer_id: int, message: object, time: float = 0.0) -> TraceEvent:
    return TraceEvent(EventKind.TIMER_ARMED, time, None, QUEUE, TimerFired(timer_id, message))


def _cancelled(timer_id: int, time: float = 0.0) -> TraceEvent:
    return TraceEvent(EventKind.TIMER_CANCELLED, time, None, QUEUE, TimerHandle(timer_id))


def _due(timer_id: int, message: object, time: float) -> TraceEvent:
    return TraceEvent(EventKind.TIMER_FIRED, time, None, QUEUE, TimerFired(timer_id, message))


def test_a_timer_fires_and_a_cancelled_one_is_dropped() -> None:
    wake, other = Publish(), Publish()
    trace = [
        _armed(1, wake), _armed(2, other), _due(1, wake, 1.0), _due(2, other, 1.0),
        _cancelled(1, 1.0), _delivered(other, 1.0, sender=None),  # timer 1 cancelled on its way: dropped
    ]
    assert _lines(trace, "timers") == ()


def test_a_cancelled_timer_handed_over_is_reported() -> None:
    wake = Publish()
    trace = [_armed(1, wake), _due(1, wake, 1.0), _cancelled(1, 1.0), _delivered(wake, 1.0, sender=None)]
    assert any("a cancelled timer never fires" in line for line in _lines(trace, "timers"))


def test_a_cancelled_timer_that_comes_due_is_reported() -> None:
    wake = Publish()
    assert any("came due though it was cancelled" in line
               for line in _lines([_armed(1, wake), _cancelled(1, 0.5), _due(1, wake, 1.0)], "timers"))


def test_a_restart_cancels_the_timers() -> None:
    wake, fresh, next_one = Publish(), Publish(), Publish()
    restarted = TraceEvent(EventKind.RESTARTED, 1.0, None, QUEUE, None, error="InjectedFault('crash')")
    kept = [_armed(1, wake), restarted, _armed(2, fresh, 1.0), _sent(next_one, 1.0), _delivered(next_one, 1.0)]
    assert any("restarted with timer 1" in line for line in _lines(kept, "timers"))
    cancelled = [_armed(1, wake), restarted, _cancelled(1, 1.0), _armed(2, fresh, 1.0), _delivered(next_one, 1.0)]
    assert _lines(cancelled, "timers") == ()


# --- lease_cap -----------------------------------------------------------------------------

LEASER = "/sub/leaser"
FLOW = FlowControl(max_messages=10, min_duration_per_lease_extension_s=2, max_lease_duration_s=5.0)


def _received(ack_id: str, key: str | None = None) -> Received:
    return Received(ack_id, 10, key, Delivery("q", 1, Message(b"m", group=key), 1, 100.0, 1))


def _leaser_got(message: object, time: float) -> TraceEvent:
    return TraceEvent(EventKind.DELIVERED, time, "/sub", LEASER, message)


def _leaser_sent(kind: SettlementKind, ack_id: str, time: float) -> TraceEvent:
    receiver = "/sub" if kind is SettlementKind.DROP else "/sub/dispatcher"
    return TraceEvent(EventKind.SENT, time, LEASER, receiver, Settlement(kind, ack_id, 2.0))


def _cap(trace: list[TraceEvent]) -> tuple[str, ...]:
    return lease_cap(trace, "/sub", FLOW).violations


def test_a_lease_is_extended_until_its_cap_and_then_given_up() -> None:
    trace = [
        _leaser_got(_received("1:1"), 0.0), _leaser_sent(SettlementKind.MODACK, "1:1", 0.0),
        _leaser_got(Tick(), 4.0), _leaser_sent(SettlementKind.MODACK, "1:1", 4.0),
        _leaser_got(Tick(), 5.0), _leaser_sent(SettlementKind.DROP, "1:1", 5.0),
        _leaser_got(Done("1:1"), 6.0),
    ]
    assert _cap(trace) == ()


def test_a_lease_extended_past_its_cap_is_reported() -> None:
    trace = [
        _leaser_got(_received("1:1"), 0.0),
        _leaser_got(Tick(), 6.0), _leaser_sent(SettlementKind.MODACK, "1:1", 6.0),
        _leaser_got(Done("1:1"), 7.0),
    ]
    lines = _cap(trace)
    assert any("past max_lease_duration_s=5" in line for line in lines)
    assert any("kept lease 1:1 at its pass" in line for line in lines)


def test_a_keyed_lease_is_timed_from_its_scheduling_not_its_receipt() -> None:
    held = [_leaser_got(_received("1:1", key="k"), 0.0), _leaser_got(Scheduled(("1:1",)), 4.0)]
    on_time = [*held, _leaser_got(Tick(), 8.0), _leaser_sent(SettlementKind.MODACK, "1:1", 8.0)]
    assert _cap(on_time) == ()
    early = [*held, _leaser_got(Tick(), 6.0), _leaser_sent(SettlementKind.DROP, "1:1", 6.0)]
    assert any("only 2 s after its callback was scheduled" in line for line in _cap(early))
