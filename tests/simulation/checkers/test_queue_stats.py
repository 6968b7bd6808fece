"""``queue_stats`` on hand-made histories: the counters a queue reports against what its clients noted."""

from __future__ import annotations

from typing import Any

import attrs

from conveyor.actors.broker import ConsumerStats, Message, QueueStats
from conveyor.runtime import EventKind, TraceEvent
from conveyor.simulation.checkers import (
    DeliveryReceived,
    EnqueueAnswered,
    EnqueueSent,
    QueueStatsRead,
    queue_stats,
)

QUEUE = "/queue"


def _note(note: object) -> TraceEvent:
    return TraceEvent(EventKind.NOTE, 0.0, "/client", None, note)


def _history(ttl: float | None = None) -> list[TraceEvent]:
    """Three messages published and confirmed, a fourth refused; consumer 1 was given two, consumer 2 one."""
    sent = tuple(Message(b"x", message_id=f"m{i}", ttl_s=ttl) for i in range(4))
    return [
        _note(EnqueueSent(QUEUE, tuple(m.message_id or "" for m in sent), sent)),
        _note(EnqueueAnswered(QUEUE, ("m0", "m1", "m2"), ("m3",))),
        _note(DeliveryReceived(QUEUE, 1, 1, "m0", 1)),
        _note(DeliveryReceived(QUEUE, 1, 2, "m1", 1)),
        _note(DeliveryReceived(QUEUE, 2, 3, "m2", 1)),
    ]


def _stats(**changes: Any) -> QueueStats:
    right = QueueStats(
        queue="queue", depth=0, in_flight=1, published=3, delivered=3, acked=2, redelivered=0, dead_lettered=0,
        expired=0, rejected=1,
        consumers=(ConsumerStats(1, "/client-0/consumer", 0, True, 2, 2, 0),
                   ConsumerStats(2, "/client-1/consumer", 0, True, 1, 0, 1)),
    )
    return attrs.evolve(right, **changes)


def _judge(stats: QueueStats, ttl: float | None = None) -> tuple[str, ...]:
    return queue_stats([*_history(ttl), _note(QueueStatsRead(QUEUE, stats))], QUEUE).violations


def test_counters_that_agree_with_the_history_pass() -> None:
    assert _judge(_stats()) == ()


def test_no_read_judges_nothing() -> None:
    result = queue_stats(_history(), QUEUE)
    assert result.ok
    assert dict(result.metrics)["read"] == 0


def test_counters_that_do_not_add_up_are_reported() -> None:
    assert any("acked=3" in line for line in _judge(_stats(acked=3)))


def test_published_and_rejected_must_match_the_publishers_answers() -> None:
    lines = _judge(_stats(published=4, depth=1, rejected=0))
    assert any("publisher saw 3 publishes confirmed" in line for line in lines)
    assert any("publisher saw 1 publishes refused" in line for line in lines)


def test_nothing_expires_that_had_no_ttl() -> None:
    assert any("expired=1" in line for line in _judge(_stats(expired=1, in_flight=0)))
    assert not any("with a TTL" in line for line in _judge(_stats(expired=1, in_flight=0), ttl=5.0))


def test_a_consumers_delivered_must_be_its_clients_receipts() -> None:
    consumers = (ConsumerStats(1, "/client-0/consumer", 0, True, 3, 2, 0),
                 ConsumerStats(2, "/client-1/consumer", 0, True, 1, 0, 1))
    assert any("consumer 1" in line for line in _judge(_stats(consumers=consumers, delivered=4)))
    fewer = (ConsumerStats(1, "/client-0/consumer", 0, True, 1, 1, 0),)
    assert any("consumer 1" in line for line in _judge(_stats(consumers=fewer)))
