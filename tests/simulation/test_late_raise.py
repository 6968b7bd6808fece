"""A raise reported after the queue redelivered the message is not charged to the redelivery (no_loss).

The 5000-5299 sweep found ``no_loss`` saying "1:18 was acked although its callback raised" in
three runs. In each, a callback raised on delivery attempt N while a ``Pause`` froze ``/sub``;
the lease of attempt N lapsed during the pause; when the pause ended the queue redelivered the
message (attempt N+1, same tag, so the same ack id) before the paused worker pool got round to
sending its ``CallbackEnded`` for attempt N. The checker saw the raise while the queue held a
delivery of that ack id and followed it to the queue's next word on the entry: the ack of
attempt N+1, whose own callback had run and returned. No message was acked that should not
have been; the checker now ends the follow-up when the message is run again on a later attempt.

Those seeds are pinned here, with hand-built traces of the exact interleaving that show the
checker still catches what it is for: an ack after a raise with no new run in between.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from conveyor.actors.broker import (
    Delivered,
    Delivery,
    EntryEnqueued,
    EntryReturned,
    EntrySettled,
    Message,
    Subscribe,
    Subscribed,
)
from conveyor.actors.subscriber._protocol import CallbackEnded, CallbackStarted
from conveyor.runtime import Actor, ActorRef, EventKind, TraceEvent
from conveyor.simulation import Simulation
from conveyor.simulation.checkers import CheckResult, no_loss
from conveyor.simulation.scenarios import run_scenario

FOUND = (
    # 5172 (pct, pause) and 5019 (random, pause,queue-crash) found it in ordering-keys; the keyed
    # messages' Scheduled (issue 15: the max-lease clock starts when a callback is scheduled) changed
    # those runs' interleavings, and no seed of 5000-5299 meets a late raise there now: 21 and 441 did.
    # Since keyed messages share worker jobs (issue 21), 441 still does; 21 and seeds 0-399 of pct/pause no
    # longer meet one (their hand-built twins below keep the checker honest). Since a key's held messages run
    # as one key run in a job (branch keyjobs), 441 no longer meets one; 1016 (first of 0-1900) does.
    ("ordering-keys", 1016, "random", "pause,queue-crash"),
    ("paused-process", 5003, "random", "pause,queue-crash"),
    ("paused-process", 91, "random", "pause,queue-crash"),
)
"""Every "acked although its callback raised" of the 63,600-run sweep of seeds 5000-5299, and the one
of seeds 0-299 of the subscriber scenarios under ``default``, ``pause`` and ``pause,queue-crash``."""

QUEUE = "/queue"
SUB = "/sub"
WORKERS = "/sub/workers"
CONSUMER = "/sub/consumer"
TAG = 18
ACK_ID = f"1:{TAG}"


@pytest.fixture(autouse=True)
def _quiet_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.CRITICAL, logger="conveyor")
    yield


@pytest.mark.parametrize(("name", "seed", "strategy", "faults"), FOUND)
def test_the_seeds_that_found_a_late_raise_pass(name: str, seed: int, strategy: str, faults: str) -> None:
    run = run_scenario(name, seed, strategy=strategy, faults=faults)
    assert run.report.ok, run.report.violations
    (result,) = (result for result in run.results if result.checker == "no_loss")
    assert result.metric("raised_then_run_again") >= 1  # the late raise was seen, and its message run again


# --- the interleaving, by hand ---------------------------------------------------------------------


class _Idle(Actor):
    def receive(self, message: Any) -> None:
        pass


class _Subscription(Actor):
    """Only gives the trace's ``Subscribe`` a real reference at ``/sub/consumer``."""

    def __init__(self, refs: list[ActorRef]) -> None:
        self.refs = refs

    def on_start(self) -> None:
        self.refs.append(self.ctx.spawn(_Idle, name="consumer"))

    def receive(self, message: Any) -> None:
        pass


def _consumer_ref() -> ActorRef:
    refs: list[ActorRef] = []
    sim = Simulation(seed=1)
    sim.spawn(lambda: _Subscription(refs), name="sub")
    sim.run(until=0.1)
    (ref,) = refs
    assert ref.path == CONSUMER
    return ref


MESSAGE = Message(b"m17", group="k3")


class _Trace:
    """A trace of one queue entry (``1:18``) and one subscription, written step by step."""

    def __init__(self) -> None:
        self.time = 0.0
        self.events: list[TraceEvent] = []
        self._event(EventKind.DELIVERED, None, QUEUE, Subscribe(_consumer_ref()))
        self._event(EventKind.SENT, QUEUE, CONSUMER, Subscribed("queue", 1))
        self._event(EventKind.NOTE, QUEUE, None, EntryEnqueued("queue", TAG, MESSAGE))

    def _event(self, kind: EventKind, sender: str | None, receiver: str | None, message: object) -> None:
        self.time += 0.01
        self.events.append(TraceEvent(kind, self.time, sender, receiver, message))

    def delivered(self, attempt: int) -> None:
        delivery = Delivery("queue", TAG, MESSAGE, attempt, self.time + 1.0, 1)
        self._event(EventKind.SENT, QUEUE, CONSUMER, Delivered("queue", (delivery,), False))

    def lapsed(self) -> None:
        self._event(EventKind.NOTE, QUEUE, None, EntryReturned("queue", TAG, 1, "lease lapsed"))

    def started(self, attempt: int) -> None:
        self._event(EventKind.NOTE, WORKERS, None, CallbackStarted(ACK_ID, "k3", TAG, attempt))

    def ended(self, error: str | None = None) -> None:
        self._event(EventKind.SENT, WORKERS, SUB, CallbackEnded(ACK_ID, "k3", error, nacked=error is not None))

    def acked(self) -> None:
        self._event(EventKind.NOTE, QUEUE, None, EntrySettled("queue", TAG, "acked", 1))

    def check(self) -> CheckResult:
        return no_loss(self.events, QUEUE)


def test_a_raise_reported_after_the_redelivery_is_not_charged_to_the_redelivery_run_again() -> None:
    """Seed 5172's story: attempt 1 raised in a paused pool, lapsed; attempt 2 ran and was acked."""
    trace = _Trace()
    trace.delivered(1)
    trace.started(1)
    trace.lapsed()  # the pause outlasted the lease: the queue took attempt 1 back
    trace.delivered(2)  # the pause ended: the queue redelivered at once, under the same tag
    trace.ended("CallbackFailure('scenario callback fails on 1:18 attempt 1')")  # attempt 1's raise, late
    trace.started(2)
    trace.ended()
    trace.acked()  # attempt 2's own ack
    result = trace.check()
    assert result.ok, str(result)
    assert result.metric("raised_then_run_again") == 1


def test_an_ack_after_a_raise_with_no_new_run_is_still_caught() -> None:
    """The same late raise, but the message is acked without being run again: the failure was swallowed."""
    trace = _Trace()
    trace.delivered(1)
    trace.started(1)
    trace.lapsed()
    trace.delivered(2)
    trace.ended("CallbackFailure('attempt 1')")
    trace.acked()  # no callback ran on attempt 2
    result = trace.check()
    assert not result.ok
    assert "1:18 was acked although its callback raised" in result.violations[0]
    assert "attempt 1" in result.violations[0]


def test_a_late_ack_of_a_lapsed_delivery_that_settles_a_redelivery_whose_callback_raised_is_caught() -> None:
    """The suspected bug: attempt 1's late ack settling attempt 2, whose callback raised. Still a violation."""
    trace = _Trace()
    trace.delivered(1)
    trace.started(1)
    trace.lapsed()
    trace.delivered(2)
    trace.ended()  # attempt 1 returned (late), and its ack is on the way
    trace.started(2)
    trace.ended("CallbackFailure('attempt 2')")
    trace.acked()  # attempt 1's ack took on attempt 2 (same tag)
    result = trace.check()
    assert not result.ok
    assert "attempt 2" in result.violations[0]


def test_a_raise_whose_redelivery_was_absorbed_is_still_followed() -> None:
    """Redelivered while attempt 1 ran (the manager keeps the running copy): its raise must nack attempt 2."""
    trace = _Trace()
    trace.delivered(1)
    trace.started(1)
    trace.lapsed()
    trace.delivered(2)  # absorbed: no callback starts on it
    trace.ended("CallbackFailure('attempt 1')")
    trace.acked()
    assert "acked although its callback raised" in trace.check().violations[0]
