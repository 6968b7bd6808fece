"""A StreamingPull that ends while the server makes its next batch gives that batch back at once.

The batch's messages were leased to a stream nobody reads any more: sent into it, they would wait
out the stream's ack deadline (60 s here) before anyone else could have them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from google.cloud import pubsub_v1
from google.pubsub_v1 import types

from conveyor.actors.pubsub import PubSubServer
from tests.actors.pubsub.helpers import pull_exactly, subscription, topic


class EndsAfterOneLook:
    """A servicer context whose stream is active at the first look and ended at every later one."""

    def __init__(self) -> None:
        self.looks = 0

    def is_active(self) -> bool:
        self.looks += 1
        return self.looks == 1

    def add_callback(self, callback: Any) -> bool:
        return True

    def abort(self, code: Any, details: str) -> None:
        raise AssertionError(f"aborted: {code} {details}")


def test_a_batch_made_after_its_stream_ended_is_given_back_at_once(
        pubsub_server: PubSubServer, publisher: pubsub_v1.PublisherClient,
        subscriber: pubsub_v1.SubscriberClient) -> None:
    publisher.create_topic(name=topic("ending"))
    subscriber.create_subscription(request={"name": subscription("ending-sub"), "topic": topic("ending"),
                                            "ack_deadline_seconds": 60})
    publisher.publish(topic("ending"), b"late").result(10)
    first = types.StreamingPullRequest(subscription=subscription("ending-sub"), stream_ack_deadline_seconds=60)
    done = threading.Event()

    def requests() -> Iterator[Any]:
        yield types.StreamingPullRequest.pb(first)
        done.wait(30)  # the client sends nothing more, and does not half-close, until the test ends

    context = EndsAfterOneLook()
    try:
        sent = list(pubsub_server._streaming_pull(requests(), context))
    finally:
        done.set()
    assert sent == [], "nothing is sent on a stream that ended"
    assert context.looks == 2, "the batch was made while the stream was active, and looked at again before it went"
    assert [m.message.data for m in pull_exactly(subscriber, subscription("ending-sub"), 1, rounds=2)] == [b"late"]
