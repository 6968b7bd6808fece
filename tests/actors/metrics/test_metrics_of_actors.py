"""Metrics read from real actors: a queue and a subscriber on threads, scraped over HTTP; the leaser's
extensions and flow control's pauses counted by the subscriber itself (in the simulator)."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request

import pytest

from conveyor.actors.broker import GetStats, Message, Publish, QueueActor, QueueConfig
from conveyor.actors.metrics import CONTENT_TYPE, PrometheusEndpoint, queue_stats_of, subscriber_figures_of
from conveyor.actors.subscriber import (
    FlowControl,
    FlowStats,
    GetFlowStats,
    GetSubscriptionStats,
    StreamingPullManager,
    SubscriberMessage,
    subscribe,
)
from conveyor.runtime import ThreadSystem
from conveyor.simulation import Simulation, uniform_job_duration

WAIT_S = 20.0


def _scrape(address: str, path: str = "/metrics") -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(f"http://{address}{path}", timeout=WAIT_S) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read().decode()


def test_a_scrape_reports_the_queue_and_the_subscriber_as_they_are() -> None:
    attempts: dict[bytes, int] = {}
    seen = threading.Event()

    def callback(message: SubscriberMessage) -> None:
        attempts[message.data] = attempts.get(message.data, 0) + 1
        if int(message.data) % 2 and message.delivery_attempt == 1:
            message.nack()  # the odd ones once: 5 nacks, 5 redeliveries
        else:
            message.ack()
        if len(attempts) == 10:
            seen.set()

    with ThreadSystem() as system:
        queue = system.spawn(lambda: QueueActor(QueueConfig("jobs", ack_deadline_s=60)), name="jobs")
        subscription = subscribe(system, queue, callback, flow_control=FlowControl(max_messages=2), name="jobs-sub")
        for n in range(10):
            queue.tell(Publish(Message(str(n).encode())))
        deadline = time.monotonic() + WAIT_S
        while system.ask(queue, GetStats()).acked < 10:
            assert time.monotonic() < deadline, "the ten messages were not all acked"
            time.sleep(0.02)
        with PrometheusEndpoint(queues=lambda: queue_stats_of(system, [queue]),
                                subscribers=lambda: subscriber_figures_of([("jobs-sub", subscription)])) as endpoint:
            status, content_type, text = _scrape(endpoint.address)
            missing = _scrape(endpoint.address, "/")
        subscription.cancel()
    assert (status, content_type) == (200, CONTENT_TYPE)
    types, samples = parse_any(text)
    queue_figures = {name: value for (name, label), value in samples.items() if label == ("queue", "jobs")}
    assert queue_figures == {
        "conveyor_queue_depth": 0, "conveyor_queue_in_flight": 0, "conveyor_queue_published_total": 10,
        "conveyor_queue_deliveries_total": 15, "conveyor_queue_redeliveries_total": 5,
        "conveyor_queue_acks_total": 10, "conveyor_queue_nacks_total": 5, "conveyor_queue_dead_letters_total": 0,
        "conveyor_queue_expired_total": 0, "conveyor_queue_rejected_total": 0,
    }
    subscriber = {name: value for (name, label), value in samples.items() if label == ("subscription", "jobs-sub")}
    assert subscriber["conveyor_subscriber_outstanding"] == 0
    assert subscriber["conveyor_subscriber_flow_control_pauses_total"] >= 1  # 10 published at once, 2 allowed
    assert types["conveyor_subscriber_flow_control_pauses_total"] == "counter"
    assert types["conveyor_queue_depth"] == "gauge"
    assert missing[0] == 404 and "/metrics" in missing[2]


def parse_any(text: str) -> tuple[dict[str, str], dict[tuple[str, tuple[str, str]], float]]:
    """Like ``parse``, for samples labelled by queue or by subscription."""
    types: dict[str, str] = {}
    samples: dict[tuple[str, tuple[str, str]], float] = {}
    for line in text.split("\n"):
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            types[name] = kind
        elif line and not line.startswith("#"):
            head, value = line.rsplit(" ", 1)
            name, label = head.split("{", 1)
            key, quoted = label.rstrip("}").split("=", 1)
            samples[(name, (key, quoted.strip('"')))] = float(value)
    return types, samples


def test_the_subscriber_counts_its_lease_extensions_and_its_pauses() -> None:
    sim = Simulation(seed=4, job_duration=uniform_job_duration(25.0, 25.0))  # callbacks take 25 virtual s
    queue = sim.spawn(lambda: QueueActor(QueueConfig("q", ack_deadline_s=10)), name="q")
    flow = FlowControl(max_messages=2, min_duration_per_lease_extension_s=10, max_duration_per_lease_extension_s=10)
    sub = sim.spawn(lambda: StreamingPullManager(queue, SubscriberMessage.ack, flow), name="sub")
    sim.run(until=1)
    for n in range(4):
        queue.tell(Publish(Message(str(n).encode())))
    sim.run(until=200)
    stats = sim.ask(sub, GetSubscriptionStats())
    flow_stats = sim.ask(sub, GetFlowStats())
    assert sim.ask(queue, GetStats()).acked == 4
    # Each message is extended on receipt and before each 10 s lease lapses in its 25 s callback.
    assert stats.lease_extensions >= 4 * 3
    assert isinstance(flow_stats, FlowStats)
    assert flow_stats.pauses == 2  # four messages, two at a time: paused at 2, resumed, paused at 2 again
    assert flow_stats.count == 0 and not flow_stats.paused


def test_a_metrics_port_in_use_is_refused_naming_it() -> None:
    with PrometheusEndpoint(queues=list) as first:
        taken = PrometheusEndpoint(queues=list, port=first.port)
        with pytest.raises(RuntimeError, match=rf"cannot serve metrics on 127\.0\.0\.1:{first.port}"):
            taken.start()
    with pytest.raises(ValueError, match="port must be an int from 0 to 65535"):
        PrometheusEndpoint(queues=list, port=70000)
