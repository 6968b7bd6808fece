"""Planted bugs in what a Seek replays, what a Pull takes and when an idle stream ends (issue 17, item 6).

Each is the real subscription (or a binding it spawns) with one rule broken, plugged into
``pubsub-front`` through ``Variant(subscription=...)``; ``seek_replay``, ``pull_fill`` and
``idle_stream`` (``simulation/checkers/_pubsub_delivery.py``) and ``contained_failures`` find them.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import attrs

from conveyor.actors.broker import ConsumerSettings
from conveyor.actors.pubsub import Binding, PullMessages, Settle, SettleKind, SubscriptionActor
from conveyor.runtime import ActorRef

from .pubsub_promises import BrokenBindings


class AckedStayInLog(SubscriptionActor):  # type: ignore[misc]  # SubscriptionActor is final: a planted bug may subclass
    """Broken: an ack leaves its message in the Seek log, so a Seek back replays what was acked and not retained."""

    def _settle(self, request: Settle, reply_to: ActorRef | None) -> None:
        log = OrderedDict(self.log)
        super()._settle(request, reply_to)
        self.log = log


class SeekKeepsAcked(SubscriptionActor):  # type: ignore[misc]  # likewise
    """Broken: with retained acked messages, a Seek back does not mark the acked ones after its time unacked."""

    def _seek(self, time_ns: int, now_ns: int) -> None:
        self._acked_before = dict(self.acked)
        super()._seek(time_ns, now_ns)

    def _rebuild(self) -> None:
        self.acked.update(getattr(self, "_acked_before", {}))
        super()._rebuild()


class BrittleNacks(SubscriptionActor):  # type: ignore[misc]  # likewise
    """Broken: a nack (ModifyAckDeadline 0) makes the subscription's handler raise; contained, answered INTERNAL."""

    def _settle(self, request: Settle, reply_to: ActorRef | None) -> None:
        if request.kind is SettleKind.MODACK and request.seconds == 0:
            msg = "nack not handled"
            raise ValueError(msg)
        super()._settle(request, reply_to)


class ShortPulls(SubscriptionActor):  # type: ignore[misc]  # likewise
    """Broken: a Pull's batch stops one byte short of its ``max_bytes``, so a batch that fits exactly loses its last."""

    def _bind(
        self, settings: ConsumerSettings, deadline: int, pull: PullMessages | None, reply_to: ActorRef | None
    ) -> ActorRef:
        if pull is not None:
            pull = attrs.evolve(pull, max_bytes=pull.max_bytes - 1)
        return super()._bind(settings, deadline, pull, reply_to)


class _DeathlessBinding(Binding):  # type: ignore[misc]  # Binding is final: likewise
    """A binding that never notices its stream's client went quiet."""

    def receive(self, message: Any) -> None:
        if type(message).__name__ != "_IdleOver":
            super().receive(message)


class ImmortalIdleStreams(BrokenBindings):  # type: ignore[misc]  # a final class's subclass: likewise
    """Broken: a stream whose client asks for nothing for an hour is never closed (its subscription never expires)."""

    binding = _DeathlessBinding
