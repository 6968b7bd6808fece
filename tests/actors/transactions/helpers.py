"""Helpers shared by the transaction tests: a store and a queue handle on any harness."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import attrs

from conveyor.actors.transactions import AsyncTxQueue, ConsumePolicy, RedeliveryBackoff, TxStoreActor
from conveyor.runtime import ActorRef
from tests.conftest import Harness


@attrs.frozen
class CrashNow:
    """Makes a ``CrashableTxStore`` raise: its instance dies and the supervisor restarts it."""


class CrashableTxStore(TxStoreActor):
    """A real store that raises on ``CrashNow``, as a bug in a handler would."""

    def receive(self, message: Any) -> None:
        if type(message) is CrashNow:
            msg = "injected crash of the transaction store"
            raise RuntimeError(msg)
        super().receive(message)


def spawn_store(backend: Harness, *, durable: bool = False, compact_after_events: int = 1024) -> ActorRef:
    return backend.spawn(lambda: CrashableTxStore(durable=durable, compact_after_events=compact_after_events),
                         name="tx")


async def handle(backend: Harness, store: ActorRef) -> AsyncTxQueue:
    """A queue handle (its own session) whose asks go through the harness, so it runs on every backend."""
    return AsyncTxQueue(backend.system, store, ask=backend.ask)


async def declared(backend: Harness, store: ActorRef, *queues: tuple[str, ConsumePolicy],
                   backoff: RedeliveryBackoff | None = None) -> AsyncTxQueue:
    q = await handle(backend, store)
    for name, policy in queues:
        await q.declare(name, policy, backoff)
    return q


async def produce(q: AsyncTxQueue, queue: str, *bodies: bytes) -> None:
    """Put ``bodies`` into ``queue`` in one committed transaction."""
    tx = q.new_transaction()
    for body in bodies:
        tx.put(queue, body)
    await tx.commit()


async def until(backend: Harness, check: Callable[[], Awaitable[bool]], timeout: float = 20.0) -> None:
    """Let time pass (virtual in the simulator) until ``check()`` holds; fails after ``timeout``."""
    waited = 0.0
    while not await check():
        assert waited < timeout, f"condition not reached within {timeout} s"
        await backend.elapse(0.05)
        waited += 0.05
