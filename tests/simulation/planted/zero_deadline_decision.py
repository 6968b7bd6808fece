"""A planted bug in what the user's callback holds (issue 17, item 1): the old ``modify_ack_deadline(0)``, which
told the queue but was no decision of the message's.

The promise: a zero deadline is the callback's nack, its first decision; a drop or ack after it
changes nothing, and its key is held as for any nack. Plugged in through ``Variant(manager=...)``:
the manager hands its callback messages of the old kind.
"""

from __future__ import annotations

from collections.abc import Callable

from conveyor.actors.subscriber import StreamingPullManager, SubscriberMessage
from conveyor.actors.subscriber._protocol import Settlement, SettlementKind


class UndecidedZeroDeadline(SubscriberMessage):  # type: ignore[misc]  # a planted bug may break a final class
    """Broken, as before the fix: a zero deadline goes out as a deadline change of 0 s, and the message stays undecided.

    So a drop or an ack after it goes out as a second settlement, and the callback's end says
    "not nacked": the key handler releases the key's next message before this one comes back.
    """

    __slots__ = ()  # the same layout as SubscriberMessage, so a message's class can be swapped for this one

    def modify_ack_deadline(self, seconds: float) -> None:
        """Send a zero deadline as a plain deadline change (no decision); any other as the real message does."""
        if seconds == 0:
            self._settle(Settlement(SettlementKind.MODACK, self.ack_id, 0.0))
            return
        super().modify_ack_deadline(seconds)


def _with_undecided_zero_deadlines(callback: Callable[[SubscriberMessage], object]) -> Callable[
    [SubscriberMessage], object
]:
    """The callback, given each message as an ``UndecidedZeroDeadline``."""

    def run(message: SubscriberMessage) -> object:
        message.__class__ = UndecidedZeroDeadline
        return callback(message)

    return run


class ZeroDeadlineUndecided(StreamingPullManager):
    """A subscription whose callback's messages take a zero deadline for no decision (``UndecidedZeroDeadline``)."""

    def on_start(self) -> None:
        """Wrap the callback, then start as the real manager does."""
        self.callback = _with_undecided_zero_deadlines(self.callback)
        super().on_start()
