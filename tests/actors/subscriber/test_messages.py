"""The subscriber's frozen messages and settings refuse bad values when built, naming class, field and allowed values.

Issue 15, item 7e: a value that cannot be iterated where a tuple belongs (``Lapsed(1.5)``) used to be
built and fail later in the actor that received it; an int too long for Python to print
(``10**5000``) used to break the error message itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conveyor.actors.broker import Delivery, Message
from conveyor.actors.subscriber import FlowControl, PulledBatch, SubscriberMessage
from conveyor.actors.subscriber._batching import AckRequest, DropRequest, Flush, ModAckRequest, NackRequest
from conveyor.actors.subscriber._protocol import (
    Acks,
    CallbackEnded,
    CallbacksEnded,
    Deliveries,
    Done,
    Dones,
    Extend,
    Lapsed,
    Received,
    ReceivedBatch,
    RunBatch,
    RunsEnded,
    Scheduled,
    Settles,
    acks_unchecked,
    callback_ended,
    done_unchecked,
    dones_unchecked,
    received_batch_unchecked,
    received_unchecked,
    settlement_of,
)
from conveyor.actors.subscriber._protocol import (
    Settlement as Settle,
)
from conveyor.actors.subscriber._protocol import (
    SettlementKind as SettleKind,
)
from conveyor.actors.subscriber._pull import SettlePulled
from conveyor.runtime import Actor, ActorRef, ensure_immutable
from conveyor.runtime.lowlevel import slot_setters
from conveyor.simulation import Simulation

HUGE = 10**5000
"""An int Python refuses to print (past its 4300-digit limit)."""
HUGE_QUOTED = "10000000000000000000... (5001 digits)"

_DELIVERY = Delivery("q", 1, Message(b"m"), 1, None, 1)


class _Idle(Actor):
    def receive(self, message: object) -> None:
        pass


def _ref() -> ActorRef:
    return Simulation(seed=0).spawn(_Idle)


NOT_ITERABLE: list[tuple[Callable[[], object], str]] = [
    (lambda: Lapsed(1.5), r"Lapsed\.ack_ids must be a tuple of ack ids \(str\), got 1\.5"),  # type: ignore[arg-type]
    (lambda: Lapsed((1,)), r"Lapsed\.ack_ids must be a tuple of ack ids \(str\), got \(1,\)"),  # type: ignore[arg-type]
    (lambda: Scheduled(1.5), r"Scheduled\.ack_ids must be a tuple of ack ids \(str\), got 1\.5"),  # type: ignore[arg-type]
    (lambda: Extend(1.5, 10.0), r"Extend\.ack_ids must be a tuple of ack ids \(str\), got 1\.5"),  # type: ignore[arg-type]
    (lambda: Deliveries(1.5), r"Deliveries\.deliveries must be a tuple of Delivery, got 1\.5"),  # type: ignore[arg-type]
    (lambda: Deliveries(("d",)), r"Deliveries\.deliveries must be a tuple of Delivery, got \('d',\)"),  # type: ignore[arg-type]
    (lambda: ReceivedBatch(1.5), r"ReceivedBatch\.items must be a tuple of Received, got 1\.5"),  # type: ignore[arg-type]
    (lambda: RunBatch(1.5), r"RunBatch\.runs must be a tuple of Received, got 1\.5"),  # type: ignore[arg-type]
    (lambda: RunsEnded(1.5, ()), r"RunsEnded\.settled must be a tuple of Settle, got 1\.5"),  # type: ignore[arg-type]
    (lambda: RunsEnded((), 1.5), r"RunsEnded\.ended must be a tuple of CallbackEnded, got 1\.5"),  # type: ignore[arg-type]
    (lambda: CallbacksEnded(1.5), r"CallbacksEnded\.items must be a tuple of CallbackEnded, got 1\.5"),  # type: ignore[arg-type]
    (lambda: Dones(1.5), r"Dones\.items must be a tuple of Done, got 1\.5"),  # type: ignore[arg-type]
    (lambda: Settles(1.5), r"Settles\.items must be a tuple of Settle, got 1\.5"),  # type: ignore[arg-type]
    (lambda: Acks(1.5), r"Acks\.ack_ids must be a tuple of ack ids \(str\), got 1\.5"),  # type: ignore[arg-type]
    (lambda: Acks((1,)), r"Acks\.ack_ids must be a tuple of ack ids \(str\), got \(1,\)"),  # type: ignore[arg-type]
    (lambda: Flush(acks=1.5), r"Flush\.acks must be a tuple of ack ids \(str\), got 1\.5"),  # type: ignore[arg-type]
    (lambda: Flush(nacks=(1,)), r"Flush\.nacks must be a tuple of ack ids \(str\), got \(1,\)"),  # type: ignore[arg-type]
    (lambda: Flush(drops=None), r"Flush\.drops must be a tuple of ack ids \(str\), got None"),  # type: ignore[arg-type]
    (
        lambda: Flush(modacks=1.5),  # type: ignore[arg-type]
        r"Flush\.modacks must be a tuple of \(seconds, ack ids\) pairs, got 1\.5",
    ),
    (
        lambda: Flush(modacks=((10.0, "1:1"),)),  # type: ignore[arg-type]
        r"Flush\.modacks must be a tuple of \(seconds, ack ids\) pairs, got \(\(10\.0, '1:1'\),\)",
    ),
    (
        lambda: Flush(nack_attempts=1.5),  # type: ignore[arg-type]
        r"Flush\.nack_attempts must be a tuple of delivery counts \(ints >= 0\), got 1\.5",
    ),
    (lambda: PulledBatch(_ref(), 1.5), r"PulledBatch\.messages must be a tuple of Delivery, got 1\.5"),  # type: ignore[arg-type]
    (lambda: SettlePulled(1.5), r"SettlePulled\.ack_ids must be a tuple of ack ids \(str\), got 1\.5"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("build", "pattern"), NOT_ITERABLE)
def test_a_field_that_must_be_a_tuple_refuses_what_is_not_one(build: Callable[[], object], pattern: str) -> None:
    with pytest.raises(TypeError, match=pattern):
        build()


def test_the_same_messages_built_right_are_accepted() -> None:
    settle = Settle(SettleKind.ACK, "1:1")
    ended = CallbackEnded("1:1", None)
    received = Received("1:1", 1, None, _DELIVERY)
    built = [
        Lapsed(("1:1",)), Scheduled(("1:1",)), Extend(("1:1",), 10.0), Deliveries((_DELIVERY,)),
        ReceivedBatch((received,)), RunBatch((received,)), RunsEnded((settle,), (ended,)), CallbacksEnded((ended,)),
        Dones((Done("1:1"),)), Settles((settle,)), Flush(acks=("1:1",), modacks=((10.0, ("1:2",)),)),
        PulledBatch(_ref(), (_DELIVERY,)), SettlePulled(("1:1",)), Acks(("1:1",)),
    ]
    assert len(built) == 14


@pytest.mark.parametrize(
    ("build", "pattern"),
    [
        (lambda: FlowControl(max_messages=-HUGE), r"FlowControl\.max_messages must be an int >= 1, got -1"),
        (lambda: FlowControl(max_lease_duration_s=HUGE), r"FlowControl\.max_lease_duration_s must be a finite number"),
        (lambda: FlowControl(resume_threshold=HUGE), r"FlowControl\.resume_threshold must be a number in \(0, 1\]"),
        (lambda: ModAckRequest("1:1", HUGE), r"ModAckRequest\.seconds must be a finite number >= 0"),
        (lambda: NackRequest("1:1", -HUGE), r"NackRequest\.attempt must be an int >= 0"),
        (lambda: AckRequest(HUGE), r"AckRequest\.ack_id must be a str"),  # type: ignore[arg-type]
        (lambda: DropRequest(HUGE), r"DropRequest\.ack_id must be a str"),  # type: ignore[arg-type]
    ],
)
def test_an_int_too_long_to_print_is_quoted_by_its_first_digits(build: Callable[[], object], pattern: str) -> None:
    with pytest.raises((TypeError, ValueError)) as caught:
        build()
    text = str(caught.value)
    assert re.search(pattern, text), text
    assert HUGE_QUOTED in text, text
    assert len(text) < 300


_IDS = st.text(min_size=1, max_size=12)
_KEYS = st.none() | st.text(max_size=6)


@given(ack_id=_IDS, key=_KEYS, error=st.none() | st.text(max_size=20), nacked=st.booleans())
def test_a_callback_end_built_unchecked_is_the_checked_one(
    ack_id: str, key: str | None, error: str | None, nacked: bool
) -> None:
    """The worker pool's unchecked build of ``CallbackEnded`` makes the same frozen, immutable message."""
    quick, checked = callback_ended(ack_id, key, error, nacked), CallbackEnded(ack_id, key, error, nacked)
    assert type(quick) is CallbackEnded
    assert (quick, hash(quick), repr(quick)) == (checked, hash(checked), repr(checked))
    ensure_immutable(quick)  # what a send checks
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        quick.nacked = not nacked  # type: ignore[misc]


@given(kind=st.sampled_from(SettleKind), ack_id=_IDS)
def test_a_settlement_built_unchecked_is_the_checked_one(kind: SettleKind, ack_id: str) -> None:
    """``SubscriberMessage``'s unchecked build of a ``Settlement`` makes the same frozen, immutable message."""
    quick, checked = settlement_of(kind, ack_id), Settle(kind, ack_id)
    assert type(quick) is Settle
    assert (quick, hash(quick), repr(quick)) == (checked, hash(checked), repr(checked))
    ensure_immutable(quick)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        quick.ack_id = "other"  # type: ignore[misc]


def test_an_unchecked_builder_must_name_every_field_of_its_message_in_order() -> None:
    """A field added to ``CallbackEnded`` or ``Settlement`` later fails at import, not as a message left half built."""
    with pytest.raises(TypeError, match=r"CallbackEnded has the fields .*; its unchecked builder sets \('ack_id', 'k"):
        slot_setters(CallbackEnded, ("ack_id", "key"))
    with pytest.raises(TypeError, match="Settlement has the fields"):
        slot_setters(Settle, ("ack_id", "kind", "seconds", "attempt", "error"))


def test_a_subscriber_message_reads_its_attributes_from_the_headers_once() -> None:
    """``attributes`` is made on first use: the headers as a dict, the same dict on every read (a change stays)."""
    delivery = Delivery("q", 4, Message(b"m", headers=(("color", "red"), ("n", 2))), 1, None, 3)
    message = SubscriberMessage(delivery, lambda settlement: None)
    assert message.attributes == {"color": "red", "n": 2}
    message.attributes["added"] = True
    assert message.attributes == {"color": "red", "n": 2, "added": True}
    assert SubscriberMessage(delivery, lambda settlement: None).attributes == {"color": "red", "n": 2}
    assert message.ack_id == "3:4"
    assert SubscriberMessage(delivery, lambda settlement: None, None, "3:4").ack_id == "3:4"


# ---------------------------------------------------------------------- built without the check


ACK_ID_TEXT = st.text(max_size=8)
KEYS = st.one_of(st.none(), st.text(min_size=1, max_size=4))
DELIVERIES = st.builds(
    lambda tag, count, key: Delivery("q", tag, Message(b"m" * tag, group=key), count, None, 1),
    st.integers(1, 50), st.integers(1, 5), KEYS,
)


@given(ack_id=ACK_ID_TEXT, size=st.integers(0, 10**6), key=KEYS, delivery=DELIVERIES, acked=st.booleans(),
       ids=st.lists(ACK_ID_TEXT, max_size=5))
def test_a_message_built_without_the_check_is_the_one_its_constructor_builds(
    ack_id: str, size: int, key: str | None, delivery: Delivery, acked: bool, ids: list[str]
) -> None:
    received = Received(ack_id, size, key, delivery)
    pairs: list[tuple[Any, Any]] = [
        (received_unchecked(ack_id, size, key, delivery), received),
        (done_unchecked(ack_id, acked), Done(ack_id, acked)),
        (dones_unchecked(ids, acked), Dones(tuple(Done(each, acked) for each in ids))),
        (received_batch_unchecked((received, received)), ReceivedBatch((received, received))),
        (acks_unchecked(tuple(ids)), Acks(tuple(ids))),
    ]
    for fast, checked in pairs:
        assert type(fast) is type(checked)
        assert fast == checked and hash(fast) == hash(checked) and repr(fast) == repr(checked)
        assert attrs.asdict(fast, recurse=False) == attrs.asdict(checked, recurse=False)
        ensure_immutable(fast)
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            setattr(fast, attrs.fields(type(fast))[0].name, "changed")
