"""What the metrics read: queue counters and subscriber counts, taken from the actors by asking them.

The figures are the actors' own answers (``QueueStats``, ``SubscriptionStats``, ``FlowStats``),
asked from the metrics reader's thread, never read from an actor's state: the actors share
nothing, and a scrape costs each actor one message.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import final

import attrs

from conveyor.actors.broker import GetStats, QueueStats
from conveyor.actors.subscriber import FlowStats, GetFlowStats, GetSubscriptionStats, Subscription, SubscriptionStats
from conveyor.runtime import ActorDeadError, ActorRef, ActorSystemBase, AskTimeout


@final
@attrs.frozen
class SubscriberFigures:
    """One subscriber's counts at one instant: its manager's and its flow control's."""

    name: str
    stats: SubscriptionStats
    flow: FlowStats


@final
@attrs.frozen
class MetricsSnapshot:
    """Everything one collection reports: every queue's and every subscriber's figures."""

    queues: tuple[QueueStats, ...] = ()
    subscribers: tuple[SubscriberFigures, ...] = ()


def queue_stats_of(system: ActorSystemBase, queues: Iterable[ActorRef], timeout: float = 2.0) -> tuple[QueueStats, ...]:
    """Ask each broker queue for its ``QueueStats``, from a thread that is not the system's (a scrape's).

    A queue that stopped or does not answer within ``timeout`` is left out.
    """
    found: list[QueueStats] = []
    for ref in queues:
        try:
            answer = system.ask_from_thread(ref, GetStats(), timeout=timeout)
        except (AskTimeout, ActorDeadError):
            continue
        if isinstance(answer, QueueStats):
            found.append(answer)
    return tuple(found)


def subscriber_figures_of(
    subscriptions: Iterable[tuple[str, Subscription]], timeout: float = 2.0
) -> tuple[SubscriberFigures, ...]:
    """Ask each running subscription's manager for its counts and its flow control's, named as given.

    A subscription that stopped or does not answer within ``timeout`` is left out.
    """
    found: list[SubscriberFigures] = []
    for name, subscription in subscriptions:
        system, manager = subscription.system, subscription.manager
        try:
            stats = system.ask_from_thread(manager, GetSubscriptionStats(), timeout=timeout)
            flow = system.ask_from_thread(manager, GetFlowStats(), timeout=timeout)
        except (AskTimeout, ActorDeadError):
            continue
        if isinstance(stats, SubscriptionStats) and isinstance(flow, FlowStats):
            found.append(SubscriberFigures(name, stats, flow))
    return tuple(found)
