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
    Actor,
    ActorRef,
    ActorSystemBase,
    ConveyorError,
    EventKind,
    JobDone,
    JobFailed,
    SupervisorStrategy,
    TimerHandle,
    is_finite_number,
    quote,
    trace_hash,
)
from conveyor.runtime.lowlevel import ActorCell, Backend, CellBase, PromiseCell, StoreHook, TimerFired, TimerQueue

from ._channel import JOBS, OUTSIDE, TIMERS, Channel
from ._choices import seeded_random, streamed
from ._disk import DiskFaults, SimDisk
from ._disk_journal import OpenStore, SimJournal
from ._faults import (
    Crash,
    CrashAmong,
    Delay,
    Drop,
    FailJob,
    FailWrite,
    Fault,
    FaultApplied,
    InjectedFault,
    Pause,
    ProcessCrash,
    check_faults,
    covers,
)
from ._strategies import RandomWalk, Strategy

_HELD = -2
"""``Channel.index`` of a channel with messages that a pause or delay holds back."""

JobDuration = Callable[[random.Random], float]


def uniform_job_duration(low: float = 0.001, high: float = 0.05) -> JobDuration:
    """Jobs take a uniformly drawn virtual duration between ``low`` and ``high`` seconds."""
    if not (is_finite_number(low) and is_finite_number(high) and 0 <= low <= high):
        msg = (
            "uniform_job_duration bounds must be finite numbers of seconds with 0 <= low <= high, "
            f"got low={quote(low)}, high={quote(high)}"
        )
        raise ValueError(msg)

    def draw(rng: random.Random) -> float:
        return rng.uniform(low, high)

    return draw


def _check_arguments(seed: object, strategy: object, trace: object, job_duration: object) -> None:
    """Refuse a bad ``Simulation`` argument at the call, naming it and what it may be."""
    if type(seed) is not int:
        msg = f"Simulation seed must be an int, got {quote(seed)}"
        raise TypeError(msg)
    if strategy is not None and (
        isinstance(strategy, type)
        or not callable(getattr(strategy, "choose", None))
        or not isinstance(getattr(strategy, "name", None), str)
    ):
        msg = (
            "Simulation strategy must be None or a Strategy (RandomWalk, PCT, RoundRobin, Replay, "
            f"HypothesisStrategy: a name and a choose(ready) method), got {quote(strategy)}"
        )
        if isinstance(strategy, str):
            msg += f"; strategy_from_name({quote(strategy)}, seed) builds one by name"
        raise TypeError(msg)
    if type(trace) is not bool:
        msg = f"Simulation trace must be True or False, got {quote(trace)}"
        raise TypeError(msg)
    if job_duration is not None and not callable(job_duration):
        msg = (
            "Simulation job_duration must be None or a callable drawing a duration from a random.Random "
            f"(uniform_job_duration(low, high)), got {quote(job_duration)}"
        )
        raise TypeError(msg)


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
@attrs.frozen
class _Hold:
    """Channels matching (sender, receiver) deliver nothing before ``until``."""

    until: float
    sender: str | None  # exact path, or None for any sender
    receiver: str  # a prefix (pause) or an exact path (delay)
    exact: bool

    def matches(self, channel: Channel) -> bool:
        receiver = channel.receiver.path
        if self.exact:
            return receiver == self.receiver and channel.sender_name == self.sender
        return covers(self.receiver, receiver)


_SENT = EventKind.SENT


@final
class _SimCell(ActorCell):
    """An actor in the simulator: its outgoing channels by receiving cell.

    A send finds its channel through the sending cell, not by a (sender, receiver) key: it
    then builds and hashes no tuple.
    """

    __slots__ = ("outgoing",)

    def __init__(
        self,
        system: Backend,
        uid: int,
        name: str,
        parent: ActorCell | None,
        factory: Callable[[], Actor],
        supervisor: SupervisorStrategy,
    ) -> None:
        self.outgoing: dict[CellBase, Channel] = {}
        super().__init__(system, uid, name, parent, factory, supervisor)
        if isinstance(system, Simulation):
            system.last_at[self.path] = self


@final
class _SimPromise(PromiseCell):
    """An ask's asker in the simulator: the channel of its question, as an actor's."""

    __slots__ = ("outgoing",)

    def __init__(self, system: Backend, uid: int) -> None:
        self.outgoing: dict[CellBase, Channel] = {}
        super().__init__(system, uid)



@final
@attrs.frozen
class _CrashNow:
    """An armed ``ProcessCrash`` whose message was sent: it is applied at ``at_step``."""

    fault: ProcessCrash
    at_step: int
    why: str


@final
class Simulation(ActorSystemBase):
    """A deterministic actor system on a virtual clock.

    Args:
        seed: fixes ``ctx.random``, job durations and the default strategy.
        strategy: picks the next ready channel; ``RandomWalk(seed)`` by default.
        trace: record trace events (on by default: the trace is the evidence).
        job_duration: draws each job's virtual duration from a seeded generator.
        supervisor_strategy: how top-level actors are supervised.
        faults: crashes, pauses, delays, failing jobs and dropped messages to inject
            (``conveyor.simulation.faults``); each is recorded in the trace when applied.
        journal_store: opens a disk journal store on the simulation's ``SimDisk`` (``disk``) from a
            first write number (``DiskJournalStore(dir, fs=disk, threaded=False, first_write=n)``):
            durable journals then go through the real storage code, synced at virtual times.
        disk: how the simulation's ``SimDisk`` misbehaves (torn writes, failed fsyncs, a full disk),
            drawn from the run; given alone, the disk is there for actors handed it (``sim.disk``).
        process: the top-level actors of the process that holds the journals: a ``ProcessCrash``
            (or a disk failure) restarts them from what the disk kept.
        disk_latency: bounds of the virtual seconds a group commit takes.

    Raises:
        TypeError: an argument of the wrong kind, at the call, naming it and what it may be
            (a strategy given by name, say, or ``trace=None``), rather than an AttributeError later.
    """

    cell_type = _SimCell

    def __init__(
        self,
        seed: int = 0,
        strategy: Strategy | None = None,
        *,
        trace: bool = True,
        job_duration: JobDuration | None = None,
        supervisor_strategy: SupervisorStrategy | None = None,
        faults: Sequence[Fault] = (),
        journal_store: OpenStore | None = None,
        disk: DiskFaults | None = None,
        process: Sequence[str] = (),
        disk_latency: tuple[float, float] = (0.0005, 0.005),
    ) -> None:
        _check_arguments(seed, strategy, trace, job_duration)
        super().__init__(supervisor_strategy=supervisor_strategy, trace=trace, seed=f"actors:{seed}")
        plan = check_faults(faults)
        self.faults: tuple[Fault, ...] = plan
        self.faults_applied: list[FaultApplied] = []
        """Every fault as it was applied, in order (also in the trace as FAULT events)."""
        self._step_faults: list[Crash | CrashAmong | Delay | ProcessCrash | _CrashNow] = sorted(
            (f for f in plan if isinstance(f, (Crash, CrashAmong, Delay, ProcessCrash))),
            key=lambda f: f.at_step, reverse=True,
        )
        self._pauses: list[Pause] = sorted((f for f in plan if isinstance(f, Pause)), key=lambda f: -f.at_time)
        self._drops: tuple[Drop, ...] = tuple(f for f in plan if isinstance(f, Drop))
        self._armed_crashes: list[ProcessCrash] = []  # waiting for their process to send ``after_sent``
        self._failing_jobs: dict[FailJob, int] = {f: 0 for f in plan if isinstance(f, FailJob)}
        self._failing_writes: dict[FailWrite, int] = {f: 0 for f in plan if isinstance(f, FailWrite)}
        self._holds: list[_Hold] = []
        self._held: list[Channel] = []
        self.seed = seed
        # Inside a choice_stream block, scheduling, ctx.random and job durations draw from its stream.
        self.strategy: Strategy = streamed(strategy if strategy is not None else RandomWalk(seed))
        self._actor_rng = seeded_random(f"actors:{seed}")
        self._job_rng = seeded_random(f"jobs:{seed}")
        self._job_duration = job_duration or uniform_job_duration()
        self._now = 0.0
        self._outgoing: dict[int, dict[CellBase, Channel]] = {OUTSIDE: {}, TIMERS: {}, JOBS: {}}
        """Channels from the senders that are not cells (outside code, timers, jobs), by receiver."""
        self._ready: list[Channel] = []
        self._timers = TimerQueue()
        self._jobs: list[tuple[float, int, int, ActorCell, Callable[..., Any], tuple[Any, ...]]] = []
        self._job_seq = itertools.count()
        self._current: ActorCell | None = None
        self.schedule: list[int] = []
        """The choices made so far; ``Replay(sim.schedule)`` reproduces this run."""
        self.steps = 0
        """Deliveries made since the simulation was created."""
        self._io: list[tuple[float, int, Callable[[], None]]] = []  # disk work due at virtual times
        self.process = tuple(process)
        self.disk: SimDisk | None = None
        """The simulated disk under the journal store (None without ``journal_store``)."""
        self._disk_journal: SimJournal | None = None
        self.last_at: dict[str, ActorCell] = {}
        """The latest actor spawned at each path, live or stopped (what a recovered journal's ref names)."""
        self.process_crash_listeners: list[Callable[[], None]] = []
        """Called after each process crash: a harness tells the process's clients their connections died."""
        if journal_store is not None or disk is not None:
            self.disk = SimDisk(seeded_random(f"disk:{seed}"), disk)
        if journal_store is not None and self.disk is not None:
            io_rng = seeded_random(f"io:{seed}")
            low, high = disk_latency

            def after_latency(work: Callable[[], None]) -> None:
                heapq.heappush(self._io, (self._now + io_rng.uniform(low, high), next(self._job_seq), work))

            self._disk_journal = SimJournal(self.disk, journal_store, after_latency)
            self.journal_store = self._disk_journal
            self._disk_journal.start(self)

    # --- backend hooks ------------------------------------------------------------------

    @property
    def random(self) -> random.Random:
        """``ctx.random``: seeded from ``actors:{seed}`` (or drawing from the enclosing choice stream)."""
        return self._actor_rng

    def now(self) -> float:
        """The virtual clock, in seconds."""
        return self._now

    def current_cell(self) -> ActorCell | None:
        """The actor whose handler the simulation is running, if any."""
        return self._current

    def enqueue(self, target: CellBase, sender: CellBase | None, message: object) -> None:
        """Append to the channel from ``sender`` to ``target``; the strategy picks when it delivers."""
        self._push(OUTSIDE if sender is None else sender.uid, sender, target, message)

    def send(self, sender: CellBase | None, target: CellBase, message: object) -> None:
        """The base class's send, with the trace record and the push inlined (the simulator's hot path)."""
        if target.is_promise:
            super().send(sender, target, message)  # answers an ask (and records the send)
            return
        tracer = self.tracer
        if tracer is not None:  # as the base class records a send, without its two further calls
            tracer.record(_SENT, self._now, sender, target, message)
        self._push(OUTSIDE if sender is None else sender.uid, sender, target, message)

    def _push(self, sender_id: int, sender: CellBase | None, target: CellBase, message: object) -> None:
        if self._drops and self._dropped(sender, target, message):
            return
        if self._armed_crashes and sender is not None:
            self._trigger_crashes(sender, message)
        if type(sender) is _SimCell:
            outgoing = sender.outgoing
        elif sender is None:
            outgoing = self._outgoing[sender_id]
        else:
            outgoing = self._outgoing_of_asker(sender)
        channel = outgoing.get(target)
        if channel is None:
            channel = outgoing[target] = Channel((sender_id, target.uid), sender, target)
        channel.queue.append(message)
        if channel.index == -1:
            if self._holds and self._is_held(channel):
                channel.index = _HELD
                self._held.append(channel)
            else:
                channel.index = len(self._ready)
                self._ready.append(channel)

    def _outgoing_of_asker(self, sender: CellBase) -> dict[CellBase, Channel]:
        """The channels of a sender that is not an actor: an ask's asker, sending its question, or an
        actor of an earlier process (a recovered journal's ``gone_ref``) answering a watch."""
        if isinstance(sender, PromiseCell) and not isinstance(sender, _SimPromise) and sender.system is self:
            return self._outgoing.setdefault(sender.uid, {})
        if not isinstance(sender, _SimPromise):
            msg = f"{sender.path} is not a cell of this Simulation; it cannot send here"
            raise ConveyorError(msg)
        return sender.outgoing

    def schedule_timer(self, cell: ActorCell, delay_s: float, message: object) -> TimerHandle:
        """Arm a timer at a virtual time (traced as ``TIMER_ARMED``: ``TimerFired(timer_id, message)``)."""
        handle = self._timers.arm(self._now + delay_s, cell, message)
        tracer = self.tracer
        if tracer is not None:
            tracer.record(EventKind.TIMER_ARMED, self._now, None, cell, TimerFired(handle.timer_id, message))
        return handle

    def cancel_timer(self, handle: TimerHandle) -> bool:
        """Disarm a timer; True if it had not fired (traced as ``TIMER_CANCELLED``: the handle)."""
        tracer = self.tracer
        if tracer is not None:
            tracer.record(EventKind.TIMER_CANCELLED, self._now, None, self._current, handle)
        return self._timers.cancel(handle)

    def start_job(self, cell: ActorCell, job_id: int, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        """Complete the job at a drawn virtual time (or fail it, as a ``FailJob`` fault says)."""
        duration = self._job_duration(self._job_rng)
        if not duration >= 0:
            msg = f"job_duration returned {duration!r}; it must be a number >= 0"
            raise ValueError(msg)
        if self._failing_jobs:
            fn = self._maybe_failing_job(cell, job_id, fn)
        heapq.heappush(self._jobs, (self._now + duration, next(self._job_seq), job_id, cell, fn, args))

    # --- stepping -----------------------------------------------------------------------

    def _next_event_time(self) -> float | None:
        timer = self._timers.next_deadline()
        job = self._jobs[0][0] if self._jobs else None
        when = timer if job is None else job if timer is None else min(timer, job)
        if self._io and (when is None or self._io[0][0] < when):
            when = self._io[0][0]
        if self._pauses or self._holds:
            for control in self._control_times():
                if when is None or control < when:
                    when = control
        return when

    def _fire_due(self, until: float | None) -> bool:
        """Jump the clock to the next timer or job and fire all due then; False if none.

        At one instant, timers fire before jobs complete, each in arming order.
        """
        when = self._next_event_time()
        if when is None or (until is not None and when > until):
            return False
        self._now = max(self._now, when)
        if self._pauses or self._holds:
            self._apply_time_faults()
        tracer = self.tracer
        for timer_id, cell, message in self._timers.pop_due(self._now):
            fired = TimerFired(timer_id, message)
            if tracer is not None:
                tracer.record(EventKind.TIMER_FIRED, self._now, None, cell, fired)
            self._push(TIMERS, None, cell, fired)
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
        io = self._io
        while io and io[0][0] <= self._now:
            heapq.heappop(io)[2]()
            journal = self._disk_journal
            if journal is not None and journal.failure is not None:
                self._crash_process(ProcessCrash(self.steps), f"the disk failed ({journal.failure})")
        return True

    def step(self, until: float | None = None) -> bool:
        """Make one delivery, jumping the clock first if nothing is ready; False if idle."""
        return self._deliver(1, until) == 1

    def _deliver(self, limit: int | None, until: float | None) -> int:
        """Make up to ``limit`` deliveries (no limit when None); fewer means the run went quiet.

        The one delivery loop behind ``step`` and ``run``: a run makes its deliveries without a
        call per step and with the loop's names looked up once.
        """
        ready = self._ready
        choose = self.strategy.choose
        record_choice = self.schedule.append
        step_faults = self._step_faults  # both lists are only ever changed in place
        pauses = self._pauses
        made = 0
        stop = -1 if limit is None else limit  # ``made`` never reaches -1: no limit
        while made != stop:
            if step_faults and step_faults[-1].at_step <= self.steps:
                self._apply_step_faults()
            if pauses and pauses[-1].at_time <= self._now:
                self._apply_time_faults()
            while not ready:
                if not self._fire_due(until):
                    return made
            if len(ready) == 1:
                index = 0
            else:
                index = choose(ready)
                record_choice(index)
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
            made += 1
            if isinstance(receiver, ActorCell):
                self._current = receiver
                try:
                    receiver.process(channel.sender, message)
                finally:
                    self._current = None
            else:
                receiver.process(channel.sender, message)
        return made

    def run(self, until: float | None = None, max_steps: int | None = None) -> RunResult:
        """Deliver until quiet, until virtual time ``until``, or for ``max_steps`` steps.

        With ``until``, the clock ends at ``until`` if the run went quiet before it.
        """
        if max_steps is not None and max_steps < 0:
            msg = f"max_steps must be >= 0, got {max_steps}"
            raise ValueError(msg)
        steps = self._deliver(max_steps, until)
        quiet = max_steps is None or steps < max_steps
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
        promise = self._send_question(ref, message, _SimPromise)
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
        self._holds.clear()
        self._pauses.clear()
        self._ready.extend(self._held)
        self._held.clear()
        while self._ready:
            channel = self._ready.pop()
            channel.index = -1
            leftover = list(channel.queue)
            channel.queue.clear()
            for message in leftover:
                channel.receiver.process(channel.sender, message)
        self._jobs.clear()
        self._timers.clear()
        self._io.clear()

    # --- faults -------------------------------------------------------------------------

    def end_faults(self) -> None:
        """The run is over: a fault not applied yet never will be, and the disk behaves from now on.

        What runs after (the final browse) measures the state the run left; a crash or a full disk
        then would fault the measurement, not the system (durable-crash seed 319: a process crash
        during the final browse forgot the browser's subscription, and the browse found nothing).
        A pause already holding an actor runs to its end.
        """
        self._step_faults.clear()
        self._pauses.clear()
        self._armed_crashes.clear()
        self._drops = ()
        self._failing_jobs.clear()
        self._failing_writes.clear()
        if self.disk is not None:
            self.disk.faults = DiskFaults()

    def _record_fault(self, fault: Fault, outcome: str, cell: CellBase | None = None) -> None:
        applied = FaultApplied(fault, outcome)
        self.faults_applied.append(applied)
        tracer = self.tracer
        if tracer is not None:
            tracer.record(EventKind.FAULT, self._now, None, cell, applied)

    def _find_live(self, path: str) -> ActorCell | None:
        for cell in self._live_cells():
            if cell.path == path:
                return cell
        return None

    def _apply_step_faults(self) -> None:
        faults = self._step_faults
        while faults and faults[-1].at_step <= self.steps:
            fault = faults.pop()
            if isinstance(fault, Crash):
                cell = self._find_live(fault.path)
                if cell is None:
                    self._record_fault(fault, f"no live actor at {fault.path}")
                    continue
                self._record_fault(fault, "restarted" if fault.restart else "stopped", cell)
                self._crash(cell, fault.restart)
            elif isinstance(fault, CrashAmong):
                among = [cell for cell in self._live_cells() if fault.matches(cell.path, cell.name)]
                if not among:
                    self._record_fault(fault, f"no live actor named {fault.name} under {fault.prefix}")
                    continue
                cell = among[fault.pick % len(among)]
                self._record_fault(fault, f"{'restarted' if fault.restart else 'stopped'} {cell.path}", cell)
                self._crash(cell, fault.restart)
            elif isinstance(fault, _CrashNow):
                self._crash_process(fault.fault, fault.why)
            elif isinstance(fault, ProcessCrash):
                if fault.after_sent is not None:
                    self._armed_crashes.append(fault)
                    continue
                self._crash_process(fault, "killed")
            else:
                self._record_fault(fault, f"held until {self._now + fault.duration_s:g}")
                self._begin_hold(_Hold(self._now + fault.duration_s, fault.sender, fault.receiver, exact=True))

    def _trigger_crashes(self, sender: CellBase, message: object) -> None:
        """An armed ``ProcessCrash(after_sent=...)`` fires at the next step once its process sent such a message."""
        name = type(message).__name__
        for fault in self._armed_crashes:
            if fault.after_sent == name and any(covers(top, sender.path) for top in self.process):
                self._armed_crashes.remove(fault)
                # The smallest step of all still to come: the list is sorted by step, last first.
                why = f"killed right after {sender.path} sent {name}"
                self._step_faults.append(_CrashNow(fault, self.steps + 1, why))
                return

    def _crash_process(self, fault: ProcessCrash, why: str) -> None:
        """The durable actors' process dies: its disk loses what was not synced, its actors restart from the rest.

        The journals of its actors are dropped and a new store recovers them from the disk, as a
        restarted process would; every top-level actor of ``process`` then restarts and rebuilds
        itself. Clients (everything else) keep running, their refs to the process still valid
        (as if they reconnected).
        """
        journal = self._disk_journal
        disk = self.disk
        if disk is None:
            self._record_fault(fault, "no simulated disk: nothing to crash")
            return
        disk.crash()
        events = disk.take_events()
        # Its jobs die with it: a write in flight must never reach the disk of the next process.
        dying = [job for job in self._jobs if any(covers(top, job[3].path) for top in self.process)]
        if dying:
            self._jobs = [job for job in self._jobs if job not in dying]
            heapq.heapify(self._jobs)
        if journal is not None:
            journal.reopen()
        for path in [path for path in self.journals if any(covers(top, path) for top in self.process)]:
            del self.journals[path]
        cells = [cell for cell in (self._find_live(path) for path in self.process) if cell is not None]
        outcome = "; ".join([why, *events, f"restarted {', '.join(cell.path for cell in cells) or 'nothing'}"])
        self._record_fault(fault, outcome)
        for cell in cells:
            self._crash(cell, restart=True)
        for listener in self.process_crash_listeners:
            listener()

    def _crash(self, cell: ActorCell, restart: bool) -> None:
        """Crash ``cell`` now: restarted at once by its cell (as supervision would), or stopped."""
        error = InjectedFault(f"injected crash of {cell.path} at step {self.steps}")
        self._current = cell
        try:
            if restart:
                cell.restart(error)  # the simulator plays the supervisor here
            else:
                cell.terminate("crashed", error)
        finally:
            self._current = None

    def _control_times(self) -> list[float]:
        times = [hold.until for hold in self._holds]
        if self._pauses:
            times.append(self._pauses[-1].at_time)
        return times

    def _apply_time_faults(self) -> None:
        now = self._now
        pauses = self._pauses
        while pauses and pauses[-1].at_time <= now:
            pause = pauses.pop()
            self._record_fault(pause, f"{pause.prefix} frozen until {now + pause.duration_s:g}")
            self._begin_hold(_Hold(now + pause.duration_s, None, pause.prefix, exact=False))
        if any(hold.until <= now for hold in self._holds):
            self._holds = [hold for hold in self._holds if hold.until > now]
            still_held: list[Channel] = []
            for channel in self._held:
                if self._is_held(channel):
                    still_held.append(channel)
                elif channel.queue:
                    channel.index = len(self._ready)
                    self._ready.append(channel)
                else:
                    channel.index = -1
            self._held = still_held

    def _is_held(self, channel: Channel) -> bool:
        return any(hold.matches(channel) for hold in self._holds)

    def _begin_hold(self, hold: _Hold) -> None:
        self._holds.append(hold)
        ready = self._ready
        keep = [channel for channel in ready if not hold.matches(channel)]
        if len(keep) == len(ready):
            return
        for channel in ready:
            if hold.matches(channel):
                channel.index = _HELD
                self._held.append(channel)
        ready[:] = keep
        for index, channel in enumerate(ready):
            channel.index = index

    def _dropped(self, sender: CellBase | None, target: CellBase, message: object) -> bool:
        if sender is None:
            return False
        name = type(message).__name__
        for drop in self._drops:
            if drop.message_type == name and self.steps >= drop.from_step and covers(drop.sender, sender.path):
                self._record_fault(drop, f"dropped {name} from {sender.path} to {target.path}", sender)
                return True
        return False

    def store_hook(self, path: str) -> StoreHook | None:
        """The ``FailWrite`` faults that cover ``path``, as the hook its journal calls before each write."""
        faults = [fault for fault in self._failing_writes if covers(fault.prefix, path)]
        if not faults:
            return None

        def before_write() -> None:
            for fault in faults:
                if fault not in self._failing_writes:
                    continue  # the run is over (``end_faults``)
                self._failing_writes[fault] += 1
                if self._failing_writes[fault] == fault.nth:
                    self._record_fault(fault, f"write {fault.nth} to the journal of {path} fails", self._current)
                    raise InjectedFault(f"injected disk error: write {fault.nth} to the journal of {path}")

        return before_write

    def gone_ref(self, path: str) -> ActorRef:
        """A ref named in a recovered journal: the latest actor at ``path`` (a client outside the crashed
        process lives on; one that stopped since is still that stopped actor), else a gone one."""
        cell = self.last_at.get(path)
        return cell.ref if cell is not None else super().gone_ref(path)

    def live_ref(self, path: str) -> ActorRef | None:
        """The ref of the live actor at ``path``, if there is one."""
        cell = self._find_live(path)
        return None if cell is None else cell.ref

    def _maybe_failing_job(self, cell: ActorCell, job_id: int, fn: Callable[..., Any]) -> Callable[..., Any]:
        for fault in self._failing_jobs:
            if covers(fault.prefix, cell.path):
                self._failing_jobs[fault] += 1
                if self._failing_jobs[fault] == fault.nth:
                    self._record_fault(fault, f"job {job_id} of {cell.path} fails", cell)
                    return _failing_job(f"job {job_id} of {cell.path}")
        return fn


    # --- inspection ---------------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Messages queued in channels (held ones included), not yet delivered."""
        return sum(len(channel.queue) for channel in self._ready) + sum(len(c.queue) for c in self._held)

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


def _failing_job(where: str) -> Callable[..., Any]:
    """A job body that raises ``InjectedFault`` naming ``where``."""

    def fail(*_: Any) -> Any:
        raise InjectedFault(f"injected failure of {where}")

    return fail
