"""TrioSystem specifics: it shares the trio loop fairly and leaves no task behind."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from conveyor.runtime import Actor, ConveyorError, TrioSystem
from tests.runtime.actors import Get, Recorder


class SelfFeeder(Actor):
    """Sends itself ``remaining`` messages, one after another (a busy actor)."""

    def __init__(self, total: int) -> None:
        self.remaining = total
        self.handled = 0

    def receive(self, message: Any) -> None:
        if isinstance(message, Get):
            self.ctx.reply(self.handled)
            return
        self.handled += 1
        if self.remaining > 0:
            self.remaining -= 1
            self.ctx.send(self.ctx.self_ref, "again")


async def test_a_busy_system_still_lets_other_trio_tasks_run() -> None:
    total = 50_000
    observations: list[int] = []
    with trio.fail_after(30):
        await _busy(total, observations)
    # The observer ran while the actor was busy, not only before or after it.
    assert any(0 < seen < total for seen in observations)


async def _busy(total: int, observations: list[int]) -> None:
    async with TrioSystem() as system:
        feeder = system.spawn(lambda: SelfFeeder(total))
        await system.wait_quiet()
        feeder.tell("go")

        async def observe() -> None:
            for _ in range(200):
                observations.append(system._live_cells()[0].actor.handled)  # type: ignore[attr-defined]
                await trio.lowlevel.checkpoint()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(observe)
            await system.wait_quiet()
        assert await system.ask(feeder, Get()) == total + 1


def _all_tasks() -> set[str]:
    found: set[str] = set()
    stack = [trio.lowlevel.current_root_task()]
    while stack:
        task = stack.pop()
        if task is None:
            continue
        found.add(task.name)
        for nursery in task.child_nurseries:
            stack.extend(nursery.child_tasks)
    return found


def _slow_job() -> int:
    return sum(range(10_000))


class JobStarter(Actor):
    def receive(self, message: Any) -> None:
        self.ctx.run_job(_slow_job)


async def test_leaving_the_block_leaves_no_task_behind() -> None:
    before = _all_tasks()
    with trio.fail_after(10):
        await _run_and_leave()
    assert _all_tasks() == before


async def _run_and_leave() -> None:
    async with TrioSystem() as system:
        system.spawn(lambda: SelfFeeder(10**9)).tell("go")  # would run for a long time
        system.spawn(JobStarter).tell("start a job")
        await trio.sleep(0.01)
        during = _all_tasks()
        assert any("conveyor-dispatcher" in name for name in during)
    assert system.dead_letters >= 1  # the feeder's queued message, at least


async def test_a_system_is_entered_once() -> None:
    system = TrioSystem()
    async with system:
        pass
    with pytest.raises(ConveyorError, match="entered once"):
        async with system:
            pass


def test_bad_batch_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="batch and yield_every must be >= 1"):
        TrioSystem(batch=0)


class Fanout(Actor):
    """Answers an ask at once and tells ``target`` 200 times: more work left ready than one turn handles."""

    def __init__(self, target: Any) -> None:
        self.target = target

    def receive(self, message: Any) -> None:
        for _ in range(200):
            self.ctx.send(self.target, message)
        self.ctx.reply(message)


async def test_an_ask_answered_on_the_asking_task_still_wakes_the_dispatcher_for_what_it_left() -> None:
    with trio.fail_after(10):
        async with TrioSystem() as system:
            recorder = system.spawn(Recorder)
            fanout = system.spawn(lambda: Fanout(recorder))
            await system.wait_quiet()
            assert await system.ask(fanout, "x") == "x"
            await system.wait_quiet()
            assert await system.ask(recorder, Get()) == ("x",) * 200


async def test_a_tell_before_an_ask_is_handled_before_it() -> None:
    async with TrioSystem() as system:
        counter = system.spawn(Recorder)
        await system.wait_quiet()
        for n in range(3):
            counter.tell(n)
            assert await system.ask(counter, Get()) == tuple(range(n + 1))


async def test_an_ask_answered_at_once_is_still_a_checkpoint() -> None:
    async with TrioSystem() as system:
        counter = system.spawn(Recorder)
        await system.wait_quiet()
        with trio.CancelScope() as scope:
            scope.cancel()
            await system.ask(counter, Get())
        assert scope.cancelled_caught
        other_ran: list[bool] = []

        async def other() -> None:
            other_ran.append(True)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(other)
            for _ in range(3):
                await system.ask(counter, Get())
            assert other_ran  # the asks let the other task run
