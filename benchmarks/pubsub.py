"""Publish and receive+ack through conveyor's Pub/Sub front: Google's subscriber beside conveyor's, in one run.

Why: issue 7 claims conveyor's actor subscriber (``subscribe_remote``: the subscriber of
``conveyor.actors.subscriber`` with its gRPC transport) outpaces Google's threaded client against
the same server, above all with ordering keys, where Google's client holds each key's next
message until the previous ack has been sent (PLATFORM.md measured about 800 msg/s with 10 keys).

What: one ``PubSubServer`` on loopback, in this process. For each case (unordered; ordered with 10
and with 100 keys) and each subscriber, a fresh topic and subscription get ``messages`` messages of
100 bytes from Google's publisher (publish msg/s: first publish to the last future resolved), then
the subscriber runs a callback that only acks until every message was seen (receive+ack msg/s:
subscribe to the last callback). Counts are checked: each message seen at least once, and each
key's messages in publish order for the ordered cases. Google's client runs with its defaults (10
callback threads); conveyor's on a ``ThreadSystem`` with 8 workers. Both share the process (and the
GIL) with the server, equally. Rates are noisy (+-35% on a shared 2-core machine); the ratio in one
run is the figure to read.

Run: ``python benchmarks/pubsub.py [--messages N]`` or ``conveyor bench pubsub``.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from conveyor.actors.pubsub import PubSubServer, PubSubTransport, subscribe_remote
from conveyor.actors.subscriber import FlowControl
from conveyor.runtime import ThreadSystem

BODY = b"x" * 100
PROJECT = "projects/bench"
CASES = (("unordered", 0), ("10 ordering keys", 10), ("100 ordering keys", 100))
TARGETS = {"unordered": 1.5, "10 ordering keys": 5.0}


class _Tally:
    """Counts callbacks from any thread; ``done`` is set once every message was seen."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.seen: dict[bytes, None] = {}
        self.by_key: dict[str, list[int]] = {}
        self.done = threading.Event()
        self.finished_at = 0.0

    def record(self, data: bytes, key: str) -> None:
        # dict operations are atomic under the GIL; each message is recorded by one callback at a time
        self.by_key.setdefault(key, []).append(int(data[:10]))
        self.seen[data[:10]] = None
        if len(self.seen) >= self.expected and not self.done.is_set():
            self.finished_at = time.perf_counter()
            self.done.set()

    def check(self, name: str, keys: int) -> None:
        if len(self.seen) != self.expected:
            msg = f"{name}: saw {len(self.seen)} of {self.expected} messages"
            raise RuntimeError(msg)
        if keys:
            for key, numbers in self.by_key.items():
                firsts = list(dict.fromkeys(numbers))  # redeliveries repeat a number; first sightings in order
                if firsts != sorted(firsts):
                    msg = f"{name}: key {key!r} out of order"
                    raise RuntimeError(msg)


def _publish(publisher: Any, topic: str, messages: int, keys: int) -> float:
    started = time.perf_counter()
    futures = []
    for n in range(messages):
        data = b"%010d" % n + BODY
        key = f"key-{n % keys}" if keys else ""
        futures.append(publisher.publish(topic, data, ordering_key=key))
    for future in futures:
        future.result(timeout=120)
    return messages / (time.perf_counter() - started)


def _receive(start: Callable[[Callable[[bytes, str, Any], None]], Callable[[], None]], tally: _Tally,
             timeout: float) -> float:
    def on_message(data: bytes, key: str, message: Any) -> None:
        message.ack()
        tally.record(data, key)

    started = time.perf_counter()
    stop = start(on_message)
    finished = tally.done.wait(timeout)
    stop()
    if not finished:
        msg = f"only {len(tally.seen)} of {tally.expected} messages within {timeout} s"
        raise RuntimeError(msg)
    return tally.expected / (tally.finished_at - started)


def main(messages: int = 5000, timeout: float = 300.0) -> list[tuple[str, float, float, float, float]]:
    """Run every case once; print the table; return (case, publish g, publish c, receive g, receive c)."""
    with PubSubServer() as server:
        os.environ["PUBSUB_EMULATOR_HOST"] = server.address
        from google.cloud import pubsub_v1

        publisher = pubsub_v1.PublisherClient(
            publisher_options=pubsub_v1.types.PublisherOptions(enable_message_ordering=True))
        admin = pubsub_v1.SubscriberClient()
        transport = PubSubTransport(server.address)
        rows = []
        try:
            for number, (case, keys) in enumerate(CASES):
                rates: dict[str, tuple[float, float]] = {}
                for who in ("google", "conveyor"):
                    topic = f"{PROJECT}/topics/case{number}-{who}"
                    name = f"{PROJECT}/subscriptions/case{number}-{who}"
                    publisher.create_topic(name=topic)
                    admin.create_subscription(request={"name": name, "topic": topic,
                                                       "enable_message_ordering": bool(keys)})
                    publish_rate = _publish(publisher, topic, messages, keys)
                    tally = _Tally(messages)
                    if who == "google":
                        receive_rate = _receive(_google(admin, name), tally, timeout)
                    else:
                        receive_rate = _receive(_conveyor(transport, name), tally, timeout)
                    tally.check(f"{case}, {who}", keys)
                    rates[who] = (publish_rate, receive_rate)
                rows.append((case, rates["google"][0], rates["conveyor"][0], rates["google"][1], rates["conveyor"][1]))
        finally:
            transport.close()
            admin.close()
            publisher.stop()
    _print(rows, messages)
    return rows


def _google(client: Any, name: str) -> Callable[[Callable[[bytes, str, Any], None]], Callable[[], None]]:
    def start(on_message: Callable[[bytes, str, Any], None]) -> Callable[[], None]:
        future = client.subscribe(name, lambda m: on_message(m.data, m.ordering_key, m))

        def stop() -> None:
            future.cancel()
            future.result(timeout=30)

        return stop

    return start


def _conveyor(transport: PubSubTransport, name: str) -> Callable[[Callable[[bytes, str, Any], None]],
                                                                  Callable[[], None]]:
    def start(on_message: Callable[[bytes, str, Any], None]) -> Callable[[], None]:
        system = ThreadSystem(job_workers=16)
        subscription = subscribe_remote(
            system, transport, name, lambda m: on_message(m.data, m.ordering_key, m),
            flow_control=FlowControl(max_messages=1000), workers=8)

        def stop() -> None:
            subscription.cancel()
            subscription.result(timeout=30)
            system.wait_quiet(timeout=10)  # the stream job notices the stop and ends
            system.shutdown()

        return stop

    return start


def _print(rows: Sequence[tuple[str, float, float, float, float]], messages: int) -> None:
    table = Table(title=f"Pub/Sub front, {messages} messages of 110 bytes per case, one run")
    for column in ("case", "publish 1", "publish 2", "google recv", "conveyor recv", "ratio", "target"):
        table.add_column(column, justify="right")
    for case, pub_g, pub_c, recv_g, recv_c in rows:
        ratio = recv_c / recv_g
        target = TARGETS.get(case)
        verdict = "-" if target is None else f">= {target}x {'PASS' if ratio >= target else 'MISS'}"
        table.add_row(case, f"{pub_g:,.0f}", f"{pub_c:,.0f}", f"{recv_g:,.0f}", f"{recv_c:,.0f}", f"{ratio:.2f}x",
                      verdict)
    console = Console(width=120)
    console.print(table)
    console.print("msg/s; publish 1 / 2: Google's publisher before the google / conveyor receive runs; "
                  "recv: receive+ack; ratio: conveyor recv / google recv")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=5000)
    main(messages=parser.parse_args().messages)
