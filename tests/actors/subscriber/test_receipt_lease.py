"""The leaser's receipt extension, and when a delivery's own lease makes it unneeded (``Leaser(granted_s=)``).

A Pub/Sub stream leases each delivery for its ack deadline from the server's send on. When that lease,
less the time the delivery may take to arrive, is at least the extension the leaser would ask for, the
leaser sends no deadline change at receipt, and its first extension comes before that lease runs out.
Run on the simulator, with a recording stand-in for the manager and the dispatcher.
"""

from __future__ import annotations

from typing import Any

import pytest

from conveyor.actors.broker import Delivery, Message
from conveyor.actors.subscriber import FlowControl, Leaser
from conveyor.actors.subscriber._protocol import Extend, Received, ReceivedBatch, Settlement, SettlementKind
from conveyor.runtime import Actor, ActorRef
from conveyor.simulation import Simulation

Log = list[tuple[float, Any]]


class Recorder(Actor):
    """Stands in for the manager and the dispatcher: records what it is told, with the time."""

    def __init__(self, log: Log) -> None:
        self.log = log

    def receive(self, message: Any) -> None:
        self.log.append((self.ctx.now(), message))


def _received(tag: int, key: str | None = None) -> Received:
    delivery = Delivery("q", tag, Message(b"m%d" % tag, group=key), 1, None, 1)
    return Received(f"1:{tag}", delivery.message.size, key, delivery)


def _leaser(flow: FlowControl, granted_s: float | None) -> tuple[Simulation, ActorRef, Log]:
    sim = Simulation(seed=1)
    log: Log = []
    recorder = sim.spawn(lambda: Recorder(log), name="recorder")
    leaser = sim.spawn(lambda: Leaser(recorder, recorder, flow, granted_s=granted_s), name="leaser")
    sim.run(until=1.0)
    return sim, leaser, log


def _extended(log: Log) -> list[tuple[float, tuple[str, ...], float]]:
    """(when, ack ids, seconds) of every deadline change the leaser asked for, in order."""
    out: list[tuple[float, tuple[str, ...], float]] = []
    for when, message in log:
        if type(message) is Extend:
            out.append((when, message.ack_ids, message.seconds))
        elif type(message) is Settlement and message.kind is SettlementKind.MODACK:
            out.append((when, (message.ack_id,), message.seconds))
    return out


@pytest.mark.parametrize("batch", [False, True], ids=["one", "batch"])
def test_without_a_granted_lease_each_receipt_is_extended_at_once(batch: bool) -> None:
    sim, leaser, log = _leaser(FlowControl(), granted_s=None)
    leaser.tell(ReceivedBatch((_received(1), _received(2, "k"))) if batch else _received(1))
    sim.run(until=2.0)
    ids = ("1:1", "1:2") if batch else ("1:1",)
    assert _extended(log) == [(1.0, ids, 10.0)]


@pytest.mark.parametrize("batch", [False, True], ids=["one", "batch"])
def test_a_granted_lease_as_long_as_the_extension_sends_nothing_at_receipt(batch: bool) -> None:
    sim, leaser, log = _leaser(FlowControl(), granted_s=10.0)
    leaser.tell(ReceivedBatch((_received(1), _received(2, "k"))) if batch else _received(1))
    sim.run(until=8.0)
    assert _extended(log) == [], "the stream's deadline already leases each delivery for 10 s from its receipt"
    sim.run(until=30.0)
    extensions = _extended(log)
    ids = ("1:1", "1:2") if batch else ("1:1",)
    assert extensions, "the leases are still kept: extended before the granted 10 s run out"
    first_at = extensions[0][0]
    assert first_at < 1.0 + 10.0, f"first extension at {first_at}, after the granted lease ran out at 11"
    assert {ack_id for _, extended_ids, _ in extensions for ack_id in extended_ids} == set(ids)


def test_a_granted_lease_shorter_than_the_extension_is_extended_at_receipt() -> None:
    """Callbacks slower than the stream's deadline (a longer shortest extension): the receipt extension goes out."""
    sim, leaser, log = _leaser(FlowControl(min_duration_per_lease_extension_s=30.0), granted_s=10.0)
    leaser.tell(ReceivedBatch((_received(1), _received(2))))
    sim.run(until=2.0)
    assert _extended(log) == [(1.0, ("1:1", "1:2"), 30.0)]


def test_a_lease_granted_at_receipt_is_never_left_to_run_out() -> None:
    """Every lease the leaser keeps is extended before the deadline it knows of, pass after pass."""
    sim, leaser, log = _leaser(FlowControl(), granted_s=10.0)
    leaser.tell(ReceivedBatch(tuple(_received(tag) for tag in range(1, 4))))
    sim.run(until=200.0)
    deadline = {f"1:{tag}": 1.0 + 10.0 for tag in range(1, 4)}
    for when, ids, seconds in _extended(log):
        for ack_id in ids:
            assert when < deadline[ack_id], f"{ack_id} extended at {when}, its lease ran out at {deadline[ack_id]}"
            deadline[ack_id] = when + seconds
    assert min(deadline.values()) > 200.0 - 10.0, "the leases are still being kept at the end"
