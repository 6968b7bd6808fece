"""A subscriber callback that raises makes noise: a WARNING with traceback and message id, a dead letter saying why.

Both ways a worker runs callbacks are covered: one callback per job, and several unordered
callbacks in turn in one job (when more wait than there are free workers).
"""

from __future__ import annotations

import logging
import traceback

import pytest

from conveyor.actors.broker import (
    LAST_ERROR,
    LAST_ERROR_TYPE,
    DeliveryError,
    GetStats,
    Message,
    Publish,
    QueueActor,
    QueueConfig,
)
from conveyor.actors.subscriber import StreamingPullManager, SubscriberMessage
from tests.actors.broker.clients import consume, seen
from tests.conftest import Harness


class RefusedError(Exception):
    """What the test callback raises."""


def refuse(message: SubscriberMessage) -> None:
    msg = f"will not take {message.data!r}"
    raise RefusedError(msg)


@pytest.mark.parametrize("messages", [1, 6], ids=["one-per-job", "several-per-job"])
async def test_a_raising_callback_is_logged_and_its_dead_letter_carries_the_error(
    backend: Harness, caplog: pytest.LogCaptureFixture, messages: int
) -> None:
    caplog.set_level(logging.WARNING, logger="conveyor.subscriber")
    dlq = backend.spawn(lambda: QueueActor(QueueConfig("dlq")), name="dlq")
    queue = backend.spawn(lambda: QueueActor(QueueConfig("q", ack_deadline_s=30, max_deliveries=2, dead_letter=dlq)),
                          name="q")
    backend.spawn(lambda: StreamingPullManager(queue, refuse, workers=1, callbacks_per_job=8), name="sub")
    await backend.quiet()
    for n in range(messages):
        queue.tell(Publish(Message(f"{n}".encode(), message_id=f"m-{n}")))

    def warned() -> int:
        return len([r for r in caplog.records if r.name == "conveyor.subscriber"])

    await backend.wait_until(lambda: warned() == 2 * messages, timeout=20.0)
    for _ in range(400):  # the second nacks may still be on their way to the queue: up to 20 s
        if (await backend.ask(dlq, GetStats())).published == messages:
            break
        await backend.elapse(0.05)

    records = [r for r in caplog.records if r.name == "conveyor.subscriber"]
    assert {r.levelno for r in records} == {logging.WARNING}
    for record in records:
        assert record.exc_info is not None and record.exc_info[0] is RefusedError
        assert "in refuse" in "".join(traceback.format_exception(*record.exc_info))
    said = sorted(r.getMessage() for r in records)
    assert said == sorted(
        f"subscriber callback raised on message 'm-{n}' (ack id 1:{n + 1}, delivery {attempt}); nacking it"
        for n in range(messages) for attempt in (1, 2)
    )
    reader, _ = consume(backend, dlq)
    await backend.quiet()
    letters = {s.delivery.message.message_id: s.delivery.message.header_map() for s in await seen(backend, reader)}
    assert {mid: (h[LAST_ERROR_TYPE], h[LAST_ERROR]) for mid, h in letters.items()} == {
        f"m-{n}": ("RefusedError", f"will not take b'{n}'") for n in range(messages)
    }


def test_a_nack_error_must_be_an_exception() -> None:
    from conveyor.actors.broker import Delivery

    sent: list[object] = []
    message = SubscriberMessage(Delivery("q", 1, Message(b"x"), 1, None, 1), sent.append)
    with pytest.raises(TypeError, match=r"nack error must be an exception \(or None\), got str"):
        message.nack("it broke")  # type: ignore[arg-type]
    message.nack(KeyError("sku"))
    message.nack(ValueError("later"))  # the first decision stands
    assert [(s.kind.value, s.error) for s in sent] == [("nack", DeliveryError("KeyError", "'sku'"))]  # type: ignore[attr-defined]


def test_a_zero_deadline_is_the_nack_that_decides() -> None:
    """``modify_ack_deadline(0)`` is Pub/Sub's nack: it is the message's decision, so a drop or ack after it does
    nothing (the key handler reads the decision to hold the key's later messages)."""
    from conveyor.actors.broker import Delivery

    sent: list[object] = []
    message = SubscriberMessage(Delivery("q", 1, Message(b"x"), 1, None, 1), sent.append)
    message.modify_ack_deadline(5)
    assert message.decision is None  # an extension decides nothing
    message.modify_ack_deadline(0)
    message.drop()
    message.ack()
    assert message.decision is not None and message.decision.value == "nack"
    assert [s.kind.value for s in sent] == ["modack", "nack"]
