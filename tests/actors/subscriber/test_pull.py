"""The single-batch synchronous pull on every backend."""

from __future__ import annotations

import pytest

from conveyor.actors.broker import GetStats, Message, Publish, QueueActor, QueueConfig
from conveyor.actors.subscriber import PulledBatch, PullRequest, acknowledge, nack_pulled, start_pull
from tests.conftest import Harness

FULL_BATCH_S = 30.0
"""The pull timeout where a test asserts a full batch: a bound, not a wait, since a session answers as
soon as its batch is full. A short one (0.2 s) made the batch depend on the machine's load: a pull on
threads that had not received its messages by then answered with fewer."""


async def _pull(backend: Harness, queue: object, max_messages: int, timeout: float = FULL_BATCH_S) -> PulledBatch:
    session = start_pull(backend.system, queue, max_messages, timeout)  # type: ignore[arg-type]
    batch: PulledBatch = await backend.ask(session, PullRequest(), timeout=timeout + 5)
    return batch


async def test_pull_a_batch_ack_some_nack_the_rest(backend: Harness) -> None:
    queue = backend.spawn(lambda: QueueActor(QueueConfig("q")), name="q")
    for n in range(5):
        queue.tell(Publish(Message(str(n).encode())))
    await backend.quiet()
    batch = await _pull(backend, queue, 3)
    assert [d.message.body for d in batch.messages] == [b"0", b"1", b"2"]
    acknowledge(backend.system, batch, batch.ack_ids[:2])
    nack_pulled(backend.system, batch, batch.ack_ids[2:])
    await backend.quiet()
    stats = await backend.ask(queue, GetStats())
    assert (stats.acked, stats.depth, stats.in_flight) == (2, 3, 0)
    again = await _pull(backend, queue, 3)  # the three left: a full batch, answered at once
    assert [(d.message.body, d.delivery_count) for d in again.messages] == [(b"2", 2), (b"3", 1), (b"4", 1)]
    acknowledge(backend.system, again)
    await backend.quiet()
    assert (await backend.ask(queue, GetStats())).acked == 5


async def test_pull_from_an_empty_queue_answers_an_empty_batch_after_the_timeout(backend: Harness) -> None:
    queue = backend.spawn(lambda: QueueActor(QueueConfig("q")), name="q")
    await backend.quiet()
    batch = await _pull(backend, queue, 10, timeout=0.05)
    assert batch.messages == ()


def test_pull_refuses_bad_arguments() -> None:
    from conveyor.simulation import Simulation

    sim = Simulation(seed=1)
    queue = sim.spawn(lambda: QueueActor(QueueConfig("q")))
    with pytest.raises(ValueError, match="max_messages must be an int >= 1, got 0"):
        start_pull(sim, queue, 0)
    with pytest.raises(ValueError, match="timeout must be a finite number of seconds > 0, got 0"):
        start_pull(sim, queue, 1, timeout=0)


async def test_the_one_call_pull_on_each_backend(backend: Harness) -> None:
    from conveyor.actors.subscriber import pull, pull_async
    from conveyor.runtime import ConveyorError, TrioSystem

    queue = backend.spawn(lambda: QueueActor(QueueConfig("q")), name="q")
    for n in range(3):
        queue.tell(Publish(Message(str(n).encode())))
    await backend.quiet()
    if isinstance(backend.system, TrioSystem):
        with pytest.raises(ConveyorError, match=r"await pull_async"):
            pull(backend.system, queue, 2)
        batch = await pull_async(backend.system, queue, 2, timeout=FULL_BATCH_S)
    else:
        batch = pull(backend.system, queue, 2, timeout=FULL_BATCH_S)
    assert [d.message.body for d in batch.messages] == [b"0", b"1"]
    acknowledge(backend.system, batch)
    await backend.quiet()
    assert (await backend.ask(queue, GetStats())).acked == 2
