"""A stream's binding takes each pull of its broker consumer whole (``ConsumerActor(batches=True)``).

What must hold: a stream hands out every message once, in publish order per ordering key, whatever
batches its consumer passes it; a detached stream gives back a batch that arrives after it detached.
Run on the simulator's clock.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from conveyor.actors.broker import Delivered
from conveyor.actors.pubsub import (
    Batch,
    Failed,
    NextBatch,
    OpenStream,
    Publish,
    PubMessage,
    StreamOpened,
    StreamSettings,
)
from tests.actors.pubsub.helpers import simulated_front, topic


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=8), min_size=1, max_size=4), st.integers(min_value=1, max_value=3))
def test_a_stream_hands_out_every_message_once_in_publish_order_per_key(publishes: list[int], keys: int) -> None:
    sim, registry, name = simulated_front(7, "batched", ack_deadline_s=60, enable_message_ordering=True)
    stream: StreamOpened = sim.ask(registry, OpenStream(StreamSettings(name, 60, 1000, 0)))
    number = 0
    for count in publishes:
        messages = []
        for _ in range(count):
            messages.append(PubMessage(b"%d" % number, ordering_key=f"k{number % keys}", publish_time_ns=1))
            number += 1
        sim.ask(registry, Publish(topic("batched"), tuple(messages)))
    seen: list[bytes] = []
    while len(seen) < number:
        batch: Batch = sim.ask(stream.binding, NextBatch(1.0))
        assert batch.received, f"the stream stalled after {len(seen)} of {number} messages"
        seen.extend(message.data for _, message, _ in batch.received)
    assert sorted(seen, key=int) == [b"%d" % n for n in range(number)], "every message once"
    for key in range(keys):
        ordered = [int(data) for data in seen if int(data) % keys == key]
        assert ordered == sorted(ordered), f"key k{key} in publish order"
    batches = [event.message for event in sim.trace if type(event.message) is Delivered
               and (event.receiver or "").rsplit("/", 1)[-1].startswith("binding-")]
    if max(publishes) > 1:
        assert batches, "the consumer passed a pull of several as one message"


def test_a_stream_response_holds_at_most_stream_response_max_messages_and_the_rest_follows_at_once() -> None:
    """A client's first messages go out before the server has made the rest: 1,200 ready go as 500, 500, 200."""
    from conveyor.actors.pubsub import STREAM_RESPONSE_MAX

    sim, registry, name = simulated_front(7, "capped", ack_deadline_s=60)
    stream: StreamOpened = sim.ask(registry, OpenStream(StreamSettings(name, 60, 5000, 0)))
    total = 2 * STREAM_RESPONSE_MAX + 200
    for first in range(0, total, 400):  # a Publish carries at most 1,000 messages
        published = sim.ask(registry, Publish(topic("capped"), tuple(
            PubMessage(b"%d" % n, publish_time_ns=1) for n in range(first, min(total, first + 400)))))
        assert not isinstance(published, Failed), published
    sizes = []
    seen: list[bytes] = []
    while len(seen) < total:
        batch: Batch = sim.ask(stream.binding, NextBatch(1.0))
        assert batch.received, f"the stream stalled after {len(seen)} of {total} messages"
        sizes.append(len(batch.received))
        seen.extend(message.data for _, message, _ in batch.received)
    assert sizes == [STREAM_RESPONSE_MAX, STREAM_RESPONSE_MAX, 200]
    assert seen == [b"%d" % n for n in range(total)]
