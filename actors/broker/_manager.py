"""ConsumerManagerActor: whom to notify of work, per Qpid's QueueConsumerManager (seed 000).

A thin shell around ``ConsumerLists``: the queue tells it what changed, it tells
the chosen consumers ``NotifyWork``. One interested acquiring consumer of the
highest priority per piece of work (and every browser), so no consumer is woken in
vain; a consumer that found nothing goes to the back of Interested.
"""

from __future__ import annotations

from typing import Any

from conveyor.runtime import Actor, ActorRef

from ._consumer_lists import ConsumerLists
from ._model import (
    AddConsumer,
    ConsumerExhausted,
    GetStats,
    InterestChanged,
    NotifyWork,
    RemoveConsumer,
    WorkAvailable,
)


class ConsumerManagerActor(Actor):
    """Keeps the consumer lists of one queue and sends ``NotifyWork``."""

    def __init__(self, queue: ActorRef) -> None:
        self.queue = queue
        self.lists = self.make_lists()
        self.refs: dict[int, ActorRef] = {}
        self.notify = NotifyWork(queue)

    def make_lists(self) -> ConsumerLists:
        """The sans-IO core; a subclass may supply a variant (the simulation's planted bugs do)."""
        return ConsumerLists()

    def receive(self, message: Any) -> None:
        """Apply one change from the queue and notify whoever it selects."""
        lists = self.lists
        cls = type(message)
        # The three per-delivery notices first, by exact type (the classes are final): a ``match``
        # tries its class patterns one isinstance at a time.
        if cls is WorkAvailable:
            self._notify(lists.work_available())
            return
        if cls is ConsumerExhausted:
            consumer_id = message.consumer_id
            if consumer_id in lists:
                self._notify(lists.exhausted(consumer_id, more_work=message.more_work))
            return
        if cls is InterestChanged:
            consumer_id = message.consumer_id
            if consumer_id in lists:
                lists.set_interest(consumer_id, message.interested)
            return
        match message:
            case AddConsumer(consumer_id=consumer_id, consumer=ref, priority=priority, acquiring=acquiring,
                             interested=interested):
                lists.add(consumer_id, priority=priority, acquiring=acquiring, interested=interested)
                self.refs[consumer_id] = ref
            case RemoveConsumer(consumer_id=consumer_id):
                if consumer_id in lists:
                    lists.remove(consumer_id)
                self.refs.pop(consumer_id, None)
            case GetStats():
                self.ctx.reply(lists.stats())

    def _notify(self, consumer_ids: tuple[int, ...]) -> None:
        for consumer_id in consumer_ids:
            self.ctx.send(self.refs[consumer_id], self.notify)
