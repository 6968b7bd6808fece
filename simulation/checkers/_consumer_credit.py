"""A consumer asks for exactly the credit its client has left (docs/broker.md, prefetch), judged from both sides.

A ``ConsumerActor`` holds at most ``prefetch_messages`` unsettled deliveries: each ``Pull`` it
sends asks for ``prefetch`` minus the deliveries its client holds. What the client holds is
rebuilt from the kernel's record of the consumer's traffic: a ``Delivered`` batch from the queue
adds its tags (a lapsed lease delivered again counts once), and the client's ``Ack``, ``Release``,
``ModifyAckDeadline`` of 0 s and ``Nack`` take them back (a nack for an older delivery than the
latest one of its tag, a stale nack, takes back nothing: the queue ignores it); a callback client's
answer is its job's outcome (``callback_answer``). A consumer that
keeps a settled delivery counted starves its client; one that frees a delivery still held
overfills it.
"""

from __future__ import annotations

from collections.abc import Iterable

from conveyor.actors.broker import Ack, Delivered, ModifyAckDeadline, Nack, Pull, Release
from conveyor.runtime import EventKind, TraceEvent

from ._history import callback_answer
from ._result import CheckResult

_CONSUMER = "/consumer"


def consumer_credit(trace: Iterable[TraceEvent], prefetch: int, browsers: tuple[str, ...] = ()) -> CheckResult:
    """Each acquiring consumer's ``Pull`` asks for ``prefetch`` minus what its client holds unsettled."""
    held: dict[str, dict[int, int]] = {}  # consumer path -> tag -> its latest delivery count
    violations: list[str] = []
    judged = 0
    for event in trace:
        kind = event.kind
        receiver = event.receiver
        if kind is EventKind.DELIVERED and receiver is not None and receiver.endswith(_CONSUMER):
            message = event.message
            cls = type(message)
            if cls is Delivered:
                tags = held.setdefault(receiver, {})
                for delivery in message.deliveries:
                    tags[delivery.tag] = delivery.delivery_count
            elif cls is Ack or cls is Release or (cls is ModifyAckDeadline and message.seconds == 0):
                tags = held.get(receiver, {})
                for tag in message.tags:
                    tags.pop(tag, None)
            elif cls is Nack:
                tags = held.get(receiver, {})
                attempts = message.attempts or (0,) * len(message.tags)
                for tag, attempt in zip(message.tags, attempts, strict=True):
                    if not message.attempts or attempt >= tags.get(tag, 1):
                        tags.pop(tag, None)
        elif kind is EventKind.JOB_DONE and (answered := callback_answer(event)) is not None:
            _, handled, outcome = answered  # a callback client's answer: its job's outcome, at its consumer
            tags = held.get(f"{answered[0]}{_CONSUMER}", {})
            if outcome == "ack" or handled.attempt >= tags.get(handled.tag, 1):
                tags.pop(handled.tag, None)
        elif kind in (EventKind.RESTARTED, EventKind.STOPPED) and receiver is not None:
            held.pop(receiver, None)
        elif kind is EventKind.SENT and type(event.message) is Pull:
            sender = event.sender
            if sender is None or not sender.endswith(_CONSUMER) or sender.startswith(browsers):
                continue
            judged += 1
            holding = len(held.get(sender, {}))
            asked = event.message.max_messages
            if asked != prefetch - holding:
                violations.append(f"t={event.time:g}: {sender} pulled for {asked} with its client holding {holding} "
                                  f"unsettled deliveries of a prefetch of {prefetch}")
    return CheckResult.of("consumer_credit", violations, judged=judged)
