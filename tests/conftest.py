"""One behaviour suite, three backends: the ``backend`` fixture gives each test a harness.

A harness hides only how each system is driven (awaited on trio, blocking on
threads, stepped in the simulator); the actors under test are the same classes.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import trio

from conveyor.runtime import Actor, ActorRef, ActorSystemBase, SupervisorStrategy, ThreadSystem, TraceEvent, TrioSystem
from conveyor.simulation import Simulation

BACKENDS = ("trio", "threads", "simulation")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--force-paging", type=int, default=None, metavar="BYTES",
        help="every queue pages its bodies under this memory target (0: all of them), durable ones too",
    )


@pytest.fixture(autouse=True)
def forced_paging(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``--force-paging=BYTES``, every queue built in the test pages (tests/actors/broker/paging.py)."""
    target = request.config.getoption("--force-paging")
    if target is not None:
        from tests.actors.broker.paging import force_paging

        force_paging(monkeypatch, target)


class Harness:
    """Drives one actor system from an async test."""

    name: str
    system: ActorSystemBase

    def spawn(self, factory: Callable[[], Actor], *, name: str | None = None) -> ActorRef:
        return self.system.spawn(factory, name=name)

    async def ask(self, ref: ActorRef, message: object, timeout: float = 5.0) -> Any:
        raise NotImplementedError

    async def answer(self, asked: Any) -> Any:
        """What ``ref.ask`` or a proxy call returned, as the answer: awaited on trio (where it must be
        awaitable), taken as it is elsewhere (where it must not be)."""
        assert not inspect.isawaitable(asked), f"{self.name}: an ask returns the answer itself, got {asked!r}"
        return asked

    async def quiet(self) -> None:
        """Until no message is queued or handled (future timers may still be armed)."""
        raise NotImplementedError

    async def elapse(self, seconds: float) -> None:
        """Let ``seconds`` of the system's clock pass, then wait until quiet."""
        raise NotImplementedError

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = 5.0) -> None:
        """Until ``predicate()`` holds; fails the test after ``timeout`` (virtual in the simulator)."""
        raise NotImplementedError

    async def shutdown(self) -> None:
        raise NotImplementedError

    @property
    def trace(self) -> list[TraceEvent]:
        return self.system.trace


class TrioHarness(Harness):
    name = "trio"

    def __init__(self, system: TrioSystem) -> None:
        self.system = system
        self._trio = system

    async def ask(self, ref: ActorRef, message: object, timeout: float = 5.0) -> Any:
        return await self._trio.ask(ref, message, timeout)

    async def answer(self, asked: Any) -> Any:
        assert inspect.isawaitable(asked), f"trio: an ask returns an awaitable, got {asked!r}"
        return await asked

    async def quiet(self) -> None:
        with trio.fail_after(10):
            await self._trio.wait_quiet()

    async def elapse(self, seconds: float) -> None:
        await trio.sleep(seconds)
        await self.quiet()

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = 5.0) -> None:
        with trio.fail_after(timeout):
            while not predicate():
                await trio.sleep(0.001)

    async def shutdown(self) -> None:
        self._trio.shutdown()


class ThreadHarness(Harness):
    name = "threads"

    def __init__(self, system: ThreadSystem) -> None:
        self.system = system
        self._threads = system

    async def ask(self, ref: ActorRef, message: object, timeout: float = 5.0) -> Any:
        return self._threads.ask(ref, message, timeout)

    async def quiet(self) -> None:
        assert self._threads.wait_quiet(10), "ThreadSystem did not go quiet within 10 s"

    async def elapse(self, seconds: float) -> None:
        time.sleep(seconds)  # real time is this backend's clock
        await self.quiet()

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            assert time.monotonic() < deadline, f"condition not reached within {timeout} s"
            time.sleep(0.001)

    async def shutdown(self) -> None:
        self._threads.shutdown()


class SimulationHarness(Harness):
    name = "simulation"

    def __init__(self, system: Simulation) -> None:
        self.system = system
        self.sim = system

    async def ask(self, ref: ActorRef, message: object, timeout: float = 5.0) -> Any:
        return self.sim.ask(ref, message, timeout)

    async def quiet(self) -> None:
        result = self.sim.run(until=self.sim.now(), max_steps=1_000_000)
        assert result.quiet, "simulation still busy after 1,000,000 steps"

    async def elapse(self, seconds: float) -> None:
        self.sim.run(until=self.sim.now() + seconds, max_steps=1_000_000)

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = 5.0) -> None:
        deadline = self.sim.now() + timeout
        while not predicate():
            assert self.sim.step(until=deadline), f"condition not reached within {timeout} virtual s"

    async def shutdown(self) -> None:
        self.sim.shutdown()


async def make_harness(
    kind: str, *, strategy: SupervisorStrategy | None = None, seed: int = 7
) -> AsyncIterator[Harness]:
    """Yield a running harness of ``kind`` and close its system afterwards."""
    if kind == "trio":
        async with TrioSystem(trace=True, supervisor_strategy=strategy, seed=seed) as trio_system:
            yield TrioHarness(trio_system)
    elif kind == "threads":
        with ThreadSystem(trace=True, supervisor_strategy=strategy, seed=seed) as thread_system:
            yield ThreadHarness(thread_system)
    else:
        sim = Simulation(seed=seed, supervisor_strategy=strategy)
        yield SimulationHarness(sim)
        sim.shutdown()


@pytest.fixture(params=BACKENDS)
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    """A harness on each of the three backends, with tracing on."""
    async for harness in make_harness(request.param):
        yield harness


@pytest.fixture(params=BACKENDS)
def backend_kind(request: pytest.FixtureRequest) -> str:
    """The backend's name, for tests that build their own system (custom strategy)."""
    kind: str = request.param
    return kind
