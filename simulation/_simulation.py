"""Simulation: the actor system as a deterministic, single-threaded, virtual-time program.

Every message waits in the FIFO channel of its (sender, receiver) pair; at each
step the strategy picks which ready channel delivers next, which is exactly the
freedom the real backends have (they only keep per-pair order). Timers and jobs
complete at virtual times; when nothing is ready the clock jumps to the next one.
One seed and one strategy give one trace, byte for byte.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Callable, Sequence
from typing import Any, final

import attrs

from conveyor.runtime import (
    ActorRef,
    ConveyorError,
    SupervisorStrategy,
    TimerHandle,
)
from conveyor.runtime._cell import ActorCell, CellBase, PromiseCell
from conveyor.runtime._messages import JobDone, JobFailed, TimerFired
from conveyor.runtime._system import ActorSystemBase
from conveyor.runtime._timers import TimerQueue
from conveyor.runtime._trace import EventKind, trace_hash

from ._channel import JOBS, OUTSIDE, TIMERS, Channel
from ._strategies import RandomWalk, Strategy

JobDuration = Callable[[random.Random], float]


def uniform_job_duration(low: float = 0.001, high: float = 0.05) -> JobDuration:
    """Jobs take a uniformly drawn virtual duration between ``low`` and ``high`` seconds."""
    if not 0 <= low <= high:
        msg = f"job duration bounds must satisfy 0 <= low <= high, got low={low}, high={high}"
        raise ValueError(msg)

    def draw(rng: random.Random) -> float:
        return rng.uniform(low, high)

    return draw


@final
@attrs.frozen
class RunResult:
    """How a ``run`` ended.

    Attributes:
        steps: deliveries made by this call.
        time: the virtual clock afterwards.
        quiet: True if nothing was left to deliver, fire or finish (up to ``until``).
    """

    steps: int
    time: float
    quiet: bool


@final
class Simulation(ActorSystemBase):
    """A deterministic actor system on a virtual clock.

    Args:
        seed: fixes ``ctx.random``, job durations and the default strategy.
        strategy: picks the next ready channel; ``RandomWalk(seed)`` by default.
        trace: record trace events (on by default: the trace is the evidence).
        job_duration: draws each job's virtual duration from a seeded generator.
        supervisor_strategy: how top-level actors are supervised.
    """

    def __init__(
        self,
        seed: int = 0,
        strategy: Strategy | None = None,
        *,
        trace: bool = True,
        job_duration: JobDuration | None = None,
        supervisor_strategy: SupervisorStrategy | None = None,
    ) -> None:
        super().__init__(supervisor_strategy=supervisor_strategy, trace=trace, seed=f"actors:{seed}")
        self.seed = seed
        self.strategy: Strategy = strategy if strategy is not None else RandomWalk(seed)
        self._job_rng = random.Random(f"jobs:{seed}")
        self._job_duration = job_duration or uniform_job_duration()
        self._now = 0.0
        self._channels: dict[tuple[int, int], Channel] = {}
        self._ready: list[Channel] = []
        self._timers = TimerQueue()
        self._jobs: list[tuple[float, int, int, ActorCell, Callable[..., Any], tuple[Any, ...]]] = []
        self._job_seq = itertools.count()
        self._current: ActorCell | None = None
        self.schedule: list[int] = []
        """The choices made so far; ``Replay(sim.schedule)`` reproduces this run."""
        self.steps = 0
        """Deliveries made since the simulation was created."""

    # --- backend hooks ------------------------------------------------------------------

    def now(self) -> float:
        """The virtual clock, in seconds."""
        return self._now

    def _current_cell(self) -> ActorCell | None:
        return self._current

    def _enqueue(self, target: CellBase, sender: CellBase | None, message: object) -> None:
        self._push(OUTSIDE if sender is None else sender.uid, sender, target, message)

    def _push(self, sender_id: int, sender: CellBase | None, target: CellBase, message: object) -> None:
        key = (sender_id, target.uid)
        channel = self._channels.get(key)
        if channel is None:
            channel = self._channels[key] = Channel(key, sender, target)
        channel.queue.append(message)
        if channel.index < 0:
            channel.index = len(self._ready)
            self._ready.append(channel)

    def _schedule(self, cell: ActorCell, delay_s: float, message: object) -> TimerHandle:
        return self._timers.arm(self._now + delay_s, cell, message)

    def _cancel(self, handle: TimerHandle) -> bool:
        return self._timers.cancel(handle)

    def _start_job(self, cell: ActorCell, job_id: int, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        duration = self._job_duration(self._job_rng)
        if not duration >= 0:
            msg = f"job_duration returned {duration!r}; it must be a number >= 0"
            raise ValueError(msg)
        heapq.heappush(self._jobs, (self._now + duration, next(self._job_seq), job_id, cell, fn, args))

    # --- stepping -----------------------------------------------------------------------

    def _next_event_time(self) -> float | None:
        timer = self._timers.next_deadline()
        job = self._jobs[0][0] if self._jobs else None
        if timer is None:
            return job
        return timer if job is None else min(timer, job)

    def _fire_due(self, until: float | None) -> bool:
        """Jump the clock to the next timer or job and fire all due then; False if none.

        At one instant, timers fire before jobs complete, each in arming order.
        """
        when = self._next_event_time()
        if when is None or (until is not None and when > until):
            return False
        self._now = max(self._now, when)
        tracer = self.tracer
        for timer_id, cell, message in self._timers.pop_due(self._now):
            if tracer is not None:
                tracer.record(EventKind.TIMER_FIRED, self._now, None, cell, message)
            self._push(TIMERS, None, cell, TimerFired(timer_id, message))
        jobs = self._jobs
        while jobs and jobs[0][0] <= self._now:
            _, _, job_id, cell, fn, args = heapq.heappop(jobs)
            outcome: object
            try:
                outcome = JobDone(job_id, fn(*args))
            except Exception as error:  # noqa: BLE001 - the failure is the message
                outcome = JobFailed(job_id, error)
            if tracer is not None:
                tracer.record(EventKind.JOB_DONE, self._now, None, cell, outcome)
            self._push(JOBS, None, cell, outcome)
        return True

    def step(self, until: float | None = None) -> bool:
        """Make one delivery, jumping the clock first if nothing is ready; False if idle."""
        ready = self._ready
        while not ready:
            if not self._fire_due(until):
                return False
        count = len(ready)
        if count == 1:
            index = 0
        else:
            index = self.strategy.choose(ready)
            self.schedule.append(index)
        channel = ready[index]
        queue = channel.queue
        message = queue.popleft()
        if not queue:
            last = ready.pop()
            if last is not channel:
                ready[index] = last
                last.index = index
            channel.index = -1
        receiver = channel.receiver
        self.steps += 1
        if isinstance(receiver, ActorCell):
            self._current = receiver
            try:
                receiver.process(channel.sender, message)
            finally:
                self._current = None
        else:
            receiver.process(channel.sender, message)
        return True

    def run(self, until: float | None = None, max_steps: int | None = None) -> RunResult:
        """Deliver until quiet, until virtual time ``until``, or for ``max_steps`` steps.

        With ``until``, the clock ends at ``until`` if the run went quiet before it.
        """
        if max_steps is not None and max_steps < 0:
            msg = f"max_steps must be >= 0, got {max_steps}"
            raise ValueError(msg)
        steps = 0
        quiet = False
        while max_steps is None or steps < max_steps:
            if not self.step(until):
                quiet = True
                break
            steps += 1
        if quiet and until is not None and self._now < until:
            self._now = until
        return RunResult(steps=steps, time=self._now, quiet=quiet)

    def ask(self, ref: ActorRef, message: object, timeout: float = 5.0, max_steps: int = 1_000_000) -> Any:
        """Send ``message`` and run the simulation until the reply arrives.

        Raises:
            ActorDeadError: the actor is (or becomes, before answering) dead.
            AskTimeout: ``timeout`` virtual seconds passed, or the system went quiet, without a reply.
            Exception: whatever the actor raised while handling the question.
        """
        promise = self._send_question(ref, message, PromiseCell)
        deadline = self._now + timeout
        steps = 0
        while not promise.settled and steps < max_steps and self.step(deadline):
            steps += 1
        why = "the simulation went quiet" if steps < max_steps else f"{max_steps} steps passed"
        upcoming = self._next_event_time()
        if not promise.settled and upcoming is not None and upcoming > deadline:
            self._now = deadline
            why = f"{timeout} virtual seconds passed"
        return self._answer(promise, ref, message, why)

    def join(self, ref: ActorRef, timeout: float | None = None) -> None:
        """Run the simulation until ``ref`` has stopped.

        Raises:
            TimeoutError: still running after ``timeout`` virtual seconds, or the run went quiet.
        """
        until = None if timeout is None else self._now + timeout
        while ref.is_alive and self.step(until):
            pass
        if ref.is_alive:
            msg = f"{ref.path} still running at virtual time {self._now}"
            raise TimeoutError(msg)

    def shutdown(self) -> None:
        """Stop every actor now, as the real systems do on exit: ``on_stop`` runs and
        queued messages become dead letters; pending timers and jobs are dropped."""
        for cell in reversed(self._live_cells()):
            cell.terminate("shutdown", None)
        while self._ready:
            channel = self._ready.pop()
            channel.index = -1
            leftover = list(channel.queue)
            channel.queue.clear()
            for message in leftover:
                channel.receiver.process(channel.sender, message)
        self._jobs.clear()
        self._timers.clear()

    # --- inspection ---------------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Messages queued in channels, not yet delivered."""
        return sum(len(channel.queue) for channel in self._ready)

    @property
    def ready_channels(self) -> Sequence[Channel]:
        """The channels with messages, in the order the strategy sees them."""
        return tuple(self._ready)

    def trace_hash(self) -> str:
        """SHA-256 of the canonical trace; equal across runs with one seed and strategy."""
        if self.tracer is None:
            msg = "trace_hash() needs a Simulation created with trace=True"
            raise ConveyorError(msg)
        return trace_hash(self.tracer.events)
