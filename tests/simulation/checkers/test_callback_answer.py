"""Callback clients' history: their jobs' outcomes, read back as receipts and answers (``callback_answer``)."""

from __future__ import annotations

import pytest

from conveyor.actors.broker import Delivered, Delivery, Message, Pull
from conveyor.runtime import EventKind, JobDone, JobFailed, TraceEvent
from conveyor.simulation.checkers import CallbackHandled, CallbackRefused, callback_answer, consumer_credit
from conveyor.simulation.scenarios._callback_clients import answer_by_callback

CONSUMER = "/callback-0/consumer"


def _delivery(tag: int, message_id: str, attempt: int = 1) -> Delivery:
    return Delivery("queue", tag, Message(b"x", message_id=message_id), attempt, None, 7)


def _job(outcome: object, time: float = 0.0) -> TraceEvent:
    return TraceEvent(EventKind.JOB_DONE, time, None, CONSUMER, outcome)


def test_the_callback_acks_by_returning_and_refuses_the_first_delivery_of_every_third_message() -> None:
    assert answer_by_callback("/queue", _delivery(1, "m1")) == CallbackHandled("/queue", 7, 1, "m1", 1)
    with pytest.raises(CallbackRefused) as refused:
        answer_by_callback("/queue", _delivery(3, "m3"))
    assert refused.value.handled == CallbackHandled("/queue", 7, 3, "m3", 1)
    assert answer_by_callback("/queue", _delivery(3, "m3", attempt=2)).attempt == 2


def test_a_jobs_outcome_is_its_clients_receipt_and_answer() -> None:
    handled = CallbackHandled("/queue", 7, 1, "m1", 1)
    assert callback_answer(_job(JobDone(1, handled))) == ("/callback-0", handled, "ack")
    assert callback_answer(_job(JobFailed(2, CallbackRefused(handled)))) == ("/callback-0", handled, "nack")
    assert callback_answer(_job(JobDone(3, None))) is None  # any other job
    assert callback_answer(_job(JobFailed(4, ValueError("no")))) is None


def _credit(trace: list[TraceEvent]) -> tuple[str, ...]:
    return consumer_credit(trace, prefetch=2).violations


def test_consumer_credit_counts_a_callbacks_answer_as_the_settlement() -> None:
    delivered = TraceEvent(EventKind.DELIVERED, 0.0, "/queue", CONSUMER,
                           Delivered("queue", (_delivery(1, "m1"), _delivery(2, "m2")), False))
    done = _job(JobDone(1, CallbackHandled("/queue", 7, 1, "m1", 1)))
    pull_one = TraceEvent(EventKind.SENT, 0.1, CONSUMER, "/queue", Pull(7, 1, 1 << 20))
    pull_two = TraceEvent(EventKind.SENT, 0.1, CONSUMER, "/queue", Pull(7, 2, 1 << 20))
    assert _credit([delivered, done, pull_one]) == ()
    assert _credit([delivered, done, pull_two]) != ()  # one is still held
    assert _credit([delivered, pull_one]) != ()  # no answer yet: nothing is free
