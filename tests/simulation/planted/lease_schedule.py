"""Planted bugs in when the leaser passes over its leases (``lease_schedule``): too late after a receipt, too often.

Each is the real ``Leaser`` with one rule of its schedule broken, plugged in through ``manager_with``
as ``subscriber.py`` does.
"""

from __future__ import annotations

from typing import Any

from conveyor.actors.subscriber import Leaser
from conveyor.actors.subscriber._leases import _lead
from conveyor.actors.subscriber._protocol import Received, ReceivedBatch, Scheduled

from .subscriber import manager_with


class TrustingLeaser(Leaser):  # type: ignore[misc]  # Leaser is final: a planted bug may subclass
    """Broken: trusts a receipt's extension, so a fresh lease waits ``lead(extension)`` for its next pass,
    not ``lead(min_duration_per_lease_extension_s)`` (the histogram's floor of 10 s against a minimum
    of 2 s: 8 s, not 0.8 s).
    """

    def receive(self, message: Any) -> None:
        if type(message) is not Received and type(message) is not ReceivedBatch:
            super().receive(message)
            return
        timer_at = self.timer_at
        super().receive(message)
        if self.timer_at == timer_at or self.timer is None:
            return  # the receipt did not bring the pass forward
        now = self.ctx.now()
        trusted = now + _lead(self.table.deadline_for(self.histogram))
        later = trusted if timer_at is None else min(timer_at, trusted)
        self.ctx.cancel(self.timer)
        self.timer = self.timer_at = None
        self._arm(later)


class RestlessLeaser(Leaser):  # type: ignore[misc]  # Leaser is final: a planted bug may subclass
    """Broken: passes over every lease as soon as a keyed message's callback is scheduled (one modack per lease
    each time, though no lease is near its deadline)."""

    def receive(self, message: Any) -> None:
        super().receive(message)
        if type(message) is Scheduled:
            self._arm(self.ctx.now())


Trusting = manager_with(leaser=TrustingLeaser)
Restless = manager_with(leaser=RestlessLeaser)
