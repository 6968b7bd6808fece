"""The kernel's timer promise (docs/architecture.md), read from the simulator's timer records.

A cancelled timer never fires, and a restart (or a stop) cancels the actor's timers. The
simulator traces each timer's life: ``TIMER_ARMED`` (``TimerFired(timer_id, message)``, for the
actor that owns it), ``TIMER_CANCELLED`` (its ``TimerHandle``), ``TIMER_FIRED`` (it came due:
its ``TimerFired`` is queued for the owner) and, if the owner takes it, the ``DELIVERED`` of its
message from no sender. A trace without ``TIMER_ARMED`` records (another backend) is not judged,
nor a restart or stop while two actors live at one path (a restarted parent's old child, still
draining beside its successor): the records name paths, so whose timers they are is not told.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import final

from conveyor.runtime import EventKind, TimerHandle, TraceEvent
from conveyor.runtime.lowlevel import TimerFired

from ._result import CheckResult


@final
class _Timers:
    """Every timer of a trace: armed, cancelled, came due, handled; ``violations`` once observed."""

    def __init__(self) -> None:
        self.owner: dict[int, str] = {}  # timer id -> the actor that armed it
        self.cancelled: dict[int, float] = {}  # timer id -> when
        self.live: dict[str, dict[int, object]] = {}  # actor -> its timers armed, not cancelled nor handled
        self.due: dict[str, deque[tuple[int, object]]] = {}  # actor -> (timer id, message) queued for it
        self.must_cancel: dict[str, tuple[float, str, list[int]]] = {}  # actor -> (when, why, its timers to cancel)
        self.alive: dict[str, int] = {}  # path -> actors started there and not stopped
        self.violations: list[str] = []
        self.armed = self.fired = self.handled = 0

    def observe(self, event: TraceEvent) -> None:
        """Follow one event."""
        kind = event.kind
        if kind is EventKind.DELIVERED or kind is EventKind.DEAD_LETTER:
            if self.must_cancel:
                self._settle_step()
            if kind is EventKind.DELIVERED and event.sender is None and event.receiver in self.due:
                self._handled(event)
        elif kind is EventKind.SENT:
            if event.receiver is not None and type(event.message).__name__ == "Start":
                self.alive[event.receiver] = self.alive.get(event.receiver, 0) + 1
        elif kind is EventKind.TIMER_ARMED:
            fired = event.message
            if isinstance(fired, TimerFired) and event.receiver is not None:
                self.armed += 1
                self.owner[fired.timer_id] = event.receiver
                self.live.setdefault(event.receiver, {})[fired.timer_id] = fired.message
        elif kind is EventKind.TIMER_CANCELLED:
            handle = event.message
            if isinstance(handle, TimerHandle) and handle.timer_id in self.owner:
                timer_id = handle.timer_id
                self.cancelled.setdefault(timer_id, event.time)
                self.live.get(self.owner[timer_id], {}).pop(timer_id, None)
        elif kind is EventKind.TIMER_FIRED:
            fired = event.message
            if isinstance(fired, TimerFired) and fired.timer_id in self.owner:
                self.fired += 1
                owner = self.owner[fired.timer_id]
                when = self.cancelled.get(fired.timer_id)
                if when is not None:
                    self.violations.append(
                        f"t={event.time:g}: timer {fired.timer_id} of {owner} ({type(fired.message).__name__}) came "
                        f"due though it was cancelled at t={when:g}"
                    )
                self.due.setdefault(owner, deque()).append((fired.timer_id, fired.message))
        elif kind is EventKind.RESTARTED and event.receiver is not None:
            armed = self.live.get(event.receiver)
            # ``restart`` records the restart, then cancels them (the fresh instance may arm its own);
            # with two actors at one path, whose timers they are is not told.
            if armed and self.alive.get(event.receiver, 0) <= 1:
                self.must_cancel[event.receiver] = (event.time, "restarted", list(armed))
        elif kind is EventKind.STOPPED and event.receiver is not None:
            # ``terminate`` cancels the timers before it records the stop.
            living = self.alive.get(event.receiver, 0)
            self.alive[event.receiver] = max(living - 1, 0)
            armed = self.live.get(event.receiver)
            if armed and living <= 1:
                self.must_cancel[event.receiver] = (event.time, "stopped", list(armed))
                self._settle_step()

    def _handled(self, event: TraceEvent) -> None:
        """The owner handled a message from no sender: if a queued timer carries it, that timer fired."""
        actor = event.receiver
        assert actor is not None
        queued = self.due[actor]
        message = event.message
        matches = [index for index, (_, carried) in enumerate(queued) if carried is message]
        if not matches:
            return  # a job's result or a tell from outside
        live = [index for index in matches if queued[index][0] not in self.cancelled]
        index = live[0] if live else matches[0]
        timer_id = queued[index][0]
        # Cancelled timers queued ahead of it were dropped by their owner: that is the promise kept.
        for _ in range(index + 1):
            queued.popleft()
        self.handled += 1
        self.live.get(actor, {}).pop(timer_id, None)
        if not live:
            self.violations.append(
                f"t={event.time:g}: {actor} handled {type(message).__name__} of timer {timer_id}, cancelled at "
                f"t={self.cancelled[timer_id]:g}: a cancelled timer never fires"
            )

    def _settle_step(self) -> None:
        for actor, (when, why, timer_ids) in self.must_cancel.items():
            live = self.live.get(actor, {})
            for timer_id in timer_ids:
                if timer_id in live:
                    message = live.pop(timer_id)
                    self.violations.append(
                        f"t={when:g}: {actor} {why} with timer {timer_id} ({type(message).__name__}) still armed: "
                        f"a {'restart' if why == 'restarted' else 'stop'} cancels the actor's timers"
                    )
        self.must_cancel.clear()

    def result(self) -> CheckResult:
        """The verdict (call once every event was observed)."""
        self._settle_step()
        return CheckResult.of("timers", self.violations, armed=self.armed, cancelled=len(self.cancelled),
                              fired=self.fired, handled=self.handled)


def timers(trace: Iterable[TraceEvent]) -> CheckResult:
    """A cancelled timer never fires; a restart or a stop cancels every timer the actor had armed.

    From the simulator's timer records: a timer cancelled before it came due must not come due;
    one cancelled while its ``TimerFired`` was queued must not reach its owner (the owner drops
    it); and when an actor restarts (stops), each timer it armed that was neither cancelled nor
    handled is cancelled before the next delivery (before the stop is recorded), so the fresh
    instance never gets the old one's wake-ups.
    """
    watch = _Timers()
    for event in trace:
        watch.observe(event)
    return watch.result()
