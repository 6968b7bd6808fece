"""A work-queue callback that raises makes noise: a WARNING with its traceback, and a dead letter that says why.

The error travels as data (``DeliveryError``) from the job that ran the callback, through the
consumer's ``Nack``, into the queue's entry, and onto the dead letter as headers; a durable queue
keeps it through a crash (its journal and its snapshots carry it).
"""

from __future__ import annotations

import logging
import traceback

import attrs
import pytest

from conveyor.actors.broker import (
    DEAD_LETTER_QUEUE,
    DEAD_LETTER_REASON,
    DELIVERY_COUNT,
    LAST_ERROR,
    LAST_ERROR_TYPE,
    ConsumerActor,
    ConsumerSettings,
    Delivery,
    DeliveryError,
    EntryList,
    GetStats,
    Message,
    Nack,
    Publish,
    QueueActor,
    QueueConfig,
)
from conveyor.actors.broker._entries import EntryListSnapshot
from conveyor.runtime import EventKind
from tests.actors.broker.clients import Action, Send, consume, seen
from tests.actors.broker.test_durable import CrashableQueue, CrashNow
from tests.conftest import Harness


class PoisonError(Exception):
    """What the test callback raises."""


def poisoned(delivery: Delivery) -> None:
    msg = f"cannot handle {delivery.message.body!r}"
    raise PoisonError(msg)


async def test_a_raising_callback_is_logged_and_its_dead_letter_carries_the_error(
    backend: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="conveyor.broker")
    dlq = backend.spawn(lambda: QueueActor(QueueConfig("dlq")), name="dlq")
    queue = backend.spawn(lambda: QueueActor(QueueConfig("work", max_deliveries=2, dead_letter=dlq)), name="work")
    backend.spawn(lambda: ConsumerActor(queue, poisoned), name="worker")
    await backend.quiet()
    queue.tell(Publish(Message(b"poison", message_id="m-7")))
    await backend.wait_until(lambda: len([r for r in caplog.records if r.name == "conveyor.broker"]) >= 2)
    await backend.quiet()

    warnings = [r for r in caplog.records if r.name == "conveyor.broker"]
    assert [r.levelno for r in warnings] == [logging.WARNING, logging.WARNING]
    for attempt, record in enumerate(warnings, start=1):
        assert record.getMessage() == (
            f"callback raised on message 'm-7' (queue work, tag 1, delivery {attempt}); nacking it"
        )
        assert record.exc_info is not None and record.exc_info[0] is PoisonError
        assert "in poisoned" in "".join(traceback.format_exception(*record.exc_info))

    client, _ = consume(backend, dlq)
    await backend.quiet()
    [letter] = [s.delivery.message for s in await seen(backend, client)]
    assert letter.header_map() == {
        DEAD_LETTER_REASON: "delivery-limit",
        DEAD_LETTER_QUEUE: "work",
        DELIVERY_COUNT: 2,
        LAST_ERROR_TYPE: "PoisonError",
        LAST_ERROR: "cannot handle b'poison'",
    }


async def test_a_durable_queue_keeps_the_last_error_through_a_crash(backend: Harness) -> None:
    dlq = backend.spawn(lambda: QueueActor(QueueConfig("dlq")), name="dlq")
    config = QueueConfig("q", durable=True, max_deliveries=2, ack_deadline_s=0.5, dead_letter=dlq)
    queue = backend.spawn(lambda: CrashableQueue(config), name="q")
    client, _ = consume(backend, queue, Action.IGNORE)
    await backend.quiet()
    queue.tell(Publish(Message(b"m")))
    await backend.quiet()
    [first] = await seen(backend, client)
    error = DeliveryError("KeyError", "'sku'")
    await backend.ask(client, Send(Nack(first.delivery.consumer_id, (first.delivery.tag,), errors=(error,))))
    await backend.quiet()  # delivered again, and held
    queue.tell(CrashNow())  # the restarted queue rebuilds the entry, its last error included, from the journal
    await backend.elapse(1.0)  # the second delivery's lease lapses: the limit is reached
    await backend.quiet()
    assert (await backend.ask(dlq, GetStats())).published == 1
    reader, _ = consume(backend, dlq)
    await backend.quiet()
    [letter] = [s.delivery.message for s in await seen(backend, reader)]
    assert (letter.header_map()[LAST_ERROR_TYPE], letter.header_map()[LAST_ERROR]) == ("KeyError", "'sku'")


def test_an_error_is_kept_short_and_validated() -> None:
    error = DeliveryError.of(ValueError("x" * 5000))
    assert error.error_type == "ValueError"
    assert len(error.text) <= DeliveryError.TEXT_LIMIT and error.text.startswith("xxx")
    with pytest.raises(ValueError, match=r"DeliveryError\.error_type must be a non-empty str, got ''"):
        DeliveryError("", "text")
    with pytest.raises(ValueError, match=r"Nack\.errors must be empty or one DeliveryError or None per tag \(2\)"):
        Nack(1, (1, 2), errors=(error,))
    with pytest.raises(ValueError, match=r"Nack\.errors must be empty or one DeliveryError or None per tag"):
        Nack(1, (1,), errors=("boom",))  # type: ignore[arg-type]


def test_a_snapshot_made_before_errors_existed_still_restores() -> None:
    core = EntryList()
    core.add_consumer(1, ConsumerSettings().selector, 0, True)
    core.publish(Message(b"m"), 0.0)
    core.take(1, 0.0, 1, 1 << 20, 10.0)
    full = core.snapshot()
    old = EntryListSnapshot(**{a.name: getattr(full, a.name) for a in attrs.fields(EntryListSnapshot)
                               if a.name != "errors"})  # as one written before the field existed
    rebuilt = EntryList()
    rebuilt.restore(old)
    entry = rebuilt.get(1)
    assert entry is not None and entry.last_error is None and entry.consumer == 1


async def test_a_browser_callback_neither_crashes_its_consumer_nor_goes_unheard(
    backend: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    # A browser's jobs were not recorded, so each JobDone / JobFailed crashed its consumer (KeyError).
    caplog.set_level(logging.WARNING, logger="conveyor.broker")
    looked: list[bytes] = []

    def look(delivery: Delivery) -> None:
        looked.append(delivery.message.body)  # list.append is atomic: jobs may run on several threads
        if delivery.message.body == b"1":
            raise PoisonError("cannot look at it")

    queue = backend.spawn(lambda: QueueActor(QueueConfig("q")), name="q")
    backend.spawn(lambda: ConsumerActor(queue, look, ConsumerSettings(acquiring=False)), name="browser")
    await backend.quiet()
    for n in range(3):
        queue.tell(Publish(Message(str(n).encode())))
    await backend.wait_until(lambda: len(looked) == 3 and any(r.name == "conveyor.broker" for r in caplog.records))
    await backend.quiet()
    assert sorted(looked) == [b"0", b"1", b"2"]
    assert [e for e in backend.trace if e.kind in (EventKind.FAILED, EventKind.RESTARTED)] == []
    [warning] = [r for r in caplog.records if r.name == "conveyor.broker"]
    assert warning.getMessage() == "callback raised on a browsed message of /q; it stays in the queue"
    stats = await backend.ask(queue, GetStats())
    assert (stats.depth, stats.acked) == (3, 0)
