"""The subscriber checkers on hand-made traces: a lapse that a delayed channel explains, and ones it does not.

One entry (tag 1) is delivered to the subscription's broker consumer with the queue's 1 s lease,
its callback starts, and the queue takes the lease back at t=1. What the consumer sent the queue
meanwhile, and whether a ``Delay`` fault held that channel at the lapse, decide the verdict:
``lease_validity`` and ``no_loss`` excuse the lapse only when the subscriber's extension (or
nack) was on the stalled channel when the lease ran out.
"""

from __future__ import annotations

from typing import Any, cast

import attrs

from conveyor.actors.broker import (
    Delivered,
    Delivery,
    EntryEnqueued,
    EntryReturned,
    Message,
    ModifyAckDeadline,
    Nack,
    Subscribe,
    Subscribed,
)
from conveyor.actors.subscriber import FlowControl
from conveyor.actors.subscriber._protocol import CallbackEnded, CallbackStarted
from conveyor.runtime import ActorRef, EventKind, TraceEvent
from conveyor.simulation import Delay, Drop, FaultApplied, Pause
from conveyor.simulation.checkers import lease_validity, no_loss

QUEUE = "/queue"
SUB = "/sub"
CONSUMER = "/sub/consumer"
WORKERS = "/sub/workers"
FLOW = FlowControl(max_messages=10, min_duration_per_lease_extension_s=2)
LAPSE = 1.0


@attrs.frozen
class _Cell:
    """Enough of an actor cell for an ``ActorRef`` that only has to tell its path."""

    path: str


def _event(kind: EventKind, time: float, sender: str | None, receiver: str | None, message: object) -> TraceEvent:
    return TraceEvent(kind, time, sender, receiver, message)


def _delay(duration_s: float, at: float = 0.05) -> TraceEvent:
    fault = Delay(CONSUMER, QUEUE, at_step=40, duration_s=duration_s)
    return _event(EventKind.FAULT, at, None, None, FaultApplied(fault, f"held until {at + duration_s:g}"))


def _to_queue(kind: EventKind, time: float, message: object) -> TraceEvent:
    return _event(kind, time, CONSUMER, QUEUE, message)


def _trace(*middle: TraceEvent, raised: bool = False) -> list[TraceEvent]:
    """Subscribe, enqueue, deliver tag 1 (lease until t=1), start its callback; ``middle``; the lapse at t=1."""
    message = Message(b"m0", message_id="m0")
    delivery = Delivery(QUEUE, 1, message, delivery_count=1, deadline=LAPSE, consumer_id=1)
    subscribe = Subscribe(ActorRef(cast("Any", _Cell(CONSUMER))))
    head = [
        _to_queue(EventKind.DELIVERED, 0.0, subscribe),
        _event(EventKind.SENT, 0.0, QUEUE, CONSUMER, Subscribed(QUEUE, 1)),
        _event(EventKind.NOTE, 0.0, QUEUE, None, EntryEnqueued(QUEUE, 1, message)),
        _event(EventKind.SENT, 0.0, QUEUE, CONSUMER, Delivered(QUEUE, (delivery,), exhausted=False)),
        _event(EventKind.NOTE, 0.0, WORKERS, None, CallbackStarted("1:1", None, 1, 1)),
    ]
    if raised:
        head.append(_event(EventKind.SENT, 0.1, WORKERS, SUB, CallbackEnded("1:1", None, "boom", nacked=True)))
    lapse = _event(EventKind.NOTE, LAPSE, QUEUE, None, EntryReturned(QUEUE, 1, 1, "lease lapsed"))
    return [*head, *middle, lapse]


EXTENSION = ModifyAckDeadline(1, (1,), 2.0)
NACK = Nack(1, (1,))


def _leases(trace: list[TraceEvent]) -> Any:
    return lease_validity(trace, QUEUE, SUB, FLOW)


def test_an_extension_held_on_a_delayed_channel_explains_the_lapse() -> None:
    result = _leases(_trace(_delay(2.0), _to_queue(EventKind.SENT, 0.06, EXTENSION)))
    assert result.ok, str(result)
    assert (result.metric("during_callbacks"), result.metric("delayed")) == (1, 1)


def test_the_same_lapse_without_the_delay_is_a_violation() -> None:
    result = _leases(_trace(_to_queue(EventKind.SENT, 0.06, EXTENSION)))
    assert "the lease of 1:1 lapsed while its callback ran" in result.violations[0]
    assert "no extension of it held up on the way" in result.violations[0]


def test_a_delay_with_no_extension_on_the_channel_is_no_excuse() -> None:
    """The leaser never extended: the delay held nothing that would have saved the lease."""
    other = ModifyAckDeadline(1, (2,), 2.0)  # another entry's extension
    assert not _leases(_trace(_delay(2.0))).ok
    assert not _leases(_trace(_delay(2.0), _to_queue(EventKind.SENT, 0.06, other))).ok


def test_an_extension_that_arrived_or_came_too_late_or_too_short_is_no_excuse() -> None:
    arrived = (_to_queue(EventKind.SENT, 0.01, EXTENSION), _to_queue(EventKind.DELIVERED, 0.01, EXTENSION))
    too_short = ModifyAckDeadline(1, (1,), 0.5)  # sent at 0.06, would have run out at 0.56 < 1
    cases = {
        "delivered before the stall": [*arrived, _delay(2.0)],
        "the stall ended before the lapse": [_delay(0.5), _to_queue(EventKind.SENT, 0.06, EXTENSION)],
        "too short to outlast the lapse": [_delay(2.0), _to_queue(EventKind.SENT, 0.06, too_short)],
        "another consumer's": [_delay(2.0), _to_queue(EventKind.SENT, 0.06, ModifyAckDeadline(2, (1,), 2.0))],
    }
    for case, middle in cases.items():
        result = _leases(_trace(*middle))
        assert not result.ok, f"{case}: {result}"


def test_an_extension_dropped_on_the_way_is_no_excuse() -> None:
    """A ``Drop`` fault recorded right after the send: the message never entered the channel."""
    dropped = _event(EventKind.FAULT, 0.06, None, CONSUMER, FaultApplied(Drop(CONSUMER, "ModifyAckDeadline"), "x"))
    assert not _leases(_trace(_delay(2.0), _to_queue(EventKind.SENT, 0.06, EXTENSION), dropped)).ok


def test_a_pause_still_explains_a_lapse_as_before() -> None:
    pause = _event(EventKind.FAULT, 0.05, None, None, FaultApplied(Pause(SUB, 0.05, 2.0), "frozen"))
    result = _leases(_trace(pause))
    assert result.ok and result.metric("paused") == 1, str(result)


def test_a_nack_held_on_a_delayed_channel_explains_the_lapse_after_a_raise() -> None:
    held = _trace(_delay(2.0), _to_queue(EventKind.SENT, 0.11, NACK), raised=True)
    result = no_loss(held, QUEUE)
    assert result.ok, str(result)
    assert result.metric("nack_delayed") == 1
    undelayed = no_loss([event for event in held if event.kind is not EventKind.FAULT], QUEUE)
    assert any("was never nacked after its callback raised" in line for line in undelayed.violations)


def test_a_nack_not_sent_by_the_lapse_is_still_a_violation_under_a_delay() -> None:
    never = no_loss(_trace(_delay(2.0), raised=True), QUEUE)
    assert any("was never nacked after its callback raised" in line for line in never.violations)
    extension_only = no_loss(_trace(_delay(2.0), _to_queue(EventKind.SENT, 0.06, EXTENSION), raised=True), QUEUE)
    assert any("was never nacked" in line for line in extension_only.violations)
