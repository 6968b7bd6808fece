"""The ordered-key handler takes a batch (``ReceivedBatch``, ``CallbacksEnded``) as it takes its items one by one.

Its batch paths handle the common case inline (a message whose key is idle runs; an end that did not nack
finishes its item) and hand the rest to the general path: whatever the mix of keys, nacks and early copies,
the messages it runs, in order, and what it sends back must not depend on how the events were grouped.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from conveyor.actors.broker import Delivery, Message
from conveyor.actors.subscriber import OrderedKeyHandler
from conveyor.actors.subscriber._protocol import (
    CallbackEnded,
    CallbacksEnded,
    Received,
    ReceivedBatch,
    Run,
    RunBatch,
    Scheduled,
)
from conveyor.runtime import Actor, ActorRef
from conveyor.simulation import Simulation

KEYS = st.sampled_from([None, "", "a", "b", "c"])


class Recorder(Actor):
    """Stands in for the manager or the pool: records what it receives."""

    def __init__(self, log: list[Any]) -> None:
        self.log = log

    def receive(self, message: Any) -> None:
        self.log.append(message)


def _received(tag: int, key: str | None, count: int = 1) -> Received:
    delivery = Delivery("q", tag, Message(f"m{tag}".encode(), group=key or None), count, 1000.0, 1)
    return Received(f"1:{tag}", delivery.message.size, key, delivery)


class _Handler:
    """One ordered-key handler between recording stand-ins; ``batched`` says how events reach it."""

    def __init__(self, sim: Simulation, name: str, batched: bool) -> None:
        self.sim = sim
        self.batched = batched
        self.to_manager: list[Any] = []
        self.to_pool: list[Any] = []
        manager = sim.spawn(lambda: Recorder(self.to_manager), name=f"{name}-manager")
        workers = sim.spawn(lambda: Recorder(self.to_pool), name=f"{name}-workers")
        self.keys: ActorRef = sim.spawn(lambda: OrderedKeyHandler(manager, workers), name=f"{name}-keys")

    def arrive(self, items: list[Received]) -> None:
        if self.batched and len(items) > 1:
            self.keys.tell(ReceivedBatch(tuple(items)))
        else:
            for item in items:
                self.keys.tell(item)

    def end(self, ends: list[CallbackEnded]) -> None:
        if self.batched and len(ends) > 1:
            self.keys.tell(CallbacksEnded(tuple(ends)))
        else:
            for end in ends:
                self.keys.tell(end)

    def runs(self) -> list[tuple[str, str | None, int]]:
        """Every message handed to the pool, in order: (ack id, key, delivery count)."""
        found: list[Run | Received] = []
        for message in self.to_pool:
            found.extend((message,) if type(message) is Run else message.runs if type(message) is RunBatch else ())
        return [(run.ack_id, run.key, run.delivery.delivery_count) for run in found]

    def said(self) -> tuple[list[Any], list[str]]:
        """What the manager heard besides ``Scheduled`` (the nacks), and the ids ``Scheduled`` named, in order."""
        scheduled = [ack_id for message in self.to_manager if type(message) is Scheduled for ack_id in message.ack_ids]
        return [message for message in self.to_manager if type(message) is not Scheduled], scheduled


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_batches_and_single_events_run_the_same_messages_in_the_same_order(data: st.DataObject) -> None:
    sim = Simulation(seed=1)
    one_by_one, batched = _Handler(sim, "single", False), _Handler(sim, "batch", True)
    tags = iter(range(1, 10_000))
    ended: set[tuple[str, int]] = set()  # (ack id, delivery count) of the runs ended so far
    copied: set[str] = set()  # ack ids with a copy delivered again before their run ended, not run yet
    for step in range(data.draw(st.integers(1, 12), label="steps")):
        runs = one_by_one.runs()
        copied -= {ack_id for ack_id, _, count in runs if count > 1}
        running = [run for run in runs if (run[0], run[2]) not in ended]
        if len(running) > 0 and data.draw(st.booleans(), label="end some"):
            chosen = data.draw(st.lists(st.sampled_from(running), min_size=1, max_size=8, unique_by=lambda r: r[0]))
            ended.update((ack_id, count) for ack_id, _, count in chosen)
            ends = [CallbackEnded(ack_id, key, None, data.draw(st.booleans(), label="nacked"))
                    for ack_id, key, _ in chosen]
            for handler in (one_by_one, batched):
                handler.end(ends)
        else:
            items = [_received(next(tags), key) for key in data.draw(st.lists(KEYS, min_size=1, max_size=8))]
            uncopied = [run for run in running if run[0] not in copied]
            if len(uncopied) > 0 and data.draw(st.booleans(), label="an early copy"):
                ack_id, key, count = data.draw(st.sampled_from(uncopied))
                copied.add(ack_id)  # delivered again before its run ended: it runs again once that run ends
                items.append(_received(int(ack_id.split(":")[1]), key, count + 1))
            for handler in (one_by_one, batched):
                handler.arrive(items)
        sim.run(until=float(step + 1))
        assert batched.runs() == one_by_one.runs()
        assert batched.said() == one_by_one.said()
