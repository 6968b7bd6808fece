"""The crash test's client process for ``conveyor serve --data-dir``: Google's official client.

``work`` mode publishes (each confirm is the publish future's result; no retry, so a publish is
sent once; one of four ordering keys each, on a subscription with message ordering) and consumes
with acks until the parent kills it (and the server): half the lives by sync pull and acknowledge,
half by streaming pull (``subscribe``) with ``ack_with_response``. ``drain`` mode only pulls,
until pulls come back empty. The subscription has exactly-once delivery: an acknowledge that
returns, or an ack future that resolves, is answered only after the ack is synced, so it is
recorded as a confirmed ack (one that fails is not). Every step goes to the history file first
(``tests/crash/history.py``).

Run as ``python -m tests.crash.pubsub_client --address HOST:PORT --history H --run N --mode work|drain``;
it prints ``ready`` once the topic and the subscription exist.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import threading
import time
from typing import Any

from google.api_core import exceptions
from google.cloud import pubsub_v1

from .history import AckConfirmed, AckSent, Confirmed, HistoryWriter, PublishFailed, Received, Sent, Started

TOPIC = "projects/crash/topics/crash"
SUBSCRIPTION = "projects/crash/subscriptions/crash"
IN_FLIGHT = 64
"""Publishes awaiting their future at once."""
PULL_S = 2.0
"""A pull's deadline: the server waits up to this (less half a second) for a first message."""
EMPTY_PULLS = 2
"""Empty pulls in a row that end a drain."""
ORDERING_KEYS = 4
"""Messages are spread over this many ordering keys; a key's number stands in the history's priority
field, so the checker's per-priority order is the per-key order Pub/Sub promises."""


def _ensure(publisher: Any, subscriber: Any) -> None:
    """The topic and the exactly-once subscription, made if they do not exist yet."""
    with contextlib.suppress(exceptions.AlreadyExists):
        publisher.create_topic(name=TOPIC)
    with contextlib.suppress(exceptions.AlreadyExists):
        subscriber.create_subscription(request={"name": SUBSCRIPTION, "topic": TOPIC, "ack_deadline_seconds": 60,
                                                "enable_exactly_once_delivery": True,
                                                "enable_message_ordering": True})


def _produce(publisher: Any, history: HistoryWriter, run: int, rate: float, rng: random.Random) -> None:
    """Publish about ``rate`` messages a second, ``IN_FLIGHT`` at most unanswered, until killed."""
    slots = threading.BoundedSemaphore(IN_FLIGHT)

    def answered(key: str, ordering_key: str, future: Any) -> None:
        try:
            future.result()
            history.record(Confirmed(key))
        except Exception:
            history.record(PublishFailed(key))
            publisher.resume_publish(TOPIC, ordering_key)  # a failure pauses the key: go on after it
        finally:
            slots.release()

    for n in range(10**9):
        slots.acquire()
        key, group = f"{run}.{n}", rng.randrange(ORDERING_KEYS)
        history.record(Sent(key, group))
        future = publisher.publish(TOPIC, key.encode(), ordering_key=f"k{group}", retry=None, timeout=30, key=key)
        future.add_done_callback(lambda f, key=key, group=group: answered(key, f"k{group}", f))
        time.sleep(rng.expovariate(rate))


def _consume(subscriber: Any, history: HistoryWriter, *, until_empty: bool) -> None:
    """Pull and acknowledge; with ``until_empty``, stop after ``EMPTY_PULLS`` empty pulls in a row."""
    empty = 0
    while not until_empty or empty < EMPTY_PULLS:
        try:
            response = subscriber.pull(subscription=SUBSCRIPTION, max_messages=50, timeout=PULL_S)
        except exceptions.DeadlineExceeded:
            response = None
        if response is None or not response.received_messages:
            empty += 1
            continue
        empty = 0
        keys = []
        for received in response.received_messages:
            key = received.message.attributes.get("key", "")
            group = int(received.message.ordering_key[1:])
            history.record(Received(key, group, max(1, received.delivery_attempt)))
            keys.append(key)
        for key in keys:
            history.record(AckSent(key, confirm=True))
        try:
            subscriber.acknowledge(subscription=SUBSCRIPTION, ack_ids=[r.ack_id for r in response.received_messages])
        except exceptions.GoogleAPICallError:
            continue  # some acks failed (lease lapsed): those messages may come back, none is confirmed
        for key in keys:
            history.record(AckConfirmed(key))


def _stream(subscriber: Any, history: HistoryWriter) -> None:
    """Streaming pull (the client's ``subscribe``), acking each message with ``ack_with_response``,
    whose future resolves once the server confirmed the ack; runs until killed."""

    def acked(key: str, future: Any) -> None:
        if future.exception() is None:
            history.record(AckConfirmed(key))

    def callback(message: Any) -> None:
        key = message.attributes.get("key", "")
        history.record(Received(key, int(message.ordering_key[1:]), max(1, message.delivery_attempt or 0)))
        history.record(AckSent(key, confirm=True))
        message.ack_with_response().add_done_callback(lambda f, key=key: acked(key, f))

    flow = pubsub_v1.types.FlowControl(max_messages=100)
    subscriber.subscribe(SUBSCRIPTION, callback, flow_control=flow).result()


def _flush_often(history: HistoryWriter) -> None:
    while True:
        time.sleep(0.1)
        history.flush()


def run_client(address: str, history_path: str, run: int, mode: str, seed: int, rate: float,
               hold_back: float = 0.0) -> None:
    """One client process's life (see the module's doc); with probability ``hold_back`` a work life
    starts pulling only after 0.5 to 3 s, so a backlog builds (and a kill often finds one)."""
    os.environ["PUBSUB_EMULATOR_HOST"] = address  # read when a client is made
    rng = random.Random(seed)
    held_s = rng.uniform(0.5, 3.0) if mode == "work" and rng.random() < hold_back else 0.0
    streaming = mode == "work" and rng.random() < 0.5
    history = HistoryWriter(history_path)
    history.record(Started(run, f"{mode}, {'streaming pull' if streaming else 'pull'}"))
    publisher = pubsub_v1.PublisherClient(
        batch_settings=pubsub_v1.types.BatchSettings(max_messages=20, max_latency=0.005),
        publisher_options=pubsub_v1.types.PublisherOptions(enable_message_ordering=True))
    subscriber = pubsub_v1.SubscriberClient()
    _ensure(publisher, subscriber)
    threading.Thread(target=_flush_often, args=(history,), daemon=True).start()
    print("ready", flush=True)
    if mode == "work":
        threading.Thread(target=_produce, args=(publisher, history, run, rate, rng), daemon=True).start()
        time.sleep(held_s)
        if streaming:
            _stream(subscriber, history)
        else:
            _consume(subscriber, history, until_empty=False)
    else:
        _consume(subscriber, history, until_empty=True)
        history.flush()  # not closed: the flushing thread may still use it
        print("drained", flush=True)
        publisher.stop()
        subscriber.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="The crash test's Pub/Sub client process.")
    parser.add_argument("--address", required=True, help="the conveyor serve address, host:port")
    parser.add_argument("--history", required=True)
    parser.add_argument("--run", type=int, required=True)
    parser.add_argument("--mode", choices=("work", "drain"), required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rate", type=float, default=300.0, help="publishes a second (work mode)")
    parser.add_argument("--hold-back", type=float, default=0.0,
                        help="chance that a work life starts pulling 0.5 to 3 s late (a backlog builds)")
    args = parser.parse_args(argv)
    run_client(args.address, args.history, args.run, args.mode, args.seed, args.rate, args.hold_back)


if __name__ == "__main__":
    main()
