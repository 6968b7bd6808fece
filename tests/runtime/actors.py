"""Small actors and messages shared by the runtime behaviour tests."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from conveyor.runtime import Actor, ActorRef, JobDone, JobFailed, SupervisorStrategy, Terminated


@attrs.frozen
class Ping:
    n: int


@attrs.frozen
class Pong:
    n: int


@attrs.frozen
class Seq:
    source: str
    n: int


@attrs.frozen
class Go:
    target: ActorRef
    count: int


@attrs.frozen
class Get:
    """Ask an actor for a snapshot of what it recorded."""


@attrs.frozen
class Boom:
    kind: str = "value"


@attrs.frozen
class Inc:
    pass


@attrs.frozen
class Spawn:
    name: str


@attrs.frozen
class WatchIt:
    target: ActorRef


@attrs.frozen
class UnwatchIt:
    target: ActorRef


class Echo(Actor):
    """Replies with whatever it receives."""

    def receive(self, message: Any) -> None:
        self.ctx.reply(message)


class Silent(Actor):
    """Never replies."""

    def receive(self, message: Any) -> None:
        pass


class Quitter(Actor):
    """Stops itself on any message, without replying."""

    def receive(self, message: Any) -> None:
        self.ctx.stop()


class Recorder(Actor):
    """Records every message; answers ``Get`` with the tuple of what it saw."""

    def __init__(self) -> None:
        self.seen: list[object] = []

    def receive(self, message: Any) -> None:
        if isinstance(message, Get):
            self.ctx.reply(tuple(self.seen))
        else:
            self.seen.append(message)


class Pinger(Actor):
    """On ``Go(ponger, count)`` plays ping-pong ``count`` times; ``Get`` answers the pongs seen."""

    def __init__(self) -> None:
        self.pongs: list[int] = []
        self.count = 0
        self.ponger: ActorRef | None = None

    def receive(self, message: Any) -> None:
        match message:
            case Go(target=target, count=count):
                self.ponger, self.count = target, count
                self.ctx.send(target, Ping(0))
            case Pong(n=n):
                self.pongs.append(n)
                if n + 1 < self.count and self.ponger is not None:
                    self.ctx.send(self.ponger, Ping(n + 1))
            case Get():
                self.ctx.reply(tuple(self.pongs))


class Ponger(Actor):
    def receive(self, message: Any) -> None:
        if isinstance(message, Ping):
            self.ctx.reply(Pong(message.n))


class SeqSender(Actor):
    """On ``Go(target, count)`` sends ``Seq(name, 0..count-1)`` to the target."""

    def receive(self, message: Any) -> None:
        if isinstance(message, Go):
            name = self.ctx.self_ref.name
            for n in range(message.count):
                self.ctx.send(message.target, Seq(name, n))


class OrderChecker(Actor):
    """Counts ``Seq`` messages and any per-source order violation; ``Get`` answers both."""

    def __init__(self) -> None:
        self.last: dict[str, int] = {}
        self.count = 0
        self.violations = 0

    def receive(self, message: Any) -> None:
        if isinstance(message, Seq):
            self.count += 1
            if message.n != self.last.get(message.source, -1) + 1:
                self.violations += 1
            self.last[message.source] = message.n
        elif isinstance(message, Get):
            self.ctx.reply((self.count, self.violations, tuple(sorted(self.last.items()))))


class Journal:
    """A test-owned, thread-safe log that actors under test write to (tests only)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.entries: list[object] = []

    def add(self, entry: object) -> None:
        with self._lock:
            self.entries.append(entry)

    def count(self, entry: object) -> int:
        with self._lock:
            return self.entries.count(entry)

    def snapshot(self) -> list[object]:
        with self._lock:
            return list(self.entries)


class Fragile(Actor):
    """Counts ``Inc``; raises on ``Boom``; logs each incarnation and stop to a journal."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self.count = 0

    def on_start(self) -> None:
        self.journal.add("start")

    def on_restart(self, error: Exception) -> None:
        self.journal.add(f"restart:{type(error).__name__}")

    def on_stop(self) -> None:
        self.journal.add("stop")

    def receive(self, message: Any) -> None:
        match message:
            case Inc():
                self.count += 1
            case Boom(kind="key"):
                raise KeyError("boom")
            case Boom():
                raise ValueError("boom")
            case Get():
                self.ctx.reply(self.count)


def fragile(journal: Journal) -> Callable[[], Fragile]:
    return lambda: Fragile(journal)


class Watcher(Actor):
    """Watches on request; answers ``Get`` with the ``Terminated`` notices received."""

    def __init__(self) -> None:
        self.notices: list[Terminated] = []

    def receive(self, message: Any) -> None:
        match message:
            case WatchIt(target=target):
                self.ctx.watch(target)
                self.ctx.reply("watching")
            case UnwatchIt(target=target):
                self.ctx.unwatch(target)
                self.ctx.reply("unwatched")
            case Terminated():
                self.notices.append(message)
            case Get():
                self.ctx.reply(tuple(self.notices))


class Parent(Actor):
    """Spawns a ``Fragile`` child on start and forwards ``Boom`` / ``Inc`` to it."""

    def __init__(self, journal: Journal, strategy: SupervisorStrategy) -> None:
        self.journal = journal
        self.supervisor_strategy = strategy  # type: ignore[misc]  # per-instance override for tests
        self.child: ActorRef | None = None
        self.count = 0

    def on_start(self) -> None:
        self.journal.add("parent-start")
        self.child = self.ctx.spawn(fragile(self.journal), name="child")

    def receive(self, message: Any) -> None:
        match message:
            case Inc():
                self.count += 1
            case Boom() if self.child is not None:
                self.ctx.send(self.child, message)
            case Get():
                self.ctx.reply((self.count, self.child))


class JobRunner(Actor):
    """Runs ``fn(arg)`` as a job per message; answers ``Get`` with the outcomes."""

    def __init__(self, fn: Callable[[int], int]) -> None:
        self.fn = fn
        self.outcomes: list[tuple[str, int, object]] = []

    def receive(self, message: Any) -> None:
        match message:
            case Ping(n=n):
                self.ctx.run_job(self.fn, n)
            case JobDone(job_id=job_id, result=result):
                self.outcomes.append(("done", job_id, result))
            case JobFailed(job_id=job_id, error=error):
                self.outcomes.append(("failed", job_id, repr(error)))
            case Get():
                self.ctx.reply(tuple(self.outcomes))


class DurableCounter(Actor):
    """Counts ``Inc`` in its ``ctx.journal`` and rebuilds the count from it when it starts.

    Every ``snapshot_every`` increments it compacts the journal to one snapshot of the count.
    """

    def __init__(self, snapshot_every: int = 0) -> None:
        self.snapshot_every = snapshot_every
        self.count = 0
        self.recovered: int | None = None

    def on_start(self) -> None:
        journal = self.ctx.journal
        base = journal.snapshot
        self.count = (base if isinstance(base, int) else 0) + sum(1 for _ in journal)
        self.recovered = self.count

    def receive(self, message: Any) -> None:
        match message:
            case Inc():
                self.count += 1
                journal = self.ctx.journal
                journal.append("inc")
                if self.snapshot_every and len(journal) >= self.snapshot_every:
                    journal.save_snapshot(self.count)
            case Boom():
                raise ValueError("boom")
            case Get():
                self.ctx.reply((self.count, self.recovered))


def counted_under_faults(faults: Sequence[Any], increments: int, seed: int = 0) -> tuple[Any, ActorRef]:
    """A Simulation with ``faults`` whose ``DurableCounter`` at ``/counter`` was told ``Inc`` that many times, run."""
    from conveyor.simulation import Simulation

    sim = Simulation(seed=seed, faults=faults)
    counter = sim.spawn(DurableCounter, name="counter")
    for _ in range(increments):
        counter.tell(Inc())
    sim.run()
    return sim, counter


@attrs.frozen
class Flaky:
    """Fails the first ``failures`` times it is handled (counted in the test-owned ``LifeLog``), then counts."""

    key: str
    failures: int


class Retrying(Actor):
    """Counts handled ``Flaky`` messages in its journal; asks its cell to retry a failed message once."""

    def retry_failed(self, message: Any) -> bool:
        return isinstance(message, Flaky)

    def __init__(self, log: Journal) -> None:
        self.log = log
        self.handled: list[str] = []

    def on_start(self) -> None:
        self.handled = [str(event) for event in self.ctx.journal]

    def receive(self, message: Any) -> None:
        match message:
            case Flaky(key=key, failures=failures):
                self.log.add(key)
                if self.log.count(key) <= failures:
                    msg = f"flaky {key}"
                    raise OSError(msg)
                self.ctx.journal.append(key)
                self.handled.append(key)
                if self.ctx.sender is not None:
                    self.ctx.reply(key)
            case Get():
                self.ctx.reply(tuple(self.handled))
