"""Planted bugs in the subscriber: variants of its manager and of the components it spawns.

Each is plugged into a registry scenario through ``Variant(manager=...)``. Components are
swapped with ``StreamingPullManager.make_part`` (the manager spawns every part through it),
so no hook had to be added for them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from conveyor.actors.broker import Delivery
from conveyor.actors.subscriber import FlowControl, FlowNote, Leaser, LoadController, StreamingPullManager
from conveyor.actors.subscriber._flow import FlowDecision, LoadTracker
from conveyor.actors.subscriber._leases import _lead
from conveyor.actors.subscriber._ledger import AckLedger, Arrival
from conveyor.actors.subscriber._protocol import CallbackEnded, Done, Received, ack_id_of
from conveyor.actors.subscriber._protocol import Settlement as Settle
from conveyor.actors.subscriber._protocol import SettlementKind as SettleKind
from conveyor.runtime import Actor, ActorRef

ManagerFactory = Callable[..., StreamingPullManager]


def manager_with(**parts: Callable[..., Actor]) -> ManagerFactory:
    """A subscription whose named parts (``load``, ``leaser``, ``keys``, ``workers``...) are variants."""

    class PlantedManager(StreamingPullManager):
        def make_part(self, name: str, factory: Callable[..., Actor], *args: Any) -> ActorRef:
            return super().make_part(name, parts.get(name, factory), *args)

    PlantedManager.__qualname__ = PlantedManager.__name__ = "ManagerWith" + "".join(
        factory.__name__ for factory in parts.values()
    )
    return PlantedManager


class AckReleasesKey(StreamingPullManager):
    """Broken: an ordering key's next message is released when this one is acked, not when its callback ends.

    The ack comes from inside the callback, so the key's next callback may start while this
    one still runs (given a free worker).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.key_of: dict[str, str] = {}
        self.released_early: set[str] = set()
        self.ended: set[str] = set()  # callbacks whose end came before their ack

    def receive(self, message: Any) -> None:
        if type(message) is Delivery and message.message.group:
            self.key_of[ack_id_of(message)] = message.message.group
        elif type(message) is Settle and message.kind is SettleKind.ACK and message.ack_id in self.pending:
            key = self.key_of.get(message.ack_id)
            if key is not None and message.ack_id not in self.released_early | self.ended:
                self.released_early.add(message.ack_id)
                self.ctx.send(self.parts["keys"], CallbackEnded(message.ack_id, key, None, False))
        elif type(message) is CallbackEnded:
            if message.ack_id in self.released_early:
                self.released_early.discard(message.ack_id)
                return  # released already
            self.ended.add(message.ack_id)
        super().receive(message)


class HoldBlindLoad(LoadController):  # type: ignore[misc]  # LoadController is final: a planted bug may subclass
    """Broken: keyed messages, which may wait on hold behind their key, are left out of the load.

    The seed's client counted only messages handed to its scheduler; held ones slipped past
    flow control, so a subscription could hold far more than ``max_messages``.
    """

    def receive(self, message: Any) -> None:
        if (type(message) is Received and message.key) or (
            type(message) is Done and message.ack_id not in self.tracker
        ):
            if self.ctx.tracing:  # it still reports its (wrong) load after every change
                tracker = self.tracker
                self.ctx.note(FlowNote(tracker.count, tracker.bytes, tracker.paused))
            return
        super().receive(message)


class LateLeaser(Leaser):  # type: ignore[misc]  # Leaser is final: a planted bug may subclass
    """Broken: checks its leases half a second after they run out, instead of before.

    ``LeaseTable`` schedules the next check at ``0.9 * e - 1`` seconds after an extension of
    ``e`` seconds; this leaser adds the margin back and half a second more, so every
    extension after the first reaches the queue after the lease it extends has lapsed.
    """

    def _arm(self, when: float) -> None:
        extension = self.table.deadline_for(self.histogram)
        super()._arm(when + (extension - _lead(extension)) + 0.5)


class SwallowsFailures(StreamingPullManager):
    """Broken: a callback that raised is acked instead of nacked (its failure is swallowed)."""

    def _settle(self, message: Settle) -> None:
        super()._settle(_acked_if_failed(message))

    def _settle_all(self, settles: tuple[Settle, ...]) -> None:
        super()._settle_all(tuple(_acked_if_failed(settle) for settle in settles))


def _acked_if_failed(settle: Settle) -> Settle:
    if settle.kind is SettleKind.NACK and settle.error is not None:
        return Settle(SettleKind.ACK, settle.ack_id)
    return settle


class _NoResume:
    """A ``LoadTracker`` that pauses but never says resume."""

    def __init__(self, tracker: LoadTracker) -> None:
        self._tracker = tracker

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tracker, name)

    def update(self) -> FlowDecision | None:
        decision = self._tracker.update()
        return None if decision is FlowDecision.RESUME else decision


class NeverResumes(LoadController):  # type: ignore[misc]  # LoadController is final: a planted bug may subclass
    """Broken: flow control pauses the stream at load >= 1 and never resumes it."""

    def __init__(self, consumer: ActorRef, flow: FlowControl) -> None:
        super().__init__(consumer, flow)
        self.tracker = _NoResume(self.tracker)  # type: ignore[assignment]


class _RunsRefused:
    """An ``AckLedger`` that forgets a refused ack when its message comes back: the message is run again."""

    def __init__(self, ledger: AckLedger) -> None:
        self._ledger = ledger

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ledger, name)

    def __len__(self) -> int:
        return len(self._ledger)

    def delivered(self, ack_id: str, delivery: Delivery) -> Arrival:
        arrival = self._ledger.delivered(ack_id, delivery)
        if arrival is Arrival.ACK_AGAIN:
            del self._ledger._acking[ack_id]
            self._ledger._pending[ack_id] = delivery.delivery_count
            return Arrival.NEW
        return arrival


class RunsRefusedAgain(StreamingPullManager):
    """Broken: a message whose ack the queue refused (its lease had lapsed) is run again when it comes back."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ledger = _RunsRefused(self.ledger)  # type: ignore[assignment]
