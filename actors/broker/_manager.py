"""ConsumerManagerActor: whom to notify of work, per Qpid's QueueConsumerManager (seed 000).

A thin shell around ``ConsumerLists``: the queue tells it what changed, it tells
the chosen consumers ``NotifyWork``. One interested acquiring consumer of the
highest priority per piece of work (and every browser), so no consumer is woken in
vain; a consumer that found nothing goes to the back of Interested.

A notified consumer that stays silent (frozen by a GC pause, a starved thread, a
stopped container) would hold the work it was handed while others with credit
wait. So the shell keeps one timer while some hand-over is unanswered, armed at the
oldest one's deadline (``ConsumerLists.hand_over_deadline``); when it fires, the
lists pass the overdue work on (``hand_overs_due``) and the timer is armed again at
the oldest deadline still ahead, if any. It is never cancelled: answered hand-overs
cost nothing, and a busy queue's manager wakes about once per timeout. Cancelling it
whenever the last hand-over was answered kept quiet runs free of timer steps but cost
a ``schedule`` and a ``cancel`` per message under a steady trickle of publishes: 7%
of the simulator's speed and 3.5% of a TrioSystem queue's (measured).
"""

from __future__ import annotations

from typing import Any, final

import attrs

from conveyor.runtime import Actor, ActorRef
from conveyor.runtime.lowlevel import register_immutable_type

from ._client_protocol import GetStats
from ._consumer_lists import DEFAULT_HAND_OVER_TIMEOUT_S, ConsumerLists, check_hand_over_timeout
from ._manager_protocol import (
    AddConsumer,
    ConsumerExhausted,
    InterestChanged,
    NotifyWork,
    RemoveConsumer,
    WorkAvailable,
)


@final
@attrs.frozen
class _HandOverDue:
    """The manager's timer: the oldest unanswered hand-over may be overdue."""


register_immutable_type(_HandOverDue)  # no fields: each schedule() checks it with one set lookup
_HAND_OVER_DUE = _HandOverDue()


class ConsumerManagerActor(Actor):
    """Keeps the consumer lists of one queue and sends ``NotifyWork``.

    Args:
        queue: the queue whose consumers these are (named in ``NotifyWork``).
        hand_over_timeout_s: how long a notified consumer may stay silent before its work is
            passed on to the next interested one (``QueueConfig.hand_over_timeout_s``); None
            waits for it forever.

    Raises:
        ValueError: ``hand_over_timeout_s`` is neither None nor a finite number > 0.
    """

    def __init__(self, queue: ActorRef, hand_over_timeout_s: float | None = DEFAULT_HAND_OVER_TIMEOUT_S) -> None:
        self.queue = queue
        self.hand_over_timeout_s = check_hand_over_timeout("ConsumerManagerActor", hand_over_timeout_s)
        self.lists = self.make_lists()
        self.refs: dict[int, ActorRef] = {}
        self.notify = NotifyWork(queue)
        self.timer_armed = False
        """Whether the hand-over timer is armed (at the oldest unanswered deadline when it was armed)."""

    def make_lists(self) -> ConsumerLists:
        """The sans-IO core; a subclass may supply a variant (the simulation's planted bugs do)."""
        return ConsumerLists(self.hand_over_timeout_s)

    def receive(self, message: Any) -> None:
        """Apply one change from the queue and notify whoever it selects."""
        lists = self.lists
        cls = type(message)
        # The three per-delivery notices first, by exact type (the classes are final): a ``match``
        # tries its class patterns one isinstance at a time.
        if cls is WorkAvailable:
            now = self.ctx.now()
            woken = lists.work_available(now)
            if woken:
                self._notify(woken)
            return
        if cls is ConsumerExhausted:
            consumer_id = message.consumer_id
            if consumer_id in lists:
                if message.more_work:  # the work may go on to another consumer, whose hand-over is timed
                    now = self.ctx.now()
                    self._notify(lists.exhausted(consumer_id, more_work=True, now=now))
                else:
                    lists.exhausted(consumer_id, more_work=False)  # notifies nobody: no clock needed
            return
        if cls is InterestChanged:
            consumer_id = message.consumer_id
            if consumer_id in lists:
                lists.set_interest(consumer_id, message.interested)
            return
        match message:
            case _HandOverDue():
                self.timer_armed = False
                self._notify(lists.hand_overs_due(self.ctx.now()))  # arms for the hand-overs it starts
                if not self.timer_armed:
                    self._arm()  # for the hand-overs not yet due
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
        """Tell each consumer of work, and make sure a timer watches the hand-overs this began."""
        ctx = self.ctx
        refs = self.refs
        notify = self.notify
        for consumer_id in consumer_ids:
            ctx.send(refs[consumer_id], notify)
        if consumer_ids and not self.timer_armed:
            self._arm()

    def _arm(self) -> None:
        """Arm the timer at the oldest unanswered hand-over's deadline, if there is one."""
        deadline = self.lists.hand_over_deadline()
        if deadline is not None:
            ctx = self.ctx
            ctx.schedule(max(0.0, deadline - ctx.now()), _HAND_OVER_DUE)
            self.timer_armed = True
