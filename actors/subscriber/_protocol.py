"""Messages between the subscriber's actors (seed 003's components, made actors)."""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from typing import final

import attrs

from conveyor.actors.broker import Delivery, DeliveryError
from conveyor.runtime import ActorRef, quote
from conveyor.runtime.lowlevel import checked_when_built, slot_setters, unchecked_builder

ACK_IDS = "ack ids (str)"


def ack_id_of(delivery: Delivery) -> str:
    """The subscriber's name for a delivery: ``consumer_id:tag``."""
    return f"{delivery.consumer_id}:{delivery.tag}"


def check_tuple(owner: str, field: str, value: object, item: type, allowed: str) -> None:
    """Refuse a field that is not a tuple of ``item`` instances (a float, None, a list), naming it.

    For the tuple fields of the subscriber's frozen messages, checked when each is built: a value
    that is not one would otherwise be built and fail later, in the actor that iterates it.

    Raises:
        TypeError: ``owner.field must be a tuple of <allowed>, got <a short prefix of value>``.
    """
    if type(value) is tuple:
        for each in value:  # a plain loop: cheaper than all() over a generator, on a per-batch path
            if type(each) is not item:
                break
        else:
            return
    msg = f"{owner}.{field} must be a tuple of {allowed}, got {quote(value)}"
    raise TypeError(msg)


def split_ack_id(ack_id: str) -> tuple[int, int]:
    """(consumer_id, tag) from an ack id."""
    consumer, _, tag = ack_id.partition(":")
    return int(consumer), int(tag)


class SettlementKind(enum.Enum):
    """What user code decided about a message (the Pub/Sub front's ``SettleKind`` is a client's request)."""

    ACK = "ack"
    NACK = "nack"
    MODACK = "modack"
    DROP = "drop"


@final
@checked_when_built
@attrs.frozen
class Settlement:
    """User code (through ``SubscriberMessage``) or the leaser settles a message (not the front's ``Settle``)."""

    kind: SettlementKind
    ack_id: str
    seconds: float = 0.0
    attempt: int = 0
    """For a nack: the ``delivery_count`` of the delivery it is for (the newest one held here), set by
    the manager; 0 means not known, and the broker then nacks whatever delivery is current."""
    error: DeliveryError | None = None
    """For the nack of a callback that raised: why, as data (the queue puts it on the dead letter)."""


@final
@checked_when_built
@attrs.frozen
class Received:
    """The manager received a delivery: for the load controller, leaser and ordered-key handler."""

    ack_id: str
    size: int
    key: str | None
    delivery: Delivery


@final
@checked_when_built
@attrs.frozen
class Run:
    """Ordered-key handler -> worker pool: run the callback on this delivery now."""

    ack_id: str
    key: str | None
    delivery: Delivery


@final
@checked_when_built
@attrs.frozen
class CallbackEnded:
    """Worker pool -> manager: the callback returned (or raised ``error``)."""

    ack_id: str
    key: str | None
    error: str | None = None
    nacked: bool = False
    """The callback nacked (or raised): held messages of its key go back too, to keep key order."""


@final
@checked_when_built
@attrs.frozen
class Done:
    """Manager -> load controller and leaser: the message is settled (or dropped); forget it."""

    ack_id: str
    acked: bool = False
    """Only acked messages feed the leaser's processing-time histogram."""


@final
@attrs.frozen
class Drain:
    """Manager -> dispatcher: hand over everything batched, then say ``Drained``."""


@final
@attrs.frozen
class Drained:
    """Dispatcher -> manager: nothing is batched any more."""


@final
@attrs.frozen
class Tick:
    """A component's own timer."""


@final
@attrs.frozen
class Cancel:
    """Stop receiving: send what is batched, then stop; the queue takes back everything not acked."""


@final
@attrs.frozen
class Heartbeat:
    """Heartbeater -> manager, every ``heartbeat_s``."""


@final
@attrs.frozen
class AckWithResponse:
    """Ack ``ack_id`` now (not batched) and answer ``AckResponse`` once the queue confirms."""

    ack_id: str


@final
@attrs.frozen
class AckResponse:
    """The queue's word on an ``ack_with_response``: True if the ack took (the lease was still held)."""

    ack_id: str
    success: bool


@final
@attrs.frozen
class CallbackStarted:
    """Note for checkers: the worker pool handed this message to the user's callback."""

    ack_id: str
    key: str | None
    tag: int
    attempt: int
    after: str | None = None
    """In a key run: the ack id of the message of the same key this one runs right after, in the same job
    (it starts only once that callback has ended, or not at all if that one nacked)."""


@final
@attrs.frozen
class FenceLifted:
    """Ordered-key handler's timer: give up waiting for the messages of ``key`` sent back by fence ``fence``."""

    key: str
    fence: int


@final
@attrs.frozen
class StopRunning:
    """Manager -> worker pool on cancel: start no more callbacks (send their messages back); say ``Idle``."""


@final
@attrs.frozen
class Idle:
    """Worker pool -> manager: no callback runs any more."""


@final
@attrs.frozen
class GraceOver:
    """The manager's timer on a cancel that does not await callbacks: stop now, whatever still runs."""


@final
@checked_when_built
@attrs.frozen
class Lapsed:
    """Leaser -> manager -> ordered-key handler -> worker pool: the queue took these messages back.

    Their last requested lease deadline passed before the leaser could extend it (the process was
    paused, or its clock jumped). The copies the subscription holds are stale: one that has not
    started is forgotten (and its key fenced), one that runs settles as usual.
    """

    ack_ids: tuple[str, ...]

    def __attrs_post_init__(self) -> None:
        check_tuple("Lapsed", "ack_ids", self.ack_ids, str, ACK_IDS)


@final
@checked_when_built
@attrs.frozen
class Scheduled:
    """Ordered-key handler -> manager -> leaser: these keyed messages were handed to the worker pool.

    Their callbacks are scheduled now, so their max-lease clocks start (``LeaseTable.start_clock``):
    a keyed message may wait on hold behind its key for longer than ``max_lease_duration_s``, and is
    kept leased, never given up, while it waits. An unordered message is scheduled as it arrives, so
    the leaser starts its clock on ``Received``.
    """

    ack_ids: tuple[str, ...]

    def __attrs_post_init__(self) -> None:
        check_tuple("Scheduled", "ack_ids", self.ack_ids, str, ACK_IDS)


@final
@attrs.frozen
class Skipped:
    """Worker pool -> manager -> ordered-key handler: a lapsed message taken off the pool's queue unstarted.

    The manager forgets it (the queue redelivers it); the key handler treats its key as it treats a
    nacked one: later messages of the key wait for its redelivery.
    """

    ack_id: str
    key: str | None


@final
@attrs.frozen
class Redelivered:
    """Manager -> leaser: the queue delivered a message again that the subscription still holds.

    Its lease had lapsed and the queue gave it back to this subscription under the same ack id;
    the copy already here stays the one that runs, and the new lease is extended at once.
    """

    ack_id: str


@final
@checked_when_built
@attrs.frozen
class Deliveries:
    """A consumer -> manager: several deliveries at once (one batch off a stream), taken in order.

    The same as one ``Delivery`` message each, with one actor message per batch instead of per
    delivery; the manager fans the batch out as one ``ReceivedBatch`` per component.
    """

    deliveries: tuple[Delivery, ...]

    def __attrs_post_init__(self) -> None:
        check_tuple("Deliveries", "deliveries", self.deliveries, Delivery, "Delivery")


@final
@checked_when_built
@attrs.frozen
class ReceivedBatch:
    """Manager -> load controller, leaser and ordered-key handler: several ``Received`` at once, in order."""

    items: tuple[Received, ...]

    def __attrs_post_init__(self) -> None:
        check_tuple("ReceivedBatch", "items", self.items, Received, "Received")


@final
@checked_when_built
@attrs.frozen
class Extend:
    """Leaser -> manager -> dispatcher: extend the leases of ``ack_ids`` by ``seconds`` (one ``MODACK`` each)."""

    ack_ids: tuple[str, ...]
    seconds: float

    def __attrs_post_init__(self) -> None:
        check_tuple("Extend", "ack_ids", self.ack_ids, str, ACK_IDS)


@final
@checked_when_built
@attrs.frozen
class RunBatch:
    """Ordered-key handler -> worker pool: run the callbacks on several messages now, in order.

    Each is the ``Received`` the key handler kept for it (its ack id, key and delivery, what a ``Run``
    carries): no ``Run`` is built per message, with 1,000 keys nearly every message comes this way.
    """

    runs: tuple[Received, ...]

    def __attrs_post_init__(self) -> None:
        check_tuple("RunBatch", "runs", self.runs, Received, "Received")


@final
@checked_when_built
@attrs.frozen
class RunsEnded:
    """Worker pool -> manager: a job of several callbacks ended.

    ``settled`` are the settlements its callbacks made on the job's own thread that it has not
    handed over yet (a long job hands them over in ``Settles`` as it goes), in order; ``ended``
    says how each callback ended.
    """

    settled: tuple[Settlement, ...]
    ended: tuple[CallbackEnded, ...]

    def __attrs_post_init__(self) -> None:
        check_tuple("RunsEnded", "settled", self.settled, Settlement, "Settle")
        check_tuple("RunsEnded", "ended", self.ended, CallbackEnded, "CallbackEnded")


@final
@checked_when_built
@attrs.frozen
class CallbacksEnded:
    """Manager -> ordered-key handler: several ``CallbackEnded`` at once, in order."""

    items: tuple[CallbackEnded, ...]

    def __attrs_post_init__(self) -> None:
        check_tuple("CallbacksEnded", "items", self.items, CallbackEnded, "CallbackEnded")


@final
@checked_when_built
@attrs.frozen
class Dones:
    """Manager -> load controller and leaser: several ``Done`` at once."""

    items: tuple[Done, ...]

    def __attrs_post_init__(self) -> None:
        check_tuple("Dones", "items", self.items, Done, "Done")


@final
@checked_when_built
@attrs.frozen
class Settles:
    """Several ``Settlement`` at once, in order: a worker job's to the manager, the manager's to the dispatcher."""

    items: tuple[Settlement, ...]

    def __attrs_post_init__(self) -> None:
        check_tuple("Settles", "items", self.items, Settlement, "Settle")


@final
@attrs.frozen
class SourceGone:
    """Broker consumer -> manager: the source cannot be consumed any more (a deleted subscription).

    The manager stops as it does on ``cancel()`` and then fails with ``reason``, so that
    ``Subscription.result()`` raises it rather than the subscription retrying for ever.
    """

    reason: str


@final
@attrs.frozen
class GetSubscriptionStats:
    """Ask the manager for its counts; it answers ``SubscriptionStats``."""


@final
@attrs.frozen
class SubscriptionStats:
    """The manager's counts: messages received and not settled yet, heartbeats, and leases extended."""

    pending: int
    heartbeats: int
    lease_extensions: int = 0
    """Lease extensions (one per message and extension) the manager passed on for messages it still held."""


@final
@attrs.frozen
class GetFlowStats:
    """Ask the manager for its flow control's budget; its load controller answers ``FlowStats`` to ``reply_to``.

    ``reply_to`` is filled in by the manager (the asker); leave it None.
    """

    reply_to: ActorRef | None = None


@final
@checked_when_built
@attrs.frozen
class Acks:
    """Manager -> dispatcher: a worker job's acks of messages pending here, in order (one ``ACK`` each).

    The same as a ``Settles`` of ``Settlement(ACK, ack_id)`` each, for the common batch: every
    settlement of a job an ack that settled its message.
    """

    ack_ids: tuple[str, ...]

    def __attrs_post_init__(self) -> None:
        check_tuple("Acks", "ack_ids", self.ack_ids, str, ACK_IDS)


# --- built without the check, from values known good ------------------------------------------------
# The subscriber's own actors build some messages per delivery from values they know are good (an ack
# id they made, a delivery's own size and key, a callback's decision). These builders fill the fields of
# such a message straight, without the checks of its constructor (``checked_when_built`` and
# ``check_tuple``), which cost more than the rest of its handling. The result is the same frozen value,
# equal to the one the constructor builds: it is still immutable (every field a known immutable leaf), so
# sends still treat it as one. Never for a value from outside the subscriber's actors.

_new = object.__new__


_SETTLEMENT_SETTERS = slot_setters(Settlement, ("kind", "ack_id", "seconds", "attempt", "error"))
_DONE_FIELDS = slot_setters(Done, ("ack_id", "acked"))
(_SET_DONES_ITEMS,) = slot_setters(Dones, ("items",))

callback_ended: Callable[[str, str | None, str | None, bool], CallbackEnded] = unchecked_builder(
    CallbackEnded, ("ack_id", "key", "error", "nacked"))
"""``CallbackEnded(ack_id, key, error, nacked)`` without ``checked_when_built``'s check, which costs half its
build: for the worker pool, one per callback, from values known good (strs or None, and a bool)."""


def settlement_of(kind: SettlementKind, ack_id: str) -> Settlement:
    """A ``Settlement`` of ``kind`` for ``ack_id`` (no seconds, attempt or error), built without the check.

    For ``SubscriberMessage``, one per callback's decision, from an enum member and the str it made
    itself. Equal to ``Settlement(kind, ack_id)``.
    """
    set_kind, set_ack_id, set_seconds, set_attempt, set_error = _SETTLEMENT_SETTERS
    settlement = _new(Settlement)
    set_kind(settlement, kind)
    set_ack_id(settlement, ack_id)
    set_seconds(settlement, 0.0)
    set_attempt(settlement, 0)
    set_error(settlement, None)
    return settlement


received_unchecked: Callable[[str, int, str | None, Delivery], Received] = unchecked_builder(
    Received, ("ack_id", "size", "key", "delivery"))
"""``Received(ack_id, size, key, delivery)``, for values known good (the manager's, of a checked Delivery)."""

done_unchecked: Callable[[str, bool], Done] = unchecked_builder(Done, ("ack_id", "acked"))
"""``Done(ack_id, acked)``, for an ack id known to be a str and ``acked`` a bool."""


def dones_unchecked(ack_ids: Iterable[str], acked: bool) -> Dones:
    """``Dones`` of one ``Done(ack_id, acked)`` per id, for ids known to be str and ``acked`` a bool."""
    set_ack_id, set_acked = _DONE_FIELDS
    items = []
    for ack_id in ack_ids:
        done: Done = _new(Done)
        set_ack_id(done, ack_id)
        set_acked(done, acked)
        items.append(done)
    dones: Dones = _new(Dones)
    _SET_DONES_ITEMS(dones, tuple(items))
    return dones


received_batch_unchecked: Callable[[tuple[Received, ...]], ReceivedBatch] = unchecked_builder(
    ReceivedBatch, ("items",))
"""``ReceivedBatch(items)``, for a tuple known to hold only ``Received``."""

acks_unchecked: Callable[[tuple[str, ...]], Acks] = unchecked_builder(Acks, ("ack_ids",))
"""``Acks(ack_ids)``, for a tuple known to hold only str."""
