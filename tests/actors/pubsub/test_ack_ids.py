"""Ack ids name their subscription, generation, delivery and message, sealed so nobody can forge one.

Google's unmodified client plays the forgeries users found: another subscription's id, an id of a
deleted subscription, and ten thousand guesses. In each, the messages the other client holds must
stay held: its own nack still returns them (an ack taken by a forged id would have settled them).
The stale nack, whose delivery was given out again under the same tag, runs in the simulator on
virtual time (a lease lapses without waiting).
"""

from __future__ import annotations

import contextlib
import itertools
from typing import Any

import pytest
from google.api_core import exceptions
from google.cloud import pubsub_v1
from hypothesis import given
from hypothesis import strategies as st

from conveyor.actors.pubsub import AckId, AckIdCodec
from conveyor.actors.pubsub._ackid import MAX_ACK_ID_CHARS, AckIdReader, looks_like_ack_id
from conveyor.actors.pubsub._model import (
    Batch,
    NextBatch,
    OpenStream,
    Publish,
    PubMessage,
    Settle,
    SettleKind,
    SettleOutcome,
    StreamOpened,
    StreamSettings,
)
from tests.actors.pubsub.helpers import SIM_KEY, pull_exactly, pull_nothing, simulated_front, subscription, topic

KEY = SIM_KEY


# --- the codec ----------------------------------------------------------------------------------


ids = st.builds(AckId, *(st.integers(0, 2**40) for _ in range(5)), st.text("0123456789-abc", min_size=1, max_size=20))


@given(ids)
def test_an_issued_id_reads_back_as_the_delivery_it_names(ack_id: AckId) -> None:
    codec = AckIdCodec(KEY)
    assert codec.read(codec.issue(ack_id)) == ack_id


@given(ids, st.data())
def test_any_changed_character_or_another_key_makes_an_id_unreadable(ack_id: AckId, data: st.DataObject) -> None:
    codec = AckIdCodec(KEY)
    text = codec.issue(ack_id)
    index = data.draw(st.integers(0, len(text) - 1))
    replacement = data.draw(st.sampled_from("0123456789abcdef-.x").filter(lambda c: c != text[index]))
    assert codec.read(text[:index] + replacement + text[index + 1:]) is None
    assert AckIdCodec(bytes(32)).read(text) is None


def _has_the_shape(text: str) -> bool:
    """An ack id's shape, spelled out: five non-empty decimal fields, a message id, a dot, 24 characters."""
    body, dot, seal = text.rpartition(".")
    parts = body.split("-", 5)
    return (len(text) <= MAX_ACK_ID_CHARS and bool(dot) and len(seal) == 24 and len(parts) == 6
            and all(part.isdecimal() for part in parts[:-1]))


_FIELD = st.sampled_from(["", "0", "12", "\u0663", "a", "+1"])
_SEAL = "." + "f" * 24
_SHAPES = st.tuples(st.lists(_FIELD, min_size=5, max_size=5) | st.lists(_FIELD, min_size=4, max_size=6),
                    st.sampled_from(["m", "m-1", "", "x.y"]),
                    st.sampled_from([_SEAL, _SEAL, ".abc", "", "." + "f" * 23, "." + "\u0663" * 24]))


@given(_SHAPES.map(lambda shape: "-".join([*shape[0], shape[1]]) + shape[2]))
def test_the_shape_of_an_id_is_five_decimal_fields_a_message_id_and_a_seal(text: str) -> None:
    assert looks_like_ack_id(text) == _has_the_shape(text)


def test_a_key_must_be_bytes_of_a_usable_length() -> None:
    with pytest.raises(ValueError, match=r"AckIdCodec.key must be bytes, 16 to 64 of them, got 4 bytes"):
        AckIdCodec(b"weak")
    with pytest.raises(ValueError, match="got str"):
        AckIdCodec("x" * 32)  # type: ignore[arg-type]


# --- forgeries through Google's client -------------------------------------------------------------


def still_held(client: pubsub_v1.SubscriberClient, name: str, received: list[Any]) -> None:
    """Nack ``received`` with their own ids: each comes back, so no forged id settled it."""
    client.modify_ack_deadline(subscription=name, ack_ids=[m.ack_id for m in received], ack_deadline_seconds=0)
    again = pull_exactly(client, name, len(received))
    assert sorted(m.message.message_id for m in again) == sorted(m.message.message_id for m in received)


@pytest.mark.parametrize("exactly_once", [False, True], ids=["plain", "exactly-once"])
def test_an_ack_id_of_another_subscription_settles_nothing(
    publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient, exactly_once: bool
) -> None:
    publisher.create_topic(name=topic("shared"))
    for name in ("mine", "theirs"):
        subscriber.create_subscription(request={"name": subscription(name), "topic": topic("shared"),
                                                "enable_exactly_once_delivery": exactly_once})
    publisher.publish(topic("shared"), b"one").result(10)
    mine = pull_exactly(subscriber, subscription("mine"), 1)
    (theirs,) = pull_exactly(subscriber, subscription("theirs"), 1)
    assert theirs.message.message_id == mine[0].message.message_id  # same message, same binding and tag
    if exactly_once:
        with pytest.raises(exceptions.InvalidArgument, match="no longer valid"):
            subscriber.acknowledge(subscription=subscription("mine"), ack_ids=[theirs.ack_id])
        with pytest.raises(exceptions.InvalidArgument, match="no longer valid"):
            subscriber.modify_ack_deadline(subscription=subscription("mine"), ack_ids=[theirs.ack_id],
                                           ack_deadline_seconds=0)
    else:  # ignored, as Pub/Sub ignores an ack id it does not know
        subscriber.acknowledge(subscription=subscription("mine"), ack_ids=[theirs.ack_id])
        subscriber.modify_ack_deadline(subscription=subscription("mine"), ack_ids=[theirs.ack_id],
                                       ack_deadline_seconds=0)
    assert pull_nothing(subscriber, subscription("mine")) == []  # the forged nack returned nothing either
    still_held(subscriber, subscription("mine"), mine)
    # Nor did the forged ack mark the message acked in the Seek log: a Seek back to before it replays it.
    subscriber.seek(request={"subscription": subscription("mine"), "time": {"seconds": 0}})
    assert [m.message.data for m in pull_exactly(subscriber, subscription("mine"), 1)] == [b"one"]


def test_an_ack_id_of_a_deleted_subscription_settles_nothing_on_the_new_one(
    publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient
) -> None:
    publisher.create_topic(name=topic("reborn"))
    subscriber.create_subscription(name=subscription("reborn-sub"), topic=topic("reborn"))
    publisher.publish(topic("reborn"), b"before").result(10)
    (old,) = pull_exactly(subscriber, subscription("reborn-sub"), 1)
    subscriber.delete_subscription(subscription=subscription("reborn-sub"))
    subscriber.create_subscription(name=subscription("reborn-sub"), topic=topic("reborn"))
    publisher.publish(topic("reborn"), b"after").result(10)
    new = pull_exactly(subscriber, subscription("reborn-sub"), 1)
    subscriber.acknowledge(subscription=subscription("reborn-sub"), ack_ids=[old.ack_id])
    still_held(subscriber, subscription("reborn-sub"), new)


def guesses(received: list[Any]) -> list[str]:
    """Ten thousand ids a client could make up: the old layout's and the new one's with a made-up seal."""
    message_id = received[0].message.message_id
    old_layout = [f"{binding}-{epoch}-{tag}-{message_id}"
                  for binding, epoch, tag in itertools.product(range(1, 51), range(2), range(1, 51))]
    prefix = received[0].ack_id.rpartition(".")[0].split("-")
    new_layout = [f"{prefix[0]}-0-{binding}-{tag}-1-{m.message.message_id}.{n:024x}"
                  for n, (binding, tag, m) in enumerate(itertools.product(range(1, 6), range(1, 51), received))]
    return old_layout + new_layout


def test_ten_thousand_guessed_ack_ids_settle_nothing(
    publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient
) -> None:
    publisher.create_topic(name=topic("guessed"))
    subscriber.create_subscription(name=subscription("guessed-sub"), topic=topic("guessed"), ack_deadline_seconds=60)
    for n in range(20):
        publisher.publish(topic("guessed"), f"m{n}".encode()).result(10)
    held = pull_exactly(subscriber, subscription("guessed-sub"), 20)
    made_up = guesses(held)
    assert len(made_up) == 10_000
    for start in range(0, len(made_up), 500):
        chunk = made_up[start:start + 500]
        with contextlib.suppress(exceptions.InvalidArgument):  # an id not shaped as one refuses the whole call
            subscriber.acknowledge(subscription=subscription("guessed-sub"), ack_ids=chunk)
    still_held(subscriber, subscription("guessed-sub"), held)


# --- a stale nack, on virtual time ---------------------------------------------------------------


def test_a_nack_for_an_earlier_delivery_leaves_the_later_one_under_the_same_tag_alone() -> None:
    sim, registry, name = simulated_front(3, "lapsing", exactly_once=True)
    sim.ask(registry, Publish(topic("lapsing"), (PubMessage(b"x", publish_time_ns=1),)))
    opened: StreamOpened = sim.ask(registry, OpenStream(StreamSettings(name, 10, 0, 0)))
    first: Batch = sim.ask(opened.binding, NextBatch(1.0))
    ((stale_id, _, stale_attempt),) = first.received
    # The lease lapses and the queue gives the message out again, under the same tag.
    second: Batch = sim.ask(opened.binding, NextBatch(30.0), timeout=60.0)
    ((current_id, _, current_attempt),) = second.received
    assert (stale_attempt, current_attempt) == (1, 2)
    assert AckIdCodec(KEY).read(stale_id).tag == AckIdCodec(KEY).read(current_id).tag  # type: ignore[union-attr]
    nacked = sim.ask(registry, Settle(name, SettleKind.MODACK, (stale_id,), 0))
    assert nacked == SettleOutcome(())
    acked = sim.ask(registry, Settle(name, SettleKind.ACK, (current_id,)))
    assert acked == SettleOutcome(())  # the stale nack did not take the current delivery back


def test_an_ack_id_sent_twice_in_one_call_acks_once_and_breaks_nothing(
    publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient
) -> None:
    publisher.create_topic(name=topic("twice"))
    subscriber.create_subscription(request={"name": subscription("twice-sub"), "topic": topic("twice"),
                                            "enable_exactly_once_delivery": True})
    publisher.publish(topic("twice"), b"once").result(10)
    (received,) = pull_exactly(subscriber, subscription("twice-sub"), 1)
    subscriber.acknowledge(subscription=subscription("twice-sub"), ack_ids=[received.ack_id, received.ack_id],
                           timeout=10)  # confirmed: both copies name a delivery that was held
    publisher.publish(topic("twice"), b"next").result(10)
    assert [m.message.data for m in pull_exactly(subscriber, subscription("twice-sub"), 1)] == [b"next"]
    assert pull_nothing(subscriber, subscription("twice-sub")) == []


def test_an_exactly_once_ack_sent_again_after_its_pull_ended_is_confirmed_again(
    publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient
) -> None:
    # Google's client sends again every id an error marked transient; the Pull that delivered it has
    # ended once nothing it gave out is held, yet the repeated ack must not be reported as refused.
    publisher.create_topic(name=topic("again"))
    subscriber.create_subscription(request={"name": subscription("again-sub"), "topic": topic("again"),
                                            "enable_exactly_once_delivery": True})
    publisher.publish(topic("again"), b"once").result(10)
    (received,) = pull_exactly(subscriber, subscription("again-sub"), 1)
    subscriber.acknowledge(subscription=subscription("again-sub"), ack_ids=[received.ack_id])
    publisher.publish(topic("again"), b"next").result(10)
    pull_exactly(subscriber, subscription("again-sub"), 1)  # the server has moved on; the first Pull is over
    subscriber.acknowledge(subscription=subscription("again-sub"), ack_ids=[received.ack_id])


@given(st.lists(st.tuples(st.sampled_from(["read", "take", "learn"]), st.integers(0, 5), st.booleans()),
                max_size=40),
       st.integers(0, 3))
def test_a_reader_answers_as_its_codec_and_remembers_at_most_its_capacity(
    steps: list[tuple[str, int, bool]], capacity: int
) -> None:
    """Whatever it verified, took or learned at issue (``learn``, a binding's ``_Issued``), it answers as the codec."""
    codec = AckIdCodec(KEY)
    delivered = [AckId(1, 0, 2, tag, 1, str(tag)) for tag in range(6)]
    issued = [codec.issue(ack_id) for ack_id in delivered]
    reader = AckIdReader(codec, capacity)
    for action, index, forged in steps:
        text = issued[index][:-1] + ("0" if issued[index][-1] != "0" else "1") if forged else issued[index]
        if action == "learn":  # a batch of issued ids from this one on (never a forged text: only issues)
            reader.learn(issued[index:], delivered[index:])
            assert len(reader) <= capacity
            continue
        got = reader.read(text) if action == "read" else reader.take(text)
        assert got == codec.read(text)
        assert len(reader) <= capacity
    assert AckIdReader(AckIdCodec(bytes(32)), capacity).read(issued[0]) is None, "another key's reader verifies"


def test_a_reader_refuses_a_negative_capacity() -> None:
    with pytest.raises(ValueError, match="capacity must be an int >= 0"):
        AckIdReader(AckIdCodec(KEY), -1)
