"""Planted bugs in the broker's request-level promises (issue 17, item 1): stale nacks, confirmed acks,
immediate publishes, size limits, batches and ``Reconfigure``.

Each is the real queue (or its entry list) with one rule broken, plugged into ``broker-swarm``
through ``Variant(queue=...)``; the checkers of ``simulation/checkers/_promises.py`` find them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from conveyor.actors.broker import AckResult, DeliveryError, EntryList, Message, QueueActor, QueueConfig, Subscribe
from conveyor.actors.broker._entries import Returned


class StaleNackApplied(EntryList):
    """Broken: a nack's ``attempts`` are ignored, so a stale nack returns the newer delivery it never named."""

    def give_back(
        self,
        consumer_id: int,
        tags: Iterable[int],
        now: float,
        delay_s: float,
        attempts: tuple[int, ...] = (),
        errors: tuple[DeliveryError | None, ...] = (),
    ) -> Returned:
        return super().give_back(consumer_id, tags, now, delay_s, (), errors)

    def give_back_with(
        self,
        consumer_id: int,
        tags: Iterable[int],
        now: float,
        delays: dict[int, float],
        attempts: tuple[int, ...] = (),
        errors: tuple[DeliveryError | None, ...] = (),
    ) -> Returned:
        return super().give_back_with(consumer_id, tags, now, delays, (), errors)


class ConfirmsEveryAck(QueueActor):
    """Broken: a confirmed ack is answered with every tag acked, also those whose lease had lapsed."""

    def _confirm(self, answer: object) -> None:
        if type(answer) is AckResult:
            answer = AckResult((*answer.acked, *answer.invalid), ())
        super()._confirm(answer)


class OversizeByOne(QueueActor):
    """Broken: ``max_message_bytes`` lets a message one byte over the limit in (``>`` where ``>=`` belongs)."""

    def __init__(self, config: QueueConfig) -> None:
        super().__init__(attrs.evolve(config, max_message_bytes=config.max_message_bytes + 1))

    def _reconfigure(self, config: QueueConfig) -> None:
        super()._reconfigure(attrs.evolve(config, max_message_bytes=config.max_message_bytes + 1))


class BatchSkipsSizeLimit(QueueActor):
    """Broken: the messages of a ``PublishBatch`` are not checked against ``max_message_bytes``."""

    def _publish(self, payload: Message, immediate: bool) -> object:  # type: ignore[override]
        if payload.size > self.config.max_message_bytes:
            return self._outcome(self._enqueue_entry(payload), payload)
        return super()._publish(payload, immediate)


class ReconfigureKeepsDeadline(QueueActor):
    """Broken: ``Reconfigure`` takes every new setting but the ack deadline, which stays as it was."""

    def _reconfigure(self, config: QueueConfig) -> None:
        super()._reconfigure(attrs.evolve(config, ack_deadline_s=self.config.ack_deadline_s))


class ConsumerLeaseIgnored(QueueActor):
    """Broken: a consumer's own lease (``ConsumerSettings.lease_s``) is dropped: it gets the queue's deadline."""

    def _register(self, consumer_id: int, request: Subscribe, interested: bool) -> Any:
        record = super()._register(consumer_id, request, interested)
        record.lease_s = None
        return record


class ReconfigureKeepsDeliveryLimit(QueueActor):
    """Broken: ``Reconfigure`` records the new delivery limit in the queue's config but the entries keep the old one."""

    def _use_config(self, config: QueueConfig) -> None:
        limit = self.entries.max_deliveries
        super()._use_config(config)
        self.entries.max_deliveries = limit


class ReconfigureKeepsRetry(QueueActor):
    """Broken: ``Reconfigure`` takes every new setting but the retry policy: nacks keep the old backoff."""

    def _reconfigure(self, config: QueueConfig) -> None:
        super()._reconfigure(attrs.evolve(config, retry=self.config.retry))


class ReconfigureKeepsDeadLetter(QueueActor):
    """Broken: ``Reconfigure`` takes every new setting but the dead-letter queue: dead letters go where they went."""

    def _reconfigure(self, config: QueueConfig) -> None:
        super()._reconfigure(attrs.evolve(config, dead_letter=self.config.dead_letter))


class ImmediateIgnored(QueueActor):
    """Broken: ``Publish(immediate=True)`` is enqueued like any publish, whether a consumer can take it now or not."""

    def _enqueue(self, payload: Message, immediate: bool) -> object:  # type: ignore[override]
        return super()._enqueue(payload, False)

