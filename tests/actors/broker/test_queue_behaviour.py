"""The broker's actors (queue, consumer manager, consumer), asserted identically on trio, threads and the simulator.

Every test drives real ``QueueActor`` / ``ConsumerActor`` instances through the
``backend`` fixture and asserts what a client observes: which deliveries arrive, in
which order, how often, and what the queue's statistics say afterwards. Timed tests
keep deadlines short (tenths of a second) because trio and threads run on the real
clock; the simulator runs the same tests on its virtual clock.
"""

from __future__ import annotations

import itertools
import re
from collections import deque

import pytest

from conveyor.actors.broker import (
    DEAD_LETTER_QUEUE,
    DEAD_LETTER_REASON,
    DELIVERY_COUNT,
    Ack,
    AckResult,
    ConsumerActor,
    ConsumerManagerActor,
    ConsumerSettings,
    Delivery,
    GetStats,
    Message,
    ModifyAckDeadline,
    Nack,
    NotifyWork,
    Overflow,
    Publish,
    PublishBatch,
    Published,
    PublishRejected,
    QueueActor,
    QueueConfig,
    QueueStats,
    Release,
    Resume,
    RetryPolicy,
    SelectorError,
    Subscribe,
    Suspend,
)
from conveyor.runtime import Actor, ActorRef, EventKind
from tests.actors.broker.clients import Action, GetAckResults, Send, consume, received, seen
from tests.conftest import Harness

# --- helpers ------------------------------------------------------------------------------------

async def not_yet(backend: Harness, client: ActorRef, expected: list[tuple[bytes, int]]) -> None:
    """A "not before its time" snapshot: exact on the virtual clock only.

    On trio and threads a loaded machine may stretch any wait past the deadline under test;
    there the arrival timestamps (checked after) prove "not before" instead.
    """
    if backend.name == "simulation":
        assert await received(backend, client) == expected


async def eventually(
    backend: Harness, client: ActorRef, expected: list[tuple[bytes, int]], timeout: float = 10.0
) -> list[tuple[bytes, int]]:
    """What the client received once it equals ``expected``, or after ``timeout`` (virtual in the simulator)."""
    waited = 0.0
    got = await received(backend, client)
    while got != expected and waited < timeout:
        await backend.elapse(0.05)
        waited += 0.05
        got = await received(backend, client)
    return got



def msg(body: str, **options: object) -> Message:
    """A message whose body is ``body`` encoded; options go to ``Message``."""
    return Message(body.encode(), **options)  # type: ignore[arg-type]


def queue_of(backend: Harness, name: str = "q", **options: object) -> ActorRef:
    config = QueueConfig(name, **options)  # type: ignore[arg-type]
    return backend.spawn(lambda: QueueActor(config), name=name)


async def publish(backend: Harness, queue: ActorRef, *messages: Message) -> list[Published | PublishRejected]:
    """Publish each message with a sender, so the queue confirms it; returns the confirms in order."""
    return [await backend.ask(queue, Publish(message)) for message in messages]


async def stats(backend: Harness, queue: ActorRef) -> QueueStats:
    await backend.quiet()
    result: QueueStats = await backend.ask(queue, GetStats())
    return result


def bodies(*names: str) -> list[bytes]:
    return [name.encode() for name in names]


# --- 1. publish, confirm, in-order delivery, stats ------------------------------------------------


async def test_publish_is_confirmed_and_one_consumer_gets_everything_in_order(backend: Harness) -> None:
    queue = queue_of(backend, "orders")
    client, _ = consume(backend, queue)
    await backend.quiet()
    confirms = await publish(backend, queue, *(msg(f"m{n}", message_id=f"id-{n}") for n in range(1, 6)))
    assert confirms == [Published("orders", n, f"id-{n}") for n in range(1, 6)]
    await backend.quiet()
    assert await received(backend, client) == [(f"m{n}".encode(), 1) for n in range(1, 6)]
    deliveries = [s.delivery for s in await seen(backend, client)]
    assert [d.tag for d in deliveries] == [1, 2, 3, 4, 5]
    assert not any(d.redelivered for d in deliveries)
    assert [d.message.message_id for d in deliveries] == [f"id-{n}" for n in range(1, 6)]
    result = await stats(backend, queue)
    assert (result.depth, result.in_flight, result.published, result.delivered, result.acked) == (0, 0, 5, 5, 5)
    assert (result.redelivered, result.dead_lettered, result.expired, result.rejected) == (0, 0, 0, 0)
    assert len(result.consumers) == 1
    assert (result.consumers[0].delivered, result.consumers[0].acked, result.consumers[0].in_flight) == (5, 5, 0)


async def test_a_tell_without_sender_is_enqueued_without_a_confirm(backend: Harness) -> None:
    queue = queue_of(backend)
    queue.tell(Publish(msg("a")))
    queue.tell(PublishBatch((msg("b"), msg("c"))))
    result = await stats(backend, queue)
    assert (result.depth, result.published) == (3, 3)


# --- 2. strict priority -------------------------------------------------------------------------------


async def test_strict_priority_then_fifo_within_a_priority(backend: Harness) -> None:
    queue = queue_of(backend)
    published = [("a", 1), ("b", 9), ("c", 4), ("d", 9), ("e", 1), ("f", 4), ("g", 0), ("h", 5)]
    await publish(backend, queue, *(msg(body, priority=p) for body, p in published))
    client, _ = consume(backend, queue)
    await backend.quiet()
    assert [body for body, _ in await received(backend, client)] == bodies("b", "d", "h", "c", "f", "a", "e", "g")


async def test_a_higher_priority_arrival_goes_before_entries_the_consumer_already_passed(backend: Harness) -> None:
    # Qpid's checkSubscriptionsNotAheadOfDelivery: the consumer's pointer moves back.
    queue = queue_of(backend)
    client, _ = consume(backend, queue, Action.IGNORE, settings=ConsumerSettings(prefetch_messages=1))
    await backend.quiet()
    await publish(backend, queue, msg("low-1", priority=1), msg("low-2", priority=1))
    await backend.quiet()
    assert await received(backend, client) == [(b"low-1", 1)]
    await publish(backend, queue, msg("high", priority=8))
    await backend.quiet()
    (first,) = (s.delivery for s in await seen(backend, client))
    await backend.ask(client, Send(Ack(first.consumer_id, (first.tag,))))
    await backend.quiet()
    assert [body for body, _ in await received(backend, client)] == bodies("low-1", "high")


async def test_fewer_priority_levels_share_middle_priorities(backend: Harness) -> None:
    # Two levels: priorities 0-4 share the low level, 5-9 the high one (Qpid's mapping).
    queue = queue_of(backend, priorities=2)
    published = [("a", 0), ("b", 4), ("c", 5), ("d", 9), ("e", 3)]
    await publish(backend, queue, *(msg(body, priority=p) for body, p in published))
    client, _ = consume(backend, queue)
    await backend.quiet()
    assert [body for body, _ in await received(backend, client)] == bodies("c", "d", "a", "b", "e")


async def test_priorities_outside_the_levels_clamp_with_qpids_mapping(backend: Harness) -> None:
    """Issue 15, item 7c: 3 levels, offset 5 - 2 = 3: 0-3 low, 4 middle, 5 and up (to 255) high."""
    assert Message(b"x", priority=255).priority == 255, "accepted, and carried through untouched"
    queue = queue_of(backend, priorities=3)
    published = [("a", 0), ("b", 200), ("c", 9), ("d", 255), ("e", 5), ("f", 4), ("g", 10)]
    await publish(backend, queue, *(msg(body, priority=p) for body, p in published))
    client, _ = consume(backend, queue)
    await backend.quiet()
    assert [body for body, _ in await received(backend, client)] == bodies("b", "c", "d", "e", "g", "f", "a")


# --- 3. nack, retry backoff, modify-ack-deadline -------------------------------------------------------


async def test_nack_requeues_at_the_original_position_with_delivery_count_raised(backend: Harness) -> None:
    queue = queue_of(backend)
    await publish(backend, queue, msg("1"), msg("2"), msg("3"))
    # One message of credit: a nacked message must come back before the ones behind it.
    client, _ = consume(backend, queue, Action.NACK, Action.ACK, settings=ConsumerSettings(prefetch_messages=1))
    await backend.quiet()
    assert await received(backend, client) == [(b"1", 1), (b"1", 2), (b"2", 1), (b"2", 2), (b"3", 1), (b"3", 2)]
    assert [s.delivery.redelivered for s in await seen(backend, client)] == [False, True] * 3
    result = await stats(backend, queue)
    assert (result.depth, result.delivered, result.redelivered, result.acked) == (0, 6, 3, 3)


async def test_release_returns_at_once_and_counts_a_delivery(backend: Harness) -> None:
    queue = queue_of(backend, retry=RetryPolicy(10.0, 10.0))  # release never waits for the backoff
    await publish(backend, queue, msg("1"), msg("2"))
    client, _ = consume(backend, queue, Action.RELEASE, Action.ACK, settings=ConsumerSettings(prefetch_messages=1))
    await backend.quiet()
    assert await received(backend, client) == [(b"1", 1), (b"1", 2), (b"2", 1), (b"2", 2)]


async def test_retry_policy_delays_the_redelivery_of_a_nacked_message(backend: Harness) -> None:
    queue = queue_of(backend, retry=RetryPolicy(min_backoff_s=0.3, max_backoff_s=0.3))
    client, _ = consume(backend, queue, Action.NACK, Action.ACK)
    await backend.quiet()
    await publish(backend, queue, msg("x"))
    await backend.quiet()
    assert await received(backend, client) == [(b"x", 1)]
    result = await stats(backend, queue)
    assert (result.depth, result.in_flight) == (1, 0)  # back in the queue, waiting out the backoff
    await backend.elapse(0.1)
    await not_yet(backend, client, [(b"x", 1)])  # not before the backoff
    assert await eventually(backend, client, [(b"x", 1), (b"x", 2)]) == [(b"x", 1), (b"x", 2)]
    first, second = await seen(backend, client)
    assert second.at - first.at >= 0.3
    result = await stats(backend, queue)
    assert (result.depth, result.acked, result.redelivered) == (0, 1, 1)


async def test_a_nack_with_its_own_delay_overrides_the_retry_policy(backend: Harness) -> None:
    queue = queue_of(backend, retry=RetryPolicy(min_backoff_s=30.0, max_backoff_s=30.0))
    client, _ = consume(backend, queue, Action.IGNORE, Action.ACK)
    await backend.quiet()
    await publish(backend, queue, msg("x"))
    await backend.quiet()
    (first,) = (s.delivery for s in await seen(backend, client))
    await backend.ask(client, Send(Nack(first.consumer_id, (first.tag,), delay_s=0.2)))
    await backend.elapse(0.05)
    await not_yet(backend, client, [(b"x", 1)])
    assert await eventually(backend, client, [(b"x", 1), (b"x", 2)]) == [(b"x", 1), (b"x", 2)]


async def test_retry_backoff_grows_exponentially_up_to_the_cap(backend: Harness) -> None:
    queue = queue_of(backend, retry=RetryPolicy(min_backoff_s=0.1, max_backoff_s=0.15))
    client, _ = consume(backend, queue, Action.NACK)
    await backend.quiet()
    await publish(backend, queue, msg("x"))
    await backend.elapse(0.5)
    times = [s.at for s in await seen(backend, client)]
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert len(gaps) >= 2
    assert gaps[0] >= 0.1  # min * 2**0
    assert all(gap >= 0.15 for gap in gaps[1:])  # min * 2**1 = 0.2, capped at 0.15
    if backend.name == "simulation":  # exact on the virtual clock
        assert gaps == pytest.approx([0.1, 0.15, 0.15])
    assert [s.count for s in await seen(backend, client)] == list(range(1, len(times) + 1))


async def test_modify_ack_deadline_zero_returns_the_message_at_once(backend: Harness) -> None:
    queue = queue_of(backend)
    await publish(backend, queue, msg("1"), msg("2"))
    client, _ = consume(backend, queue, Action.MODIFY_ZERO, Action.ACK, settings=ConsumerSettings(prefetch_messages=1))
    await backend.quiet()
    assert await received(backend, client) == [(b"1", 1), (b"1", 2), (b"2", 1), (b"2", 2)]
    result = await stats(backend, queue)
    assert (result.depth, result.acked, result.redelivered) == (0, 2, 2)


async def test_modify_ack_deadline_extends_the_lease_past_the_original_deadline(backend: Harness) -> None:
    queue = queue_of(backend, ack_deadline_s=0.15)
    client, _ = consume(backend, queue, Action.EXTEND, Action.ACK, extend_s=0.6)
    await backend.quiet()
    await publish(backend, queue, msg("x"))
    await backend.elapse(0.3)  # well past the original 0.15 s deadline
    await not_yet(backend, client, [(b"x", 1)])
    if backend.name == "simulation":
        result = await stats(backend, queue)
        assert (result.in_flight, result.depth, result.redelivered) == (1, 0, 0)
    assert await eventually(backend, client, [(b"x", 1), (b"x", 2)]) == [(b"x", 1), (b"x", 2)]
    first, second = await seen(backend, client)
    assert second.at - first.at >= 0.6  # the extension, not the original 0.15 s, decided
    result = await stats(backend, queue)
    assert (result.in_flight, result.depth, result.acked) == (0, 0, 1)


@pytest.mark.parametrize("shortened_by", ["modify_ack_deadline", "consumer_lease"])
async def test_a_lease_can_be_shorter_than_the_queues_deadline(backend: Harness, shortened_by: str) -> None:
    """By a ``ModifyAckDeadline`` after the delivery, or by the consumer's own lease (``ConsumerSettings.lease_s``)."""
    queue = queue_of(backend, ack_deadline_s=30.0)
    if shortened_by == "modify_ack_deadline":
        client, _ = consume(backend, queue, Action.EXTEND, Action.ACK, extend_s=0.1)
    else:
        client, _ = consume(backend, queue, Action.IGNORE, Action.ACK, settings=ConsumerSettings(lease_s=0.1))
    await backend.quiet()
    await publish(backend, queue, msg("x"))
    assert await eventually(backend, client, [(b"x", 1), (b"x", 2)]) == [(b"x", 1), (b"x", 2)]
    await backend.quiet()
    result = await stats(backend, queue)
    assert (result.in_flight, result.acked) == (0, 1)


async def test_a_consumer_lease_replaces_the_queues_ack_deadline_for_what_it_takes(backend: Harness) -> None:
    """``ConsumerSettings.lease_s`` (a Pub/Sub stream's deadline): each message it takes is leased that long."""
    queue = queue_of(backend, ack_deadline_s=0.15)
    client, _ = consume(backend, queue, Action.IGNORE, Action.ACK,
                        settings=ConsumerSettings(lease_s=0.6))
    await backend.quiet()
    await publish(backend, queue, msg("x"))
    await backend.quiet()
    (first,) = await seen(backend, client)
    assert first.delivery.deadline is not None
    assert 0.15 < first.delivery.deadline - first.at <= 0.6  # the consumer's lease, not the queue's 0.15 s
    await backend.elapse(0.3)  # well past the queue's deadline
    await not_yet(backend, client, [(b"x", 1)])
    assert await eventually(backend, client, [(b"x", 1), (b"x", 2)]) == [(b"x", 1), (b"x", 2)]
    first, second = await seen(backend, client)
    # not before the lease set at the pull ran out (the client saw the first delivery a little after the pull)
    assert first.delivery.deadline is not None and second.at >= first.delivery.deadline
    assert second.delivery.deadline is not None and second.delivery.deadline - second.at > 0.15
    result = await stats(backend, queue)
    assert (result.in_flight, result.acked, result.redelivered) == (0, 1, 1)


# --- 4. lease expiry ------------------------------------------------------------------------------


async def test_an_unacked_message_is_redelivered_after_the_ack_deadline(backend: Harness) -> None:
    queue = queue_of(backend, ack_deadline_s=0.3)
    client, _ = consume(backend, queue, Action.IGNORE, Action.ACK)
    await backend.quiet()
    await publish(backend, queue, msg("x"))
    await backend.quiet()
    assert await received(backend, client) == [(b"x", 1)]
    (first,) = await seen(backend, client)
    assert first.delivery.deadline is not None
    assert first.delivery.deadline - first.at <= 0.3  # set at the pull, just before it arrived
    await backend.elapse(0.1)
    await not_yet(backend, client, [(b"x", 1)])
    assert await eventually(backend, client, [(b"x", 1), (b"x", 2)]) == [(b"x", 1), (b"x", 2)]
    first, second = await seen(backend, client)
    assert second.delivery.redelivered
    assert second.delivery.tag == first.delivery.tag
    assert first.delivery.deadline is not None
    assert second.at >= first.delivery.deadline  # not before the lease set at the pull ran out
    result = await stats(backend, queue)
    assert (result.depth, result.in_flight, result.acked, result.redelivered) == (0, 0, 1, 1)


async def test_an_ack_after_the_lease_lapsed_is_reported_invalid(backend: Harness) -> None:
    queue = queue_of(backend, ack_deadline_s=0.3)
    client, consumer = consume(backend, queue, Action.IGNORE)
    await backend.quiet()
    await publish(backend, queue, msg("late"), msg("on-time"))
    await backend.quiet()
    late, on_time = (s.delivery for s in await seen(backend, client))
    # Ack one in time, with a confirm.
    assert await backend.ask(client, Send(Ack(on_time.consumer_id, (on_time.tag,), confirm=True))) == "sent"
    await backend.quiet()
    assert await backend.ask(client, GetAckResults()) == (AckResult((on_time.tag,), ()),)
    consumer.tell(Suspend())  # so the lapsed message is not handed straight back to this consumer
    await backend.elapse(0.45)
    assert await backend.ask(client, Send(Ack(late.consumer_id, (late.tag,), confirm=True))) == "sent"
    await backend.quiet()
    assert await backend.ask(client, GetAckResults()) == (AckResult((on_time.tag,), ()), AckResult((), (late.tag,)))
    result = await stats(backend, queue)
    assert (result.depth, result.in_flight, result.acked) == (1, 0, 1)  # the late ack changed nothing
    consumer.tell(Resume())
    await backend.quiet()
    assert await received(backend, client) == [(b"late", 1), (b"on-time", 1), (b"late", 2)]


async def test_an_ack_naming_an_older_delivery_leaves_the_newer_one_alone(backend: Harness) -> None:
    """A lapsed message comes back under its tag; an ack naming the first delivery arrives after the
    second went out (an exactly-once ack on a slow link): it is invalid, and the second stays leased."""
    queue = queue_of(backend, ack_deadline_s=0.3)
    client, _ = consume(backend, queue, Action.IGNORE, Action.IGNORE)
    await backend.quiet()
    await publish(backend, queue, msg("x"))
    await backend.quiet()
    assert await eventually(backend, client, [(b"x", 1), (b"x", 2)]) == [(b"x", 1), (b"x", 2)]
    first, second = (s.delivery for s in await seen(backend, client))
    assert first.tag == second.tag
    stale = Ack(first.consumer_id, (first.tag,), confirm=True, attempts=(1,))
    assert await backend.ask(client, Send(stale)) == "sent"
    await backend.quiet()
    assert await backend.ask(client, GetAckResults()) == (AckResult((), (first.tag,)),)
    result = await stats(backend, queue)
    assert (result.in_flight, result.acked) == (1, 0)  # the second delivery is still leased
    current = Ack(second.consumer_id, (second.tag,), confirm=True, attempts=(2,))
    assert await backend.ask(client, Send(current)) == "sent"
    await backend.quiet()
    assert await backend.ask(client, GetAckResults()) == (AckResult((), (first.tag,)), AckResult((second.tag,), ()))
    result = await stats(backend, queue)
    assert (result.depth, result.in_flight, result.acked) == (0, 0, 1)


# --- 5. delivery limit and dead-letter queue ----------------------------------------------------------


async def test_delivery_limit_dead_letters_with_headers(backend: Harness) -> None:
    dlq = queue_of(backend, "dlq")
    queue = queue_of(backend, "work", max_deliveries=3, dead_letter=dlq)
    client, _ = consume(backend, queue, Action.NACK)
    await backend.quiet()
    await publish(backend, queue, msg("poison", headers={"kind": "bad"}, message_id="p1", priority=7), msg("ok"))
    await backend.quiet()
    got = await received(backend, client)
    assert [count for body, count in got if body == b"poison"] == [1, 2, 3]
    assert [count for body, count in got if body == b"ok"] == [1, 2, 3]
    work = await stats(backend, queue)
    assert (work.depth, work.in_flight, work.dead_lettered, work.delivered, work.acked) == (0, 0, 2, 6, 0)
    dead = await stats(backend, dlq)
    assert (dead.depth, dead.published) == (2, 2)
    dlq_client, _ = consume(backend, dlq)
    await backend.quiet()
    letters = {s.body: s.delivery.message for s in await seen(backend, dlq_client)}
    poison = letters[b"poison"]
    assert poison.header_map() == {
        "kind": "bad",
        DEAD_LETTER_REASON: "delivery-limit",
        DEAD_LETTER_QUEUE: "work",
        DELIVERY_COUNT: 3,
    }
    assert (poison.message_id, poison.priority) == ("p1", 7)
    assert letters[b"ok"].header_map()[DELIVERY_COUNT] == 3


async def test_lease_lapses_count_toward_the_delivery_limit(backend: Harness) -> None:
    dlq = queue_of(backend, "dlq")
    queue = queue_of(backend, "work", max_deliveries=2, ack_deadline_s=0.1, dead_letter=dlq)
    client, _ = consume(backend, queue, Action.IGNORE)
    await backend.quiet()
    await publish(backend, queue, msg("x"))
    await backend.elapse(0.35)
    assert await received(backend, client) == [(b"x", 1), (b"x", 2)]
    work = await stats(backend, queue)
    assert (work.depth, work.in_flight, work.dead_lettered) == (0, 0, 1)
    assert (await stats(backend, dlq)).depth == 1


async def test_without_a_dead_letter_queue_the_message_is_dropped_and_counted(backend: Harness) -> None:
    queue = queue_of(backend, max_deliveries=1)
    client, _ = consume(backend, queue, Action.NACK)
    await backend.quiet()
    await publish(backend, queue, msg("x"))
    result = await stats(backend, queue)
    assert await received(backend, client) == [(b"x", 1)]
    assert (result.depth, result.in_flight, result.dead_lettered) == (0, 0, 1)


# --- 6. TTL and delayed delivery ------------------------------------------------------------------------


async def test_an_expired_message_is_counted_and_never_delivered(backend: Harness) -> None:
    queue = queue_of(backend)
    await publish(backend, queue, msg("short", ttl_s=0.1), msg("long", ttl_s=30.0), msg("forever"))
    await backend.elapse(0.25)
    result = await stats(backend, queue)
    assert (result.depth, result.expired) == (2, 1)
    client, _ = consume(backend, queue)
    await backend.quiet()
    assert await received(backend, client) == [(b"long", 1), (b"forever", 1)]
    result = await stats(backend, queue)
    assert (result.depth, result.expired, result.acked, result.delivered) == (0, 1, 2, 2)


async def test_a_message_past_its_ttl_while_held_expires_when_returned(backend: Harness) -> None:
    queue = queue_of(backend, ack_deadline_s=0.2)
    client, _ = consume(backend, queue, Action.IGNORE)
    await backend.quiet()
    await publish(backend, queue, msg("x", ttl_s=0.1))
    await backend.elapse(0.35)
    assert await received(backend, client) == [(b"x", 1)]
    result = await stats(backend, queue)
    assert (result.depth, result.in_flight, result.expired) == (0, 0, 1)


async def test_a_delayed_message_is_not_delivered_before_its_time(backend: Harness) -> None:
    queue = queue_of(backend)
    client, _ = consume(backend, queue)
    await backend.quiet()
    start = backend.system.now()
    await publish(backend, queue, msg("later", delay_s=0.3), msg("now"))
    await backend.quiet()
    await backend.elapse(0.1)
    await not_yet(backend, client, [(b"now", 1)])
    if backend.name == "simulation":
        result = await stats(backend, queue)
        assert (result.depth, result.in_flight) == (1, 0)
    assert await eventually(backend, client, [(b"now", 1), (b"later", 1)]) == [(b"now", 1), (b"later", 1)]
    assert (await seen(backend, client))[1].at - start >= 0.3
    result = await stats(backend, queue)
    assert (result.depth, result.acked) == (0, 2)


# --- 7. immediate publish ---------------------------------------------------------------------------


async def test_immediate_is_refused_without_a_consumer(backend: Harness) -> None:
    queue = queue_of(backend)
    (outcome,) = await publish(backend, queue, msg("x", message_id="i1"))
    assert isinstance(outcome, Published)
    refused = await backend.ask(queue, Publish(msg("now", message_id="i2"), immediate=True))
    assert isinstance(refused, PublishRejected)
    assert (refused.queue, refused.message_id) == ("q", "i2")
    assert "immediate" in refused.reason
    result = await stats(backend, queue)
    assert (result.depth, result.published, result.rejected) == (1, 1, 1)


async def test_immediate_is_accepted_when_a_consumer_can_take_it(backend: Harness) -> None:
    queue = queue_of(backend)
    client, _ = consume(backend, queue)
    await backend.quiet()
    accepted = await backend.ask(queue, Publish(msg("now", message_id="i1"), immediate=True))
    assert accepted == Published("q", 1, "i1")
    await backend.quiet()
    assert await received(backend, client) == [(b"now", 1)]


async def test_immediate_is_refused_when_the_consumer_is_suspended(backend: Harness) -> None:
    queue = queue_of(backend)
    client, consumer = consume(backend, queue)
    await backend.quiet()
    consumer.tell(Suspend())
    await backend.quiet()
    refused = await backend.ask(queue, Publish(msg("now"), immediate=True))
    assert isinstance(refused, PublishRejected)
    assert "immediate" in refused.reason
    result = await stats(backend, queue)
    assert (result.depth, result.in_flight, result.published, result.rejected) == (0, 0, 0, 1)
    consumer.tell(Resume())
    await backend.quiet()
    assert await backend.ask(queue, Publish(msg("again"), immediate=True)) == Published("q", 1, "")
    await backend.quiet()
    assert await received(backend, client) == [(b"again", 1)]


async def test_immediate_is_refused_when_the_consumer_has_no_credit(backend: Harness) -> None:
    queue = queue_of(backend)
    client, _ = consume(backend, queue, Action.IGNORE, settings=ConsumerSettings(prefetch_messages=1))
    await backend.quiet()
    await publish(backend, queue, msg("held"))
    await backend.quiet()
    refused = await backend.ask(queue, Publish(msg("now"), immediate=True))
    assert isinstance(refused, PublishRejected)
    result = await stats(backend, queue)
    assert (result.depth, result.in_flight, result.published, result.rejected) == (0, 1, 1, 1)
    assert await received(backend, client) == [(b"held", 1)]


async def test_immediate_is_refused_when_no_consumer_selects_it(backend: Harness) -> None:
    queue = queue_of(backend)
    consume(backend, queue, settings=ConsumerSettings(selector={"eq": ["colour", "red"]}))
    await backend.quiet()
    refused = await backend.ask(queue, Publish(msg("blue", headers={"colour": "blue"}), immediate=True))
    assert isinstance(refused, PublishRejected)
    accepted = await backend.ask(queue, Publish(msg("red", headers={"colour": "red"}), immediate=True))
    assert isinstance(accepted, Published)
    result = await stats(backend, queue)
    assert (result.published, result.rejected, result.acked, result.depth) == (1, 1, 1, 0)


# --- 8. browsers ---------------------------------------------------------------------------------------


async def test_a_browser_sees_every_message_once_in_publish_order_without_acquiring(backend: Harness) -> None:
    queue = queue_of(backend)
    await publish(backend, queue, msg("a", priority=1), msg("b", priority=9), msg("c"), msg("d", priority=9))
    browser, _ = consume(backend, queue, Action.IGNORE, settings=ConsumerSettings(acquiring=False))
    await backend.quiet()
    assert [body for body, _ in await received(backend, browser)] == bodies("a", "b", "c", "d")
    assert all(s.delivery.deadline is None for s in await seen(backend, browser))
    result = await stats(backend, queue)
    assert (result.depth, result.in_flight, result.delivered, result.acked) == (4, 0, 0, 0)
    # An acquiring consumer still gets them all, in queue (priority) order; returns don't show them twice.
    worker, worker_consumer = consume(backend, queue, Action.NACK, Action.ACK)
    await backend.quiet()
    assert sorted(await received(backend, worker)) == sorted(
        [(b, c) for b in bodies("a", "b", "c", "d") for c in (1, 2)]
    )
    assert [body for body, count in await received(backend, worker) if count == 1] == bodies("b", "d", "c", "a")
    # A browser sees what is in the queue when it looks: hold the worker back so "e" waits for it.
    worker_consumer.tell(Suspend())
    await backend.quiet()
    await publish(backend, queue, msg("e"))
    await backend.quiet()
    assert [body for body, _ in await received(backend, browser)] == bodies("a", "b", "c", "d", "e")
    worker_consumer.tell(Resume())
    await backend.quiet()
    assert [body for body, _ in await received(backend, browser)] == bodies("a", "b", "c", "d", "e")
    assert (await received(backend, worker))[-2:] == [(b"e", 1), (b"e", 2)]
    result = await stats(backend, queue)
    assert (result.depth, result.acked) == (0, 5)


async def test_a_browser_with_small_credit_still_sees_everything(backend: Harness) -> None:
    queue = queue_of(backend)
    await publish(backend, queue, *(msg(str(n)) for n in range(7)))
    browser, _ = consume(backend, queue, Action.IGNORE, settings=ConsumerSettings(acquiring=False, prefetch_messages=2))
    await backend.quiet()
    assert [body for body, _ in await received(backend, browser)] == bodies(*(str(n) for n in range(7)))


# --- 9. selectors -----------------------------------------------------------------------------------


async def test_selectors_route_matching_messages_and_leave_the_rest(backend: Harness) -> None:
    queue = queue_of(backend)
    red, _ = consume(backend, queue, settings=ConsumerSettings(selector={"eq": ["colour", "red"]}))
    cool, _ = consume(
        backend,
        queue,
        settings=ConsumerSettings(selector={"and": [{"in": ["colour", ["blue", "cyan"]]}, {"not": {"exists": "x"}}]}),
    )
    await backend.quiet()
    published = [
        msg("r1", headers={"colour": "red"}),
        msg("b1", headers={"colour": "blue"}),
        msg("g1", headers={"colour": "green"}),
        msg("r2", headers={"colour": "red", "x": 1}),
        msg("c1", headers={"colour": "cyan"}),
        msg("b2", headers={"colour": "blue", "x": True}),
        msg("plain"),
    ]
    await publish(backend, queue, *published)
    await backend.quiet()
    assert [body for body, _ in await received(backend, red)] == bodies("r1", "r2")
    assert [body for body, _ in await received(backend, cool)] == bodies("b1", "c1")
    result = await stats(backend, queue)
    assert (result.depth, result.acked) == (3, 4)  # g1, b2 and plain: nobody selects them
    everyone, _ = consume(backend, queue)
    await backend.quiet()
    assert [body for body, _ in await received(backend, everyone)] == bodies("g1", "b2", "plain")


# --- 10. message groups -------------------------------------------------------------------------------


async def test_a_group_belongs_to_one_consumer_while_it_holds_a_message_of_it(backend: Harness) -> None:
    queue = queue_of(backend)
    holder, holder_consumer = consume(backend, queue, Action.IGNORE, settings=ConsumerSettings(prefetch_messages=1))
    await backend.quiet()
    await publish(
        backend, queue, msg("g1", group="g"), msg("g2", group="g"), msg("x"), msg("g3", group="g"), msg("h1", group="h")
    )
    await backend.quiet()
    assert await received(backend, holder) == [(b"g1", 1)]
    other, _ = consume(backend, queue)
    await backend.quiet()
    assert [body for body, _ in await received(backend, other)] == bodies("x", "h1")  # never "g" while held
    result = await stats(backend, queue)
    assert (result.depth, result.in_flight) == (2, 1)
    # The holder stops taking work and settles: the group is free and keeps its order.
    holder_consumer.tell(Suspend())
    await backend.quiet()
    (g1,) = (s.delivery for s in await seen(backend, holder))
    await backend.ask(holder, Send(Ack(g1.consumer_id, (g1.tag,))))
    await backend.quiet()
    assert [body for body, _ in await received(backend, other)] == bodies("x", "h1", "g2", "g3")
    assert await received(backend, holder) == [(b"g1", 1)]
    result = await stats(backend, queue)
    assert (result.depth, result.in_flight, result.acked) == (0, 0, 5)


async def test_a_stopped_group_owner_frees_its_group_for_another_consumer(backend: Harness) -> None:
    queue = queue_of(backend)
    owner, owner_consumer = consume(backend, queue, Action.IGNORE, settings=ConsumerSettings(prefetch_messages=1))
    await backend.quiet()
    await publish(backend, queue, msg("g1", group="g"), msg("g2", group="g"), msg("g3", group="g"))
    await backend.quiet()
    other, _ = consume(backend, queue)
    await backend.quiet()
    assert await received(backend, owner) == [(b"g1", 1)]
    assert await received(backend, other) == []
    backend.system.stop(owner_consumer)
    await backend.quiet()
    assert await received(backend, other) == [(b"g1", 2), (b"g2", 1), (b"g3", 1)]


async def test_a_returned_group_message_is_redelivered_before_the_rest_of_its_group(backend: Harness) -> None:
    queue = queue_of(backend)
    await publish(backend, queue, msg("g1", group="g"), msg("g2", group="g"), msg("g3", group="g"))
    client, _ = consume(backend, queue, Action.NACK, Action.ACK, settings=ConsumerSettings(prefetch_messages=1))
    await backend.quiet()
    assert await received(backend, client) == [(b"g1", 1), (b"g1", 2), (b"g2", 1), (b"g2", 2), (b"g3", 1), (b"g3", 2)]


# --- 11. max_length and overflow ----------------------------------------------------------------------


async def test_max_length_with_reject_publish_refuses_and_names_the_limit(backend: Harness) -> None:
    queue = queue_of(backend, max_length=2, overflow=Overflow.REJECT_PUBLISH)
    outcomes = await publish(backend, queue, msg("1"), msg("2"), msg("3", message_id="third"))
    assert outcomes[:2] == [Published("q", 1, ""), Published("q", 2, "")]
    refused = outcomes[2]
    assert isinstance(refused, PublishRejected)
    assert refused.message_id == "third"
    assert "max_length=2" in refused.reason
    result = await stats(backend, queue)
    assert (result.depth, result.published, result.rejected) == (2, 2, 1)
    client, _ = consume(backend, queue)
    await backend.quiet()
    assert await received(backend, client) == [(b"1", 1), (b"2", 1)]


async def test_max_length_with_drop_head_dead_letters_the_head(backend: Harness) -> None:
    dlq = queue_of(backend, "dlq")
    queue = queue_of(backend, "bounded", max_length=2, overflow=Overflow.DROP_HEAD, dead_letter=dlq)
    outcomes = await publish(backend, queue, msg("1"), msg("2"), msg("3"), msg("4"))
    assert all(isinstance(outcome, Published) for outcome in outcomes)
    result = await stats(backend, queue)
    assert (result.depth, result.published, result.dead_lettered, result.rejected) == (2, 4, 2, 0)
    client, _ = consume(backend, queue)
    dead_client, _ = consume(backend, dlq)
    await backend.quiet()
    assert await received(backend, client) == [(b"3", 1), (b"4", 1)]
    letters = [s.delivery.message for s in await seen(backend, dead_client)]
    assert [m.body for m in letters] == [b"1", b"2"]
    assert all(m.header_map()[DEAD_LETTER_REASON] == "max-length" for m in letters)
    assert all(m.header_map()[DEAD_LETTER_QUEUE] == "bounded" for m in letters)
    assert all(m.header_map()[DELIVERY_COUNT] == 0 for m in letters)


async def test_a_full_ring_with_priorities_evicts_the_least_significant_oldest_entry(backend: Harness) -> None:
    """Issue 15, item 7b: as Qpid does, the oldest entry of the lowest non-empty level goes, which can be
    the message just published; the next one to be delivered, the most important, stays."""
    dlq = queue_of(backend, "dlq", priorities=1)  # one level: its consumer sees the dead letters in their order
    queue = queue_of(backend, "ring", max_length=3, overflow=Overflow.DROP_HEAD, dead_letter=dlq)
    published = [("a", 9), ("b", 1), ("c", 5), ("d", 9), ("e", 0), ("f", 5)]
    outcomes = await publish(backend, queue, *(msg(body, priority=p) for body, p in published))
    assert all(isinstance(outcome, Published) for outcome in outcomes), "a ring queue takes every publish"
    result = await stats(backend, queue)
    assert (result.depth, result.published, result.dead_lettered) == (3, 6, 3)
    client, _ = consume(backend, queue)
    dead_client, _ = consume(backend, dlq)
    await backend.quiet()
    # d evicts b (level 1); e (level 0) evicts itself; f evicts c, the oldest of level 5.
    assert [body for body, _ in await received(backend, client)] == bodies("a", "d", "f")
    letters = [s.delivery.message for s in await seen(backend, dead_client)]
    assert [m.body for m in letters] == [b"b", b"e", b"c"]
    assert all(m.header_map()[DEAD_LETTER_REASON] == "max-length" for m in letters)


async def test_max_length_counts_ready_messages_only(backend: Harness) -> None:
    # Held messages are not "ready": a consumer holding one frees a place.
    queue = queue_of(backend, max_length=1)
    client, _ = consume(backend, queue, Action.IGNORE, settings=ConsumerSettings(prefetch_messages=1))
    await backend.quiet()
    outcomes = await publish(backend, queue, msg("1"))
    await backend.quiet()
    outcomes += await publish(backend, queue, msg("2"), msg("3"))
    assert [type(outcome) for outcome in outcomes] == [Published, Published, PublishRejected]
    assert await received(backend, client) == [(b"1", 1)]


# --- 12. consumer death ---------------------------------------------------------------------------------


async def test_a_stopped_consumer_returns_what_it_held_at_its_own_positions(backend: Harness) -> None:
    queue = queue_of(backend)
    await publish(backend, queue, *(msg(str(n)) for n in range(1, 6)))
    first, first_consumer = consume(backend, queue, Action.IGNORE, settings=ConsumerSettings(prefetch_messages=3))
    await backend.quiet()
    assert await received(backend, first) == [(b"1", 1), (b"2", 1), (b"3", 1)]
    result = await stats(backend, queue)
    assert (result.depth, result.in_flight) == (2, 3)
    backend.system.stop(first_consumer)
    result = await stats(backend, queue)
    assert (result.depth, result.in_flight, result.consumers) == (5, 0, ())
    second, _ = consume(backend, queue)
    await backend.quiet()
    assert await received(backend, second) == [(b"1", 2), (b"2", 2), (b"3", 2), (b"4", 1), (b"5", 1)]
    result = await stats(backend, queue)
    assert (result.depth, result.acked, result.redelivered) == (0, 5, 3)


async def test_a_stopped_client_ends_its_consumer_and_returns_its_messages(backend: Harness) -> None:
    queue = queue_of(backend)
    await publish(backend, queue, msg("1"), msg("2"))
    client, consumer = consume(backend, queue, Action.IGNORE)
    await backend.quiet()
    backend.system.stop(client)
    await backend.quiet()
    assert not consumer.is_alive
    result = await stats(backend, queue)
    assert (result.depth, result.in_flight, result.consumers) == (2, 0, ())


async def test_what_a_stopped_consumer_held_goes_to_a_live_lower_priority_one(backend: Harness) -> None:
    queue = queue_of(backend)
    first, first_consumer = consume(backend, queue, Action.IGNORE, settings=ConsumerSettings(prefetch_messages=2))
    second, second_consumer = consume(backend, queue, Action.ACK, settings=ConsumerSettings(priority=-1))
    await backend.quiet()
    await publish(backend, queue, msg("1"), msg("2"), msg("3"))
    await backend.quiet()
    # The first holds two (then has no credit); the lower-priority second gets the rest.
    assert await received(backend, first) == [(b"1", 1), (b"2", 1)]
    assert await received(backend, second) == [(b"3", 1)]
    backend.system.stop(first_consumer)
    await backend.quiet()
    assert await received(backend, second) == [(b"3", 1), (b"1", 2), (b"2", 2)]
    assert second_consumer.is_alive


# --- 13. consumer priority --------------------------------------------------------------------------


async def test_a_high_priority_consumer_with_credit_gets_everything(backend: Harness) -> None:
    queue = queue_of(backend)
    low, _ = consume(backend, queue, settings=ConsumerSettings(priority=0))
    high, high_consumer = consume(backend, queue, settings=ConsumerSettings(priority=5))
    await backend.quiet()
    await publish(backend, queue, *(msg(f"a{n}") for n in range(5)))
    await backend.quiet()
    assert [body for body, _ in await received(backend, high)] == bodies(*(f"a{n}" for n in range(5)))
    assert await received(backend, low) == []
    high_consumer.tell(Suspend())
    await backend.quiet()
    await publish(backend, queue, *(msg(f"b{n}") for n in range(3)))
    await backend.quiet()
    assert [body for body, _ in await received(backend, low)] == bodies("b0", "b1", "b2")
    assert len(await received(backend, high)) == 5
    result = await stats(backend, queue)
    assert {c.priority: c.acked for c in result.consumers} == {0: 3, 5: 5}


async def test_a_low_priority_consumer_gets_what_a_full_high_priority_one_cannot_take(backend: Harness) -> None:
    queue = queue_of(backend)
    low, _ = consume(backend, queue, settings=ConsumerSettings(priority=1))
    high, _ = consume(backend, queue, Action.IGNORE, settings=ConsumerSettings(priority=2, prefetch_messages=2))
    await backend.quiet()
    await publish(backend, queue, *(msg(str(n)) for n in range(5)))
    await backend.quiet()
    assert await received(backend, high) == [(b"0", 1), (b"1", 1)]
    assert [body for body, _ in await received(backend, low)] == bodies("2", "3", "4")


async def test_a_high_priority_consumer_only_reserves_what_its_selector_matches(backend: Harness) -> None:
    queue = queue_of(backend)
    high, _ = consume(backend, queue, settings=ConsumerSettings(priority=9, selector={"eq": ["colour", "red"]}))
    low, _ = consume(backend, queue, settings=ConsumerSettings(priority=0))
    await backend.quiet()
    colours = ["red", "blue", "red", "green", "blue"]
    await publish(backend, queue, *(msg(f"{c}-{n}", headers={"colour": c}) for n, c in enumerate(colours)))
    await backend.quiet()
    assert [body for body, _ in await received(backend, high)] == bodies("red-0", "red-2")
    assert [body for body, _ in await received(backend, low)] == bodies("blue-1", "green-3", "blue-4")


async def test_a_suspended_high_priority_consumer_takes_work_again_on_resume(backend: Harness) -> None:
    queue = queue_of(backend)
    low, low_consumer = consume(backend, queue, Action.IGNORE, settings=ConsumerSettings(priority=0))
    high, high_consumer = consume(backend, queue, settings=ConsumerSettings(priority=5))
    await backend.quiet()
    high_consumer.tell(Suspend())
    low_consumer.tell(Suspend())
    await backend.quiet()
    await publish(backend, queue, msg("1"), msg("2"))
    await backend.quiet()
    assert await received(backend, high) == []
    assert await received(backend, low) == []
    high_consumer.tell(Resume())
    await backend.quiet()
    assert await received(backend, high) == [(b"1", 1), (b"2", 1)]
    assert await received(backend, low) == []


# --- 13b. a notified consumer that stays silent -----------------------------------------------------


class Frozen(Actor):
    """A consumer that subscribes and then never pulls: a process frozen by a GC pause, a starved thread."""

    def __init__(self, queue: ActorRef) -> None:
        self.queue = queue
        self.notified = 0

    def on_start(self) -> None:
        self.ctx.send(self.queue, Subscribe(self.ctx.self_ref))

    def receive(self, message: object) -> None:
        if isinstance(message, NotifyWork):
            self.notified += 1  # told of work; it will never pull
        elif message == "notified?":
            self.ctx.reply(self.notified)


async def frozen_then_live(backend: Harness, **options: object) -> tuple[ActorRef, ActorRef, ActorRef]:
    """A queue whose first subscriber is frozen (front of Interested) and whose second is live."""
    queue = queue_of(backend, "handover", **options)
    frozen = backend.spawn(lambda: Frozen(queue), name="frozen")
    await backend.quiet()
    client, _ = consume(backend, queue, name="live")
    await backend.quiet()
    return queue, frozen, client


async def test_a_silent_notified_consumer_hands_its_work_on_after_the_timeout(backend: Harness) -> None:
    queue, frozen, client = await frozen_then_live(backend, hand_over_timeout_s=0.2)
    start = backend.system.now()
    await publish(backend, queue, msg("m1"))
    await backend.quiet()
    assert await backend.ask(frozen, "notified?") == 1  # one consumer told per piece of work: the front one
    await not_yet(backend, client, [])
    assert await eventually(backend, client, [(b"m1", 1)]) == [(b"m1", 1)]
    (first,) = await seen(backend, client)
    assert first.at - start >= 0.2  # passed on by the timeout, not by anything sooner
    result = await stats(backend, queue)
    assert (result.delivered, result.acked, result.depth) == (1, 1, 0)
    assert len(hand_overs_timed_out(backend)) == 1


def hand_overs_timed_out(backend: Harness) -> list[float]:
    """When the consumer manager's hand-over timer fired, read from the trace."""
    return [
        event.time
        for event in backend.trace
        if event.kind is EventKind.DELIVERED and type(event.message).__name__ == "_HandOverDue"
    ]


async def test_without_a_timeout_a_silent_notified_consumer_holds_the_work(backend: Harness) -> None:
    queue, frozen, client = await frozen_then_live(backend, hand_over_timeout_s=None)
    await publish(backend, queue, msg("m1"))
    await backend.elapse(0.4)
    assert await backend.ask(frozen, "notified?") == 1
    assert await received(backend, client) == []  # Qpid's behaviour: the work waits for the frozen one
    result = await stats(backend, queue)
    assert (result.delivered, result.depth) == (0, 1)


async def test_a_consumer_that_answers_in_time_is_not_passed_over(backend: Harness) -> None:
    queue = queue_of(backend, "prompt", hand_over_timeout_s=0.2)
    first, first_consumer = consume(backend, queue, name="first")
    await backend.quiet()
    second, second_consumer = consume(backend, queue, name="second")
    await backend.quiet()
    await publish(backend, queue, msg("m1"))
    await backend.elapse(0.5)
    await publish(backend, queue, msg("m2"))
    await backend.elapse(0.5)
    # Each publish went to the front of Interested, which pulled at once; no timeout passed
    # a second notice around, so the rotation is the plain one: first, then second.
    assert await received(backend, first) == [(b"m1", 1)]
    assert await received(backend, second) == [(b"m2", 1)]
    # The manager's timer is not cancelled when a consumer answers: it may fire, but finds every
    # hand-over answered and passes nothing on: one NotifyWork per publish, no more.
    notices = [e for e in backend.trace if e.kind is EventKind.SENT and type(e.message).__name__ == "NotifyWork"]
    assert [e.receiver for e in notices] == [first_consumer.path, second_consumer.path]
    assert len(hand_overs_timed_out(backend)) <= 2  # at most once per publish's hand-over


# --- 14. credit -------------------------------------------------------------------------------------


async def test_a_consumer_never_holds_more_than_its_message_credit(backend: Harness) -> None:
    queue = queue_of(backend)
    client, _ = consume(backend, queue, Action.IGNORE, settings=ConsumerSettings(prefetch_messages=3))
    await backend.quiet()
    await publish(backend, queue, *(msg(str(n)) for n in range(1, 8)))
    await backend.quiet()
    assert await received(backend, client) == [(b"1", 1), (b"2", 1), (b"3", 1)]
    result = await stats(backend, queue)
    assert (result.in_flight, result.depth, result.consumers[0].in_flight) == (3, 4, 3)
    first = (await seen(backend, client))[0].delivery
    await backend.ask(client, Send(Ack(first.consumer_id, (first.tag,))))
    await backend.quiet()
    assert [body for body, _ in await received(backend, client)] == bodies("1", "2", "3", "4")
    result = await stats(backend, queue)
    assert (result.in_flight, result.depth, result.acked) == (3, 3, 1)
    held = [s.delivery.tag for s in await seen(backend, client)][1:]
    await backend.ask(client, Send(Ack(first.consumer_id, tuple(held))))
    await backend.quiet()
    assert [body for body, _ in await received(backend, client)] == bodies(*(str(n) for n in range(1, 8)))
    result = await stats(backend, queue)
    assert (result.in_flight, result.depth, result.acked) == (3, 0, 4)


async def test_byte_credit_limits_what_a_consumer_holds(backend: Harness) -> None:
    queue = queue_of(backend)
    client, _ = consume(backend, queue, Action.IGNORE, settings=ConsumerSettings(prefetch_bytes=25))
    await backend.quiet()
    await publish(backend, queue, *(msg(f"{n}" * 10) for n in range(5)))  # 10 bytes each
    await backend.quiet()
    # 10 + 10 fit in 25; with 5 bytes left the consumer still wants work, and may take one more
    # message (the first of a pull may exceed the byte credit), then it has none.
    got = await received(backend, client)
    assert [body for body, _ in got] == [f"{n}".encode() * 10 for n in range(3)]
    result = await stats(backend, queue)
    assert (result.in_flight, result.depth) == (3, 2)


# --- 15. bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "pattern"),
    [
        (lambda: Message(b"x", priority=-1), r"Message\.priority must be an int from 0 to 255 .*, got -1"),
        (lambda: Message(b"x", priority=256), r"Message\.priority must be an int from 0 to 255 .*, got 256"),
        (lambda: Message(b"x", priority=True), r"Message\.priority must be an int from 0 to 255"),
        (
            lambda: Message("text"),  # type: ignore[arg-type]
            r"Message\.body must be bytes, got 'str'",
        ),
        (
            lambda: Message(bytearray(b"x")),  # type: ignore[arg-type]
            r"Message\.body must be bytes, got 'bytearray'",
        ),
        (
            lambda: Message(b"x", headers={1: "a"}),  # type: ignore[arg-type]
            r"Message\.headers must be keyed by non-empty str, got 1",
        ),
        (
            lambda: Message(b"x", headers={"k": [1]}),  # type: ignore[arg-type]
            r"Message\.headers\['k'\] must be a str, int from -2\*\*63 to 2\*\*63-1, finite float or bool",
        ),
        (lambda: Message(b"x", ttl_s=0), r"Message\.ttl_s must be None or a finite number of seconds > 0, got 0"),
        (lambda: Message(b"x", delay_s=-1.0), r"Message\.delay_s must be None or a finite number of seconds >= 0"),
        (lambda: Message(b"x", group=""), r"Message\.group must be None or a non-empty str"),
        (lambda: QueueConfig("q", priorities=0), r"QueueConfig\.priorities must be an int from 1 to 10, got 0"),
        (lambda: QueueConfig("q", priorities=11), r"QueueConfig\.priorities must be an int from 1 to 10, got 11"),
        (lambda: QueueConfig(""), r"QueueConfig\.name must be a non-empty str"),
        (lambda: QueueConfig("q", ack_deadline_s=0), r"QueueConfig\.ack_deadline_s must be .* > 0, got 0"),
        (lambda: QueueConfig("q", max_deliveries=0), r"QueueConfig\.max_deliveries must be an int >= 1, got 0"),
        (lambda: QueueConfig("q", max_length=0), r"QueueConfig\.max_length must be an int >= 1, got 0"),
        (
            lambda: QueueConfig("q", overflow="drop-head"),  # type: ignore[arg-type]
            r"'overflow' must be <enum 'Overflow'>",
        ),
        (
            lambda: QueueConfig("q", retry=0.5),  # type: ignore[arg-type]
            r"QueueConfig\.retry must be None or a RetryPolicy, got 0\.5",
        ),
        (
            lambda: QueueConfig("q", dead_letter="dlq"),  # type: ignore[arg-type]
            r"QueueConfig\.dead_letter must be None or the ActorRef",
        ),
        (
            lambda: QueueConfig("q", hand_over_timeout_s=0),
            r"QueueConfig\.hand_over_timeout_s must be None \(wait for a notified consumer forever, as Qpid does\) "
            r"or a finite number of seconds > 0, got 0",
        ),
        (
            lambda: QueueConfig("q", hand_over_timeout_s=float("inf")),
            r"QueueConfig\.hand_over_timeout_s must be None .* > 0, got inf",
        ),
        (
            lambda: QueueConfig("q", hand_over_timeout_s="1s"),  # type: ignore[arg-type]
            r"QueueConfig\.hand_over_timeout_s must be None .* > 0, got '1s'",
        ),
        (
            lambda: ConsumerManagerActor(None, hand_over_timeout_s=-1),  # type: ignore[arg-type]
            r"ConsumerManagerActor\.hand_over_timeout_s must be None .* > 0, got -1",
        ),
        (
            lambda: RetryPolicy(min_backoff_s=2.0, max_backoff_s=1.0),
            r"RetryPolicy\.max_backoff_s must be >= min_backoff_s \(2\.0\), got 1\.0",
        ),
        (lambda: RetryPolicy(min_backoff_s=-1.0), r"RetryPolicy\.min_backoff_s must be a finite number of seconds"),
        (
            lambda: ModifyAckDeadline(1, (1,), 601),
            r"ModifyAckDeadline\.seconds must be a number from 0 to 600, got 601",
        ),
        (lambda: Ack(1, (0,)), r"Ack\.tags must be delivery tags \(ints >= 1\), got 0"),
        (
            lambda: Ack(1, (1, 2), attempts=(1,)),
            r"Ack\.attempts must be empty or one delivery_count per tag \(2\), got \(1,\)",
        ),
        (
            lambda: Ack(1, (1,), attempts=(0,)),
            r"Ack\.attempts must be delivery counts \(ints >= 1\), one per tag, got 0",
        ),
        (lambda: Nack(1, (1,), delay_s=-1), r"Nack\.delay_s must be None or a finite number of seconds >= 0"),
        (
            lambda: Nack(1, (1, 2), attempts=(1,)),
            r"Nack\.attempts must be empty or one delivery_count per tag \(2\), got \(1,\)",
        ),
        (
            lambda: Nack(1, (1,), attempts=(0,)),
            r"Nack\.attempts must be delivery counts \(ints >= 1\), one per tag, got 0",
        ),
        (
            lambda: Nack(1, (1,), attempts=("2",)),  # type: ignore[arg-type]
            r"Nack\.attempts must be delivery counts",
        ),
        (
            lambda: Release(1, ("1",)),  # type: ignore[arg-type]
            r"Release\.tags must be delivery tags",
        ),
        (lambda: PublishBatch(()), r"PublishBatch\.messages must be a non-empty sequence of Message"),
        (
            lambda: Publish(b"x"),  # type: ignore[arg-type]
            r"Publish\.message must be a Message, got b'x'",
        ),
        (lambda: ConsumerSettings(prefetch_messages=0), r"ConsumerSettings\.prefetch_messages must be an int >= 1"),
        (lambda: ConsumerSettings(prefetch_bytes=-5), r"ConsumerSettings\.prefetch_bytes must be an int >= 1, got -5"),
        (
            lambda: ConsumerSettings(priority="high"),  # type: ignore[arg-type]
            r"ConsumerSettings\.priority must be an int \(higher is served first\), got 'high'",
        ),
        (
            lambda: ConsumerSettings(acquiring="no"),  # type: ignore[arg-type]
            r"ConsumerSettings\.acquiring must be a bool \(False for a browser\), got 'no'",
        ),
    ],
)
def test_bad_values_raise_naming_the_field_and_the_allowed_values(build: object, pattern: str) -> None:
    assert callable(build)
    with pytest.raises((ValueError, TypeError), match=pattern):
        build()


HUGE = 10**5000
"""An int Python refuses to print (past its 4300-digit limit): an error quotes its first digits."""
HUGE_QUOTED_TEXT = "got 10000000000000000000... (5001 digits)"


@pytest.mark.parametrize(
    ("build", "pattern"),
    [
        (
            lambda: Message(b"x", headers=1.5),  # type: ignore[arg-type]
            r"Message\.headers must be a mapping of str to str/int/float/bool or an iterable of "
            r"\(key, value\) pairs, got 1\.5",
        ),
        (
            lambda: Message(b"x", headers=[("a", "b", "c")]),  # type: ignore[list-item]
            r"Message\.headers must be a mapping of str to str/int/float/bool or an iterable of "
            r"\(key, value\) pairs, got \[\('a', 'b', 'c'\)\]",
        ),
        (
            lambda: Ack(1, 1.5),  # type: ignore[arg-type]
            r"Ack\.tags must be an iterable of delivery tags \(ints >= 1\), got 1\.5",
        ),
        (
            lambda: Nack(1, 1.5),  # type: ignore[arg-type]
            r"Nack\.tags must be an iterable of delivery tags \(ints >= 1\), got 1\.5",
        ),
        (
            lambda: Nack(1, (1,), attempts=1.5),  # type: ignore[arg-type]
            r"Nack\.attempts must be an iterable of delivery counts \(ints >= 1\), one per tag, got 1\.5",
        ),
        (
            lambda: Release(1, None),  # type: ignore[arg-type]
            r"Release\.tags must be an iterable of delivery tags \(ints >= 1\), got None",
        ),
        (
            lambda: ModifyAckDeadline(1, 7),  # type: ignore[arg-type]
            r"ModifyAckDeadline\.tags must be an iterable of delivery tags \(ints >= 1\), got 7",
        ),
        (
            lambda: PublishBatch(1.5),  # type: ignore[arg-type]
            r"PublishBatch\.messages must be a non-empty sequence of Message, got 1\.5",
        ),
        (lambda: Message(b"x", priority=-HUGE), r"Message\.priority must be an int from 0 to 255 .*, got -1000+\.\.\."),
        (lambda: Message(b"x", ttl_s=HUGE), r"Message\.ttl_s must be None or a finite number of seconds > 0, "),
        (lambda: Message(b"x", delay_s=HUGE), r"Message\.delay_s must be None or a finite number .*, "),
        (
            lambda: Message(b"x", headers={"n": HUGE}),
            r"Message\.headers\['n'\] must be a str, int from -2\*\*63 to 2\*\*63-1, finite float or bool, ",
        ),
        (lambda: Ack(1, (-HUGE,)), r"Ack\.tags must be delivery tags \(ints >= 1\), got -1000+\.\.\. \(5001 digits"),
        (lambda: ModifyAckDeadline(1, (1,), HUGE), r"ModifyAckDeadline\.seconds must be a number from 0 to 600, "),
        (lambda: QueueConfig("q", priorities=HUGE), r"QueueConfig\.priorities must be an int from 1 to 10, "),
        (lambda: QueueConfig("q", ack_deadline_s=HUGE), r"QueueConfig\.ack_deadline_s must be .*, "),
        (lambda: QueueConfig("q", max_length=-HUGE), r"QueueConfig\.max_length must be an int >= 1, got -1000+"),
        (lambda: QueueConfig("q", hand_over_timeout_s=HUGE), r"QueueConfig\.hand_over_timeout_s must be .*, "),
        (lambda: RetryPolicy(max_backoff_s=HUGE), r"RetryPolicy\.max_backoff_s must be a finite number .*, "),
        (lambda: Nack(1, (1,), delay_s=HUGE), r"Nack\.delay_s must be None or a finite number .*, "),
        (lambda: ConsumerSettings(prefetch_messages=-HUGE), r"ConsumerSettings\.prefetch_messages must be .*, got -1"),
        (lambda: ConsumerSettings(selector={"exists": HUGE}), r"selector\.exists: .*, "),
    ],
)
def test_a_value_that_cannot_be_iterated_or_printed_gets_the_same_clear_error(build: object, pattern: str) -> None:
    """Issue 15, item 7e: a non-iterable where an iterable belongs, and an int too long for Python to print."""
    assert callable(build)
    try:
        build()
    except (ValueError, TypeError) as error:
        text = str(error)
        assert re.search(pattern, text), text
        if pattern.endswith(", "):  # the bad value is 10**5000, quoted by its first digits
            assert text.endswith(HUGE_QUOTED_TEXT), text
        assert len(text) < 300, "the bad value is quoted by a short prefix"
    else:
        pytest.fail(f"nothing raised; expected {pattern}")


@pytest.mark.parametrize(
    ("selector", "pattern"),
    [
        ({"eq": ["colour"]}, r"^selector\.eq: expected \[key, value\]"),
        ({"and": [{"eq": ["a", 1]}, {"eq": [1, 2]}]}, r"^selector\.and\[1\]\.eq\[0\]: the key must be a non-empty str"),
        ({"or": [{"in": ["a", [[1]]]}]}, r"^selector\.or\[0\]\.in"),
        ({"not": {"like": ["a", "%"]}}, r"^selector\.not: unknown operator 'like'; expected one of"),
        ({"eq": ["a", 1], "exists": "b"}, r"^selector: expected exactly one operator per dict, got 2"),
        ("colour = 'red'", r"^selector: expected a selector"),
    ],
)
def test_a_malformed_selector_is_refused_naming_its_path(selector: object, pattern: str) -> None:
    with pytest.raises(SelectorError, match=pattern):
        ConsumerSettings(selector=selector)


def test_queue_config_refuses_a_missing_ack_deadline() -> None:
    with pytest.raises(ValueError, match=r"QueueConfig\.ack_deadline_s must be"):
        QueueConfig("q", ack_deadline_s=None)  # type: ignore[arg-type]


@pytest.mark.parametrize("lease_s", [0, -1.0, float("inf"), float("nan"), "10", True])
def test_a_consumer_lease_must_be_none_or_a_positive_finite_number_of_seconds(lease_s: object) -> None:
    with pytest.raises(ValueError, match=r"ConsumerSettings\.lease_s must be None or a finite number of seconds > 0"):
        ConsumerSettings(lease_s=lease_s)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"Subscribe\.lease_s must be None or a finite number of seconds > 0"):
        Subscribe(ActorRef.__new__(ActorRef), lease_s=lease_s)  # type: ignore[arg-type]


def test_retry_policy_refuses_a_missing_backoff_naming_the_field() -> None:
    with pytest.raises(ValueError, match=r"RetryPolicy\.min_backoff_s must be"):
        RetryPolicy(min_backoff_s=None)  # type: ignore[arg-type]


def test_publish_and_headers_refuse_values_that_would_mislead() -> None:
    with pytest.raises(ValueError, match=r"Publish\.immediate must be True or False, got 'yes'"):
        Publish(Message(b"x"), immediate="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"headers\['x'\] must be a str, int from .*, finite float or bool, got nan"):
        Message(b"x", headers={"x": float("nan")})


def test_a_consumer_needs_a_queue_ref_and_a_client() -> None:
    with pytest.raises(TypeError, match="ConsumerActor queue must be an ActorRef, got str"):
        ConsumerActor("q", print)  # type: ignore[arg-type]


async def test_an_oversize_message_is_rejected_naming_the_limit(backend: Harness) -> None:
    queue = queue_of(backend, max_message_bytes=10)
    big = msg("x" * 8, headers={"ab": "cd"}, message_id="big")  # 8 + 2 + 2 = 12 bytes
    refused = await backend.ask(queue, Publish(big))
    assert isinstance(refused, PublishRejected)
    assert refused.message_id == "big"
    assert "12 bytes" in refused.reason
    assert "max_message_bytes=10" in refused.reason
    fits = await backend.ask(queue, Publish(msg("y" * 10)))
    assert fits == Published("q", 1, "")
    outcome = await backend.ask(queue, PublishBatch((msg("a"), big, msg("b"))))
    assert [type(o) for o in outcome.outcomes] == [Published, PublishRejected, Published]
    result = await stats(backend, queue)
    assert (result.depth, result.published, result.rejected) == (3, 3, 2)


async def test_a_subscribe_with_a_bad_selector_never_reaches_the_queue(backend: Harness) -> None:
    queue = queue_of(backend)
    with pytest.raises(SelectorError, match=r"selector\.in\[1\]: expected a list of values, got 'red'"):
        Subscribe(queue, selector={"in": ["colour", "red"]})
    result = await stats(backend, queue)
    assert result.consumers == ()


# --- 16. callback clients ------------------------------------------------------------------------

CALLS: deque[tuple[bytes, int]] = deque()  # appended from job threads; deque.append is thread-safe


def handle(delivery: Delivery) -> str:
    """A plain callback: records the call; fails a first delivery of a "fail" message (a nack)."""
    CALLS.append((delivery.message.body, delivery.delivery_count))
    if delivery.message.body == b"fail" and delivery.delivery_count == 1:
        text = f"cannot handle {delivery.message.body!r} yet"
        raise RuntimeError(text)
    return "done"


async def test_a_callback_client_acks_on_return_and_nacks_on_raise(backend: Harness) -> None:
    CALLS.clear()
    queue = queue_of(backend)
    consumer = backend.spawn(lambda: ConsumerActor(queue, handle))
    await backend.quiet()
    await publish(backend, queue, msg("ok-1"), msg("fail"), msg("ok-2"))
    await backend.elapse(0.3)  # jobs take (virtual) time in the simulator
    calls = list(CALLS)
    assert sorted(calls) == sorted([(b"ok-1", 1), (b"fail", 1), (b"fail", 2), (b"ok-2", 1)])
    assert calls.index((b"fail", 1)) < calls.index((b"fail", 2))
    result = await stats(backend, queue)
    assert (result.depth, result.in_flight, result.delivered, result.redelivered, result.acked) == (0, 0, 4, 1, 3)
    assert consumer.is_alive


def redeliver_never(delivery: Delivery) -> None:
    """A callback that always fails."""
    text = f"broken handler for tag {delivery.tag}"
    raise ValueError(text)


async def test_a_callback_that_always_fails_ends_in_the_dead_letter_queue(backend: Harness) -> None:
    dlq = queue_of(backend, "dlq")
    queue = queue_of(backend, "work", max_deliveries=2, dead_letter=dlq)
    backend.spawn(lambda: ConsumerActor(queue, redeliver_never))
    await backend.quiet()
    await publish(backend, queue, msg("x"))
    await backend.elapse(0.3)
    result = await stats(backend, queue)
    assert (result.depth, result.delivered, result.dead_lettered, result.acked) == (0, 2, 1, 0)
    assert (await stats(backend, dlq)).depth == 1


# --- the broker's registry ---------------------------------------------------------------------------


async def test_the_broker_declares_finds_and_refuses_unknown_queues(backend: Harness) -> None:
    from conveyor.actors.broker import BrokerActor, DeclareQueue, LookupQueue, PublishTo, QueueDeclared, Refused

    broker = backend.spawn(BrokerActor, name="broker")
    declared = await backend.ask(broker, DeclareQueue(QueueConfig("orders")))
    assert isinstance(declared, QueueDeclared) and declared.ref.path == "/broker/orders"
    assert await backend.ask(broker, DeclareQueue(QueueConfig("orders"))) == declared  # idempotent
    clash = await backend.ask(broker, DeclareQueue(QueueConfig("orders", priorities=2)))
    assert clash == Refused("DeclareQueue", "queue 'orders' exists with another configuration")
    assert await backend.ask(broker, LookupQueue("orders")) == declared
    unknown = await backend.ask(broker, LookupQueue("ordres"))
    assert unknown == Refused("LookupQueue", "unknown queue 'ordres'; declared queues: orders")
    assert await backend.ask(broker, PublishTo("nope", msg("x"))) == Refused(
        "PublishTo", "unknown queue 'nope'; declared queues: orders"
    )
    broker.tell(PublishTo("orders", msg("x")))
    await backend.quiet()
    assert (await stats(backend, declared.ref)).depth == 1
