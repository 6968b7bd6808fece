"""Publish and receive+ack through conveyor's Pub/Sub front: Google's subscriber beside conveyor's, in one run.

Why: issue 7 claims conveyor's actor subscriber (``subscribe_remote``: the subscriber of
``conveyor.actors.subscriber`` with its gRPC transport) outpaces Google's threaded client against
the same server, above all with ordering keys, where Google's client holds each key's next
message until the previous ack has been sent (PLATFORM.md measured about 800 msg/s with 10 keys).

What: one ``PubSubServer`` on loopback, by default in a process of its own, as an emulator runs
(``--in-process``: in this process, sharing the GIL with the clients). For each case (unordered;
ordered with 10, 100 and 1,000 keys: issue 21 asks that conveyor's cost per message not grow with
the number of keys) and each subscriber, a fresh topic and subscription; each round gets
``messages`` new messages of 110 bytes from Google's publisher (publish msg/s: first publish to the
last future resolved), then the subscriber runs a callback that only acks until every message of the
round was seen (receive+ack msg/s: subscribe to the last callback; an earlier round's message that
comes back, given back when its subscriber stopped, is acked and not counted). Counts are checked: each message seen at
least once, and each key's messages in publish order for the ordered cases. Both subscribers run
with the same limits: 1,000 messages of flow control and 10 callback threads (Google's defaults;
conveyor's on a ``ThreadSystem`` with ``workers=10``, its actors kept on one CPU: ``ThreadSystem(cpu=...)``,
the lowest this process may use, unless ``pin`` is off; Google's client has no such setting, and its
threads go where the operating system puts them). Beside each rate: this process's CPU time
per message over the receive run (the subscriber's own cost; with ``--in-process`` the server's
too), the figure that bounds the rate when the GIL is the bottleneck. The load average of the
machine is printed before and after: rates are noisy (+-35% on a shared 2-core machine, more
under load); the ratio in one run is the figure to read. Each case runs ``rounds`` (3) times, the two
subscribers alternately, each run after a full garbage collection, and the best run of each is shown:
a receive of 5,000 messages lasts 0.2-0.4 s, and one full collection (40-75 ms with the GIL held) or a
neighbour's burst landing in it moved single-run ratios by 1.5x.

Run: ``python benchmarks/pubsub.py [--messages N] [--rounds R] [--in-process]`` or ``conveyor bench pubsub``.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from rich.console import Console
from rich.table import Table

from conveyor.actors.pubsub import PubSubServer, PubSubTransport, subscribe_remote
from conveyor.actors.subscriber import FlowControl
from conveyor.benchmarks._common import pinned_cpu
from conveyor.runtime import ThreadSystem, freeze_start_up_heap

BODY = b"x" * 100
PROJECT = "projects/bench"
CASES = (("unordered", "unordered", 0), ("keys10", "10 ordering keys", 10), ("keys100", "100 ordering keys", 100),
         ("keys1000", "1,000 ordering keys", 1000))
TARGETS = {"unordered": 1.5, "keys10": 5.0, "keys100": 2.0, "keys1000": 2.0}
WORKERS = 10  # Google's client runs callbacks on 10 threads by default
MAX_MESSAGES = 1000  # both clients' default flow control
SUBSCRIBERS = ("google", "conveyor")

Start = Callable[[Callable[[bytes, str, Any], None]], Callable[[], None]]


class _Tally:
    """Counts callbacks from any thread; ``done`` is set once every message was seen."""

    def __init__(self, expected: int, first: int = 0) -> None:
        self.expected = expected
        self.first = first  # this round's messages are numbered from here; lower numbers are earlier rounds'
        self.seen: dict[bytes, None] = {}
        self.by_key: dict[str, list[int]] = {}
        self.done = threading.Event()
        self.finished_at = 0.0
        self.cpu_at = 0.0

    def record(self, data: bytes, key: str) -> None:
        # dict operations are atomic under the GIL; each message is recorded by one callback at a time
        number = int(data[:10])
        if number < self.first:
            return  # an earlier round's message given back when its subscriber stopped: not this round's
        self.by_key.setdefault(key, []).append(number)
        self.seen[data[:10]] = None
        if len(self.seen) >= self.expected and not self.done.is_set():
            self.finished_at = time.perf_counter()
            self.cpu_at = time.process_time()
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


def _publish(publisher: Any, topic: str, messages: int, keys: int, first: int = 0) -> float:
    started = time.perf_counter()
    futures = []
    for n in range(first, first + messages):
        data = b"%010d" % n + BODY
        key = f"key-{n % keys}" if keys else ""
        futures.append(publisher.publish(topic, data, ordering_key=key))
    for future in futures:
        future.result(timeout=120)
    return messages / (time.perf_counter() - started)


def _receive(start: Start, tally: _Tally, timeout: float) -> tuple[float, float]:
    """Run one subscriber until every message was seen: (msg/s, process CPU microseconds per message)."""
    def on_message(data: bytes, key: str, message: Any) -> None:
        message.ack()
        tally.record(data, key)

    started = time.perf_counter()
    cpu = time.process_time()
    stop = start(on_message)
    finished = tally.done.wait(timeout)
    stop()
    if not finished:
        msg = f"only {len(tally.seen)} of {tally.expected} messages within {timeout} s"
        raise RuntimeError(msg)
    return tally.expected / (tally.finished_at - started), (tally.cpu_at - cpu) * 1e6 / tally.expected


def main(messages: int = 5000, timeout: float = 300.0, in_process: bool = False, rounds: int = 3,
         pin: bool = True) -> dict[str, float]:
    """Run every case ``rounds`` times, the two subscribers alternately; print the best of each, return the figures.

    Args:
        messages: messages per case, subscriber and round.
        timeout: longest wait for one receive run.
        in_process: run the server in this process (sharing the GIL) instead of its own.
        rounds: receive runs per case and subscriber; each figure is the best round's (its fastest
            receive, with that round's publish rate and CPU per message).
        pin: keep conveyor's actors on one CPU (``ThreadSystem(cpu=...)``, the lowest this process
            may use) where the platform can; off, they go where the operating system puts them.

    Returns:
        Per case (``unordered``, ``keys10``, ``keys100``, ``keys1000``): ``{case}_publish_{who}_msgs_per_s`` (the
        publish before each subscriber's run), ``{case}_{who}_msgs_per_s`` (receive+ack),
        ``{case}_{who}_cpu_us_per_msg`` for ``who`` in google / conveyor, and ``ratio_{case}``
        (conveyor's receive+ack rate over Google's).
    """
    if messages < 1:
        msg = f"messages must be >= 1, got {messages}"
        raise ValueError(msg)
    if rounds < 1:
        msg = f"rounds must be >= 1, got {rounds}"
        raise ValueError(msg)
    actor_cpu = pinned_cpu() if pin else None
    load_before = os.getloadavg()
    figures: dict[str, float] = {}
    emulator = os.environ.get("PUBSUB_EMULATOR_HOST")
    with _server(in_process) as address:
        os.environ["PUBSUB_EMULATOR_HOST"] = address  # Google's clients find the server by it
        from google.cloud import pubsub_v1

        publisher = pubsub_v1.PublisherClient(
            publisher_options=pubsub_v1.types.PublisherOptions(enable_message_ordering=True))
        admin = pubsub_v1.SubscriberClient()
        transport = PubSubTransport(address)
        try:
            for number, (case, _, keys) in enumerate(CASES):
                for who in SUBSCRIBERS:
                    topic = f"{PROJECT}/topics/case{number}-{who}"
                    name = f"{PROJECT}/subscriptions/case{number}-{who}"
                    publisher.create_topic(name=topic)
                    admin.create_subscription(request={"name": name, "topic": topic,
                                                       "enable_message_ordering": bool(keys)})
                for round_number in range(rounds):
                    for who in SUBSCRIBERS:  # alternately, so that a slow stretch of the machine hits both
                        topic = f"{PROJECT}/topics/case{number}-{who}"
                        name = f"{PROJECT}/subscriptions/case{number}-{who}"
                        first = round_number * messages
                        published = _publish(publisher, topic, messages, keys, first)
                        tally = _Tally(messages, first)
                        start = _google(admin, name) if who == "google" else _conveyor(transport, name, actor_cpu)
                        gc.collect()  # the garbage of the runs before is not collected in this one
                        rate, cpu = _receive(start, tally, timeout)
                        tally.check(f"{case}, {who}", keys)
                        if rate > figures.get(f"{case}_{who}_msgs_per_s", 0.0):
                            figures[f"{case}_publish_{who}_msgs_per_s"] = published
                            figures[f"{case}_{who}_msgs_per_s"] = rate
                            figures[f"{case}_{who}_cpu_us_per_msg"] = cpu
                figures[f"ratio_{case}"] = figures[f"{case}_conveyor_msgs_per_s"] / figures[f"{case}_google_msgs_per_s"]
        finally:
            transport.close()
            admin.close()
            publisher.stop()
            if emulator is None:
                del os.environ["PUBSUB_EMULATOR_HOST"]
            else:
                os.environ["PUBSUB_EMULATOR_HOST"] = emulator
    _print(figures, messages, in_process, rounds, load_before, os.getloadavg(), actor_cpu)
    return figures



@contextlib.contextmanager
def _server(in_process: bool) -> Iterator[str]:
    """A running server's ``host:port``: in this process, or in a child process (``--serve``)."""
    if in_process:
        with PubSubServer() as server:
            yield server.address
        return
    child = subprocess.Popen([sys.executable, "-m", "conveyor.benchmarks.pubsub", "--serve"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdin is not None and child.stdout is not None
    try:
        address = child.stdout.readline().strip()
        if not address:
            msg = f"the server process ended before it listened (exit code {child.wait(30)})"
            raise RuntimeError(msg)
        yield address
    finally:
        child.stdin.close()  # its cue to stop
        try:
            child.wait(30)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(30)


def _serve() -> None:
    """The server process of a run, as ``conveyor serve`` runs it: print the address, serve until stdin closes."""
    with PubSubServer() as server:
        freeze_start_up_heap()
        print(server.address, flush=True)
        sys.stdin.read()


def _google(client: Any, name: str) -> Start:
    def start(on_message: Callable[[bytes, str, Any], None]) -> Callable[[], None]:
        from google.cloud import pubsub_v1

        flow = pubsub_v1.types.FlowControl(max_messages=MAX_MESSAGES)
        future = client.subscribe(name, lambda m: on_message(m.data, m.ordering_key, m), flow_control=flow)

        def stop() -> None:
            future.cancel()
            future.result(timeout=30)

        return stop

    return start


def _conveyor(transport: PubSubTransport, name: str, cpu: int | None = None) -> Start:
    def start(on_message: Callable[[bytes, str, Any], None]) -> Callable[[], None]:
        system = ThreadSystem(job_workers=WORKERS + 2, cpu=cpu)  # the callbacks, the stream and the settlement calls
        subscription = subscribe_remote(
            system, transport, name, lambda m: on_message(m.data, m.ordering_key, m),
            flow_control=FlowControl(max_messages=MAX_MESSAGES), workers=WORKERS)

        def stop() -> None:
            subscription.cancel()
            subscription.result(timeout=30)
            system.wait_quiet(timeout=10)  # the stream job notices the stop and ends
            system.shutdown()

        return stop

    return start


def _print(figures: dict[str, float], messages: int, in_process: bool, rounds: int,
           before: tuple[float, float, float], after: tuple[float, float, float], pinned: int | None) -> None:
    where = "in this process" if in_process else "in its own process"
    best = "one run" if rounds == 1 else f"best of {rounds} rounds, alternated"
    table = Table(title=f"Pub/Sub front ({where}), {messages} messages of 110 bytes per case, {best}")
    for column in ("case", "publish 1", "publish 2", "google recv", "cpu/msg", "conveyor recv", "cpu/msg",
                   "ratio", "target"):
        table.add_column(column, justify="right")
    for case, label, _ in CASES:
        ratio = figures[f"ratio_{case}"]
        target = TARGETS.get(case)
        verdict = "-" if target is None else f">= {target}x {'PASS' if ratio >= target else 'MISS'}"
        table.add_row(
            label,
            f"{figures[f'{case}_publish_google_msgs_per_s']:,.0f}",
            f"{figures[f'{case}_publish_conveyor_msgs_per_s']:,.0f}",
            f"{figures[f'{case}_google_msgs_per_s']:,.0f}",
            f"{figures[f'{case}_google_cpu_us_per_msg']:,.0f} us",
            f"{figures[f'{case}_conveyor_msgs_per_s']:,.0f}",
            f"{figures[f'{case}_conveyor_cpu_us_per_msg']:,.0f} us",
            f"{ratio:.2f}x",
            verdict,
        )
    console = Console(width=130)
    console.print(table)
    cpu_note = "server included" if in_process else "the subscriber's own: the server runs in another process"
    console.print("msg/s; publish 1 / 2: Google's publisher before the google / conveyor receive runs; "
                  "recv: receive+ack; cpu/msg: this process's CPU time per message during that receive run "
                  f"({cpu_note}); ratio: conveyor recv / google recv")
    console.print(f"conveyor's actors: on CPU {pinned} (ThreadSystem(cpu={pinned}))" if pinned is not None else
                  "conveyor's actors: not pinned (--no-pin, or the platform cannot pin threads)")
    console.print(f"load average before: {before[0]:.2f} {before[1]:.2f} {before[2]:.2f}; "
                  f"after: {after[0]:.2f} {after[1]:.2f} {after[2]:.2f} ({os.cpu_count()} CPUs)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--in-process", action="store_true", help="run the server in this process")
    parser.add_argument("--rounds", type=int, default=3, help="receive runs per case and subscriber (best kept)")
    parser.add_argument("--no-pin", action="store_true", help="leave conveyor's actors unpinned (ThreadSystem(cpu=))")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)  # the server child
    arguments = parser.parse_args()
    if arguments.serve:
        _serve()
    else:
        main(messages=arguments.messages, in_process=arguments.in_process, rounds=arguments.rounds,
             pin=not arguments.no_pin)
