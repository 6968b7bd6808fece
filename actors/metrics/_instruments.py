"""``ConveyorMetrics``: queue and subscriber figures as OpenTelemetry observable instruments.

Every instrument is observable: its callback reads the latest ``MetricsSnapshot``, taken by
asking the actors at most once per ``max_age_s`` (one collection reads every instrument from the
same snapshot when it is quick), so metrics cost the actors nothing between collections.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, Literal, TypeVar, final

import attrs
from opentelemetry import metrics as otel
from opentelemetry.metrics import CallbackOptions, Observation

from conveyor.actors.broker import QueueStats

from ._figures import MetricsSnapshot, SubscriberFigures

Figure = TypeVar("Figure", QueueStats, SubscriberFigures)


@final
@attrs.frozen
class Instrument(Generic[Figure]):
    """One metric: its OpenTelemetry name, kind, description and how to read it from a figure."""

    name: str
    kind: Literal["counter", "gauge"]
    description: str
    read: Callable[[Figure], float]


def _queue(read: Callable[[QueueStats], float]) -> Callable[[QueueStats], float]:
    return read


def _subscriber(read: Callable[[SubscriberFigures], float]) -> Callable[[SubscriberFigures], float]:
    return read


QUEUE_INSTRUMENTS: tuple[Instrument[QueueStats], ...] = (
    Instrument("conveyor.queue.depth", "gauge", "Messages in the queue waiting for a consumer (not in flight).",
               _queue(lambda s: s.depth)),
    Instrument("conveyor.queue.in_flight", "gauge", "Messages delivered to a consumer and not yet acked or given back.",
               _queue(lambda s: s.in_flight)),
    Instrument("conveyor.queue.published", "counter", "Messages the queue accepted.",
               _queue(lambda s: s.published)),
    Instrument("conveyor.queue.deliveries", "counter", "Deliveries to consumers, redeliveries included.",
               _queue(lambda s: s.delivered)),
    Instrument("conveyor.queue.redeliveries", "counter", "Deliveries of a message delivered before.",
               _queue(lambda s: s.redelivered)),
    Instrument("conveyor.queue.acks", "counter", "Messages acked (settled for good by a consumer).",
               _queue(lambda s: s.acked)),
    Instrument("conveyor.queue.nacks", "counter",
               "Deliveries given back without an ack: nacked, released, lapsed, or held by a consumer that left.",
               _queue(lambda s: s.returned)),
    Instrument("conveyor.queue.dead_letters", "counter", "Messages moved to the dead-letter queue or dropped as dead.",
               _queue(lambda s: s.dead_lettered)),
    Instrument("conveyor.queue.expired", "counter", "Messages whose time to live ran out.",
               _queue(lambda s: s.expired)),
    Instrument("conveyor.queue.rejected", "counter", "Publishes the queue refused (full, too large, bad).",
               _queue(lambda s: s.rejected)),
)
"""One observation per queue each, with the attribute ``queue`` (a subscription's name on the Pub/Sub front)."""

SUBSCRIBER_INSTRUMENTS: tuple[Instrument[SubscriberFigures], ...] = (
    Instrument("conveyor.subscriber.outstanding", "gauge", "Messages received and not yet settled by the callback.",
               _subscriber(lambda f: f.stats.pending)),
    Instrument("conveyor.subscriber.lease_extensions", "counter",
               "Lease extensions sent for messages still in progress (one per message and extension).",
               _subscriber(lambda f: f.stats.lease_extensions)),
    Instrument("conveyor.subscriber.flow_control_pauses", "counter",
               "Times flow control paused the stream because outstanding messages or bytes reached their limit.",
               _subscriber(lambda f: f.flow.pauses)),
    Instrument("conveyor.subscriber.paused", "gauge", "1 while flow control holds the stream paused, else 0.",
               _subscriber(lambda f: 1 if f.flow.paused else 0)),
    Instrument("conveyor.subscriber.outstanding_bytes", "gauge", "Bytes of the messages received and not yet settled.",
               _subscriber(lambda f: f.flow.bytes)),
)
"""One observation per subscriber each, with the attribute ``subscription``."""


def observations(snapshot: MetricsSnapshot) -> Iterator[tuple[Instrument[Any], float, dict[str, str]]]:
    """Every (instrument, value, attributes) a snapshot gives, queues first, in the instruments' order."""
    for of_queue in QUEUE_INSTRUMENTS:
        for stats in snapshot.queues:
            yield of_queue, of_queue.read(stats), {"queue": stats.queue}
    for of_subscriber in SUBSCRIBER_INSTRUMENTS:
        for figures in snapshot.subscribers:
            yield of_subscriber, of_subscriber.read(figures), {"subscription": figures.name}


@final
class ConveyorMetrics:
    """Registers conveyor's instruments on a meter provider and feeds them from the actors.

    Args:
        queues: returns the queues' counters (``queue_stats_of``, ``PubSubServer.queue_stats``).
        subscribers: returns the subscribers' counts (``subscriber_figures_of``).
        meter_provider: where the instruments go; OpenTelemetry's global provider by default.
        max_age_s: a snapshot younger than this is reused by the next callback (one collection
            reads every instrument, so it asks the actors once); ``refresh()`` forces a new one.
        clock: seconds for ``max_age_s`` (monotonic; tests inject one).
    """

    def __init__(
        self,
        *,
        queues: Callable[[], Iterable[QueueStats]] | None = None,
        subscribers: Callable[[], Iterable[SubscriberFigures]] | None = None,
        meter_provider: otel.MeterProvider | None = None,
        max_age_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if queues is None and subscribers is None:
            msg = "ConveyorMetrics needs queues=, subscribers= or both: callables that return the figures"
            raise ValueError(msg)
        if isinstance(max_age_s, bool) or not isinstance(max_age_s, (int, float)) or not (
            math.isfinite(max_age_s) and max_age_s >= 0
        ):
            msg = f"ConveyorMetrics max_age_s must be a finite number of seconds >= 0, got {max_age_s!r}"
            raise ValueError(msg)
        self.queues = queues
        self.subscribers = subscribers
        self.max_age_s = float(max_age_s)
        self.clock = clock
        self._snapshot: tuple[float, MetricsSnapshot] | None = None
        meter = (meter_provider or otel.get_meter_provider()).get_meter("conveyor")
        callbacks: list[tuple[Instrument[Any], Callable[[CallbackOptions], Iterable[Observation]]]] = []
        if queues is not None:
            callbacks += [(i, self._observe_queues(i)) for i in QUEUE_INSTRUMENTS]
        if subscribers is not None:
            callbacks += [(i, self._observe_subscribers(i)) for i in SUBSCRIBER_INSTRUMENTS]
        for instrument, callback in callbacks:
            create = meter.create_observable_counter if instrument.kind == "counter" else meter.create_observable_gauge
            create(instrument.name, callbacks=[callback], unit="{message}", description=instrument.description)

    def refresh(self) -> MetricsSnapshot:
        """Ask the actors now; the instruments report this snapshot until it is ``max_age_s`` old."""
        snapshot = MetricsSnapshot(
            queues=tuple(self.queues()) if self.queues is not None else (),
            subscribers=tuple(self.subscribers()) if self.subscribers is not None else (),
        )
        self._snapshot = (self.clock(), snapshot)
        return snapshot

    def latest(self) -> MetricsSnapshot:
        """The snapshot the instruments report: the last one if young enough, else a new one."""
        kept = self._snapshot
        if kept is not None and self.clock() - kept[0] <= self.max_age_s:
            return kept[1]
        return self.refresh()

    def _observe_queues(
        self, instrument: Instrument[QueueStats]
    ) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(instrument.read(s), {"queue": s.queue}) for s in self.latest().queues]

        return observe

    def _observe_subscribers(
        self, instrument: Instrument[SubscriberFigures]
    ) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(instrument.read(f), {"subscription": f.name}) for f in self.latest().subscribers]

        return observe
