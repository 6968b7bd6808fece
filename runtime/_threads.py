"""ThreadSystem: each actor on its own pykka ``ThreadingActor`` thread.

pykka supplies the thread and the inbox; conveyor's ``ActorCell`` supplies the
behaviour, so actors act exactly as on trio and in the simulator. One timer thread
serves every timer and a thread pool runs jobs. This backend is the one place
where conveyor uses locks: a single condition guards liveness of inboxes and the
count of queued messages, so no message slips into an inbox that nobody reads.

``cpu`` keeps the actor threads (and the timer thread) on one CPU. They share one GIL, so they
never run at once anyway; what one CPU saves is the hand-over: a message wakes its actor's thread,
and on another CPU that thread and the sender pass the GIL across CPUs, which costs far more than a
switch on one (the Pub/Sub subscriber, seven actors a message: about a third more messages a second,
docs/performance.md). Jobs stay on every CPU: they block on I/O or may run GIL-free code in parallel.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import Any, final

import pykka

from ._actor import Actor
from ._backend import Backend
from ._cell import ActorCell, CellBase, PromiseCell
from ._errors import ConveyorError
from ._journal import JournalStore
from ._messages import JobDone, JobFailed, Stop, TimerFired, TimerHandle
from ._ref import ActorRef
from ._supervision import SupervisorStrategy
from ._system import ActorSystemBase
from ._timers import TimerQueue
from ._trace import EventKind, Tracer
from .validators import fail

log = logging.getLogger(__name__)


def _process_cpus() -> set[int]:
    """The CPUs this process may run on: its main thread's (a pinned actor's thread may be narrower)."""
    return os.sched_getaffinity(os.getpid())


def _check_cpu(owner: str, cpu: object) -> int | None:
    """Return ``cpu`` if it is None or a CPU this process may run on, else raise naming the field.

    Raises:
        ValueError: not None and not one of the CPUs of its main thread, or the platform cannot pin
            threads (no ``os.sched_setaffinity``: Linux has it, macOS and Windows do not).
    """
    if cpu is None:
        return None
    if not hasattr(os, "sched_setaffinity"):
        fail(owner, "cpu", "None on this platform (pinning threads needs os.sched_setaffinity, Linux's)", cpu)
    allowed = sorted(_process_cpus())
    if type(cpu) is not int or cpu not in allowed:
        fail(owner, "cpu", f"None or one of the CPUs this process may run on, {allowed}", cpu)
    return cpu


def _run_this_thread_on(cpus: tuple[int, ...] | None) -> None:
    """Keep the calling thread on ``cpus`` (None: leave it); CPUs taken away since the check are logged, not raised."""
    if cpus is None:
        return
    try:
        os.sched_setaffinity(0, cpus)
    except OSError as error:  # the process's CPUs changed after the check (a cgroup, taskset)
        log.warning("could not keep thread %s on CPUs %s: %s", threading.current_thread().name, cpus, error)


class _ThreadPromise(PromiseCell):
    __slots__ = ("event",)

    def __init__(self, system: Backend, uid: int) -> None:
        super().__init__(system, uid)
        self.event = threading.Event()

    def settle(self) -> None:
        super().settle()
        self.event.set()


@final
class _Slot:
    """Per-actor thread-backend state: its pykka shell, the lock that makes "inbox open? put" atomic, counters."""

    __slots__ = ("done", "halt", "lock", "sent", "shell")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.shell: pykka.ActorRef[_Shell] | None = None  # set by ``attach``, cleared under ``lock`` by ``detach``
        self.sent = 0  # written under ``lock`` by senders
        self.done = 0  # written only by the actor's own thread
        self.halt = False


@final
class _ThreadCell(ActorCell):
    """An actor on threads: its ``_Slot``."""

    __slots__ = ("slot",)

    def __init__(
        self,
        system: Backend,
        uid: int,
        name: str,
        parent: ActorCell | None,
        factory: Callable[[], Actor],
        supervisor: SupervisorStrategy,
    ) -> None:
        self.slot = _Slot()
        super().__init__(system, uid, name, parent, factory, supervisor)


@final
class _Quiet:
    """Callers of ``wait_quiet`` and how to wake them; shared by the system and its shells."""

    __slots__ = ("condition", "waiters")

    def __init__(self, condition: threading.Condition) -> None:
        self.condition = condition
        self.waiters = 0  # changed under ``condition``; read without it by shells (a hint)

    def wake(self) -> None:
        """Wake every waiter to look again."""
        with self.condition:
            self.condition.notify_all()


class _Shell(pykka.ThreadingActor):
    """The pykka actor that owns one cell's thread and inbox."""

    use_daemon_thread = True

    def __init__(self, local: threading.local, quiet: _Quiet, cell: _ThreadCell, cpus: tuple[int, ...] | None) -> None:
        super().__init__()
        self._local = local
        self._quiet = quiet
        self._cell = cell
        self._cpus = cpus

    def on_start(self) -> None:
        """Runs first on the shell's own thread: keep it on the system's CPU, if it has one."""
        _run_this_thread_on(self._cpus)

    def on_receive(self, message: Any) -> None:
        sender, payload = message
        cell = self._cell
        slot = cell.slot
        local = self._local
        local.cell = cell
        try:
            if slot.halt and cell.alive:
                cell.terminate("shutdown", None)
            cell.process(sender, payload)
        finally:
            local.cell = None
            slot.done += 1
            if self._quiet.waiters and slot.done == slot.sent:
                self._quiet.wake()


@final
class ThreadSystem(ActorSystemBase):
    """An actor system on threads: usable from any plain thread; close with ``shutdown()``.

    Also a context manager: ``with ThreadSystem() as system: ...``.

    Args:
        supervisor_strategy: how top-level actors are supervised.
        trace: record trace events (``True``) or into the given ``Tracer``.
        job_workers: threads in the pool that runs ``ctx.run_job`` work.
        seed: seed of ``ctx.random``.
        journal_store: where durable journals also persist beyond the process (a disk store);
            closed, after a last sync, at shutdown.
        cpu: keep every actor thread and the timer thread on this CPU (None: wherever the
            operating system puts them). They share the GIL, so one CPU takes nothing from them,
            and each hand-over between them stays on it (see the module's docstring); jobs are
            not pinned. Leave it None where other busy processes share that CPU.

    Raises:
        ValueError: ``cpu`` is not None and not a CPU this process may run on (or the platform
            cannot pin threads).
    """

    cell_type = _ThreadCell

    def __init__(
        self,
        *,
        supervisor_strategy: SupervisorStrategy | None = None,
        trace: bool | Tracer = False,
        job_workers: int = 8,
        seed: int | str | None = None,
        journal_store: JournalStore | None = None,
        cpu: int | None = None,
    ) -> None:
        self.cpu = _check_cpu("ThreadSystem", cpu)
        """The CPU the actor threads and the timer thread run on, or None."""
        self._pinned = None if self.cpu is None else (self.cpu,)
        super().__init__(supervisor_strategy=supervisor_strategy, trace=trace, seed=seed, journal_store=journal_store)
        self._lock = threading.Condition()  # guards the registry, job count and quiet waiters
        self._local = threading.local()
        self._quiet = _Quiet(self._lock)
        self._jobs = 0
        self._closed = False
        self._cells: dict[int, _ThreadCell] = {}
        self._start_time = time.monotonic()
        self._timers = TimerQueue()  # guarded by _timer_cond
        self._timer_cond = threading.Condition()
        self._timer_thread = threading.Thread(target=self._run_timers, name="conveyor-timers", daemon=True)
        self._timer_thread.start()
        # A job thread starts from the thread that submits the job, and would inherit a pinned actor's CPU.
        free = None if self.cpu is None else tuple(sorted(_process_cpus()))
        self._executor = ThreadPoolExecutor(max_workers=job_workers, thread_name_prefix="conveyor-job",
                                            initializer=_run_this_thread_on, initargs=(free,))

    def __enter__(self) -> ThreadSystem:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()

    # --- backend hooks ------------------------------------------------------------------

    def now(self) -> float:
        """Seconds since the system was created (monotonic)."""
        return time.monotonic() - self._start_time

    def current_cell(self) -> ActorCell | None:
        """The actor whose handler runs on the calling thread, if any."""
        cell: ActorCell | None = getattr(self._local, "cell", None)
        return cell

    def attach(self, cell: CellBase) -> None:
        """Register a new actor and start its shell's thread (an asker needs nothing)."""
        if isinstance(cell, _ThreadCell):
            with self._lock:
                if self._closed:
                    msg = f"cannot spawn {cell.path}: the ThreadSystem is shut down"
                    raise ConveyorError(msg)
                self._cells[cell.uid] = cell
            cell.slot.shell = _Shell.start(self._local, self._quiet, cell, self._pinned)

    def detach(self, cell: ActorCell) -> None:
        """Close the actor's inbox to senders and stop its shell behind what is already queued."""
        if not isinstance(cell, _ThreadCell):
            return
        slot = cell.slot
        with slot.lock:
            shell = slot.shell
            slot.shell = None
        # Behind every message already queued; the shell drains them as dead letters.
        if shell is not None:
            shell.stop(block=False)
        with self._lock:
            self._cells.pop(cell.uid, None)
            self._lock.notify_all()

    def enqueue(self, target: CellBase, sender: CellBase | None, message: object) -> None:
        """Put into the actor's pykka inbox if it is still open, else a dead letter; an answer settles at once."""
        if type(target) is not _ThreadCell:
            if not target.is_promise:
                msg = f"{target.path} is not an actor of a ThreadSystem; a ref cannot carry messages across systems"
                raise ConveyorError(msg)
            target.process(sender, message)
            return
        slot = target.slot
        with slot.lock:
            shell = slot.shell
            if shell is not None:
                slot.sent += 1
                shell.tell((sender, message))
                return
        self.dead_letter(sender, target, message)

    def dead_letter(self, sender: CellBase | None, target: CellBase, message: object) -> None:
        """As every backend does, under the system's lock: senders on many threads count and trace."""
        with self._lock:
            super().dead_letter(sender, target, message)

    def live_cells(self) -> list[ActorCell]:
        """Every live actor in spawn order (parents first), read under the system's lock: actors
        spawn and stop on many threads, and the registry (``system.registry``) may ask from any."""
        with self._lock:
            cells: list[ActorCell] = list(self._cells.values())
        cells.sort(key=lambda cell: cell.uid)
        return [cell for cell in cells if cell.alive]

    def _is_quiet(self) -> bool:
        if self._jobs:
            return False
        for cell in list(self._cells.values()):
            slot = cell.slot
            if slot.sent != slot.done:
                return False
        return True

    def schedule_timer(self, cell: ActorCell, delay_s: float, message: object) -> TimerHandle:
        """Arm a timer on the monotonic clock and wake the timer thread."""
        with self._timer_cond:
            handle = self._timers.arm(time.monotonic() + delay_s, cell, message)
            self._timer_cond.notify()
        return handle

    def cancel_timer(self, handle: TimerHandle) -> bool:
        """Disarm a timer; True if it had not fired."""
        with self._timer_cond:
            return self._timers.cancel(handle)

    def _run_timers(self) -> None:
        _run_this_thread_on(self._pinned)
        timers = self._timers
        while True:
            with self._timer_cond:
                if self._closed:
                    return
                due = timers.pop_due(time.monotonic())
                if not due:
                    deadline = timers.next_deadline()
                    self._timer_cond.wait(None if deadline is None else deadline - time.monotonic())
                    continue
            for timer_id, cell, message in due:
                tracer = self.tracer
                if tracer is not None:
                    tracer.record(EventKind.TIMER_FIRED, self.now(), None, cell, message)
                self.enqueue(cell, None, TimerFired(timer_id, message))

    def start_job(self, cell: ActorCell, job_id: int, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        """Run ``fn`` on the job pool; its outcome comes back as a message."""
        with self._lock:
            if self._closed:
                msg = f"{cell.path} started a job after the ThreadSystem shut down"
                raise ConveyorError(msg)
            self._jobs += 1
        future = self._executor.submit(fn, *args)
        future.add_done_callback(lambda done: self._job_finished(cell, job_id, done))

    def _job_finished(self, cell: ActorCell, job_id: int, future: Future[Any]) -> None:
        if future.cancelled():  # shutdown cancelled a job that never started: its actor is gone too
            with self._lock:
                self._jobs -= 1
                self._lock.notify_all()
            return
        error = future.exception()
        outcome = JobDone(job_id, future.result()) if error is None else JobFailed(job_id, error)
        tracer = self.tracer
        if tracer is not None:
            tracer.record(EventKind.JOB_DONE, self.now(), None, cell, outcome)
        self.enqueue(cell, None, outcome)
        with self._lock:
            self._jobs -= 1
            self._lock.notify_all()

    # --- public -----------------------------------------------------------------------

    def ask(self, ref: ActorRef, message: object, timeout: float = 5.0) -> Any:
        """Send ``message`` with a temporary sender and block until the first reply.

        Must not be called from inside an actor (it would block that actor's thread).

        Raises:
            ActorDeadError: the actor is (or becomes, before answering) dead.
            AskTimeout: no reply within ``timeout`` seconds.
            Exception: whatever the actor raised while handling the question.
        """
        if self.current_cell() is not None:
            msg = "ask() blocks its caller; inside an actor use ctx.send() and handle the reply message"
            raise ConveyorError(msg)
        promise = self._send_question(ref, message, _ThreadPromise)
        promise.event.wait(timeout)
        return self._answer(promise, ref, message, f"nothing within {timeout}s")

    def ask_from_thread(self, ref: ActorRef, message: object, timeout: float = 5.0) -> Any:
        """``ask`` from any non-actor thread (a job's worker thread included)."""
        return self.ask(ref, message, timeout)

    def join(self, ref: ActorRef, timeout: float | None = None) -> None:
        """Block until ``ref`` has stopped.

        Raises:
            TimeoutError: still running after ``timeout`` seconds.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while ref.is_alive:
            if deadline is not None and time.monotonic() >= deadline:
                msg = f"{ref.path} still running after {timeout} s"
                raise TimeoutError(msg)
            time.sleep(0.002)

    def wait_quiet(self, timeout: float | None = None) -> bool:
        """Block until no message is queued or handled and no job runs; False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            self._quiet.waiters += 1
            try:
                while not self._is_quiet():
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return False
                    # Woken when an actor drains its inbox; the short cap covers a wake-up that
                    # raced with this check.
                    self._lock.wait(0.01 if remaining is None else min(remaining, 0.01))
                return True
            finally:
                self._quiet.waiters -= 1

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop every actor promptly: each finishes its current message, runs ``on_stop``,
        and its queued messages become dead letters. Then stop the timer thread and pool."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            cells = list(self._cells.values())
            shells = [cell.slot.shell for cell in cells if cell.slot.shell is not None]
        for cell in cells:
            cell.slot.halt = True
            self.enqueue(cell, None, Stop("shutdown"))
        deadline = time.monotonic() + timeout
        with self._lock:
            self._lock.wait_for(lambda: not self._cells, max(0.0, deadline - time.monotonic()))
            leftover = list(self._cells.values())
        for shell in shells:
            shell.actor_stopped.wait(max(0.0, deadline - time.monotonic()))
        with self._timer_cond:
            self._timer_cond.notify_all()
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._timer_thread.join(max(0.0, deadline - time.monotonic()))
        self.close_journal_store()
        if leftover:
            names = ", ".join(cell.path for cell in leftover[:5])
            msg = f"ThreadSystem.shutdown: {len(leftover)} actors did not stop within {timeout}s: {names}"
            raise ConveyorError(msg)
