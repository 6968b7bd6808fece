"""``conveyor serve`` as a real process, driven by Google's official client and stopped by a signal.

Started normally or in the background from a non-interactive shell (``&``, where the process
inherits SIGINT as ignored), SIGTERM and SIGINT must both drain the server: open streams end
with UNAVAILABLE, publishes in flight are answered, and it exits 0 having said so in its log.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import pytest
from google.api_core import exceptions
from google.cloud import pubsub_v1
from typer.testing import CliRunner

from conveyor.cli import app

CONVEYOR = Path(sys.executable).with_name("conveyor")
WAIT_S = 30.0


class Served:
    """A ``conveyor serve`` process whose output is read into lists as it comes."""

    def __init__(self, args: list[str], *, background: bool) -> None:
        command = [str(CONVEYOR), "serve", *args]
        if background:
            # A non-interactive shell starts a background job with SIGINT ignored; `wait` hands
            # back its exit status, so the shell's is the server's.
            command = ["sh", "-c", '"$@" & echo "pid $!"; wait $!', "sh", *command]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self.readers = [
            threading.Thread(target=self._read, args=(self.process.stdout, self.stdout), daemon=True),
            threading.Thread(target=self._read, args=(self.process.stderr, self.stderr), daemon=True),
        ]
        for reader in self.readers:
            reader.start()
        self.pid = int(self.wait_for(r"^pid (\d+)$", self.stdout).group(1)) if background else self.process.pid

    @staticmethod
    def _read(stream: IO[str] | None, into: list[str]) -> None:
        assert stream is not None
        for line in stream:
            into.append(line.rstrip("\n"))

    def wait_for(self, pattern: str, lines: list[str] | None = None) -> re.Match[str]:
        """The first line matching ``pattern`` (stderr by default), polled until ``WAIT_S`` passes."""
        lines = self.stderr if lines is None else lines
        deadline = time.monotonic() + WAIT_S
        while True:
            for line in list(lines):
                if found := re.search(pattern, line):
                    return found
            if self.process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"no line matching {pattern!r}; stdout {self.stdout}, stderr {self.stderr}")
            time.sleep(0.02)

    def wait(self) -> int:
        code = self.process.wait(WAIT_S)
        for reader in self.readers:
            reader.join(WAIT_S)
        return code

    def kill(self) -> None:
        if self.process.poll() is None:
            os.kill(self.pid, signal.SIGKILL)
            self.process.kill()
            self.process.wait(WAIT_S)


class Stream:
    """One raw StreamingPull through the official client's generated API, read in a thread."""

    def __init__(self, subscriber: pubsub_v1.SubscriberClient, subscription: str) -> None:
        self.done = threading.Event()
        self.received: list[str] = []
        self.error: BaseException | None = None
        self.ended = threading.Event()

        def requests() -> Iterator[pubsub_v1.types.StreamingPullRequest]:
            yield pubsub_v1.types.StreamingPullRequest(subscription=subscription, stream_ack_deadline_seconds=60)
            self.done.wait(WAIT_S)

        def read() -> None:
            try:
                for response in subscriber.streaming_pull(requests=requests(), retry=None):
                    self.received.extend(m.message.message_id for m in response.received_messages)
            except BaseException as error:
                self.error = error
            finally:
                self.ended.set()

        threading.Thread(target=read, daemon=True).start()


class Publishers:
    """Threads publishing one message per request, each with a client of its own, until a publish fails."""

    def __init__(self, topic: str, threads: int) -> None:
        self.confirmed: list[str] = []
        self.errors: list[BaseException] = []
        self.threads = [threading.Thread(target=self._publish, args=(topic,), daemon=True) for _ in range(threads)]
        for thread in self.threads:
            thread.start()

    def _publish(self, topic: str) -> None:
        publisher = pubsub_v1.PublisherClient(batch_settings=pubsub_v1.types.BatchSettings(max_messages=1))
        try:
            while True:
                try:  # no retry: the first refusal ends this publisher, and is recorded
                    self.confirmed.append(publisher.publish(topic, b"payload", retry=None, timeout=10).result(WAIT_S))
                except BaseException as error:
                    self.errors.append(error)
                    return
        finally:
            publisher.stop()

    def join(self) -> None:
        for thread in self.threads:
            thread.join(WAIT_S)
            assert not thread.is_alive(), "a publish was never answered"


def _until(condition: Callable[[], object], what: str) -> None:
    """Poll ``condition`` (the clients' own records) until it holds, or fail after ``WAIT_S``."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"not reached within {WAIT_S} s: {what}"
        time.sleep(0.01)


def _published_ids(log: list[str]) -> set[str]:
    """Every message id the server's debug log says it confirmed (``Publish <topic> OK ... ids=a..b``)."""
    ids: set[str] = set()
    for line in log:
        if found := re.search(r"Publish \S+ OK .*ids=(\d+)\.\.(\d+)", line):
            ids.update(str(n) for n in range(int(found.group(1)), int(found.group(2)) + 1))
    return ids


@pytest.mark.parametrize("launch", ["background", "foreground"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_drains_the_server_and_loses_no_confirmed_publish(
    launch: str, signum: signal.Signals, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = Served(["--host-port", "127.0.0.1:0", "--log-level", "debug"], background=launch == "background")
    try:
        address = served.wait_for(r"listening on (\S+)").group(1)
        monkeypatch.setenv("PUBSUB_EMULATOR_HOST", address)
        publisher = pubsub_v1.PublisherClient(batch_settings=pubsub_v1.types.BatchSettings(max_messages=1))
        subscriber = pubsub_v1.SubscriberClient()
        topic, subscription = "projects/p/topics/drained", "projects/p/subscriptions/drained"
        publisher.create_topic(name=topic)
        subscriber.create_subscription(name=subscription, topic=topic)
        stream = Stream(subscriber, subscription)
        publishing = Publishers(topic, threads=3)
        _until(lambda: len(publishing.confirmed) >= 30 and stream.received, "30 confirmed, some received")
        os.kill(served.pid, signum)  # while the publishers keep publishing
        code = served.wait()
        publishing.join()
        assert stream.ended.wait(WAIT_S)
        stream.done.set()
    finally:
        served.kill()
    name = signal.Signals(signum).name
    assert code == 0, served.stderr
    for pattern in (r" INFO .*listening on ", rf" INFO .*{name}: draining", r" INFO .*draining: 1 open stream",
                    r" INFO .*stopped"):
        assert any(re.search(pattern, line) for line in served.stderr), (pattern, served.stderr)
    # The server answered every publish it took, and the client heard every answer.
    assert set(publishing.confirmed) == _published_ids(served.stderr)
    assert set(stream.received) <= set(publishing.confirmed)
    # A publish the server did not take was refused with a status the official publisher retries:
    # UNAVAILABLE, or CANCELLED for a call gRPC had queued but not started when it stopped listening.
    assert publishing.errors, "the publishers stopped only on an error"
    refused = (exceptions.ServiceUnavailable, exceptions.Cancelled)
    assert all(isinstance(error, refused) for error in publishing.errors), publishing.errors
    # The open stream was ended by the server's drain with UNAVAILABLE (clients reconnect), not reset.
    assert isinstance(stream.error, exceptions.ServiceUnavailable), repr(stream.error)
    assert "shutting down" in str(stream.error)
    publisher.stop()
    subscriber.close()


def test_pubsub_stays_the_older_spelling_of_host_port() -> None:
    served = Served(["--pubsub", "127.0.0.1:0"], background=False)
    try:
        served.wait_for(r" INFO .*listening on 127\.0\.0\.1:\d+$")
        served.process.send_signal(signal.SIGTERM)
        code = served.wait()
    finally:
        served.kill()
    assert code == 0, served.stderr
    assert re.search(r" INFO conveyor\.serve: conveyor serve stopped$", served.stderr[-1])


def test_metrics_port_serves_each_subscriptions_counters_to_a_scrape(monkeypatch: pytest.MonkeyPatch) -> None:
    served = Served(["--host-port", "127.0.0.1:0", "--metrics-port", "0"], background=False)
    try:
        address = served.wait_for(r"listening on (\S+)").group(1)
        metrics = served.wait_for(r"Prometheus metrics on http://(\S+)/metrics", served.stdout).group(1)
        monkeypatch.setenv("PUBSUB_EMULATOR_HOST", address)
        publisher = pubsub_v1.PublisherClient()
        subscriber = pubsub_v1.SubscriberClient()
        topic, subscription = "projects/p/topics/measured", "projects/p/subscriptions/measured"
        publisher.create_topic(name=topic)
        subscriber.create_subscription(name=subscription, topic=topic, ack_deadline_seconds=60)
        for n in range(3):
            publisher.publish(topic, str(n).encode()).result(WAIT_S)
        received: list[pubsub_v1.types.ReceivedMessage] = []

        def pulled_three() -> bool:
            received.extend(subscriber.pull(subscription=subscription, max_messages=3).received_messages)
            return len(received) >= 3

        _until(pulled_three, "three messages pulled")
        subscriber.acknowledge(subscription=subscription, ack_ids=[m.ack_id for m in received[:2]])
        subscriber.modify_ack_deadline(subscription=subscription, ack_ids=[received[2].ack_id], ack_deadline_seconds=0)
        with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=WAIT_S) as response:
            text = response.read().decode()
        served.process.send_signal(signal.SIGTERM)
        assert served.wait() == 0, served.stderr
        publisher.stop()
        subscriber.close()
    finally:
        served.kill()
    samples = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.split("\n")
               if line and not line.startswith("#")}
    label = f'{{queue="{subscription}"}}'
    assert samples[f"conveyor_queue_published_total{label}"] == 3
    assert samples[f"conveyor_queue_deliveries_total{label}"] == 3
    assert samples[f"conveyor_queue_acks_total{label}"] == 2
    assert samples[f"conveyor_queue_nacks_total{label}"] == 1
    assert samples[f"conveyor_queue_in_flight{label}"] == 0
    assert samples[f"conveyor_queue_depth{label}"] == 1  # the nacked one, back in the queue


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--metrics-port", "70000"], r"'--metrics-port': Input should be less than or equal to 65535"),
        (["--host-port", "nonsense"], r"--host-port must be HOST:PORT .* got 'nonsense'"),
        (["--host-port", "127.0.0.1:99999"], r"--host-port must be HOST:PORT with a port from 0 to 65535"),
        (["--log-level", "loud"], r"'loud' is not one of 'debug', 'info', 'warning', 'error'"),
    ],
)
def test_a_bad_option_is_refused_naming_it(args: list[str], says: str) -> None:
    result = CliRunner().invoke(app, ["serve", *args])
    assert result.exit_code == 2
    assert re.search(says, " ".join(re.sub(r"[│╭╮╰╯─]", " ", result.output).split())), result.output
