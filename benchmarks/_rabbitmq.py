"""RabbitMQ 3.x as the storage benchmark's peer: a private node on loopback, driven by pika.

The node is the Debian package's server (``make rabbitmq`` installs it and pika), started without
systemd as ../shared/PLATFORM.md describes, with its own ports, home, database and epmd, so it
shares nothing with another node on the machine; ``stop`` ends it and its epmd by pid. What pika
measures mirrors conveyor's side of ``benchmarks/storage.py``: persistent 1 KiB messages into a
durable classic queue with publisher confirms and a window of unconfirmed publishes, then a consumer
with a prefetch that acks per batch (``multiple``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SERVER = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")
READY_WITHIN_S = 60.0
QUEUE = "storage-bench"


def unavailable_reason() -> str | None:
    """Why RabbitMQ cannot be measured here (server or pika missing), or None when it can."""
    if not SERVER.exists():
        return f"{SERVER} is not installed (make rabbitmq installs the Debian package)"
    try:
        import pika  # noqa: F401
    except ImportError:
        return "pika is not installed (make rabbitmq installs the bench extra)"
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _epmd_pids() -> set[int]:
    pids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if (entry / "comm").read_text().strip() == "epmd":
                    pids.add(int(entry.name))
    return pids


class RabbitNode:
    """One private RabbitMQ node: ``start`` it, take ``port``, ``stop`` it (and its epmd) by pid."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.home = Path(tempfile.mkdtemp(prefix="conveyor-rabbitmq-"))
        self.process: subprocess.Popen[bytes] | None = None
        self.epmd: set[int] = set()

    def start(self) -> None:
        """Start the node and wait until pika can connect; raise (after stopping it) if it never does."""
        epmd_before = _epmd_pids()
        env = {
            **os.environ,
            "HOME": str(self.home),
            "RABBITMQ_NODENAME": f"bench{self.port}@localhost",
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(_free_port()),
            "ERL_EPMD_ADDRESS": "127.0.0.1",
            "ERL_EPMD_PORT": str(_free_port()),
            "RABBITMQ_MNESIA_BASE": str(self.home / "mnesia"),
            "RABBITMQ_LOG_BASE": str(self.home / "log"),
            "RABBITMQ_CONFIG_FILE": str(self.home / "rabbitmq"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.home / "enabled_plugins"),
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
        }
        (self.home / "enabled_plugins").write_text("[].\n")
        log = (self.home / "server.out").open("wb")
        self.process = subprocess.Popen([str(SERVER)], env=env, stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        deadline = time.monotonic() + READY_WITHIN_S
        try:
            while True:
                if self.process.poll() is not None:
                    msg = f"rabbitmq-server exited with {self.process.returncode}: {self._tail()}"
                    raise RuntimeError(msg)
                with contextlib.suppress(Exception):
                    self.connect().close()
                    break
                if time.monotonic() > deadline:
                    msg = f"rabbitmq-server not ready after {READY_WITHIN_S:.0f} s: {self._tail()}"
                    raise RuntimeError(msg)
                time.sleep(0.5)
        finally:
            self.epmd = _epmd_pids() - epmd_before
        if self.process.poll() is not None:
            self.stop()

    def cpu_seconds(self) -> float:
        """CPU time (user + system) the node's processes have used so far (its process group)."""
        if self.process is None:
            return 0.0
        ticks = os.sysconf("SC_CLK_TCK")
        total = 0
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[2]) == self.process.pid:  # fields after the name: state, ppid, pgrp, ...
                    total += int(fields[11]) + int(fields[12])  # utime, stime
        return total / ticks

    def _tail(self) -> str:
        with contextlib.suppress(OSError):
            return (self.home / "server.out").read_text(errors="replace")[-600:]
        return ""

    def connect(self) -> Any:
        """A pika ``BlockingConnection`` to the node."""
        import pika

        return pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", self.port, heartbeat=0,
                                                                 connection_attempts=1))

    def stop(self) -> None:
        """End the node and the epmd it started, by pid; remove its files."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        for pid in self.epmd:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        self.epmd = set()
        shutil.rmtree(self.home, ignore_errors=True)


@contextlib.contextmanager
def rabbit_node() -> Iterator[RabbitNode]:
    """A started node, stopped (with its epmd) on the way out."""
    node = RabbitNode()
    try:
        node.start()
        yield node
    finally:
        node.stop()


class _ConfirmingPublisher:
    """pika's asynchronous connection: keeps ``window`` publishes unconfirmed until ``messages`` are confirmed."""

    def __init__(self, port: int, messages: int, body: bytes, window: int) -> None:
        import pika

        self.pika = pika
        self.messages = messages
        self.body = body
        self.window = window
        self.properties = pika.BasicProperties(delivery_mode=2)
        self.sent = 0
        self.confirmed = 0
        self.start = 0.0
        self.seconds = 0.0
        self.error: str | None = None
        self.channel: Any = None
        self.connection = pika.SelectConnection(
            pika.ConnectionParameters("127.0.0.1", port, heartbeat=0, connection_attempts=1),
            on_open_callback=lambda connection: connection.channel(on_open_callback=self._opened),
            on_open_error_callback=lambda _connection, error: self._fail(f"cannot connect: {error}"),
        )

    def run(self) -> float:
        self.connection.ioloop.start()
        if self.error is not None:
            raise RuntimeError(self.error)
        return self.seconds

    def _fail(self, error: str) -> None:
        self.error = error
        self.connection.ioloop.stop()

    def _opened(self, channel: Any) -> None:
        self.channel = channel
        channel.confirm_delivery(self._on_confirm, callback=self._confirming)

    def _confirming(self, _frame: Any) -> None:
        self.start = time.perf_counter()
        self._publish()

    def _publish(self) -> None:
        publish = self.channel.basic_publish
        while self.sent < self.messages and self.sent - self.confirmed < self.window:
            publish("", QUEUE, self.body, self.properties)
            self.sent += 1

    def _on_confirm(self, frame: Any) -> None:
        method = frame.method
        if isinstance(method, self.pika.spec.Basic.Nack):
            self._fail(f"RabbitMQ refused publish {method.delivery_tag}")
            return
        # Delivery tags count publishes from 1; a multiple ack confirms every tag up to its own.
        self.confirmed = method.delivery_tag if method.multiple else self.confirmed + 1
        if self.confirmed >= self.messages:
            self.seconds = time.perf_counter() - self.start
            self.connection.close()
            self.connection.ioloop.stop()
            return
        self._publish()


def publish_confirmed(node: RabbitNode, messages: int, body: bytes, window: int) -> float:
    """Seconds to publish ``messages`` persistent messages into a fresh durable queue, each confirmed.

    At most ``window`` publishes are unconfirmed at a time; each broker ack (possibly ``multiple``)
    lets more go.
    """
    connection = node.connect()
    channel = connection.channel()
    channel.queue_delete(QUEUE)
    channel.queue_declare(QUEUE, durable=True)
    connection.close()
    return _ConfirmingPublisher(node.port, messages, body, window).run()


def consume_acked(node: RabbitNode, messages: int, prefetch: int, ack_every: int) -> float:
    """Seconds to consume ``messages`` from the queue with ``prefetch``, acking every ``ack_every`` as one."""
    connection = node.connect()
    channel = connection.channel()
    channel.basic_qos(prefetch_count=prefetch)
    start = time.perf_counter()
    for received, (method, _properties, _body) in enumerate(channel.consume(QUEUE, inactivity_timeout=30), 1):
        if method is None:
            msg = f"RabbitMQ delivered {received - 1} of {messages} messages, then nothing for 30 s"
            raise RuntimeError(msg)
        if received % ack_every == 0 or received == messages:
            channel.basic_ack(method.delivery_tag, multiple=True)
        if received == messages:
            break
    seconds = time.perf_counter() - start
    channel.cancel()
    remaining = channel.queue_declare(QUEUE, durable=True, passive=True).method.message_count
    if remaining:
        msg = f"RabbitMQ still holds {remaining} messages after {messages} were consumed"
        raise RuntimeError(msg)
    channel.queue_delete(QUEUE)
    connection.close()
    return seconds
