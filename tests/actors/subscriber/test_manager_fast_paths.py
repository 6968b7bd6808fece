"""The manager's batch paths tell every part exactly what its one-at-a-time paths tell it.

A worker job's acks go through ``AckLedger.ack_all`` (one ``Dones``, one ``Acks``), a ``Deliveries``
batch is taken in by an inline loop, and an ``AckResult`` with no ``ack_with_response`` waiting goes
through ``AckLedger.took_all``. Random runs drive the real manager and one whose batch paths go the
careful way (``_settle`` per ack, ``_deliver`` per delivery, ``_ack_answered`` per tag), both through a
stand-in context, and compare what each part was told, item by item, and the ledgers.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from conveyor.actors.broker import Ack, AckResult, Delivery, Message
from conveyor.actors.subscriber import Deliveries, Done, Dones, Part, Received, ReceivedBatch, StreamingPullManager
from conveyor.actors.subscriber._protocol import (
    Acks,
    AckWithResponse,
    RunsEnded,
    Settlement,
    SettlementKind,
    Settles,
)


class _Ref:
    """Stands in for an ActorRef: a name."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


class _Context:
    """The part of an actor's context the manager's handlers use: sends are recorded, the time is fixed."""

    def __init__(self) -> None:
        self.sent: list[tuple[Any, Any]] = []  # (a part's stand-in ref, what it was sent)
        self.sender: Any = None
        self.self_ref = _Ref("manager")

    def send(self, target: Any, message: object) -> None:
        self.sent.append((target, message))

    def reply(self, message: object) -> None:
        assert self.sender is not None
        self.sent.append((self.sender, message))

    def now(self) -> float:
        return 100.0


class _Careful(StreamingPullManager):
    """The manager with its batch paths taken the one-at-a-time way."""

    def _deliver(self, delivery: Delivery) -> None:
        super()._deliver(delivery)  # overridden: a batch goes through it, one delivery at a time

    def _ack_all(self, ack_ids: list[str]) -> None:
        self.gathered = ([], [])
        try:
            for ack_id in ack_ids:
                self._settle(Settlement(SettlementKind.ACK, ack_id))
        finally:
            self._send_gathered()

    def _answered(self, result: AckResult) -> None:
        consumer_id = self.ledger.consumer_id
        for tag in result.acked:
            self._ack_answered(f"{consumer_id}:{tag}", took=True)
        for tag in result.invalid:
            self._ack_answered(f"{consumer_id}:{tag}", took=False)


PARTS = (Part.DISPATCHER, Part.WORKERS, Part.LOAD, Part.LEASER, Part.KEYS, Part.HEARTBEAT)


def _started(cls: type[StreamingPullManager]) -> tuple[StreamingPullManager, _Context]:
    manager = cls(_Ref("queue"), lambda message: None)  # type: ignore[arg-type]
    context = _Context()
    manager.ctx = context  # type: ignore[assignment]
    manager.parts = {part: _Ref(part) for part in PARTS}  # type: ignore[misc]
    manager.consumer = _Ref("consumer")  # type: ignore[assignment]
    return manager, context


def _items(message: object) -> list[object]:
    """A message as the items it carries: a batch's one by one, a settlement as the kind, id and rest."""
    if type(message) in (Dones, ReceivedBatch, Settles):
        return [item for each in message.items for item in _items(each)]  # type: ignore[attr-defined]
    if type(message) is Acks:
        return [("settle", SettlementKind.ACK, ack_id, 0.0, 0, None) for ack_id in message.ack_ids]
    if type(message) is Settlement:
        return [("settle", message.kind, message.ack_id, message.seconds, message.attempt, message.error)]
    if type(message) in (Done, Received):
        return [message]
    return [message]


def _told(context: _Context) -> dict[str, list[object]]:
    told: dict[str, list[object]] = {}
    for target, message in context.sent:
        told.setdefault(target.name, []).extend(_items(message))
    return told


TAGS = st.integers(1, 6)
KINDS = st.sampled_from([SettlementKind.ACK] * 4 + [SettlementKind.NACK, SettlementKind.MODACK, SettlementKind.DROP])
DELIVER = st.tuples(st.just("deliver"), st.lists(st.tuples(TAGS, st.integers(1, 3)), min_size=1, max_size=5))
SETTLE = st.tuples(st.just("settle"), st.lists(st.tuples(KINDS, TAGS, st.sampled_from([0.0, 10.0])), max_size=6))
ACKS = st.tuples(st.just("acks"), st.lists(TAGS, max_size=6))
ANSWER = st.tuples(st.just("answer"), st.tuples(st.lists(TAGS, max_size=4), st.lists(TAGS, max_size=2)))
ASK = st.tuples(st.just("ask"), TAGS)
EXPIRE = st.tuples(st.just("expire"), TAGS)
OPS = st.lists(st.one_of(DELIVER, SETTLE, ACKS, ANSWER, ASK, EXPIRE), max_size=30)


def _message(op: str, arg: Any) -> tuple[object, str]:
    """The message of one op, and who sends it."""
    if op == "deliver":
        deliveries = tuple(Delivery("q", tag, Message(b"m", group="k" if tag % 2 else None), count, None, 1)
                           for tag, count in arg)
        return Deliveries(deliveries), "consumer"
    if op == "settle":
        settles = tuple(Settlement(kind, f"1:{tag}", seconds) for kind, tag, seconds in arg)
        return RunsEnded(settles, ()), Part.WORKERS
    if op == "acks":
        return Settles(tuple(Settlement(SettlementKind.ACK, f"1:{tag}") for tag in arg)), Part.WORKERS
    if op == "answer":
        acked, invalid = arg
        return AckResult(tuple(acked), tuple(invalid)), "consumer"
    if op == "expire":  # the leaser gave the lease up at the maximum
        return Settlement(SettlementKind.DROP, f"1:{arg}"), Part.LEASER
    return AckWithResponse(f"1:{arg}"), "asker"


@settings(max_examples=300, deadline=None)
@given(ops=OPS)
def test_the_batch_paths_tell_each_part_what_the_careful_paths_tell_it(ops: list[tuple[str, Any]]) -> None:
    fast, fast_context = _started(StreamingPullManager)
    careful, careful_context = _started(_Careful)
    for op, arg in ops:
        message, sender = _message(op, arg)
        for manager, context in ((fast, fast_context), (careful, careful_context)):
            context.sender = manager.parts[sender] if sender in manager.parts else _Ref(sender)
            manager.receive(message)
        assert _told(fast_context) == _told(careful_context), f"after {op} {arg}"
        assert fast.ledger.snapshot() == careful.ledger.snapshot()
        assert dict(fast.ledger.pending) == dict(careful.ledger.pending)
        assert fast.ledger.acking == careful.ledger.acking
        assert fast.askers.keys() == careful.askers.keys()


def test_a_jobs_acks_go_as_one_dones_and_one_acks_of_those_pending() -> None:
    manager, context = _started(StreamingPullManager)
    manager.receive(Deliveries(tuple(Delivery("q", tag, Message(b"m"), 1, None, 1) for tag in (1, 2, 3))))
    context.sent.clear()
    manager.receive(Settles(tuple(Settlement(SettlementKind.ACK, ack_id) for ack_id in ("1:1", "1:9", "1:3", "1:1"))))
    dones = Dones((Done("1:1", True), Done("1:3", True)))
    assert context.sent == [(manager.parts[Part.LOAD], dones), (manager.parts[Part.LEASER], dones),
                            (manager.parts[Part.DISPATCHER], Acks(("1:1", "1:3")))]
    assert dict(manager.ledger.pending) == {"1:2": 1}
    context.sent.clear()
    manager.receive(AckResult((1, 3), ()))
    assert context.sent == [] and manager.ledger.acking == {}, "the acks took: nothing more to do"


def test_an_ack_that_took_after_the_message_came_again_gives_that_credit_back() -> None:
    manager, context = _started(StreamingPullManager)
    manager.receive(Deliveries((Delivery("q", 4, Message(b"m"), 1, None, 1),)))
    manager.receive(Settles((Settlement(SettlementKind.ACK, "1:4"),)))
    manager.receive(Deliveries((Delivery("q", 4, Message(b"m"), 2, None, 1),)))  # covered by the ack on its way
    context.sent.clear()
    manager.receive(AckResult((4,), ()))
    assert context.sent == [(manager.consumer, Ack(1, (4,)))]
