"""A planted bug in how a lease ends (``not_before``): ``ModifyAckDeadline(0)``, Pub/Sub's nack, taken as a lapse.

``ZeroDeadlineAsLapse``: the queue ends the lease at once, as an extension to now would, so the
message comes back when its lease lapses, without the backoff a nack waits out. ``broker-swarm``
draws clients that answer with ``ModifyAckDeadline(0)`` and a retry policy.
"""

from __future__ import annotations

from conveyor.actors.broker import ModifyAckDeadline, QueueActor


class ZeroDeadlineAsLapse(QueueActor):
    """Broken: ``ModifyAckDeadline(0)`` ends the lease as a lapse does, without the nack's backoff."""

    def _handle(self, message: object) -> None:
        if type(message) is ModifyAckDeadline and message.seconds == 0:
            self.entries.extend(message.consumer_id, message.tags, self.ctx.now())
            self._arm_wake()
            return
        super()._handle(message)
