"""A paged queue (``memory_target_bytes``) on every backend: bodies leave RAM, semantics stay.

What a client observes must not change: every message arrives once, in order, with its body;
priorities, browsers and dead letters keep their rules; the queue's statistics say how many bytes
of bodies it holds (within the target once quiet) and how many it wrote to its store. The whole
broker suite also runs paged with ``pytest --force-paging=0`` (tests/actors/broker/paging.py).
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable

import pytest

from conveyor.actors.broker import (
    DEAD_LETTER_REASON,
    BodyStore,
    ConsumerSettings,
    DiskBodyStore,
    GetStats,
    MemoryBodyStore,
    Message,
    Overflow,
    PageBatch,
    Publish,
    QueueActor,
    QueueConfig,
    QueueStats,
    run_page_batch,
)
from conveyor.runtime import ActorRef
from tests.actors.broker.clients import Action, consume, received, seen
from tests.conftest import Harness

BODY = 100


def body(n: int) -> bytes:
    return f"{n:04d}".encode() * (BODY // 4)


def paged_queue(backend: Harness, name: str = "q", target: int = 3 * BODY, **options: object) -> ActorRef:
    config = QueueConfig(name, memory_target_bytes=target, **options)  # type: ignore[arg-type]
    return backend.spawn(lambda: QueueActor(config), name=name)


async def stats(backend: Harness, queue: ActorRef) -> QueueStats:
    await backend.quiet()
    result: QueueStats = await backend.ask(queue, GetStats())
    return result


async def publish_all(backend: Harness, queue: ActorRef, count: int, **options: object) -> None:
    for n in range(count):
        await backend.ask(queue, Publish(Message(body(n), message_id=str(n), **options)))  # type: ignore[arg-type]


# --- the setting ------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [-1, 1.5, True, "64MiB"])
def test_memory_target_must_be_a_non_negative_int(bad: object) -> None:
    with pytest.raises(ValueError, match=r"QueueConfig\.memory_target_bytes must be None or an int >= 0"):
        QueueConfig("q", memory_target_bytes=bad)  # type: ignore[arg-type]


def test_a_durable_queue_pages_its_bodies_and_its_deep_tails_entries() -> None:
    # tests/actors/broker/test_durable_paging.py has the rest: its store, confirms and recovery.
    queue = QueueActor(QueueConfig("q", durable=True, memory_target_bytes=1024))
    assert queue.pager is not None and queue.pager.durable
    assert queue.pager.chunk_entries == 2  # deltas, as a transient queue's
    assert queue.body_store is None  # made beside its journal when it recovers


# --- on every backend -------------------------------------------------------------------------


async def test_a_backlog_is_paged_and_delivered_whole_and_in_order(backend: Harness) -> None:
    queue = paged_queue(backend)
    await publish_all(backend, queue, 40)
    before = await stats(backend, queue)
    assert before.depth == 40
    assert before.body_bytes_in_ram is not None and before.body_bytes_in_ram <= 3 * BODY
    assert before.bodies_paged >= 37  # all but what fits in the target went to the store
    assert before.entries_out_of_ram >= 30  # chunks of 2 entries, 4 to 6 kept in RAM
    client, _ = consume(backend, queue, settings=ConsumerSettings(prefetch_messages=5))
    await backend.quiet()
    for _ in range(100):
        if len(await received(backend, client)) == 40:
            break
        await backend.elapse(0.05)
    assert await received(backend, client) == [(body(n), 1) for n in range(40)]
    after = await stats(backend, queue)
    assert (after.depth, after.in_flight, after.acked, after.body_bytes_in_ram, after.entries_out_of_ram) == (
        0, 0, 40, 0, 0)


async def test_priorities_hold_on_a_paged_queue(backend: Harness) -> None:
    queue = paged_queue(backend, target=0)
    await publish_all(backend, queue, 10, priority=0)
    await backend.ask(queue, Publish(Message(b"urgent", priority=9)))
    client, _ = consume(backend, queue, settings=ConsumerSettings(prefetch_messages=1))
    await backend.quiet()
    for _ in range(100):
        if len(await received(backend, client)) == 11:
            break
        await backend.elapse(0.05)
    assert await received(backend, client) == [(b"urgent", 1)] + [(body(n), 1) for n in range(10)]


async def test_a_released_message_keeps_its_place_with_its_body(backend: Harness) -> None:
    queue = paged_queue(backend, target=0)
    await publish_all(backend, queue, 3)
    client, _ = consume(backend, queue, Action.RELEASE, Action.ACK, settings=ConsumerSettings(prefetch_messages=1))
    await backend.quiet()
    for _ in range(100):
        if (await stats(backend, queue)).acked == 3:
            break
        await backend.elapse(0.05)
    got = await received(backend, client)
    assert [b for b, count in got if count == 2] == [body(0), body(1), body(2)]
    assert got[0] == (body(0), 1) and got[1] == (body(0), 2)  # released, then first again


async def test_a_browser_sees_every_paged_body(backend: Harness) -> None:
    queue = paged_queue(backend, target=0)
    await publish_all(backend, queue, 12)
    browser, _ = consume(backend, queue, Action.IGNORE, settings=ConsumerSettings(acquiring=False))
    await backend.quiet()
    for _ in range(100):
        if len(await received(backend, browser)) == 12:
            break
        await backend.elapse(0.05)
    assert await received(backend, browser) == [(body(n), 0) for n in range(12)]  # browsed, never delivered
    assert (await stats(backend, queue)).depth == 12


async def test_a_paged_message_is_dead_lettered_with_its_body(backend: Harness) -> None:
    dlq = backend.spawn(lambda: QueueActor(QueueConfig("dlq")), name="dlq")
    queue = paged_queue(backend, target=0, max_length=2, overflow=Overflow.DROP_HEAD, dead_letter=dlq)
    await publish_all(backend, queue, 5)
    await backend.quiet()
    for _ in range(100):
        if (await stats(backend, dlq)).depth == 3:
            break
        await backend.elapse(0.05)
    client, _ = consume(backend, dlq, Action.IGNORE)
    await backend.quiet()
    for _ in range(100):
        if len(await received(backend, client)) == 3:
            break
        await backend.elapse(0.05)
    assert await received(backend, client) == [(body(n), 1) for n in range(3)]
    assert {s.delivery.message.header_map()[DEAD_LETTER_REASON] for s in await seen(backend, client)} == {
        "max-length"
    }


# --- the stores -------------------------------------------------------------------------------


@pytest.mark.parametrize("make", [MemoryBodyStore, lambda: DiskBodyStore(collect_every=4)], ids=["memory", "disk"])
def test_a_store_runs_writes_then_reads_then_deletes(make: Callable[[], BodyStore]) -> None:
    store = make()
    assert run_page_batch(store, PageBatch(writes=((1, b"one"), (2, b"two")), reads=(2,))).bodies == ((2, b"two"),)
    # A read in the batch that deletes its body still sees it: reads run before deletes.
    assert run_page_batch(store, PageBatch(writes=((3, b""),), reads=(1, 3), deletes=(1, 2))).bodies == (
        (1, b"one"), (3, b""),
    )
    shell = Message(b"", headers={"colour": "red"}, message_id="m4")
    done = run_page_batch(store, PageBatch(chunk_writes=((-1, ((4, shell, 30),)),), chunk_reads=(-1,)))
    assert done.chunks == ((-1, ((4, shell, 30),)),)
    with pytest.raises(KeyError):
        run_page_batch(store, PageBatch(reads=(1,)))


def test_a_disk_store_keeps_bodies_across_garbage_collection_and_removes_its_directory() -> None:
    store = DiskBodyStore(collect_every=4)
    run_page_batch(store, PageBatch(writes=tuple((n, body(n)) for n in range(10))))
    assert run_page_batch(store, PageBatch(reads=(3,), deletes=(0, 1, 2, 3, 4, 5))).bodies == ((3, body(3)),)
    assert run_page_batch(store, PageBatch(reads=(9, 6))).bodies == ((9, body(9)), (6, body(6)))
    directory = store.directory
    assert directory is not None and os.path.isdir(directory)
    del store
    gc.collect()
    assert not os.path.exists(directory)
