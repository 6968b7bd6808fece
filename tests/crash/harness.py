"""The kill -9 crash test: start a client process on a data directory, SIGKILL it at a seeded random
moment, start it again on the same directory, repeat; then drain the queue and check the history.

A ``Target`` says which processes make one client life: ``EmbeddedTarget`` one process (the broker
on ``TrioSystem`` with a ``DiskJournalStore``, a producer and a consumer, ``tests/crash/embedded.py``),
``PubSubTarget`` a ``conveyor serve --data-dir`` process and Google's client in a second process
(``tests/crash/pubsub_client.py``), both killed. Every process appends to one history file; the
checker (``tests/crash/checker.py``) reads it after the drain.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Protocol

import attrs

from .checker import PagingSeen, QueueVerdict, check_history, paging_seen
from .history import read_history

ROOT = Path(__file__).resolve().parents[2]
"""The checkout: children run ``python -m tests.crash...`` from here."""
CONVEYOR = Path(sys.executable).with_name("conveyor")
START_S = 60.0
"""Longest wait for a process to say it is ready (a busy machine, a long recovery)."""
DRAIN_S = 120.0


class CrashTestError(Exception):
    """A client process misbehaved (exited by itself, never got ready, the drain failed): not a verdict."""


class Child:
    """A child process whose stdout and stderr lines are collected as they come."""

    def __init__(self, command: Sequence[str], env: dict[str, str] | None = None) -> None:
        self.command = list(command)
        self.process = subprocess.Popen(self.command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True, env=env)
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self.readers = [threading.Thread(target=self._read, args=(self.process.stdout, self.stdout), daemon=True),
                        threading.Thread(target=self._read, args=(self.process.stderr, self.stderr), daemon=True)]
        for reader in self.readers:
            reader.start()

    @staticmethod
    def _read(stream: IO[str] | None, into: list[str]) -> None:
        assert stream is not None
        for line in stream:
            into.append(line.rstrip("\n"))

    def wait_for(self, pattern: str, lines: list[str], timeout: float = START_S) -> re.Match[str]:
        """The first line of ``lines`` matching ``pattern``; an error if the process ends or time runs out."""
        deadline = time.monotonic() + timeout
        while True:
            for line in list(lines):
                if found := re.search(pattern, line):
                    return found
            if self.process.poll() is not None or time.monotonic() > deadline:
                msg = f"no line matching {pattern!r} from {self.describe()}"
                raise CrashTestError(msg)
            time.sleep(0.01)

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: no handler runs, nothing is flushed or closed."""
        if self.alive():
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(START_S)
        for reader in self.readers:
            reader.join(START_S)

    def finish(self, timeout: float) -> int:
        """Wait for the process to exit by itself; its exit code."""
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            msg = f"did not finish within {timeout} s: {self.describe()}"
            raise CrashTestError(msg) from None
        for reader in self.readers:
            reader.join(START_S)
        return code

    def logged_traceback(self) -> bool:
        return any(line.startswith("Traceback") for line in self.stderr)

    def describe(self) -> str:
        tail = "\n".join(self.stderr[-30:])
        return f"{' '.join(self.command)} (exit {self.process.poll()}), stdout {self.stdout[-5:]}, stderr:\n{tail}"


class Life(Protocol):
    """The processes of one client life."""

    def wait_ready(self) -> None:
        """Until the client works (raises ``CrashTestError`` if it dies first)."""

    def alive(self) -> bool:
        """Every process still runs."""

    def kill(self) -> None:
        """SIGKILL every process, the broker's first."""

    def finish(self) -> None:
        """A drain: wait for the client to finish, then stop the rest; ``CrashTestError`` if it failed."""

    def describe(self) -> str:
        """Commands, exit codes and the end of their output, for an error."""

    def logged_traceback(self) -> bool:
        """A process of the life wrote a traceback to stderr (an actor failed, though the process ran on)."""


class Target(Protocol):
    """What the harness starts, on its data directory, writing to its history."""

    name: str
    check_order: bool
    history: Path

    def start(self, run: int, mode: str, seed: int) -> Life:
        """Start life ``run`` in ``mode`` (``work`` or ``drain``)."""


class _OneChild:
    """A life that is one process printing ``ready`` and, after a drain, ``drained``; its stderr is
    kept in ``stderr_path`` when it ends (a traceback logged by an actor does not end the process)."""

    def __init__(self, child: Child, stderr_path: Path) -> None:
        self.child = child
        self.stderr_path = stderr_path

    def wait_ready(self) -> None:
        self.child.wait_for(r"^ready$", self.child.stdout)

    def alive(self) -> bool:
        return self.child.alive()

    def _keep_stderr(self) -> None:
        if self.child.stderr:
            self.stderr_path.write_text("\n".join(self.child.stderr) + "\n")

    def kill(self) -> None:
        self.child.kill()
        self._keep_stderr()

    def finish(self) -> None:
        code = self.child.finish(DRAIN_S)
        self._keep_stderr()
        if code != 0 or "drained" not in self.child.stdout:
            raise CrashTestError(f"the drain failed: {self.describe()}")

    def describe(self) -> str:
        return self.child.describe()

    def logged_traceback(self) -> bool:
        return self.child.logged_traceback()


class EmbeddedTarget:
    """The broker embedded in the client process (``tests/crash/embedded.py``), journals on disk.

    ``on_disk=False`` keeps the journals in the process's memory: a broker that loses everything at
    a kill, for showing that the harness reports the loss. ``memory_target`` (bytes) makes the queue
    page its bodies and its deep tail's entries (``embedded.py --memory-target``).
    """

    name = "embedded"
    check_order = True

    def __init__(self, workdir: Path, *, rate: float = 2000.0, hold_back: float = 0.5, on_disk: bool = True,
                 memory_target: int | None = None) -> None:
        self.data_dir = workdir / "data"
        self.history = workdir / "history.jsonl"
        self.workdir = workdir
        self.rate = rate
        self.hold_back = hold_back
        self.on_disk = on_disk
        self.memory_target = memory_target
        self.name = "embedded" if memory_target is None else f"embedded paged ({memory_target} bytes)"

    def start(self, run: int, mode: str, seed: int) -> Life:
        command = [sys.executable, "-m", "tests.crash.embedded", "--data-dir", str(self.data_dir),
                   "--history", str(self.history), "--run", str(run), "--mode", mode, "--seed", str(seed),
                   "--rate", str(self.rate), "--hold-back", str(self.hold_back)]
        if self.memory_target is not None:
            command += ["--memory-target", str(self.memory_target)]
        child = Child([*command, *([] if self.on_disk else ["--in-memory"])])
        return _OneChild(child, self.workdir / f"life-{run}.stderr")


class _ServedLife:
    """A ``conveyor serve --data-dir`` process and a Google client process talking to it."""

    def __init__(self, server: Child, client: Child) -> None:
        self.server = server
        self.client = client

    def wait_ready(self) -> None:
        self.client.wait_for(r"^ready$", self.client.stdout)

    def alive(self) -> bool:
        return self.server.alive() and self.client.alive()

    def kill(self) -> None:
        self.server.kill()
        self.client.kill()

    def finish(self) -> None:
        code = self.client.finish(DRAIN_S)
        self.server.kill()
        if code != 0 or "drained" not in self.client.stdout:
            raise CrashTestError(f"the drain failed: {self.describe()}")

    def describe(self) -> str:
        return f"server: {self.server.describe()}\nclient: {self.client.describe()}"

    def logged_traceback(self) -> bool:
        return self.server.logged_traceback() or self.client.logged_traceback()


class PubSubTarget:
    """``conveyor serve --data-dir`` with Google's official client in its own process (``pubsub_client.py``).

    Messages carry one of four ordering keys on a subscription with message ordering, so the order
    checked is each key's (Pub/Sub promises no other).
    """

    name = "pubsub"
    check_order = True

    def __init__(self, workdir: Path, *, rate: float = 300.0, hold_back: float = 0.5) -> None:
        self.data_dir = workdir / "data"
        self.history = workdir / "history.jsonl"
        self.rate = rate
        self.hold_back = hold_back

    def start(self, run: int, mode: str, seed: int) -> Life:
        server = Child([str(CONVEYOR), "serve", "--host-port", "127.0.0.1:0", "--data-dir", str(self.data_dir)])
        try:
            address = server.wait_for(r"listening on (\S+)", server.stderr).group(1)
        except CrashTestError:
            server.kill()
            raise
        client = Child([sys.executable, "-m", "tests.crash.pubsub_client", "--address", address,
                        "--history", str(self.history), "--run", str(run), "--mode", mode, "--seed", str(seed),
                        "--rate", str(self.rate), "--hold-back", str(self.hold_back)])
        return _ServedLife(server, client)


@attrs.frozen
class CrashReport:
    """What a crash test did and what the checker found."""

    target: str
    seed: int
    cycles: int
    killed_starting: int
    seconds: float
    verdict: QueueVerdict
    paging: PagingSeen | None = None
    """What the lives saw of a paged queue; None when the queue did not page."""
    lives_with_tracebacks: tuple[int, ...] = ()
    """Lives (the drain's is ``cycles``) that logged a traceback: an actor failed, the process ran on."""

    def summary(self) -> str:
        paged = "" if self.paging is None else f"; {self.paging.summary()}"
        return (f"{self.target}: {self.cycles} kill cycles ({self.killed_starting} during start-up or recovery), "
                f"seed {self.seed}, {self.seconds:.1f} s: {self.verdict.summary()}, "
                f"lives with a traceback {len(self.lives_with_tracebacks)}{paged}")

    def details(self) -> str:
        """The summary, and the first keys of each broken promise."""
        v = self.verdict
        return "\n".join([self.summary(), f"lives with a traceback: {self.lives_with_tracebacks[:10]}",
                          f"lost: {v.lost[:10]}", f"unexpected: {v.unexpected[:10]}",
                          f"bad duplicates: {v.bad_duplicates[:10]}", f"order violations: {v.order_violations[:10]}"])


def run_crash_test(target: Target, cycles: int, seed: int, *, max_life_s: float = 1.0,
                   early_share: float = 0.15) -> CrashReport:
    """Kill ``cycles`` client lives with SIGKILL, drain, and check the whole history.

    Each life is killed ``uniform(0.02, max_life_s)`` seconds after it said it is ready, or, one
    time in ``1 / early_share``, after ``uniform(0, 0.5)`` seconds whether ready or not (in
    start-up or recovery). The moments come from ``random.Random(seed)``.
    """
    if cycles < 0:
        msg = f"cycles: must be an int >= 0, got {cycles!r}"
        raise ValueError(msg)
    rng = random.Random(seed)
    started = time.monotonic()
    killed_starting = 0
    tracebacks: list[int] = []
    for run in range(cycles):
        life = target.start(run, "work", rng.randrange(2**31))
        try:
            if rng.random() < early_share:
                killed_starting += 1
                time.sleep(rng.uniform(0, 0.5))
            else:
                life.wait_ready()
                time.sleep(rng.uniform(0.02, max_life_s))
            if not life.alive():
                raise CrashTestError(f"life {run} ended by itself: {life.describe()}")
        finally:
            life.kill()
        if life.logged_traceback():
            tracebacks.append(run)
    drain = target.start(cycles, "drain", rng.randrange(2**31))
    drain.finish()
    if drain.logged_traceback():
        tracebacks.append(cycles)
    events = list(read_history(target.history))
    verdict = check_history(events, check_order=target.check_order)
    return CrashReport(target.name, seed, cycles, killed_starting, time.monotonic() - started, verdict,
                       paging_seen(events), tuple(tracebacks))
